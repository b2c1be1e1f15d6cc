//! The seam the load models send through: a connection of `slots` (one over HTTP/1.1, `--streams`
//! over HTTP/2) and one `send` of a request due at its intended time. Below it each protocol keeps
//! its own waits and resends: a kept-alive HTTP/1.1 connection the server had closed is reopened and
//! the request sent once more; an HTTP/2 stream waits for a slot under the server's limit, and one
//! the server did not process (above a GOAWAY, REFUSED_STREAM) goes again on a fresh connection.
//!
//! A request is counted here as it is: sent once, unsent, failed, given up, its queue wait. An enum,
//! not a trait object: the hot path pays a match, no box and no virtual call per request.
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::Duration;

use shared::metrics::ErrorClass;
use tokio::sync::Notify;
use tokio::time::Instant;

use super::failure::SendError;
use super::render::Fill;
use super::target::{Endpoint, Template};
use super::{http1, http2};
use crate::recorder::{Name, Recorder};

/// A connection as the load models see it: `slots` requests at once, reopened as it must be.
pub enum Connection {
    Http1(Keepalive),
    Http2(Multiplexed),
}

/// One request as a load model hands it over.
#[derive(Clone, Copy)]
pub struct Request<'a> {
    pub template: &'a Template,
    /// When it was due: its latency counts from here.
    pub intended: Instant,
    /// No other request follows on this connection (HTTP/1.1 then asks the server to close).
    pub last: bool,
    /// When it joined the requests model's queue, and whether the queue counted it as waiting (it
    /// found every slot busy); its wait is recorded once, with any wait for a stream slot added.
    pub queued: Option<(Instant, bool)>,
    /// What its `${var}` are filled with (a template with variables only; `None` for fixed bytes).
    pub fill: Option<&'a Fill>,
}

/// A request written to its connection (counted as sent): whether its connection goes on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sent {
    /// Answered: the connection takes the next request.
    Kept,
    /// Failed alone (an HTTP/2 stream reset or timed out): the connection takes the next request.
    Failed,
    /// Failed with its connection: a connections-model connection's later calls go with it.
    Lost,
}

/// Why a due request was not written, already counted as unsent (or as failed, see `send`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unsent(pub ErrorClass);

impl Connection {
    /// A connection to `target`, not yet open: the first `open` or `send` connects.
    pub fn new(target: &Endpoint) -> Connection {
        if target.http2 {
            Connection::Http2(Multiplexed {
                streams: target.streams,
                ..Multiplexed::default()
            })
        } else {
            Connection::Http1(Keepalive::default())
        }
    }

    /// Requests it carries at once.
    pub fn slots(&self) -> u32 {
        match self {
            Connection::Http1(_) => 1,
            Connection::Http2(m) => m.streams,
        }
    }

    /// Whether it is open and can take a request now (`open` would do nothing). Asked before
    /// `open` on the hot path: `open`'s future holds a whole connect, too large to build and move
    /// for every request only to find the connection open.
    pub fn is_open(&self) -> bool {
        match self {
            Connection::Http1(k) => k.conn.borrow().is_some(),
            Connection::Http2(m) => m.now.borrow().as_ref().is_some_and(|c| !c.ended()),
        }
    }

    /// Opens it unless it is open. A failure is counted as the turn's request, unsent, in its class.
    pub async fn open(&self, target: &Endpoint, rec: &Rc<Recorder>) -> Result<(), ErrorClass> {
        match self {
            Connection::Http1(k) => k.open(target, rec).await,
            // Boxed: an HTTP/2 open is a future of 1.5 KB that an HTTP/1.1 connection's task
            // would otherwise carry (and move) too.
            Connection::Http2(m) => Box::pin(m.current(target, rec))
                .await
                .map(drop)
                .inspect_err(|class| rec.unsent(None, *class)),
        }
    }

    /// Sends one due request and reads its reply, opening the connection first if it must and
    /// sending once more what the server did not take. Counted once whatever happens.
    pub async fn send(
        &self,
        target: &Endpoint,
        rec: &Rc<Recorder>,
        req: Request<'_>,
    ) -> Result<Sent, Unsent> {
        match self {
            Connection::Http1(k) => k.send(target, rec, req).await,
            Connection::Http2(m) => {
                // No setup over HTTP/2 (refused at configure): only the row fills it.
                let rendered = render(target, rec, &req, &[])?;
                let req = Request {
                    template: rendered.as_ref().unwrap_or(req.template),
                    ..req
                };
                m.send(target, rec, req).await
            }
        }
    }

