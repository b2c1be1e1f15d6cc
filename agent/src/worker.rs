//! One worker thread's part of a step. The schedule says *when* (open arrivals or a closed loop), the
//! client says *how*, the deadline says *until when*; the three load models are three ways of keeping
//! connections' slots busy (`client::Connection`), written once whichever HTTP is under them. All
//! state here belongs to the worker's thread: no locks, no per-request messages.
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use shared::metrics::{ErrorClass, Snapshot};
use shared::plan::Slice;
use shared::plan::{LoadModel, StepShare, split_proportional};
use shared::rng::Rng;
use shared::schedule::{Schedule, even_share};
use tokio::sync::{Notify, mpsc};
use tokio::time::{Instant, sleep_until};
use tokio_util::sync::CancellationToken;

use crate::client::{Connection, Endpoint, Fill, Request, Sent, Template, Unsent};
use crate::feeder::{Cursor, NoRow};
use crate::recorder::Recorder;
use crate::timer::Timer;

mod pool;
mod session;
use pool::Pool;

/// A step as one worker runs it.
pub struct Job {
    pub share: Arc<StepShare>,
    pub target: Endpoint,
    pub worker: u64,
    pub workers: u64,
    pub start: Instant,
    pub cancel: CancellationToken,
    pub out: mpsc::Sender<Report>,
    /// The agent's own limits, held while the step runs.
    pub caps: Caps,
}

/// The agent's own limits as its workers hold them while a step runs. The plan was checked against
/// them before the step, but what a closed loop's rate or the open sockets of a connection per arrival
/// come to depends on the target's latency, so they are enforced here too, never clamped in silence:
/// the step's ack says so, and an arrival refused for a socket is counted as the generator's own.
#[derive(Debug, Clone, Default)]
pub struct Caps {
    /// `--max-rate`: the agent's closed loops together start at most this many requests a second.
    pub max_rate: Option<f64>,
    /// `--max-connections`: the connections model's sockets open at once, over all the workers.
    pub sockets: Option<Arc<SocketCap>>,
}

impl Caps {
    /// One step's caps (a fresh socket count: the last step's connections are all closed).
    pub fn new(max_rate: Option<f64>, max_connections: Option<u32>) -> Caps {
        Caps {
            max_rate,
            sockets: max_connections.map(|max| {
                Arc::new(SocketCap {
                    max,
                    open: AtomicU32::new(0),
                })
            }),
        }
    }
}

/// Sockets of the connections model open at once, shared by the agent's workers: one atomic step per
/// connection (not per request), so no worker waits on another.
#[derive(Debug)]
pub struct SocketCap {
    max: u32,
    open: AtomicU32,
}

impl SocketCap {
    /// One socket of the cap, held until dropped; `None` when `max` are open.
    fn take(self: &Arc<Self>) -> Option<CapSlot> {
        self.open
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < self.max).then_some(n + 1)
            })
            .ok()
            .map(|_| CapSlot(self.clone()))
    }
}

/// A socket counted against the cap, given back when its connection's task ends.
struct CapSlot(Arc<SocketCap>);

impl Drop for CapSlot {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Paces one worker's closed loops at its part of the agent's `--max-rate`: each request takes the
/// next free start slot, `gap` after the last one, so the loops together never go faster. A slot is
/// never banked while the loops are slower than the pace (no burst after a slow spell).
struct Pacer {
    gap: Duration,
    next: Cell<Instant>,
}

impl Pacer {
    fn new(rate: f64, start: Instant) -> Option<Pacer> {
        (rate > 0.0).then(|| Pacer {
            gap: Duration::from_secs_f64(1.0 / rate),
            next: Cell::new(start),
        })
    }

