//! The `stampede` binary: parse, set up logging and the runtime, run the command, map it to an exit code.
use std::io::IsTerminal;
use std::process::ExitCode;

use coordinator::cli::Command;

fn main() -> ExitCode {
    let cli = match coordinator::cli::parse_from(std::env::args_os()) {
        Ok(cli) => cli,
        Err(e) if shared::usage::is_display(&e) => e.exit(),
        Err(e) => {
            eprintln!(
                "stampede: {}",
                shared::usage::one_line(&e, coordinator::cli::habit_hint)
            );
            return ExitCode::from(2);
        }
    };
    tracing_subscriber::fmt()
        // Colour codes only for a person at a terminal, not in a log file or a pipe.
        .with_ansi(std::io::stderr().is_terminal())
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("STAMPEDE_LOG")
                .unwrap_or_else(|_| "warn".into()),
        )
        // Off the run's tasks: a blocked stderr (a terminal paused with Ctrl-S) must not stall them.
        .with_writer(coordinator::progress::LogLine::default)
        .init();
    control::install_crypto_provider();
    let mut rt = tokio::runtime::Builder::new_multi_thread();
    if let Command::Serve(s) = &cli.command
        && let Some(n) = s.threads
    {
        rt.worker_threads(n.max(1));
    }
    let rt = match rt.enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("stampede: cannot start the runtime: {e}");
            return ExitCode::from(1);
        }
    };
    let code = rt.block_on(async {
        let stop = coordinator::run::Stop::default();
        let on_signal = stop.clone();
        let runs = matches!(
            cli.command,
            Command::Run(_) | Command::Demo(_) | Command::FindMax(_)
        );
        tokio::spawn(async move {
            let Some(mut signals) = Signals::install() else {
                return;
            };
            signals.next().await;
            // A run says itself how long it waits for the requests in flight.
            if !runs {
                eprintln!("stampede: interrupted; stopping");
            }
            on_signal.drain.cancel();
            signals.next().await;
            eprintln!("stampede: interrupted again; stopping at once");
            on_signal.now.cancel();
        });
        coordinator::execute(cli.command, stop).await
    });
    // Worker threads still draining must not hold the exit up (the second Ctrl-C means now).
    rt.shutdown_background();
    // The log lines and progress still queued for stderr.
    coordinator::progress::flush();
    ExitCode::from(code)
}

/// SIGINT and SIGTERM, caught from installation on: one that comes between two waits is kept.
struct Signals {
    int: tokio::signal::unix::Signal,
    term: tokio::signal::unix::Signal,
}

impl Signals {
    fn install() -> Option<Signals> {
        use tokio::signal::unix::{SignalKind, signal};
        Some(Signals {
            int: signal(SignalKind::interrupt()).ok()?,
            term: signal(SignalKind::terminate()).ok()?,
        })
    }

    async fn next(&mut self) {
        tokio::select! {
            _ = self.int.recv() => {}
            _ = self.term.recv() => {}
        }
    }
}
