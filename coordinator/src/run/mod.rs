//! Drives a run: for each step, splits it among the live agents, prepares it, measures their clocks,
//! starts it at one instant, merges the streamed intervals, handles lost agents by policy, summarizes
//! and writes. This task alone owns the run's state; agents' messages reach it through the fleet.
use std::path::{Path, PathBuf};
use std::time::Duration;

use control::link::CoordinatorEnd;
use proto::pb;
use proto::pb::coordinator_message::Kind as Down;
use results::condition::Observed;
use results::run_file::RunStatus;
use results::step::StepResult;
use results::verdict::{Server, Verdict};
use shared::warning::Warning;
use tokio_util::sync::CancellationToken;

use crate::compare::{self, CompareConfig, CompareError};
use crate::config::{ConfigError, LossPolicy, RunConfig, SearchSetup, SideBySide, Thresholds};
use crate::destination::Destination;
use crate::fleet::{self, Expect, Fleet, FleetError};
use crate::merge::SpillError;
use crate::output::{self, DirError, Finished, Output, OutputError};
use crate::progress::{self, Progress};
use results::compare::Comparison;

#[cfg(test)]
mod control_tests;
#[cfg(test)]
mod fake_agent;
mod probes;
mod source;
mod step;
mod target;
mod warned;

use crate::exit::Exit;
pub use source::{Planned, StepSource, StepSpec};
pub use step::{EndCause, LOSS_SILENCE, STEP_GRACE, StepOutcome};
use target::{After, TargetRun};
use warned::Warned;

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Fleet(#[from] FleetError),
    /// Side by side: a fleet's error with one target (boxed: it is rare, and every step of a run
    /// returns this type).
    #[error(transparent)]
    Target(Box<TargetFailure>),
    #[error("no agent is left to run step {step}")]
    NoAgents { step: usize },
    #[error("{0}")]
    Output(#[from] OutputError),
    #[error(transparent)]
    Dir(#[from] DirError),
    #[error("interrupted before the first step: no load was sent")]
    Interrupted,
    #[error(transparent)]
    Spill(#[from] SpillError),
    #[error("{0}")]
    Search(#[from] results::search::SearchConfigError),
    #[error(transparent)]
    Live(#[from] crate::live::LiveError),
}

impl RunError {
    /// Usage for what the user must fix before running, Failed for a run that failed.
    pub fn exit(&self) -> Exit {
        match self {
            RunError::Config(_) | RunError::Dir(_) | RunError::Search(_) | RunError::Live(_) => {
                Exit::Usage
            }
            RunError::Fleet(e) => e.exit(),
            RunError::Target(t) => t.source.exit(),
            _ => Exit::Failed,
        }
    }

    pub fn exit_code(&self) -> u8 {
        self.exit().code()
    }
}

/// A fleet's error, side by side, with the target it came with: `LABEL (ORIGIN)`.
#[derive(Debug, thiserror::Error)]
#[error("target {target}: {source}")]
pub struct TargetFailure {
    pub target: String,
    pub source: FleetError,
}

pub struct RunOutcome {
    pub dir: PathBuf,
    /// `--label`, or `NAME=` of its target.
    pub label: Option<String>,
    pub steps: Vec<StepResult>,
    pub aborted: bool,
    /// Why --stop-on ended the ramp before its last step.
    pub stopped: Option<Stopped>,
    /// Every --fail-on expression a step breached, in step order.
    pub breaches: Vec<Breach>,
    /// A capacity search's answer.
    pub capacity: Option<results::search::Capacity>,
    /// A planned run's `--warmup`, as it ran: not among `steps`.
    pub warmup: Option<StepResult>,
    /// Notes of `steps` (by step number) that repeat a warning about the generator which the run
    /// said before: in run.json with their step, not said again at the end.
    pub repeats: Vec<(u32, String)>,
    /// The live page, to keep up for `--live-keep` once the answer is out (the first target's).
    pub live: Option<crate::live::Lingering>,
}

pub use results::run_file::{Breach, Stopped};

/// What the run carries from step to step: the thresholds and the count of breaching steps in a
/// row, the breaches, the latency baseline, the warnings already said.
struct Watch<'a> {
    thresholds: &'a Thresholds,
    streak: u32,
    breaches: Vec<Breach>,
    /// Set by the step that ends the ramp: why.
    stop: Option<String>,
    /// The lowest median of the finished steps whose server was ok (see [`baseline_p50`]): what
    /// the next step's queueing is judged against.
    baseline_p50_ms: Option<f64>,
    /// The agents' warnings already said in this run (shared by its targets).
    warned: Warned,
    /// The notes of this target's steps (by step number) that repeat a warning the run said before.
    repeats: Vec<(u32, String)>,
}

impl Watch<'_> {
    /// Judges a finished step before it is written, so its notes name every breach; sets `stop` once
    /// --stop-after steps in a row breached some --stop-on.
    fn judge(&mut self, r: &mut StepResult, step: usize) {
        let seen = Observed::of(r);
        let t = self.thresholds;
        let mut stop = Vec::new();
        for c in &t.stop_on {
            if let Some(because) = c.holds_because(&seen) {
                r.notes.push(format!("--stop-on {c}: {because}"));
                stop.push(because);
            }
        }
        for c in &t.fail_on {
            if let Some(because) = c.holds_because(&seen) {
                r.notes.push(format!("--fail-on {c}: {because}"));
                self.breaches.push(Breach {
                    step,
                    step_value: r.step_value,
                    expression: c.to_string(),
                    because,
                });
            }
        }
        if stop.is_empty() {
            self.streak = 0;
            return;
        }
        self.streak += 1;
        if self.streak >= t.stop_after {
            let mut because = stop.join("; ");
            if t.stop_after > 1 {
                because.push_str(&format!(" ({} steps in a row)", self.streak));
            }
            self.stop = Some(because);
        }
    }
}

/// How a run is asked to stop. `drain` (the first Ctrl-C) aborts the running step and lets its
/// requests in flight finish within the timeout; the step is still written, marked aborted. `now`
/// (the second) stops at once: the steps already written are kept, the running one is dropped.
#[derive(Debug, Clone, Default)]
pub struct Stop {
    pub drain: CancellationToken,
    pub now: CancellationToken,
}

/// Runs the plan into a directory of its own (see [`output::claim`]).
pub async fn run(cfg: RunConfig, stop: Stop) -> Result<RunOutcome, RunError> {
    run_with(cfg, stop, None).await
}

/// A capacity search (`stampede find-max`): a run whose steps are the probes the search asks for,
/// under the ceiling the fleet takes; the outcome's `capacity` is its answer (the bounds so far
/// when it was interrupted).
pub async fn find_max(
    cfg: RunConfig,
    setup: SearchSetup,
    stop: Stop,
) -> Result<RunOutcome, RunError> {
    let mut runs = run_targets(vec![cfg], stop, None, None, Some(setup)).await?;
    Ok(runs.remove(0))
}

/// A side-by-side run as it ended: the directory holding the targets' own, and each one's outcome
/// in the command line's order.
pub struct SideOutcome {
    pub dir: PathBuf,
    pub runs: Vec<RunOutcome>,
    /// The comparison written beside them at the end (its ranking ends stdout), or why it could
    /// not be.
    pub compared: Result<Comparison, CompareError>,
}

/// Runs several targets side by side over one fleet: each step on every target in turn (as
/// autobench alternates its two hosts, so a drift of the network or the generator hits all alike),
/// each into its own directory under `side.dir`, and the comparison beside them after every round
/// of steps, so a killed run keeps one. A target whose `--stop-on` ends its ramp is left out of the
/// later rounds while the others go on; Ctrl-C, an error or a lost agent under `abort` ends them all.
pub async fn run_side(side: SideBySide, stop: Stop) -> Result<SideOutcome, RunError> {
    side_targets(side, stop, None).await
}

/// Capacity searches side by side (`stampede find-max NAME=URL NAME=URL ...`): one search per target
/// under the same SLOs and fleet, each with its own probes and ceiling, their probes interleaved
/// as [`run_side`] interleaves steps (a target whose search has ended is left out of the later
/// rounds), each answer in its target's run.json, and the comparison beside them.
pub async fn find_max_side(
    side: SideBySide,
    setup: SearchSetup,
    stop: Stop,
) -> Result<SideOutcome, RunError> {
    side_targets(side, stop, Some(setup)).await
}

async fn side_targets(
    mut side: SideBySide,
    stop: Stop,
    search: Option<SearchSetup>,
) -> Result<SideOutcome, RunError> {
    let dir = output::claim_beside(&side.dir, side.dir_default, side.force)?;
    for cfg in &mut side.runs {
        let label = cfg.label.clone().unwrap_or_default();
        cfg.out = dir.join(label);
    }
    let runs = run_targets(side.runs, stop, None, Some(&dir), search).await?;
    let compared = compare_beside(&dir, &runs);
    Ok(SideOutcome {
        dir,
        runs,
        compared,
    })
}

/// [`run`], over `links` when given (agents already connected: the tests' scripted agents) instead
/// of dialing the configured ones.
async fn run_with(
    cfg: RunConfig,
    stop: Stop,
    links: Option<Vec<(String, Expect, CoordinatorEnd)>>,
) -> Result<RunOutcome, RunError> {
    let mut runs = run_targets(vec![cfg], stop, links, None, None).await?;
    Ok(runs.remove(0))
}

/// Runs one target's run per configuration, each into the directory it claims, side by side (`beside`: the
/// directory the comparison goes to) when there are several.
async fn run_targets(
    mut cfgs: Vec<RunConfig>,
    stop: Stop,
    links: Option<Vec<(String, Expect, CoordinatorEnd)>>,
    beside: Option<&Path>,
    search: Option<SearchSetup>,
) -> Result<Vec<RunOutcome>, RunError> {
    // The live address is bound before any directory is claimed or agent reached: a port in use
    // stops the run with nothing done.
    let live = cfgs[0].live.clone();
    let feed = crate::live::Feed::with_push(live.is_some(), &cfgs[0].push);
    let server = match &live {
        Some(spec) => {
            let server = crate::live::Server::start(spec, &feed).await?;
            if !cfgs[0].quiet {
                let urls = server.urls();
                eprintln!("stampede: watch the run at {}", urls[0]);
                if urls.len() > 1 {
                    eprintln!("stampede: from another machine: {}", urls[1..].join("  "));
                }
            }
            Some(server)
        }
        None => None,
    };
    let mut dirs: Vec<PathBuf> = Vec::with_capacity(cfgs.len());
    for cfg in &mut cfgs {
        match output::claim(&cfg.out, cfg.out_default, cfg.force) {
            Ok(dir) => cfg.out = dir.clone(),
            Err(e) => {
                dirs.iter().for_each(|d| output::release(d));
                return Err(e.into());
            }
        }
        dirs.push(cfg.out.clone());
    }
    // Whatever ends the run from here (an error, a panic, a dropped future), no run.json is left
    // saying "starting" or "running".
    let mut unfinished = Unfinished {
        dirs: dirs.clone(),
        why: "the coordinator stopped before the run ended".into(),
    };
    let outcome = run_in(&cfgs, stop.clone(), links, beside, search, &feed).await;
    let report = match beside {
        Some(dir) => dir.join(output::BESIDE_FILES[0]),
        None => dirs[0].join(crate::report_file::REPORT),
    };
    let said = matches!(outcome, Err(RunError::Output(_) | RunError::Spill(_)));
    feed.finished(report.exists().then_some(report), !said);
    for tally in feed.finish_pushes().await {
        if !cfgs[0].quiet || tally.dropped_total() > 0 {
            eprintln!("stampede: {tally}");
        }
    }
    // The page stays for --live-keep after the answer is printed (the caller waits on it then); a
    // run that failed before its end has no page worth staying for.
    let mut lingering = None;
    if let Some(server) = server {
        match outcome.is_ok() {
            true => {
                lingering = Some(crate::live::Lingering::new(
                    server,
                    stop.drain.clone(),
                    cfgs[0].quiet,
                ))
            }
            false => server.linger(&stop.drain, cfgs[0].quiet, false).await,
        }
    }
    if let Err(RunError::Interrupted) = &outcome {
        // The run's record says it was interrupted, not that it is still starting.
        dirs.iter().for_each(|d| output::mark_interrupted(d));
    } else if let Err(e) = &outcome {
        unfinished.why = e.to_string();
        dirs.iter().for_each(|d| output::release(d));
        if let RunError::Output(_) | RunError::Spill(_) = e {
            // By number: a step whose progress line was shown may be in no file, since its row
            // and run.json were what failed.
            for d in &dirs {
                let kept = match output::kept_steps(d) {
                    0 => "no step is kept in".to_string(),
                    1 => "step 1 is kept in".to_string(),
                    n => format!("steps 1-{n} are kept in"),
                };
                eprintln!(
                    "stampede: {kept} {}; a step shown after that is in no file",
                    d.display()
                );
            }
        }
    }
    outcome.map(|mut runs| {
        if let Some(first) = runs.first_mut() {
            first.live = lingering;
        }
        runs
    })
}

/// The claimed directories of a run, finished by [`output::fail_unfinished`] when it is dropped.
struct Unfinished {
    dirs: Vec<PathBuf>,
    why: String,
}

impl Drop for Unfinished {
    fn drop(&mut self) {
        for d in &self.dirs {
            output::fail_unfinished(d, &self.why);
        }
    }
}

/// The run's total on the live line for a search: its deadline, unless that is too far off to mean
/// anything there (an hour).
const MAX_SHOWN_DEADLINE_S: f64 = 3600.0;

/// How a target's ramp ended, when no error ended it.
#[derive(Debug, Clone, Default)]
struct Ramped {
    aborted: bool,
    stopped: Option<Stopped>,
}

async fn run_in(
    cfgs: &[RunConfig],
    stop: Stop,
    links: Option<Vec<(String, Expect, CoordinatorEnd)>>,
    beside: Option<&Path>,
    search: Option<SearchSetup>,
    feed: &crate::live::Feed,
) -> Result<Vec<RunOutcome>, RunError> {
    // Any Ctrl-C while the fleet is reached and greeted ends the run at once: no load was sent.
    let (mut fleet, announced) = tokio::select! {
        ready = ready_fleet(cfgs, links) => ready?,
        _ = stop.drain.cancelled() => return Err(RunError::Interrupted),
        _ = stop.now.cancelled() => return Err(RunError::Interrupted),
    };
    // A query the Prometheus refuses, or one answering several servers, ends the run before any
    // load; one that cannot be reached is said once, and the run goes on.
    crate::server_prom::preflight(&cfgs[0].server_prometheus)
        .await
        .map_err(|e| ConfigError::Value(e.to_string()))?;
    let total: Duration = match &search {
        Some(s) => Duration::from_secs_f64(s.search.deadline_s.min(MAX_SHOWN_DEADLINE_S)),
        None => cfgs.iter().map(plan_total).sum(),
    };
    let side = cfgs.len() > 1;
    let events_dir = beside.unwrap_or(&cfgs[0].out);
    if let Err(e) = feed.write_to(events_dir) {
        eprintln!(
            "stampede: {} cannot be written ({e}); the run goes on without it",
            events_dir.join(crate::live::EVENTS_FILE).display()
        );
    }
    feed.emit(results::events::Event::Begin {
        schema: results::events::SCHEMA.to_string(),
        targets: cfgs
            .iter()
            .map(|c| c.label.clone().filter(|_| side).unwrap_or_default())
            .collect(),
        search: search.is_some(),
        total_s: total.as_secs_f64(),
        started_at: output::now(),
    });
    if let Some(run) = cfgs[0].live.as_ref().and_then(|l| l.baseline.clone()) {
        feed.emit(results::events::Event::Baseline { run });
    }
    let mut targets = Vec::with_capacity(cfgs.len());
    for (k, (cfg, (warnings, warned))) in cfgs.iter().zip(announced).enumerate() {
        // Side by side, each target its own search: its own probes, under its own ceiling.
        let (source, line): (Box<dyn StepSource + Send>, _) = match search.clone() {
            Some(setup) => {
                let (ceiling, generator) =
                    probes::ceiling(&fleet, cfg, setup.search.start, setup.search.max_rate);
                let model = cfg.plan.model().name();
                let probes =
                    probes::Probes::new(setup, model, ceiling, generator, stop.drain.clone())?;
                let line = probes.plan_line()
                    + &progress::over_http2(&cfg.plan)
                    + &progress::over_tls(&cfg.plan);
                (Box::new(probes), Some(line))
            }
            None => (Box::new(Planned::new(cfg.plan.steps(), cfg.warmup)), None),
        };
        // This target's own server and those behind them all; no other target's.
        let target = cfg.label.as_deref();
        let monitors: Vec<_> = fleet
            .monitor_infos()
            .into_iter()
            .chain(cfg.server_prometheus.iter().map(|p| p.info()))
            .filter(|m| cfg.pairing.watches(target, &m.name).is_some())
            .collect();
        let mut out = Output::create(cfg, &fleet.infos(), &monitors, &warnings)?;
        out.attach(feed, k);
        let label = cfg.label.as_deref().filter(|_| side);
        if !cfg.quiet {
            let line = match line {
                Some(l) => format!("{l}; results in {}", out.dir().display()),
                None => {
                    let live = fleet.live();
                    let embedded = live
                        .iter()
                        .all(|&i| fleet.name(i) == crate::fleet::EMBEDDED);
                    let over = progress::over(live.len(), embedded, monitors.len());
                    progress::plan_line(&cfg.plan, cfg.warmup, &over, plan_total(cfg), out.dir())
                }
            };
            eprintln!(
                "{}{line}",
                label.map_or(String::new(), |l| format!("{l}: "))
            );
        }
        let progress = Progress::new(cfg.quiet, total).labelled(label);
        targets.push(TargetRun::new(cfg, out, warned, progress, source));
    }
    if let Some(dir) = beside.filter(|_| !cfgs[0].quiet) {
        let labels: Vec<&str> = cfgs.iter().filter_map(|c| c.label.as_deref()).collect();
        eprintln!(
            "{}",
            progress::side_line(&labels, total, dir, search.is_some())
        );
    }
    let outcome = ramp(&mut fleet, &mut targets, &stop, beside).await;
    let mut finished = Ok(());
    let failed = outcome.as_ref().err().map(ToString::to_string);
    for target in &mut targets {
        let done = target.finish(failed.as_deref());
        finished = finished.and(done);
    }
    outcome?;
    finished?;
    Ok(targets.into_iter().map(TargetRun::outcome).collect())
}

/// Runs the steps the targets' sources give, round by round: each round one step of every target whose
/// ramp goes on, in the targets' order, each written before the next. A target ends when its source gives
/// no more or --stop-on ends it; all end when a step is aborted. With several targets, the fleet is
/// configured with a target's workload before its step, and the comparison rewritten after each round.
async fn ramp(
    fleet: &mut Fleet,
    targets: &mut [TargetRun<'_>],
    stop: &Stop,
    beside: Option<&Path>,
) -> Result<(), RunError> {
    // The check before the run configured every target's workload in turn: the last one holds.
    let mut configured = targets.len() - 1;
    loop {
        let mut ran = false;
        for k in 0..targets.len() {
            let target = &mut targets[k];
            if target.ended.is_some() {
                continue;
            }
            // Before the source is asked: a search counts the probe it gives.
            if stop.drain.is_cancelled() || stop.now.is_cancelled() {
                targets.iter_mut().for_each(TargetRun::abort);
                return Ok(());
            }
            let target = &mut targets[k];
            let Some(spec) = target.source.next(target.results.last()) else {
                target.ended = Some(Ramped::default());
                continue;
            };
            if configured != k {
                let tolerate = target.cfg.on_agent_loss != LossPolicy::Abort;
                tokio::select! {
                    done = configure(fleet, target.cfg, tolerate) => { done.map_err(target.blame())?; }
                    _ = stop.now.cancelled() => {
                        targets.iter_mut().for_each(TargetRun::abort);
                        return Ok(());
                    }
                }
                configured = k;
            }
            ran = true;
            if target.step(fleet, spec, stop).await? == After::AbortAll {
                targets.iter_mut().for_each(TargetRun::abort);
                return Ok(());
            }
        }
        if !ran {
            return Ok(());
        }
        if let Some(dir) = beside {
            compare_round(dir, targets);
        }
    }
}

/// Sends every live agent `cfg`'s workload and waits for their acknowledgements (with the warnings
/// they came with).
async fn configure(
    fleet: &mut Fleet,
    cfg: &RunConfig,
    tolerate_loss: bool,
) -> Result<Vec<(usize, Warning)>, FleetError> {
    let configure: pb::Configure = cfg.plan.workload().into();
    let live = fleet.live();
    let warnings = fleet
        .command_all(
            &live,
            |_| Down::Configure(configure.clone()),
            "configuring it",
            tolerate_loss,
        )
        .await?;
    let data = cfg.plan.workload().data();
    if !data.feeders().is_empty() {
        let live = fleet.live();
        let weights = fleet.weights(&live, cfg.agent_weights.as_deref());
        crate::fleet::feed::ship(fleet, &live, &weights, data, &cfg.feeds).await?;
    }
    Ok(warnings)
}

/// Reaches (or takes the `links` to), greets and configures the agents with every target's workload in
/// turn, so that an agent's refusal of any target (its --allow-target) comes before any load, and
/// checks every target's plan against what they announced. Returns each target's warnings, said.
async fn ready_fleet(
    cfgs: &[RunConfig],
    links: Option<Vec<(String, Expect, CoordinatorEnd)>>,
) -> Result<(Fleet, Vec<(Vec<String>, Warned)>), RunError> {
    let first = &cfgs[0];
    let mut fleet = match links {
        Some(links) => Fleet::with_roles(links, CancellationToken::new()),
        None => fleet::connect(first).await?,
    };
    fleet.hello(first.token.as_deref()).await?;
    if let Some(join) = &first.join {
        fleet.check_joined(join.expect, join.monitors)?;
    }
    let shared: Vec<String> = fleet
        .sharing_a_host()
        .into_iter()
        .map(|(m, a)| {
            format!(
                "generator and target share this host: the server monitor {m} watches the machine agent {a} sends its load from, whose CPU competes with the target's"
            )
        })
        .collect();
    for w in shared.iter().filter(|_| !first.quiet) {
        eprintln!("stampede: {w}");
    }
    if cfgs
        .iter()
        .any(|c| !c.plan.workload().source_addrs().is_empty())
    {
        fleet.check_source_addrs()?;
    }
    let mut announced = Vec::with_capacity(cfgs.len());
    // One record for the run: a risk of the generator's is the same whichever target it loads.
    let warned = Warned::default();
    for cfg in cfgs {
        let blame = |e| blame(cfgs.len() > 1, cfg, e);
        let warnings = configure(&mut fleet, cfg, false).await.map_err(blame)?;
        let mut warnings = warned.announce(&fleet, &warnings).notes;
        warnings.extend(shared.iter().cloned());
        announced.push((warnings, warned.clone()));
    }
    check_limits(&fleet, cfgs)?;
    Ok((fleet, announced))
}

/// A fleet's error as the run's: side by side, naming the target it came with.
fn blame(side: bool, cfg: &RunConfig, e: FleetError) -> RunError {
    match &cfg.label {
        Some(label) if side => RunError::Target(Box::new(TargetFailure {
            target: format!("{label} ({})", cfg.plan.workload().origin().origin()),
            source: e,
        })),
        _ => e.into(),
    }
}

/// Says on stderr what run.json could not say: it is the run's record, and a status left at
/// "running" after the process has gone would be read as a run still going.
fn tell_unfinished(
    dir: &std::path::Path,
    status: RunStatus,
    finished: &Result<Finished, OutputError>,
) {
    if let Some(words) = unfinished_words(dir, status, finished) {
        eprintln!("{words}");
    }
}

/// What [`tell_unfinished`] says, if anything.
fn unfinished_words(
    dir: &std::path::Path,
    status: RunStatus,
    finished: &Result<Finished, OutputError>,
) -> Option<String> {
    Some(match finished {
        Ok(Finished::Whole) => return None,
        // A failed run's own error is said once, by the caller: it is why run.json could not be
        // rewritten either.
        Ok(Finished::StatusOnly(_)) if status == RunStatus::Failed => format!(
            "stampede: run.json in {} was marked \"failed\" in place, without its end time",
            dir.display()
        ),
        Ok(Finished::StatusOnly(e)) => format!(
            "stampede: {e}; run.json in {} was marked \"{}\" in place, without its end time",
            dir.display(),
            crate::output::marked_in_place(status)
        ),
        Err(e) => format!(
            "stampede: {e}; run.json in {} still says \"running\": the run ended {status}",
            dir.display()
        ),
    })
}

/// The plan's scheduled time, step after step (without the moments between steps).
/// How long the plan takes, as its line says: each step's schedule and what a step costs beyond it.
fn plan_total(cfg: &RunConfig) -> Duration {
    source::planned(cfg)
        .map(|spec| source::shares(cfg, spec, &[1])[0].scheduled_duration() + step::STEP_OVERHEAD)
        .sum()
}

/// Refuses, before any load, a plan that some agent's announced limits would refuse at some step of
/// some target, the targets' steps taken in the order they will run (an agent's --max-run-duration counts
/// them all): its policy, or its sockets (fd limit, ports). Warnings are left to the agents, which
/// know the resolved target and say them when each step is prepared.
fn check_limits(fleet: &Fleet, cfgs: &[RunConfig]) -> Result<(), RunError> {
    let who = fleet.live();
    let weights = fleet.weights(&who, cfgs[0].agent_weights.as_deref());
    let planned: Vec<Vec<StepSpec>> = cfgs.iter().map(|c| source::planned(c).collect()).collect();
    let rounds = planned.iter().map(Vec::len).max().unwrap_or(0);
    let mut used = Duration::ZERO;
    for round in 0..rounds {
        for (cfg, specs) in cfgs.iter().zip(&planned) {
            let Some(&spec) = specs.get(round) else {
                continue;
            };
            let shares = source::shares(cfg, spec, &weights);
            let route = route(cfg);
            for (k, &i) in who.iter().enumerate() {
                fleet
                    .check_share(i, &shares[k], used, &route)
                    .map_err(|e| blame(cfgs.len() > 1, cfg, e))?;
            }
            used += shares[0].scheduled_duration();
        }
    }
    Ok(())
}

/// The comparison after a round of steps: a failure is said and the run goes on (its own
/// directories are whole; the end of the run, or `stampede compare`, writes it again).
fn compare_round(dir: &Path, targets: &[TargetRun<'_>]) {
    let runs: Vec<(String, PathBuf)> = targets
        .iter()
        .map(|l| {
            (
                l.cfg.label.clone().unwrap_or_default(),
                l.out.dir().to_path_buf(),
            )
        })
        .collect();
    if let Err(e) = write_comparison(dir, &runs) {
        eprintln!("stampede: {e}");
    }
}

/// The comparison at the end of a side-by-side run, from what each target's run.json says now.
fn compare_beside(dir: &Path, runs: &[RunOutcome]) -> Result<Comparison, CompareError> {
    let runs: Vec<(String, PathBuf)> = runs
        .iter()
        .map(|r| (r.label.clone().unwrap_or_default(), r.dir.clone()))
        .collect();
    write_comparison(dir, &runs)
}

/// The one call of the comparison writer for a side-by-side run: compare.html, compare.tsv and
/// compare.json in `dir`, of the runs (label, directory) beside it, the first one the baseline.
fn write_comparison(dir: &Path, runs: &[(String, PathBuf)]) -> Result<Comparison, CompareError> {
    let (labels, dirs) = runs.iter().cloned().unzip();
    let [html, tsv, json] = output::BESIDE_FILES.map(|f| Destination::Own(dir.join(f)));
    compare::run(CompareConfig {
        labels,
        html,
        tsv: Some(tsv),
        json: Some(json),
        ..CompareConfig::new(dirs)
    })
    .map(|o| o.comparison)
}

/// The route as the coordinator knows it: it does not resolve the target, so a host name's
/// loopback-ness is left open (the agent checks again with the resolved address).
fn route(cfg: &RunConfig) -> control::machine::Route {
    let w = cfg.plan.workload();
    let host = w.origin().host();
    control::machine::Route {
        timeout: w.timeout(),
        connect_timeout: w.connect_timeout(),
        sources: w.source_addrs().len(),
        loopback: match host.parse::<std::net::IpAddr>() {
            Ok(ip) => Some(ip.is_loopback()),
            Err(_) if host.eq_ignore_ascii_case("localhost") => Some(true),
            Err(_) => None,
        },
        server_closes: w.server_closes_last(),
    }
}

/// The lowest median latency among the finished steps whose server was ok and whose numbers are not
/// untrusted: what a later step's queueing is measured against. A degraded step counts: its lag only
/// raises the median, which makes the check less eager, while on a busy generator every step may be
/// degraded and none would give a baseline.
fn baseline_p50(results: &[StepResult]) -> Option<f64> {
    results
        .iter()
        .filter(|r| r.server == Server::Ok && r.trust != Verdict::Invalid && r.ok > 0)
        .map(|r| r.latency_ms.p50)
        .min_by(f64::total_cmp)
}

#[cfg(test)]
mod tests {
    use super::*;
    use results::step::{self, StepInput};
    use shared::metrics::Snapshot;

    #[test]
    fn a_full_disk_said_its_error_twice() {
        let full = || OutputError {
            path: "r/run.json.tmp".into(),
            source: std::io::Error::other("No space left on device"),
        };
        let dir = Path::new("r");
        let failed =
            unfinished_words(dir, RunStatus::Failed, &Ok(Finished::StatusOnly(full()))).unwrap();
        assert!(!failed.contains("No space left"), "{failed}");
        assert!(
            failed.contains("was marked \"failed\" in place"),
            "{failed}"
        );
        // A run that ended otherwise has only this line to say why run.json is not whole.
        let aborted =
            unfinished_words(dir, RunStatus::Aborted, &Ok(Finished::StatusOnly(full()))).unwrap();
        assert!(aborted.contains("No space left"), "{aborted}");
    }

    #[test]
    fn a_panic_left_run_json_starting() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = output::claim(&tmp.path().join("r"), false, false).unwrap();
        let guarded = dir.clone();
        let panicked = std::panic::catch_unwind(move || {
            let _unfinished = Unfinished {
                dirs: vec![guarded],
                why: "a panic".into(),
            };
            panic!("index out of bounds");
        });
        assert!(panicked.is_err());
        assert!(
            !dir.join("run.json").exists(),
            "no run.json left saying starting"
        );
    }

    /// A finished step of 100 requests, all answered in `latency_ms`.
    fn step(latency_ms: u64) -> StepResult {
        let mut s = Snapshot::default();
        s.counters.requests = 100;
        s.counters.replies = 100;
        s.counters.ok = 100;
        s.hist.latency.record_n(latency_ms * 1000, 100).unwrap();
        step::summarize(&StepInput {
            number: 1,
            model: shared::plan::LoadModel::Requests,
            value: 100.0,
            demanded_rate: Some(100.0),
            duration: Duration::from_secs(1),
            total: &s,
            series: &[],
            agents: vec![],
            aborted: false,
            mark_lost: true,
            start_skew: None,
            ok_status: &shared::status::StatusSet::default(),
            baseline_p50_ms: None,
        })
    }

    fn watch(t: &Thresholds) -> Watch<'_> {
        Watch {
            thresholds: t,
            streak: 0,
            breaches: Vec::new(),
            stop: None,
            baseline_p50_ms: None,
            warned: Warned::default(),
            repeats: Vec::new(),
        }
    }

    #[test]
    fn stop_after_n_ended_the_ramp_at_the_first_breach() {
        let t = Thresholds {
            stop_on: vec!["p99>500ms".parse().unwrap()],
            stop_after: 2,
            fail_on: vec![],
        };
        let mut w = watch(&t);
        // A breach, a recovery, then two in a row: only the second of those ends the ramp.
        for (i, ms) in [800, 10, 800].into_iter().enumerate() {
            w.judge(&mut step(ms), i + 1);
            assert_eq!(w.stop, None, "step {}", i + 1);
        }
        let mut r = step(900);
        w.judge(&mut r, 4);
        let because = w.stop.take().unwrap();
        assert!(
            because.starts_with("p99 ") && because.ends_with("ms > 500 ms (2 steps in a row)"),
            "{because}"
        );
        assert!(
            r.notes
                .iter()
                .any(|n| n.starts_with("--stop-on p99>500ms: p99 "))
        );
    }

    #[test]
    fn fail_on_names_every_step_that_breached() {
        let t = Thresholds {
            stop_on: vec![],
            stop_after: 1,
            fail_on: vec!["p50>=20ms".parse().unwrap(), "failed>1%".parse().unwrap()],
        };
        let mut w = watch(&t);
        for (i, ms) in [5, 30, 10, 20].into_iter().enumerate() {
            w.judge(&mut step(ms), i + 1);
        }
        assert_eq!(w.stop, None, "--fail-on never ends the ramp");
        let got: Vec<(usize, &str)> = w
            .breaches
            .iter()
            .map(|b| (b.step, b.expression.as_str()))
            .collect();
        assert_eq!(got, vec![(2, "p50>=20ms"), (4, "p50>=20ms")]);
    }
}