    /// Claims the next start slot: now, or later when the pace says so.
    fn claim(&self) -> Instant {
        let at = self.next.get().max(Instant::now());
        self.next.set(at + self.gap);
        at
    }
}

/// What a worker sends up: once per interval, and once at the end. Never per request.
#[derive(Debug)]
pub enum Report {
    Interval {
        worker: u64,
        seq: u32,
        snapshot: Snapshot,
    },
    /// The last one: everything since the last interval, and when the worker began the step.
    Done {
        worker: u64,
        snapshot: Snapshot,
        began: Option<Instant>,
        end: Instant,
    },
}

/// Arrivals dispatched back to back, when behind schedule, before yielding to the thread's other tasks.
const CATCH_UP_BATCH: u32 = 64;

/// The shortest time between two open-loop wake-ups: the extra lag allowed to batch arrivals when
/// they come faster than this (10,000 wake-ups a second at most, per worker).
const WAKE_GAP: Duration = Duration::from_micros(100);

/// A finished connection of the connections model waits for the server's close for two ticks of
/// this clock at most: 100 to 200 ms.
const LINGER_TICK: Duration = Duration::from_millis(100);

/// How long a closed-loop connection waits after the generator ran out of fds or ports.
const RESOURCE_BACKOFF: Duration = Duration::from_millis(10);

/// A closed loop whose request found no feeder row waits this long before its next turn.
const NO_ROW_BACKOFF: Duration = Duration::from_millis(10);

/// The interval length reported to the coordinator.
pub const INTERVAL: Duration = Duration::from_secs(1);

/// Per-step state every task of the worker shares (through `Rc`, on one thread).
struct Ctx {
    target: Endpoint,
    rec: Rc<Recorder>,
    deadline: Instant,
    cancel: CancellationToken,
    /// The closed loops' requests chosen so far by this worker: its turns are the step's arrivals
    /// `worker`, `worker + workers`, ... so the agent's workers together walk the mix in order.
    turns: Cell<u64>,
    worker: u64,
    workers: u64,
    /// The step's seed: a `random` mix draws from it, alike on every agent.
    seed: u64,
    /// Requests one connection of the connections model makes (`--num-call`).
    calls: u32,
    /// When this worker passed the start instant and began sending.
    began: Cell<Option<Instant>>,
    in_flight: Cell<usize>,
    idle: Notify,
    /// Requests this worker's closed loops may still start (ab's `-n`); `u64::MAX` for no count.
    budget: Cell<u64>,
    /// The closed loops' pace under the agent's `--max-rate`; `None`: as fast as replies come.
    pace: Option<Pacer>,
    /// This worker's reading of each feeder (see `feeder`), and its draws for them (a random
    /// row) and for a request's built-ins (`${random(..)}`, `${uuid()}`).
    feeds: RefCell<Vec<Cursor>>,
    draws: RefCell<Rng>,
    /// The clock a finished connection's wait for the server's close is bounded by.
    lingering: Lingering,
}

/// The bound on finished connections' waits for the server's close, one clock for the worker rather
/// than a timer each: a 200 ms timer per connection, due before anything else on the worker's
/// timer wheel (its arrivals are on the timerfd), made tokio wake its own reactor for most
/// connections, an eventfd write and an epoll_wait that were 1.2 of a connection's 12.5 system
/// calls at 2,000 connections/s.
#[derive(Default)]
struct Lingering {
    ticks: Cell<u64>,
    tick: Notify,
}

impl Lingering {
    /// Ends at the second tick from now: after 100 to 200 ms.
    async fn bound(&self) {
        let until = self.ticks.get() + 2;
        loop {
            // Made before the check: a tick between the two still wakes it.
            let next = self.tick.notified();
            if self.ticks.get() >= until {
                return;
            }
            next.await;
        }
    }

    /// Ticks every `LINGER_TICK` until `finished`, which comes after the drain, so no wait it
    /// bounds outlives it.
    async fn keep(ctx: Rc<Ctx>, finished: CancellationToken) {
        let mut every = tokio::time::interval(LINGER_TICK);
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = every.tick() => {
                    let l = &ctx.lingering;
                    l.ticks.set(l.ticks.get() + 1);
                    l.tick.notify_waiters();
                }
                _ = finished.cancelled() => return,
            }
        }
    }
}

