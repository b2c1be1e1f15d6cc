//! `stampede find-max`'s configuration: the run's own (its one step the search's start) and the
//! search's settings (SLOs, precision, probe lengths, warmup, cooldown, deadline), echoed into every
//! target's run.json.
use std::time::Duration;

use results::condition::Cmp;
use shared::plan::{self, LoadModel, PlanError};

use super::{
    ConfigError, RunConfig, Runs, parse_duration, parse_pause, resolve_runs, thresholds::conditions,
};
use crate::cli::{Rate, RunArgs};

/// An SLO is what a passing probe meets; `p99>50ms` is --stop-on's way round, a breach: refused,
/// naming the SLO meant.
fn check_slo_direction(slos: &[results::condition::Condition]) -> Result<(), ConfigError> {
    if let Some(c) = slos.iter().find(|c| !c.holds_when_good()) {
        let flipped = match (c.metric, c.cmp) {
            (
                results::condition::Metric::OkRate | results::condition::Metric::Requests,
                Cmp::Lt | Cmp::Gt,
            ) => ">",
            (results::condition::Metric::OkRate | results::condition::Metric::Requests, _) => ">=",
            (_, Cmp::Lt | Cmp::Gt) => "<",
            _ => "<=",
        };
        return Err(ConfigError::Search(format!(
            "--slo '{c}': an SLO says what a passing probe meets, e.g. {}{flipped}{}{} (the other way round is --stop-on's breach)",
            c.subject(),
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

/// The search's own warmup, a probe at --start: `--warmup` (the flag or the plan file's key, checked
/// with the run's settings) taken from the run, whose planned warmup it is not.
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

/// Builds a search's configuration: `run`'s from the flags and plan file (the steps left to the
/// search: one step at --start, for the check before any load), and the search's own.
pub fn resolve_find_max(args: crate::cli::FindMaxArgs) -> Result<FindMaxConfig, ConfigError> {
    let crate::cli::FindMaxArgs { run: args, search } = args;
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
    let precision = precision(&search.precision)?;
    let (start, mut runs) = runs_at_start(args, search.start, probe)?;
    // Every target's configuration comes from the same flags and plan file: the first speaks for all.
    let run = runs.first();
    // A plan file may hold them too: refused as the flags are, not kept and ignored.
    if !run.thresholds.stop_on.is_empty() || !run.thresholds.fail_on.is_empty() {
        return Err(ConfigError::Search(
            "find-max chooses its own steps: stop_on and fail_on (from the plan file) are not its settings (use --slo)"
                .into(),
        ));
    }
    let slos = conditions("--slo", &search.slos, &run.plan)?;
    check_slo_direction(&slos)?;
    let config = results::search::Config {
        start,
        precision,
        probe_s: probe.as_secs_f64(),
        confirm_s: confirm.as_secs_f64(),
        repeat: search.repeat,
        deadline_s: deadline.as_secs_f64(),
        ..search_config(run, search.max_rate, &slos)
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
    let echo = search_echo(
        &slos,
        &config,
        search.max_rate.map(|r| r.0),
        warmup,
        cooldown,
    );
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

/// The run's configuration with its one step at the search's start, and that start: `--start`, else
/// 100 (10 connections for the closed model, which may come from a plan file, so is known only once
/// resolved). Every check a plan passes (its rate, the agents' limits before any load) is made on
/// that step, each `probe` long; the search gives the rest.
fn runs_at_start(
    mut args: RunArgs,
    start: Option<Rate>,
    probe: Duration,
) -> Result<(f64, Runs), ConfigError> {
    args.step_duration = Some(probe.into());
    let resolve_at = |start: f64| {
        let args = RunArgs {
            steps: Some(crate::cli::Steps(vec![start])),
            ..args.clone()
        };
        resolve_runs(args)
    };
    if let Some(r) = start.filter(|r| !(r.0.is_finite() && r.0 > 0.0)) {
        return Err(ConfigError::Search(
            results::search::SearchConfigError::Start(r.0).to_string(),
        ));
    }
    Ok(match start {
        Some(r) => (r.0, resolve_at(r.0)?),
        None => {
            let run = resolve_at(100.0)?;
            if run.first().plan.model() == LoadModel::Concurrency {
                (10.0, resolve_at(10.0)?)
            } else {
                (100.0, run)
            }
        }
    })
}

/// What the search's settings owe to the run's load model: the ceiling (`--max-rate`, else the
/// model's own), how rates are counted, and the samples a probe needs for its `slos`' percentiles.
fn search_config(
    run: &RunConfig,
    max_rate: Option<Rate>,
    slos: &[results::condition::Condition],
) -> results::search::Config {
    let closed = run.plan.model() == LoadModel::Concurrency;
    let samples_per_unit = match run.plan.model() {
        LoadModel::Connections => u64::from(run.plan.num_call().get()),
        _ => 1,
    };
    results::search::Config {
        // The agents' own limits (their --max-rate, their sockets and fds) lower it before the search.
        max_rate: max_rate.map_or(
            if closed {
                MAX_SEARCH_CONNECTIONS
            } else {
                plan::MAX_RATE
            },
            |r| r.0,
        ),
        // Each connection of the connections model makes --num-call requests, each a sample; a
        // named request's SLO needs its samples of that name, which has its weight's share of them.
        samples: slos
            .iter()
            .map(|c| scaled_to_name(c, run.plan.workload()))
            .max()
            .unwrap_or(0)
            .div_ceil(samples_per_unit),
        per_second: !closed,
        whole: closed,
        ..results::search::Config::default()
    }
}

/// The samples of the whole step an SLO needs: its own, or for a named request's as many as hold
/// that many of the name at its weight's share of the mix.
fn scaled_to_name(c: &results::condition::Condition, workload: &plan::Workload) -> u64 {
    let needed = results::search::probe::samples_needed(c);
    let weights = workload.weights();
    let total: u64 = weights.iter().map(|w| u64::from(*w)).sum();
    let own = c
        .request
        .as_ref()
        .and_then(|n| workload.names().iter().position(|m| m == n))
        .and_then(|i| weights.get(i))
        .map(|w| u64::from(*w));
    match own {
        Some(w) if w > 0 && total > 0 => (needed * total).div_ceil(w),
        _ => needed,
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::config::tests::search_of;

    #[test]
    fn a_named_slo_needs_its_samples_of_that_name_at_its_weight_s_share() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("plan.toml");
        std::fs::write(
            &p,
            "url = \"http://127.0.0.1:9/\"\nmodel = \"requests\"\n[[request]]\nname = \"login\"\nurl = \"/login\"\n[[request]]\nname = \"search\"\nurl = \"/search\"\nweight = 3\n",
        )
        .unwrap();
        let plan = p.display();
        let samples = |slo: &str| {
            search_of(&format!("find-max {plan} --slo {slo}"))
                .map(|c| (c.setup.search.samples, c.setup.slos[0].to_string()))
        };
        // A p99 needs 1,000 samples: of the whole step, or of login's quarter of it.
        assert_eq!(samples("p99<50ms").unwrap(), (1000, "p99<50ms".into()));
        assert_eq!(samples("p99[login]<50ms").unwrap().0, 4000);
        assert_eq!(samples("p99[search]<50ms").unwrap().0, 1334);
        assert_eq!(
            samples("p99[nope]<50ms").unwrap_err(),
            "--slo 'p99[nope]<50ms': the plan has no request named 'nope' (its names: login, search)"
        );
        let e = samples("p99[login]>50ms").unwrap_err();
        assert!(e.contains("e.g. p99[login]<50ms"), "{e}");
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
}
