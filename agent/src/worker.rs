//! One worker thread's part of a step. The schedule says *when* (open arrivals or a closed loop), the
//! client says *how*, the deadline says *until when*; the three load models are three ways of feeding one
//! connection loop. All state here belongs to the worker's thread: no locks, no per-request messages.
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use shared::metrics::{ErrorClass, Snapshot};
use shared::plan::Slice;
use shared::plan::{LoadModel, StepShare, split_proportional};
use shared::rng::Rng;
use shared::schedule::{Schedule, even_share};
use tokio::sync::{Notify, mpsc};
use tokio::time::{Instant, sleep_until};
use tokio_util::sync::CancellationToken;

use crate::client::{Conn, SendError, Target, Template};
use crate::recorder::Recorder;
use crate::timer::Timer;

/// A step as one worker runs it.
pub struct Job {
    pub share: Arc<StepShare>,
    pub target: Target,
    pub worker: u64,
    pub workers: u64,
    pub start: Instant,
    pub cancel: CancellationToken,
    pub out: mpsc::Sender<Report>,
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
    target: Target,
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
}

impl Ctx {
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

    /// Sends one due request: connects first if needed, and reconnects once if the server had closed
    /// the kept-alive connection. Returns the connection when it can be reused, and whether the
    /// request was written (a failure before writing is counted as unsent, and `Unsent` says why).
    async fn request(
        &self,
        conn: Option<Conn>,
        intended: Instant,
        last: bool,
    ) -> (Option<Conn>, Result<(), Unsent>) {
        let mut conn = conn;
        // Chosen once: a resend after a stale connection is the same request.
        let template = self.template();
        for attempt in 0..2 {
            let mut c = match conn.take() {
                Some(c) => c,
                None => match self.connect().await {
                    Ok(c) => c,
                    Err(class) => {
                        // Given up waiting for the server to accept: a lower bound of its latency.
                        if class == ErrorClass::ConnectTimeout {
                            self.rec.given_up(intended.elapsed());
                        }
                        return (None, Err(Unsent(class)));
                    }
                },
            };
            match c
                .send(template, last, intended, self.target.timeout, &self.rec)
                .await
            {
                Ok(()) => return (Some(c), Ok(())),
                Err(SendError::Failed(class)) => {
                    self.rec.error(class);
                    return (None, Ok(()));
                }
                Err(SendError::Stale) if attempt == 0 => continue,
                Err(SendError::Stale) => break,
            }
        }
        // A fresh connection that closes before it can take a request.
        self.rec.unsent(ErrorClass::ConnReset);
        (None, Err(Unsent(ErrorClass::ConnReset)))
    }

    async fn connect(&self) -> Result<Conn, ErrorClass> {
        Conn::open(&self.target, &self.rec)
            .await
            .inspect_err(|class| self.rec.unsent(*class))
    }

    fn past_deadline(&self) -> bool {
        self.cancel.is_cancelled() || Instant::now() >= self.deadline
    }
}

