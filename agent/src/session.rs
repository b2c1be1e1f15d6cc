//! One control session with a coordinator. A single task owns the session's [`State`] (greeting,
//! unconfigured, configuring, idle with a target, a step prepared, a step running) and consumes a closed
//! set of events: coordinator messages, stamped where they arrive; worker reports; the answer of a
//! configure's lookup, which runs beside the loop; the dead-man deadline; shutdown. Each transition
//! consumes the old state, so a step prepared for a target that a newer configure replaced cannot be
//! represented. The same code serves the embedded agent (in-process link) and remote ones (a gRPC stream
//! adapted onto the same link).
use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use proto::pb::agent_message::Kind as Up;
use proto::pb::coordinator_message::Kind as Down;
use proto::{PROTOCOL_VERSION, from_agent, pb};
use shared::metrics::{Interval, Snapshot};
use shared::plan::{StepShare, Workload};
use shared::refusal::{Refusal, RefusalKind};
use shared::warning::{Warning, WarningKind};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::{CancellationToken, DropGuard};
use tokio_util::task::AbortOnDropHandle;

use control::admission::{HELLO_WITHIN, Rules, Seated};
use control::link::log_refused;
use control::link::{self, AgentEnd, Closed, CoordinatorEnd, Link, LinkTx, Side};
use control::machine::{MachineLimits, Route};
use control::session::{
    Arrival, DEAD_MAN, DeadMan, SessionError, refusal, stamp_arrivals, unix_ns_now,
};
use control::system;

use crate::client::{self, Endpoint};
use crate::engine::{Engine, EngineError};
use crate::feeder::{FeedError, Feeds};
use crate::worker::{self, INTERVAL, Job, Report};

/// The worker threads' failure ends a session as the control crate's error, which cannot name the
/// engine's type.
impl From<EngineError> for SessionError {
    fn from(e: EngineError) -> SessionError {
        SessionError::Engine(Box::new(e))
    }
}

