//! The command line as clap parses it: raw, unvalidated. `config` turns it into a valid plan.
use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand};
use control::role::CertRole;
use serde::Deserialize;
use shared::plan::{Arrival, HttpVersion, LoadModel, TlsSessions, UrlOrder};

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
}

const FIND_MAX_EXAMPLES: &str = "Examples:
  stampede find-max http://127.0.0.1:8080/ --slo 'p99<50ms' --model requests
  stampede find-max http://127.0.0.1:8080/ --slo 'p99<20ms' --slo 'failed<0.1%' --start 1000 --max-rate 50000 --probe 5s
  stampede find-max http://10.0.0.5/ --slo 'p999<200ms' --agents a1:7700,a2:7700 --tls-ca ca.crt --tls-cert c.crt --tls-key c.key
  stampede find-max nginx=http://127.0.0.1:8080/ go=http://127.0.0.1:8081/ --slo 'p99<50ms' --model requests

Exit codes: 0 resolved (both bounds found and confirmed), 1 the run failed or was interrupted (the bounds so far are in run.json), 2 usage or configuration error, 4 lower_bound_only (a pass at the ceiling: not a maximum), 5 generator_bound (the generator is the limit: add agents), 6 doomed (the start rate already fails), 7 server_unrecovered (after an overload with errors a passing rate failed too), 8 deadline (time or probe budget ran out: the bounds so far). With several NAME=URL targets, one search each, their probes interleaved: the worst target's (1, then 6, 7, 5, 8, 4; 0 when all resolved).";

/// `run`'s settings find-max chooses itself: each one's clap id (hidden from find-max's help), its
/// flag, the search's flag to use instead, and whether a command line gave it. The one list that
/// `config::resolve_find_max` refuses by and the help hides by.
pub type Refused = (
    &'static str,
    &'static str,
    &'static str,
    fn(&RunArgs) -> bool,
);

pub const FIND_MAX_REFUSED: [Refused; 12] = [
    ("steps", "--steps", "--start and --max-rate", |a| {
        a.steps.is_some()
    }),
    ("low_rate", "--low-rate", "--start", |a| {
        a.low_rate.is_some()
    }),
    ("high_rate", "--high-rate", "--max-rate", |a| {
        a.high_rate.is_some()
    }),
    ("rate_step", "--rate-step", "--precision", |a| {
        a.rate_step.is_some()
    }),
    ("rate", "-R/--rate", "--start", |a| a.rate.is_some()),
    (
        "connections",
        "-c/--connections",
        "--max-connections (the requests model's pool) or --model concurrency --start N",
        |a| a.connections.is_some(),
    ),
    ("num_conn", "--num-conn", "--probe", |a| {
        a.num_conn.is_some()
    }),
    ("max_requests", "-n/--max-requests", "--probe", |a| {
        a.max_requests.is_some()
    }),
    (
        "step_duration",
        "--step-duration",
        "--probe and --confirm",
        |a| a.step_duration.is_some(),
    ),
    ("stop_on", "--stop-on", "--slo", |a| !a.stop_on.is_empty()),
    ("stop_after", "--stop-after", "--repeat", |a| {
        a.stop_after.is_some()
    }),
    (
        "fail_on",
        "--fail-on",
        "--slo (the exit code says how the search ended)",
        |a| !a.fail_on.is_empty(),
    ),
];

/// `stampede find-max`: the search's own flags beside every setting of `run` but the steps.
#[derive(Debug, Clone, Args)]
pub struct FindMaxArgs {
    #[command(flatten)]
    pub run: RunArgs,
    #[command(flatten)]
    pub search: SearchArgs,
}

