//! One step, owned by one task, as a state machine: prepare (split among the live load agents, acks,
//! clocks), start (one instant, in each agent's clock), collect (merge the streamed intervals; the
//! events it consumes are a closed enum; an abort, whatever its cause, is one transition from running
//! to stopping), summarize. Each phase hands the next a typed result.
use std::path::Path;
use std::time::{Duration, SystemTime};

use control::link::Closed;
use proto::pb;
use proto::pb::agent_message::Kind as Up;
use proto::pb::coordinator_message::Kind as Down;
use results::step::StepResult;
use shared::histogram;
use shared::plan::{LoadModel, StepShare};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::source::{self, StepSource, StepSpec};
use super::warned::Warned;
use super::{RunError, Watch};
use crate::config::{LossPolicy, RunConfig};
use crate::fleet::{Fleet, FleetError, Waiting, unix_ns};
use crate::merge::{IntervalError, SeqProgress, ShareBound, StepMerge, StepTotals, check_claim};
use crate::output::{self, Output};
use crate::progress::{self, Progress, Tick};
use summary::{observe_server, summarize};

/// How far ahead of "now" a step's start instant is set, so every agent has it before it passes.
const START_LEAD: Duration = Duration::from_millis(200);
/// What a step costs beyond its schedule, for the plan line's estimate: its [`START_LEAD`], the
/// drain of its last requests, its closing sample from each monitor (asked for at its end), and the
/// writing of its files and the next step's prepare. Measured by bench/monitored.sh (~0.25 s a
/// step on loopback, monitored or not; docs/benchmarks.md).
pub const STEP_OVERHEAD: Duration = Duration::from_millis(300);
/// Extra time past a step's schedule and timeout before an agent counts as stuck.
pub const STEP_GRACE: Duration = Duration::from_secs(5);
/// How much longer than the coordinator saw the step run an agent's own wall time may be: clocks
/// apart and the report's way here.
const WALL_SLACK: Duration = Duration::from_secs(2);
/// An agent silent this long during a step is lost (it is pinged every 500 ms and reports every 1 s).
pub const LOSS_SILENCE: Duration = Duration::from_secs(3);
/// How often the step looks for silent agents.
const SILENCE_CHECK: Duration = Duration::from_millis(250);
/// A look for silent agents this much later than due means the run task itself was held up (a
/// stalled process, a blocked write): what arrived meanwhile may not have been read yet, so silence
/// is counted again from the moment it came back.
const STALL: Duration = Duration::from_secs(1);

/// What a step needs from the run around it.
pub struct StepCx<'a> {
    pub cfg: &'a RunConfig,
    pub progress: &'a Progress,
    /// The first Ctrl-C: aborts the step; its requests in flight may finish.
    pub drain: &'a CancellationToken,
    /// The target's steps before this one (the monitors' notes say since when a CPU is at its limit).
    pub earlier: &'a [StepResult],
    /// How many steps the target has, when known beforehand.
    pub steps: Option<usize>,
    /// Whether the target goes on after a step that overran its deadline (a search's probe).
    pub outlasts_overruns: bool,
    /// Where the step's start and merged seconds go as it runs (the live page, events.ndjson), and
    /// which of the run's targets it is.
    pub feed: &'a crate::live::Feed,
    pub target: usize,
}

/// Why the run must end after this step, whatever the step's result says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EndCause {
    /// An agent was lost under `--on-agent-loss abort`.
    AgentLost,
}

/// A finished step, written, and whether the run goes on.
pub struct StepOutcome {
    pub result: StepResult,
    pub end_run: Option<EndCause>,
}

/// The step split and acknowledged: who runs it, their shares (in `who`'s order), the notes their
/// warnings make, and which agents were lost before it started.
struct Prepared {
    who: Vec<usize>,
    shares: Vec<StepShare>,
    notes: Vec<String>,
    /// Of `notes`, those that repeat a warning the run said before.
    repeats: Vec<String>,
    lost_before: Vec<usize>,
}

/// The step started: its agreed instant on the wall clock (and in ns since the epoch) and on the
/// monotonic clock, and the time it is scheduled for.
struct Started {
    started: SystemTime,
    start_ns: i64,
    began: Instant,
    scheduled: Duration,
}

