//! Turns the command line and an optional TOML plan file into one validated `RunConfig` (or one per
//! target side by side, or a search's setup): every check of user input happens under this folder, so
//! the run itself never meets a bad value. One file per concern; `settings` is the one place flags,
//! the plan file and the defaults meet, and every resolver below takes its plain values.
mod duration;
mod echo;
mod fleet;
mod live;
mod plan_file;
mod push;
mod search;
mod settings;
mod steps;
mod thresholds;
mod workload;

use std::path::{Path, PathBuf};
use std::time::Duration;

use shared::plan::{self, Plan, PlanError};
use shared::status::StatusSetError;

use crate::cli::RunArgs;
pub use crate::cli::{Format, LossPolicy};
pub use duration::{MAX_DURATION, parse_duration, parse_pause};
pub use fleet::{AgentSpec, DialWait, JoinSpec, pairing, parse_agents};
pub use plan_file::{UnknownKey, parse_plan, read_plan_file};
pub use search::{FindMaxConfig, SearchSetup, resolve_find_max};
pub use settings::{Settings, default_out_dir};
pub use thresholds::Thresholds;
pub use workload::http_version::HttpVersionError;
pub use workload::targets::TargetError;
use workload::targets::{self, Positionals};

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
    /// A revision `--commit` (or `$GITHUB_SHA`) cannot be kept as: run.json names it on one line.
    #[error(
        "{from} '{value}': {why}; give a commit SHA, a tag or a branch name (at most {MAX_COMMIT} characters, no spaces)"
    )]
    Commit {
        from: &'static str,
        value: String,
        why: &'static str,
    },
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
    /// The HTTP version asked of a target against the one its scheme names, or streams it cannot
    /// carry.
    #[error(transparent)]
    HttpVersion(#[from] HttpVersionError),
    #[error("output directory {path} is not writable: {source}")]
    Output {
        path: PathBuf,
        source: std::io::Error,
    },
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
    /// In-process monitors each paired with a target (`--monitor-target`), the same for every target.
    pub paired: Vec<pairing::Paired>,
    /// The run's targets, as monitors are paired with them (every target's label).
    pub pairing: pairing::Pairing,
    /// How many processes `--monitor-process` may match (`--monitor-processes`).
    pub monitor_processes: usize,
    /// Prometheus sources of server metrics (`--server-prometheus`), the same for every target.
    pub server_prometheus: Vec<crate::server_prom::ServerProm>,
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
    /// The revision under test, run.json's `commit` (`--commit`, else `$GITHUB_SHA`).
    pub commit: Option<String>,
    /// Said on stderr before the run: habits of other tools accepted though they change nothing.
    pub notes: Vec<String>,
    /// `--warmup` as given (zero: none): a planned run's load before each target's first step, not
    /// counted; a search takes it for its own (its default is not a planned run's).
    pub warmup: Option<Duration>,
    /// `--live`: the run served as it happens.
    pub live: Option<crate::live::LiveSpec>,
    /// `--prometheus-remote-write`, `--otlp`: where the run's metrics are pushed as it happens.
    pub push: crate::live::push::PushSpec,
    /// Each feeder's CSV file, in the workload's feeder order: read again and shipped to the agents
    /// after every configure (`fleet::feed`).
    pub feeds: Vec<PathBuf>,
}

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
        fleet::paired_with(std::slice::from_mut(&mut cfg))?;
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
    fleet::paired_with(&mut runs)?;
    Ok(Runs::Side(SideBySide {
        dir,
        dir_default,
        force: runs[0].force,
        runs,
    }))
}