    /// After the last reply of a connection the server closes: lets it close first (see
    /// `http1::Conn::linger`). Nothing to wait for over HTTP/2.
    pub async fn linger(&self, bound: impl std::future::Future<Output = ()>) {
        if let Connection::Http1(k) = self {
            let conn = k.conn.take();
            if let Some(c) = conn {
                c.linger(bound).await;
            }
        }
    }
}

/// A request with variables rendered with its row and its connection's setup values (`None`: it
/// has none, its bytes are sent as compiled); one whose values would break it is counted unsent in
/// `other`, in words naming the variable, and never written.
fn render(
    target: &Endpoint,
    rec: &Recorder,
    req: &Request<'_>,
    extracted: &[Vec<u8>],
) -> Result<Option<Template>, Unsent> {
    match req
        .template
        .rendered(target, req.fill, extracted, req.last)
        .transpose()
    {
        Ok(t) => Ok(t),
        Err(refused) => {
            rec.note(ErrorClass::Other, || refused.0.into());
            rec.unsent(Some(req.template.index), ErrorClass::Other);
            Err(Unsent(ErrorClass::Other))
        }
    }
}

/// An HTTP/1.1 connection kept alive between requests, reopened after the server closed it.
#[derive(Default)]
pub struct Keepalive {
    conn: RefCell<Option<http1::Conn>>,
    /// The setup's values for the connection open now; `None` until its setup ran.
    extracted: RefCell<Option<Vec<Vec<u8>>>>,
}

impl Keepalive {
    async fn open(&self, target: &Endpoint, rec: &Rc<Recorder>) -> Result<(), ErrorClass> {
        if self.conn.borrow().is_none() {
            let c = connect(target, rec, None).await?;
            *self.conn.borrow_mut() = Some(c);
            self.extracted.take();
        }
        Ok(())
    }

    /// Runs the setup on `c` unless it ran on it: a failure is counted as the request's (unsent, in
    /// its class, in words saying the setup failed) and the connection is dropped, so the next
    /// request opens another and tries again.
    async fn set_up(
        &self,
        target: &Endpoint,
        rec: &Recorder,
        c: &mut http1::Conn,
        req: &Request<'_>,
    ) -> Result<(), Unsent> {
        let Some(setup) = &target.setup else {
            return Ok(());
        };
        if self.extracted.borrow().is_some() {
            return Ok(());
        }
        // Boxed: only a plan with a setup pays for its future's size, not every request's.
        let ran = Box::pin(super::setup::run(setup, target, c, req.fill)).await;
        rec.with(|s| {
            s.counters.setups += 1;
            s.counters.setup_failed += u64::from(ran.is_err());
        });
        match ran {
            Ok(values) => {
                *self.extracted.borrow_mut() = Some(values);
                Ok(())
            }
            Err(super::setup::Failed(class, words)) => {
                rec.note(class, || words.into());
                rec.unsent(Some(req.template.index), class);
                Err(Unsent(class))
            }
        }
    }