/// Starts an agent session in this process and returns the coordinator's end of its link.
pub fn embedded(engine: Arc<Engine>, shutdown: CancellationToken) -> CoordinatorEnd {
    let (coordinator, agent) = link::pair();
    tokio::spawn(async move {
        if let Err(e) = serve(
            engine,
            Arc::new(Rules::default()),
            agent,
            "embedded".into(),
            shutdown,
        )
        .await
        {
            tracing::warn!(error = %e, "Embedded agent session ended");
        }
    });
    coordinator
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// Turns a configured workload into the target its workers load. In service it is [`Endpoint::prepare`],
/// whose DNS lookup can take seconds, then [`client::preflight`]; tests give one that takes its time on
/// tokio's clock.
pub(crate) type Prepare =
    Arc<dyn Fn(Workload) -> BoxFuture<Result<Endpoint, Refusal>> + Send + Sync>;

fn lookup() -> Prepare {
    Arc::new(|w| {
        Box::pin(async move {
            let target = Endpoint::prepare(&w).await.map_err(|e| e.refusal())?;
            client::preflight(target, &w).await.map_err(|e| e.refusal())
        })
    })
}

/// A configure's answer: the target, and the risks its ack reports.
struct Configured {
    target: Endpoint,
    warnings: Vec<Warning>,
}

/// Where a session is. Each variant holds exactly what that phase needs, so a step is prepared only
/// against the target of the configure it followed, and runs only once prepared.
#[derive(Default)]
enum State {
    /// No hello yet: only heartbeats are answered.
    #[default]
    Greeting,
    /// Greeted; no workload, or the last configure was refused or aborted.
    Unconfigured,
    /// A configure's target is being prepared (its DNS lookup) beside the loop; dropping the handle
    /// aborts it, so a newer configure, an abort or the session's end discards its answer.
    Configuring(AbortOnDropHandle<Result<Configured, Refusal>>),
    Idle(Endpoint),
    Prepared {
        target: Endpoint,
        share: Arc<StepShare>,
    },
    Running {
        target: Endpoint,
        /// Boxed: its snapshots are large, and the state moves at every transition.
        running: Box<Running>,
    },
}

/// What the loop waits on besides the coordinator, depending on the state.
// A report passes through once, straight from its channel to the step; boxing it would allocate per
// report for nothing.
#[allow(clippy::large_enum_variant)]
enum Work {
    /// A worker's report; `None` once every worker's sender is gone.
    Report(Option<Report>),
    /// A configure's lookup finished.
    Configured(Result<Configured, Refusal>),
}

impl State {
    fn is_running(&self) -> bool {
        matches!(self, State::Running { .. })
    }

    /// Stops a running step's load now; its final interval is still reported once its workers end.
    fn stop_load(&self) {
        if let State::Running { running, .. } = self {
            running.cancel.cancel();
        }
    }

    /// The next event of this state's own work; pending forever for a state that has none.
    async fn work(&mut self) -> Work {
        match self {
            State::Running { running, .. } => Work::Report(running.reports.recv().await),
            State::Configuring(lookup) => Work::Configured(lookup.await.unwrap_or_else(|e| {
                Err(Refusal::new(
                    RefusalKind::Other,
                    format!("preparing the target failed: {e}"),
                ))
            })),
            _ => std::future::pending().await,
        }
    }
}

struct Session {
    engine: Arc<Engine>,
    rules: Arc<Rules>,
    prepare: Prepare,
    /// The coordinator, as the log names it.
    peer: String,
    /// Scheduled time of the steps started in this session, for --max-run-duration.
    used: Duration,
    out: LinkTx<pb::AgentMessage>,
    state: State,
    /// The agent's seat, held from the first valid hello to the session's end.
    seated: Option<Seated>,
    /// The last configure's feeder rows, spooled as they arrive (deleted with it), or why they
    /// could not be: a step is refused until a configure's rows are all here.
    feeds: Result<Feeds, String>,
}

/// Serves one coordinator until it says goodbye, its stream ends, or `shutdown` fires. On shutdown
/// the running step stops sending new requests and its final interval is still reported. `peer`
/// names the coordinator in the log (its address), for a refusal.
pub async fn serve(
    engine: Arc<Engine>,
    rules: Arc<Rules>,
    link: AgentEnd,
    peer: String,
    shutdown: CancellationToken,
) -> Result<(), SessionError> {
    serve_with(engine, rules, link, peer, shutdown, lookup()).await
}

/// [`serve`] with the function that prepares a configure's target.
pub(crate) async fn serve_with(
    engine: Arc<Engine>,
    rules: Arc<Rules>,
    link: AgentEnd,
    peer: String,
    shutdown: CancellationToken,
    prepare: Prepare,
) -> Result<(), SessionError> {
    let Link { tx: out, rx } = link;
    let mut inbound = stamp_arrivals(rx);
    let mut s = Session {
        engine,
        rules,
        prepare,
        peer,
        used: Duration::ZERO,
        out,
        state: State::Greeting,
        seated: None,
        feeds: Feeds::new(&Default::default(), 1).map_err(|e| e.to_string()),
    };
    let mut closing = false;
    let opened = Instant::now();
    let hello_by = s.rules.hello_by(opened);
    let mut dead_man = DeadMan::new(opened);
    loop {
        if closing && !s.state.is_running() {
            return Ok(());
        }
        let (waited_since, due) = (Instant::now(), dead_man.deadline());
        // Biased, the dead-man switch last: it is judged only when no message is waiting, so
        // silence is counted from the last arrival however busy the loop was.
        let event = tokio::select! {
            biased;
            () = shutdown.cancelled(), if !closing => Event::Shutdown,
            work = s.state.work() => Event::Work(work),
            arrival = inbound.recv(), if !closing => Event::Arrival(arrival),
            () = tokio::time::sleep_until(due), if !closing => Event::Due,
            () = tokio::time::sleep_until(hello_by.unwrap_or(opened)),
                if s.seated.is_none() && hello_by.is_some() => Event::NoHello,
        };
        dead_man.woke(waited_since, due);
        match event {
            Event::Shutdown => {
                closing = true;
                s.state.stop_load();
            }
            Event::Work(work) => s.on_work(work).await?,
            Event::Arrival(Some((at, Ok(m)))) => {
                dead_man.heard(at);
                s.handle(m).await?
            }
            Event::Arrival(Some((_, Err(why)))) => return s.end(why),
            Event::Arrival(None) => return s.end(Closed::Ended),
            // The dead-man switch: a coordinator that pings every 500 ms and has not been heard from
            // for longer than this is gone (crashed, or cut off without a FIN). Stop all load.
            Event::Due if dead_man.silent() => {
                s.state.stop_load();
                return Err(SessionError::Silent(DEAD_MAN));
            }
            // Back from a stall: the reader's grace runs first.
            Event::Due => {}
            Event::NoHello => {
                let e = SessionError::NoHello(HELLO_WITHIN);
                log_refused(Side::Agent, &s.peer, &e);
                return Err(e);
            }
        }
    }
}

/// What woke the session's loop.
// A report passes through once, as in `Work`.
#[allow(clippy::large_enum_variant)]
enum Event {
    Shutdown,
    Work(Work),
    Arrival(Option<Arrival>),
    /// The dead-man deadline passed.
    Due,
    /// A stream that came through a listener brought no valid hello in time.
    NoHello,
}

fn ack(what: &str, step: u32, warnings: Vec<Warning>) -> Option<Up> {
    Some(Up::Ack(pb::Ack {
        what: what.into(),
        step,
        warnings: warnings.iter().map(pb::Warning::from).collect(),
    }))
}

impl Session {
    async fn send(&self, kind: Up) -> Result<(), SessionError> {
        self.out
            .send(from_agent(kind))
            .await
            .map_err(|_| SessionError::Closed)
    }

    async fn reply(&self, reply: Option<Up>) -> Result<(), SessionError> {
        match reply {
            Some(kind) => self.send(kind).await,
            None => Ok(()),
        }
    }

    /// The coordinator is gone. Between steps a clean end is a normal goodbye; during one, all load
    /// stops now. A broken stream says why, either way.
    fn end(&self, why: Closed) -> Result<(), SessionError> {
        self.state.stop_load();
        match why {
            Closed::Broken(words) => Err(SessionError::Broken(words)),
            Closed::Dropped(_) | Closed::Ended if self.state.is_running() => {
                Err(SessionError::Closed)
            }
            Closed::Dropped(words) => {
                tracing::debug!(how = %words, "The coordinator's connection dropped");
                Ok(())
            }
            Closed::Ended => Ok(()),
        }
    }

    async fn handle(&mut self, msg: pb::CoordinatorMessage) -> Result<(), SessionError> {
        let Some(kind) = msg.kind else {
            return self
                .reply(refusal(RefusalKind::Other, "empty message"))
                .await;
        };
        let state = std::mem::take(&mut self.state);
        let (state, reply) = match kind {
            Down::Hello(h) => {
                // The first hello takes the seat; a later one (greeted) is only checked again.
                let admitted = match &self.seated {
                    None => self.rules.admit(&h).map(Some),
                    Some(_) => self.rules.check(&h).map(|()| None),
                };
                match admitted {
                    Err(e) => {
                        log_refused(Side::Agent, &self.peer, &e);
                        // The session ends here; a running step's load stops with it.
                        state.stop_load();
                        self.reply(refusal(e.refusal_kind(), e.to_string())).await?;
                        return Err(e);
                    }
                    Ok(seated) => self.seated = self.seated.take().or(seated),
                }
                let state = match state {
                    State::Greeting => State::Unconfigured,
                    other => other,
                };
                (state, Some(Up::HelloReply(self.hello_reply())))
            }
            // Before a valid hello nothing is answered: a peer without the token learns nothing (not
            // the clock) and cannot keep a stream alive by pinging. A coordinator's heartbeat that
            // overtook its hello only needs to be let through.
            Down::Ping(_) if matches!(state, State::Greeting) => (state, None),
            Down::Ping(p) => {
                let pong = Up::Pong(pb::Pong {
                    id: p.id,
                    agent_unix_nanos: unix_ns_now(),
                });
                (state, Some(pong))
            }
            // A monitor's to answer: a load agent has no sample to take.
            Down::SampleNow(_) => (state, None),
            _ if matches!(state, State::Greeting) => {
                let e = SessionError::Auth("say hello first");
                log_refused(Side::Agent, &self.peer, &e);
                self.reply(refusal(e.refusal_kind(), e.to_string())).await?;
                return Err(e);
            }
            Down::Configure(c) => {
                // Refused while a step runs (below), which keeps what it runs with.
                if !state.is_running() {
                    self.feeds = self.new_feeds(&c);
                }
                self.on_configure(state, &c)
            }
            Down::FeedRows(r) => (state, self.on_feed(|f| f.rows(r.feeder, &r.rows))),
            Down::FeedEnd(e) => (state, self.on_feed(|f| f.end(e.feeder, e.rows))),
            Down::PrepareStep(p) => self.on_prepare(state, &p),
            Down::StartStep(st) => self.on_start(state, &st).await?,
            Down::Abort(a) => (on_abort(state, &a), None),
        };
        self.state = state;
        self.reply(reply).await
    }

    async fn on_work(&mut self, work: Work) -> Result<(), SessionError> {
        match work {
            Work::Configured(answer) => {
                let (state, reply) = on_configured(answer);
                self.state = state;
                self.reply(reply).await
            }
            Work::Report(Some(rep)) => self.on_report(rep).await,
            // Every worker's sender is gone without a final report (a worker thread died): finish
            // the step with what was reported rather than hang.
            Work::Report(None) => self.finish_step().await,
        }
    }

    fn hello_reply(&self) -> pb::HelloReply {
        let capacity = MachineLimits::of_this_machine(self.engine.threads());
        let (low, high) = capacity.port_range;
        pb::HelloReply {
            protocol_version: PROTOCOL_VERSION,
            agent_version: shared::VERSION.to_string(),
            capabilities: Some(pb::Capabilities {
                cores: system::cores() as u32,
                threads: self.engine.threads() as u32,
                fd_limit: capacity.fd_limit,
                port_range_low: low,
                port_range_high: high,
                hostname: system::hostname(),
                limits: Some((&self.rules.policy).into()),
                tcp_tw_reuse: system::tcp_tw_reuse(),
                source_addrs: true,
                machine_id: system::machine_id(),
            }),
            role: pb::Role::Load as i32,
            monitor: None,
        }
    }

    /// The spools for a configure's feeders: those held, for the same feeders (the coordinator
    /// sends their rows once), else empty ones (the old ones' files go with them).
    fn new_feeds(&mut self, c: &pb::Configure) -> Result<Feeds, String> {
        // A workload that does not convert is refused by `on_configure`, with its words.
        let data = Workload::try_from(c)
            .map(|w| w.data().clone())
            .unwrap_or_default();
        let workers = self.engine.threads();
        let held = std::mem::replace(&mut self.feeds, Err(String::new()));
        match held {
            Ok(feeds) => feeds.reconfigured(&data, workers),
            Err(_) => Feeds::new(&data, workers),
        }
        .map_err(|e| e.to_string())
    }

    /// Spools feeder rows; the first failure is kept and refuses the next step (no reply now: the
    /// coordinator sends rows without waiting for answers). Rows after a configure that kept the
    /// spools replace them.
    fn on_feed(&mut self, f: impl FnOnce(&mut Feeds) -> Result<(), FeedError>) -> Option<Up> {
        if let Ok(feeds) = &self.feeds
            && feeds.kept()
        {
            self.feeds = feeds
                .renewed(self.engine.threads())
                .map_err(|e| e.to_string());
        }
        if let Ok(feeds) = &mut self.feeds
            && let Err(e) = f(feeds)
        {
            tracing::warn!(error = %e, "Feeder rows refused");
            self.feeds = Err(e.to_string());
        }
        None
    }

    /// A configure replaces the workload the moment it arrives: any target and prepared step go with
    /// the old state, and a lookup still under way for an older configure is aborted, so the newest
    /// configure wins. Its ack or refusal comes when its own lookup ends (see [`on_configured`]).
    fn on_configure(&self, state: State, c: &pb::Configure) -> (State, Option<Up>) {
        if state.is_running() {
            return (
                state,
                refusal(RefusalKind::Other, "cannot reconfigure while a step runs"),
            );
        }
        drop(state);
        let w = match Workload::try_from(c) {
            Ok(w) => w,
            Err(e) => {
                return (
                    State::Unconfigured,
                    refusal(RefusalKind::Other, format!("invalid workload: {e}")),
                );
            }
        };
        let (prepare, rules) = (self.prepare.clone(), self.rules.clone());
        let lookup = tokio::spawn(async move {
            let host = w.origin().host().to_string();
            let target = prepare(w).await?;
            // Checked on the resolved address, before any load is sent.
            rules
                .policy
                .check_target(&host, target.addr.ip())
                .map_err(|why| Refusal::new(RefusalKind::Policy, why))?;
            let warnings = missing_sources(&target);
            Ok(Configured { target, warnings })
        });
        (State::Configuring(AbortOnDropHandle::new(lookup)), None)
    }

    /// A prepare replaces any step prepared before it; refused, it leaves none.
    fn on_prepare(&self, state: State, p: &pb::PrepareStep) -> (State, Option<Up>) {
        let target = match state {
            State::Idle(target) | State::Prepared { target, .. } => target,
            State::Running { running, target } => {
                let words = format!("step {} is still running", running.step + 1);
                return (
                    State::Running { running, target },
                    refusal(RefusalKind::Other, words),
                );
            }
            // Refused, not queued: the coordinator prepares only after the configure's ack, so a
            // prepare now is out of order, and its answer would otherwise wait on DNS.
            State::Configuring(_) => {
                let words = "the workload is still being configured (its target is being looked up): \
                             prepare a step after the configure's ack";
                return (state, refusal(RefusalKind::Other, words));
            }
            State::Greeting | State::Unconfigured => {
                return (
                    state,
                    refusal(
                        RefusalKind::Other,
                        "configure the workload before preparing a step",
                    ),
                );
            }
        };
        match self.check_step(&target, p) {
            Ok((share, warnings)) => {
                for w in &warnings {
                    // Info, not warn: the coordinator prints it anyway, and in its process (the
                    // embedded agent) warn would say it twice.
                    tracing::info!(step = p.step + 1, warning = %w, "Step accepted with a risk");
                }
                let share = Arc::new(share);
                (
                    State::Prepared { target, share },
                    ack("prepare", p.step, warnings),
                )
            }
            Err(why) => (State::Idle(target), refusal(why.kind, why.message)),
        }
    }

    /// Whether this agent can and may run a step against `target`: its share, and the risks to warn of.
    fn check_step(
        &self,
        target: &Endpoint,
        p: &pb::PrepareStep,
    ) -> Result<(StepShare, Vec<Warning>), Refusal> {
        if let Err(why) = self
            .feeds
            .as_ref()
            .map_err(Clone::clone)
            .and_then(|f| f.ready().map(drop).map_err(|e| e.to_string()))
        {
            return Err(Refusal::new(RefusalKind::Setup, why));
        }
        let share = StepShare::try_from(p).map_err(|e| {
            Refusal::new(
                RefusalKind::Other,
                format!("invalid step {}: {e}", p.step + 1),
            )
        })?;
        self.rules
            .policy
            .check_step(&share, self.used)
            .map_err(|why| Refusal::new(RefusalKind::Policy, why))?;
        // The machine's limits are read now, not at hello: ulimit and sysctls can change.
        let mut warnings = MachineLimits::of_this_machine(self.engine.threads())
            .check_step(&share, &route(target))
            .map_err(|why| Refusal::new(RefusalKind::Capacity, why))?;
        warnings.extend(self.rules.policy.step_warnings(&share));
        Ok((share, warnings))
    }

    /// Starts the prepared step, if it is the one named; any other start leaves nothing prepared.
    async fn on_start(
        &mut self,
        state: State,
        st: &pb::StartStep,
    ) -> Result<(State, Option<Up>), SessionError> {
        let (target, share) = match state {
            State::Prepared { target, share } if share.step() == st.step => (target, share),
            State::Prepared { target, share } => {
                let words = format!(
                    "step {} was prepared, not step {}",
                    share.step() + 1,
                    st.step + 1
                );
                return Ok((State::Idle(target), refusal(RefusalKind::Other, words)));
            }
            other => {
                let words = format!("step {} was not prepared", st.step + 1);
                return Ok((other, refusal(RefusalKind::Other, words)));
            }
        };
        let running = self.launch(&target, share, st.start_unix_nanos).await?;
        Ok((State::Running { target, running }, None))
    }

    /// Hands each worker its job for the step, to start at the coordinator's instant.
    async fn launch(
        &mut self,
        target: &Endpoint,
        share: Arc<StepShare>,
        start_unix_nanos: i64,
    ) -> Result<Box<Running>, SessionError> {
        // The start instant comes on the wall clock; waiting happens on the monotonic clock.
        let now = Instant::now();
        let now_unix = unix_ns_now();
        // A start in the past means now; one more than a minute ahead is a clock problem, not a plan.
        let ahead_ns = start_unix_nanos
            .saturating_sub(now_unix)
            .clamp(0, 60_000_000_000);
        let start = now + Duration::from_nanos(ahead_ns as u64);
        self.used += share.scheduled_duration();
        let workers = self.engine.threads();
        let (tx, rx) = mpsc::channel(workers * 4);
        let cancel = CancellationToken::new();
        let policy = &self.rules.policy;
        let caps = worker::Caps::new(policy.max_rate, policy.max_connections);
        let mut target = target.clone();
        // Checked ready when the step was prepared.
        if let Ok(Ok(feeds)) = self.feeds.as_ref().map(Feeds::ready) {
            target.feeds = feeds;
        }
        let jobs = (0..workers)
            .map(|w| Job {
                share: share.clone(),
                target: target.clone(),
                worker: w as u64,
                workers: workers as u64,
                start,
                cancel: cancel.clone(),
                out: tx.clone(),
                caps: caps.clone(),
            })
            .collect();
        self.engine.dispatch(jobs).await?;
        Ok(Box::new(Running {
            step: share.step(),
            _stop: cancel.clone().drop_guard(),
            cancel,
            reports: rx,
            workers,
            start,
            start_unix_ns: now_unix + ahead_ns,
            pending: BTreeMap::new(),
            next_seq: 0,
            done: 0,
            tail: Snapshot::default(),
            began: None,
            end: start,
        }))
    }

    async fn on_report(&mut self, rep: Report) -> Result<(), SessionError> {
        let State::Running { running, .. } = &mut self.state else {
            return Ok(());
        };
        let ready = running.absorb(rep);
        let finished = running.finished();
        for i in &ready {
            self.send(Up::Interval(i.into())).await?;
        }
        if finished {
            self.finish_step().await?;
        }
        Ok(())
    }

    /// Every worker is done (or gone): the tail interval and the step report, and the session is
    /// idle with its target again.
    async fn finish_step(&mut self) -> Result<(), SessionError> {
        let State::Running { target, running } = std::mem::take(&mut self.state) else {
            return Ok(());
        };
        self.state = State::Idle(target);
        let (tail, report) = running.finish();
        self.send(Up::Interval((&tail).into())).await?;
        self.send(Up::StepReport(report)).await
    }
}

/// A configure's lookup ended: idle with its target, or refused and unconfigured.
fn on_configured(answer: Result<Configured, Refusal>) -> (State, Option<Up>) {
    match answer {
        Ok(Configured { target, warnings }) => {
            for w in &warnings {
                // Info for the same reason as at prepare.
                tracing::info!(warning = %w, "Configured with a risk");
            }
            (State::Idle(target), ack("configure", 0, warnings))
        }
        Err(why) => (State::Unconfigured, refusal(why.kind, why.message)),
    }
}

/// An abort stops a running step (its tail and report still follow). One during a configure drops
/// the configure: the run that asked for it is over, and the coordinator reads no answer to it.
fn on_abort(state: State, a: &pb::Abort) -> State {
    match state {
        State::Running { running, target } => {
            tracing::info!(step = running.step + 1, reason = %a.reason, "Step aborted by the coordinator");
            running.cancel.cancel();
            State::Running { running, target }
        }
        State::Configuring(_) => {
            tracing::info!(reason = %a.reason, "Configure aborted by the coordinator");
            State::Unconfigured
        }
        other => other,
    }
}

/// A running step: its workers' reports assembled into whole intervals.
struct Running {
    step: u32,
    cancel: CancellationToken,
    /// However the session ends (an error, a broken stream, a dropped task), its step's load stops.
    _stop: DropGuard,
    reports: mpsc::Receiver<Report>,
    workers: usize,
    start: Instant,
    start_unix_ns: i64,
    /// Intervals received from some workers but not yet all.
    pending: BTreeMap<u32, (usize, Snapshot)>,
    next_seq: u32,
    done: usize,
    tail: Snapshot,
    began: Option<Instant>,
    end: Instant,
}

impl Running {
    /// Takes one worker's report in; returns, in order, every interval all workers have now reported.
    fn absorb(&mut self, rep: Report) -> Vec<Interval> {
        let mut ready = Vec::new();
        match rep {
            Report::Interval { seq, snapshot, .. } => {
                let slot = self
                    .pending
                    .entry(seq)
                    .or_insert_with(|| (0, Snapshot::default()));
                slot.0 += 1;
                slot.1.add(&snapshot);
                while let Some(entry) = self.pending.first_entry() {
                    if *entry.key() != self.next_seq || entry.get().0 < self.workers {
                        break;
                    }
                    let (seq, (_, snapshot)) = entry.remove_entry();
                    ready.push(Interval {
                        step: self.step,
                        seq,
                        offset: INTERVAL * seq,
                        length: INTERVAL,
                        tail: false,
                        snapshot,
                    });
                    self.next_seq += 1;
                }
            }
            Report::Done {
                snapshot,
                began,
                end,
                ..
            } => {
                self.done += 1;
                self.tail.add(&snapshot);
                self.began = match (self.began, began) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                };
                self.end = self.end.max(end);
            }
        }
        ready
    }

    fn finished(&self) -> bool {
        self.done >= self.workers
    }

    /// Whatever was not reported as a full interval is the tail, so nothing measured is ever
    /// dropped; then the step's report.
    fn finish(mut self: Box<Self>) -> (Interval, pb::StepReport) {
        for (_, (_, snap)) in std::mem::take(&mut self.pending) {
            self.tail.add(&snap);
        }
        let offset = INTERVAL * self.next_seq;
        let began_unix_nanos = self.began.map_or(0, |f| {
            self.start_unix_ns + f.saturating_duration_since(self.start).as_nanos() as i64
        });
        let report = pb::StepReport {
            step: self.step,
            began_unix_nanos,
            wall_us: self.end.saturating_duration_since(self.start).as_micros() as u64,
            aborted: self.cancel.is_cancelled() || self.done < self.workers,
            intervals: self.next_seq + 1,
        };
        let tail = Interval {
            step: self.step,
            seq: self.next_seq,
            offset,
            length: self.end.saturating_duration_since(self.start + offset),
            tail: true,
            snapshot: self.tail,
        };
        (tail, report)
    }
}