#[derive(Debug, Clone, Args)]
pub struct SearchArgs {
    /// A service level every passing probe meets, in the --stop-on grammar: p99<50ms, p999<200ms,
    /// failed<1%, ok_rate>=99% (repeatable: all of them). A percentile counts only with enough
    /// samples behind it (10 / (1 - q): 1,000 for p99). Without any, only throughput decides.
    #[arg(long = "slo", value_name = "EXPR", help_heading = SEARCH)]
    pub slos: Vec<String>,
    /// The first probe's rate (req/s, conn/s, or connections for --model concurrency)
    /// [default: 100, or 10 connections].
    #[arg(long, value_name = "R", help_heading = SEARCH)]
    pub start: Option<Rate>,
    /// The highest rate to offer [default: no limit but the agents' own --max-rate].
    #[arg(long, value_name = "R", help_heading = SEARCH)]
    pub max_rate: Option<Rate>,
    /// Bisect until the lowest failing rate is within this of the highest passing one.
    #[arg(long, default_value = "5%", allow_hyphen_values = true, help_heading = SEARCH)]
    pub precision: String,
    /// Length of a ramp or bisect probe.
    #[arg(long, default_value = "10s", allow_hyphen_values = true, help_heading = SEARCH)]
    pub probe: DurationText,
    /// Length of each confirmation of the two bounds.
    #[arg(long, default_value = "30s", allow_hyphen_values = true, help_heading = SEARCH)]
    pub confirm: DurationText,
    /// Confirmations of each bound; a contradiction is settled by the majority of measured seconds.
    #[arg(long, default_value_t = 2, help_heading = SEARCH)]
    pub repeat: u32,
    /// Idle time before each probe, for the server to drain what the last one queued.
    #[arg(long, default_value = "2s", allow_hyphen_values = true, help_heading = SEARCH)]
    pub cooldown: DurationText,
    /// The whole search's time limit: at it, the bounds so far are the answer (status deadline).
    #[arg(long, default_value = "30m", allow_hyphen_values = true, help_heading = SEARCH)]
    pub deadline: DurationText,
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

Exit codes: 0 compared, 1 a file could not be written, 2 usage or a run.json that cannot be read, 3 --fail-on-regression and a trusted step got worse beyond the threshold.";

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

/// Declares the run's settings once: the struct clap parses the flags into and serde reads a plan
/// file into (the same names, snake_case in the file), and `over`, the one place where flags and file
/// meet. Adding a setting is one field here; its type says how it combines (`Merge`).
macro_rules! settings {
    ($(#[$sattr:meta])* pub struct $name:ident { $( $(#[$fattr:meta])* pub $field:ident : $ty:ty, )* }) => {
        $(#[$sattr])*
        pub struct $name { $( $(#[$fattr])* pub $field: $ty, )* }

        impl $name {
            /// These settings where they are set, `under`'s elsewhere.
            pub fn over(self, under: Self) -> Self {
                Self { $( $field: Merge::merge(self.$field, under.$field), )* }
            }

            /// Forgets a setting (by its clap id, the plan file's key): a value clap filled in from a
            /// `default_value` rather than from the command line, so that a plan file's value is not
            /// overridden by a default; a plan file's way of giving a setting the flags give another way.
            pub fn unset(&mut self, id: &str) {
                match id {
                    $( stringify!($field) => self.$field = Default::default(), )*
                    _ => {}
                }
            }

            /// Whether the setting `id` (its clap id, the plan file's key) is given.
            pub fn given(&self, id: &str) -> bool {
                match id {
                    $( stringify!($field) => Given::given(&self.$field), )*
                    _ => false,
                }
            }
        }
    };
}

/// How one setting given in two places combines: a value wins over none, lists add up (the file's
/// first), a switch is on if either turns it on.
pub trait Merge {
    fn merge(self, under: Self) -> Self;
}

impl<T> Merge for Option<T> {
    fn merge(self, under: Self) -> Self {
        self.or(under)
    }
}

impl<T> Merge for Vec<T> {
    fn merge(self, mut under: Self) -> Self {
        under.extend(self);
        under
    }
}

impl Merge for bool {
    fn merge(self, under: Self) -> Self {
        self || under
    }
}

/// Whether a setting holds a value: some, a list with one, a switch that is on.
pub trait Given {
    fn given(&self) -> bool;
}

impl<T> Given for Option<T> {
    fn given(&self) -> bool {
        self.is_some()
    }
}

impl<T> Given for Vec<T> {
    fn given(&self) -> bool {
        !self.is_empty()
    }
}

impl Given for bool {
    fn given(&self) -> bool {
        *self
    }
}

/// How two of `run`'s settings go together: the one table that clap's flags and a plan file's keys
/// are both checked against (`parse_from` gives clap the conflicts; `config` checks the file and the
/// settings combined), so a plan file is refused exactly as the flags are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Constraint {
    /// Two ways of giving one setting (ids, as the plan file's keys): either, not both. Given on the
    /// command line, either replaces the plan file's other, as a flag overrides the file.
    OneOf(&'static str, &'static str),
    /// The first needs the second, from the command line or the plan file.
    Requires(&'static str, &'static str),
}

pub const CONSTRAINTS: [Constraint; 9] = [
    Constraint::OneOf("body", "body_file"),
    Constraint::OneOf("http", "http2"),
    Constraint::OneOf("listen", "agents"),
    Constraint::OneOf("monitor_pid", "monitor_process"),
    Constraint::OneOf("monitor_pid", "monitor_cgroup"),
    Constraint::OneOf("monitor_process", "monitor_cgroup"),
    Constraint::Requires("expect_monitors", "listen"),
    Constraint::Requires("live_keep", "live"),
    Constraint::Requires("baseline", "live"),
];

/// A setting's flag, from its id: `body_file` is `--body-file`.
pub fn flag_of(id: &str) -> String {
    format!("--{}", id.replace('_', "-"))
}

/// `--agent-weights`: each agent's share of the load, keyed by the agent (`a:7700=3,b:7700=1`, or a
/// plan file's table `{ "a:7700" = 3 }`), or the old form, one weight per agent in `--agents` order
/// (`3,1`), taken only where that order is the fleet's.
#[derive(Debug, Clone, PartialEq)]
pub enum AgentWeights {
    InOrder(Vec<u64>),
    ByAgent(Vec<(String, u64)>),
}

impl std::str::FromStr for AgentWeights {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let weight = |w: &str| {
            w.trim()
                .parse::<u64>()
                .map_err(|_| format!("weight '{}' is not a whole number", w.trim()))
        };
        let entries: Vec<&str> = s.split(',').map(str::trim).collect();
        let keyed = entries.iter().filter(|e| e.contains('=')).count();
        if keyed == 0 {
            return entries
                .iter()
                .map(|e| weight(e))
                .collect::<Result<_, _>>()
                .map(AgentWeights::InOrder);
        }
        if keyed != entries.len() {
            return Err(format!(
                "'{s}' mixes AGENT=WEIGHT entries with bare weights: give every one as AGENT=WEIGHT (e.g. a:7700=3,b:7700=1)"
            ));
        }
        entries
            .iter()
            .map(|e| {
                let (agent, w) = e.rsplit_once('=').unwrap_or((e, ""));
                Ok((agent.trim().to_string(), weight(w)?))
            })
            .collect::<Result<_, String>>()
            .map(AgentWeights::ByAgent)
    }
}

impl<'de> Deserialize<'de> for AgentWeights {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Either {
            List(Vec<u64>),
            Table(std::collections::BTreeMap<String, u64>),
            Text(String),
        }
        Ok(match Either::deserialize(d)? {
            Either::List(w) => AgentWeights::InOrder(w),
            Either::Table(t) => AgentWeights::ByAgent(t.into_iter().collect()),
            Either::Text(s) => s.parse().map_err(serde::de::Error::custom)?,
        })
    }
}

/// A duration as written ("10s", "500ms", "2m", or seconds; a plan file may also give a number). It is
/// checked in `config`, which names the setting in its message.
#[derive(Debug, Clone, PartialEq)]
pub struct DurationText(pub String);

/// The command line's value; what it means is checked in `config`. Every duration flag takes a value
/// that starts with '-' (so `-5s` is refused as negative there), and this is the one place that tells
/// such a value from the next flag (`-d --out m4`: `-d` has no value).
impl std::str::FromStr for DurationText {
    type Err = shared::usage::NextOption;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        shared::usage::not_the_next_option(s)?;
        Ok(DurationText(s.to_string()))
    }
}

impl From<std::time::Duration> for DurationText {
    fn from(d: std::time::Duration) -> Self {
        DurationText(humantime::format_duration(d).to_string())
    }
}

impl<'de> Deserialize<'de> for DurationText {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Either {
            Text(String),
            Secs(f64),
        }
        Ok(DurationText(match Either::deserialize(d)? {
            Either::Text(s) => s,
            Either::Secs(n) => n.to_string(),
        }))
    }
}

/// A plan file's `http`: a name as the flag takes it ("1.1", "2", "auto", or an alias), or the bare
/// number TOML lets one write (`http = 2`, `http = 1.1`), which a person means just the same.
fn http_version<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<HttpVersion>, D::Error> {
    use clap::ValueEnum;
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Either {
        Text(String),
        Number(f64),
        Other(serde::de::IgnoredAny),
    }
    let text = match Either::deserialize(d)? {
        Either::Text(s) => Some(s),
        Either::Number(n) => Some(n.to_string()),
        Either::Other(_) => None,
    };
    let version = text
        .as_deref()
        .and_then(|t| HttpVersion::from_str(t, false).ok());
    version.map(Some).ok_or_else(|| {
        let what = text.map_or(String::new(), |t| format!(" {t:?}"));
        serde::de::Error::custom(format!(
            "http{what} is no HTTP version: use \"1.1\", \"2\" or \"auto\""
        ))
    })
}

/// Step values: `30,100,1000` on the command line, `[30, 100, 1000]` in a plan file.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Steps(pub Vec<f64>);

impl std::str::FromStr for Steps {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let parts: Vec<&str> = s.split(',').collect();
        let count = parts.len();
        parts
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let p = p.trim();
                if p.is_empty() {
                    return Err(format!("empty step value (value {} of {count})", i + 1));
                }
                p.parse::<f64>()
                    .map_err(|_| format!("step value '{p}' is not a number"))
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Steps)
    }
}

