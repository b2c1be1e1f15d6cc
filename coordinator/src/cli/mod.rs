//! The command line as clap parses it: raw, unvalidated. `config` turns it into a valid plan. Here
//! the commands and the small subcommands' flags; `run`'s settings (the flags and a plan file's keys)
//! in `run_args`, their value types in `values`, find-max's own flags in `find_max`.
mod find_max;
mod run_args;
mod values;

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand};
use control::role::CertRole;

use find_max::FIND_MAX_EXAMPLES;
pub use find_max::{FIND_MAX_REFUSED, FindMaxArgs, Refused, SearchArgs};
pub use run_args::{
    CONSTRAINTS, Constraint, FeederArg, Given, Merge, RunArgs, SetupArg, flag_of, habit_notes,
    plan_keys,
};
use run_args::{RUN_EXAMPLES, with_constraints};
pub use values::{
    AgentWeights, BurstEntry, DurationText, Format, FullRequest, LossPolicy, Rate, RequestEntry,
    SessionEntry, SessionRequest, Steps, StringOrList, Wsesslog,
};

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
    /// Run a ramp against a target, or several side by side (URLs or NAME=URLs, a plan file, or both;
    /// flags override the file).
    Run(Box<RunArgs>),
    /// Serve the reference target over HTTP/1.1 and HTTP/2: a fixed body, an optional delay and
    /// capacity, its own request counter.
    Serve(ServeArgs),
    /// Start the reference target and an embedded agent, run a short ramp past its knee, write the results.
    Demo(DemoArgs),
    /// Make certificates for mutual TLS on the control channel.
    #[command(subcommand)]
    Certs(CertsCommand),
    /// Rebuild a run's report.html from its results directory (run.json and hlog/).
    Report(ReportArgs),
    /// Compare runs side by side: steps joined on their value, each against a baseline run.
    #[command(after_help = COMPARE_EXAMPLES)]
    Compare(CompareArgs),
    /// Find the highest rate the target sustains under SLOs: grow, bisect, confirm both bounds;
    /// probes the generator cannot be trusted on are never bounds. Takes `run`'s target, workload,
    /// fleet, TLS, monitor and output flags; the search chooses the steps. Several NAME=URL targets
    /// are searched side by side and ranked.
    #[command(name = "find-max", after_help = FIND_MAX_EXAMPLES)]
    FindMax(Box<FindMaxArgs>),
    /// A history of runs, one row per run.json, oldest first (when, label, commit, target, knee and
    /// its cause, kept up to, p99 and requests per server core-second at one step, trust): a TSV and
    /// a trend page, so a nightly job sees a server get slower across commits.
    #[command(after_help = HISTORY_EXAMPLES)]
    History(HistoryArgs),
    /// Print results directories as Markdown (a CI job's step summary): each run's answer, knee,
    /// capacity, --fail-on verdicts and step table, then the ranking of several runs.
    Summary(SummaryArgs),
}

const HISTORY_EXAMPLES: &str = "Examples:
  stampede history nightly/                         # every run under nightly/, TSV on stdout
  stampede history nightly/ --at 400 --html trend.html --tsv history.tsv
  stampede history old-run new-run/run.json side-by-side-run/

A DIR is a results directory, a run.json, or a folder of them: a folder without a run.json of its
own is searched two levels down (a folder of runs; a side-by-side run's target directories).

Exit codes: 0 written, 1 a file could not be written, 2 usage, a DIR with no run.json, or a run.json
that cannot be read (each said on a line of its own; --skip-unreadable skips the unreadable ones).";

#[derive(Debug, Args, Clone)]
pub struct HistoryArgs {
    /// Results directories, run.json files, or folders of them.
    #[arg(required = true, value_name = "DIR")]
    pub dirs: Vec<PathBuf>,
    /// Read p99 and requests per core-second at the step offered this rate (req/s, or a closed
    /// loop's connections), or the nearest below it [default: the highest rate every run offered].
    #[arg(long, value_name = "RATE")]
    pub at: Option<String>,
    /// Where the TSV goes; - for stdout.
    #[arg(long, value_name = "FILE", default_value = "-")]
    pub tsv: PathBuf,
    /// Also write the trend page (self-contained HTML: its own SVG charts, no script from elsewhere).
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Skip a run.json that cannot be read (damaged, an older schema) with a warning on stderr,
    /// instead of refusing the history, when another run is left.
    #[arg(long)]
    pub skip_unreadable: bool,
}

#[derive(Debug, Args)]
pub struct SummaryArgs {
    /// Results directories (each holding a run.json, or a side-by-side run's, one per target
    /// inside) or run.json files; with several runs, the first is the ranking's baseline.
    #[arg(required = true, value_name = "DIR")]
    pub dirs: Vec<PathBuf>,
}

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// A results directory: the one holding the run's run.json.
    pub dir: PathBuf,
    /// Where to write the page [default: DIR/report.html]; - for stdout.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
}

