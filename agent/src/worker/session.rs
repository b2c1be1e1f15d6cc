//! The connections model's sessions (httperf's `--wsesslog`): each arrival runs one session of the
//! log on one connection, burst after burst: the burst's first request, then its others once that
//! reply is in (in turn over HTTP/1.1, as httperf sends them on one connection; as concurrent
//! streams over HTTP/2), then the think time. Every request counts from when it was due: the
//! session's first from the arrival's intended instant, a later burst's first from the previous
//! burst's end plus its think time, a burst's others from their first's reply. A session's length
//! runs from its intended start to its last reply, so a request the server holds up lengthens its
//! session by as much, and a session the generator began late is charged from when it was due
//! (coordinated omission corrected).
use std::rc::Rc;
use std::sync::Arc;

use shared::metrics::ErrorClass;
use shared::plan::{Session, SessionBurst, Sessions, Slice};
use tokio::time::{Instant, sleep_until};

use super::{Ctx, Job, abandon, open_loop, over_socket_cap, spawn_tracked};
use crate::client::{Connection, Request, Sent, Unsent};
use crate::timer::Timer;

/// Dispatches this worker's arrivals, each a session: the fleet's arrival `g` (its index in the
/// whole step) runs the log's session `g % len`, so the fleet sends the log's sessions in
/// turn, each once a round.
pub(super) async fn load(ctx: &Rc<Ctx>, timer: &Timer, job: &Job, slice: &Slice) {
    let Some(sessions) = ctx.target.sessions.clone() else {
        return;
    };
    open_loop(ctx, timer, &job.share, slice, job.start, |intended, g| {
        let requests = sessions.of_arrival(g).requests() as u32;
        let slot = match &job.caps.sockets {
            None => None,
            Some(cap) => match cap.take() {
                Some(slot) => Some(slot),
                None => return over_socket_cap(ctx, requests, cap.max),
            },
        };
        let (task_ctx, sessions) = (ctx.clone(), sessions.clone());
        spawn_tracked(ctx, async move {
            // Given back once the session's connection is closed.
            let _slot = slot;
            run(&task_ctx, &sessions, g, intended).await
        });
    })
    .await;
}

/// How a session ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    /// Every request had a reply.
    Completed,
    /// A request failed (`None`: with its connection, the target's doing; else unsent, in its
    /// class): the session's later requests are abandoned, as httperf fails the session.
    Failed(Option<ErrorClass>),
    /// Its next burst was due more than a timeout past the step's end (or the step was stopped):
    /// its later requests were never due.
    Cut,
}

/// Runs the session arrival `g` brings, due at `intended`, on one connection (reopened if the
/// server closes it between requests, as httperf does).
async fn run(ctx: &Rc<Ctx>, sessions: &Arc<Sessions>, g: u64, intended: Instant) {
    let session = sessions.of_arrival(g);
    ctx.rec.with(|s| s.counters.sessions_started += 1);
    let conn = Rc::new(Connection::new(&ctx.target));
    let (end, sent) = bursts(ctx, &conn, session, intended).await;
    match end {
        End::Completed => {
            let length = intended.elapsed().as_micros().min(u128::from(u64::MAX)) as u64;
            ctx.rec.with(|s| {
                s.counters.sessions_completed += 1;
                s.hist.session.saturating_record(length);
            });
            // Its last request asked the server to close: let it, so the TIME_WAIT is the
            // server's (see `Connection::linger`). An abort does not wait.
            tokio::select! {
                _ = conn.linger(ctx.lingering.bound()) => {}
                _ = ctx.cancel.cancelled() => {}
            }
        }
        End::Failed(unsent) => {
            ctx.rec.with(|s| s.counters.sessions_abandoned += 1);
            abandon(ctx, (session.requests() - sent) as u64, unsent);
        }
        End::Cut => {}
    }
}

/// The session's bursts in order: how it ended, and how many of its requests were counted (sent,
/// or unsent in a class).
async fn bursts(
    ctx: &Rc<Ctx>,
    conn: &Rc<Connection>,
    session: &Session,
    intended: Instant,
) -> (End, usize) {
    // A burst may begin in the step's drain, as a call of a connection in flight would be sent,
    // but no later than a timeout past the end: the coordinator waits that long for the step.
    let horizon = ctx.deadline + ctx.target.timeout;
    let mut due = intended;
    let mut sent = 0;
    let last = session.bursts().len() - 1;
    for (i, burst) in session.bursts().iter().enumerate() {
        if i > 0 {
            if due >= horizon || ctx.cancel.is_cancelled() {
                return (End::Cut, sent);
            }
            tokio::select! {
                _ = sleep_until(due) => {}
                _ = ctx.cancel.cancelled() => return (End::Cut, sent),
            }
        }
        let (outcome, counted) = one_burst(ctx, conn, burst, due, i == last).await;
        sent += counted;
        if let Some(unsent) = outcome {
            return (End::Failed(unsent), sent);
        }
        due = Instant::now() + burst.think();
    }
    (End::Completed, sent)
}

/// One burst: its first request due at `due`, then the others once that reply is in. Returns how
/// many of its requests were counted and, if one failed, how (see [`End::Failed`]).
async fn one_burst(
    ctx: &Rc<Ctx>,
    conn: &Rc<Connection>,
    burst: &SessionBurst,
    due: Instant,
    last_burst: bool,
) -> (Option<Option<ErrorClass>>, usize) {
    let requests = burst.requests();
    let n = requests.len();
    // Only the session's very last request asks the server to close.
    let is_last = |k: usize| last_burst && k == n - 1;
    if let Some(failed) = send(ctx, conn, requests[0], due, is_last(0)).await {
        return (Some(failed), 1);
    }
    if n == 1 {
        return (None, 1);
    }
    let after_first = Instant::now();
    if matches!(**conn, Connection::Http1(_)) {
        // One request at a time on the connection: each due as the one before it is answered.
        for (k, &index) in requests.iter().enumerate().skip(1) {
            let from = if k == 1 { after_first } else { Instant::now() };
            if let Some(failed) = send(ctx, conn, index, from, is_last(k)).await {
                return (Some(failed), k + 1);
            }
        }
        return (None, n);
    }
    // HTTP/2: the burst's others at once, as streams of the session's connection, whatever
    // `--streams` says (a browser's page does not wait for its images one by one); each waits for
    // a slot under the server's limit inside `send`.
    let mut streams = tokio::task::JoinSet::new();
    for &index in &requests[1..] {
        let (ctx, conn) = (ctx.clone(), conn.clone());
        streams.spawn_local(async move { send(&ctx, &conn, index, after_first, false).await });
    }
    let mut failed = None;
    while let Some(done) = streams.join_next().await {
        if let Ok(Some(f)) = done {
            failed.get_or_insert(f);
        }
    }
    (failed, n)
}

/// Sends the workload's request `index`, due at `intended`: `None` when it had a reply (whatever
/// its status, as httperf counts a session's calls), else how it failed.
async fn send(
    ctx: &Ctx,
    conn: &Connection,
    index: u16,
    intended: Instant,
    last: bool,
) -> Option<Option<ErrorClass>> {
    let req = Request {
        template: ctx.template(index),
        intended,
        last,
        queued: None,
        // A session log's requests are sent as written: no variables.
        fill: None,
    };
    match conn.send(&ctx.target, &ctx.rec, req).await {
        Ok(Sent::Kept) => None,
        Ok(Sent::Failed | Sent::Lost) => Some(None),
        Err(Unsent(class)) => Some(Some(class)),
    }
}

#[cfg(test)]
mod tests;
