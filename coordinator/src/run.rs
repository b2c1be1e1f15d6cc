//! Drives a run: for each step, splits it among the live agents, prepares it, measures their clocks,
//! starts it at one instant, merges the streamed intervals, handles lost agents by policy, summarises
//! and writes. This task alone owns the run's state; agents' messages reach it through the fleet.
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use proto::pb;
use proto::pb::agent_message::Kind as Up;
use proto::pb::coordinator_message::Kind as Down;
use shared::histogram;
use shared::report::{self, AgentInput, StepInput, StepResult};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::config::{ConfigError, LossPolicy, RunConfig};
use crate::fleet::{self, Fleet, unix_ns};
use crate::merge::{IntervalError, SeqProgress, SpillError, StepMerge, StepTotals};
use crate::output::{self, Output, OutputError};
use crate::progress::{Progress, Tick};

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
    #[error("agent {agent} disconnected while {doing}")]
    Lost { agent: String, doing: String },
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
    Spill(#[from] SpillError),
    #[error("cannot start the embedded agent: {0}")]
    Engine(#[from] agent::engine::EngineError),
}

impl RunError {
    /// 2 for what the user must fix before running, 1 for a run that failed.
    pub fn exit_code(&self) -> u8 {
        match self {
            RunError::Config(_) | RunError::Limit { .. } => 2,
            _ => 1,
        }
    }
}

pub struct RunOutcome {
    pub dir: PathBuf,
    pub steps: Vec<StepResult>,
    pub aborted: bool,
}

/// Runs the plan. Ctrl-C (the `shutdown` token) aborts the running step, which is still written,
/// marked aborted.
pub async fn run(cfg: RunConfig, shutdown: CancellationToken) -> Result<RunOutcome, RunError> {
    output::prepare_dir(&cfg.out)?;
    let mut fleet = fleet::connect(&cfg).await?;
    fleet.hello(cfg.token.as_deref()).await?;
    let all = fleet.alive();
    check_source_addrs(&fleet, &cfg)?;
    let configure: pb::Configure = (&cfg.plan.workload).into();
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

    check_limits(&fleet, &cfg)?;
    let mut out = Output::create(&cfg, &fleet.infos(), &warnings)?;
    let progress = Progress::new(cfg.quiet);
    let mut results = Vec::new();
    let mut aborted = false;
    let outcome = async {
        for index in 0..cfg.plan.steps.len() {
            if shutdown.is_cancelled() {
                aborted = true;
                break;
            }
            let (r, stop) = run_step(
                &mut fleet,
                &cfg,
                index,
                &shutdown,
                &progress,
                &mut out,
                &mut warned,
            )
            .await?;
            aborted |= r.aborted || stop;
            results.push(r);
            if aborted {
                break;
            }
        }
        Ok::<_, RunError>(())
    }
    .await;
    match outcome {
        Ok(()) => out.finish(if aborted { "aborted" } else { "completed" })?,
        Err(e) => {
            let _ = out.finish("failed");
            return Err(e);
        }
    }
    Ok(RunOutcome {
        dir: out.dir().to_path_buf(),
        steps: results,
        aborted,
    })
}

/// Refuses, before any load, a plan that some agent's announced limits would refuse at some step:
/// its policy, or its sockets (fd limit, ports). Warnings are left to the agents, which know the
/// resolved target and say them when each step is prepared.
fn check_limits(fleet: &Fleet, cfg: &RunConfig) -> Result<(), RunError> {
    let who = fleet.alive();
    let weights: Vec<u64> = who.iter().map(|&i| weight(fleet, cfg, i)).collect();
    let route = route(cfg);
    let mut used = Duration::ZERO;
    for index in 0..cfg.plan.steps.len() {
        let shares = cfg.plan.step_shares(index, cfg.seed, &weights);
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
    let w = &cfg.plan.workload;
    let host = &w.origin().host;
    agent::capacity::Route {
        timeout: w.timeout,
        connect_timeout: w.connect_timeout,
        sources: w.source_addrs.len(),
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
    if cfg.plan.workload.source_addrs.is_empty() {
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
    if !warning.contains("may hold up to") {
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

/// Splits, prepares and starts one step; returns it and whether the run must stop after it.
async fn run_step(
    fleet: &mut Fleet,
    cfg: &RunConfig,
    index: usize,
    shutdown: &CancellationToken,
    progress: &Progress,
    out: &mut Output,
    warned: &mut Warned,
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
        let weights: Vec<u64> = who.iter().map(|&i| weight(fleet, cfg, i)).collect();
        let shares = plan.step_shares(index, cfg.seed.wrapping_add(index as u64), &weights);
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
    let warnings = warned.announce(fleet, &warnings);
    let mut lost: Vec<usize> = before.into_iter().filter(|i| !who.contains(i)).collect();
    fleet.sync_clocks(&who).await;
    if who.iter().any(|&i| !fleet.agents[i].alive) && !tolerate {
        let i = *who
            .iter()
            .find(|&&i| !fleet.agents[i].alive)
            .expect("found above");
        return Err(fleet.lost(i, &doing));
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
    let timeout = plan.workload.timeout;
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
    let demanded = plan.demanded_request_rate(plan.steps[index]);
    let mut check = tokio::time::interval(Duration::from_millis(250));

    while !waiting.is_empty() {
        let mut newly_lost: Vec<(usize, String)> = Vec::new();
        tokio::select! {
            (i, msg) = fleet.next_event() => {
                if !waiting.contains(i) {
                    continue;
                }
                match msg.and_then(|m| m.kind) {
                    None => newly_lost.push((i, "its stream closed".into())),
                    Some(Up::Refusal(r)) => {
                        let agent = fleet.agents[i].name.clone();
                        return Err(RunError::Refused { agent, message: r.message });
                    }
                    Some(Up::Interval(report)) => {
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
                            let errors = merge.counters().errors_total();
                            show_progress(progress, &seq, errors, index, plan.steps.len(), demanded, plan.steps[index]);
                        }
                    }
                    Some(Up::StepReport(r)) => {
                        if r.aborted && !abort_sent {
                            // Stopped on its own (SIGTERM drains an agent): its data counts, but it
                            // left the run.
                            newly_lost.push((i, "it stopped mid-step (shut down)".into()));
                        }
                        reports[i] = Some(r);
                        waiting.remove(i);
                    }
                    Some(_) => {}
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
        .collect();
    // An aborted step is summarised over the time it ran until the abort, not the drain after it.
    let duration = match aborted_at {
        Some(at) => at.saturating_duration_since(began).min(scheduled),
        None => scheduled,
    };
    let mut result = report::summarize(&StepInput {
        step: index as u32,
        model: plan.model,
        value: plan.steps[index],
        demanded_rate: demanded,
        duration,
        total: &total,
        series: &series,
        agents,
        aborted,
        mark_lost: policy != LossPolicy::Continue,
        start_skew,
    });
    result.notes.extend(warnings);
    progress.step_done(&result, plan.steps.len());
    let names: Vec<String> = fleet.agents.iter().map(|a| a.name.clone()).collect();
    out.write_step(&result, started, hlog.intervals(), &names)?;
    Ok((result, stop_run))
}

fn show_progress(
    progress: &Progress,
    seq: &SeqProgress,
    errors: u64,
    index: usize,
    steps: usize,
    demanded: Option<f64>,
    value: f64,
) {
    let secs = seq.length.as_secs_f64().max(1e-9);
    progress.tick(&Tick {
        step: index as u32,
        steps,
        elapsed_s: (seq.offset + seq.length).as_secs_f64(),
        demanded,
        value,
        achieved: seq.counters.requests as f64 / secs,
        replies: seq.counters.replies as f64 / secs,
        p99_ms: histogram::us_to_ms(seq.p99_us),
        errors,
    });
}