/// A warning naming the source addresses this machine does not have: every connection from them would
/// fail as addr-unavailable. Not a refusal: that is the run's result to report, in its error class.
/// The route of a prepared target: its resolved address says whether it is on loopback.
fn route(target: &Endpoint) -> Route {
    Route {
        timeout: target.timeout,
        connect_timeout: target.connect_timeout,
        sources: target.sources.len(),
        loopback: Some(target.addr.ip().is_loopback()),
        server_closes: target.server_closes,
    }
}

fn missing_sources(target: &Endpoint) -> Vec<Warning> {
    let mut missing = Vec::new();
    let mut why = String::new();
    for &source in target.sources.iter() {
        if let Err(e) = crate::socket::check_source(source) {
            if why.is_empty() {
                why = e.to_string();
            }
            missing.push(source.to_string());
        }
    }
    if missing.is_empty() {
        return Vec::new();
    }
    const NAMED: usize = 5;
    let more = missing.len().saturating_sub(NAMED);
    missing.truncate(NAMED);
    let list = if more > 0 {
        format!("{} and {more} more", missing.join(", "))
    } else {
        missing.join(", ")
    };
    // Not a capacity risk of a step: it comes once, with the configure ack.
    let text = format!(
        "this agent cannot bind --source-addrs {list} ({why}); connections from {} will fail as addr-unavailable",
        if missing.len() + more == 1 {
            "it"
        } else {
            "them"
        }
    );
    vec![Warning::new(WarningKind::Other, text)]
}

/// Re-exported so the agent binary and tests see one name for the interval length.
pub use worker::INTERVAL as REPORT_INTERVAL;

#[cfg(test)]
mod tests;
