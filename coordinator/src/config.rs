//! Turns the command line and an optional TOML plan file into one validated `RunConfig`: every check of
//! user input happens here, so the run itself never meets a bad value. Flags override the file.
use std::num::{NonZeroU32, NonZeroU64};
use std::path::{Path, PathBuf};
use std::time::Duration;

use results::condition::Cmp;
use shared::plan::{
    self, HttpVersion, LoadModel, Plan, PlanError, RequestSpec, StepLimit, Workload, parse_header,
    parse_url_list,
};
use shared::status::{StatusSet, StatusSetError};

use crate::cli::{DurationText, Rate, RunArgs, Steps};
use crate::protocol::ProtocolError;
use crate::targets::{self, Positionals, TargetError};

/// A configuration the user must fix; exit code 2.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{0}")]
    Plan(#[from] PlanError),
    #[error("{0}")]
    OkStatus(#[from] StatusSetError),
    /// A --stop-on/--fail-on expression that does not parse: the message, then the expression with a
    /// caret under the bad part.
    #[error("{flag} '{}': {source}\n{}", source.input, source.pointer())]
    Condition {
        flag: &'static str,
        source: results::condition::ConditionError,
    },
    #[error("cannot read {what} {path}: {source}")]
    Read {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("plan file {path}: {message}")]
    PlanFile { path: PathBuf, message: String },
    #[error("URL list {path}, {source}")]
    UrlList {
        path: PathBuf,
        source: plan::UrlListError,
    },
    /// Nothing says what load to send: `stampede run URL` alone, as wrk users first type it.
    #[error(
        "no steps: say what load to send, e.g. `stampede run {url} -c 10 -d 10s` (wrk: 10 connections \
         for 10 s), `-R 1000 -d 10s` (wrk2: 1000 req/s), or a ramp: --low-rate 100 --high-rate 1000 \
         --rate-step 100 (or --steps 100,500,1000)"
    )]
    NoSteps { url: String },
    #[error("{flag}: '{value}' is not a duration (write e.g. 500ms, 10s, 2m)")]
    Duration { flag: &'static str, value: String },
    #[error(
        "{flag}: '{value}' is longer than any duration stampede takes ({} days at most)",
        MAX_DURATION.as_secs() / 86_400
    )]
    DurationTooLong { flag: &'static str, value: String },
    #[error("unknown format '{0}': use tsv or csv")]
    Format(String),
    /// Settings that cannot go together, or one that needs another: two flags, two keys of a plan
    /// file, a flag and a key.
    #[error("{0}")]
    Conflict(String),
    /// The agents or monitors named (`--agents`, `--monitors`, `--agent-weights`).
    #[error("{0}")]
    Peers(String),
    /// A setting's value that is not one it takes (beyond what clap's types check).
    #[error("{0}")]
    Value(String),
    /// A file given whose content is not what it must be (not UTF-8 text, empty).
    #[error("{0}")]
    File(String),
    /// Another tool's habit (wrk, ab, oha, vegeta) that means something else here, with the command.
    #[error("{0}")]
    Habit(String),
    /// A port opened beyond loopback without authentication or encryption.
    #[error("{0}")]
    Exposed(String),
    /// A find-max setting, or a `run` setting find-max chooses itself.
    #[error("{0}")]
    Search(String),
    #[error(transparent)]
    Target(#[from] TargetError),
    /// The protocol asked of a target against the one its scheme names, or streams it cannot carry.
    #[error(transparent)]
    Protocol(#[from] ProtocolError),
    #[error("output directory {path} is not writable: {source}")]
    Output {
        path: PathBuf,
        source: std::io::Error,
    },
}

pub use crate::cli::{Format, LossPolicy};

/// `--stop-on`, `--stop-after` and `--fail-on`, resolved.
#[derive(Debug, Clone)]
pub struct Thresholds {
    pub stop_on: Vec<results::condition::Condition>,
    /// Steps in a row that must breach some `stop_on` condition (at least 1).
    pub stop_after: u32,
    pub fail_on: Vec<results::condition::Condition>,
}

/// Where the agents are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AgentSpec {
    /// `host:port`: one agent.
    Addr(String),
    /// `dns://name:port`: one agent per A/AAAA record.
    Dns(String),
}

/// Parses `--agents`: a comma list, `@file` (one per line, `#` comments), or `dns://name:port` entries.
pub fn parse_agents(arg: &str) -> Result<Vec<AgentSpec>, ConfigError> {
    parse_peers("--agents", arg)
}

/// Parses a list of peers given as `flag` (`--agents`, `--monitors`): the same grammar for both.
fn parse_peers(flag: &str, arg: &str) -> Result<Vec<AgentSpec>, ConfigError> {
    let what = flag.trim_start_matches('-');
    let file = if flag == "--monitors" {
        "monitors file"
    } else {
        "agents file"
    };
    let text = match arg.strip_prefix('@') {
        Some(path) => String::from_utf8(read_file(file, Path::new(path))?)
            .map_err(|_| ConfigError::File(format!("{what} file {path} is not UTF-8 text")))?,
        None => arg.replace(',', "\n"),
    };
    let mut out = Vec::new();
    let mut seen: Vec<(usize, String)> = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let bad = |why: &str| ConfigError::Peers(format!("{flag} entry {} '{line}': {why}", i + 1));
        let (spec, hostport) = match line.strip_prefix("dns://") {
            Some(rest) => (AgentSpec::Dns(rest.to_string()), rest),
            None if line.contains("://") => return Err(bad("use host:port or dns://name:port")),
            None => (AgentSpec::Addr(line.to_string()), line),
        };
        let (host, port) = hostport
            .rsplit_once(':')
            .ok_or_else(|| bad("it lacks a :port"))?;
        if host.is_empty() || port.parse::<u16>().map_or(true, |p| p == 0) {
            return Err(bad("expected host:port with a port from 1 to 65535"));
        }
        // Dialed twice, one agent would refuse the second session as another coordinator's.
        if let Some((first, _)) = seen.iter().find(|(_, l)| l.eq_ignore_ascii_case(line)) {
            return Err(ConfigError::Peers(format!(
                "{flag} names {line} twice (entries {first} and {}): list each {} once",
                i + 1,
                &what[..what.len() - 1]
            )));
        }
        seen.push((i + 1, line.to_string()));
        out.push(spec);
    }
    if out.is_empty() {
        return Err(ConfigError::Peers(format!(
            "{flag} names no {}",
            &what[..what.len() - 1]
        )));
    }
    Ok(out)
}

/// Agents that dial in (`stampede-agent --join`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinSpec {
    pub listen: std::net::SocketAddr,
    /// Load agents to join, and monitors beside them.
    pub expect: usize,
    pub monitors: usize,
    pub wait: Duration,
    /// Where to say the join port is bound (`--ready-file`).
    pub ready_file: Option<PathBuf>,
}

/// `--agents` with `--expect-agents N`: look the agents up again (a `dns://` name's records grow as a
/// fleet starts) and dial them until N answer, within `wait`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DialWait {
    pub expect: usize,
    pub wait: Duration,
}

/// Everything `run` needs, valid by construction.
#[derive(Debug, Clone)]
pub struct RunConfig {
    /// Remote agents; empty (and no `join`) means the embedded agent.
    pub agents: Vec<AgentSpec>,
    pub join: Option<JoinSpec>,
    /// Server monitors to dial, and the one to run in-process.
    pub monitors: Vec<AgentSpec>,
    pub monitor: Option<monitor::Watch>,
    /// In-process monitors each paired with a target (`--monitor-target`), the same in every lane.
    pub paired: Vec<crate::pairing::Paired>,
    /// The run's targets, as monitors are paired with them (every lane's label).
    pub pairing: crate::pairing::Pairing,
    /// How many processes `--monitor-process` may match (`--monitor-processes`).
    pub monitor_processes: usize,
    /// How many dialed agents to wait for (`--expect-agents` with `--agents`).
    pub dial_wait: Option<DialWait>,
    pub token: Option<String>,
    /// Mutual TLS with remote agents.
    pub tls: Option<control::mtls::TlsFiles>,
    pub on_agent_loss: LossPolicy,
    /// Each agent's share, by its name as `--agents` lists it (every listed agent has one).
    pub agent_weights: Option<Vec<(String, u64)>>,
    pub plan: Plan,
    pub out: PathBuf,
    /// `out` is the default stamped directory: the run takes the first free name from it.
    pub out_default: bool,
    /// Replace another run's files in `out` instead of refusing.
    pub force: bool,
    pub format: Format,
    pub quiet: bool,
    pub threads: usize,
    pub seed: u64,
    /// The host suffix of autobench's columns.
    pub host: String,
    /// The plan as the user gave it, echoed into run.json.
    pub echo: results::run_file::PlanEcho,
    /// --stop-on, --stop-after, --fail-on.
    pub thresholds: Thresholds,
    /// What run.json, the report and `stampede compare` call this run (`--label`, `NAME=URL`).
    pub label: Option<String>,
    /// Said on stderr before the run: habits of other tools accepted though they change nothing.
    pub notes: Vec<String>,
    /// `--warmup` as given (zero: none): a planned run's load before each target's first step, not
    /// counted; a search takes it for its own (its default is not a planned run's).
    pub warmup: Option<Duration>,
    /// `--live`: the run served as it happens.
    pub live: Option<crate::live::LiveSpec>,
}

/// The longest duration any flag or plan key takes: a year is beyond every step, run, timeout and
/// wait a load test has, and far below what overflows a clock (`Instant + d`) or a wire field
/// (milliseconds in a u64), which a bare `1e20` did (a panic, exit 101).
pub const MAX_DURATION: Duration = Duration::from_secs(366 * 86_400);

/// Parses "10s", "500ms", "2m" or a bare number of seconds.
pub fn parse_duration(flag: &'static str, value: &str) -> Result<Duration, ConfigError> {
    let d = parse_pause(flag, value)?;
    if d.is_zero() {
        return Err(ConfigError::Plan(PlanError::NotPositive {
            what: flag,
            value: value.to_string(),
        }));
    }
    Ok(d)
}

/// A duration that may be zero (`--warmup 0s` skips the warmup, `--cooldown 0` pauses not at all).
pub fn parse_pause(flag: &'static str, value: &str) -> Result<Duration, ConfigError> {
    let bad = || ConfigError::Duration {
        flag,
        value: value.to_string(),
    };
    let v = value.trim();
    if v.starts_with('-') {
        // The same answer whether clap saw `--flag -1s` or `--flag=-1s`.
        return Err(ConfigError::Plan(PlanError::NotPositive {
            what: flag,
            value: value.to_string(),
        }));
    }
    let too_long = || ConfigError::DurationTooLong {
        flag,
        value: value.to_string(),
    };
    let d = if let Ok(secs) = v.parse::<f64>() {
        if !(secs.is_finite() && secs >= 0.0) {
            return Err(bad());
        }
        Duration::try_from_secs_f64(secs).map_err(|_| too_long())?
    } else {
        // humantime refuses what overflows a Duration ("500000000000y") in words of its own.
        match humantime::parse_duration(v) {
            Ok(d) => d,
            Err(humantime::DurationError::NumberOverflow) => return Err(too_long()),
            Err(_) => return Err(bad()),
        }
    };
    if d > MAX_DURATION {
        return Err(too_long());
    }
    Ok(d)
}

pub fn read_plan_file(path: &Path) -> Result<RunArgs, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        what: "plan file",
        path: path.to_path_buf(),
        source,
    })?;
    parse_plan(&text).map_err(|message| ConfigError::PlanFile {
        path: path.to_path_buf(),
        message,
    })
}

/// Parses a plan file's text; the error names the line and column.
pub fn parse_plan(text: &str) -> Result<RunArgs, String> {
    if let Some(unknown) = unknown_key(text) {
        return Err(unknown.to_string());
    }
    toml::from_str(text).map_err(|e| describe_toml_error(text, &e))
}

/// toml's message with the line and column spelled out, so editors can jump to it.
fn describe_toml_error(text: &str, e: &toml::de::Error) -> String {
    let msg = e.message().trim().to_string();
    match e.span() {
        Some(span) => {
            let (line, col) = line_and_column(text, span.start);
            format!("line {line}, column {col}: {msg}")
        }
        None => msg,
    }
}

/// The line and column (from 1) of byte `at` of `text`.
fn line_and_column(text: &str, at: usize) -> (usize, usize) {
    let before = &text[..at.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let col = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
    (line, col)
}

/// A plan file's key that is no setting: where it is, and the key meant when one is close. serde's own
/// refusal listed all 64 keys and left the reader to find the one meant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownKey {
    pub key: String,
    pub line: usize,
    pub column: usize,
    pub meant: Option<&'static str>,
}

impl std::fmt::Display for UnknownKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let Self {
            key, line, column, ..
        } = self;
        write!(f, "line {line}, column {column}: unknown key `{key}`: ")?;
        match self.meant {
            Some(meant) => write!(f, "did you mean `{meant}`?"),
            None => f.write_str(
                "no setting is called that (a key is a `stampede run` flag's long name with _ for -, \
                 as step_duration is --step-duration; `stampede run --help` lists them)",
            ),
        }
    }
}

/// The first top-level key of the plan file `text` that no setting has, if any; None for a file
/// that does not parse as TOML, which toml's own error then describes.
fn unknown_key(text: &str) -> Option<UnknownKey> {
    let table = toml::de::DeTable::parse(text).ok()?;
    let keys = crate::cli::plan_keys();
    let (key, start) = table
        .get_ref()
        .keys()
        .filter(|k| !keys.contains(&k.get_ref().as_ref()))
        .map(|k| (k.get_ref().to_string(), k.span().start))
        .min_by_key(|(_, start)| *start)?;
    let (line, column) = line_and_column(text, start);
    Some(UnknownKey {
        meant: closest_key(&key, keys),
        key,
        line,
        column,
    })
}

/// The key `key` was meant to be: the key of a flag written as the flag is (`step-duration`,
/// `--step-duration`), else the closest key by edit distance if it is near enough to be a typo (a
/// third of its letters, at least one), else none: a far guess misleads more than no guess.
fn closest_key(key: &str, keys: &[&'static str]) -> Option<&'static str> {
    let spelled = key.trim_start_matches('-').replace('-', "_").to_lowercase();
    if let Some(k) = keys.iter().find(|k| **k == spelled) {
        return Some(k);
    }
    let near = (spelled.chars().count() / 3).max(1);
    keys.iter()
        .map(|k| (edit_distance(&spelled, k), *k))
        .filter(|(d, _)| *d <= near)
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k)
}

/// Levenshtein's distance: the fewest one-character insertions, deletions and replacements from `a`
/// to `b`.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = if ca == *cb {
                diagonal
            } else {
                1 + diagonal.min(above).min(row[j])
            };
            diagonal = above;
        }
    }
    row[b.len()]
}