impl Ctx {
    fn new(job: &Job, deadline: Instant, rec: Rc<Recorder>) -> Ctx {
        let share = &job.share;
        Ctx {
            // With `--tls-sessions resume`, this worker's own session store (one per thread, kept
            // through the run's steps), so workers never lock one together.
            target: job.target.for_worker(job.worker),
            rec,
            deadline,
            cancel: job.cancel.clone(),
            turns: Cell::new(0),
            worker: job.worker,
            workers: job.workers,
            seed: share.seed(),
            calls: share.num_call().get(),
            began: Cell::new(None),
            in_flight: Cell::new(0),
            idle: Notify::new(),
            budget: Cell::new(u64::MAX),
            pace: closed_pace(share, job).and_then(|rate| Pacer::new(rate, job.start)),
            feeds: RefCell::new(
                job.target
                    .feeds
                    .iter()
                    .map(|s| Cursor::new(s, job.worker as usize))
                    .collect(),
            ),
            lingering: Lingering::default(),
            draws: RefCell::new(Rng::new(
                share.seed() ^ job.worker.wrapping_mul(0x2545_F491_4F6C_DD1D),
            )),
        }
    }

    /// What a request of `t` is filled with: `Ok(None)` for fixed bytes; a row of each feeder it
    /// takes otherwise, and `number` (the request's in the step, as the mix picks by) for
    /// `${counter()}`. `Err` when a feeder has no row for it, counted unsent in `other`.
    fn fill(&self, t: &Template, number: u64) -> Result<Option<Fill>, ()> {
        // A connection's setup may take a row too (its first request's): drawn with the request's.
        let setup = self.target.setup.as_ref().map_or(&[][..], |s| s.feeders());
        let own = t.recipe.as_ref().map_or(&[][..], |r| &r.feeders[..]);
        if t.recipe.is_none() && setup.is_empty() {
            return Ok(None);
        }
        let mut feeds = self.feeds.borrow_mut();
        let mut rng = self.draws.borrow_mut();
        let mut fill = Fill {
            rows: Vec::with_capacity(feeds.len()),
            counter: number,
            seed: rng.next_u64(),
        };
        fill.rows.resize_with(feeds.len(), || None);
        for &f in own.iter().chain(setup.iter().filter(|f| !own.contains(f))) {
            let cursor = &mut feeds[f];
            match cursor.next(&mut rng) {
                Ok(row) => fill.rows[f] = Some(row),
                Err(why) => {
                    self.rec.note(ErrorClass::Other, || {
                        match why {
                            NoRow::RanOut => format!(
                                "feeder {} ran out of rows ({}: each row once)",
                                cursor.name(),
                                cursor.mode().name()
                            ),
                            NoRow::Unreadable => {
                                format!("feeder {}: its spooled rows cannot be read", cursor.name())
                            }
                        }
                        .into()
                    });
                    self.rec.unsent(Some(t.index), ErrorClass::Other);
                    return Err(());
                }
            }
        }
        Ok(Some(fill))
    }

    /// The request the step's `arrival`-th arrival (or call) sends.
    fn pick(&self, arrival: u64) -> u16 {
        // Below MAX_REQUESTS: the workload was checked.
        self.target.mix.pick(arrival, self.seed) as u16
    }

    fn template(&self, index: u16) -> &Template {
        &self.target.templates[usize::from(index)]
    }

    /// A closed loop's next request: this worker's next turn of the mix, and its number.
    fn next_template(&self) -> (&Template, u64) {
        let turn = self.turns.get();
        self.turns.set(turn + 1);
        let number = turn * self.workers + self.worker;
        (self.template(self.pick(number)), number)
    }

    fn past_deadline(&self) -> bool {
        self.cancel.is_cancelled() || Instant::now() >= self.deadline
    }
}

/// Counts a task in flight until dropped, so the worker can wait for the drain.
struct Flight(Rc<Ctx>);

impl Flight {
    fn new(ctx: &Rc<Ctx>) -> Flight {
        ctx.in_flight.set(ctx.in_flight.get() + 1);
        Flight(ctx.clone())
    }
}

/// Spawns a task on the worker's thread, counted in flight from this moment (not from its first poll).
fn spawn_tracked(ctx: &Rc<Ctx>, fut: impl std::future::Future<Output = ()> + 'static) {
    let flight = Flight::new(ctx);
    tokio::task::spawn_local(async move {
        fut.await;
        drop(flight);
    });
}