/// A rate as wrk2/oha (`2000`) or vegeta (`50/1s`, `3000/1m`) write it, in requests per second.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
pub struct Rate(pub f64);

impl std::str::FromStr for Rate {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let (count, per) = s.split_once('/').unwrap_or((s, "1s"));
        let count: f64 = count
            .trim()
            .parse()
            .map_err(|_| format!("'{s}' is not a rate (write 2000, or 50/1s as vegeta does)"))?;
        let per = match per.trim() {
            "s" => "1s",
            "m" => "1m",
            p => p,
        };
        let per = humantime::parse_duration(per)
            .ok()
            .filter(|d| !d.is_zero())
            .ok_or_else(|| format!("'{s}': '{per}' is not a time unit (write 50/1s or 3000/1m)"))?;
        Ok(Rate(count / per.as_secs_f64()))
    }
}

settings! {
    /// `stampede run`'s settings: flags, and the keys of a TOML plan file.
    #[derive(Debug, Clone, Args, Default, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct RunArgs {
        /// A plan file (TOML) and/or target URLs (http:// or https://; h2c:// or h2:// for HTTP/2,
        /// see --http). Several targets, each named NAME=URL (e.g. nginx=http://a:8080/
        /// app=http://b:8081/), run side by side: every step on each in turn, one results directory
        /// per NAME under --out, and a comparison beside them.
        #[arg(value_name = "PLAN|URL|NAME=URL")]
        #[serde(skip)]
        pub plan_or_url: Vec<String>,

        /// Target URL.
        #[arg(long, short = 'u', help_heading = TARGET)]
        pub url: Option<String>,
        /// HTTP method.
        #[arg(long, short = 'm', default_value = "GET", help_heading = TARGET)]
        pub method: Option<String>,
        /// Extra request header, 'Name: value' (repeatable; a plan file's come first).
        #[arg(long = "header", short = 'H', value_name = "NAME: VALUE", help_heading = TARGET)]
        #[serde(default)]
        pub headers: Vec<String>,
        /// Request body.
        #[arg(long, help_heading = TARGET)]
        pub body: Option<String>,
        /// Request body read from a file.
        #[arg(long, help_heading = TARGET)]
        pub body_file: Option<PathBuf>,
        /// File of URLs to send, one 'URL' or 'METHOD URL' per line (like siege -f).
        #[arg(long, help_heading = TARGET)]
        pub urls: Option<PathBuf>,
        /// Order in which --urls are used.
        #[arg(long, value_enum, default_value = "round-robin", help_heading = TARGET)]
        pub urls_order: Option<UrlOrder>,
        /// No complete reply within this long is a client-timeout error.
        #[arg(long, default_value = "5s", allow_hyphen_values = true, help_heading = TARGET)]
        pub timeout: Option<DurationText>,
        /// Connect timeout [default: the --timeout].
        #[arg(long, allow_hyphen_values = true, help_heading = TARGET)]
        pub connect_timeout: Option<DurationText>,
        /// Accept any TLS certificate from the target (self-signed test servers).
        #[arg(long, help_heading = TARGET)]
        #[serde(default)]
        pub insecure: bool,
        /// Local addresses new connections leave from, in turn (per agent worker thread): a list and/or
        /// inclusive ranges, e.g. 127.0.0.1,127.0.0.2 or 127.0.0.1-127.0.0.8. Each address adds a full
        /// ephemeral port range per destination. Every agent must have them.
        #[arg(long, value_name = "ADDRS", help_heading = TARGET)]
        pub source_addrs: Option<StringOrList>,
        /// Reply statuses that count as served: codes and ranges, like wrk's and k6's 200-399, or
        /// e.g. 200,204,404. Any other status is a failure.
        #[arg(long, value_name = "CODES", default_value = "200-399", help_heading = TARGET)]
        pub ok_status: Option<StringOrList>,
        /// HTTP spoken to an http:// or https:// target; one written h2c:// (HTTP/2 over TCP by
        /// prior knowledge) or h2:// (over TLS by ALPN) is HTTP/2 whatever this says, so targets of
        /// one run may differ [default: 1.1].
        #[arg(long, value_enum, value_name = "VERSION", help_heading = TARGET)]
        #[serde(default, deserialize_with = "http_version")]
        pub http: Option<HttpVersion>,
        /// Short for --http 2.
        #[arg(long, help_heading = TARGET)]
        #[serde(default)]
        pub http2: bool,
        /// Requests each connection carries at once, as HTTP/2 streams (1 to 1000; more than 1 needs
        /// HTTP/2): the concurrency model's N connections run M closed loops each, the requests
        /// model's arrivals share at most --max-connections × M streams, the connections model's
        /// --num-call requests go M at a time.
        #[arg(long, value_name = "M", default_value = "1", help_heading = TARGET)]
        pub streams: Option<u32>,
        /// Whether a new TLS connection to an https:// (or h2://) target may resume a session its
        /// worker made before: `fresh` measures the server's full handshakes, `resume` the cheaper
        /// resumed ones. run.json and steps.tsv count both kinds (tls_full, tls_resumed).
        #[arg(long, value_enum, value_name = "HOW", default_value = "fresh", help_heading = TARGET)]
        pub tls_sessions: Option<TlsSessions>,

        /// Load model. The default opens a new connection per request (--num-call 1).
        #[arg(long, value_enum, default_value = "connections", help_heading = LOAD)]
        pub model: Option<LoadModel>,
        /// Arrival spacing for the open models.
        #[arg(long, value_enum, default_value = "uniform", help_heading = LOAD)]
        pub arrival: Option<Arrival>,
        /// First step's rate (or connection count for concurrency).
        #[arg(long, alias = "low_rate", help_heading = LOAD)]
        pub low_rate: Option<f64>,
        /// Last step's rate.
        #[arg(long, alias = "high_rate", help_heading = LOAD)]
        pub high_rate: Option<f64>,
        /// Increment between steps.
        #[arg(long, alias = "rate_step", help_heading = LOAD)]
        pub rate_step: Option<f64>,
        /// Explicit step values instead of a ramp, e.g. 30,100,1000.
        #[arg(long, help_heading = LOAD)]
        pub steps: Option<Steps>,
        /// Length of each step, e.g. 10s (autobench: const_test_time, in seconds; wrk -d, oha -z).
        #[arg(long, short = 'd', visible_aliases = ["duration", "const-test-time"], alias = "const_test_time", short_alias = 'z', default_value = "10s",
              allow_hyphen_values = true, help_heading = LOAD)]
        #[serde(alias = "const_test_time", alias = "duration")]
        pub step_duration: Option<DurationText>,
        /// End each step after this many connections instead of a duration (connections model).
        #[arg(long, alias = "num_conn", help_heading = LOAD)]
        pub num_conn: Option<u64>,
        /// Requests per connection (connections model).
        #[arg(long, alias = "num_call", default_value = "1", help_heading = LOAD)]
        pub num_call: Option<u32>,
        /// Largest keep-alive pool the requests model may open (wrk2/oha -c with a rate).
        #[arg(long, default_value = "1000", help_heading = LOAD)]
        pub max_connections: Option<u32>,
        /// wrk/ab/oha -c: one step of N connections in a closed loop (--model concurrency --steps N);
        /// with a --rate, the requests model's pool (--max-connections N).
        #[arg(short = 'c', long = "connections", value_name = "N", help_heading = LOAD)]
        pub connections: Option<u32>,
        /// wrk2 -R, vegeta -rate, oha -q: one step of the requests model at this many requests/s
        /// (--model requests --steps N); 2000, or 50/1s as vegeta writes it.
        #[arg(short = 'R', short_alias = 'q', long, value_name = "REQ/S", help_heading = LOAD)]
        pub rate: Option<Rate>,
        /// ab -n: end each closed-loop step after this many requests (or its duration, if first),
        /// split exactly among agents and their connections.
        #[arg(short = 'n', long, value_name = "N", help_heading = LOAD)]
        pub max_requests: Option<u64>,
        /// Load before each target's first step, at its rate (or connections), for this long: shown
        /// and recorded (run.json's warmup), never counted (not a step of the table, steps.tsv, the
        /// answer or --stop-on/--fail-on), so a cold server's first seconds are no knee. 0 skips it
        /// [default: none; find-max: 2s, a probe at --start].
        #[arg(long, value_name = "DURATION", allow_hyphen_values = true, help_heading = LOAD)]
        pub warmup: Option<DurationText>,

        /// Output directory [default: a new stampede-results/<UTC timestamp>/, suffixed -2, -3... if
        /// taken]. One holding another run's files is refused unless --force.
        #[arg(long, help_heading = OUTPUT)]
        pub out: Option<PathBuf>,
        /// Name this run in its report and in `stampede compare` (letters, digits, '_', '.', '-');
        /// with several targets, name each NAME=URL instead.
        #[arg(long, value_name = "NAME", help_heading = OUTPUT)]
        pub label: Option<String>,
        /// Replace another run's files (run.json, steps.tsv/csv, hlog/) in --out instead of refusing.
        #[arg(long, help_heading = OUTPUT)]
        #[serde(default)]
        pub force: bool,
        /// Table format.
        #[arg(long, value_enum, default_value = "tsv", help_heading = OUTPUT)]
        pub format: Option<Format>,
        /// Seed for Poisson arrivals and random URL order.
        #[arg(long, default_value = "1", help_heading = OUTPUT)]
        pub seed: Option<u64>,
        /// No progress on stderr.
        #[arg(long, help_heading = OUTPUT)]
        #[serde(default)]
        pub quiet: bool,
        /// End the ramp once a step breaches EXPR: p50|p90|p99|p999|max|mean with ms/s/us, failed or
        /// errors in %, ok_rate in % of demanded or /s; < <= > >=. E.g. p99>500ms, failed>5%,
        /// ok_rate<95% (repeatable: any of them).
        #[arg(long = "stop-on", value_name = "EXPR", help_heading = OUTPUT)]
        #[serde(default)]
        pub stop_on: Vec<String>,
        /// Steps in a row that must breach a --stop-on before the ramp ends [default: 1].
        #[arg(long, value_name = "N", help_heading = OUTPUT)]
        pub stop_after: Option<u32>,
        /// Exit with code 3 after the run (outputs written) if any step breached EXPR (the --stop-on
        /// grammar; repeatable), like k6 thresholds for CI.
        #[arg(long = "fail-on", value_name = "EXPR", help_heading = OUTPUT)]
        #[serde(default)]
        pub fail_on: Vec<String>,

        /// Serve the run as it happens on this address: a page for browsers (/), its event stream
        /// (/events) and Prometheus metrics (/metrics), e.g. 127.0.0.1:5665. Beyond loopback only
        /// with the fleet's token (--token-file or STAMPEDE_TOKEN), which every request must present.
        #[arg(long, value_name = "ADDR", help_heading = OUTPUT)]
        pub live: Option<std::net::SocketAddr>,
        /// How long --live keeps serving once the run is over (Ctrl-C ends it sooner) [default: 0s].
        #[arg(long, value_name = "DURATION", allow_hyphen_values = true, help_heading = OUTPUT)]
        pub live_keep: Option<DurationText>,
        /// A finished run (its results directory or run.json) drawn underneath the live page's
        /// charts.
        #[arg(long, value_name = "DIR", help_heading = OUTPUT)]
        pub baseline: Option<PathBuf>,

        /// Remote agents: host:port,host:port | @FILE (one per line, # comments) | dns://NAME:PORT (every
        /// A/AAAA record is one agent). Without it, an embedded agent runs the load.
        #[arg(long, help_heading = DISTRIBUTED)]
        pub agents: Option<String>,
        /// Wait for agents to join (`stampede-agent --join`) on this address instead of dialing them
        /// (with --expect-agents), or only monitors (with --expect-monitors alone: the embedded agent
        /// sends the load).
        #[arg(long, help_heading = DISTRIBUTED)]
        pub listen: Option<std::net::SocketAddr>,
        /// How many agents must join before the run starts (with --listen), or answer (with --agents:
        /// the names looked up again until they give that many, as a dns:// fleet starts).
        #[arg(long, help_heading = DISTRIBUTED)]
        pub expect_agents: Option<usize>,
        /// How long to wait for them.
        #[arg(long, default_value = "60s", allow_hyphen_values = true, help_heading = DISTRIBUTED)]
        pub wait_agents: Option<DurationText>,
        /// With --listen: once the port is bound, write one line of JSON,
        /// {"listen":"127.0.0.1:PORT","pid":N}, to PATH (atomically: a temporary file renamed over
        /// it), a ready signal for scripts.
        #[arg(long, value_name = "PATH", help_heading = DISTRIBUTED)]
        pub ready_file: Option<PathBuf>,
        /// Certificate for mutual TLS with remote agents (from `stampede certs init`).
        #[arg(long, help_heading = DISTRIBUTED)]
        pub tls_cert: Option<PathBuf>,
        /// Its private key.
        #[arg(long, help_heading = DISTRIBUTED)]
        pub tls_key: Option<PathBuf>,
        /// The fleet's CA certificate: agents must present a certificate it signed.
        #[arg(long, help_heading = DISTRIBUTED)]
        pub tls_ca: Option<PathBuf>,
        /// Bearer token for remote agents, read from this file (or set STAMPEDE_TOKEN).
        #[arg(long, help_heading = DISTRIBUTED)]
        pub token_file: Option<PathBuf>,
        /// When an agent is lost mid-run.
        #[arg(long, value_enum, default_value = "degrade", help_heading = DISTRIBUTED)]
        pub on_agent_loss: Option<LossPolicy>,
        /// Share of the load per agent, keyed by the agent as --agents names it, e.g.
        /// a:7700=1,b:7700=2 (or one weight per agent in --agents order, 1,2) [default: their cores].
        #[arg(long, value_name = "AGENT=W,...", help_heading = DISTRIBUTED)]
        pub agent_weights: Option<AgentWeights>,
        /// wrk --latency: accepted and changes nothing (every step records the full latency
        /// distribution); said on stderr.
        #[arg(long = "latency", short = 'L', hide = true)]
        #[serde(skip)]
        pub wrk_latency: bool,
        /// ab -k: accepted and changes nothing (the concurrency and requests models keep their
        /// connections alive); said on stderr.
        #[arg(short = 'k', hide = true)]
        #[serde(skip)]
        pub ab_keep_alive: bool,
        /// Worker threads of the embedded agent (wrk -t) [default: one per core].
        #[arg(long, short = 't', help_heading = DISTRIBUTED)]
        pub threads: Option<usize>,

        /// Server monitors to dial (`stampede-agent --monitor --listen`), as --agents lists agents:
        /// host:port,... | @FILE | dns://NAME:PORT. Each adds the server's CPU, memory and the kernel's
        /// drops to every step, as steps.tsv columns suffixed with its name.
        #[arg(long, help_heading = MONITOR)]
        pub monitors: Option<String>,
        /// How many monitors must join (`stampede-agent --monitor --join`) with --listen, beside
        /// --expect-agents (without it, beside the embedded agent).
        #[arg(long, value_name = "N", help_heading = MONITOR)]
        pub expect_monitors: Option<usize>,
        /// Watch this process (its threads and children) from this machine, in-process: a monitor
        /// named `server` (a pid changes from run to run; the columns should not).
        #[arg(long, value_name = "PID", help_heading = MONITOR)]
        pub monitor_pid: Option<u32>,
        /// Watch every process of this name (nginx's master and workers), in-process: a monitor named
        /// NAME.
        #[arg(long, value_name = "NAME", help_heading = MONITOR)]
        pub monitor_process: Option<String>,
        /// How many processes --monitor-process NAME may match: more is refused (a name like python3
        /// matches every script on the host), unless this says that many are meant.
        #[arg(long, value_name = "N", default_value = "64", help_heading = MONITOR)]
        pub monitor_processes: Option<usize>,
        /// Watch this cgroup v2 directory (cpu.stat, memory, throttling), in-process: a monitor named
        /// by its last component.
        #[arg(long, value_name = "PATH", help_heading = MONITOR)]
        pub monitor_cgroup: Option<PathBuf>,
        /// Watch target NAME's own server from this machine, in-process: process:COMM (every process
        /// of that name), pid:PID or cgroup:PATH; repeatable, one per target. The monitor is named
        /// NAME, so is paired with the target NAME (as a remote `stampede-agent --monitor --name
        /// NAME` is): that target's steps carry its CPU and memory as unsuffixed columns
        /// (srv_cpu_pct), and no other target's do.
        #[arg(long = "monitor-target", value_name = "NAME=KIND:WHAT", help_heading = MONITOR)]
        #[serde(default)]
        pub monitor_target: Vec<String>,
    }
}