fn utc_stamp() -> String {
    // 2026-11-30T20:15:00Z -> 20261130T201500Z: sortable and free of ':' for every file system.
    humantime::format_rfc3339_seconds(std::time::SystemTime::now())
        .to_string()
        .replace(['-', ':'], "")
}

pub fn default_out_dir() -> PathBuf {
    PathBuf::from("stampede-results").join(utc_stamp())
}

/// Turns the other tools' habits (wrk/ab/oha `-c`, wrk2/vegeta `-R`/`--rate`, oha `-q`, ab `-n`) into
/// this plan's settings where they mean one thing, or refuses them naming the command that does it.
/// Runs before the defaults are filled in, so it sees only what the user set.
fn habits(mut s: RunArgs, url: &str) -> Result<RunArgs, ConfigError> {
    let refuse = |m: String| Err(ConfigError::Habit(m));
    let ramp = s.steps.is_some() || s.low_rate.is_some() || s.high_rate.is_some();
    if let Some(Rate(rate)) = s.rate {
        let model = s.model.unwrap_or(LoadModel::Requests);
        if model != LoadModel::Requests {
            return refuse(format!(
                "--rate/-R is the requests model's rate, not the {model} model's step value: stampede run {url} --model {model} --steps {rate}"
            ));
        }
        if ramp {
            return refuse(format!(
                "--rate/-R {rate} is one step of the requests model; for several: stampede run {url} --model requests --steps {rate},{}",
                rate * 2.0
            ));
        }
        if let Some(n) = s.max_requests {
            let secs = n as f64 / rate;
            return refuse(format!(
                "-n {n} at {rate} req/s is {secs} s of the requests model: stampede run {url} --model requests --steps {rate} --step-duration {secs}s"
            ));
        }
        if let Some(c) = s.connections.take() {
            if s.max_connections.is_some() {
                return refuse(
                    "give -c or --max-connections, not both: with a rate both set the pool".into(),
                );
            }
            s.max_connections = Some(c);
        }
        s.model = Some(LoadModel::Requests);
        s.steps = Some(Steps(vec![rate]));
    }
    if let Some(c) = s.connections.take() {
        let model = s.model.unwrap_or(LoadModel::Concurrency);
        if model != LoadModel::Concurrency {
            return refuse(format!(
                "-c/--connections {c} is a closed loop of {c} connections (wrk, ab), which the {model} model is not: stampede run {url} --model concurrency --steps {c} (or add --rate N for a pool of {c} in the requests model)"
            ));
        }
        if ramp {
            return refuse(format!(
                "-c/--connections {c} is one step; for several: stampede run {url} --model concurrency --steps {c},{}",
                c * 2
            ));
        }
        s.model = Some(LoadModel::Concurrency);
        s.steps = Some(Steps(vec![f64::from(c)]));
    }
    if let Some(n) = s.max_requests {
        match s.model {
            // ab's concurrency is 1 unless -c says otherwise.
            None if !ramp => {
                s.model = Some(LoadModel::Concurrency);
                s.steps = Some(Steps(vec![1.0]));
            }
            Some(LoadModel::Concurrency) => {}
            Some(LoadModel::Connections) | None => {
                return refuse(format!(
                    "-n {n} ends a closed loop after {n} requests (ab): stampede run {url} -c 10 -n {n}; the connections model ends a step after N connections: stampede run {url} --num-conn {n}"
                ));
            }
            Some(model) => {
                return refuse(format!(
                    "-n {n} ends a closed loop after {n} requests (ab), not the {model} model: stampede run {url} --model concurrency --steps 10 -n {n}"
                ));
            }
        }
    }
    Ok(s)
}

/// Why a setting with a `default_value` in `cli::RunArgs` is never missing after the merge.
const DEFAULTED: &str = "filled in by RunArgs::defaults()";

/// What `stampede run`'s command line asks for: one run, or several targets side by side.
#[derive(Debug, Clone)]
pub enum Runs {
    One(Box<RunConfig>),
    Side(SideBySide),
}

/// Several targets run side by side over one fleet: every step on each in turn, each into its own
/// results directory, `dir/LABEL`, beside the comparison of them all.
#[derive(Debug, Clone)]
pub struct SideBySide {
    pub dir: PathBuf,
    /// `dir` is the default stamped directory: the run takes the first free name from it.
    pub dir_default: bool,
    pub force: bool,
    /// One per target, in the command line's order, each labelled; its `out` is `dir/LABEL`.
    pub runs: Vec<RunConfig>,
}

/// Builds the validated configuration of one target from flags and, if given, a plan file; several
/// targets are refused here (see [`resolve_runs`]).
pub fn resolve(args: RunArgs) -> Result<RunConfig, ConfigError> {
    match resolve_runs(args)? {
        Runs::One(cfg) => Ok(*cfg),
        Runs::Side(side) => Err(ConfigError::Conflict(format!(
            "{} targets where one was expected",
            side.runs.len()
        ))),
    }
}

/// Builds the validated configuration: one run, or with several `NAME=URL` targets one per target,
/// each with the same flags and plan file, its own URL, label and directory under `--out`.
pub fn resolve_runs(mut args: RunArgs) -> Result<Runs, ConfigError> {
    let Positionals { plan, targets } = targets::split(&std::mem::take(&mut args.plan_or_url))?;
    let plan = plan.as_deref();
    if targets.len() <= 1 {
        let target = targets.into_iter().next();
        let label = match (target.as_ref().and_then(|t| t.label.clone()), &args.label) {
            (Some(named), Some(flag)) if &named != flag => {
                return Err(ConfigError::Conflict(format!(
                    "the target is named twice, {named}= and --label {flag}: give one"
                )));
            }
            (named, _) => named,
        };
        let url = target.map(|t| t.url);
        let (mut cfg, over_http1) = resolve_one(args, plan, url.as_deref(), label)?;
        if let Some(e) = over_http1 {
            return Err(e.into());
        }
        paired_with(std::slice::from_mut(&mut cfg))?;
        return Ok(Runs::One(Box::new(cfg)));
    }
    if args.label.is_some() {
        return Err(ConfigError::Conflict(
            "--label names a run of one target; several are named NAME=URL each".into(),
        ));
    }
    if args.url.is_some() || args.urls.is_some() {
        return Err(ConfigError::Conflict(
            "give the targets as NAME=URL arguments, without --url or --urls: each target is one URL"
                .into(),
        ));
    }
    let mut runs = Vec::with_capacity(targets.len());
    let mut over_http1 = None;
    for t in targets {
        let (cfg, over) = resolve_one(args.clone(), plan, Some(&t.url), t.label)?;
        over_http1 = over_http1.or(over);
        runs.push(cfg);
    }
    // Beside an HTTP/2 target, an HTTP/1.1 one carries its one request at a time under --streams;
    // with none, --streams says nothing anywhere.
    if let Some(e) = over_http1
        && runs.iter().all(|c| c.plan.workload().streams().get() == 1)
    {
        return Err(e.into());
    }
    // The first one's directory holds them all: a default stamp is taken once, not per target.
    let dir = runs[0].out.clone();
    let dir_default = runs[0].out_default;
    for cfg in &mut runs {
        let label = cfg
            .label
            .clone()
            .expect("several targets are each labelled");
        cfg.out = dir.join(label);
        cfg.out_default = false;
    }
    paired_with(&mut runs)?;
    Ok(Runs::Side(SideBySide {
        dir,
        dir_default,
        force: runs[0].force,
        runs,
    }))
}

/// Checks the monitors paired with targets against the targets, and tells every lane who they are.
fn paired_with(runs: &mut [RunConfig]) -> Result<(), ConfigError> {
    let labels: Vec<Option<String>> = runs.iter().map(|c| c.label.clone()).collect();
    crate::pairing::check(&runs[0].paired, &labels)
        .map_err(|e| ConfigError::Value(e.to_string()))?;
    let pairing = crate::pairing::Pairing::new(labels);
    // A monitor in this process watches this host: only a target here can be checked.
    let ports: Vec<(String, u16)> = runs
        .iter()
        .filter_map(|c| {
            let origin = c.plan.workload().origin();
            let local = origin
                .host()
                .parse::<std::net::IpAddr>()
                .is_ok_and(|ip| ip.is_loopback())
                || origin.host() == "localhost";
            Some((c.label.clone()?, origin.port())).filter(|_| local)
        })
        .collect();
    let notes = crate::pairing::not_listening(&runs[0].paired, &ports);
    runs[0].notes.extend(notes);
    for cfg in runs {
        cfg.pairing = pairing.clone();
    }
    Ok(())
}

/// One target's configuration; `label` (from `NAME=URL`) over the flag's and the plan file's. With
/// it, `--streams` asked of it if it can only be HTTP/1.1, the run's to refuse or not.
fn resolve_one(
    args: RunArgs,
    plan_file: Option<&Path>,
    url: Option<&str>,
    label: Option<String>,
) -> Result<(RunConfig, Option<ProtocolError>), ConfigError> {
    let (args, given_duration) = merged(args, plan_file, url)?;
    let label = label.or_else(|| args.label.clone());
    if let Some(l) = &label {
        targets::check_label(l)?;
    }
    let (requests, by_scheme) = requests(&args)?;
    let workload = workload(&args, requests)?;
    let (workload, over_http1) = protocol(&args, workload, by_scheme, label.as_deref())?;
    let plan = plan(&args, workload, given_duration)?;
    let threads = args.threads.unwrap_or_else(control::system::cores);
    if threads == 0 || threads > 1024 {
        return Err(PlanError::NotPositive {
            what: "--threads (1 to 1024)",
            value: threads.to_string(),
        }
        .into());
    }
    let format = args.format.expect(DEFAULTED);
    let out_default = args.out.is_none();
    let out = args.out.clone().unwrap_or_else(default_out_dir);
    let agents = match &args.agents {
        Some(a) => parse_agents(a)?,
        None => Vec::new(),
    };
    let token = token(&args)?;
    let on_agent_loss = args.on_agent_loss.expect(DEFAULTED);
    let tls = control::mtls::TlsFiles::from_flags(
        args.tls_cert.clone(),
        args.tls_key.clone(),
        args.tls_ca.clone(),
    )
    .map_err(|e| ConfigError::Conflict(e.to_string()))?;
    let join = join(&args, token.as_deref(), tls.as_ref())?;
    let monitors = match &args.monitors {
        Some(m) => parse_peers("--monitors", m)?,
        None => Vec::new(),
    };
    let monitor = embedded_monitor(&args)?;
    let paired = args
        .monitor_target
        .iter()
        .map(|t| crate::pairing::parse(t).map_err(|e| ConfigError::Value(e.to_string())))
        .collect::<Result<Vec<_>, _>>()?;
    let dial_wait = dial_wait(&args)?;
    let agent_weights = weights(&args, &agents)?;
    let host = plan.workload().origin().host().to_string();
    let mut echo = echo(&plan, threads);
    let thresholds = thresholds(&args.stop_on, args.stop_after, &args.fail_on, &plan)?;
    echo.stop_on = thresholds.stop_on.iter().map(ToString::to_string).collect();
    echo.stop_after = thresholds.stop_after;
    echo.fail_on = thresholds.fail_on.iter().map(ToString::to_string).collect();
    let warmup = args
        .warmup
        .as_ref()
        .map(|w| parse_pause("--warmup", &w.0))
        .transpose()?;
    if let Some(w) = warmup.filter(|w| *w > shared::plan::MAX_STEP_DURATION) {
        // The warmup runs as a step of its own: said here, not as the agent's "invalid step 1".
        return Err(ConfigError::Value(format!(
            "--warmup {}: a warmup is a step, and a step lasts at most {}",
            humantime::format_duration(w),
            humantime::format_duration(shared::plan::MAX_STEP_DURATION)
        )));
    }
    echo.warmup_s = warmup.filter(|w| !w.is_zero()).map(|w| w.as_secs_f64());
    let live = live(&args, token.as_deref())?;
    let cfg = RunConfig {
        label,
        agents,
        join,
        monitors,
        monitor,
        paired,
        pairing: Default::default(),
        monitor_processes: args.monitor_processes.expect(DEFAULTED),
        dial_wait,
        token,
        tls,
        on_agent_loss,
        agent_weights,
        plan,
        out,
        out_default,
        force: args.force,
        format,
        quiet: args.quiet,
        threads,
        seed: args.seed.expect(DEFAULTED),
        host,
        echo,
        thresholds,
        notes: crate::cli::habit_notes(&args),
        warmup,
        live,
    };
    Ok((cfg, over_http1))
}

/// A duration flag's text, parsed; `flag` names it in the error.
fn dur(flag: &'static str, v: &Option<DurationText>) -> Result<Option<Duration>, ConfigError> {
    v.as_ref().map(|v| parse_duration(flag, &v.0)).transpose()
}

/// Flags (and the target `url` among the positional arguments) over the `plan` file (its paths taken
/// relative to it) over the defaults, with other tools' habits mapped; and whether a step duration
/// was given at all (not just defaulted).
fn merged(
    args: RunArgs,
    plan: Option<&Path>,
    url: Option<&str>,
) -> Result<(RunArgs, bool), ConfigError> {
    let (file, file_dir) = match plan {
        Some(p) => (read_plan_file(p)?, p.parent().map(Path::to_path_buf)),
        None => (RunArgs::default(), None),
    };
    let url_arg = url.map(String::from);
    // Paths in a plan file are relative to the file.
    let rel = |p: Option<PathBuf>| {
        p.map(|p| match (&file_dir, p.is_relative()) {
            (Some(d), true) => d.join(p),
            _ => p,
        })
    };
    let file = RunArgs {
        body_file: rel(file.body_file),
        urls: rel(file.urls),
        out: rel(file.out),
        tls_cert: rel(file.tls_cert),
        tls_key: rel(file.tls_key),
        tls_ca: rel(file.tls_ca),
        token_file: rel(file.token_file),
        baseline: rel(file.baseline),
        ..file
    };
    let file = match plan {
        Some(path) => constrained(&args, file, path)?,
        None => {
            constrained_flags(&args)?;
            file
        }
    };
    let url_shown = args
        .url
        .clone()
        .or(url_arg.clone())
        .or(file.url.clone())
        .unwrap_or_else(|| "URL".into());
    let args = RunArgs {
        url: args.url.clone().or(url_arg),
        ..args
    };
    // Flags over the file over the defaults: the only place settings are combined.
    let given = habits(args.over(file.clone()), &url_shown)?;
    required(&given, &file, plan)?;
    // A step's default length must not collide with a --num-conn that ends it instead.
    let given_duration = given.step_duration.is_some();
    let args = given.over(RunArgs::defaults());

    Ok((args, given_duration))
}

