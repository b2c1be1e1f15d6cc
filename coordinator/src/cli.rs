//! The command line as clap parses it: raw, unvalidated. `config` turns it into a valid plan.
use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "stampede",
    version,
    about = "Distributed HTTP load testing: ramp load in steps, merge every agent's histograms, and say when a result cannot be trusted",
    after_help = "Exit codes: 0 every step ran (or --stop-on ended the ramp), 1 the run failed or was aborted, 2 usage or configuration error, 3 a --fail-on expression was breached."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a ramp against a target (a URL, a plan file, or both; flags override the file).
    Run(Box<RunArgs>),
    /// Serve the reference target: a fixed body, an optional delay and capacity, its own request counter.
    Serve(ServeArgs),
    /// Start the reference target and an embedded agent, run a short ramp past its knee, write the results.
    Demo(DemoArgs),
    /// Make certificates for mutual TLS on the control channel.
    #[command(subcommand)]
    Certs(CertsCommand),
}

#[derive(Debug, Subcommand)]
pub enum CertsCommand {
    /// Create a CA, a coordinator certificate and one per agent in DIR (keys readable by their owner only).
    Init {
        dir: PathBuf,
        /// An agent's name as the coordinator dials it (host name or IP address); repeatable.
        #[arg(long = "agent", value_delimiter = ',')]
        agents: Vec<String>,
        /// The coordinator's name (as agents that --join dial it).
        #[arg(long, default_value = "coordinator")]
        coordinator: String,
        /// Validity in days.
        #[arg(long, default_value_t = 365)]
        days: i64,
    },
    /// Issue one more certificate from DIR's CA, written to DIR/FILE.crt and DIR/FILE.key.
    Issue {
        dir: PathBuf,
        name: String,
        /// File name without extension (default: agent-NAME).
        #[arg(long)]
        file: Option<String>,
        #[arg(long, default_value_t = 365)]
        days: i64,
        /// Move the validity window this many days into the past (to test expiry).
        #[arg(long, default_value_t = 0, hide = true)]
        backdate_days: i64,
    },
}

#[derive(Debug, Args, Default)]
pub struct RunArgs {
    /// A plan file (TOML) or a target URL (http:// or https://).
    #[arg(value_name = "PLAN|URL")]
    pub plan_or_url: Option<String>,

    /// Target URL.
    #[arg(long, short = 'u')]
    pub url: Option<String>,
    /// HTTP method.
    #[arg(long, short = 'm')]
    pub method: Option<String>,
    /// Extra request header, 'Name: value' (repeatable).
    #[arg(long = "header", short = 'H', value_name = "NAME: VALUE")]
    pub headers: Vec<String>,
    /// Request body.
    #[arg(long, conflicts_with = "body_file")]
    pub body: Option<String>,
    /// Request body read from a file.
    #[arg(long)]
    pub body_file: Option<PathBuf>,
    /// File of URLs to send, one 'URL' or 'METHOD URL' per line (like siege -f).
    #[arg(long)]
    pub urls: Option<PathBuf>,
    /// Order in which --urls are used: round-robin or random.
    #[arg(long)]
    pub urls_order: Option<String>,

    /// Load model: connections (httperf: new connections per second), requests (wrk2: requests per
    /// second over a keep-alive pool) or concurrency (wrk/ab: N connections, closed loop).
    #[arg(long)]
    pub model: Option<String>,
    /// Arrival spacing for the open models: uniform or poisson.
    #[arg(long)]
    pub arrival: Option<String>,
    /// First step's rate (or connection count for concurrency).
    #[arg(long, alias = "low_rate")]
    pub low_rate: Option<f64>,
    /// Last step's rate.
    #[arg(long, alias = "high_rate")]
    pub high_rate: Option<f64>,
    /// Increment between steps.
    #[arg(long, alias = "rate_step")]
    pub rate_step: Option<f64>,
    /// Explicit step values instead of a ramp, e.g. 30,100,1000.
    #[arg(long, value_delimiter = ',')]
    pub steps: Option<Vec<f64>>,
    /// Length of each step, e.g. 10s (autobench: const_test_time, in seconds).
    #[arg(long, alias = "const_test_time", alias = "const-test-time")]
    pub step_duration: Option<String>,
    /// End each step after this many connections instead of a duration (connections model).
    #[arg(long, alias = "num_conn")]
    pub num_conn: Option<u64>,
    /// Requests per connection (connections model).
    #[arg(long, alias = "num_call")]
    pub num_call: Option<u32>,
    /// Largest keep-alive pool the requests model may open.
    #[arg(long)]
    pub max_connections: Option<u32>,
    /// No complete reply within this long is a client-timeout error (default 5s).
    #[arg(long)]
    pub timeout: Option<String>,
    /// Connect timeout (default: the --timeout).
    #[arg(long)]
    pub connect_timeout: Option<String>,
    /// Accept any TLS certificate from the target (self-signed test servers).
    #[arg(long)]
    pub insecure: bool,
    /// Reply statuses that count as served: codes and ranges, e.g. 200-399 (the default, like wrk and
    /// k6) or 200,204,404. Any other status is a failure.
    #[arg(long, value_name = "CODES")]
    pub ok_status: Option<String>,
    /// Local addresses new connections leave from, in turn (per agent worker thread): a list and/or
    /// inclusive ranges, e.g. 127.0.0.1,127.0.0.2 or 127.0.0.1-127.0.0.8. Each address adds a full
    /// ephemeral port range per destination. Every agent must have them.
    #[arg(long, value_name = "ADDRS")]
    pub source_addrs: Option<String>,