impl Drop for Flight {
    fn drop(&mut self) {
        let n = self.0.in_flight.get() - 1;
        self.0.in_flight.set(n);
        if n == 0 {
            self.0.idle.notify_waiters();
        }
    }
}

pub async fn run(job: Job) {
    let share = job.share.clone();
    let deadline = job.start + share.scheduled_duration();
    let rec = Rc::new(Recorder::named(
        job.target.ok_status.clone(),
        job.target.named,
    ));
    let ctx = Rc::new(Ctx::new(&job, deadline, rec.clone()));
    // A count-limited step can end before its deadline; the ticker then stops with the work.
    let finished = CancellationToken::new();

    let ticker = tokio::task::spawn_local(tick(
        rec.clone(),
        job.out.clone(),
        job.worker,
        job.start,
        deadline,
        job.cancel.clone(),
        finished.clone(),
    ));

    if share.model() == LoadModel::Connections {
        tokio::task::spawn_local(Lingering::keep(ctx.clone(), finished.clone()));
    }

    // Waiting for the start on the precise timer keeps agents' starts within microseconds, not a tick.
    let timer = Timer::new();
    tokio::select! {
        _ = timer.sleep_until(job.start) => {}
        _ = job.cancel.cancelled() => {}
    }
    ctx.began.set(Some(Instant::now()));
    // Reset the CPU mark and drop anything measured while waiting for the start.
    rec.swap();

    load(&ctx, &timer, &job).await;
    drain_from_the_end(&rec, &share, deadline, &job.cancel);

    drain(&ctx, &job.cancel).await;
    finished.cancel();
    let _ = ticker.await;
    let snapshot = rec.swap();
    let _ = job
        .out
        .send(Report::Done {
            worker: job.worker,
            snapshot,
            began: ctx.began.get(),
            end: Instant::now(),
        })
        .await;
}

/// Starts the step's load in its model: the open models dispatch their arrivals here until the
/// schedule's last; the closed loops are spawned and run on.
async fn load(ctx: &Rc<Ctx>, timer: &Timer, job: &Job) {
    let share = &job.share;
    // This worker's part of the agent's slice of the step.
    let slice = share.slice().part(job.worker, job.workers);
    match share.model() {
        LoadModel::Connections if ctx.target.sessions.is_some() => {
            session::load(ctx, timer, job, &slice).await
        }
        LoadModel::Connections => {
            let calls = share.num_call().get();
            open_loop(ctx, timer, share, &slice, job.start, |intended, arrival| {
                let slot = match &job.caps.sockets {
                    None => None,
                    Some(cap) => match cap.take() {
                        Some(slot) => Some(slot),
                        None => return over_socket_cap(ctx, calls, cap.max),
                    },
                };
                let task_ctx = ctx.clone();
                spawn_tracked(ctx, async move {
                    // Given back once the connection is closed (it is dropped inside).
                    let _slot = slot;
                    connection(task_ctx, intended, arrival).await
                });
            })
            .await;
        }
        LoadModel::Requests => {
            let max = even_share(
                u64::from(share.max_connections().get()),
                job.workers,
                job.worker,
            )
            .max(1) as usize;
            let pool = Rc::new(Pool::new(max, &ctx.target));
            open_loop(ctx, timer, share, &slice, job.start, |intended, arrival| {
                pool.clone().arrive(ctx, intended, arrival)
            })
            .await;
            pool.close();
        }
        LoadModel::Concurrency => spawn_closed_loops(ctx, share, job),
    }
}

/// Marks the drain's start at the schedule's end: what answers after it is the backlog the step
/// left. Not for a closed loop (its connections stop with the schedule) nor for connections of
/// several calls, whose later calls are still to be sent. The open loop returns at its last
/// arrival, before the end: the mark waits for the end itself, or that arrival's reply would count
/// as the drain's (1 or 2 of a 100 req/s step read "served 99.1/s").
fn drain_from_the_end(
    rec: &Rc<Recorder>,
    share: &StepShare,
    deadline: Instant,
    cancel: &CancellationToken,
) {
    let one_request_an_arrival = match share.model() {
        LoadModel::Requests => true,
        LoadModel::Connections => share.num_call().get() == 1,
        LoadModel::Concurrency => false,
    };
    if !one_request_an_arrival {
        return;
    }
    let (rec, cancel) = (rec.clone(), cancel.clone());
    tokio::task::spawn_local(async move {
        tokio::select! {
            _ = sleep_until(deadline) => {}
            _ = cancel.cancelled() => {}
        }
        rec.drain_begins();
    });
}

