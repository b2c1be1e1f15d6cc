//! `stampede run`'s settings, declared once (`settings!`): the struct clap parses the flags into and
//! serde reads a plan file into, how a flag and a plan-file value combine, the table of how settings
//! go together (`CONSTRAINTS`), and their defaults (clap's `default_value`s, read back by
//! `RunArgs::defaults`).
use std::path::PathBuf;

use clap::{Args, FromArgMatches};
use serde::Deserialize;
use shared::plan::{Arrival, HttpVersion, LoadModel, TlsSessions, UrlOrder};

use super::values::http_version;
use super::{
    AgentWeights, DurationText, Format, LossPolicy, Rate, RequestEntry, SessionEntry, Steps,
    StringOrList, Wsesslog,
};

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
        /// A plan file's mix of named requests (`[[request]]`), each with its weight and a row in
        /// the results; no flag gives it.
        #[arg(skip)]
        #[serde(default)]
        pub request: Vec<RequestEntry>,
        /// Extra request header, 'Name: value' (repeatable; a plan file's come first).
        #[arg(long = "header", short = 'H', value_name = "NAME: VALUE", help_heading = TARGET)]
        #[serde(default)]
        pub headers: Vec<String>,
        /// HTTP Basic credentials sent with every request as its Authorization header (oha and hey
        /// -a, ab -A).
        #[arg(long, value_name = "USER:PASSWORD", help_heading = TARGET)]
        pub basic_auth: Option<String>,
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
        /// httperf's sessions (connections model): each arrival runs the next session of FILE on
        /// one connection, burst after burst, X seconds of think time where the log gives none;
        /// the steps are sessions per second (httperf's --rate). N > 0 ends each step after N
        /// sessions (as --num-conn); 0 leaves it to --step-duration.
        #[arg(long, value_name = "N,X,FILE", help_heading = LOAD)]
        pub wsesslog: Option<Wsesslog>,
        /// A plan file's sessions (`[[session]]` of `[[session.burst]]`), run as a --wsesslog
        /// log's are; no flag gives them.
        #[arg(skip)]
        #[serde(default)]
        pub session: Vec<SessionEntry>,
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
        /// The revision of the code under test (a commit SHA, a tag), kept in run.json's `commit` for
        /// `stampede history` [default: $GITHUB_SHA when set].
        #[arg(long, value_name = "REV", help_heading = OUTPUT)]
        pub commit: Option<String>,
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
        /// errors in %, ok_rate in % of demanded or /s, requests a bare count; < <= > >=; [name]
        /// after the metric judges one request of the plan's mix. E.g. p99>500ms, failed>5%,
        /// ok_rate<95%, p99[login]>200ms (repeatable: any of them).
        #[arg(long = "stop-on", value_name = "EXPR", help_heading = OUTPUT)]
        #[serde(default)]
        pub stop_on: Vec<String>,
        /// Steps in a row that must breach a --stop-on before the ramp ends [default: 1].
        #[arg(long, value_name = "N", help_heading = OUTPUT)]
        pub stop_after: Option<u32>,
        /// Exit with code 3 after the run (outputs written) if any step breached EXPR (the --stop-on
        /// grammar, [name] included: p99[login]>200ms, requests[login]<100; repeatable), like k6
        /// thresholds for CI.
        #[arg(long = "fail-on", value_name = "EXPR", help_heading = OUTPUT)]
        #[serde(default)]
        pub fail_on: Vec<String>,
        /// Write the verdicts as JUnit XML to FILE (written through, `-` stdout), also when the exit
        /// is 3: a testcase for the run and per --fail-on (find-max: per --slo and the capacity).
        #[arg(long, value_name = "FILE", help_heading = OUTPUT)]
        #[serde(skip)]
        pub junit: Option<PathBuf>,

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
        /// Push the run's metrics (/metrics' names and labels, every merged second and finished
        /// step) to this Prometheus remote-write URL, e.g. http://127.0.0.1:9090/api/v1/write. A
        /// failing endpoint never slows or fails the run: what was dropped is said on stderr.
        #[arg(long, value_name = "URL", help_heading = OUTPUT)]
        pub prometheus_remote_write: Option<String>,
        /// Push the run's metrics (the same, with the run as the resource) to this OpenTelemetry
        /// receiver over OTLP/HTTP (protobuf). A base URL gets /v1/metrics appended
        /// (http://127.0.0.1:4318); one ending in /v1/metrics is used as it is.
        #[arg(long, value_name = "URL", help_heading = OUTPUT)]
        pub otlp: Option<String>,
        /// A header sent with every push, 'NAME: VALUE', e.g. 'Authorization: Bearer TOKEN'
        /// (repeatable).
        #[arg(long = "push-header", value_name = "HEADER", help_heading = OUTPUT)]
        #[serde(default)]
        pub push_header: Vec<String>,

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
        /// A Prometheus that watches the server, where no monitor can run (a pod, a managed
        /// service): its answers over each step's window fill the server columns as a monitor's
        /// do, named NAME (default prometheus; a target's NAME pairs it with that target). http://
        /// only; repeatable.
        #[arg(long = "server-prometheus", value_name = "[NAME=]URL", help_heading = MONITOR)]
        #[serde(default)]
        pub server_prometheus: Vec<String>,
        /// The queries asked of --server-prometheus: node (node_exporter: the host), cadvisor (cAdvisor,
        /// the kubelet: a container), or none (the plan file's [[server_query]] alone) [default: node].
        #[arg(long, value_name = "SET", help_heading = MONITOR)]
        pub server_prometheus_queries: Option<String>,
        /// Label matchers that select the one server in every query's ${selector}, without braces,
        /// e.g. 'instance="10.0.0.5:9100"' or 'namespace="shop",container="${name}"'.
        #[arg(long, value_name = "MATCHERS", help_heading = MONITOR)]
        pub server_prometheus_selector: Option<String>,

        /// Plan file only: CSV feeders (`[[feeder]]`), whose header row names the variables
        /// requests use as `${name}`.
        #[arg(skip)]
        #[serde(default)]
        pub feeder: Vec<FeederArg>,
        /// Plan file only: a request run once per connection before its first of the mix
        /// (`[setup]`), whose `extract` fills variables.
        #[arg(skip)]
        #[serde(default)]
        pub setup: Option<SetupArg>,
        /// Plan file only: a query of --server-prometheus's (`[[server_query]]` name, query, unit),
        /// beside the set's or replacing the set's of that name.
        #[arg(skip)]
        #[serde(default)]
        pub server_query: Vec<crate::server_prom::ServerQueryArg>,
    }
}