const COMPARE_EXAMPLES: &str = "Examples:
  stampede compare results/nginx results/app                 # compare.html here, nginx the baseline
  stampede compare old new --baseline old --threshold 3% --tsv compare.tsv --json compare.json
  stampede compare main pr --fail-on-regression              # exit 3 when a trusted step got worse (CI)
  stampede compare main pr --regression 'p99[login]>5%'      # exit 3 when login's p99 got 5% worse

Exit codes: 0 compared, 1 a file could not be written, 2 usage or a run.json that cannot be read, 3 --fail-on-regression and a trusted step got worse beyond the threshold, or a --regression gate breached.";

#[derive(Debug, Args, Clone)]
pub struct CompareArgs {
    /// Results directories (each holding a run.json) or run.json files; the first is the baseline
    /// unless --baseline names another.
    #[arg(required = true, value_name = "DIR")]
    pub dirs: Vec<PathBuf>,
    /// A run's name, in the order of the directories (repeatable); unnamed runs go by run.json's
    /// label, else their directory's name.
    #[arg(long = "label", value_name = "NAME")]
    pub labels: Vec<String>,
    /// The label of the run the others are compared with (default: the first).
    #[arg(long, value_name = "LABEL")]
    pub baseline: Option<String>,
    /// A change of at most this much is noise, e.g. 5% or 2.5%.
    #[arg(long, default_value = "5%", allow_hyphen_values = true)]
    pub threshold: String,
    /// The HTML page to write.
    #[arg(
        short = 'o',
        long = "output",
        value_name = "FILE",
        default_value = "compare.html"
    )]
    pub output: PathBuf,
    /// Also write the comparison as autobench-shaped TSV (dem_req_rate, then every column suffixed _LABEL).
    #[arg(long, value_name = "FILE")]
    pub tsv: Option<PathBuf>,
    /// Also write the whole comparison as JSON (schema stampede.compare/2).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Exit 3 when a trusted step got worse than the baseline's beyond the threshold.
    #[arg(long)]
    pub fail_on_regression: bool,
    /// Exit 3 when this quantity, of the step or of a named request (--fail-on's spelling), got
    /// worse than the baseline's by more than this % on a step both trusted, beyond what the
    /// histogram resolves: p99[login]>5%, failed>10%, ok_rate[search]>3% (repeatable).
    #[arg(long = "regression", value_name = "EXPR")]
    pub regressions: Vec<String>,
    /// Write the verdicts as JUnit XML to FILE (written through, `-` stdout), also when the exit is
    /// 3: a testcase for the comparison, per --regression gate and for --fail-on-regression.
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub enum CertsCommand {
    /// Create a CA, a coordinator certificate and one per agent in DIR (keys readable by their owner only).
    Init {
        dir: PathBuf,
        /// An agent's name as the coordinator dials it (host name or IP address); repeatable.
        #[arg(long = "agent", value_delimiter = ',')]
        agents: Vec<String>,
        /// A monitor's name as the coordinator dials it (stampede-agent --monitor); repeatable.
        #[arg(long = "monitor", value_delimiter = ',')]
        monitors: Vec<String>,
        /// The coordinator's name (as agents that --join dial it).
        #[arg(long, default_value = "coordinator")]
        coordinator: String,
        /// Validity in days.
        #[arg(long, default_value_t = 365)]
        days: i64,
        /// Also print the certificates as the Kubernetes Secret manifests deploy/kubernetes mounts
        /// (stampede-agent-tls, stampede-coordinator-tls) on stdout, the files written on stderr. Takes
        /// one --agent: the name the coordinator dials the agents' Service by.
        #[arg(long)]
        kubernetes: bool,
    },
    /// Issue one more certificate from DIR's CA, written to DIR/FILE.crt and DIR/FILE.key.
    Issue {
        dir: PathBuf,
        name: String,
        /// Who the certificate is for: an agent only admits a coordinator's, a coordinator's
        /// --listen only an agent's or a monitor's.
        #[arg(long, value_enum, default_value_t = CertRole::Agent)]
        role: CertRole,
        /// File name without extension (default: ROLE-NAME, e.g. agent-NAME).
        #[arg(long)]
        file: Option<String>,
        #[arg(long, default_value_t = 365)]
        days: i64,
        /// Move the validity window this many days into the past (to test expiry).
        #[arg(long, default_value_t = 0, hide = true)]
        backdate_days: i64,
    },
}