/// The concurrency model: this worker's part of the connections, each slot of each a closed loop.
fn spawn_closed_loops(ctx: &Rc<Ctx>, share: &StepShare, job: &Job) {
    let per_worker: Vec<u64> = (0..job.workers)
        .map(|w| even_share(u64::from(share.connections()), job.workers, w))
        .collect();
    if let Some(total) = share.max_requests() {
        // In proportion to the connections, so the workers' counts add up to the share.
        ctx.budget
            .set(split_proportional(total.get(), &per_worker)[job.worker as usize]);
    }
    for _ in 0..per_worker[job.worker as usize] {
        let conn = Rc::new(Connection::new(&ctx.target));
        for _ in 0..conn.slots() {
            let (task_ctx, conn) = (ctx.clone(), conn.clone());
            spawn_tracked(ctx, async move { closed_loop(&task_ctx, &conn).await });
        }
    }
}

/// This worker's part of the agent's `--max-rate` for a closed loop, in proportion to the connections
/// it runs (so the workers' parts add up to the agent's); `None` for an open model, whose rate the
/// policy checked against the limit before the step, or without a limit.
fn closed_pace(share: &StepShare, job: &Job) -> Option<f64> {
    let max = job.caps.max_rate?;
    if share.model() != LoadModel::Concurrency || share.connections() == 0 {
        return None;
    }
    let mine = even_share(u64::from(share.connections()), job.workers, job.worker);
    Some(max * mine as f64 / f64::from(share.connections()))
}

/// An arrival of the connections model that would open one socket more than the agent's
/// `--max-connections`: not sent, and counted as the generator's own failure (`fd-unavailable`, as its
/// fd budget is), each of its calls, so none is charged to the server; the words say which limit.
fn over_socket_cap(ctx: &Ctx, calls: u32, max: u32) {
    ctx.rec.note(ErrorClass::FdUnavailable, || {
        format!(
            "this agent's --max-connections {max} were all open: the arrival was not sent \
             (the generator's own limit, not the server's)"
        )
        .into()
    });
    ctx.rec.with(|s| {
        s.counters.unsent += u64::from(calls);
        s.counters.errors[ErrorClass::FdUnavailable.index()] += u64::from(calls);
    });
}

/// Swaps the worker's snapshot out as an interval at start + 1 s, + 2 s, ... up to the deadline;
/// whatever happened before the start instant (nothing should) belongs to the first interval.
async fn tick(
    rec: Rc<Recorder>,
    out: mpsc::Sender<Report>,
    worker: u64,
    start: Instant,
    deadline: Instant,
    cancel: CancellationToken,
    finished: CancellationToken,
) {
    let mut seq = 0u32;
    loop {
        let tick = start + INTERVAL * (seq + 1);
        if tick > deadline {
            break;
        }
        tokio::select! {
            _ = sleep_until(tick) => {}
            _ = cancel.cancelled() => break,
            _ = finished.cancelled() => break,
        }
        let snapshot = rec.swap();
        if out
            .send(Report::Interval {
                worker,
                seq,
                snapshot,
            })
            .await
            .is_err()
        {
            break;
        }
        seq += 1;
    }
}

/// No new requests after the deadline; those in flight finish or time out. An abort still waits for
/// them, but only as long as a timeout.
async fn drain(ctx: &Ctx, cancel: &CancellationToken) {
    while ctx.in_flight.get() > 0 {
        let idle = ctx.idle.notified();
        if ctx.in_flight.get() == 0 {
            break;
        }
        tokio::select! {
            _ = idle => {}
            _ = cancel.cancelled() => {
                let _ = tokio::time::timeout(ctx.target.timeout, async {
                    while ctx.in_flight.get() > 0 {
                        ctx.idle.notified().await;
                    }
                }).await;
                break;
            }
        }
    }
}