/// What the agents sent, once none is awaited any more.
struct Collected {
    reports: Vec<Option<pb::StepReport>>,
    /// Indexed like the fleet: lost during this step.
    lost: Vec<bool>,
    /// When the step was told to stop, if it was.
    aborted_at: Option<Instant>,
    end_run: Option<EndCause>,
    totals: StepTotals,
    /// What the step's notes must say: an agent past the step's deadline, or dropped for reports
    /// that cannot be true.
    notes: Vec<String>,
}

/// Why a running step was told to stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StopCause {
    Deadline,
    Interrupted,
    AgentLost,
}

impl StopCause {
    /// The reason the agents read in their `Abort`.
    fn reason(self) -> &'static str {
        match self {
            StopCause::Deadline => "step deadline passed",
            StopCause::Interrupted => "interrupted",
            StopCause::AgentLost => "an agent was lost",
        }
    }
}

enum Phase {
    /// Until its deadline (schedule + timeout + grace).
    Running { deadline: Instant },
    /// Told to stop: its agents have until `deadline` (one more timeout + grace) to report.
    Stopping { cause: StopCause, deadline: Instant },
}

/// Everything the collecting step reacts to. Each lives for one turn of the loop, on the stack: the
/// size of an agent's message is no cost worth a box per message.
#[allow(clippy::large_enum_variant)]
enum Event {
    Agent(usize, Result<Up, Closed>),
    /// Time to look for silent agents.
    Tick,
    Deadline,
    /// The first Ctrl-C.
    Cancel,
    AgentLost(usize, String),
}

/// Runs one step through its phases and writes it; `watch` carries what the run knows across steps.
pub async fn run_step(
    fleet: &mut Fleet,
    cx: &StepCx<'_>,
    spec: StepSpec,
    out: &mut Output,
    watch: &mut Watch<'_>,
    source: &mut (dyn StepSource + Send + '_),
) -> Result<StepOutcome, RunError> {
    let mut prepared = prepare(fleet, cx, spec, &watch.warned).await?;
    let repeats = std::mem::take(&mut prepared.repeats);
    let started = start(fleet, spec, &prepared).await;
    tell_start(fleet, cx, spec, &prepared, &started);
    let collected = Collecting::new(fleet, cx, spec, &prepared, &started, out.dir())?
        .run()
        .await?;
    let end_run = collected.end_run;
    let (mut result, hlog, distribution) =
        summarize(fleet, cx, spec, prepared, &started, collected, watch);
    observe_server(fleet, &mut result, &started, cx).await;
    let number = result.number;
    watch
        .repeats
        .extend(repeats.into_iter().map(|note| (number, note)));
    if !spec.counted {
        // A warmup: shown, and kept apart in run.json; no threshold judges it, no table holds it.
        cx.progress.step_done(&result, cx.steps);
        out.record_warmup(&result)?;
        return Ok(StepOutcome { result, end_run });
    }
    watch.judge(&mut result, spec.index + 1);
    source.judge(&spec, &mut result);
    cx.progress.step_done(&result, cx.steps);
    // A mix's requests' .hlog files before the step's row, as the step's own .hlog.
    output::write_name_hlogs(
        out.dir(),
        result.number,
        started.started,
        cx.cfg.plan.workload().names(),
        |names| hlog.name_intervals(names),
    )?;
    out.write_step(
        &result,
        started.started,
        hlog.intervals(),
        &fleet.names(),
        &distribution,
    )?;
    Ok(StepOutcome { result, end_run })
}

/// Splits the step among the live load agents and has each acknowledge its share; if one is lost
/// meanwhile, splits again among the rest. Then measures their clocks.
async fn prepare(
    fleet: &mut Fleet,
    cx: &StepCx<'_>,
    spec: StepSpec,
    warned: &Warned,
) -> Result<Prepared, RunError> {
    let cfg = cx.cfg;
    let tolerate = cfg.on_agent_loss != LossPolicy::Abort;
    let doing = format!("preparing step {}", spec.index + 1);
    let before = fleet.live();
    let (who, shares, warnings) = loop {
        let who = fleet.live();
        if who.is_empty() {
            return Err(RunError::NoAgents {
                step: spec.index + 1,
            });
        }
        let weights = fleet.weights(&who, cfg.agent_weights.as_deref());
        let shares = source::shares(cfg, spec, &weights);
        let mut k_of = vec![0; fleet.len()];
        for (k, &i) in who.iter().enumerate() {
            k_of[i] = k;
        }
        let prepare = |i: usize| Down::PrepareStep((&shares[k_of[i]]).into());
        let warnings = fleet.command_all(&who, prepare, &doing, tolerate).await?;
        if fleet.live().len() == who.len() {
            break (who, shares, warnings);
        }
    };
    // What the agents warned of when they accepted the step goes on stderr now and into its notes.
    let announced = warned.announce(fleet, &warnings);
    let lost_before = before.into_iter().filter(|i| !who.contains(i)).collect();
    // The monitors' clocks too: their samples are put on the step's clock by these offsets.
    let clocks: Vec<usize> = who.iter().copied().chain(fleet.monitors()).collect();
    fleet.sync_clocks(&clocks).await;
    if !tolerate && let Some(&i) = who.iter().find(|&&i| !fleet.is_alive(i)) {
        return Err(fleet.lost(i, &doing, Closed::Ended).into());
    }
    Ok(Prepared {
        who,
        shares,
        notes: announced.notes,
        repeats: announced.repeats,
        lost_before,
    })
}

/// Sends each agent the start instant, `START_LEAD` from now, in its own clock.
async fn start(fleet: &mut Fleet, spec: StepSpec, p: &Prepared) -> Started {
    let started = SystemTime::now() + START_LEAD;
    let start_ns = unix_ns(started);
    for &i in &p.who {
        let start = pb::StartStep {
            step: spec.index as u32,
            start_unix_nanos: start_ns + fleet.offset_ns(i),
        };
        if fleet.send(i, Down::StartStep(start)).await.is_err() {
            fleet.mark_lost(i, "its stream closed at the start of the step");
        }
    }
    Started {
        started,
        start_ns,
        began: Instant::now() + START_LEAD,
        scheduled: p.shares[0].scheduled_duration(),
    }
}

/// The step while its agents run it: the one owner of its merge, its waiting list and its phase.
struct Collecting<'a> {
    fleet: &'a mut Fleet,
    cx: &'a StepCx<'a>,
    spec: StepSpec,
    phase: Phase,
    waiting: Waiting,
    merge: StepMerge,
    reports: Vec<Option<pb::StepReport>>,
    lost: Vec<bool>,
    aborted_at: Option<Instant>,
    end_run: Option<EndCause>,
    scheduled: Duration,
    timeout: Duration,
    demanded: Option<f64>,
    /// When the last look for silent agents was, and when the run task last came back from a stall:
    /// no agent is silent for longer than the run task could hear it.
    looked: Instant,
    resumed: Instant,
    /// When the step began (the agents' common start), and what each agent's share allows (indexed
    /// like the fleet; `None` for those without a share).
    began: Instant,
    bounds: Vec<Option<ShareBound>>,
    dropped: Vec<bool>,
    /// What the step's notes must say: an agent past the step's deadline, or dropped for reports
    /// that cannot be true.
    notes: Vec<String>,
    /// The agents given a share, in the order the step's start named them.
    who: Vec<usize>,
}