/// Why a due request was not written.
#[derive(Debug, Clone, Copy)]
struct Unsent(ErrorClass);

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
    let ctx = Rc::new(Ctx {
        target: job.target.clone(),
        rec: rec.clone(),
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
    });
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

    // This worker's part of the agent's slice of the step.
    let slice = share.slice().part(job.worker, job.workers);
    match share.model() {
        LoadModel::Connections => {
            open_loop(&ctx, &timer, &share, &slice, job.start, |intended| {
                let calls = share.num_call().get();
                let task_ctx = ctx.clone();
                spawn_tracked(
                    &ctx,
                    async move { connection(&task_ctx, intended, calls).await },
                );
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
            let pool = Rc::new(Pool::new(max));
            open_loop(&ctx, &timer, &share, &slice, job.start, |intended| {
                pool.clone().arrive(&ctx, intended)
            })
            .await;
            pool.close();
        }
        LoadModel::Concurrency => {
            let per_worker: Vec<u64> = (0..job.workers)
                .map(|w| even_share(u64::from(share.connections()), job.workers, w))
                .collect();
            if let Some(total) = share.max_requests() {
                // In proportion to the connections, so the workers' counts add up to the share.
                ctx.budget
                    .set(split_proportional(total.get(), &per_worker)[job.worker as usize]);
            }
            for _ in 0..per_worker[job.worker as usize] {
                let task_ctx = ctx.clone();
                spawn_tracked(&ctx, async move { closed_loop(&task_ctx).await });
            }
        }
    }

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

/// The connections model: one connection per arrival, `calls` sequential requests, then close.
async fn connection(ctx: &Ctx, intended: Instant, calls: u32) {
    let mut conn = None;
    for call in 0..calls {
        // The first request's latency counts from the arrival (connect included); later ones from
        // the moment the previous reply let them go.
        let from = if call == 0 {
            intended
        } else {
            if ctx.past_deadline() {
                return;
            }
            Instant::now()
        };
        match ctx.request(conn.take(), from, call + 1 == calls).await {
            (Some(c), Ok(())) => conn = Some(c),
            // Not sent, or failed with the connection: the calls after this one were due and will
            // never be sent (this one is already counted, as unsent or as its error). When the
            // generator itself could not connect (fds, ports), they are its failures too, each
            // counted in that class, so none is charged to the target.
            (_, outcome) => {
                let rest = u64::from(calls - call - 1);
                ctx.rec.with(|s| {
                    s.counters.unsent += rest;
                    if let Err(Unsent(class)) = outcome
                        && class.is_generator_resource()
                    {
                        s.counters.errors[class.index()] += rest;
                    }
                });
                return;
            }
        }
    }
    // The last reply asked the server to close: let it, so the TIME_WAIT is its and not one of
    // this agent's ports (see `Conn::linger`). An abort does not wait.
    if let Some(c) = conn {
        tokio::select! {
            _ = c.linger(LINGER) => {}
            _ = ctx.cancel.cancelled() => {}
        }
    }
}

/// The concurrency model: request after request on one connection, reconnecting after failures.
async fn closed_loop(ctx: &Ctx) {
    let mut conn: Option<Conn> = None;
    while !ctx.past_deadline() {
        if conn.is_none() {
            match ctx.connect().await {
                Ok(c) => conn = Some(c),
                Err(class) if class.is_generator_resource() => {
                    // Out of fds or ports: they do not come back within microseconds, and retrying
                    // at once would only count the same failure thousands of times.
                    tokio::time::sleep(RESOURCE_BACKOFF).await;
                    continue;
                }
                Err(_) => {
                    // Refused at once means a spin; yield so the ticker and drain still run.
                    tokio::task::yield_now().await;
                    continue;
                }
            }
            // A connect that finished after the deadline sends nothing more.
            if ctx.past_deadline() {
                return;
            }
        }
        let left = ctx.budget.get();
        if left == 0 {
            return;
        }
        ctx.budget.set(left - 1);
        conn = ctx.request(conn.take(), Instant::now(), false).await.0;
    }
}

/// The requests model's keep-alive pool: arrivals queue here and slots (connections) take them;
/// a new slot opens while fewer than `max` exist and none is idle.
struct Pool {
    /// (intended, queued at, found no free connection).
    queue: RefCell<VecDeque<(Instant, Instant, bool)>>,
    max: usize,
    slots: Cell<usize>,
    idle: Cell<usize>,
    wake: Notify,
    closed: Cell<bool>,
}

impl Pool {
    fn new(max: usize) -> Pool {
        Pool {
            queue: RefCell::new(VecDeque::new()),
            max,
            slots: Cell::new(0),
            idle: Cell::new(0),
            wake: Notify::new(),
            closed: Cell::new(false),
        }
    }

    fn arrive(self: Rc<Self>, ctx: &Rc<Ctx>, intended: Instant) {
        let now = Instant::now();
        if self.idle.get() > 0 {
            self.queue.borrow_mut().push_back((intended, now, false));
            // Claimed here, so the next arrival does not count on the same idle slot.
            self.idle.set(self.idle.get() - 1);
            self.wake.notify_one();
        } else if self.slots.get() < self.max {
            self.queue.borrow_mut().push_back((intended, now, false));
            self.slots.set(self.slots.get() + 1);
            let task_ctx = ctx.clone();
            spawn_tracked(ctx, async move { self.slot(&task_ctx).await });
        } else {
            // Every slot is busy: this arrival waits, and its wait is recorded when a slot takes it.
            self.queue.borrow_mut().push_back((intended, now, true));
            ctx.rec.with(|s| s.counters.waited += 1);
        }
    }

    fn close(&self) {
        self.closed.set(true);
        self.wake.notify_waiters();
    }

    /// Arrivals still waiting for a connection when the step ends are not sent: counted as unsent and
    /// dropped (k6's dropped iterations), never sent after the step.
    fn drop_waiting(&self, ctx: &Ctx, all: bool) {
        let mut q = self.queue.borrow_mut();
        let before = q.len();
        // Each was due at its intended time and is given up now: its age is a lower bound of its
        // latency.
        let now = Instant::now();
        q.retain(|(intended, _, waiting)| {
            let drop = all || *waiting;
            if drop {
                ctx.rec.given_up(now.saturating_duration_since(*intended));
            }
            !drop
        });
        let dropped = (before - q.len()) as u64;
        if dropped > 0 {
            ctx.rec.with(|s| {
                s.counters.unsent += dropped;
                s.counters.dropped += dropped;
            });
        }
    }

    async fn slot(&self, ctx: &Ctx) {
        let mut conn: Option<Conn> = None;
        loop {
            if ctx.cancel.is_cancelled() {
                self.drop_waiting(ctx, true);
                return;
            }
            if ctx.past_deadline() {
                self.drop_waiting(ctx, false);
            }
            let next = self.queue.borrow_mut().pop_front();
            let Some((intended, queued, _)) = next else {
                if self.closed.get() {
                    return;
                }
                self.idle.set(self.idle.get() + 1);
                let woken = self.wake.notified();
                tokio::select! {
                    _ = woken => {}
                    _ = ctx.cancel.cancelled() => {}
                }
                continue;
            };
            ctx.rec.wait(queued.elapsed(), false);
            // Its reply could no longer arrive within the timeout of its intended send.
            let now = Instant::now();
            if now >= intended + ctx.target.timeout {
                ctx.rec.unsent(ErrorClass::ClientTimeout);
                ctx.rec.given_up(now - intended);
                continue;
            }
            conn = ctx.request(conn.take(), intended, false).await.0;
        }
    }
}