/// Dispatches this worker's arrivals at their intended times, each with its index in the whole step
/// (which request of the mix it sends); a late wake-up dispatches every due arrival at once (catch-up,
/// as httperf does) and records how late each was.
async fn open_loop(
    ctx: &Rc<Ctx>,
    timer: &Timer,
    share: &StepShare,
    slice: &Slice,
    start: Instant,
    mut dispatch: impl FnMut(Instant, u64),
) {
    let schedule = Schedule::new(
        share.rate(),
        share.arrival(),
        share.limit(),
        slice,
        share.seed(),
    );
    let mut behind = 0u32;
    let mut woke = start;
    for (j, offset) in (0u64..).zip(schedule) {
        let intended = start + offset;
        if Instant::now() < intended {
            // At most one wake-up per WAKE_GAP: at high rates every wake-up then sends the few
            // arrivals that fell due meanwhile (each a little late, and measured as such) instead of
            // paying a timer syscall and an epoll round per arrival.
            let at = intended.max(woke + WAKE_GAP);
            tokio::select! {
                _ = timer.sleep_until(at) => {}
                _ = ctx.cancel.cancelled() => return,
            }
            woke = Instant::now();
        } else if ctx.cancel.is_cancelled() {
            return;
        } else {
            behind += 1;
            // Catching up must not starve the requests and the ticker on this thread.
            if behind.is_multiple_of(CATCH_UP_BATCH) {
                tokio::task::yield_now().await;
            }
        }
        ctx.rec
            .lag(Instant::now().saturating_duration_since(intended));
        dispatch(intended, slice.arrival(j).unwrap_or(j));
    }
}

/// The connections model: one connection per arrival, its `ctx.calls` requests made in turn on each of
/// its slots (over HTTP/2, up to `--streams` at once), then closed. The first request of each slot
/// counts from the arrival (connect included: they were all due then); later ones from the moment
/// the slot was free.
async fn connection(ctx: Rc<Ctx>, intended: Instant, arrival: u64) {
    let calls = ctx.calls;
    let conn = Connection::new(&ctx.target);
    if let Err(class) = conn.open(&ctx.target, &ctx.rec).await {
        // Given up waiting for the server to accept: a lower bound of its latency.
        if class == ErrorClass::ConnectTimeout {
            ctx.rec.given_up(None, intended.elapsed());
        }
        abandon(&ctx, u64::from(calls - 1), Some(class));
        return;
    }
    let left = Cell::new(calls);
    let lanes = conn.slots().min(calls);
    if lanes == 1 {
        // One slot: its calls on this task, none spawned.
        calls_in_turn(&ctx, &conn, intended, arrival, &left).await;
    } else {
        let (conn, left) = (Rc::new(conn), Rc::new(left));
        let mut slots = tokio::task::JoinSet::new();
        for _ in 0..lanes {
            let (ctx, conn, left) = (ctx.clone(), conn.clone(), left.clone());
            slots.spawn_local(
                async move { calls_in_turn(&ctx, &conn, intended, arrival, &left).await },
            );
        }
        tokio::select! {
            _ = async { while slots.join_next().await.is_some() {} } => {}
            _ = ctx.cancel.cancelled() => {
                let _ = tokio::time::timeout(ctx.target.timeout, async {
                    while slots.join_next().await.is_some() {}
                }).await;
            }
        }
        return;
    }
    // The last reply asked the server to close: let it, so the TIME_WAIT is its and not one of
    // this agent's ports (see `Connection::linger`). An abort does not wait.
    tokio::select! {
        _ = conn.linger(ctx.lingering.bound()) => {}
        _ = ctx.cancel.cancelled() => {}
    }
}

