//! The requests model's keep-alive pool: open arrivals queue for the slots of a few kept-alive
//! connections, and what waits is the client's queue, recorded apart from the server's time.
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::Rc;

use shared::metrics::ErrorClass;
use tokio::sync::Notify;
use tokio::time::Instant;

use super::{Ctx, spawn_tracked};
use crate::client::{Connection, Endpoint, Request};

/// The requests model's keep-alive pool: arrivals queue here and slots take them; a new slot opens
/// while fewer than `max` exist and none is idle.
///
/// A slot is one of a connection's: `max` is the connections' slots together (over HTTP/2 a slot is
/// a stream, `--streams` to a connection), so an arrival that finds every slot busy waits here, and
/// that wait is the client's queue (recorded apart from the latency), not the server's time.
pub(super) struct Pool {
    queue: RefCell<VecDeque<Arrival>>,
    max: usize,
    slots: Cell<usize>,
    idle: Cell<usize>,
    wake: Notify,
    closed: Cell<bool>,
    /// The connections the slots are of, `per` slots to each, opened as their first slot is.
    connections: RefCell<Vec<Rc<Connection>>>,
    per: usize,
}

/// An arrival waiting for a slot.
struct Arrival {
    intended: Instant,
    queued: Instant,
    /// It found no free connection.
    waiting: bool,
    /// The request it sends, chosen as it arrived.
    index: u16,
    /// Its index in the whole step (`${counter()}`).
    arrival: u64,
}

impl Pool {
    /// A pool of `connections` to `target`, with all their slots.
    pub(super) fn new(connections: usize, target: &Endpoint) -> Pool {
        let first = Connection::new(target);
        let per = first.slots() as usize;
        Pool {
            queue: RefCell::new(VecDeque::new()),
            max: connections * per,
            slots: Cell::new(0),
            idle: Cell::new(0),
            wake: Notify::new(),
            closed: Cell::new(false),
            connections: RefCell::new(vec![Rc::new(first)]),
            per,
        }
    }

    /// The connection slot `n` (from 0) is one of.
    fn connection_of(&self, n: usize, target: &Endpoint) -> Rc<Connection> {
        let mut connections = self.connections.borrow_mut();
        let i = n / self.per;
        while connections.len() <= i {
            connections.push(Rc::new(Connection::new(target)));
        }
        connections[i].clone()
    }

    /// An arrival of the step's `arrival`-th request (its index in the whole step).
    pub(super) fn arrive(self: Rc<Self>, ctx: &Rc<Ctx>, intended: Instant, arrival: u64) {
        let now = Instant::now();
        let mut a = Arrival {
            intended,
            queued: now,
            waiting: false,
            index: ctx.pick(arrival),
            arrival,
        };
        if self.idle.get() > 0 {
            self.queue.borrow_mut().push_back(a);
            // Claimed here, so the next arrival does not count on the same idle slot.
            self.idle.set(self.idle.get() - 1);
            self.wake.notify_one();
        } else if self.slots.get() < self.max {
            self.queue.borrow_mut().push_back(a);
            let conn = self.connection_of(self.slots.get(), &ctx.target);
            self.slots.set(self.slots.get() + 1);
            let task_ctx = ctx.clone();
            spawn_tracked(ctx, async move { self.slot(&task_ctx, &conn).await });
        } else {
            // Every slot is busy: this arrival waits, and its wait is recorded when a slot takes it.
            a.waiting = true;
            self.queue.borrow_mut().push_back(a);
            ctx.rec.with(|s| s.counters.waited += 1);
        }
    }

    pub(super) fn close(&self) {
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
        q.retain(|a| {
            let drop = all || a.waiting;
            if drop {
                ctx.rec
                    .given_up(Some(a.index), now.saturating_duration_since(a.intended));
                ctx.rec.on_name(a.index, |r| r.counters.unsent += 1);
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

    async fn slot(&self, ctx: &Ctx, conn: &Connection) {
        loop {
            if ctx.cancel.is_cancelled() {
                self.drop_waiting(ctx, true);
                return;
            }
            if ctx.past_deadline() {
                self.drop_waiting(ctx, false);
            }
            let next = self.queue.borrow_mut().pop_front();
            let Some(Arrival {
                intended,
                queued,
                waiting,
                index,
                arrival,
            }) = next
            else {
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
            // Its reply could no longer arrive within the timeout of its intended send.
            let now = Instant::now();
            if now >= intended + ctx.target.timeout {
                ctx.rec.wait(queued.elapsed(), false);
                ctx.rec.unsent(Some(index), ErrorClass::ClientTimeout);
                ctx.rec.given_up(Some(index), now - intended);
                continue;
            }
            let template = ctx.template(index);
            let Ok(fill) = ctx.fill(template, arrival) else {
                ctx.rec.wait(queued.elapsed(), false);
                continue;
            };
            let req = Request {
                template,
                intended,
                last: false,
                queued: Some((queued, waiting)),
                fill: fill.as_ref(),
            };
            let _ = conn.send(&ctx.target, &ctx.rec, req).await;
        }
    }
}
