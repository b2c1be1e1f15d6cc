//! Drives a run: for each step, splits it among the live agents, prepares it, measures their clocks,
//! starts it at one instant, merges the streamed intervals, handles lost agents by policy, summarises
//! and writes. This task alone owns the run's state; agents' messages reach it through the fleet.
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use proto::pb;
use proto::pb::agent_message::Kind as Up;
use proto::pb::coordinator_message::Kind as Down;
use shared::condition::Observed;
use shared::histogram;
use shared::plan::StepShare;
use shared::report::{self, AgentInput, StepInput, StepResult};
use shared::verdict::{Server, Verdict};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::config::{ConfigError, LossPolicy, RunConfig, Thresholds};
use crate::fleet::{self, Fleet, unix_ns};
use crate::merge::{IntervalError, SeqProgress, SpillError, StepMerge, StepTotals};
use crate::output::{self, DirError, Finished, Output, OutputError};
use crate::progress::{self, Progress, Tick};

/// How far ahead of "now" a step's start instant is set, so every agent has it before it passes.
const START_LEAD: Duration = Duration::from_millis(200);
/// Extra time past a step's schedule and timeout before an agent counts as stuck.
const STEP_GRACE: Duration = Duration::from_secs(5);
/// An agent silent this long during a step is lost (it is pinged every 500 ms and reports every 1 s).
pub const LOSS_SILENCE: Duration = Duration::from_secs(3);

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("agent {agent} is unreachable: {why}")]
    Unreachable { agent: String, why: String },
    #[error("agent {agent} refused: {message}")]
    Refused { agent: String, message: String },
    #[error("agent {agent} disconnected while {doing}{}", cause(why))]
    Lost {
        agent: String,
        doing: String,
        why: agent::link::Closed,
    },
    #[error("agent {agent} did not answer within {secs} s while {doing}")]
    Silent {
        agent: String,
        secs: u64,
        doing: String,
    },
    #[error("agent {agent} sent an invalid message: {why}")]
    Protocol { agent: String, why: String },
    #[error("agent {agent} would refuse this plan: {message}")]
    Limit { agent: String, message: String },
    #[error("no agent is left to run step {step}")]
    NoAgents { step: usize },
    #[error("{0}")]
    Output(#[from] OutputError),
    #[error(transparent)]
    Dir(#[from] DirError),
    #[error("interrupted before the first step")]
    Interrupted,
    #[error(transparent)]
    Spill(#[from] SpillError),
    #[error("cannot start the embedded agent: {0}")]
    Engine(#[from] agent::engine::EngineError),
}

/// What a closed stream adds to "disconnected": nothing when it simply ended.
fn cause(why: &agent::link::Closed) -> String {
    match why {
        agent::link::Closed::Ended => String::new(),
        agent::link::Closed::Dropped(words) | agent::link::Closed::Broken(words) => {
            format!(": {words}")
        }
    }
}

impl RunError {
    /// 2 for what the user must fix before running, 1 for a run that failed.
    pub fn exit_code(&self) -> u8 {
        match self {
            RunError::Config(_) | RunError::Limit { .. } | RunError::Dir(_) => 2,
            _ => 1,
        }
    }
}

pub struct RunOutcome {
    pub dir: PathBuf,
    pub steps: Vec<StepResult>,
    pub aborted: bool,
    /// Why --stop-on ended the ramp before its last step.
    pub stopped: Option<Stopped>,
    /// Every --fail-on expression a step breached, in step order.
    pub breaches: Vec<Breach>,
}

/// Why the ramp ended early (run.json's `stopped`).
#[derive(Debug, Clone, serde::Serialize)]
pub struct Stopped {
    /// Counted from 1, as the table counts.
    pub after_step: usize,
    pub because: String,
    /// The values of the steps that were planned but not run.
    pub not_run: Vec<f64>,
}

/// A --fail-on expression that a step breached (run.json's `fail_on`).
#[derive(Debug, Clone, serde::Serialize)]
pub struct Breach {
    pub step: usize,
    pub step_value: f64,
    pub expression: String,
    pub because: String,
}

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
    /// The agents' warnings already said in this run.
    warned: Warned,
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
pub async fn run(mut cfg: RunConfig, stop: Stop) -> Result<RunOutcome, RunError> {
    cfg.out = output::claim(&cfg.out, cfg.out_default, cfg.force)?;
    let dir = cfg.out.clone();
    let outcome = run_in(cfg, stop).await;
    if let Err(e) = &outcome {
        output::release(&dir);
        if let RunError::Output(_) | RunError::Spill(_) = e {
            eprintln!(
                "stampede: the steps finished before this are kept in {}",
                dir.display()
            );
        }
    }
    outcome
}

async fn run_in(cfg: RunConfig, stop: Stop) -> Result<RunOutcome, RunError> {
    let (mut fleet, warnings, warned) = tokio::select! {
        ready = ready_fleet(&cfg) => ready?,
        _ = stop.now.cancelled() => return Err(RunError::Interrupted),
    };
    let mut out = Output::create(&cfg, &fleet.infos(), &warnings)?;
    let total = plan_total(&cfg);
    if !cfg.quiet {
        eprintln!("{}", progress::plan_line(&cfg.plan, total, out.dir()));
    }
    let progress = Progress::new(cfg.quiet, total);
    let mut results = Vec::new();
    let mut aborted = false;
    let mut watch = Watch {
        thresholds: &cfg.thresholds,
        streak: 0,
        breaches: Vec::new(),
        stop: None,
        baseline_p50_ms: None,
        warned,
    };
    let mut stopped = None;
    let outcome = async {
        for index in 0..cfg.plan.steps().len() {
            if stop.drain.is_cancelled() || stop.now.is_cancelled() {
                aborted = true;
                break;
            }
            // Dropping the step at an await leaves no half of it on disk: it is written in one
            // synchronous call at its end.
            watch.baseline_p50_ms = baseline_p50(&results);
            let step = tokio::select! {
                step = run_step(&mut fleet, &cfg, index, &stop.drain, &progress, &mut out, &mut watch) => step?,
                _ = stop.now.cancelled() => {
                    aborted = true;
                    break;
                }
            };
            let (r, stop_run) = step;
            aborted |= r.aborted || stop_run;
            let because = watch.stop.take();
            results.push(r);
            out.summarize(&report::summarize_run(&results))?;
            if aborted {
                break;
            }
            let not_run = &cfg.plan.steps()[index + 1..];
            if let Some(because) = because.filter(|_| !not_run.is_empty()) {
                eprintln!(
                    "stampede: stopping after step {} of {} (--stop-on): {because}; not run: {}",
                    index + 1,
                    cfg.plan.steps().len(),
                    not_run
                        .iter()
                        .map(f64::to_string)
                        .collect::<Vec<_>>()
                        .join(", ")
                );
                stopped = Some(Stopped {
                    after_step: index + 1,
                    because,
                    not_run: not_run.to_vec(),
                });
                break;
            }
        }
        Ok::<_, RunError>(())
    }
    .await;
    out.record("stopped", &stopped);
    out.record("fail_on", &watch.breaches);
    let status = match &outcome {
        Ok(()) if aborted => "aborted",
        Ok(()) => "completed",
        Err(_) => "failed",
    };
    let finished = out.finish(status);
    tell_unfinished(out.dir(), status, &finished);
    outcome?;
    finished?;
    Ok(RunOutcome {
        dir: out.dir().to_path_buf(),
        steps: results,
        aborted,
        stopped,
        breaches: watch.breaches,
    })
}

/// Reaches, greets and configures the agents, and checks the plan against what they announced.
async fn ready_fleet(cfg: &RunConfig) -> Result<(Fleet, Vec<String>, Warned), RunError> {
    let mut fleet = fleet::connect(cfg).await?;
    fleet.hello(cfg.token.as_deref()).await?;
    let all = fleet.alive();
    check_source_addrs(&fleet, cfg)?;
    let configure: pb::Configure = cfg.plan.workload().into();
    let warnings = fleet
        .command_all(
            &all,
            |_| Down::Configure(configure.clone()),
            "configuring it",
            false,
        )
        .await?;
    let mut warned = Warned::default();
    let warnings = warned.announce(&fleet, &warnings);
    check_limits(&fleet, cfg)?;
    Ok((fleet, warnings, warned))
}

/// Says on stderr what run.json could not say: it is the run's record, and a status left at
/// "running" after the process has gone would be read as a run still going.
fn tell_unfinished(dir: &std::path::Path, status: &str, finished: &Result<Finished, OutputError>) {
    match finished {
        Ok(Finished::Whole) => {}
        Ok(Finished::StatusOnly(e)) => eprintln!(
            "stampede: {e}; run.json in {} was marked \"{}\" in place, without its end time",
            dir.display(),
            if status.len() <= "running".len() {
                status
            } else {
                "failed"
            }
        ),
        Err(e) => eprintln!(
            "stampede: {e}; run.json in {} still says \"running\": the run ended {status}",
            dir.display()
        ),
    }
}

/// The plan's scheduled time, step after step (without the moments between steps).
fn plan_total(cfg: &RunConfig) -> Duration {
    (0..cfg.plan.steps().len())
        .map(|i| cfg.plan.shares_of_step(i, cfg.seed, &[1])[0].scheduled_duration())
        .sum()
}

/// Refuses, before any load, a plan that some agent's announced limits would refuse at some step:
/// its policy, or its sockets (fd limit, ports). Warnings are left to the agents, which know the
/// resolved target and say them when each step is prepared.
fn check_limits(fleet: &Fleet, cfg: &RunConfig) -> Result<(), RunError> {
    let who = fleet.alive();
    let route = route(cfg);
    let mut used = Duration::ZERO;
    for index in 0..cfg.plan.steps().len() {
        let shares = step_shares(fleet, cfg, &who, index);
        for (k, &i) in who.iter().enumerate() {
            let agent = &fleet.agents[i];
            let limit = |message| RunError::Limit {
                agent: agent.name.clone(),
                message,
            };
            agent.policy.check_step(&shares[k], used).map_err(limit)?;
            if let Some(capacity) = &agent.capacity {
                capacity.check_step(&shares[k], &route).map_err(limit)?;
            }
        }
        used += shares[0].scheduled_duration();
    }
    Ok(())
}

/// The route as the coordinator knows it: it does not resolve the target, so a host name's
/// loopback-ness is left open (the agent checks again with the resolved address).
fn route(cfg: &RunConfig) -> agent::capacity::Route {
    let w = cfg.plan.workload();
    let host = w.origin().host();
    agent::capacity::Route {
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

/// An agent too old to bind `--source-addrs` would send from its default address without a word.
fn check_source_addrs(fleet: &Fleet, cfg: &RunConfig) -> Result<(), RunError> {
    if cfg.plan.workload().source_addrs().is_empty() {
        return Ok(());
    }
    match fleet.agents.iter().find(|a| !a.binds_sources) {
        Some(a) => Err(RunError::Limit {
            agent: a.name.clone(),
            message: "it does not support --source-addrs (an older stampede-agent); upgrade it"
                .into(),
        }),
        None => Ok(()),
    }
}

/// The capacity risks (an agent's "may hold up to" warnings) already told on stderr in this run: an
/// ordinary ramp has one on every step, and repeating them buries everything else.
#[derive(Default)]
struct Warned(std::collections::HashSet<(usize, &'static str)>);

impl Warned {
    /// Prints the agents' warnings on stderr (whatever --quiet says: they explain a result, they are
    /// not progress), a capacity risk once per agent and run, and returns all of them as notes, each
    /// naming its agent: every step's notes keep their own.
    fn announce(&mut self, fleet: &Fleet, warnings: &[(usize, String)]) -> Vec<String> {
        warnings
            .iter()
            .map(|(i, w)| {
                let agent = &fleet.agents[*i].name;
                let first = match risk(w) {
                    Some(kind) => self.0.insert((*i, kind)),
                    None => true,
                };
                if first {
                    let later = if risk(w).is_some() {
                        " (said once per run; later steps' notes name theirs)"
                    } else {
                        ""
                    };
                    eprintln!("stampede: warning from agent {agent}: {w}{later}");
                }
                format!("agent {agent}: {w}")
            })
            .collect()
    }
}

/// Which capacity risk an agent's step warning is, by the failure it predicts.
fn risk(warning: &str) -> Option<&'static str> {
    // The agent's capacity risks (agent::capacity): per step, each naming what would fail.
    if !warning.starts_with("step ") {
        return None;
    }
    if warning.contains("may fall behind its schedule") {
        return Some("dispatch");
    }
    if !warning.contains("the rest would fail as") {
        return None;
    }
    ["fd-unavailable", "addr-unavailable"]
        .into_iter()
        .find(|class| warning.contains(class))
        .or(Some("capacity"))
}

/// An agent's share of the load: its --agent-weights entry, or its cores.
fn weight(fleet: &Fleet, cfg: &RunConfig, i: usize) -> u64 {
    match &cfg.agent_weights {
        Some(w) => w[i],
        None => u64::from(fleet.cores(i)),
    }
}

/// Step `index`'s shares for the agents `who`: the one computation that both the check before the
/// run and the step itself call, so what was checked is what runs.
fn step_shares(fleet: &Fleet, cfg: &RunConfig, who: &[usize], index: usize) -> Vec<StepShare> {
    let weights: Vec<u64> = who.iter().map(|&i| weight(fleet, cfg, i)).collect();
    cfg.plan.shares_of_step(index, cfg.seed, &weights)
}

/// The agents a step still waits for. Every message from every agent asks whether its sender is one,
/// so membership is a lookup, not a scan of up to a thousand agents.
struct Waiting {
    member: Vec<bool>,
    left: usize,
}

impl Waiting {
    fn new(agents: usize, who: impl IntoIterator<Item = usize>) -> Waiting {
        let mut w = Waiting {
            member: vec![false; agents],
            left: 0,
        };
        for i in who {
            if !w.member[i] {
                w.member[i] = true;
                w.left += 1;
            }
        }
        w
    }

    fn contains(&self, i: usize) -> bool {
        self.member[i]
    }

    fn remove(&mut self, i: usize) {
        if std::mem::take(&mut self.member[i]) {
            self.left -= 1;
        }
    }

    fn len(&self) -> usize {
        self.left
    }

    fn is_empty(&self) -> bool {
        self.left == 0
    }

    /// In fleet order.
    fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.member.len()).filter(|&i| self.member[i])
    }

    fn list(&self) -> Vec<usize> {
        self.iter().collect()
    }
}

/// The lowest median latency among the finished steps whose server was ok and whose numbers can be
/// trusted: what a later step's queueing is measured against.
fn baseline_p50(results: &[StepResult]) -> Option<f64> {
    results
        .iter()
        .filter(|r| r.server == Server::Ok && r.trust == Verdict::Valid && r.ok > 0)
        .map(|r| r.latency_ms.p50)
        .min_by(f64::total_cmp)
}

/// Splits, prepares and starts one step; returns it and whether the run must stop after it.
async fn run_step(
    fleet: &mut Fleet,
    cfg: &RunConfig,
    index: usize,
    shutdown: &CancellationToken,
    progress: &Progress,
    out: &mut Output,
    watch: &mut Watch<'_>,
) -> Result<(StepResult, bool), RunError> {
    let plan = &cfg.plan;
    let policy = cfg.on_agent_loss;
    let tolerate = policy != LossPolicy::Abort;
    let doing = format!("preparing step {}", index + 1);
    let before = fleet.alive();
    // Prepare with the live agents; if one is lost meanwhile, split again among the rest.
    let (who, shares, warnings) = loop {
        let who = fleet.alive();
        if who.is_empty() {
            return Err(RunError::NoAgents { step: index + 1 });
        }
        let shares = step_shares(fleet, cfg, &who, index);
        let prepare = |i: usize| {
            let k = who
                .iter()
                .position(|&w| w == i)
                .expect("preparing a listed agent");
            Down::PrepareStep((&shares[k]).into())
        };
        let warnings = fleet.command_all(&who, prepare, &doing, tolerate).await?;
        if fleet.alive().len() == who.len() {
            break (who, shares, warnings);
        }
    };
    // What the agents warned of when they accepted the step goes on stderr now and into its notes.
    let warnings = watch.warned.announce(fleet, &warnings);
    let mut lost: Vec<usize> = before.into_iter().filter(|i| !who.contains(i)).collect();
    fleet.sync_clocks(&who).await;
    if who.iter().any(|&i| !fleet.agents[i].alive) && !tolerate {
        let i = *who
            .iter()
            .find(|&&i| !fleet.agents[i].alive)
            .expect("found above");
        return Err(fleet.lost(i, &doing, agent::link::Closed::Ended));
    }

    let started = SystemTime::now() + START_LEAD;
    let start_ns = unix_ns(started);
    let doing = format!("running step {}", index + 1);
    for &i in &who {
        let start = pb::StartStep {
            step: index as u32,
            start_unix_nanos: start_ns + fleet.agents[i].clock_offset_ns,
        };
        if fleet.send(i, Down::StartStep(start)).await.is_err() {
            fleet.mark_lost(i, "its stream closed at the start of the step");
        }
    }
    let began = Instant::now() + START_LEAD;
    let scheduled = shares[0].scheduled_duration();
    let timeout = plan.workload().timeout();
    let mut deadline = Instant::now() + START_LEAD + scheduled + timeout + STEP_GRACE;

    let n = fleet.agents.len();
    let mut merge = StepMerge::new(n, out.dir())?;
    let mut reports: Vec<Option<pb::StepReport>> = vec![None; n];
    let mut waiting = Waiting::new(n, who.iter().copied().filter(|&i| fleet.agents[i].alive));
    lost.extend(who.iter().copied().filter(|&i| !fleet.agents[i].alive));
    let mut abort_sent = false;
    let mut aborted_at: Option<Instant> = None;
    let mut aborted = false;
    let mut stop_run = false;
    let demanded = plan.demanded_request_rate(plan.steps()[index]);
    let mut check = tokio::time::interval(Duration::from_millis(250));

    while !waiting.is_empty() {
        let mut newly_lost: Vec<(usize, String)> = Vec::new();
        tokio::select! {
            (i, msg) = fleet.next_event() => {
                if !waiting.contains(i) {
                    continue;
                }
                match msg {
                    Err(why) => newly_lost.push((i, why.to_string())),
                    Ok(Up::Refusal(r)) => {
                        let agent = fleet.agents[i].name.clone();
                        return Err(RunError::Refused { agent, message: r.message });
                    }
                    Ok(Up::Interval(report)) => {
                        let merged = merge.interval(i, report).map_err(|e| match e {
                            IntervalError::Report(e) => RunError::Protocol {
                                agent: fleet.agents[i].name.clone(),
                                why: e.to_string(),
                            },
                            IntervalError::Spill(e) => e.into(),
                        })?;
                        // The interval's merged p99 costs a pass over its reports: only for a watcher.
                        if merged.reports == waiting.len() && !merged.tail && progress.wants_ticks()
                            && let Some(seq) = merge.progress(merged.seq)?
                        {
                            let so_far = *merge.counters();
                            show_progress(progress, &seq, &so_far, index, plan.steps().len(), demanded, plan.steps()[index], scheduled);
                        }
                    }
                    Ok(Up::StepReport(r)) => {
                        if r.aborted && !abort_sent {
                            // Stopped on its own (SIGTERM drains an agent): its data counts, but it
                            // left the run.
                            newly_lost.push((i, "it stopped mid-step (shut down)".into()));
                        }
                        reports[i] = Some(r);
                        waiting.remove(i);
                    }
                    Ok(_) => {}
                }
            }
            _ = check.tick() => {
                for i in waiting.iter() {
                    if fleet.agents[i].last_heard.elapsed() > LOSS_SILENCE {
                        newly_lost.push((i, format!("silent for {} s", LOSS_SILENCE.as_secs())));
                    }
                }
            }
            _ = tokio::time::sleep_until(deadline) => {
                if abort_sent {
                    let first = waiting.iter().next().expect("the loop runs while some are waiting");
                    let agent = fleet.agents[first].name.clone();
                    return Err(RunError::Silent {
                        agent,
                        secs: (scheduled + timeout + STEP_GRACE).as_secs(),
                        doing,
                    });
                }
                // Past its deadline: stop it, and give it one more timeout to report what it has.
                fleet.abort_all(&waiting.list(), "step deadline passed").await;
                abort_sent = true;
                aborted = true;
                aborted_at = Some(Instant::now());
                deadline = Instant::now() + timeout + STEP_GRACE;
            }
            _ = shutdown.cancelled(), if !abort_sent => {
                eprintln!(
                    "stampede: interrupted; waiting up to {} (--timeout) for the requests in flight; Ctrl-C again stops at once, keeping the steps before this one",
                    progress::span(timeout)
                );
                fleet.abort_all(&waiting.list(), "interrupted").await;
                abort_sent = true;
                aborted = true;
                aborted_at = Some(Instant::now());
                deadline = Instant::now() + timeout + STEP_GRACE;
            }
        }
        for (i, why) in newly_lost {
            fleet.mark_lost(i, &why);
            waiting.remove(i);
            if !lost.contains(&i) {
                lost.push(i);
            }
            if policy == LossPolicy::Abort && !abort_sent {
                fleet.abort_all(&waiting.list(), "an agent was lost").await;
                abort_sent = true;
                aborted = true;
                aborted_at = Some(Instant::now());
                stop_run = true;
                deadline = Instant::now() + timeout + STEP_GRACE;
            }
        }
    }

    // When each agent began, on the coordinator's clock, from the agreed start instant.
    let delays: Vec<Option<Duration>> = (0..n)
        .map(|i| {
            let r = reports[i].as_ref()?;
            (r.began_unix_nanos > 0).then(|| {
                let ns = r.began_unix_nanos - fleet.agents[i].clock_offset_ns - start_ns;
                Duration::from_nanos(ns.max(0) as u64)
            })
        })
        .collect();
    let sent: Vec<Duration> = delays.iter().flatten().copied().collect();
    let start_skew = sent
        .iter()
        .max()
        .zip(sent.iter().min())
        .map(|(max, min)| *max - *min);
    let StepTotals {
        total,
        series,
        agents: sums,
        hlog,
    } = merge.finish()?;
    let mut members: Vec<usize> = who.clone();
    members.extend(lost.iter().copied().filter(|i| !who.contains(i)));
    let agents = members
        .iter()
        .map(|&i| AgentInput {
            name: fleet.agents[i].name.clone(),
            threads: fleet.threads(i),
            cores: fleet.cores(i),
            wall: reports[i]
                .as_ref()
                .map_or(scheduled, |r| Duration::from_micros(r.wall_us)),
            counters: sums[i].counters,
            cpu_ns: sums[i].cpu_ns,
            latency_ms: sums[i].latency_ms,
            start_delay: delays[i],
            lost: lost.contains(&i),
            clock_offset_ns: fleet.agents[i].clock_offset_ns,
            rtt: Duration::from_nanos(fleet.agents[i].rtt_ns.max(0) as u64),
        })
        .collect::<Vec<AgentInput>>();
    // An aborted step is summarised over the time it ran until the abort, not the drain after it; a
    // closed loop that spent its request count (`-n`) over the time its agents took, as ab reports.
    let duration = match aborted_at {
        Some(at) => at.saturating_duration_since(began).min(scheduled),
        None if plan.max_requests().is_some() => agents
            .iter()
            .map(|a| a.wall)
            .max()
            .unwrap_or(scheduled)
            .min(scheduled),
        None => scheduled,
    };
    let mut result = report::summarize(&StepInput {
        // Counted from 1 in everything people read; `index` stays the protocol's.
        number: index as u32 + 1,
        model: plan.model(),
        value: plan.steps()[index],
        demanded_rate: demanded,
        duration,
        total: &total,
        series: &series,
        agents,
        aborted,
        mark_lost: policy != LossPolicy::Continue,
        start_skew,
        ok_status: plan.workload().ok_status(),
        baseline_p50_ms: watch.baseline_p50_ms,
    });
    result.notes.extend(warnings);
    watch.judge(&mut result, index + 1);
    progress.step_done(&result, plan.steps().len());
    let names: Vec<String> = fleet.agents.iter().map(|a| a.name.clone()).collect();
    out.write_step(&result, started, hlog.intervals(), &names)?;
    Ok((result, stop_run))
}

#[allow(clippy::too_many_arguments)]
fn show_progress(
    progress: &Progress,
    seq: &SeqProgress,
    so_far: &shared::metrics::Counters,
    index: usize,
    steps: usize,
    demanded: Option<f64>,
    value: f64,
    length: Duration,
) {
    let secs = seq.length.as_secs_f64().max(1e-9);
    let elapsed = seq.offset + seq.length;
    progress.tick(&Tick {
        number: index as u32 + 1,
        steps,
        elapsed,
        length,
        demanded,
        value,
        // Over the step so far, as the table's figure is over the whole step.
        sent: so_far.requests as f64 / elapsed.as_secs_f64().max(1e-9),
        served: seq.counters.ok as f64 / secs,
        p99_ms: histogram::us_to_ms(seq.p99_us),
        // Of the requests due so far, those known to have failed: a request still in flight is
        // neither served nor failed yet (the step's `failed_pct` counts every one, once all are in).
        failed_pct: shared::verdict::pct(so_far.known_failed(), so_far.due()),
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use shared::metrics::Snapshot;

    /// A finished step of 100 requests, all answered in `latency_ms`.
    fn step(latency_ms: u64) -> StepResult {
        let mut s = Snapshot::default();
        s.counters.requests = 100;
        s.counters.replies = 100;
        s.counters.ok = 100;
        s.hist.latency.record_n(latency_ms * 1000, 100).unwrap();
        report::summarize(&StepInput {
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
        }
    }

    #[test]
    fn every_capacity_risk_the_agent_words_is_told_once() {
        for (w, kind) in [
            (
                "step 3 may hold up to 2000 connections open if the target stops answering (...), more than the 924 this agent can open (...); the rest would fail as fd-unavailable",
                "fd-unavailable",
            ),
            (
                "step 3 may need up to 200 concurrent connections if the target stops answering (...), more than the 48 this agent can open (...); the rest would fail as fd-unavailable",
                "fd-unavailable",
            ),
            (
                "step 2 may need up to 30000 concurrent connections to one destination if ..., more than the 28232 local ports this agent has (...); the rest would fail as addr-unavailable",
                "addr-unavailable",
            ),
            (
                "step 1 needs 3000000 requests/s from this agent, more than its 2 worker threads will likely dispatch (...); it may fall behind its schedule",
                "dispatch",
            ),
        ] {
            assert_eq!(risk(w), Some(kind), "{w}");
        }
        assert_eq!(risk("source address 10.0.0.9 is not on this machine"), None);
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
