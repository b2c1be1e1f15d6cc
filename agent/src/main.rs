//! The `stampede-agent` binary: parse, set up logging and the runtime, serve coordinators until a signal.
use std::io::IsTerminal;
use std::net::SocketAddr;
use std::process::ExitCode;

use clap::Parser;
use tokio_util::sync::CancellationToken;

/// A stampede load agent: a coordinator connects, sends a plan step by step, and receives 1 s reports.
/// With --monitor, a read-only monitor of the server instead: it sends what it watches every second.
#[derive(Debug, Parser)]
#[command(name = "stampede-agent", version)]
struct Args {
    /// Address to listen on for a coordinator [default: 127.0.0.1:7700] (a monitor listens only when
    /// given this). Beyond loopback a token and mutual TLS are required.
    #[arg(long, conflicts_with = "join")]
    listen: Option<SocketAddr>,
    /// Dial the coordinator at HOST:PORT instead of listening (works behind NAT; it runs
    /// `stampede run --listen ADDR --expect-agents N`).
    #[arg(long, value_name = "HOST:PORT")]
    join: Option<String>,
    /// File holding the bearer token coordinators must present (or set STAMPEDE_TOKEN).
    #[arg(long)]
    token_file: Option<std::path::PathBuf>,
    /// Targets this agent may load: CIDRs, addresses or host patterns (*.example.com), checked on the
    /// resolved address (repeatable or comma-separated). Without it, any target.
    #[arg(long, value_delimiter = ',')]
    allow_target: Vec<String>,
    /// Most requests per second this agent will send.
    #[arg(long)]
    max_rate: Option<f64>,
    /// Most connections this agent will hold (concurrency and requests models).
    #[arg(long)]
    max_connections: Option<u32>,
    /// Longest step this agent will run, e.g. 5m.
    #[arg(long, allow_hyphen_values = true)]
    max_step_duration: Option<humantime::Duration>,
    /// Longest run (sum of its steps) this agent will run per coordinator session, e.g. 1h.
    #[arg(long, allow_hyphen_values = true)]
    max_run_duration: Option<humantime::Duration>,
    /// This agent's certificate for mutual TLS on the control channel (from `stampede certs init`).
    #[arg(long)]
    tls_cert: Option<std::path::PathBuf>,
    /// Its private key.
    #[arg(long)]
    tls_key: Option<std::path::PathBuf>,
    /// The fleet's CA certificate: peers must present a certificate it signed.
    #[arg(long)]
    tls_ca: Option<std::path::PathBuf>,
    /// Once the port is bound, write one line of JSON, {"listen":"127.0.0.1:PORT","pid":N}, to this
    /// file (atomically: a temporary file renamed over it): a ready signal for scripts.
    #[arg(long, value_name = "PATH", conflicts_with = "join")]
    ready_file: Option<std::path::PathBuf>,
    /// Worker threads [default: one per core].
    #[arg(long)]
    threads: Option<usize>,
    /// Be a read-only monitor of the server on this host, not a load agent: it refuses every load
    /// command and sends the watched processes' and the host's CPU, memory and TCP counters every
    /// second. What it watches is fixed here: --pid, --process, --cgroup or --container.
    #[arg(long, help_heading = "Monitor")]
    monitor: bool,
    /// The monitor's name, the suffix of its columns in steps.tsv [default: the hostname].
    #[arg(long, value_name = "LABEL", help_heading = "Monitor")]
    name: Option<String>,
    /// Watch this process, its threads and its children.
    #[arg(long, value_name = "N", group = "watch", help_heading = "Monitor")]
    pid: Option<u32>,
    /// Watch every process of this name (as `ps -e -o comm` shows it): nginx's master and workers.
    #[arg(long, value_name = "NAME", group = "watch", help_heading = "Monitor")]
    process: Option<String>,
    /// Watch a cgroup v2 directory (/sys/fs/cgroup/…): its CPU, throttling, memory and OOM kills.
    #[arg(long, value_name = "PATH", group = "watch", help_heading = "Monitor")]
    cgroup: Option<std::path::PathBuf>,
    /// Watch a container by its id (or a unique prefix): its cgroup v2.
    #[arg(long, value_name = "ID", group = "watch", help_heading = "Monitor")]
    container: Option<String>,
    /// Exit after the first coordinator's run: 0 when its session ended well, 1 when it ended in
    /// error (for agents run as Jobs, e.g. on Kubernetes, which complete on exit 0).
    #[arg(long)]
    exit_after_run: bool,
}

/// Where a load agent listens when told nothing.
const DEFAULT_LISTEN: SocketAddr = SocketAddr::V4(std::net::SocketAddrV4::new(
    std::net::Ipv4Addr::LOCALHOST,
    7700,
));

fn main() -> ExitCode {
    // The same front door as `stampede`: clap's help as it is, its errors in one line, exit 2.
    let args = match Args::try_parse() {
        Ok(a) => a,
        Err(e) if shared::usage::is_display(&e) => e.exit(),
        Err(e) => {
            eprintln!("stampede-agent: {}", shared::usage::one_line(&e, |_| None));
            return ExitCode::from(2);
        }
    };
    tracing_subscriber::fmt()
        // Colour codes only for a person at a terminal, not in a log file or a pipe.
        .with_ansi(std::io::stderr().is_terminal())
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("STAMPEDE_LOG")
                .unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    control::install_crypto_provider();
    let join = args.join.clone();
    let config = match config(args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("stampede-agent: {e}");
            return ExitCode::from(2);
        }
    };
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("stampede-agent: cannot start the runtime: {e}");
            return ExitCode::from(1);
        }
    };
    let result = rt.block_on(async {
        let shutdown = CancellationToken::new();
        tokio::spawn(cancel_on_signal(shutdown.clone()));
        match join {
            Some(coordinator) => agent::daemon::join(coordinator, config, shutdown).await,
            None => agent::daemon::run(config, shutdown).await,
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("stampede-agent: {e}");
            ExitCode::from(match e {
                agent::daemon::DaemonError::NotLoopback(..)
                | agent::daemon::DaemonError::PlainText(_)
                | agent::daemon::DaemonError::Tls(_) => 2,
                _ => 1,
            })
        }
    }
}

