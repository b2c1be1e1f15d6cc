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

use crate::client::{Connection, Endpoint, Request, Sent, Template, Unsent};
use crate::recorder::Recorder;
use crate::timer::Timer;

mod pool;
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

/// How long a finished connection of the connections model waits for the server's close.
const LINGER: Duration = Duration::from_millis(200);

/// How long a closed-loop connection waits after the generator ran out of fds or ports.
const RESOURCE_BACKOFF: Duration = Duration::from_millis(10);

/// The interval length reported to the coordinator.
pub const INTERVAL: Duration = Duration::from_secs(1);

/// Per-step state every task of the worker shares (through `Rc`, on one thread).
struct Ctx {
    target: Endpoint,
    rec: Rc<Recorder>,
    deadline: Instant,
    cancel: CancellationToken,
    next_url: Cell<usize>,
    rng: RefCell<Rng>,
    /// When this worker passed the start instant and began sending.
    began: Cell<Option<Instant>>,
    in_flight: Cell<usize>,
    idle: Notify,
    /// Requests this worker's closed loops may still start (ab's `-n`); `u64::MAX` for no count.
    budget: Cell<u64>,
    /// The closed loops' pace under the agent's `--max-rate`; `None`: as fast as replies come.
    pace: Option<Pacer>,
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
            next_url: Cell::new(job.worker as usize),
            rng: RefCell::new(Rng::new(
                share.seed() ^ job.worker.wrapping_mul(0x2545_F491_4F6C_DD1D),
            )),
            began: Cell::new(None),
            in_flight: Cell::new(0),
            idle: Notify::new(),
            budget: Cell::new(u64::MAX),
            pace: closed_pace(share, job).and_then(|rate| Pacer::new(rate, job.start)),
        }
    }

    fn template(&self) -> &Template {
        let templates = &self.target.templates;
        let i = if templates.len() == 1 {
            0
        } else if self.target.random_order {
            self.rng.borrow_mut().below(templates.len())
        } else {
            let i = self.next_url.get();
            self.next_url.set((i + 1) % templates.len());
            i
        };
        &templates[i]
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
    let rec = Rc::new(Recorder::new(job.target.ok_status.clone()));
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
        LoadModel::Connections => {
            let calls = share.num_call().get();
            open_loop(ctx, timer, share, &slice, job.start, |intended| {
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
                    connection(task_ctx, intended, calls).await
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
            open_loop(ctx, timer, share, &slice, job.start, |intended| {
                pool.clone().arrive(ctx, intended)
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

/// Dispatches this worker's arrivals at their intended times; a late wake-up dispatches every due
/// arrival at once (catch-up, as httperf does) and records how late each was.
async fn open_loop(
    ctx: &Rc<Ctx>,
    timer: &Timer,
    share: &StepShare,
    slice: &Slice,
    start: Instant,
    mut dispatch: impl FnMut(Instant),
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
    for offset in schedule {
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
        dispatch(intended);
    }
}

/// The connections model: one connection per arrival, its `calls` requests made in turn on each of
/// its slots (over HTTP/2, up to `--streams` at once), then closed. The first request of each slot
/// counts from the arrival (connect included: they were all due then); later ones from the moment
/// the slot was free.
async fn connection(ctx: Rc<Ctx>, intended: Instant, calls: u32) {
    let conn = Connection::new(&ctx.target);
    if let Err(class) = conn.open(&ctx.target, &ctx.rec).await {
        // Given up waiting for the server to accept: a lower bound of its latency.
        if class == ErrorClass::ConnectTimeout {
            ctx.rec.given_up(intended.elapsed());
        }
        abandon(&ctx, u64::from(calls - 1), Some(class));
        return;
    }
    let left = Cell::new(calls);
    let lanes = conn.slots().min(calls);
    if lanes == 1 {
        // One slot: its calls on this task, none spawned.
        calls_in_turn(&ctx, &conn, intended, &left).await;
    } else {
        let (conn, left) = (Rc::new(conn), Rc::new(left));
        let mut slots = tokio::task::JoinSet::new();
        for _ in 0..lanes {
            let (ctx, conn, left) = (ctx.clone(), conn.clone(), left.clone());
            slots.spawn_local(async move { calls_in_turn(&ctx, &conn, intended, &left).await });
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
        _ = conn.linger(LINGER) => {}
        _ = ctx.cancel.cancelled() => {}
    }
}

/// One slot of a connections-model connection: the connection's calls taken one at a time while
/// any is `left`, the first due at `intended`.
async fn calls_in_turn(ctx: &Ctx, conn: &Connection, intended: Instant, left: &Cell<u32>) {
    let mut from = Some(intended);
    while left.get() > 0 {
        if from.is_none() && ctx.past_deadline() {
            return;
        }
        left.set(left.get() - 1);
        let req = Request {
            template: ctx.template(),
            intended: from.take().unwrap_or_else(Instant::now),
            last: left.get() == 0,
            queued: None,
        };
        // Not sent, or failed with the connection: the calls not yet made were due and will never
        // be sent (this one is already counted, as unsent or as its error).
        let unsent = match conn.send(&ctx.target, &ctx.rec, req).await {
            Ok(Sent::Kept) => continue,
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
            if class.is_generator_resource() {
                // Out of fds or ports: they do not come back within microseconds, and retrying
                // at once would only count the same failure thousands of times.
                tokio::time::sleep(RESOURCE_BACKOFF).await;
            } else {
                // Refused at once means a spin; yield so the ticker and drain still run.
                tokio::task::yield_now().await;
            }
            continue;
        }
        // A connect that finished after the deadline sends nothing more.
        let now = Instant::now();
        if ctx.cancel.is_cancelled() || now >= ctx.deadline {
            return;
        }
        let req = Request {
            template: ctx.template(),
            intended: now,
            last: false,
            queued: None,
        };
        let _ = conn.send(&ctx.target, &ctx.rec, req).await;
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
mod tests {
    use std::net::SocketAddr;
    use std::sync::atomic::AtomicU64;

    use proto::pb;
    use shared::plan::{Arrival, StepLimit, Workload};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;
    use crate::engine::Engine;

    /// A local server that answers each request after `delay` (and closes when asked to), counting the
    /// requests and the most connections it held open at once.
    #[derive(Default)]
    struct Seen {
        requests: AtomicU64,
        open: AtomicU64,
        peak: AtomicU64,
    }

    async fn server(delay: Duration) -> (SocketAddr, Arc<Seen>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(Seen::default());
        let all = seen.clone();
        tokio::spawn(async move {
            while let Ok((mut conn, _)) = listener.accept().await {
                let seen = all.clone();
                let now = seen.open.fetch_add(1, Ordering::AcqRel) + 1;
                seen.peak.fetch_max(now, Ordering::AcqRel);
                tokio::spawn(async move {
                    let mut buf = [0u8; 4096];
                    while let Ok(n @ 1..) = conn.read(&mut buf).await {
                        // GETs without bodies, one at a time: a request ends at its blank line.
                        let head = &buf[..n];
                        let requests = head.windows(4).filter(|w| w == b"\r\n\r\n").count();
                        seen.requests.fetch_add(requests as u64, Ordering::AcqRel);
                        tokio::time::sleep(delay).await;
                        let reply =
                            b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n".repeat(requests);
                        let close = head.windows(17).any(|w| w == b"connection: close");
                        if conn.write_all(&reply).await.is_err() || close {
                            break;
                        }
                    }
                    // Counted down as the server closes, before the client can see it closed.
                    drop(conn);
                    seen.open.fetch_sub(1, Ordering::AcqRel);
                });
            }
        });
        (addr, seen)
    }

    async fn target(addr: SocketAddr) -> Endpoint {
        target_over(addr, 1).await
    }

    /// The target over HTTP/2 (h2c) with `streams` per connection when `streams` > 1.
    async fn target_over(addr: SocketAddr, streams: u32) -> Endpoint {
        target_timing_out(addr, streams, 5000).await
    }

    /// As `target_over`, with `--timeout` of `timeout_ms`.
    async fn target_timing_out(addr: SocketAddr, streams: u32, timeout_ms: u64) -> Endpoint {
        let h2 = streams > 1;
        let configure = pb::Configure {
            requests: vec![pb::RequestTemplate {
                method: "GET".into(),
                url: format!("http://{addr}/"),
                headers: Vec::new(),
                body: Vec::new(),
            }],
            url_order: pb::UrlOrder::RoundRobin as i32,
            timeout_ms,
            connect_timeout_ms: 1000,
            http: if h2 {
                pb::HttpVersion::Http2
            } else {
                pb::HttpVersion::Http1
            } as i32,
            streams,
            ..Default::default()
        };
        // Prepared as a configure prepares it, the HTTP/2 preflight included.
        let w = Workload::try_from(&configure).unwrap();
        let target = Endpoint::prepare(&w).await.unwrap();
        crate::client::preflight(target, &w).await.unwrap()
    }

    /// A whole step (this agent's alone) of `length`.
    fn share(model: LoadModel, rate: f64, connections: u32, length: Duration) -> StepShare {
        StepShare::try_new(
            0,
            model,
            rate,
            Slice::among(&[1])[0].clone(),
            connections,
            1,
            1000,
            StepLimit::Duration(length),
            Arrival::Uniform,
            7,
        )
        .unwrap()
    }

    /// Runs one step on `workers` worker threads, as a session launches it, and adds up every report.
    async fn run_step(addr: SocketAddr, share: StepShare, caps: Caps, workers: usize) -> Snapshot {
        run_step_on(target(addr).await, share, caps, workers).await
    }

    async fn run_step_on(
        target: Endpoint,
        share: StepShare,
        caps: Caps,
        workers: usize,
    ) -> Snapshot {
        let engine = Engine::start(workers).unwrap();
        let (tx, mut rx) = mpsc::channel(64);
        let share = Arc::new(share);
        let start = Instant::now() + Duration::from_millis(50);
        let jobs = (0..workers)
            .map(|w| Job {
                share: share.clone(),
                target: target.clone(),
                worker: w as u64,
                workers: workers as u64,
                start,
                cancel: CancellationToken::new(),
                out: tx.clone(),
                caps: caps.clone(),
            })
            .collect();
        engine.dispatch(jobs).await.unwrap();
        drop(tx);
        let mut total = Snapshot::default();
        let mut done = 0;
        while done < workers {
            let report = tokio::time::timeout(Duration::from_secs(20), rx.recv())
                .await
                .expect("the step ends")
                .expect("every worker reports its end");
            match report {
                Report::Interval { snapshot, .. } => total.add(&snapshot),
                Report::Done { snapshot, .. } => {
                    total.add(&snapshot);
                    done += 1;
                }
            }
        }
        total
    }

    #[tokio::test]
    async fn closed_loops_no_longer_outrun_the_agents_max_rate() {
        let (addr, seen) = server(Duration::ZERO).await;
        // 3 connections on 2 workers (2 and 1): their parts of 50 req/s add up to 50.
        let step = share(LoadModel::Concurrency, 0.0, 3, Duration::from_secs(2));
        let sent = run_step(addr, step, Caps::new(Some(50.0), None), 2).await;
        let requests = sent.counters.requests;
        // 2 s at 50 req/s, plus each worker's first slot at the start; unpaced, thousands.
        assert!(
            (50..=105).contains(&requests),
            "{requests} requests in 2 s under --max-rate 50"
        );
        assert_eq!(seen.requests.load(Ordering::Acquire), requests);
        assert_eq!(sent.counters.ok, requests, "paced, every request is served");
    }

    #[tokio::test]
    async fn the_drain_counts_the_replies_after_the_schedule_s_end_and_only_those() {
        // Instant replies: none comes after the end (the last arrival's reply came before it,
        // though the loop had returned at that arrival).
        let (addr, _) = server(Duration::ZERO).await;
        let step = share(LoadModel::Requests, 100.0, 10, Duration::from_secs(1));
        let fast = run_step(addr, step, Caps::default(), 2).await;
        assert_eq!(fast.counters.ok, 100, "{:?}", fast.counters);
        assert_eq!(fast.counters.drained, 0, "{:?}", fast.counters);
        // Replies 300 ms late: those sent in the step's last 300 ms come in the drain.
        let (addr, _) = server(Duration::from_millis(300)).await;
        let step = share(LoadModel::Requests, 100.0, 100, Duration::from_secs(1));
        let slow = run_step(addr, step, Caps::default(), 2).await;
        assert_eq!(slow.counters.ok, 100, "{:?}", slow.counters);
        assert!(
            (20..=45).contains(&slow.counters.drained),
            "{:?}",
            slow.counters
        );
    }

    #[tokio::test]
    async fn a_closed_loop_against_a_refusing_target_is_paced_and_counted_by_turns() {
        // Each refused connect is a turn's request, due and unsent: under --max-rate 50 for 2 s,
        // about 100 of them, where the loop spun thousands past its pace (and past `-n`).
        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = closed.local_addr().unwrap();
        drop(closed);
        let step = share(LoadModel::Concurrency, 0.0, 3, Duration::from_secs(2));
        let sent = run_step(addr, step, Caps::new(Some(50.0), None), 2).await;
        let c = &sent.counters;
        assert_eq!(c.requests, 0);
        assert!((50..=105).contains(&c.unsent), "{c:?}");
        assert_eq!(c.error(ErrorClass::ConnRefused), c.unsent);
    }

    #[tokio::test]
    async fn the_connections_model_no_longer_holds_more_sockets_than_max_connections() {
        // Each connection is held 300 ms: 100 arrivals/s would hold about 30 open at once.
        let (addr, seen) = server(Duration::from_millis(300)).await;
        let step = share(
            LoadModel::Connections,
            100.0,
            0,
            Duration::from_millis(1500),
        );
        let sent = run_step(addr, step, Caps::new(None, Some(5)), 2).await;
        let peak = seen.peak.load(Ordering::Acquire);
        assert!((1..=5).contains(&peak), "{peak} connections open at once");
        let c = &sent.counters;
        let refused = c.error(ErrorClass::FdUnavailable);
        assert!(refused > 50, "{c:?}");
        // The generator's own: not due, so not the server's failure; and said in words.
        assert_eq!(c.generator_errors(), refused);
        assert_eq!(c.due(), c.attempts() - refused);
        let words = sent.messages.get(ErrorClass::FdUnavailable).unwrap_or("");
        assert!(words.contains("--max-connections 5"), "{words}");
        assert!(
            c.ok > 0 && c.ok == seen.requests.load(Ordering::Acquire),
            "{c:?}"
        );
    }

    #[tokio::test]
    async fn the_later_calls_of_a_refused_connection_are_abandoned_with_it_the_target_s_doing() {
        let closed = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap()
        };
        let step = StepShare::try_new(
            0,
            LoadModel::Connections,
            50.0,
            Slice::among(&[1])[0].clone(),
            0,
            5,
            1000,
            StepLimit::Duration(Duration::from_millis(600)),
            Arrival::Uniform,
            7,
        )
        .unwrap();
        let sent = run_step(closed, step, Caps::new(None, None), 1).await;
        let c = &sent.counters;
        let refused = c.error(ErrorClass::ConnRefused);
        assert!(refused >= 20, "{c:?}");
        // Each arrival: its first call refused (unsent, in its class), the other 4 gone with it.
        assert_eq!((c.unsent, c.abandoned), (5 * refused, 4 * refused), "{c:?}");
        assert_eq!(c.generator_errors(), 0);
        assert_eq!(
            c.known_failed(),
            c.due(),
            "every due request is known failed: {c:?}"
        );
    }

    /// What a test's HTTP/2 server saw: requests, connections, streams open at once at most.
    #[derive(Default)]
    struct SeenH2 {
        requests: AtomicU64,
        connections: AtomicU64,
        open: AtomicU64,
        peak: AtomicU64,
        refused: AtomicU64,
    }

    /// An h2c server (the h2 crate's) announcing `max_streams`, answering each request after
    /// `delay`; with `goaway_after`, it ends each connection after that many streams, gracefully
    /// (GOAWAY NO_ERROR, the streams in flight answered) or, with `calm`, abruptly (GOAWAY
    /// ENHANCE_YOUR_CALM, the connection closed); with `refuse_every` N > 0, it refuses every Nth
    /// stream (REFUSED_STREAM) instead of answering.
    #[derive(Clone, Copy)]
    struct H2Server {
        max_streams: u32,
        delay: Duration,
        goaway_after: Option<u64>,
        calm: bool,
        refuse_every: u64,
        /// Ends each connection gracefully (GOAWAY) this long after it began.
        goaway_at: Option<Duration>,
        /// Refuses a stream after its `delay`, as a server that queued it first does, not at once.
        slow_refusals: bool,
    }

    impl H2Server {
        fn new(max_streams: u32, delay: Duration) -> H2Server {
            H2Server {
                max_streams,
                delay,
                goaway_after: None,
                calm: false,
                refuse_every: 0,
                goaway_at: None,
                slow_refusals: false,
            }
        }
    }

    async fn h2_server(
        max_streams: u32,
        delay: Duration,
        goaway_after: Option<u64>,
    ) -> (SocketAddr, Arc<SeenH2>) {
        H2Server {
            goaway_after,
            ..H2Server::new(max_streams, delay)
        }
        .start()
        .await
    }

    impl H2Server {
        async fn start(self) -> (SocketAddr, Arc<SeenH2>) {
            let H2Server {
                max_streams,
                delay,
                goaway_after,
                calm,
                refuse_every,
                goaway_at,
                slow_refusals,
            } = self;
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            let seen = Arc::new(SeenH2::default());
            let all = seen.clone();
            tokio::spawn(async move {
                while let Ok((tcp, _)) = listener.accept().await {
                    let seen = all.clone();
                    tokio::spawn(async move {
                        let mut b = h2::server::Builder::new();
                        b.max_concurrent_streams(max_streams);
                        let Ok(mut conn) = b.handshake::<_, bytes::Bytes>(tcp).await else {
                            return;
                        };
                        seen.connections.fetch_add(1, Ordering::AcqRel);
                        let mut served = 0;
                        let mut goaway = goaway_at.map(|d| Box::pin(tokio::time::sleep(d)));
                        loop {
                            let accepted = match &mut goaway {
                                Some(at) => tokio::select! {
                                    a = conn.accept() => a,
                                    _ = at.as_mut() => {
                                        conn.graceful_shutdown();
                                        goaway = None;
                                        continue;
                                    }
                                },
                                None => conn.accept().await,
                            };
                            let Some(Ok((_, mut respond))) = accepted else {
                                break;
                            };
                            served += 1;
                            if refuse_every > 0 && served % refuse_every == 0 {
                                seen.refused.fetch_add(1, Ordering::AcqRel);
                                if slow_refusals {
                                    tokio::spawn(async move {
                                        tokio::time::sleep(delay).await;
                                        respond.send_reset(h2::Reason::REFUSED_STREAM);
                                    });
                                } else {
                                    respond.send_reset(h2::Reason::REFUSED_STREAM);
                                }
                                continue;
                            }
                            let seen = seen.clone();
                            tokio::spawn(async move {
                                let now = seen.open.fetch_add(1, Ordering::AcqRel) + 1;
                                seen.peak.fetch_max(now, Ordering::AcqRel);
                                seen.requests.fetch_add(1, Ordering::AcqRel);
                                tokio::time::sleep(delay).await;
                                // Counted down before the reply can free the client's slot.
                                seen.open.fetch_sub(1, Ordering::AcqRel);
                                let reply = http::Response::builder().status(200).body(()).unwrap();
                                if let Ok(mut body) = respond.send_response(reply, false) {
                                    let _ = body.send_data(bytes::Bytes::from_static(b"ok"), true);
                                }
                            });
                            if goaway_after == Some(served) {
                                if calm {
                                    conn.abrupt_shutdown(h2::Reason::ENHANCE_YOUR_CALM);
                                } else {
                                    conn.graceful_shutdown();
                                }
                            }
                        }
                    });
                }
            });
            (addr, seen)
        }
    }

    #[tokio::test]
    async fn http2_concurrency_runs_connections_times_streams_closed_loops() {
        let (addr, seen) = h2_server(100, Duration::from_millis(20), None).await;
        // 3 connections x 8 streams, each request held 20 ms: 24 at once, about 1,200/s.
        let step = share(LoadModel::Concurrency, 0.0, 3, Duration::from_millis(1500));
        let sent = run_step_on(target_over(addr, 8).await, step, Caps::default(), 2).await;
        let c = &sent.counters;
        // And the one that asked, before the step, whether the target speaks HTTP/2.
        assert_eq!(seen.connections.load(Ordering::Acquire), 3 + 1, "{c:?}");
        assert_eq!(seen.peak.load(Ordering::Acquire), 24, "{c:?}");
        assert_eq!(c.connections, 3);
        assert_eq!(c.requests, seen.requests.load(Ordering::Acquire));
        assert_eq!((c.ok, c.failed()), (c.requests, 0), "{c:?}");
        assert!(c.requests > 600, "{c:?}");
        assert_eq!(c.waited, 0, "under the server's limit nothing waits");
        assert_eq!(
            (c.peer_max_streams, c.refused_streams, c.goaways),
            (100, 0, 0)
        );
    }

    #[tokio::test]
    async fn a_refused_stream_is_counted_and_sent_again_not_lost() {
        let (addr, seen) = H2Server {
            refuse_every: 10,
            ..H2Server::new(100, Duration::from_millis(2))
        }
        .start()
        .await;
        let step = share(LoadModel::Concurrency, 0.0, 2, Duration::from_millis(1000));
        let sent = run_step_on(target_over(addr, 4).await, step, Caps::default(), 1).await;
        let c = &sent.counters;
        let refused = seen.refused.load(Ordering::Acquire);
        assert!(refused > 10, "{c:?}");
        assert_eq!(c.refused_streams, refused);
        // Each counted once, as the resend that the server answered.
        assert_eq!(c.requests, seen.requests.load(Ordering::Acquire), "{c:?}");
        assert_eq!((c.ok, c.failed()), (c.requests, 0), "{c:?}");
    }

    #[tokio::test]
    async fn a_request_refused_on_every_attempt_is_due_once_though_its_interval_was_reported() {
        // Every stream refused (REFUSED_STREAM) 40 ms after it opened, 60 req/s for 1 s: a request
        // is refused, sent once more and refused again 80 ms after it left, so the last ones'
        // second refusal comes after the interval that counted them as sent was swapped out.
        // Before, each of those was taken back from an interval with nothing left to take from,
        // owed to a later send that never came, and counted unsent too: 65 due of 60.
        let (addr, seen) = H2Server {
            refuse_every: 1,
            slow_refusals: true,
            ..H2Server::new(100, Duration::from_millis(40))
        }
        .start()
        .await;
        let step = share(LoadModel::Requests, 60.0, 1, Duration::from_secs(1));
        let sent = run_step_on(target_over(addr, 4).await, step, Caps::default(), 1).await;
        let c = &sent.counters;
        assert_eq!((c.due(), c.failed(), c.ok), (60, 60, 0), "{c:?}");
        // Each reached the server, which refused it: sent, and failed, once.
        assert_eq!((c.requests, c.unsent), (60, 0), "{c:?}");
        assert_eq!(c.error(ErrorClass::ConnReset), 60, "{c:?}");
        assert_eq!(c.refused_streams, seen.refused.load(Ordering::Acquire));
        assert_eq!(c.refused_streams, 120, "{c:?}");
        let words = sent.messages.get(ErrorClass::ConnReset).unwrap_or_default();
        assert!(words.contains("REFUSED_STREAM"), "{words}");
    }

    #[tokio::test]
    async fn http2_never_opens_more_streams_than_the_server_allows_and_says_who_waited() {
        // 16 streams asked per connection, the server allows 4: 12 wait for a slot each time.
        let (addr, seen) = h2_server(4, Duration::from_millis(20), None).await;
        let step = share(LoadModel::Concurrency, 0.0, 1, Duration::from_millis(1000));
        let sent = run_step_on(target_over(addr, 16).await, step, Caps::default(), 1).await;
        let c = &sent.counters;
        assert_eq!(seen.peak.load(Ordering::Acquire), 4, "{c:?}");
        assert_eq!(c.peer_max_streams, 4);
        assert_eq!(
            (c.ok, c.failed()),
            (c.requests, 0),
            "no stream refused: {c:?}"
        );
        assert_eq!(c.requests, seen.requests.load(Ordering::Acquire));
        assert!(c.waited > c.requests / 2, "{c:?}");
        // A stream waits about 3 replies (60 ms) for its slot; latency includes it.
        let wait_p50 = sent.hist.wait.value_at_quantile(0.5);
        assert!((20_000..200_000).contains(&wait_p50), "{wait_p50} µs");
    }

    #[tokio::test]
    async fn a_request_timed_out_waiting_for_a_stream_slot_is_unsent_not_a_server_timeout() {
        // One stream at a time, none answered within the 200 ms timeout; 4 closed loops ask at
        // once, so 1 opens and the others wait for the slot as long as it is held, and their
        // timeouts come with its: they time out in the queue, never sent.
        let (addr, seen) = h2_server(1, Duration::from_secs(2), None).await;
        let step = share(LoadModel::Concurrency, 0.0, 1, Duration::from_millis(1000));
        let target = target_timing_out(addr, 4, 200).await;
        let sent = run_step_on(target, step, Caps::default(), 1).await;
        let c = &sent.counters;
        // About 5 rounds of 4: at most one of each round is sent.
        assert!(c.unsent >= 5, "{c:?}");
        assert!(c.requests <= 8, "{c:?}");
        // What was sent timed out at the server; what was not, in the queue: each once.
        assert_eq!(c.errors_total(), c.requests + c.unsent, "{c:?}");
        assert_eq!(c.given_up, c.requests + c.unsent, "{c:?}");
        assert!(c.requests <= seen.requests.load(Ordering::Acquire), "{c:?}");
        assert!(c.waited >= c.unsent, "each waited for the slot: {c:?}");
    }

    #[tokio::test]
    async fn a_stream_that_waited_for_its_slot_and_then_timed_out_still_records_its_wait() {
        // One stream at a time, each answered after 300 ms, a 400 ms timeout, 2 closed loops on
        // one connection: the slot is never free when a loop asks, so every request but the very
        // first waits for it; the second loop's first opens after 300 ms of waiting and times out
        // 100 ms later, at the server.
        let (addr, _) = h2_server(1, Duration::from_millis(300), None).await;
        let step = share(LoadModel::Concurrency, 0.0, 1, Duration::from_millis(1000));
        let target = target_timing_out(addr, 2, 400).await;
        let sent = run_step_on(target, step, Caps::default(), 1).await;
        let c = &sent.counters;
        assert!(c.given_up >= 1, "one timed out after it opened: {c:?}");
        let asked = c.requests + c.unsent;
        assert!(
            c.waited + 1 >= asked,
            "every wait recorded, however the stream ended: {c:?}"
        );
        assert_eq!(sent.hist.wait.len(), c.waited, "{c:?}");
        // The first timed-out stream's wait (about 300 ms) is among them.
        assert!(
            sent.hist.wait.max() >= 250_000,
            "{} µs",
            sent.hist.wait.max()
        );
    }

    #[tokio::test]
    async fn a_stream_waiting_for_its_slot_when_a_goaway_comes_keeps_its_wait_and_counts_once() {
        // One stream at a time, each answered after 300 ms; each connection ends by GOAWAY 100 ms
        // after it began. 2 loops share a connection: one opens, the other waits for the slot until
        // the GOAWAY sends it to a fresh connection, where it opens at once. Its 100 ms of waiting
        // on the first is the client's queue all the same.
        let (addr, seen) = H2Server {
            goaway_at: Some(Duration::from_millis(100)),
            ..H2Server::new(1, Duration::from_millis(300))
        }
        .start()
        .await;
        let step = share(LoadModel::Concurrency, 0.0, 1, Duration::from_millis(1000));
        let sent = run_step_on(target_over(addr, 2).await, step, Caps::default(), 1).await;
        let c = &sent.counters;
        assert!(c.goaways >= 2, "{c:?}");
        assert!(
            c.waited >= 1,
            "the waits before each GOAWAY are recorded: {c:?}"
        );
        assert!(
            sent.hist.wait.max() >= 60_000,
            "{} µs",
            sent.hist.wait.max()
        );
        // Sent again, each counted once, as the server saw them.
        assert_eq!(c.requests, seen.requests.load(Ordering::Acquire), "{c:?}");
        assert_eq!((c.ok, c.failed()), (c.requests, 0), "{c:?}");
    }

    #[tokio::test]
    async fn a_goaway_loses_no_request_the_rest_go_on_a_new_connection() {
        // Each connection ends after 50 streams (nginx's keepalive_requests, as GOAWAY).
        let (addr, seen) = h2_server(100, Duration::from_millis(2), Some(50)).await;
        let step = share(LoadModel::Concurrency, 0.0, 2, Duration::from_millis(1500));
        let sent = run_step_on(target_over(addr, 10).await, step, Caps::default(), 1).await;
        let c = &sent.counters;
        assert!(seen.connections.load(Ordering::Acquire) > 4, "{c:?}");
        assert_eq!(c.connections + 1, seen.connections.load(Ordering::Acquire));
        // Every connection but the last of each loop ended by the server's GOAWAY.
        assert!(
            c.goaways + 2 >= c.connections && c.goaways <= c.connections,
            "{c:?}"
        );
        assert_eq!(c.requests, seen.requests.load(Ordering::Acquire), "{c:?}");
        assert_eq!((c.ok, c.failed()), (c.requests, 0), "{c:?}");
    }

    #[tokio::test]
    async fn an_abrupt_goaway_fails_the_streams_it_took_in_words_and_resends_the_rest() {
        // After 30 streams the server says ENHANCE_YOUR_CALM and closes, 10 streams in flight.
        let (addr, seen) = H2Server {
            goaway_after: Some(30),
            calm: true,
            ..H2Server::new(100, Duration::from_millis(20))
        }
        .start()
        .await;
        let step = share(LoadModel::Concurrency, 0.0, 1, Duration::from_millis(800));
        let sent = run_step_on(target_over(addr, 10).await, step, Caps::default(), 1).await;
        let c = &sent.counters;
        assert!(c.goaways >= 2, "{c:?}");
        assert!(c.connections >= 2, "{c:?}");
        // What the server took and never answered failed; nothing vanished.
        assert_eq!(c.requests, c.ok + c.failed(), "{c:?}");
        assert!(c.failed() > 0, "{c:?}");
        let words: Vec<&str> = ErrorClass::ALL
            .iter()
            .filter_map(|class| sent.messages.get(*class))
            .collect();
        assert!(
            words.iter().any(|w| w
                .contains("ended the HTTP/2 session (GOAWAY ENHANCE_YOUR_CALM) after ")
                && w.ends_with(" streams, this one unanswered")),
            "{words:?} {c:?}"
        );
        assert!(seen.requests.load(Ordering::Acquire) >= c.ok);
    }

    #[tokio::test]
    async fn http2_requests_model_holds_the_rate_over_connections_times_streams() {
        let (addr, seen) = h2_server(100, Duration::from_millis(30), None).await;
        // 400/s, each held 30 ms: about 12 at once, over at most 2 connections x 10 streams.
        let step = StepShare::try_new(
            0,
            LoadModel::Requests,
            400.0,
            Slice::among(&[1])[0].clone(),
            0,
            1,
            2,
            StepLimit::Duration(Duration::from_millis(1500)),
            Arrival::Uniform,
            7,
        )
        .unwrap();
        let sent = run_step_on(target_over(addr, 10).await, step, Caps::default(), 1).await;
        let c = &sent.counters;
        assert_eq!(c.requests, 600, "{c:?}");
        assert_eq!((c.ok, seen.requests.load(Ordering::Acquire)), (600, 600));
        assert!(c.connections <= 2, "{c:?}");
        assert_eq!(seen.connections.load(Ordering::Acquire), c.connections + 1);
        assert_eq!(sent.hist.wait.len(), 600, "one wait per arrival");
    }

    #[tokio::test]
    async fn http2_connections_model_multiplexes_each_connection_s_calls() {
        let (addr, seen) = h2_server(100, Duration::from_millis(10), None).await;
        // 20 connections/s, 10 calls each on 5 streams: two rounds of 10 ms per connection, so
        // connections never overlap and the server sees 5 streams at once, never 10 or 1.
        let step = StepShare::try_new(
            0,
            LoadModel::Connections,
            20.0,
            Slice::among(&[1])[0].clone(),
            0,
            10,
            1000,
            StepLimit::Duration(Duration::from_millis(1000)),
            Arrival::Uniform,
            7,
        )
        .unwrap();
        let sent = run_step_on(target_over(addr, 5).await, step, Caps::default(), 1).await;
        let c = &sent.counters;
        assert_eq!(c.connections, 20, "{c:?}");
        assert_eq!(seen.connections.load(Ordering::Acquire), 20 + 1);
        // The last connection opens at 950 ms and its second round is due at about 960: on a
        // loaded machine it can start past the step's deadline, and a call not begun by then is
        // cut (not due), a round of 5 at a time. Whatever was sent, the server saw and served.
        assert!(
            c.requests == 200 || c.requests == 195,
            "{} requests: {c:?}",
            c.requests
        );
        assert_eq!(c.ok, c.requests, "{c:?}");
        assert_eq!(c.unsent, 0, "{c:?}");
        assert_eq!(seen.requests.load(Ordering::Acquire), c.requests);
        assert_eq!(seen.peak.load(Ordering::Acquire), 5);
    }

    #[test]
    fn a_socket_cap_gives_back_what_it_took() {
        let cap = Caps::new(None, Some(2)).sockets.unwrap();
        let a = cap.take().unwrap();
        let _b = cap.take().unwrap();
        assert!(cap.take().is_none());
        drop(a);
        assert!(cap.take().is_some());
    }
}