    /// Connects first if needed, and reconnects once if the server had closed the kept-alive
    /// connection. A failure before writing is counted as unsent, and `Unsent` says why.
    async fn send(
        &self,
        target: &Endpoint,
        rec: &Rc<Recorder>,
        req: Request<'_>,
    ) -> Result<Sent, Unsent> {
        if let Some((queued, _)) = req.queued {
            rec.wait(queued.elapsed(), false);
        }
        // Counted as sent once, by the attempt that first wrote it; taken back only if no attempt
        // reached the server, when it is counted unsent instead.
        let counted = Cell::new(false);
        let name = req.template.index;
        let take_back = || {
            if counted.get() {
                rec.unsend(name);
            }
        };
        for attempt in 0..2 {
            // The kept-alive connection first; one that went stale is not put back.
            let mut c = match self.conn.take() {
                Some(c) => c,
                None => match connect(target, rec, Some(name)).await {
                    Ok(c) => {
                        self.extracted.take();
                        c
                    }
                    Err(class) => {
                        give_up_connecting(rec, Some(name), class, req.intended);
                        take_back();
                        return Err(Unsent(class));
                    }
                },
            };
            // A failed setup leaves no values behind (it ran only where there were none).
            if let Err(unsent) = self.set_up(target, rec, &mut c, &req).await {
                take_back();
                return Err(unsent);
            }
            let rendered = {
                let extracted = self.extracted.borrow();
                let values = extracted.as_deref().unwrap_or_default();
                match render(target, rec, &req, values) {
                    Ok(r) => r,
                    Err(unsent) => {
                        *self.conn.borrow_mut() = Some(c);
                        take_back();
                        return Err(unsent);
                    }
                }
            };
            let t = rendered.as_ref().unwrap_or(req.template);
            let timeout = target.timeout;
            match c
                .send(t, req.last, req.intended, timeout, rec, &counted)
                .await
            {
                Ok(()) => {
                    *self.conn.borrow_mut() = Some(c);
                    return Ok(Sent::Kept);
                }
                Err(SendError::Failed(class)) => {
                    rec.error(Some(name), class);
                    return Ok(Sent::Lost);
                }
                // A connect found failed by its first write: counted as one found by `connect`.
                Err(SendError::Connect(class)) => {
                    give_up_connecting(rec, Some(name), class, req.intended);
                    take_back();
                    rec.unsent(Some(name), class);
                    return Err(Unsent(class));
                }
                Err(SendError::Stale) if attempt == 0 => continue,
                Err(SendError::Stale) => break,
                // Not an HTTP/1.1 outcome (it has no stream slots), counted as any unsent.
                Err(SendError::Unsent(class)) => {
                    take_back();
                    rec.unsent(Some(name), class);
                    return Err(Unsent(class));
                }
            }
        }
        // A fresh connection that closes before it can take a request.
        take_back();
        rec.unsent(Some(name), ErrorClass::ConnReset);
        Err(Unsent(ErrorClass::ConnReset))
    }
}

/// A connect given up waiting for the server to accept: a lower bound of the request's latency.
fn give_up_connecting(rec: &Recorder, name: Name, class: ErrorClass, intended: Instant) {
    if class == ErrorClass::ConnectTimeout {
        rec.given_up(name, intended.elapsed());
    }
}

/// Connects; a failure is counted as the request `name` (if one is waiting) unsent.
async fn connect(
    target: &Endpoint,
    rec: &Rc<Recorder>,
    name: Name,
) -> Result<http1::Conn, ErrorClass> {
    http1::Conn::open(target, rec)
        .await
        .inspect_err(|class| rec.unsent(name, *class))
}

/// An HTTP/2 connection shared by the slots whose streams it carries (`--streams`), opened by the
/// first of them to need it and again after it ended; the others wait for that open rather than each
/// opening a connection of its own.
///
/// An open that fails fails for the slots that waited for it too, in its class: they do not each
/// try a connection of their own (M connects where the server refused one).
#[derive(Default)]
pub struct Multiplexed {
    streams: u32,
    now: RefCell<Option<Rc<http2::Conn>>>,
    opening: Cell<bool>,
    opened: Notify,
    /// Opens ended so far, and how the last one failed (`None`: it did not).
    opens: Cell<u64>,
    failed: Cell<Option<ErrorClass>>,
}

impl Multiplexed {
    /// The connection open now, opened first if there is none or it ended.
    async fn current(
        &self,
        target: &Endpoint,
        rec: &Rc<Recorder>,
    ) -> Result<Rc<http2::Conn>, ErrorClass> {
        loop {
            if let Some(s) = self.now.borrow().as_ref() {
                if !s.ended() {
                    return Ok(s.clone());
                }
                s.count_end(rec);
            }
            if self.opening.get() {
                let before = self.opens.get();
                self.opened.notified().await;
                if self.opens.get() != before
                    && let Some(class) = self.failed.get()
                {
                    return Err(class);
                }
                continue;
            }
            self.opening.set(true);
            // Cleared however the open ends, a cancelled one too, so no waiter is left behind.
            let _open = Opening(self);
            self.failed.set(None);
            let opened = http2::Conn::open(target, rec).await;
            self.failed.set(opened.as_ref().err().copied());
            let conn = Rc::new(opened?);
            *self.now.borrow_mut() = Some(conn.clone());
            return Ok(conn);
        }
    }