/// One target's configuration; `label` (from `NAME=URL`) over the flag's and the plan file's. With
/// it, `--streams` asked of it if it can only be HTTP/1.1, the run's to refuse or not.
fn resolve_one(
    args: RunArgs,
    plan_file: Option<&Path>,
    url: Option<&str>,
    label: Option<String>,
) -> Result<(RunConfig, Option<HttpVersionError>), ConfigError> {
    let mut s = Settings::of(args, plan_file, url)?;
    let label = label.or_else(|| s.given.label.clone());
    if let Some(l) = &label {
        targets::check_label(l)?;
    }
    let (requests, by_scheme, sessions) = workload::wsesslog::requests(&mut s)?;
    let wsesslog = workload::wsesslog::echo(&s, sessions.as_ref());
    let (data, feeds) = workload::feeder::data(&s.given, &requests.requests, &requests.names)?;
    let workload = workload::workload(&s, requests)?.with_data(data);
    let workload = match sessions {
        Some(sessions) => workload.with_sessions(sessions)?,
        None => workload,
    };
    let (workload, over_http1) = workload::http_version(&s, workload, by_scheme, label.as_deref())?;
    workload::feeder::check_http(&workload)?;
    let plan = steps::plan(&s, workload)?;
    if s.threads == 0 || s.threads > 1024 {
        return Err(PlanError::NotPositive {
            what: "--threads (1 to 1024)",
            value: s.threads.to_string(),
        }
        .into());
    }
    let fleet = fleet::Fleet::of(&s)?;
    let given = &s.given;
    let thresholds =
        thresholds::thresholds(&given.stop_on, given.stop_after, &given.fail_on, &plan)?;
    let warmup = steps::warmup(&s)?;
    let live = live::live(&s, fleet.token.as_deref())?;
    let push = push::push(&s)?;
    let server_prometheus = crate::server_prom::resolve(&crate::server_prom::Given {
        urls: &given.server_prometheus,
        set: given.server_prometheus_queries.as_deref(),
        selector: given.server_prometheus_selector.as_deref(),
        queries: &given.server_query,
    })
    .map_err(|e| match e {
        crate::server_prom::ServerPromError::Alone(_) => ConfigError::Conflict(e.to_string()),
        _ => ConfigError::Value(e.to_string()),
    })?;
    let cfg = RunConfig {
        server_prometheus,
        feeds,
        live,
        push,
        host: plan.workload().origin().host().to_string(),
        echo: results::run_file::PlanEcho {
            wsesslog,
            ..echo::echo(&plan, s.threads, &thresholds, warmup)
        },
        label,
        commit: commit(s.given.commit.clone(), std::env::var("GITHUB_SHA").ok())?,
        agents: fleet.agents,
        join: fleet.join,
        monitors: fleet.monitors,
        monitor: fleet.monitor,
        paired: fleet.paired,
        pairing: Default::default(),
        monitor_processes: s.monitor_processes,
        dial_wait: fleet.dial_wait,
        token: fleet.token,
        tls: fleet.tls,
        on_agent_loss: s.on_agent_loss,
        agent_weights: fleet.agent_weights,
        plan,
        out: s.out,
        out_default: s.out_default,
        force: s.given.force,
        format: s.format,
        quiet: s.given.quiet,
        threads: s.threads,
        seed: s.seed,
        thresholds,
        notes: crate::cli::habit_notes(&s.given),
        warmup,
    };
    Ok((cfg, over_http1))
}

/// The longest revision `--commit` takes: a SHA-256 commit is 64 hex digits; a tag or a branch
/// name is rarely longer.
pub const MAX_COMMIT: usize = 200;

/// The revision the run is made against: `--commit` as given, else `$GITHUB_SHA` (set in every
/// GitHub Actions job) when it is set and not empty, else none. An empty `--commit ''` records none.
fn commit(flag: Option<String>, github_sha: Option<String>) -> Result<Option<String>, ConfigError> {
    let (from, value) = match (flag, github_sha) {
        (Some(v), _) => ("--commit", v),
        (None, Some(v)) if !v.trim().is_empty() => ("$GITHUB_SHA", v),
        (None, _) => return Ok(None),
    };
    if from == "--commit" && value.is_empty() {
        return Ok(None);
    }
    let why = if value.chars().count() > MAX_COMMIT {
        Some("too long")
    } else if value.chars().any(|c| c.is_whitespace() || c.is_control()) {
        Some("it has a space or a control character")
    } else {
        None
    };
    match why {
        Some(why) => Err(ConfigError::Commit { from, value, why }),
        None => Ok(Some(value)),
    }
}

impl Runs {
    /// The first (or only) target's configuration.
    pub fn first(&self) -> &RunConfig {
        match self {
            Runs::One(cfg) => cfg,
            Runs::Side(side) => &side.runs[0],
        }
    }

    pub(super) fn each_mut(&mut self) -> &mut [RunConfig] {
        match self {
            Runs::One(cfg) => std::slice::from_mut(cfg.as_mut()),
            Runs::Side(side) => &mut side.runs,
        }
    }
}

fn read_file(what: &'static str, path: &Path) -> Result<Vec<u8>, ConfigError> {
    std::fs::read(path).map_err(|source| ConfigError::Read {
        what,
        path: path.to_path_buf(),
        source,
    })
}

#[cfg(test)]
mod tests;