impl<'a> Collecting<'a> {
    fn new(
        fleet: &'a mut Fleet,
        cx: &'a StepCx<'a>,
        spec: StepSpec,
        p: &Prepared,
        s: &Started,
        dir: &Path,
    ) -> Result<Collecting<'a>, RunError> {
        let n = fleet.len();
        let plan = &cx.cfg.plan;
        let timeout = plan.workload().timeout();
        let waiting = Waiting::new(n, p.who.iter().copied().filter(|&i| fleet.is_alive(i)));
        let mut lost = vec![false; n];
        for &i in p.lost_before.iter().chain(&p.who) {
            lost[i] = !fleet.is_alive(i);
        }
        let mut bounds = vec![None; n];
        for (&i, share) in p.who.iter().zip(&p.shares) {
            bounds[i] = Some(ShareBound::of(share));
        }
        Ok(Collecting {
            phase: Phase::Running {
                deadline: s.began + s.scheduled + timeout + STEP_GRACE,
            },
            waiting,
            merge: StepMerge::new(n, dir)?.with_names(plan.workload().names().len()),
            reports: vec![None; n],
            lost,
            aborted_at: None,
            end_run: None,
            scheduled: s.scheduled,
            timeout,
            demanded: plan.demanded_request_rate(spec.value),
            looked: Instant::now(),
            resumed: Instant::now(),
            began: s.began,
            bounds,
            dropped: vec![false; n],
            notes: Vec::new(),
            who: p.who.clone(),
            fleet,
            cx,
            spec,
        })
    }

    /// Until no agent is awaited: each has reported, or was lost.
    async fn run(mut self) -> Result<Collected, RunError> {
        let mut check = tokio::time::interval(SILENCE_CHECK);
        while !self.waiting.is_empty() {
            let (deadline, running) = match self.phase {
                Phase::Running { deadline } => (deadline, true),
                Phase::Stopping { deadline, .. } => (deadline, false),
            };
            // Messages first: a backlog (after a stall) is drained before any silence or deadline
            // is judged.
            let event = tokio::select! {
                biased;
                (i, msg) = self.fleet.next_event() => Event::Agent(i, msg),
                _ = check.tick() => Event::Tick,
                _ = tokio::time::sleep_until(deadline) => Event::Deadline,
                _ = self.cx.drain.cancelled(), if running => Event::Cancel,
            };
            for follow in self.on(event).await? {
                self.on(follow).await?;
            }
        }
        Ok(Collected {
            reports: self.reports,
            lost: self.lost,
            aborted_at: self.aborted_at,
            end_run: self.end_run,
            totals: self.merge.finish()?,
            notes: self.notes,
        })
    }

    /// One event; returns the losses it revealed, to be handled next.
    async fn on(&mut self, event: Event) -> Result<Vec<Event>, RunError> {
        match event {
            Event::Agent(i, _) if !self.waiting.contains(i) => {}
            Event::Agent(i, msg) => {
                return self.on_message(i, msg).map(|l| l.into_iter().collect());
            }
            Event::Tick => return Ok(self.silent_agents()),
            Event::Deadline => match self.phase {
                Phase::Running { .. } => return Ok(self.overdue().await),
                Phase::Stopping { .. } => return Err(self.silent()),
            },
            Event::Cancel => {
                progress::say(format!(
                    "stampede: interrupted; waiting up to {} (--timeout) for the requests in flight; Ctrl-C again stops at once, keeping the steps before this one",
                    progress::span(self.timeout)
                ));
                self.stop(StopCause::Interrupted).await;
            }
            Event::AgentLost(i, why) => self.lose(i, &why).await,
        }
        Ok(Vec::new())
    }

    /// The awaited agents nothing has arrived from for [`LOSS_SILENCE`], counted from their last
    /// arrival (stamped as it came) or from when the run task came back from a stall, whichever is
    /// later: silence the run task could not hear is not the agents'.
    fn silent_agents(&mut self) -> Vec<Event> {
        let now = Instant::now();
        if now.saturating_duration_since(self.looked) > STALL {
            self.resumed = now;
        }
        self.looked = now;
        let since = |i| self.fleet.heard_at(i).max(self.resumed);
        self.waiting
            .iter()
            .filter(|&i| now.saturating_duration_since(since(i)) > LOSS_SILENCE)
            .map(|i| Event::AgentLost(i, format!("silent for {} s", LOSS_SILENCE.as_secs())))
            .collect()
    }

    /// The step's deadline passed while it ran: each agent whose report is missing is named (on
    /// stderr and in the step's notes), told to stop, and counts as lost, which `--on-agent-loss`
    /// then decides about; the others' reports stand. A search, which counts an overrun as a rate
    /// the generator could not carry, stops the step instead and keeps its agents.
    async fn overdue(&mut self) -> Vec<Event> {
        let step = self.spec.index + 1;
        let within = self.scheduled + self.timeout + STEP_GRACE;
        let how = format!(
            "{} (schedule {} + timeout {} + {})",
            progress::span(within),
            progress::span(self.scheduled),
            progress::span(self.timeout),
            progress::span(STEP_GRACE)
        );
        let late = self.waiting.list();
        let mut lost = Vec::with_capacity(late.len());
        for i in late {
            let why = format!("sent no step report within {how}");
            let line = format!("step {step}: agent {} {why}", self.fleet.name(i));
            progress::say(format!("stampede: {line}"));
            self.notes.push(line);
            lost.push(Event::AgentLost(i, why));
        }
        if self.cx.outlasts_overruns {
            self.stop(StopCause::Deadline).await;
            return Vec::new();
        }
        let late = self.waiting.list();
        self.fleet
            .abort_all(&late, StopCause::Deadline.reason())
            .await;
        lost
    }

    /// A message from an awaited agent; a loss it reveals is returned.
    fn on_message(&mut self, i: usize, msg: Result<Up, Closed>) -> Result<Option<Event>, RunError> {
        match msg {
            Err(why) => return Ok(Some(Event::AgentLost(i, why.to_string()))),
            Ok(Up::Refusal(r)) => return Err(FleetError::refused(self.fleet.name(i), r).into()),
            Ok(Up::Interval(report)) => return self.interval(i, report),
            Ok(Up::StepReport(r)) => {
                // Its workers' time, the CPU share's denominator: no longer than the step has been on.
                let on = Instant::now().saturating_duration_since(self.began) + WALL_SLACK;
                if Duration::from_micros(r.wall_us) > on {
                    let why = format!(
                        "its step report says it ran {} s, where {} s have passed since the step began",
                        r.wall_us / 1_000_000,
                        on.as_secs()
                    );
                    return Ok(Some(self.disbelieve(i, &why)));
                }
                let drained = r.aborted && matches!(self.phase, Phase::Running { .. });
                self.reports[i] = Some(r);
                self.waiting.remove(i);
                if drained {
                    // Stopped on its own (SIGTERM drains an agent): its data counts, but it left the run.
                    let why = "it stopped mid-step (shut down)".to_string();
                    return Ok(Some(Event::AgentLost(i, why)));
                }
            }
            Ok(_) => {}
        }
        Ok(None)
    }

    /// Merges an interval, or drops its agent when the report cannot be true of its share.
    fn interval(
        &mut self,
        i: usize,
        report: pb::IntervalReport,
    ) -> Result<Option<Event>, RunError> {
        if let Some(bound) = self.bounds[i] {
            // Its share stops sending at the schedule's end; the second over covers clocks apart.
            let into = Instant::now().saturating_duration_since(self.began);
            let allowed = bound.allows(into.min(self.scheduled) + Duration::from_secs(1));
            if let Err(why) = check_claim(self.merge.agent_counters(i), &report, allowed) {
                return Ok(Some(self.disbelieve(i, &why)));
            }
        }
        let merged = self.merge.interval(i, report).map_err(|e| match e {
            IntervalError::Report(e) => RunError::from(FleetError::Protocol {
                agent: self.fleet.name(i).to_string(),
                why: e.to_string(),
            }),
            IntervalError::Spill(e) => e.into(),
        })?;
        // The interval's merged percentiles cost a pass over its reports, once a merged second: for
        // the progress line and the run's events (events.ndjson is written by every run).
        let watched = self.cx.progress.wants_ticks() || self.cx.feed.is_on();
        if merged.reports == self.waiting.len() && !merged.tail && watched {
            let (feed, target) = (self.cx.feed, self.cx.target);
            let mut latency = None;
            // Only /metrics wants the histogram itself, and only while it is served.
            let keep = feed.keeps_metrics();
            let seq = self.merge.progress(merged.seq, |h| {
                if keep {
                    latency = Some(h.clone());
                }
            })?;
            if let Some(seq) = seq {
                let so_far = *self.merge.counters();
                show_progress(
                    self.cx,
                    self.spec,
                    &seq,
                    &so_far,
                    self.demanded,
                    self.scheduled,
                );
                let agents_sent = self
                    .who
                    .iter()
                    .map(|&i| self.merge.agent_counters(i).requests)
                    .collect();
                feed.interval(
                    target,
                    tell_interval(self.spec, &seq, &so_far, agents_sent),
                    latency.as_ref(),
                );
            }
        }
        Ok(None)
    }

    /// Drops agent `i`, whose report cannot be true: said on stderr and in the step's notes; its
    /// loss follows (and stops it).
    fn disbelieve(&mut self, i: usize, why: &str) -> Event {
        let words = format!(
            "agent {} dropped in step {}: its report cannot be true ({why})",
            self.fleet.name(i),
            self.spec.index + 1
        );
        eprintln!("stampede: {words}");
        self.notes.push(words);
        self.dropped[i] = true;
        Event::AgentLost(i, format!("its report cannot be true ({why})"))
    }

    /// The one transition from running to stopping: the agents still awaited are told to stop, and
    /// get one more timeout (and the grace) to report what they have.
    async fn stop(&mut self, cause: StopCause) {
        self.fleet
            .abort_all(&self.waiting.list(), cause.reason())
            .await;
        let now = Instant::now();
        self.aborted_at = Some(now);
        self.phase = Phase::Stopping {
            cause,
            deadline: now + self.timeout + STEP_GRACE,
        };
    }

    async fn lose(&mut self, i: usize, why: &str) {
        if self.dropped[i] && self.fleet.is_alive(i) {
            // Dropped for what it reported: whatever it still runs is not counted, so it stops.
            self.fleet
                .abort_all(&[i], "this agent was dropped from the run")
                .await;
        }
        self.fleet.mark_lost(i, why);
        self.waiting.remove(i);
        self.lost[i] = true;
        if self.cx.cfg.on_agent_loss == LossPolicy::Abort
            && matches!(self.phase, Phase::Running { .. })
        {
            self.end_run = Some(EndCause::AgentLost);
            self.stop(StopCause::AgentLost).await;
        }
    }

    /// Told to stop, an agent did not report within one more timeout: the run cannot go on.
    fn silent(&self) -> RunError {
        let first = self
            .waiting
            .iter()
            .next()
            .expect("collecting while some are waiting");
        if let Phase::Stopping { cause, .. } = self.phase {
            tracing::warn!(step = self.spec.index + 1, ?cause, agent = %self.fleet.name(first), "No report after the step was stopped");
        }
        FleetError::Silent {
            agent: self.fleet.name(first).to_string(),
            secs: (self.scheduled + self.timeout + STEP_GRACE).as_secs(),
            doing: format!("running step {}", self.spec.index + 1),
        }
        .into()
    }
}