/// The plan file's settings checked against [`crate::cli::CONSTRAINTS`] as the flags are by clap
/// (and `args` as well, which tests build without clap), with each setting the flags give the file's
/// other way of giving it removed: the flag overrides the file.
fn constrained(args: &RunArgs, mut file: RunArgs, path: &Path) -> Result<RunArgs, ConfigError> {
    use crate::cli::{CONSTRAINTS, Constraint};
    constrained_flags(args)?;
    for rule in CONSTRAINTS {
        let Constraint::OneOf(a, b) = rule else {
            continue;
        };
        if file.given(a) && file.given(b) {
            return Err(ConfigError::Conflict(format!(
                "plan file {}: give {a} or {b}, not both (they are one setting)",
                path.display()
            )));
        }
        for (flag, other) in [(a, b), (b, a)] {
            if args.given(flag) {
                file.unset(other);
            }
        }
    }
    Ok(file)
}

/// The command line's settings against [`crate::cli::CONSTRAINTS`]' conflicts.
fn constrained_flags(args: &RunArgs) -> Result<(), ConfigError> {
    use crate::cli::{CONSTRAINTS, Constraint, flag_of};
    for rule in CONSTRAINTS {
        if let Constraint::OneOf(a, b) = rule
            && args.given(a)
            && args.given(b)
        {
            return Err(ConfigError::Conflict(format!(
                "give {} or {}, not both",
                flag_of(a),
                flag_of(b)
            )));
        }
    }
    Ok(())
}

/// What a setting needs ([`crate::cli::Constraint::Requires`]), in the settings combined: a flag's
/// need may be met by the plan file and the other way round. The message names the plan file when
/// the setting came from it.
fn required(given: &RunArgs, file: &RunArgs, plan: Option<&Path>) -> Result<(), ConfigError> {
    use crate::cli::{CONSTRAINTS, Constraint, flag_of};
    for rule in CONSTRAINTS {
        let Constraint::Requires(a, b) = rule else {
            continue;
        };
        if !given.given(a) || given.given(b) {
            continue;
        }
        return Err(ConfigError::Conflict(
            match plan.filter(|_| file.given(a)) {
                Some(path) => format!(
                    "plan file {}: {a} needs {b} (the key {b}, or the flag {})",
                    path.display(),
                    flag_of(b)
                ),
                None => format!("{} needs {}", flag_of(a), flag_of(b)),
            },
        ));
    }
    Ok(())
}

/// The requests to send: the URL, or each line of the --urls file, with the headers and body; and
/// whether their scheme names HTTP/2 (`h2c://`, `h2://`: the requests are in the http(s) spelling).
fn requests(args: &RunArgs) -> Result<(Vec<RequestSpec>, bool), ConfigError> {
    let url = args.url.clone();
    let urls_file = args.urls.clone();
    if url.is_some() && urls_file.is_some() {
        return Err(ConfigError::Conflict(
            "give a URL or --urls FILE, not both".into(),
        ));
    }
    let method = args.method.clone().expect(DEFAULTED);
    let headers = args
        .headers
        .iter()
        .map(|h| parse_header(h))
        .collect::<Result<Vec<_>, _>>()?;
    let body = match (&args.body, &args.body_file) {
        (Some(b), _) => b.clone().into_bytes(),
        (None, Some(p)) => read_file("body file", p)?,
        _ => Vec::new(),
    };
    let urls = match (&url, &urls_file) {
        (Some(u), _) => vec![(method, u.clone())],
        (None, Some(path)) => {
            let text = String::from_utf8(read_file("URL list", path)?).map_err(|_| {
                ConfigError::UrlList {
                    path: path.clone(),
                    source: plan::UrlListError {
                        line: 0,
                        why: "the file is not UTF-8 text".into(),
                    },
                }
            })?;
            parse_url_list(&text).map_err(|source| ConfigError::UrlList {
                path: path.clone(),
                source,
            })?
        }
        (None, None) => return Err(PlanError::NoRequests.into()),
    };
    let by_scheme = crate::protocol::named_by_scheme(urls.iter().map(|(_, u)| u.as_str()))?;
    let requests = urls
        .iter()
        .map(|(m, u)| {
            let (u, _) = crate::protocol::transport(u);
            RequestSpec::try_new(m, &u, headers.clone(), body.clone())
        })
        .collect::<Result<Vec<_>, _>>()?;

    Ok((requests, by_scheme))
}

/// What every request of the run shares: timeouts, URL order, source addresses, expected statuses.
fn workload(args: &RunArgs, requests: Vec<RequestSpec>) -> Result<Workload, ConfigError> {
    let timeout = dur("--timeout", &args.timeout)?.expect(DEFAULTED);
    let connect_timeout = dur("--connect-timeout", &args.connect_timeout)?.unwrap_or(timeout);
    let url_order = args.urls_order.expect(DEFAULTED);
    let source_addrs = match &args.source_addrs {
        Some(list) => plan::parse_source_addrs(&list.joined())?,
        None => Vec::new(),
    };
    let workload = Workload::try_new(requests, url_order, timeout, connect_timeout, args.insecure)?
        .with_source_addrs(source_addrs)?
        .with_tls_sessions(args.tls_sessions.expect(DEFAULTED));
    let workload = match &args.ok_status {
        Some(list) => workload.with_ok_status(StatusSet::parse(&list.joined())?),
        None => workload,
    };

    Ok(workload)
}

/// The protocol and streams per connection of the target `label` names (if any): `--http` (or
/// `--http2`) and `--streams` against what its scheme says, `by_scheme` whether it names HTTP/2;
/// with it, `--streams` asked of a target that can only be HTTP/1.1 (see `protocol::Resolved`).
fn protocol(
    args: &RunArgs,
    workload: Workload,
    by_scheme: bool,
    label: Option<&str>,
) -> Result<(Workload, Option<ProtocolError>), ConfigError> {
    let asked = args.http.or(args.http2.then_some(HttpVersion::Http2));
    let target = crate::protocol::Target {
        label,
        origin: workload.origin(),
        by_scheme,
    };
    let r = crate::protocol::resolve(target, asked, args.streams.expect(DEFAULTED))?;
    Ok((workload.with_http(r.http, r.streams)?, r.over_http1))
}

/// The refusal of a ramp without `--rate-step` (`low` below `high`): a round step that makes at most
/// eleven steps of it, and `--steps` for its two ends alone.
fn no_rate_step(low: f64, high: f64) -> String {
    // A round step, 1, 2 or 5 times a power of ten, that makes at most 10 steps past the first.
    let tenth = (high - low) / 10.0;
    let power = 10f64.powf(tenth.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| (m * power * 1e6).round() / 1e6)
        .find(|s| *s >= tenth)
        .unwrap_or(tenth);
    let steps = plan::ramp(low, high, step).map_or(0, |s| s.len());
    format!(
        "--low-rate {low} --high-rate {high} needs --rate-step, the increment between steps: e.g. \
         --rate-step {step} ({steps} steps, {low} to {high}); for the two ends alone, --steps {low},{high}"
    )
}

/// The load model and its steps: an explicit list or a ramp, and what ends each step.
fn plan(args: &RunArgs, workload: Workload, given_duration: bool) -> Result<Plan, ConfigError> {
    let model = args.model.expect(DEFAULTED);
    let arrival = args.arrival.expect(DEFAULTED);
    let explicit = args.steps.clone().map(|s| s.0);
    let low = args.low_rate;
    let high = args.high_rate;
    let step = args.rate_step;
    let steps = match (explicit, low, high, step) {
        (Some(_), Some(_), _, _) | (Some(_), _, Some(_), _) | (Some(_), _, _, Some(_)) => {
            return Err(ConfigError::Conflict(
                "give either --steps or --low-rate/--high-rate/--rate-step, not both".into(),
            ));
        }
        (Some(s), None, None, None) => s,
        (None, Some(l), Some(h), Some(s)) => plan::ramp(l, h, s)?,
        (None, Some(l), Some(h), None) => {
            // The ends are checked first (positive, in order), as a ramp's are.
            let ends = plan::ramp(l, h, if l == h { 1.0 } else { (h - l).abs() })?;
            if l != h {
                // It once ran the two ends alone, 2 steps where an autobench user expects a ramp:
                // refused, with a ramp's step and the two-step run each written out.
                return Err(ConfigError::Value(no_rate_step(l, h)));
            }
            ends
        }
        (None, Some(l), None, None) => vec![l],
        (None, None, None, None) => {
            return Err(ConfigError::NoSteps {
                url: args.url.clone().unwrap_or_else(|| "URL".into()),
            });
        }
        _ => {
            return Err(ConfigError::Conflict(
                "a ramp needs --low-rate, --high-rate and --rate-step".into(),
            ));
        }
    };
    let num_conn = args.num_conn;
    let step_duration = dur("--step-duration", &args.step_duration)?.filter(|_| given_duration);
    let limit = match (num_conn, step_duration) {
        (Some(_), Some(_)) => {
            return Err(ConfigError::Conflict(
                "give --num-conn or --step-duration, not both: a step ends on one of them".into(),
            ));
        }
        (Some(n), None) => {
            StepLimit::Connections(NonZeroU64::new(n).ok_or(PlanError::NotPositive {
                what: "--num-conn",
                value: "0".into(),
            })?)
        }
        (None, Some(d)) => StepLimit::Duration(d),
        (None, None) => {
            StepLimit::Duration(dur("--step-duration", &args.step_duration)?.expect(DEFAULTED))
        }
    };
    let nz = |what: &'static str, v: u32| {
        NonZeroU32::new(v).ok_or(PlanError::NotPositive {
            what,
            value: v.to_string(),
        })
    };
    let num_call = nz("--num-call", args.num_call.expect(DEFAULTED))?;
    let max_connections = nz("--max-connections", args.max_connections.expect(DEFAULTED))?;
    let plan = Plan::try_new(
        model,
        steps,
        limit,
        num_call,
        max_connections,
        arrival,
        workload,
    )?;
    let plan = match args.max_requests {
        Some(n) => plan.with_max_requests(NonZeroU64::new(n).ok_or(PlanError::NotPositive {
            what: "-n/--max-requests",
            value: "0".into(),
        })?)?,
        None => plan,
    };

    Ok(plan)
}

/// The token to present to agents: --token-file's first line, else STAMPEDE_TOKEN.
fn token(args: &RunArgs) -> Result<Option<String>, ConfigError> {
    Ok(match &args.token_file {
        Some(path) => {
            let raw = read_file("token file", path)?;
            let t = String::from_utf8(raw)
                .map_err(|_| {
                    ConfigError::File(format!("token file {} is not UTF-8 text", path.display()))
                })?
                .trim()
                .to_string();
            if t.is_empty() {
                return Err(ConfigError::File(format!(
                    "token file {} is empty",
                    path.display()
                )));
            }
            Some(t)
        }
        None => std::env::var("STAMPEDE_TOKEN")
            .ok()
            .filter(|t| !t.trim().is_empty())
            .map(|t| t.trim().to_string()),
    })
}

/// `--live ADDR`, `--live-keep`, `--baseline`: beyond loopback only with the fleet's token (which
/// the page then asks of every request); the baseline read now, so a bad one stops the run before
/// any load.
fn live(args: &RunArgs, token: Option<&str>) -> Result<Option<crate::live::LiveSpec>, ConfigError> {
    let Some(addr) = args.live else {
        return Ok(None);
    };
    if !addr.ip().is_loopback() && token.is_none() {
        return Err(ConfigError::Exposed(format!(
            "refusing to serve the live page on {addr} without a token: add --token-file FILE (or set \
             STAMPEDE_TOKEN), or keep it on loopback (--live 127.0.0.1:{})",
            addr.port()
        )));
    }
    let keep = args
        .live_keep
        .as_ref()
        .map(|k| parse_pause("--live-keep", &k.0))
        .transpose()?
        .unwrap_or_default();
    let baseline = match &args.baseline {
        Some(path) => {
            let file = results::run_file::path_of(path);
            let run = results::run_file::RunFile::read(&file)
                .map_err(|e| ConfigError::File(format!("--baseline {}: {e}", path.display())))?;
            Some(Box::new(run))
        }
        None => None,
    };
    Ok(Some(crate::live::LiveSpec {
        addr,
        keep,
        baseline,
        // Asked of the page's requests only beyond loopback: on loopback the page is the user's own.
        // Not the fleet's token itself: a viewer may read the run, not command its agents.
        token: token
            .filter(|_| !addr.ip().is_loopback())
            .map(crate::live::view_token),
    }))
}

/// `--listen` + `--expect-agents` and/or `--expect-monitors`: accepting agents and monitors that
/// join (monitors alone: the embedded agent sends the load), refused beyond loopback unless
/// authenticated and encrypted.
fn join(
    args: &RunArgs,
    token: Option<&str>,
    tls: Option<&control::mtls::TlsFiles>,
) -> Result<Option<JoinSpec>, ConfigError> {
    let monitors = args.expect_monitors.unwrap_or(0);
    let agents = match args.expect_agents {
        None if args.listen.is_some() && monitors > 0 => Some(0),
        None if args.listen.is_some() => {
            return Err(ConfigError::Conflict(
                "--listen needs --expect-agents N (agents that join) or --expect-monitors N (monitors that join, beside the embedded agent)".into(),
            ));
        }
        given => given,
    };
    Ok(match (args.listen, agents) {
        (Some(listen), Some(expect)) => {
            if expect == 0 && args.expect_agents.is_some() {
                return Err(PlanError::NotPositive {
                    what: "--expect-agents",
                    value: "0".into(),
                }
                .into());
            }
            if !listen.ip().is_loopback() && token.is_none() {
                return Err(ConfigError::Exposed(format!(
                    "refusing to listen on {listen} without a token: add --token-file FILE (or set STAMPEDE_TOKEN)"
                )));
            }
            if !listen.ip().is_loopback() && tls.is_none() {
                return Err(ConfigError::Exposed(format!(
                    "refusing to listen on {listen} in plain text: add --tls-cert, --tls-key and --tls-ca \
                     (make them with `stampede certs init`)"
                )));
            }
            let wait = dur("--wait-agents", &args.wait_agents)?.expect(DEFAULTED);
            Some(JoinSpec {
                listen,
                expect,
                monitors,
                wait,
                ready_file: args.ready_file.clone(),
            })
        }
        // Dialed agents waited for: `dial_wait`.
        (None, Some(_)) if args.agents.is_some() => None,
        (None, Some(_)) => {
            return Err(ConfigError::Conflict(
                "--expect-agents goes with --listen ADDR or --agents".into(),
            ));
        }
        // Only the join port is a port of `run`'s to be ready on.
        _ if args.ready_file.is_some() => {
            return Err(ConfigError::Conflict(
                "--ready-file goes with --listen ADDR".into(),
            ));
        }
        _ => None,
    })
}