const SEARCH: &str = "Search";
const TARGET: &str = "Target and request";
const LOAD: &str = "Load shape";
const OUTPUT: &str = "Output";
const DISTRIBUTED: &str = "Distributed";
const MONITOR: &str = "Server monitor";

const RUN_EXAMPLES: &str = "\
Examples:
  # autobench/httperf: 20 -> 200 new connections/s, 10 requests each, 10 s per step
  stampede run http://127.0.0.1:8080/ --low-rate 20 --high-rate 200 --rate-step 20 --num-call 10
  # wrk2/k6 arrival rate: requests/s over a keep-alive pool
  stampede run http://127.0.0.1:8080/ --model requests --steps 1000,2000,5000
  # wrk/ab closed loop: 50 connections for 10 s (the same as -c 50 -d 10s)
  stampede run http://127.0.0.1:8080/ --model concurrency --steps 50 --step-duration 10s";

/// One string or a list of them; each is parsed as the flag's value would be.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum StringOrList {
    One(String),
    Many(Vec<String>),
}

impl std::str::FromStr for StringOrList {
    type Err = std::convert::Infallible;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(StringOrList::One(s.to_string()))
    }
}

impl StringOrList {
    pub fn joined(&self) -> String {
        match self {
            StringOrList::One(s) => s.clone(),
            StringOrList::Many(v) => v.join(","),
        }
    }
}