/// One slot of a connections-model connection: the connection's calls taken one at a time while
/// any is `left`, the first due at `intended`. Call `k` of the step's `arrival`-th connection is the
/// step's `arrival * calls + k`-th request of the mix.
async fn calls_in_turn(
    ctx: &Ctx,
    conn: &Connection,
    intended: Instant,
    arrival: u64,
    left: &Cell<u32>,
) {
    let mut from = Some(intended);
    let calls = ctx.calls;
    while left.get() > 0 {
        if from.is_none() && ctx.past_deadline() {
            return;
        }
        let call = u64::from(calls - left.get());
        left.set(left.get() - 1);
        let number = arrival.wrapping_mul(u64::from(calls)) + call;
        let template = ctx.template(ctx.pick(number));
        let intended = from.take().unwrap_or_else(Instant::now);
        let Ok(fill) = ctx.fill(template, number) else {
            continue;
        };
        let req = Request {
            template,
            intended,
            last: left.get() == 0,
            queued: None,
            fill: fill.as_ref(),
        };
        // Not sent, or failed with the connection: the calls not yet made were due and will never
        // be sent (this one is already counted, as unsent or as its error).
        let unsent = match conn.send(&ctx.target, &ctx.rec, req).await {
            Ok(Sent::Kept | Sent::Failed) => continue,
            Ok(Sent::Lost) => None,
            Err(Unsent(class)) => Some(class),
        };
        abandon(ctx, u64::from(left.replace(0)), unsent);
        return;
    }
}

/// The concurrency model: one slot's closed loop, request after request on its connection,
/// reconnecting after failures.
async fn closed_loop(ctx: &Ctx, conn: &Connection) {
    while !ctx.past_deadline() {
        // A turn before the connect: a connect that fails is that turn's request, due and unsent,
        // so it is paced and counted against `-n` like one sent (a refusing target took 13,935
        // turns of a 1,000-request step, and the agent was dropped for claiming them).
        if !next_turn(ctx).await {
            return;
        }
        if !conn.is_open()
            && let Err(class) = conn.open(&ctx.target, &ctx.rec).await
        {
            back_off(class).await;
            continue;
        }
        // A connect that finished after the deadline sends nothing more.
        let now = Instant::now();
        if ctx.cancel.is_cancelled() || now >= ctx.deadline {
            return;
        }
        let (template, number) = ctx.next_template();
        let Ok(fill) = ctx.fill(template, number) else {
            // No row for it (a shard feeder's are used up): not a spin until the deadline.
            tokio::time::sleep(NO_ROW_BACKOFF).await;
            continue;
        };
        let req = Request {
            template,
            intended: now,
            last: false,
            queued: None,
            fill: fill.as_ref(),
        };
        // A plain connection's connect is proven by its first request's write: one refused is
        // found here, and spins as one refused by `open` would.
        if let Err(Unsent(class)) = conn.send(&ctx.target, &ctx.rec, req).await {
            back_off(class).await;
        }
    }
}

/// After a turn that could not send: out of fds or ports, they do not come back within
/// microseconds, and retrying at once would only count the same failure thousands of times; refused
/// at once means a spin, so yield and the ticker and drain still run.
async fn back_off(class: ErrorClass) {
    if class.is_generator_resource() {
        tokio::time::sleep(RESOURCE_BACKOFF).await;
    } else {
        tokio::task::yield_now().await;
    }
}

/// A closed loop's next request may start: one of the step's count (ab's `-n`) is left, and the pace
/// under `--max-rate` lets it now (waited for) and before the deadline.
async fn next_turn(ctx: &Ctx) -> bool {
    let left = ctx.budget.get();
    if left == 0 {
        return false;
    }
    if let Some(pace) = &ctx.pace {
        let at = pace.claim();
        if at >= ctx.deadline {
            return false;
        }
        if at > Instant::now() {
            tokio::select! {
                _ = sleep_until(at) => {}
                _ = ctx.cancel.cancelled() => return false,
            }
        }
    }
    ctx.budget.set(left - 1);
    true
}

/// Calls of a connections-model connection that will never be made: the generator's own failures
/// when it could not connect for want of fds or ports (each in that class, so none is charged to
/// the target), otherwise abandoned with a connection the target failed or closed.
fn abandon(ctx: &Ctx, rest: u64, unsent: Option<ErrorClass>) {
    ctx.rec.with(|s| {
        s.counters.unsent += rest;
        match unsent {
            Some(class) if class.is_generator_resource() => {
                s.counters.errors[class.index()] += rest
            }
            _ => s.counters.abandoned += rest,
        }
    });
}

#[cfg(test)]
mod tests;