/// The step's number as people read it: counted from 1; 0 for a warmup, which is no step of theirs.
fn step_number(spec: StepSpec) -> u32 {
    if spec.counted {
        spec.index as u32 + 1
    } else {
        0
    }
}

/// The step as it starts, for the live page: its agents and their shares of its value.
fn tell_start(fleet: &Fleet, cx: &StepCx<'_>, spec: StepSpec, p: &Prepared, s: &Started) {
    if !cx.feed.is_on() {
        return;
    }
    let closed = cx.cfg.plan.model() == LoadModel::Concurrency;
    let agents = p
        .who
        .iter()
        .zip(&p.shares)
        .map(|(&i, share)| results::events::AgentShare {
            agent: fleet.name(i).to_string(),
            share: if closed {
                f64::from(share.connections())
            } else {
                share.rate() * share.slice().fraction()
            },
        })
        .collect();
    cx.feed.emit(results::events::Event::StepStart {
        target: cx.target,
        step: results::events::StepStart {
            step: step_number(spec),
            steps: cx.steps,
            role: spec.role.map(|r| r.name().to_string()),
            value: spec.value,
            demanded: cx.cfg.plan.demanded_request_rate(spec.value),
            length_s: s.scheduled.as_secs_f64(),
            agents,
        },
    });
}