    /// Sends one due request on a stream of the shared connection, opening it first if it has none
    /// or it ended, and sending once more on a fresh one what the server did not process (see
    /// `client::http2`). The stream's wait for a slot under the server's limit is added to the
    /// request's wait in the queue, so an arrival's wait is recorded once.
    async fn send(
        &self,
        target: &Endpoint,
        rec: &Rc<Recorder>,
        req: Request<'_>,
    ) -> Result<Sent, Unsent> {
        let queued = req.queued.map(|(at, counted)| (at.elapsed(), counted));
        let mut outcome = None;
        // What its attempts share: its waits for a stream slot, on each connection it was tried
        // on, and whether it was counted as sent (once, as its first stream opened).
        let tries = http2::Tries::default();
        for _ in 0..2 {
            let conn = match self.current(target, rec).await {
                Ok(c) => c,
                Err(class) => {
                    give_up_connecting(rec, Some(req.template.index), class, req.intended);
                    outcome = Some(Err(Unsent(class)));
                    break;
                }
            };
            let (t, timeout) = (req.template, target.timeout);
            match conn.send(t, req.intended, timeout, rec, &tries).await {
                Ok(()) => {
                    outcome = Some(Ok(Sent::Kept));
                    break;
                }
                Err(SendError::Failed(class)) => {
                    rec.error(Some(req.template.index), class);
                    outcome = Some(Ok(Sent::Failed));
                    break;
                }
                // Timed out waiting for a stream slot: its wait is recorded below, as waited, and
                // it is counted unsent. (HTTP/2 connections are waited for as they open: no
                // `Connect` comes from them.)
                Err(SendError::Unsent(class) | SendError::Connect(class)) => {
                    outcome = Some(Err(Unsent(class)));
                    break;
                }
                Err(SendError::Stale) => continue,
            }
        }
        // Every attempt was left unprocessed (refused, above a GOAWAY, on a connection that ended).
        let spent = outcome.is_none();
        let outcome = outcome.unwrap_or(Err(Unsent(ErrorClass::ConnReset)));
        record_wait(rec, queued, tries.waited.get());
        if let Err(Unsent(class)) = outcome {
            self.unsent(target, rec, &tries, (req.template.index, class), spent);
        }
        outcome
    }

    /// A request none of whose attempts was answered or failed: unsent, or failed if a stream of
    /// it reached the server.
    fn unsent(
        &self,
        target: &Endpoint,
        rec: &Recorder,
        tries: &http2::Tries,
        (name, class): (u16, ErrorClass),
        spent: bool,
    ) {
        if !tries.counted.get() {
            rec.unsent(Some(name), class);
            return;
        }
        // A stream of it reached the server, which refused it (or left it above its GOAWAY) and
        // then took none of its attempts: sent, as it was counted when it left, and failed. Not
        // taken back and counted unsent: the interval that counted it may be reported already,
        // and at the step's end no later send is left to take it back from, so it was due twice.
        if spent && tries.refused.get() {
            rec.note(class, || {
                format!(
                    "{} refused the stream (REFUSED_STREAM) and again when it was sent once more: the server took none of it",
                    target.addr
                )
                .into()
            });
        }
        rec.error(Some(name), class);
    }
}

/// However a request ended (a timed-out stream too, after it opened), its wait for a slot is
/// recorded: its time in the requests model's queue (`queued`, and whether the queue counted it as
/// waiting) and its streams' waits under the server's limit (`streams`), once.
fn record_wait(rec: &Recorder, queued: Option<(Duration, bool)>, streams: Option<Duration>) {
    match queued {
        Some((d, counted)) => rec.wait(
            d + streams.unwrap_or_default(),
            !counted && streams.is_some(),
        ),
        None => {
            if let Some(w) = streams {
                rec.wait(w, true);
            }
        }
    }
}

/// A connection being opened; its end wakes the slots waiting for it.
struct Opening<'a>(&'a Multiplexed);

impl Drop for Opening<'_> {
    fn drop(&mut self) {
        self.0.opening.set(false);
        self.0.opens.set(self.0.opens.get() + 1);
        self.0.opened.notify_waiters();
    }
}