/// A plan file's `[[feeder]]`: a CSV file on the coordinator, its rows shipped to the agents.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FeederArg {
    pub name: String,
    pub file: PathBuf,
    pub mode: shared::plan::FeederMode,
}

/// A plan file's `[setup]`: a request (templates allowed) and what its reply fills.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SetupArg {
    pub method: Option<String>,
    pub url: String,
    #[serde(default)]
    pub headers: Vec<String>,
    pub body: Option<String>,
    #[serde(default)]
    pub extract: std::collections::BTreeMap<String, String>,
}

const TARGET: &str = "Target and request";
const LOAD: &str = "Load shape";
const OUTPUT: &str = "Output";
const DISTRIBUTED: &str = "Distributed";
const MONITOR: &str = "Server monitor";

pub(super) const RUN_EXAMPLES: &str = "\
Examples:
  # autobench/httperf: 20 -> 200 new connections/s, 10 requests each, 10 s per step
  stampede run http://127.0.0.1:8080/ --low-rate 20 --high-rate 200 --rate-step 20 --num-call 10
  # wrk2/k6 arrival rate: requests/s over a keep-alive pool
  stampede run http://127.0.0.1:8080/ --model requests --steps 1000,2000,5000
  # wrk/ab closed loop: 50 connections for 10 s (the same as -c 50 -d 10s)
  stampede run http://127.0.0.1:8080/ --model concurrency --steps 50 --step-duration 10s";

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
    pub(super) fn explicit(matches: &clap::ArgMatches) -> Result<RunArgs, clap::Error> {
        let mut args = RunArgs::from_arg_matches(matches)?;
        for id in matches.ids() {
            if matches.value_source(id.as_str()) == Some(clap::parser::ValueSource::DefaultValue) {
                args.unset(id.as_str());
            }
        }
        Ok(args)
    }
}

/// Gives clap the conflicts of [`CONSTRAINTS`]; what a setting needs is checked in `config`, where
/// the plan file may give it.
pub(super) fn with_constraints(c: clap::Command) -> clap::Command {
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