/// One merged second as the live page and events.ndjson take it.
fn tell_interval(
    spec: StepSpec,
    seq: &SeqProgress,
    so_far: &shared::metrics::Counters,
    agents_sent: Vec<u64>,
) -> results::events::Interval {
    let ms = |us: u64| (seq.measured > 0).then(|| histogram::us_to_ms(us));
    results::events::Interval {
        step: step_number(spec),
        at_s: seq.offset.as_secs_f64(),
        length_s: seq.length.as_secs_f64(),
        sent: seq.counters.requests,
        ok: seq.counters.ok,
        failed: seq.counters.known_failed(),
        p50_ms: ms(seq.p50_us),
        p99_ms: ms(seq.p99_us),
        sent_so_far: so_far.requests,
        agents_sent,
        merged_unix_ms: u64::try_from(unix_ns(SystemTime::now()) / 1_000_000).unwrap_or(0),
    }
}

fn show_progress(
    cx: &StepCx<'_>,
    spec: StepSpec,
    seq: &SeqProgress,
    so_far: &shared::metrics::Counters,
    demanded: Option<f64>,
    length: Duration,
) {
    let secs = seq.length.as_secs_f64().max(1e-9);
    let elapsed = seq.offset + seq.length;
    cx.progress.tick(&Tick {
        number: step_number(spec),
        steps: cx.steps,
        role: spec.role.map(|r| r.name()),
        elapsed,
        length,
        demanded,
        value: spec.value,
        // Over the step so far, as the table's figure is over the whole step.
        sent: so_far.requests as f64 / elapsed.as_secs_f64().max(1e-9),
        served: seq.counters.ok as f64 / secs,
        p99_ms: histogram::us_to_ms(seq.p99_us),
        // Of the requests due so far, those known to have failed: a request still in flight is
        // neither served nor failed yet (the step's `failed_pct` counts every one, once all are in).
        failed_pct: results::verdict::pct(so_far.known_failed(), so_far.due()),
    });
}

mod summary;