/// The keys a plan file takes: every field of [`RunArgs`] serde reads, and their aliases
/// (`const_test_time`), not what it skips (the positionals, wrk's and ab's no-op habits). Read from the
/// derive itself, which hands its list of fields to the deserializer, so there is no second list to
/// keep: the plan file's refusal of an unknown key names the closest of these.
pub fn plan_keys() -> &'static [&'static str] {
    use serde::de::{Deserializer, Visitor};

    /// A deserializer that only records the fields it is asked for, then stops.
    struct Fields<'a>(&'a mut &'static [&'static str]);

    #[derive(Debug)]
    struct Stop;
    impl std::fmt::Display for Stop {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("stop")
        }
    }
    impl std::error::Error for Stop {}
    impl serde::de::Error for Stop {
        fn custom<T: std::fmt::Display>(_: T) -> Self {
            Stop
        }
    }

    impl<'de> Deserializer<'de> for Fields<'_> {
        type Error = Stop;
        fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Stop> {
            Err(Stop)
        }
        fn deserialize_struct<V: Visitor<'de>>(
            self,
            _: &'static str,
            fields: &'static [&'static str],
            _: V,
        ) -> Result<V::Value, Stop> {
            *self.0 = fields;
            Err(Stop)
        }
        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
            option unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier
            ignored_any
        }
    }

    static KEYS: std::sync::OnceLock<&'static [&'static str]> = std::sync::OnceLock::new();
    KEYS.get_or_init(|| {
        let mut fields: &'static [&'static str] = &[];
        // It fails by design, once it has the list.
        let _ = RunArgs::deserialize(Fields(&mut fields));
        fields
    })
}