    /// Remote agents: host:port,host:port | @FILE (one per line, # comments) | dns://NAME:PORT (every
    /// A/AAAA record is one agent). Without it, an embedded agent runs the load.
    #[arg(long)]
    pub agents: Option<String>,
    /// Wait for agents to join (`stampede-agent --join`) on this address instead of dialing them.
    #[arg(long, conflicts_with = "agents", requires = "expect_agents")]
    pub listen: Option<std::net::SocketAddr>,
    /// How many agents must join before the run starts (with --listen).
    #[arg(long)]
    pub expect_agents: Option<usize>,
    /// How long to wait for them (default 60s).
    #[arg(long)]
    pub wait_agents: Option<String>,
    /// Certificate for mutual TLS with remote agents (from `stampede certs init`).
    #[arg(long)]
    pub tls_cert: Option<PathBuf>,
    /// Its private key.
    #[arg(long)]
    pub tls_key: Option<PathBuf>,
    /// The fleet's CA certificate: agents must present a certificate it signed.
    #[arg(long)]
    pub tls_ca: Option<PathBuf>,
    /// Bearer token for remote agents, read from this file (or set STAMPEDE_TOKEN).
    #[arg(long)]
    pub token_file: Option<PathBuf>,
    /// When an agent is lost mid-run: abort the run, degrade (finish the step without it, mark it
    /// degraded, re-split later steps) or continue (re-split without marking).
    #[arg(long)]
    pub on_agent_loss: Option<String>,
    /// Share of the load per agent, in --agents order, e.g. 1,2,1 (default: their cores).
    #[arg(long, value_delimiter = ',')]
    pub agent_weights: Option<Vec<u64>>,
    /// Worker threads of the embedded agent (default: one per core).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Output directory (default: a new stampede-results/<UTC timestamp>/, suffixed -2, -3... if
    /// taken). One holding another run's files is refused unless --force.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Replace another run's files (run.json, steps.tsv/csv, hlog/) in --out instead of refusing.
    #[arg(long)]
    pub force: bool,
    /// Table format: tsv or csv.
    #[arg(long)]
    pub format: Option<String>,
    /// Seed for Poisson arrivals and random URL order.
    #[arg(long)]
    pub seed: Option<u64>,
    /// No progress on stderr.
    #[arg(long, short = 'q')]
    pub quiet: bool,
    /// End the ramp once a step breaches EXPR: p50|p90|p99|p999|max|mean with ms/s/us, failed or errors
    /// in %, ok_rate in % of demanded or /s; < <= > >=. E.g. p99>500ms, failed>5%, ok_rate<95%
    /// (repeatable: any of them).
    #[arg(long = "stop-on", value_name = "EXPR")]
    pub stop_on: Vec<String>,
    /// Steps in a row that must breach a --stop-on before the ramp ends (default 1).
    #[arg(long, value_name = "N")]
    pub stop_after: Option<u32>,
    /// Exit with code 3 after the run (outputs written) if any step breached EXPR (the --stop-on
    /// grammar; repeatable), like k6 thresholds for CI.
    #[arg(long = "fail-on", value_name = "EXPR")]
    pub fail_on: Vec<String>,
}

#[derive(Debug, Args, Clone)]
pub struct ServeArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,
    /// Delay before every reply, e.g. 20ms.
    #[arg(long)]
    pub delay: Option<String>,
    /// Serve at most this many requests per second; the rest queue (a known knee).
    #[arg(long)]
    pub capacity: Option<f64>,
    /// Reply body.
    #[arg(long, default_value = "I am a stupid HTTP server!\n")]
    pub body: String,
    /// Server threads (default: one per core).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Serve HTTPS with a self-signed certificate made at start (clients need --insecure).
    #[arg(long)]
    pub tls: bool,
}

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Output directory (default: stampede-results/<UTC timestamp>/).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Length of each step, e.g. 2s.
    #[arg(long, default_value = "2s")]
    pub step_duration: String,
    /// No progress on stderr.
    #[arg(long, short = 'q')]
    pub quiet: bool,
}