/// What an option from wrk, ab, oha, vegeta or httperf that has no one meaning here does in stampede.
pub fn habit_hint(arg: &str) -> Option<String> {
    let (tool, answer) = match arg {
        "-s" | "--script" => (
            "wrk -s (a Lua script)",
            "give the request with -m, -H and --body (or --body-file), or several with --urls FILE",
        ),
        "-p" => ("ab -p (POST file)", "use -m POST --body-file FILE"),
        "-T" => ("ab -T (content type)", "use -H 'Content-Type: TYPE'"),
        "--vus" => ("k6 --vus", "use -c N (a closed loop of N connections)"),
        _ => return None,
    };
    Some(format!(
        "unknown option {arg}: {tool} has no one equivalent; {answer}"
    ))
}

/// Parses a command line; `run`'s settings keep only what the command line set.
pub fn parse_from<I, T>(argv: I) -> Result<Cli, clap::Error>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let matches = Cli::command()
        .mut_subcommand("run", |c| with_constraints(c).after_help(RUN_EXAMPLES))
        .mut_subcommand("find-max", with_constraints)
        // `run`'s step-shaping flags come with the flattened `RunArgs`; find-max refuses them
        // (naming its own), so its help does not offer them.
        .mut_subcommand("find-max", |c| {
            FIND_MAX_REFUSED
                .iter()
                .fold(c, |c, (id, ..)| c.mut_arg(*id, |a| a.hide(true)))
        })
        .try_get_matches_from(argv)?;
    let mut cli = Cli::from_arg_matches(&matches)?;
    match (&mut cli.command, matches.subcommand()) {
        (Command::Run(args), Some(("run", sub))) => **args = RunArgs::explicit(sub)?,
        (Command::FindMax(args), Some(("find-max", sub))) => args.run = RunArgs::explicit(sub)?,
        _ => {}
    }
    Ok(cli)
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
    /// Break for good at the first overload (needs --capacity): once a request would wait longer than
    /// this for its turn, e.g. 100ms, no request is answered again, as a deadlocked server does.
    #[arg(long, value_name = "DURATION", allow_hyphen_values = true)]
    pub wedge_after: Option<String>,
    /// Reply body.
    #[arg(long, default_value = "I am a stupid HTTP server!\n")]
    pub body: String,
    /// Server threads (default: one per core).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Serve HTTPS with a self-signed certificate made at start (clients need --insecure); ALPN
    /// offers h2, then http/1.1.
    #[arg(long)]
    pub tls: bool,
    /// HTTP/2 streams a client may have open at once on one connection (the SETTINGS it announces,
    /// SETTINGS_MAX_CONCURRENT_STREAMS). HTTP/1.1 and HTTP/2 are always both served: h2c to a client
    /// that opens with the HTTP/2 preface (prior knowledge), h2 by ALPN over --tls. 0 refuses every
    /// stream, a server to test a client against.
    #[arg(long, default_value = "200", value_name = "N")]
    pub max_streams: u32,
    /// Once the port is bound, write one line of JSON, {"listen":"127.0.0.1:PORT","pid":N}, to PATH
    /// (atomically: a temporary file renamed over it), a ready signal for scripts.
    #[arg(long, value_name = "PATH")]
    pub ready_file: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Output directory (default: stampede-results/<UTC timestamp>/).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Length of each step, e.g. 2s.
    #[arg(long, default_value = "2s", allow_hyphen_values = true)]
    pub step_duration: DurationText,
    /// No progress on stderr.
    #[arg(long, short = 'q')]
    pub quiet: bool,
}