/// `--expect-agents N` with `--agents`: the run starts once N agents answer (`--wait-agents` at most).
fn dial_wait(args: &RunArgs) -> Result<Option<DialWait>, ConfigError> {
    let (Some(expect), None, Some(_)) = (args.expect_agents, args.listen, &args.agents) else {
        return Ok(None);
    };
    if expect == 0 {
        return Err(PlanError::NotPositive {
            what: "--expect-agents",
            value: "0".into(),
        }
        .into());
    }
    let wait = dur("--wait-agents", &args.wait_agents)?.expect(DEFAULTED);
    Ok(Some(DialWait { expect, wait }))
}

/// What the in-process monitor watches (`--monitor-pid`, `--monitor-process`, `--monitor-cgroup`),
/// checked for what can be told before it is opened; the probe says the rest when it opens it.
fn embedded_monitor(args: &RunArgs) -> Result<Option<monitor::Watch>, ConfigError> {
    use monitor::Watch;
    let (flag, watch) = match (
        args.monitor_pid,
        &args.monitor_process,
        &args.monitor_cgroup,
    ) {
        (Some(pid), ..) => ("--monitor-pid", Watch::Pid(pid)),
        (_, Some(name), _) => ("--monitor-process", Watch::Process(name.clone())),
        (.., Some(path)) => ("--monitor-cgroup", Watch::Cgroup(path.clone())),
        _ => return Ok(None),
    };
    // A pid's words name no value of their own; the others' do.
    let shown = match &watch {
        Watch::Pid(pid) => format!(" {pid}:"),
        _ => String::new(),
    };
    crate::pairing::check_watch(&watch)
        .map(|()| Some(watch))
        .map_err(|why| ConfigError::Value(format!("{flag}{shown} {why}")))
}

/// `--agent-weights`, keyed by agent: each one `--agents` lists, by its name there. The old form,
/// one weight per agent in `--agents` order, is taken only where that order is the fleet's (agents
/// listed one by one); agents found by `dns://` or that join `--listen` are known only at the run.
fn weights(
    args: &RunArgs,
    agents: &[AgentSpec],
) -> Result<Option<Vec<(String, u64)>>, ConfigError> {
    use crate::cli::AgentWeights;
    let Some(given) = &args.agent_weights else {
        return Ok(None);
    };
    let refuse = |m: String| Err(ConfigError::Peers(m));
    if args.listen.is_some() {
        return refuse(
            "--agent-weights weighs the agents --agents lists; agents that join --listen are known only once they join"
                .into(),
        );
    }
    if agents.is_empty() {
        return refuse(
            "--agent-weights weighs the agents --agents lists; without --agents the embedded agent sends all the load"
                .into(),
        );
    }
    if agents.iter().any(|a| matches!(a, AgentSpec::Dns(_))) {
        return refuse(
            "--agent-weights needs agents listed one by one, not dns:// (whose records are known only at the run)"
                .into(),
        );
    }
    let names: Vec<&str> = agents
        .iter()
        .map(|a| match a {
            AgentSpec::Addr(n) | AgentSpec::Dns(n) => n.as_str(),
        })
        .collect();
    let keyed: Vec<(String, u64)> = match given {
        AgentWeights::InOrder(w) if w.len() != names.len() => {
            return refuse(format!(
                "--agent-weights: {} weights for {} agents; give one per agent, keyed by it: {}",
                w.len(),
                names.len(),
                names
                    .iter()
                    .map(|n| format!("{n}=1"))
                    .collect::<Vec<_>>()
                    .join(",")
            ));
        }
        AgentWeights::InOrder(w) => names
            .iter()
            .map(|n| n.to_string())
            .zip(w.iter().copied())
            .collect(),
        AgentWeights::ByAgent(w) => w.clone(),
    };
    for (i, (agent, w)) in keyed.iter().enumerate() {
        if !names.iter().any(|n| n.eq_ignore_ascii_case(agent)) {
            return refuse(format!(
                "--agent-weights names {agent}, which --agents does not list ({})",
                names.join(",")
            ));
        }
        if keyed[..i]
            .iter()
            .any(|(a, _)| a.eq_ignore_ascii_case(agent))
        {
            return refuse(format!("--agent-weights weighs {agent} twice"));
        }
        if *w == 0 {
            return refuse(format!(
                "--agent-weights {agent}={w}: a weight is a positive whole number"
            ));
        }
    }
    if let Some(missing) = names
        .iter()
        .find(|n| !keyed.iter().any(|(a, _)| a.eq_ignore_ascii_case(n)))
    {
        return refuse(format!(
            "--agent-weights gives no weight for {missing}: give one per agent --agents lists"
        ));
    }
    // Named as the fleet names them: by the entry in --agents.
    Ok(Some(
        names
            .iter()
            .map(|n| {
                let w = keyed
                    .iter()
                    .find(|(a, _)| a.eq_ignore_ascii_case(n))
                    .map_or(1, |(_, w)| *w);
                (n.to_string(), w)
            })
            .collect(),
    ))
}

/// --stop-on, --stop-after and --fail-on (the plan file's and the flags'), parsed and checked against
/// the plan: a share of the demanded rate needs a model that demands one.
fn thresholds(
    stop_on: &[String],
    stop_after: Option<u32>,
    fail_on: &[String],
    plan: &Plan,
) -> Result<Thresholds, ConfigError> {
    let stop_on = conditions("--stop-on", stop_on, plan.model())?;
    let fail_on = conditions("--fail-on", fail_on, plan.model())?;
    let stop_after = match stop_after {
        None => 1,
        Some(0) => {
            return Err(PlanError::NotPositive {
                what: "--stop-after",
                value: "0".into(),
            }
            .into());
        }
        Some(_) if stop_on.is_empty() => {
            return Err(ConfigError::Conflict(
                "--stop-after counts steps that breach a --stop-on: give --stop-on EXPR too".into(),
            ));
        }
        Some(n) => n,
    };
    Ok(Thresholds {
        stop_on,
        stop_after,
        fail_on,
    })
}

/// Expressions of the one threshold grammar, each checked against the model (the closed model
/// demands no rate, so a share of the demanded rate means nothing there).
fn conditions(
    flag: &'static str,
    list: &[String],
    model: LoadModel,
) -> Result<Vec<results::condition::Condition>, ConfigError> {
    list.iter()
        .map(|text| {
            let c = results::condition::parse(text)
                .map_err(|source| ConfigError::Condition { flag, source })?;
            if c.needs_demanded_rate() && model == LoadModel::Concurrency {
                return Err(ConfigError::Value(format!(
                    "{flag} '{text}': the concurrency model demands no rate; write ok_rate in /s (e.g. {}<{}/s)",
                    c.metric.name(),
                    c.threshold.value
                )));
            }
            Ok(c)
        })
        .collect()
}

/// An SLO is what a passing probe meets; `p99>50ms` is --stop-on's way round, a breach: refused,
/// naming the SLO meant.
fn check_slo_direction(slos: &[results::condition::Condition]) -> Result<(), ConfigError> {
    if let Some(c) = slos.iter().find(|c| !c.holds_when_good()) {
        let flipped = match (c.metric, c.cmp) {
            (results::condition::Metric::OkRate, Cmp::Lt | Cmp::Gt) => ">",
            (results::condition::Metric::OkRate, _) => ">=",
            (_, Cmp::Lt | Cmp::Gt) => "<",
            _ => "<=",
        };
        return Err(ConfigError::Search(format!(
            "--slo '{c}': an SLO says what a passing probe meets, e.g. {}{flipped}{}{} (the other way round is --stop-on's breach)",
            c.metric.name(),
            c.threshold.value,
            c.threshold.unit.symbol()
        )));
    }
    Ok(())
}

/// `--precision`: a percentage above 0 and below 100, `5%` or `5` (as `--threshold` reads one).
fn precision(text: &str) -> Result<f64, ConfigError> {
    let bad = || {
        ConfigError::Search(format!(
            "--precision '{text}': give a percentage above 0, e.g. 5% (the highest fail at most 5% above the highest pass)"
        ))
    };
    let number = text.trim().trim_end_matches('%').trim();
    let pct: f64 = number.parse().map_err(|_| bad())?;
    if !(pct > 0.0 && pct < 100.0) {
        return Err(bad());
    }
    Ok(pct / 100.0)
}

/// The closed model's default ceiling: beyond the fd limits of any one machine; the agents' announced
/// limits lower it to what they can open.
const MAX_SEARCH_CONNECTIONS: f64 = 1_000_000.0;

/// A search's warmup when none is given.
const SEARCH_WARMUP: Duration = Duration::from_secs(2);

/// The search's own warmup, a probe at --start: `--warmup` (the flag or the plan file's key, checked
/// with the run's settings) taken from the run, whose planned warmup it is not.
/// The search's settings as every target's run.json records them.
fn search_echo(
    slos: &[results::condition::Condition],
    config: &results::search::Config,
    max_rate: Option<f64>,
    warmup: Duration,
    cooldown: Duration,
) -> results::run_file::SearchEcho {
    results::run_file::SearchEcho {
        slos: slos.iter().map(ToString::to_string).collect(),
        start: config.start,
        max_rate,
        precision_pct: config.precision * 100.0,
        probe_s: config.probe_s,
        confirm_s: config.confirm_s,
        repeat: config.repeat,
        warmup_s: warmup.as_secs_f64(),
        cooldown_s: cooldown.as_secs_f64(),
        deadline_s: config.deadline_s,
    }
}

fn search_warmup(run: &mut RunConfig) -> Duration {
    run.echo.warmup_s = None;
    run.warmup.take().unwrap_or(SEARCH_WARMUP)
}

/// What a search is asked for, beside the run's own configuration.
#[derive(Debug, Clone)]
pub struct SearchSetup {
    /// The search's settings; its `max_rate` is lowered to the fleet's ceiling before it starts.
    pub search: results::search::Config,
    pub slos: Vec<results::condition::Condition>,
    /// A probe at the start rate before the search, not counted; none when zero.
    pub warmup: Duration,
    /// Idle time before every probe after the first.
    pub cooldown: Duration,
}

/// `stampede find-max`'s configuration: the run's (its steps the search's probes), or with several
/// `NAME=URL` targets one per target side by side (each searched on its own, under the same SLOs),
/// and the search's.
pub struct FindMaxConfig {
    pub runs: Runs,
    pub setup: SearchSetup,
}

impl Runs {
    /// The first (or only) target's configuration.
    pub fn first(&self) -> &RunConfig {
        match self {
            Runs::One(cfg) => cfg,
            Runs::Side(side) => &side.runs[0],
        }
    }

    fn each_mut(&mut self) -> &mut [RunConfig] {
        match self {
            Runs::One(cfg) => std::slice::from_mut(cfg.as_mut()),
            Runs::Side(side) => &mut side.runs,
        }
    }
}

/// Builds a search's configuration: `run`'s from the flags and plan file (the steps left to the
/// search: one step at --start, for the check before any load), and the search's own.
pub fn resolve_find_max(args: crate::cli::FindMaxArgs) -> Result<FindMaxConfig, ConfigError> {
    let crate::cli::FindMaxArgs {
        run: mut args,
        search,
    } = args;
    if let Some((_, flag, instead, _)) = crate::cli::FIND_MAX_REFUSED
        .iter()
        .find(|(.., given)| given(&args))
    {
        return Err(ConfigError::Search(format!(
            "find-max chooses its own steps: {flag} is not one of its flags (use {instead})"
        )));
    }
    let probe = parse_duration("--probe", &search.probe.0)?;
    let confirm = parse_duration("--confirm", &search.confirm.0)?;
    let cooldown = parse_pause("--cooldown", &search.cooldown.0)?;
    let deadline = parse_duration("--deadline", &search.deadline.0)?;
    let max_rate = search.max_rate.map(|r| r.0);
    let precision = precision(&search.precision)?;
    // The one step the plan holds is the start: every check a plan passes (its rate, the agents'
    // limits before any load) is made on it; the search gives the rest.
    args.step_duration = Some(probe.into());
    let resolve_at = |start: f64| {
        let args = RunArgs {
            steps: Some(crate::cli::Steps(vec![start])),
            ..args.clone()
        };
        resolve_runs(args)
    };
    if let Some(r) = search.start.filter(|r| !(r.0.is_finite() && r.0 > 0.0)) {
        return Err(ConfigError::Search(
            results::search::SearchConfigError::Start(r.0).to_string(),
        ));
    }
    let (start, run) = match search.start {
        Some(r) => (r.0, resolve_at(r.0)?),
        None => {
            let run = resolve_at(100.0)?;
            // The model may come from a plan file: known only once resolved.
            if run.first().plan.model() == LoadModel::Concurrency {
                (10.0, resolve_at(10.0)?)
            } else {
                (100.0, run)
            }
        }
    };
    let mut runs = run;
    // Every target's configuration comes from the same flags and plan file: the first speaks for all.
    let run = runs.first();
    // A plan file may hold them too: refused as the flags are, not kept and ignored.
    if !run.thresholds.stop_on.is_empty() || !run.thresholds.fail_on.is_empty() {
        return Err(ConfigError::Search(
            "find-max chooses its own steps: stop_on and fail_on (from the plan file) are not its settings (use --slo)"
                .into(),
        ));
    }
    let closed = run.plan.model() == LoadModel::Concurrency;
    let samples_per_unit = match run.plan.model() {
        LoadModel::Connections => u64::from(run.plan.num_call().get()),
        _ => 1,
    };
    let slos = conditions("--slo", &search.slos, run.plan.model())?;
    check_slo_direction(&slos)?;
    let config = results::search::Config {
        start,
        // The agents' own limits (their --max-rate, their sockets and fds) lower it before the search.
        max_rate: max_rate.unwrap_or(if closed {
            MAX_SEARCH_CONNECTIONS
        } else {
            plan::MAX_RATE
        }),
        precision,
        probe_s: probe.as_secs_f64(),
        confirm_s: confirm.as_secs_f64(),
        repeat: search.repeat,
        deadline_s: deadline.as_secs_f64(),
        // Each connection of the connections model makes --num-call requests, each a sample.
        samples: slos
            .iter()
            .map(results::search::probe::samples_needed)
            .max()
            .unwrap_or(0)
            .div_ceil(samples_per_unit),
        per_second: !closed,
        whole: closed,
        ..results::search::Config::default()
    };
    config
        .validate()
        .map_err(|e| ConfigError::Search(e.to_string()))?;
    if config.max_rate > plan::MAX_RATE {
        return Err(PlanError::RateRange(config.max_rate).into());
    }
    // The search's warmup is its own (a probe at --start): no target's planned run warms up too.
    let mut warmup = SEARCH_WARMUP;
    for run in runs.each_mut() {
        warmup = search_warmup(run);
    }
    let echo = search_echo(&slos, &config, max_rate, warmup, cooldown);
    for run in runs.each_mut() {
        run.echo.find_max = Some(echo.clone());
    }
    Ok(FindMaxConfig {
        runs,
        setup: SearchSetup {
            search: config,
            slos,
            warmup,
            cooldown,
        },
    })
}