/// SIGINT or SIGTERM drains: the running step stops sending and its final interval is still sent.
async fn cancel_on_signal(shutdown: CancellationToken) {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).ok();
    let terminated = async {
        match term.as_mut() {
            Some(t) => {
                t.recv().await;
            }
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = terminated => {}
    }
    shutdown.cancel();
}

/// The flags as the daemon's configuration; an error is the user's to fix (exit 2).
fn config(args: Args) -> Result<agent::daemon::DaemonConfig, String> {
    let token = match &args.token_file {
        Some(path) => match std::fs::read_to_string(path) {
            Ok(t) if !t.trim().is_empty() => Some(t.trim().to_string()),
            Ok(_) => return Err(format!("token file {} is empty", path.display())),
            Err(e) => return Err(format!("cannot read token file {}: {e}", path.display())),
        },
        None => std::env::var("STAMPEDE_TOKEN")
            .ok()
            .map(|t| t.trim().to_string())
            .filter(|t| !t.is_empty()),
    };
    let allow = args
        .allow_target
        .iter()
        .map(|a| control::policy::Allow::parse(a))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())?;
    let monitor = monitor(&args)?;
    if let Some(r) = args.max_rate.filter(|r| !(r.is_finite() && *r > 0.0)) {
        return Err(format!("--max-rate must be a positive number, got {r}"));
    }
    let policy = control::policy::Policy {
        allow,
        max_rate: args.max_rate,
        max_connections: args.max_connections,
        max_step_duration: args.max_step_duration.map(Into::into),
        max_run_duration: args.max_run_duration.map(Into::into),
    };
    let tls = control::mtls::TlsFiles::from_flags(args.tls_cert, args.tls_key, args.tls_ca)
        .map_err(|e| e.to_string())?;
    Ok(agent::daemon::DaemonConfig {
        listen: args.listen.unwrap_or(DEFAULT_LISTEN),
        threads: args.threads.unwrap_or_else(control::system::cores).max(1),
        token,
        policy,
        tls,
        ready_file: args.ready_file,
        monitor,
        exit_after_run: args.exit_after_run,
    })
}

/// `--monitor`'s flags as the monitor, its watch opened once now so a bad one is said at start; a
/// load agent's flags beside it, or a watch without it, are refused in one line.
fn monitor(args: &Args) -> Result<Option<monitor::session::Monitor>, String> {
    use monitor::Watch;
    let watch = match (&args.pid, &args.process, &args.cgroup, &args.container) {
        (Some(0), ..) => return Err("--pid 0 is not a process: give a running process's id".into()),
        (Some(pid), ..) => Some(Watch::Pid(*pid)),
        (_, Some(name), ..) => Some(Watch::Process(name.clone())),
        (_, _, Some(path), _) => Some(Watch::Cgroup(path.clone())),
        (.., Some(id)) => Some(Watch::Container(id.clone())),
        _ => None,
    };
    if !args.monitor {
        return match (&watch, &args.name) {
            (Some(w), _) => Err(format!(
                "--{} says what a monitor watches: add --monitor",
                w.to_string().split(' ').next().unwrap_or_default()
            )),
            (None, Some(_)) => Err("--name names a monitor: add --monitor".into()),
            (None, None) => Ok(None),
        };
    }
    let load_flags: Vec<&str> = [
        ("--allow-target", !args.allow_target.is_empty()),
        ("--max-rate", args.max_rate.is_some()),
        ("--max-connections", args.max_connections.is_some()),
        ("--max-step-duration", args.max_step_duration.is_some()),
        ("--max-run-duration", args.max_run_duration.is_some()),
        ("--threads", args.threads.is_some()),
    ]
    .into_iter()
    .filter_map(|(flag, given)| given.then_some(flag))
    .collect();
    if !load_flags.is_empty() {
        return Err(format!(
            "{} {} for a load agent; a monitor (--monitor) runs no load: drop {}",
            load_flags.join(", "),
            if load_flags.len() == 1 { "is" } else { "are" },
            if load_flags.len() == 1 { "it" } else { "them" },
        ));
    }
    if args.join.is_none() && args.listen.is_none() {
        // The server's host gets no new listening port unless asked for one.
        return Err(
            "a monitor joins its coordinator: add --join HOST:PORT (the coordinator runs \
                    `stampede run --listen ADDR --expect-monitors N`), or --listen ADDR"
                .into(),
        );
    }
    let Some(watch) = watch else {
        return Err(
            "--monitor needs what to watch: --pid N, --process NAME, --cgroup PATH or --container ID"
                .into(),
        );
    };
    if args.name.as_deref().is_some_and(|n| n.trim().is_empty()) {
        return Err("--name is empty: give the monitor a label, or leave --name out".into());
    }
    let sensor = monitor::sensor::Sensor::open(&watch).map_err(|e| format!("--monitor: {e}"))?;
    for warning in sensor.warnings() {
        eprintln!("stampede-agent: {warning}");
    }
    Ok(Some(monitor::session::Monitor {
        name: args.name.clone(),
        open: monitor::session::opener(watch),
    }))
}