impl RunArgs {
    /// Every default, as clap fills them in from the `default_value`s above: the one place they live.
    pub fn defaults() -> RunArgs {
        let cmd = RunArgs::augment_args(clap::Command::new("run").no_binary_name(true));
        let matches = cmd
            .try_get_matches_from(std::iter::empty::<String>())
            .expect("an empty command line parses");
        RunArgs::from_arg_matches(&matches).expect("the defaults are valid values")
    }

    /// The settings the command line gave, without the defaults clap filled in.
    fn explicit(matches: &clap::ArgMatches) -> Result<RunArgs, clap::Error> {
        let mut args = RunArgs::from_arg_matches(matches)?;
        for id in matches.ids() {
            if matches.value_source(id.as_str()) == Some(clap::parser::ValueSource::DefaultValue) {
                args.unset(id.as_str());
            }
        }
        Ok(args)
    }
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

/// Gives clap the conflicts of [`CONSTRAINTS`]; what a setting needs is checked in `config`, where
/// the plan file may give it.
fn with_constraints(c: clap::Command) -> clap::Command {
    CONSTRAINTS.iter().fold(c, |c, rule| match *rule {
        Constraint::OneOf(a, b) => c.mut_arg(a, |arg| arg.conflicts_with(b)),
        Constraint::Requires(..) => c,
    })
}

/// What `--latency` and `-k`, accepted for wrk's and ab's sake, are told on stderr.
pub fn habit_notes(args: &RunArgs) -> Vec<String> {
    let mut notes = Vec::new();
    if args.wrk_latency {
        notes.push(
            "--latency: stampede always records the full latency distribution (the table, steps.tsv, run.json and hlog/)".to_string(),
        );
    }
    if args.ab_keep_alive {
        notes.push(
            "-k: the concurrency and requests models always keep connections alive (the connections model makes --num-call N requests per connection)".to_string(),
        );
    }
    notes
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Format {
    /// tab-separated, autobench's columns first
    Tsv,
    /// comma-separated
    Csv,
}

impl Format {
    pub fn separator(self) -> char {
        match self {
            Format::Tsv => '\t',
            Format::Csv => ',',
        }
    }

    pub fn file_name(self) -> &'static str {
        match self {
            Format::Tsv => "steps.tsv",
            Format::Csv => "steps.csv",
        }
    }
}

/// What happens when an agent is lost mid-run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LossPolicy {
    /// stop the run
    Abort,
    /// finish the step without it, mark the step degraded, re-split later steps
    Degrade,
    /// re-split without marking
    Continue,
}

impl LossPolicy {
    pub fn name(self) -> &'static str {
        match self {
            LossPolicy::Abort => "abort",
            LossPolicy::Degrade => "degrade",
            LossPolicy::Continue => "continue",
        }
    }
}