fn read_file(what: &'static str, path: &Path) -> Result<Vec<u8>, ConfigError> {
    std::fs::read(path).map_err(|source| ConfigError::Read {
        what,
        path: path.to_path_buf(),
        source,
    })
}

/// The resolved plan as run.json records it.
fn echo(plan: &Plan, threads: usize) -> results::run_file::PlanEcho {
    let w = plan.workload();
    let (num_conn, step_duration_s) = match plan.limit() {
        StepLimit::Duration(d) => (None, Some(d.as_secs_f64())),
        StepLimit::Connections(n) => (Some(n.get()), None),
    };
    results::run_file::PlanEcho {
        max_requests: plan.max_requests().map(NonZeroU64::get),
        model: plan.model().name().to_string(),
        arrival: plan.arrival().name().to_string(),
        steps: plan.steps().to_vec(),
        num_call: u64::from(plan.num_call().get()),
        max_connections: u64::from(plan.max_connections().get()),
        timeout_s: w.timeout().as_secs_f64(),
        connect_timeout_s: w.connect_timeout().as_secs_f64(),
        urls_order: w.url_order().name().to_string(),
        http: Some(w.http().name().to_string()),
        streams: Some(u64::from(w.streams().get())),
        tls_sessions: (w.origin().scheme() == plan::Scheme::Https)
            .then(|| w.tls_sessions().name().to_string()),
        source_addrs: w.source_addrs().iter().map(ToString::to_string).collect(),
        ok_status: w.ok_status().to_string(),
        threads: threads as u64,
        requests: w
            .requests()
            .iter()
            .map(|r| results::run_file::RequestEcho {
                method: r.method().to_string(),
                url: format!("{}{}", r.url().origin(), r.url().path()),
                headers: r
                    .headers()
                    .iter()
                    .map(|(n, v)| format!("{n}: {v}"))
                    .collect(),
                body_bytes: r.body().len() as u64,
            })
            .collect(),
        num_conn,
        step_duration_s,
        ..results::run_file::PlanEcho::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::StringOrList;

    /// A `stampede run` command line as the binary resolves it, its error as the binary prints it.
    fn command_line(line: &str) -> Result<RunConfig, String> {
        let argv = std::iter::once("stampede").chain(line.split_whitespace());
        let cli = crate::cli::parse_from(argv)
            .map_err(|e| shared::usage::one_line(&e, crate::cli::habit_hint))?;
        match cli.command {
            crate::cli::Command::Run(a) => resolve(*a).map_err(|e| e.to_string()),
            _ => unreachable!("a run command line"),
        }
    }

    fn args(url: &str) -> RunArgs {
        RunArgs {
            plan_or_url: vec![url.into()],
            ..RunArgs::default()
        }
    }

    #[test]
    fn thresholds_from_a_plan_file_and_the_flags() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("plan.toml");
        std::fs::write(
            &p,
            "url = \"http://127.0.0.1:9/\"\nsteps = [1]\nstop_on = [\"p99 > 1s\"]\nstop_after = 2\nfail_on = [\"failed>1%\"]\n",
        )
        .unwrap();
        let plan = p.to_str().unwrap();
        let c = command_line(&format!("run {plan}")).unwrap();
        assert_eq!(c.thresholds.stop_on[0].to_string(), "p99>1s");
        assert_eq!(c.thresholds.stop_after, 2);
        assert_eq!(c.echo.fail_on[0], "failed>1%");
        // Lists add up, the file's first, as every list setting does.
        let c = command_line(&format!("run {plan} --stop-on mean>=2ms")).unwrap();
        assert_eq!(c.echo.stop_on, ["p99>1s", "mean>=2ms"]);
        std::fs::write(
            &p,
            "url = \"http://127.0.0.1:9/\"\nsteps = [1]\nfail_on = [\"p99>\"]\n",
        )
        .unwrap();
        let e = command_line(&format!("run {plan}")).unwrap_err();
        assert!(
            e.starts_with(
                "--fail-on 'p99>': expected a number after '>', found the end at column 5\n"
            ),
            "{e}"
        );
        let e = command_line("run http://127.0.0.1:9/ --steps 1 --stop-after 2").unwrap_err();
        assert!(e.contains("give --stop-on EXPR too"), "{e}");
    }

    #[test]
    fn ab_n_below_its_connections_left_connections_without_a_count() {
        let e = command_line("run http://127.0.0.1:9/ -n 1 -c 2").unwrap_err();
        assert!(
            e.starts_with("-n 1 is fewer requests than the 2 connections of a step"),
            "{e}"
        );
        assert!(command_line("run http://127.0.0.1:9/ -n 2 -c 2").is_ok());
    }

    #[test]
    fn ok_status_from_the_flag_or_the_plan_file() {
        let c = command_line("run http://127.0.0.1:9/ --steps 1 --ok-status 200,404").unwrap();
        assert!(c.plan.workload().ok_status().contains(404));
        assert!(!c.plan.workload().ok_status().contains(201));
        assert_eq!(c.echo.ok_status, "200,404");
        let c = command_line("run http://127.0.0.1:9/ --steps 1").unwrap();
        assert_eq!(c.echo.ok_status, "200-399");
        let e = command_line("run http://127.0.0.1:9/ --steps 1 --ok-status 200-2xx").unwrap_err();
        assert!(e.starts_with("bad --ok-status '200-2xx'"), "{e}");
    }

    #[test]
    fn ramp_from_flags() {
        let mut a = args("http://127.0.0.1:1/");
        a.low_rate = Some(10.0);
        a.high_rate = Some(30.0);
        a.rate_step = Some(10.0);
        a.num_call = Some(10);
        let c = resolve(a).unwrap();
        assert_eq!(c.plan.steps(), vec![10.0, 20.0, 30.0]);
        assert_eq!(c.plan.demanded_request_rate(20.0), Some(200.0));
        assert_eq!(c.host, "127.0.0.1");
    }

    #[test]
    fn bad_inputs_say_what_is_wrong() {
        let mut a = args("http://h/");
        a.low_rate = Some(50.0);
        a.high_rate = Some(10.0);
        assert_eq!(
            resolve(a).unwrap_err().to_string(),
            "--low-rate (50) is above --high-rate (10)"
        );
        let mut a = args("http://h/");
        a.steps = Some(Steps(vec![10.0, 0.0]));
        assert!(
            resolve(a)
                .unwrap_err()
                .to_string()
                .contains("must be a positive number, got 0")
        );
        let mut a = args("http://h/");
        a.steps = Some(Steps(vec![1.0]));
        a.step_duration = Some(DurationText("soon".into()));
        assert!(
            resolve(a)
                .unwrap_err()
                .to_string()
                .contains("'soon' is not a duration")
        );
        assert_eq!(
            command_line("run --steps 1 --model closed http://h/").unwrap_err(),
            "--model: unknown value 'closed': use connections, requests or concurrency"
        );
        assert!(
            resolve(args("http://h/"))
                .unwrap_err()
                .to_string()
                .contains("no steps")
        );
    }

    #[test]
    fn plan_file_with_flags_overriding() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("plan.toml");
        std::fs::write(
            &p,
            "url = \"http://127.0.0.1:9/x\"\nmodel = \"requests\"\nsteps = [5, 10]\nconst_test_time = 3\n",
        )
        .unwrap();
        let mut a = args(p.to_str().unwrap());
        a.steps = Some(Steps(vec![7.0]));
        let c = resolve(a).unwrap();
        assert_eq!(c.plan.model(), LoadModel::Requests);
        assert_eq!(c.plan.steps(), vec![7.0]);
        assert_eq!(c.plan.limit(), StepLimit::Duration(Duration::from_secs(3)));
    }

    #[test]
    fn source_addrs_from_flag_or_plan_file() {
        let mut a = args("http://127.0.0.1:9/");
        a.steps = Some(Steps(vec![1.0]));
        a.source_addrs = Some(StringOrList::One("127.0.0.1-127.0.0.3".into()));
        let c = resolve(a).unwrap();
        assert_eq!(c.plan.workload().source_addrs().len(), 3);
        assert_eq!(c.echo.source_addrs[2], "127.0.0.3");

        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("plan.toml");
        for (value, expected) in [
            ("\"127.0.0.2,127.0.0.3\"", vec!["127.0.0.2", "127.0.0.3"]),
            (
                "[\"127.0.0.2\", \"127.0.0.4-127.0.0.5\"]",
                vec!["127.0.0.2", "127.0.0.4", "127.0.0.5"],
            ),
        ] {
            std::fs::write(
                &p,
                format!("url = \"http://127.0.0.1:9/\"\nsteps = [1]\nsource_addrs = {value}\n"),
            )
            .unwrap();
            let c = resolve(args(p.to_str().unwrap())).unwrap();
            let got: Vec<String> = c
                .plan
                .workload()
                .source_addrs()
                .iter()
                .map(ToString::to_string)
                .collect();
            assert_eq!(got, expected);
        }
        // The flag overrides the file.
        let mut a = args(p.to_str().unwrap());
        a.source_addrs = Some(StringOrList::One("127.0.0.9".into()));
        assert_eq!(resolve(a).unwrap().plan.workload().source_addrs().len(), 1);

        let mut a = args("http://[::1]:9/");
        a.steps = Some(Steps(vec![1.0]));
        a.source_addrs = Some(StringOrList::One("127.0.0.2".into()));
        let e = resolve(a).unwrap_err().to_string();
        assert!(
            e.contains("--source-addrs are IPv4 but the target [::1]:9 is IPv6"),
            "{e}"
        );
    }

    #[test]
    fn plan_file_errors_name_line_and_column() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("plan.toml");
        std::fs::write(&p, "url = \"http://h/\"\nrat = 5\n").unwrap();
        let e = resolve(args(p.to_str().unwrap())).unwrap_err().to_string();
        assert!(e.contains("line 2, column 1"), "{e}");
        assert!(e.contains("unknown key `rat`: did you mean `rate`?"), "{e}");
    }

    #[test]
    fn a_plan_file_key_typo_dumped_every_key() {
        // Regression: `step_duraton` was answered with serde's list of all 64 keys.
        let unknown = |text: &str| unknown_key(text).expect("an unknown key");
        let typo = unknown("url = \"http://h/\"\nsteps = [1]\nstep_duraton = \"5s\"\n");
        assert_eq!(
            typo,
            UnknownKey {
                key: "step_duraton".into(),
                line: 3,
                column: 1,
                meant: Some("step_duration"),
            }
        );
        assert_eq!(
            typo.to_string(),
            "line 3, column 1: unknown key `step_duraton`: did you mean `step_duration`?"
        );
        // The flag's spelling is its key.
        for flag in ["step-duration", "--step-duration"] {
            assert_eq!(
                unknown(&format!("{flag} = \"5s\"\n")).meant,
                Some("step_duration")
            );
        }
        assert_eq!(
            unknown("max-connections = 5\n").meant,
            Some("max_connections")
        );
        assert_eq!(unknown("header = [\"A: b\"]\n").meant, Some("headers"));
        // The first in the file, not in the alphabet.
        assert_eq!(unknown("zzz = 1\naaa = 2\n").key, "zzz");
        // Far from every key: no guess, and no list of them all.
        let far = unknown("colour = \"blue\"\n");
        assert_eq!(far.meant, None);
        let said = far.to_string();
        assert!(said.contains("no setting is called that"), "{said}");
        assert!(!said.contains("expected one of"), "{said}");
        // Known keys and aliases, a nested table, and a file that is no TOML at all pass to serde.
        assert_eq!(
            unknown_key("const_test_time = 3\nduration = \"1s\"\n[agent_weights]\n\"a:1\" = 2\n"),
            None
        );
        assert_eq!(unknown_key("url = "), None);
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("plan.toml");
        std::fs::write(&p, "url = \"http://h/\"\nstep_duraton = 5\n").unwrap();
        let e = resolve(args(p.to_str().unwrap())).unwrap_err().to_string();
        assert!(
            e.ends_with(
                "line 2, column 1: unknown key `step_duraton`: did you mean `step_duration`?"
            ),
            "{e}"
        );
    }

    #[test]
    fn the_plan_keys_are_serde_s_fields_and_aliases() {
        let keys = crate::cli::plan_keys();
        for key in [
            "url",
            "step_duration",
            "const_test_time",
            "duration",
            "monitor_target",
        ] {
            assert!(keys.contains(&key), "{key}: {keys:?}");
        }
        // What serde skips is no key: the positionals and the habits with no meaning in a file.
        for skipped in ["plan_or_url", "wrk_latency", "ab_keep_alive"] {
            assert!(!keys.contains(&skipped), "{skipped}");
        }
        assert!(keys.len() > 60, "{}", keys.len());
    }

    #[test]
    fn a_ramp_without_rate_step_ran_its_two_ends() {
        // Regression: `--low-rate 100 --high-rate 500` alone silently ran 2 steps of 10 s.
        let e = command_line("run http://h:1/ --low-rate 100 --high-rate 500").unwrap_err();
        assert_eq!(
            e,
            "--low-rate 100 --high-rate 500 needs --rate-step, the increment between steps: e.g. \
             --rate-step 50 (9 steps, 100 to 500); for the two ends alone, --steps 100,500"
        );
        let said = command_line("run http://h:1/ --low-rate 0.1 --high-rate 0.3").unwrap_err();
        assert!(said.contains("--rate-step 0.02 (11 steps"), "{said}");
        // The ends are checked before the step is asked for; equal ends are one step.
        assert_eq!(
            command_line("run http://h:1/ --low-rate 50 --high-rate 10").unwrap_err(),
            "--low-rate (50) is above --high-rate (10)"
        );
        let one = command_line("run http://h:1/ --low-rate 40 --high-rate 40").unwrap();
        assert_eq!(one.plan.steps(), vec![40.0]);
        let e = command_line("run http://h:1/ --high-rate 40 --rate-step 5").unwrap_err();
        assert_eq!(e, "a ramp needs --low-rate, --high-rate and --rate-step");
    }

    #[test]
    fn run_url_alone_was_refused_without_the_one_liner() {
        let e = command_line("run http://127.0.0.1:8080/").unwrap_err();
        assert!(
            e.starts_with(
                "no steps: say what load to send, e.g. `stampede run http://127.0.0.1:8080/ -c 10 -d 10s`"
            ),
            "{e}"
        );
        // The one-liner it offers runs.
        let c = command_line("run http://127.0.0.1:8080/ -c 10 -d 10s").unwrap();
        assert_eq!(c.plan.steps(), vec![10.0]);
        assert!(command_line("run http://127.0.0.1:8080/ -R 1000 -d 10s").is_ok());
        assert!(
            command_line("run http://h:1/ --low-rate 100 --high-rate 1000 --rate-step 100").is_ok()
        );
    }

    #[test]
    fn a_duration_flag_took_the_next_flag_as_its_value() {
        // Regression: "cannot read plan file m4" and "must be a positive number, got --quiet".
        assert_eq!(
            command_line("run http://h:1/ -c 1 -d --out m4").unwrap_err(),
            "--step-duration needs a value: '--out' is the next option"
        );
        assert_eq!(
            command_line("run http://h:1/ -c 1 --timeout --quiet").unwrap_err(),
            "--timeout needs a value: '--quiet' is the next option"
        );
        assert_eq!(
            command_line("run http://h:1/ -c 1 --warmup -q 5").unwrap_err(),
            "--warmup needs a value: '-q' is the next option"
        );
        // A negative duration is still a value, refused as one.
        let e = command_line("run http://h:1/ -c 1 -d -5s").unwrap_err();
        assert!(e.contains("-5s"), "{e}");
    }

    #[test]
    fn agent_lists_parse_and_bad_entries_are_named() {
        assert_eq!(
            parse_agents("a:1,dns://agent:7700").unwrap(),
            vec![
                AgentSpec::Addr("a:1".into()),
                AgentSpec::Dns("agent:7700".into())
            ]
        );
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("agents");
        std::fs::write(&f, "# fleet\n10.0.0.1:7700\n\n[::1]:7700 # local\n").unwrap();
        let parsed = parse_agents(&format!("@{}", f.display())).unwrap();
        assert_eq!(
            parsed,
            vec![
                AgentSpec::Addr("10.0.0.1:7700".into()),
                AgentSpec::Addr("[::1]:7700".into())
            ]
        );
        assert!(
            parse_agents("a:1,nohost")
                .unwrap_err()
                .to_string()
                .contains("entry 2 'nohost'")
        );
        assert!(parse_agents("http://a:1").is_err());
        assert!(parse_agents("a:0").is_err());
        assert!(parse_agents(" , ").is_err());
    }

    #[test]
    fn waiting_for_agents_beyond_loopback_needs_a_token() {
        let mut a = args("http://127.0.0.1:1/");
        a.steps = Some(Steps(vec![1.0]));
        a.listen = Some("0.0.0.0:7800".parse().unwrap());
        a.expect_agents = Some(2);
        a.token_file = None;
        // The token may also come from the environment; only check when it does not.
        if std::env::var_os("STAMPEDE_TOKEN").is_none() {
            let e = resolve(a).unwrap_err().to_string();
            assert!(e.contains("without a token: add --token-file FILE"), "{e}");
        }
    }

    #[test]
    fn expect_agents_with_dialed_agents_waits_for_them() {
        let mut a = args("http://127.0.0.1:1/");
        a.steps = Some(Steps(vec![1.0]));
        a.agents = Some("dns://agents.internal:7700".into());
        a.expect_agents = Some(3);
        a.wait_agents = Some(DurationText("90s".into()));
        let cfg = resolve(a.clone()).unwrap();
        assert_eq!(
            cfg.dial_wait,
            Some(DialWait {
                expect: 3,
                wait: Duration::from_secs(90)
            })
        );
        assert_eq!(cfg.join, None);
        a.expect_agents = Some(0);
        let e = resolve(a.clone()).unwrap_err().to_string();
        assert!(e.contains("--expect-agents"), "{e}");
        a.agents = None;
        a.expect_agents = Some(3);
        let e = resolve(a).unwrap_err().to_string();
        assert!(
            e.contains("--expect-agents goes with --listen ADDR or --agents"),
            "{e}"
        );
    }

    #[test]
    fn a_join_port_waits_for_agents_or_monitors() {
        let mut a = args("http://127.0.0.1:1/");
        a.steps = Some(Steps(vec![1.0]));
        a.listen = Some("127.0.0.1:7800".parse().unwrap());
        let e = resolve(a.clone()).unwrap_err().to_string();
        assert!(
            e.contains("--expect-agents N") && e.contains("--expect-monitors N"),
            "{e}"
        );
        a.expect_monitors = Some(1);
        let run = resolve(a).unwrap();
        let join = run.join.expect("a join port");
        assert_eq!((join.expect, join.monitors), (0, 1));
    }

    #[test]
    fn a_ready_file_goes_with_a_join_port() {
        let mut a = args("http://127.0.0.1:1/");
        a.steps = Some(Steps(vec![1.0]));
        a.ready_file = Some("ready.json".into());
        let e = resolve(a.clone()).unwrap_err().to_string();
        assert!(e.contains("--ready-file goes with --listen ADDR"), "{e}");
        a.listen = Some("127.0.0.1:0".parse().unwrap());
        a.expect_agents = Some(1);
        let join = resolve(a).unwrap().join.expect("a join port");
        assert_eq!(join.ready_file, Some("ready.json".into()));
    }

    /// A command line as [`resolve_runs`] takes it, its error as the binary prints it.
    fn runs_of(line: &str) -> Result<Runs, String> {
        let argv = std::iter::once("stampede").chain(line.split_whitespace());
        let cli = crate::cli::parse_from(argv)
            .map_err(|e| shared::usage::one_line(&e, crate::cli::habit_hint))?;
        match cli.command {
            crate::cli::Command::Run(a) => resolve_runs(*a).map_err(|e| e.to_string()),
            _ => unreachable!("a run command line"),
        }
    }

    /// A `stampede find-max` command line as the binary resolves it, its error as the binary prints it.
    fn search_of(line: &str) -> Result<FindMaxConfig, String> {
        let argv = std::iter::once("stampede").chain(line.split_whitespace());
        let cli = crate::cli::parse_from(argv)
            .map_err(|e| shared::usage::one_line(&e, crate::cli::habit_hint))?;
        match cli.command {
            crate::cli::Command::FindMax(a) => resolve_find_max(*a).map_err(|e| e.to_string()),
            _ => unreachable!("a find-max command line"),
        }
    }

    #[test]
    fn find_max_took_several_targets_each_named_and_refused_flags_as_for_one() {
        let cfg = search_of(
            "find-max go=http://h:1/ node=http://h:2/ --slo p99<50ms --model requests --out o",
        )
        .unwrap();
        assert_eq!(cfg.setup.slos.len(), 1);
        let Runs::Side(side) = cfg.runs else {
            panic!("two targets side by side")
        };
        assert_eq!(side.dir, PathBuf::from("o"));
        let got: Vec<_> = side
            .runs
            .iter()
            .map(|c| {
                (
                    c.label.as_deref().unwrap(),
                    c.plan.workload().origin().origin(),
                    c.out.clone(),
                    c.plan.steps().to_vec(),
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                (
                    "go",
                    "http://h:1".to_string(),
                    PathBuf::from("o/go"),
                    vec![100.0]
                ),
                (
                    "node",
                    "http://h:2".to_string(),
                    PathBuf::from("o/node"),
                    vec![100.0]
                ),
            ]
        );
        // Each target's run.json says it was a search, with the same settings.
        let echoes: Vec<_> = side.runs.iter().map(|c| c.echo.find_max.clone()).collect();
        assert!(echoes[0].is_some() && echoes[0] == echoes[1], "{echoes:?}");
        // Several targets must each be named, and find-max's refusals hold for them all.
        let e = search_of("find-max go=http://h:1/ http://h:2/ --slo p99<50ms")
            .err()
            .unwrap();
        assert!(e.starts_with("target 2 (http://h:2/) has no label"), "{e}");
        let e = search_of("find-max go=http://h:1/ node=http://h:2/ --steps 10,20")
            .err()
            .unwrap();
        assert_eq!(
            e,
            "find-max chooses its own steps: --steps is not one of its flags (use --start and --max-rate)"
        );
        let e = search_of("find-max go=http://h:1/ node=http://h:2/ --label x")
            .err()
            .unwrap();
        assert_eq!(
            e,
            "--label names a run of one target; several are named NAME=URL each"
        );
    }

    #[test]
    fn monitors_are_paired_with_targets_by_name_from_flags_or_a_plan_file() {
        let Runs::Side(side) = runs_of(
            "run go=http://h:1/ node=http://h:2/ --steps 1 --monitor-target go=pid:7 --monitor-target node=process:node",
        )
        .unwrap() else {
            panic!("two targets")
        };
        for cfg in &side.runs {
            assert_eq!(
                cfg.paired.len(),
                2,
                "every lane runs every in-process monitor"
            );
            let lane = cfg.label.as_deref();
            let own = cfg.pairing.watches(lane, lane.unwrap());
            assert_eq!(own, Some(monitor::step::Watches::Target));
        }
        let e =
            runs_of("run go=http://h:1/ node=http://h:2/ --steps 1 --monitor-target rust=pid:7")
                .err()
                .unwrap();
        assert!(
            e.contains("names no target (the targets are go, node)"),
            "{e}"
        );
        // One target, named: paired; unnamed: nothing to pair with.
        assert!(command_line("run web=http://h:1/ --steps 1 --monitor-target web=pid:7").is_ok());
        let e = command_line("run http://h:1/ --steps 1 --monitor-target web=pid:7").unwrap_err();
        assert!(e.contains("the target has no name"), "{e}");
        let dir = tempfile::tempdir().unwrap();
        let plan = dir.path().join("p.toml");
        std::fs::write(
            &plan,
            "url = \"http://h:1/\"\nsteps = [1]\nlabel = \"web\"\nmonitor_target = [\"web=process:nginx\"]\n",
        )
        .unwrap();
        let c = command_line(&format!("run {}", plan.display())).unwrap();
        assert_eq!(c.paired[0].watch, monitor::Watch::Process("nginx".into()));
    }

    #[test]
    fn named_targets_run_side_by_side_each_into_its_label() {
        let Runs::Side(side) = runs_of(
            "run nginx=http://127.0.0.1:8080/a?x=1 app=http://localhost:8081/b --steps 5,10 -H X-A:1 --out res/x",
        )
        .unwrap() else {
            panic!("two targets run side by side");
        };
        assert_eq!(side.dir, PathBuf::from("res/x"));
        assert!(!side.dir_default);
        let got: Vec<_> = side
            .runs
            .iter()
            .map(|c| {
                (
                    c.label.as_deref().unwrap(),
                    c.out.display().to_string(),
                    c.host.as_str(),
                    c.echo.requests[0].url.clone(),
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                (
                    "nginx",
                    "res/x/nginx".into(),
                    "127.0.0.1",
                    "http://127.0.0.1:8080/a?x=1".into()
                ),
                (
                    "app",
                    "res/x/app".into(),
                    "localhost",
                    "http://localhost:8081/b".into()
                ),
            ]
        );
        // The same workload flags for every target: only the URL differs.
        for c in &side.runs {
            assert_eq!(c.plan.steps(), vec![5.0, 10.0]);
            assert_eq!(c.echo.requests[0].headers[0], "X-A: 1");
            assert!(!c.out_default);
        }
        let Runs::Side(side) = runs_of("run a=http://h:1/ b=http://h:2/ --steps 1").unwrap() else {
            panic!("two targets");
        };
        assert!(side.dir_default);
        assert!(side.dir.starts_with("stampede-results"));
        assert_eq!(side.runs[1].out, side.dir.join("b"), "one stamp for all");
    }

    #[test]
    fn a_single_target_is_named_by_its_label() {
        let one = |line: &str| match runs_of(line) {
            Ok(Runs::One(c)) => Ok(c.label),
            Ok(Runs::Side(_)) => panic!("one target: {line}"),
            Err(e) => Err(e),
        };
        assert_eq!(one("run http://h:1/ --steps 1").unwrap(), None);
        assert_eq!(
            one("run http://h:1/ --steps 1 --label nginx-1.27")
                .unwrap()
                .as_deref(),
            Some("nginx-1.27")
        );
        assert_eq!(
            one("run nginx=http://h:1/ --steps 1").unwrap().as_deref(),
            Some("nginx")
        );
        assert_eq!(
            one("run nginx=http://h:1/ --steps 1 --label nginx")
                .unwrap()
                .as_deref(),
            Some("nginx"),
            "the same name twice is one name"
        );
        let e = one("run nginx=http://h:1/ --steps 1 --label app").unwrap_err();
        assert_eq!(
            e,
            "the target is named twice, nginx= and --label app: give one"
        );
        let e = one("run http://h:1/ --steps 1 --label ..").unwrap_err();
        assert!(
            e.starts_with("label '..' is not a valid directory name"),
            "{e}"
        );
        // A plan file's label, and the flag's over it.
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("plan.toml");
        std::fs::write(
            &p,
            "url = \"http://h:1/\"\nsteps = [1]\nlabel = \"from-file\"\n",
        )
        .unwrap();
        let plan = p.display();
        assert_eq!(
            one(&format!("run {plan}")).unwrap().as_deref(),
            Some("from-file")
        );
        assert_eq!(
            one(&format!("run {plan} --label flag")).unwrap().as_deref(),
            Some("flag")
        );
        std::fs::write(&p, "url = \"http://h:1/\"\nsteps = [1]\nlabel = \"a/b\"\n").unwrap();
        let e = one(&format!("run {plan}")).unwrap_err();
        assert!(
            e.starts_with("label 'a/b' is not a valid directory name"),
            "{e}"
        );
    }

    #[test]
    fn several_targets_refuse_what_names_one() {
        let e = runs_of("run a=http://h:1/ b=http://h:2/ --steps 1 --label x")
            .err()
            .unwrap();
        assert_eq!(
            e,
            "--label names a run of one target; several are named NAME=URL each"
        );
        let e = runs_of("run a=http://h:1/ b=http://h:2/ --steps 1 --url http://h:3/")
            .err()
            .unwrap();
        assert!(
            e.starts_with("give the targets as NAME=URL arguments, without --url or --urls"),
            "{e}"
        );
        let e = runs_of("run a=http://h:1/ http://h:2/ --steps 1")
            .err()
            .unwrap();
        assert!(e.starts_with("target 2 (http://h:2/) has no label"), "{e}");
        let e = runs_of("run a=http://h:1/ a=http://h:2/ --steps 1")
            .err()
            .unwrap();
        assert_eq!(
            e,
            "label 'a' names targets 1 and 2: each target needs its own"
        );
        // Every target's own configuration is checked: a bad URL is named.
        let e = runs_of("run a=http://h:1/ b=http://h:x/ --steps 1")
            .err()
            .unwrap();
        assert!(e.contains("http://h:x/"), "{e}");
        // A plan file with several targets: its url is theirs to replace.
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("plan.toml");
        std::fs::write(
            &p,
            "url = \"http://h:1/\"\nsteps = [1]\nmodel = \"requests\"\n",
        )
        .unwrap();
        let Runs::Side(side) =
            runs_of(&format!("run {} a=http://h:7/ b=http://h:8/", p.display())).unwrap()
        else {
            panic!("two targets");
        };
        assert_eq!(side.runs[1].echo.requests[0].url, "http://h:8/");
        assert_eq!(side.runs[1].plan.model(), LoadModel::Requests);
    }

    /// A plan file `text` in a directory of its own, and the command line `flags` run with it.
    fn with_plan(text: &str, flags: &str) -> (tempfile::TempDir, Result<RunConfig, ConfigError>) {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("plan.toml");
        std::fs::write(&p, text).unwrap();
        let line = format!("stampede run {} {flags}", p.display());
        let cli = crate::cli::parse_from(line.split_whitespace()).unwrap();
        let crate::cli::Command::Run(a) = cli.command else {
            unreachable!("a run command line")
        };
        (dir, resolve(*a))
    }

    #[test]
    fn a_plan_file_with_agents_listen_and_weights_panicked() {
        let plan = "url = \"http://127.0.0.1:9/\"\nsteps = [1]\nagents = \"127.0.0.1:7700,127.0.0.1:7701\"\n\
                    listen = \"127.0.0.1:7800\"\nexpect_agents = 1\nagent_weights = [1, 2]\n";
        let (dir, got) = with_plan(plan, "");
        let e = got.unwrap_err();
        assert!(matches!(e, ConfigError::Conflict(_)), "{e:?}");
        let words = e.to_string();
        assert!(
            words.contains("listen or agents, not both")
                && words.contains(&dir.path().join("plan.toml").display().to_string()),
            "{words}"
        );
    }

    #[test]
    fn a_plan_file_bypassed_the_flags_conflicts() {
        for (keys, both) in [
            ("body = \"a\"\nbody_file = \"b\"\n", "body or body_file"),
            (
                "monitor_pid = 1\nmonitor_process = \"nginx\"\n",
                "monitor_pid or monitor_process",
            ),
            (
                "monitor_process = \"nginx\"\nmonitor_cgroup = \"/sys/fs/cgroup/x\"\n",
                "monitor_process or monitor_cgroup",
            ),
        ] {
            let (_dir, got) = with_plan(&format!("url = \"http://h:1/\"\nsteps = [1]\n{keys}"), "");
            let e = got.unwrap_err();
            assert!(matches!(e, ConfigError::Conflict(_)), "{e:?}");
            assert!(e.to_string().contains(both), "{e}");
            assert!(e.to_string().starts_with("plan file "), "{e}");
        }
        // What a setting needs, from the file: expect_monitors was ignored without listen.
        let (_dir, got) = with_plan(
            "url = \"http://h:1/\"\nsteps = [1]\nexpect_monitors = 1\n",
            "",
        );
        let e = got.unwrap_err();
        assert!(matches!(e, ConfigError::Conflict(_)), "{e:?}");
        assert!(
            e.to_string().contains("expect_monitors needs listen"),
            "{e}"
        );
        // The need met the other way round: the flag, its listen in the file (clap refused it).
        let (_dir, got) = with_plan(
            "url = \"http://h:1/\"\nsteps = [1]\nlisten = \"127.0.0.1:0\"\n",
            "--expect-monitors 1",
        );
        assert_eq!(got.unwrap().join.unwrap().monitors, 1);
        // The flags alone, as clap refuses them (tests build RunArgs without clap).
        let mut a = args("http://h:1/");
        a.steps = Some(Steps(vec![1.0]));
        a.body = Some("x".into());
        a.body_file = Some("y".into());
        let e = resolve(a).unwrap_err();
        assert!(matches!(e, ConfigError::Conflict(_)), "{e:?}");
        assert_eq!(e.to_string(), "give --body or --body-file, not both");
    }

    #[test]
    fn a_plans_body_beat_the_flag_body_file() {
        let (dir, _) = with_plan("", "");
        let f = dir.path().join("body.txt");
        std::fs::write(&f, "from the file").unwrap();
        let plan = "url = \"http://h:1/\"\nsteps = [1]\nbody = \"from the plan\"\n";
        let (_d, got) = with_plan(plan, &format!("--body-file {}", f.display()));
        let cfg = got.unwrap();
        assert_eq!(cfg.plan.workload().requests()[0].body(), b"from the file");
        // And the other way round: a flag --body over the plan's body_file.
        let plan = format!(
            "url = \"http://h:1/\"\nsteps = [1]\nbody_file = \"{}\"\n",
            f.display()
        );
        let (_d, got) = with_plan(&plan, "--body flag");
        assert_eq!(got.unwrap().plan.workload().requests()[0].body(), b"flag");
        // A flag --agents over a plan's listen: where the agents are is one setting.
        let plan =
            "url = \"http://h:1/\"\nsteps = [1]\nlisten = \"127.0.0.1:0\"\nexpect_agents = 1\n";
        let (_d, got) = with_plan(plan, "--agents 127.0.0.1:7700");
        let cfg = got.unwrap();
        assert_eq!(cfg.join, None);
        assert_eq!(cfg.agents, vec![AgentSpec::Addr("127.0.0.1:7700".into())]);
    }

    #[test]
    fn agent_weights_went_by_position_in_the_fleet() {
        let weights = |line: &str| {
            let argv = std::iter::once("stampede").chain(line.split_whitespace());
            let cli = crate::cli::parse_from(argv).unwrap();
            let crate::cli::Command::Run(a) = cli.command else {
                unreachable!()
            };
            resolve(*a).map(|c| c.agent_weights)
        };
        let both = vec![("a:1".to_string(), 1), ("b:2".to_string(), 3)];
        assert_eq!(
            weights("run http://h:1/ --steps 1 --agents a:1,b:2 --agent-weights b:2=3,a:1=1")
                .unwrap(),
            Some(both.clone())
        );
        // The old form where the order is the fleet's: agents listed one by one.
        assert_eq!(
            weights("run http://h:1/ --steps 1 --agents a:1,b:2 --agent-weights 1,3").unwrap(),
            Some(both)
        );
        for (line, words) in [
            (
                "--agents a:1,b:2 --agent-weights a:1=1",
                "no weight for b:2",
            ),
            (
                "--agents a:1,b:2 --agent-weights a:1=1,c:3=1,b:2=1",
                "names c:3, which --agents does not list",
            ),
            (
                "--agents a:1,b:2 --agent-weights 1,2,3",
                "3 weights for 2 agents",
            ),
            (
                "--agents a:1,b:2 --agent-weights a:1=0,b:2=1",
                "a weight is a positive whole number",
            ),
            ("--agents dns://agents:7700 --agent-weights 1", "not dns://"),
            ("--agent-weights 1", "without --agents the embedded agent"),
            (
                "--listen 127.0.0.1:0 --expect-agents 2 --agent-weights 1,2",
                "agents that join --listen are known only once they join",
            ),
        ] {
            let e = weights(&format!("run http://h:1/ --steps 1 {line}")).unwrap_err();
            assert!(matches!(e, ConfigError::Peers(_)), "{line}: {e:?}");
            assert!(e.to_string().contains(words), "{line}: {e}");
        }
        // The plan file's table, keyed by agent.
        let (_d, got) = with_plan(
            "url = \"http://h:1/\"\nsteps = [1]\nagents = \"a:1,b:2\"\nagent_weights = { \"b:2\" = 5, \"a:1\" = 2 }\n",
            "",
        );
        assert_eq!(
            got.unwrap().agent_weights,
            Some(vec![("a:1".to_string(), 2), ("b:2".to_string(), 5)])
        );
        let e = command_line("run http://h:1/ --steps 1 --agents a:1,b:2 --agent-weights a:1=1,2")
            .unwrap_err();
        assert!(
            e.contains("mixes AGENT=WEIGHT entries with bare weights"),
            "{e}"
        );
    }

    #[test]
    fn the_same_agent_listed_twice_was_refused_as_serving_another_coordinator() {
        let e = parse_agents("a:1,b:2,a:1").unwrap_err();
        assert!(matches!(e, ConfigError::Peers(_)), "{e:?}");
        assert_eq!(
            e.to_string(),
            "--agents names a:1 twice (entries 1 and 3): list each agent once"
        );
        let e = parse_peers("--monitors", "m:1,m:1").unwrap_err();
        assert!(e.to_string().contains("list each monitor once"), "{e}");
    }

    #[test]
    fn wrk_latency_and_ab_k_were_refused() {
        let c = command_line("run http://h:1/ --steps 1 --latency -k").unwrap();
        assert_eq!(c.notes.len(), 2, "{:?}", c.notes);
        assert!(
            c.notes[0]
                .starts_with("--latency: stampede always records the full latency distribution"),
            "{:?}",
            c.notes
        );
        assert!(c.notes[1].starts_with("-k: "), "{:?}", c.notes);
        let c = command_line("run http://h:1/ -c 10 -L").unwrap();
        assert_eq!(c.notes.len(), 1);
        assert!(
            command_line("run http://h:1/ --steps 1")
                .unwrap()
                .notes
                .is_empty()
        );
    }

    #[test]
    fn config_errors_were_one_kind_told_apart_only_by_words() {
        let run = |line: &str| {
            let argv = std::iter::once("stampede").chain(line.split_whitespace());
            match crate::cli::parse_from(argv).unwrap().command {
                crate::cli::Command::Run(a) => resolve(*a).unwrap_err(),
                crate::cli::Command::FindMax(a) => resolve_find_max(*a).err().unwrap(),
                _ => unreachable!(),
            }
        };
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("token");
        std::fs::write(&empty, "\n").unwrap();
        type IsKind = fn(&ConfigError) -> bool;
        let cases: Vec<(String, IsKind)> = vec![
            (
                "run http://h:1/ --steps 1 --num-conn 5 --step-duration 1s".into(),
                |e| matches!(e, ConfigError::Conflict(_)),
            ),
            ("run http://h:1/ -c 50 --model connections".into(), |e| {
                matches!(e, ConfigError::Habit(_))
            }),
            ("run http://h:1/ --steps 1 --monitor-pid 0".into(), |e| {
                matches!(e, ConfigError::Value(_))
            }),
            (
                format!("run http://h:1/ --steps 1 --token-file {}", empty.display()),
                |e| matches!(e, ConfigError::File(_)),
            ),
            (
                "run http://h:1/ --steps 1 --agents a:1,nohost".into(),
                |e| matches!(e, ConfigError::Peers(_)),
            ),
            ("find-max http://h:1/ --slo p99>50ms".into(), |e| {
                matches!(e, ConfigError::Search(_))
            }),
            ("find-max http://h:1/ --precision 0".into(), |e| {
                matches!(e, ConfigError::Search(_))
            }),
        ];
        for (line, kind) in cases {
            let e = run(&line);
            assert!(kind(&e), "{line}: {e:?}");
        }
        if std::env::var_os("STAMPEDE_TOKEN").is_none() {
            let e = run("run http://h:1/ --steps 1 --listen 0.0.0.0:7800 --expect-agents 1");
            assert!(matches!(e, ConfigError::Exposed(_)), "{e:?}");
        }
    }

    #[test]
    fn monitor_process_could_not_be_told_that_many_are_meant() {
        let c = command_line("run http://h:1/ --steps 1 --monitor-process nginx").unwrap();
        assert_eq!(c.monitor_processes, 64);
        let c = command_line(
            "run http://h:1/ --steps 1 --monitor-process python3 --monitor-processes 300",
        )
        .unwrap();
        assert_eq!(c.monitor_processes, 300);
    }

    #[test]
    fn durations_parse_both_ways() {
        assert_eq!(parse_duration("x", "10s").unwrap(), Duration::from_secs(10));
        assert_eq!(
            parse_duration("x", "2.5").unwrap(),
            Duration::from_millis(2500)
        );
        assert_eq!(
            parse_duration("x", "20ms").unwrap(),
            Duration::from_millis(20)
        );
        assert!(parse_duration("x", "0s").is_err());
        assert!(parse_duration("x", "-1").is_err());
    }

    #[test]
    fn a_duration_past_a_year_is_refused_in_words_not_a_panic() {
        // 1e20 s overflowed Duration::from_secs_f64 (a panic, exit 101); 500000y overflowed the
        // agent's step checks further on ("invalid step 1").
        for v in [
            "1e20",
            "1.8e19",
            "1e300",
            "500000y",
            "367days",
            "99999999999999999999s",
        ] {
            let e = parse_pause("--timeout", v).unwrap_err();
            assert!(matches!(e, ConfigError::DurationTooLong { .. }), "{v}: {e}");
            assert_eq!(
                e.to_string(),
                format!(
                    "--timeout: '{v}' is longer than any duration stampede takes (366 days at most)"
                )
            );
        }
        assert_eq!(parse_pause("x", "366days").unwrap(), MAX_DURATION);
        assert!(matches!(
            parse_pause("x", "NaN").unwrap_err(),
            ConfigError::Duration { .. }
        ));
    }

    #[test]
    fn warmup_from_the_flag_or_the_plan_file_zero_being_none() {
        let c = command_line("run http://h:1/ --steps 10,20 --warmup 5s").unwrap();
        assert_eq!(c.warmup, Some(Duration::from_secs(5)));
        assert_eq!(c.echo.warmup_s, Some(5.0));
        let c = command_line("run http://h:1/ --steps 10").unwrap();
        assert_eq!((c.warmup, c.echo.warmup_s), (None, None));
        // 0 is no warmup: nothing in run.json's plan.
        let c = command_line("run http://h:1/ --steps 10 --warmup 0s").unwrap();
        assert_eq!(c.echo.warmup_s, None);
        let plan = "url = \"http://h:1/\"\nsteps = [1]\nwarmup = \"1500ms\"\n";
        let (_dir, got) = with_plan(plan, "");
        assert_eq!(got.unwrap().warmup, Some(Duration::from_millis(1500)));
        // The flag over the file, as every setting.
        let (_dir, got) = with_plan(plan, "--warmup 3s");
        assert_eq!(got.unwrap().echo.warmup_s, Some(3.0));
        let (_dir, got) = with_plan("url = \"http://h:1/\"\nsteps = [1]\nwarmup = 2\n", "");
        assert_eq!(got.unwrap().warmup, Some(Duration::from_secs(2)));
    }

    #[test]
    fn a_negative_or_unreadable_warmup_was_refused_as_usage() {
        for (line, words) in [
            ("run http://h:1/ --steps 1 --warmup -1s", "--warmup"),
            ("run http://h:1/ --steps 1 --warmup=-2s", "--warmup"),
            ("run http://h:1/ --steps 1 --warmup soon", "--warmup"),
            ("run http://h:1/ --steps 1 --warmup 5parsecs", "--warmup"),
        ] {
            let argv = std::iter::once("stampede").chain(line.split_whitespace());
            let crate::cli::Command::Run(a) = crate::cli::parse_from(argv).unwrap().command else {
                unreachable!("a run command line")
            };
            let e = resolve(*a).unwrap_err();
            assert!(e.to_string().contains(words), "{line}: {e}");
            assert_eq!(crate::run::RunError::from(e).exit_code(), 2, "{line}");
        }
        let (_dir, got) = with_plan("url = \"http://h:1/\"\nsteps = [1]\nwarmup = \"-1s\"\n", "");
        assert!(got.unwrap_err().to_string().contains("--warmup"));
    }

    #[test]
    fn find_max_kept_its_own_warmup_default_under_the_shared_flag() {
        let search = |line: &str| {
            let argv = std::iter::once("stampede").chain(line.split_whitespace());
            match crate::cli::parse_from(argv).unwrap().command {
                crate::cli::Command::FindMax(a) => resolve_find_max(*a).map_err(|e| e.to_string()),
                _ => unreachable!("a find-max command line"),
            }
        };
        let f = search("find-max http://h:1/ --slo p99<50ms").unwrap();
        assert_eq!(f.setup.warmup, Duration::from_secs(2));
        assert_eq!(f.runs.first().echo.find_max.as_ref().unwrap().warmup_s, 2.0);
        // The search's, not a planned run's: no second warmup, nothing in the plan's own key.
        assert_eq!(
            (f.runs.first().warmup, f.runs.first().echo.warmup_s),
            (None, None)
        );
        let f = search("find-max http://h:1/ --warmup 0s").unwrap();
        assert_eq!(f.setup.warmup, Duration::ZERO);
        let f = search("find-max http://h:1/ --warmup 7s").unwrap();
        assert_eq!(f.setup.warmup, Duration::from_secs(7));
        assert!(
            search("find-max http://h:1/ --warmup -1s")
                .err()
                .unwrap()
                .contains("--warmup")
        );
    }

    /// Each target's label, protocol and streams, as `stampede run LINE` resolves them.
    fn protocols_of(line: &str) -> Result<Vec<(Option<String>, HttpVersion, u32)>, String> {
        let each = |c: &RunConfig| {
            let w = c.plan.workload();
            (c.label.clone(), w.http(), w.streams().get())
        };
        Ok(match runs_of(line)? {
            Runs::One(c) => vec![each(&c)],
            Runs::Side(side) => side.runs.iter().map(each).collect(),
        })
    }

    #[test]
    fn the_http_flags_and_the_h2_schemes_choose_each_targets_protocol() {
        use HttpVersion::{Auto, Http1, Http2};
        let one = |line: &str| {
            let got = protocols_of(line).unwrap();
            assert_eq!(got.len(), 1, "{line}");
            (got[0].1, got[0].2)
        };
        assert_eq!(one("run http://h:1/ --steps 1"), (Http1, 1));
        assert_eq!(one("run http://h:1/ --steps 1 --http 2"), (Http2, 1));
        assert_eq!(
            one("run http://h:1/ --steps 1 --http2 --streams 10"),
            (Http2, 10)
        );
        assert_eq!(
            one("run https://h/ --steps 1 --http auto --streams 3"),
            (Auto, 3)
        );
        assert_eq!(one("run http://h:1/ --steps 1 --http auto"), (Auto, 1));
        // h2c:// is HTTP/2 over TCP, h2:// over TLS: what the agent is sent is http(s).
        for (url, sent) in [
            ("h2c://127.0.0.1:8080/x", "http://127.0.0.1:8080/x"),
            ("h2://example.test/y", "https://example.test:443/y"),
        ] {
            for flags in ["", "--http 2", "--http auto", "--streams 100"] {
                let c = command_line(&format!("run {url} --steps 1 {flags}")).unwrap();
                let w = c.plan.workload();
                assert_eq!(w.http(), Http2, "{url} {flags}");
                assert_eq!(c.echo.requests[0].url, sent);
                assert_eq!(c.echo.http.as_deref(), Some("2"));
            }
        }
        let c = command_line("run --url h2c://h:1/ --steps 1").unwrap();
        assert_eq!(
            c.plan.workload().http(),
            Http2,
            "--url takes the schemes too"
        );
        // Side by side, each target keeps its own.
        assert_eq!(
            protocols_of(
                "run h1=http://127.0.0.1:8080/ h2=h2c://127.0.0.1:8080/ t=h2://h/ --steps 1"
            )
            .unwrap(),
            vec![
                (Some("h1".into()), Http1, 1),
                (Some("h2".into()), Http2, 1),
                (Some("t".into()), Http2, 1)
            ]
        );
        assert_eq!(
            protocols_of("run a=http://h:1/ b=h2c://h:1/ --steps 1 --http auto").unwrap()[0].1,
            Auto
        );
        // HTTP/1.1 beside HTTP/2 with --streams: each its own, the HTTP/1.1 one a request at a time.
        assert_eq!(
            protocols_of("run h1=http://h:1/ h2=h2c://h:1/ --steps 1 --streams 8").unwrap(),
            vec![(Some("h1".into()), Http1, 1), (Some("h2".into()), Http2, 8)]
        );
    }

    #[test]
    fn streams_and_protocols_that_cannot_hold_are_refused_naming_the_target() {
        for (line, says) in [
            (
                "run http://h:1/ --steps 1 --streams 0",
                "--streams (streams per connection, at most 1000) must be a positive number, got 0",
            ),
            (
                "run h2c://h:1/ --steps 1 --streams 1001",
                "at most 1000) must be a positive number, got 1001",
            ),
            (
                "run http://127.0.0.1:8080/ --steps 1 --streams 4",
                "--streams 4 needs HTTP/2, but the target http://127.0.0.1:8080/ is HTTP/1.1, one request at a time per connection: write it h2c://127.0.0.1:8080/, or add --http 2",
            ),
            (
                "run h1=http://127.0.0.1:8080/ b=http://127.0.0.1:8081/ --steps 1 --streams 10",
                "--streams 10 needs HTTP/2, but target h1 (http://127.0.0.1:8080/) is HTTP/1.1",
            ),
            (
                "run http://h:1/ --steps 1 --http auto --streams 2",
                "(--http auto negotiates over TLS only)",
            ),
            (
                "run h2=h2c://127.0.0.1:8080/ --steps 1 --http 1.1",
                "target h2 (h2c://127.0.0.1:8080/) is HTTP/2 by its scheme, but --http 1.1",
            ),
            ("run http://h:1/ --steps 1 --http 3", "'3'"),
            ("run http://h:1/ --steps 1 --http 2 --http2", "--http2"),
        ] {
            let e = runs_of(line)
                .err()
                .unwrap_or_else(|| panic!("{line} resolved"));
            assert!(e.contains(says), "{line}: {e}");
        }
    }

    #[test]
    fn a_url_list_names_http2_by_every_scheme_or_none() {
        let dir = tempfile::tempdir().unwrap();
        let list = |name: &str, text: &str| {
            let p = dir.path().join(name);
            std::fs::write(&p, text).unwrap();
            runs_of(&format!("run --urls {} --steps 1", p.display()))
        };
        let Runs::One(c) = list("h2.txt", "h2c://h:1/a\nPOST h2c://h:1/b\n").unwrap() else {
            panic!("one target")
        };
        assert_eq!(c.plan.workload().http(), HttpVersion::Http2);
        assert_eq!(c.echo.requests[1].url, "http://h:1/b");
        let e = list("mixed.txt", "h2c://h:1/a\nhttp://h:1/b\n")
            .err()
            .unwrap();
        assert!(e.contains("mix h2c:// or h2:// with http://"), "{e}");
    }

    #[test]
    fn http_and_streams_from_a_plan_file_under_the_flags_and_into_run_json() {
        use HttpVersion::{Auto, Http1, Http2};
        // The protocol and streams of a plan file (whose `url` and `steps` are given) under `flags`.
        let chosen = |keys: &str, flags: &str| {
            let (_d, c) = with_plan(&format!("steps = [1]\n{keys}\n"), flags);
            c.map(|c| (c.plan.workload().http(), c.plan.workload().streams().get()))
        };
        let (_d, c) = with_plan(
            "url = \"http://h:1/\"\nsteps = [1]\nhttp = \"2\"\nstreams = 50\n",
            "",
        );
        let echo = c.unwrap().echo;
        // run.json's plan records them, and reads them back as written.
        assert_eq!((echo.http.as_deref(), echo.streams), (Some("2"), Some(50)));
        let json = serde_json::to_value(&echo).unwrap();
        assert_eq!((&json["http"], &json["streams"]), (&"2".into(), &50.into()));
        let back: results::run_file::PlanEcho = serde_json::from_value(json).unwrap();
        assert_eq!(back, echo);
        for (keys, flags, want) in [
            (
                "url = \"http://h:1/\"\nhttp = \"2\"\nstreams = 50",
                "",
                (Http2, 50),
            ),
            // The flags over the file: --http over its http, and over its http2 (one setting).
            (
                "url = \"https://h/\"\nhttp = \"2\"",
                "--http auto",
                (Auto, 1),
            ),
            (
                "url = \"https://h/\"\nhttp2 = true",
                "--http 1.1",
                (Http1, 1),
            ),
            (
                "url = \"h2c://h:1/\"\nstreams = 4",
                "--streams 8",
                (Http2, 8),
            ),
            // As TOML lets a person write it, a bare number is the version it reads as.
            ("url = \"h2c://h:1/\"\nhttp = 2", "", (Http2, 1)),
            ("url = \"http://h:1/\"\nhttp = 1.1", "", (Http1, 1)),
        ] {
            let got = chosen(keys, flags).map_err(|e| e.to_string());
            assert_eq!(got, Ok(want), "{keys} {flags}");
        }
        // Refused in the file as on the command line.
        let e = chosen("url = \"http://h:1/\"\nhttp = \"2\"\nhttp2 = true", "").unwrap_err();
        assert!(
            e.to_string().contains("give http or http2, not both"),
            "{e}"
        );
        let e = chosen("url = \"http://h:1/\"\nstreams = 4", "").unwrap_err();
        assert!(matches!(e, ConfigError::Protocol(_)), "{e:?}");
        for bad in ["3", "\"h3\"", "true"] {
            let e = chosen(&format!("url = \"http://h:1/\"\nhttp = {bad}"), "")
                .unwrap_err()
                .to_string();
            assert!(
                e.contains("line 3, column 8") && e.contains("use \"1.1\", \"2\" or \"auto\""),
                "{bad}: {e}"
            );
        }
    }

    #[test]
    fn tls_sessions_from_a_plan_file_under_the_flag_and_into_run_json_over_tls_only() {
        use shared::plan::TlsSessions::{Fresh, Resume};
        let chosen = |keys: &str, flags: &str| {
            let (_d, c) = with_plan(&format!("steps = [1]\n{keys}\n"), flags);
            let c = c.unwrap();
            (c.plan.workload().tls_sessions(), c.echo.tls_sessions)
        };
        let said = |s: &str| Some(s.to_string());
        assert_eq!(chosen("url = \"https://h/\"", ""), (Fresh, said("fresh")));
        assert_eq!(
            chosen("url = \"h2://h/\"\ntls_sessions = \"resume\"", ""),
            (Resume, said("resume"))
        );
        assert_eq!(
            chosen(
                "url = \"https://h/\"\ntls_sessions = \"resume\"",
                "--tls-sessions fresh"
            ),
            (Fresh, said("fresh"))
        );
        // Plain TCP has no handshake to say anything of.
        assert_eq!(
            chosen("url = \"http://h:1/\"", "--tls-sessions resume").1,
            None
        );
        let (_d, c) = with_plan(
            "url = \"https://h/\"\nsteps = [1]\ntls_sessions = \"reuse\"\n",
            "",
        );
        let e = c.unwrap_err().to_string();
        assert!(e.contains("fresh") && e.contains("resume"), "{e}");
    }
}
