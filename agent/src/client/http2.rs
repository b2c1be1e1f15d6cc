//! The HTTP/2 exchange, stampede's own: a connection (`Conn`: h2c with prior knowledge over TCP, h2
//! by ALPN over TLS), its frames read and written by a driver task of its own on the worker's
//! thread, and streams opened on it by any number of slots at once, a request each.
//!
//! It is written for the hot path as the HTTP/1.1 client is: a request is its header block encoded
//! once per template plus a nine-byte frame header, queued into the connection's one write buffer;
//! the driver writes every stream's request in one call and reads every reply that has come in one
//! call, so ten streams on a connection cost about two system calls between them, not ten tasks'
//! worth of channels and header maps (what a general client such as h2 costs per request).
//!
//! The server's SETTINGS are known before the first stream opens (a PING answered after them ends
//! the set-up), so stampede never opens more streams than SETTINGS_MAX_CONCURRENT_STREAMS allows: a
//! stream past it waits for a slot, in order. That wait is the client's queue, not the server's
//! time: it is returned to the caller, to be reported apart (the step's queue wait).
//!
//! A request the server did not process is `SendError::Stale`, as a request on a closed HTTP/1.1
//! connection is, and is sent again on a fresh connection: a stream above a GOAWAY's last stream id
//! (RFC 9113 6.8), a stream refused (REFUSED_STREAM, 8.7), a request on a connection that had ended.
//!
//! Before any load, the configure step's `preflight` asks the target once whether it speaks HTTP/2
//! as asked (or, for `--http auto` over TLS, which HTTP its ALPN chose).
//!
//! Below: `frame` (the frame layout and names), `hpack` (header blocks), `conn` (a connection's
//! state, without I/O, which the fuzz target drives).
pub mod conn;
pub mod frame;
pub mod hpack;

use std::borrow::Cow;
use std::cell::{Cell, RefCell};
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};
use std::time::Duration;

use shared::metrics::{ErrorClass, UNLIMITED_STREAMS};
use shared::plan::{HttpVersion, Scheme, Workload};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Instant;

use self::conn::{Closed, State, StreamEnd};
use super::failure::{SendError, io_class};
use super::target::{Endpoint, PrepareError, Template};
use super::transport::{self, Stream};
use crate::recorder::Recorder;

/// The driver's read buffer: room for several whole frames of the largest size.
const READ_BUFFER: usize = 64 * 1024;
/// Once its `Conn` is dropped and no stream is open, the most a connection waits for the last of
/// its output to be written: a server that never reads must not keep it (and what it queued) past
/// the step that opened it.
const CLOSE_GRACE: Duration = Duration::from_secs(1);

/// One HTTP/2 connection. Streams are opened on it by any number of slots of the worker's thread at
/// once.
pub struct Conn {
    conn: Rc<RefCell<State>>,
    peer: SocketAddr,
    /// Streams asked of it so far.
    opened: Cell<u64>,
    /// Its GOAWAY is counted, once, by the first stream to see it.
    goaway_counted: Cell<bool>,
}

/// What a request's attempts share (a stream the server did not process is sent again, on a fresh
/// connection), for its caller to record once.
#[derive(Debug, Default)]
pub struct Tries {
    /// Its waits for a free slot under the server's stream limit, added up; `None` if it never
    /// waited.
    pub waited: Cell<Option<Duration>>,
    /// It was counted as sent, when its first stream opened: a resend is not counted again, so its
    /// count stays in the interval it left in.
    pub counted: Cell<bool>,
    /// Its last attempt's stream was refused (REFUSED_STREAM): if no attempt is left, that is why
    /// it failed, and its words say so.
    pub refused: Cell<bool>,
}

/// Why a connection could not be set up, in the words its failure class is noted with.
#[derive(Debug)]
pub(super) struct SetupError {
    pub(super) class: ErrorClass,
    pub(super) words: Cow<'static, str>,
}

impl Conn {
    /// Connects (TCP, then TLS if the target is https), says the HTTP/2 preface and waits for the
    /// server's SETTINGS, all within the connect timeout; the connection's frames are then driven on
    /// this thread until it is dropped and its streams are done, or the connection ends.
    pub async fn open(target: &Endpoint, rec: &Rc<Recorder>) -> Result<Conn, ErrorClass> {
        let began = Instant::now();
        let io = transport::open(target, rec).await?;
        let left = target.connect_timeout.saturating_sub(began.elapsed());
        let (session, driver) = match start(io, target.addr) {
            Ok(started) => started,
            Err(e) => {
                rec.note(e.class, || e.words);
                return Err(e.class);
            }
        };
        tokio::task::spawn_local(driver);
        match tokio::time::timeout(left, session.set_up()).await {
            Ok(Ok(limit)) => {
                rec.with(|s| s.counters.saw_peer_max_streams(limit));
                Ok(session)
            }
            Ok(Err(e)) => {
                rec.note(e.class, || e.words);
                Err(e.class)
            }
            Err(_) => {
                rec.note(ErrorClass::ConnectTimeout, || {
                    format!(
                        "HTTP/2 session with {} not set up within {:?} (--connect-timeout): the server sent no SETTINGS",
                        target.addr, target.connect_timeout
                    )
                    .into()
                });
                Err(ErrorClass::ConnectTimeout)
            }
        }
    }

    /// Waits for the set-up to end: the server's SETTINGS applied, its stream limit returned.
    async fn set_up(&self) -> Result<u64, SetupError> {
        std::future::poll_fn(|cx| {
            let mut c = self.conn.borrow_mut();
            if let Some(closed) = &c.closed {
                return Poll::Ready(Err(setup_error(closed, &c, self.peer)));
            }
            if c.goaway.is_some() {
                return Poll::Ready(Err(SetupError {
                    class: ErrorClass::ConnReset,
                    words: goaway_words(&c, self.peer).into(),
                }));
            }
            if c.ready() {
                return Poll::Ready(match c.max_streams {
                    Some(0) => Err(SetupError {
                        class: ErrorClass::Other,
                        words: format!(
                            "{}'s HTTP/2 SETTINGS allow 0 concurrent streams (SETTINGS_MAX_CONCURRENT_STREAMS 0): it takes no requests",
                            self.peer
                        )
                        .into(),
                    }),
                    limit => Ok(limit.map_or(UNLIMITED_STREAMS, |n| {
                        u64::from(n).min(UNLIMITED_STREAMS)
                    })),
                });
            }
            c.wait_setup(cx.waker());
            Poll::Pending
        })
        .await
    }

    /// Whether the connection can open no more streams (it ended, or GOAWAY came).
    pub fn ended(&self) -> bool {
        self.conn.borrow().ended()
    }

    /// Counts why an ended connection ended, if a GOAWAY did it and no stream has counted it yet.
    pub fn count_end(&self, rec: &Recorder) {
        if self.conn.borrow().goaway.is_some() && !self.goaway_counted.replace(true) {
            rec.with(|s| s.counters.goaways += 1);
        }
    }

    /// Sends one request on a stream of its own and reads the whole reply (counted, not kept).
    /// Latency counts from `intended`; the reply must be complete within `timeout` of the moment the
    /// stream was asked for. The time the stream waited for a free slot under the server's stream
    /// limit, if it had to, is added to `tries.waited` however the stream ends (answered, failed,
    /// timed out, sent again), for the caller to record once; the request is counted as sent as its
    /// stream opens, unless an earlier attempt counted it.
    pub async fn send(
        &self,
        t: &Template,
        intended: Instant,
        timeout: Duration,
        rec: &Recorder,
        tries: &Tries,
    ) -> Result<(), SendError> {
        if self.ended() {
            self.count_end(rec);
            return Err(SendError::Stale);
        }
        let asked = Instant::now();
        self.opened.set(self.opened.get() + 1);
        // Whether this attempt's stream opened (and so reached the server, or was refused by it).
        let opened = Cell::new(false);
        let deadline = asked + timeout;
        let exchange = self.exchange(Attempt {
            t,
            asked,
            deadline,
            opened: &opened,
            tries,
            rec,
        });
        let outcome = tokio::time::timeout_at(deadline, exchange).await;
        self.take_counts(rec);
        match outcome {
            Ok(Ok((reply, opened_at))) => {
                rec.replied(
                    t.index,
                    reply.status,
                    reply.headers_at.saturating_duration_since(opened_at),
                    reply.done_at.saturating_duration_since(intended),
                );
                Ok(())
            }
            Ok(Err(end)) => {
                tries
                    .refused
                    .set(matches!(end, StreamEnd::Reset(frame::REFUSED_STREAM)));
                self.failed(end, rec)
            }
            Err(_) if !opened.get() => {
                add_wait(&tries.waited, asked.elapsed());
                Err(self.no_slot_in_time(t.index, intended, timeout, rec))
            }
            Err(_) => {
                // The stream is reset (CANCEL) as it is dropped: the connection goes on.
                rec.given_up(Some(t.index), intended.elapsed());
                let class = ErrorClass::ClientTimeout;
                rec.note(class, || {
                    format!("no complete reply within {timeout:?} (--timeout)").into()
                });
                Err(SendError::Failed(class))
            }
        }
    }

    /// Timed out still waiting for a slot under the server's stream limit: never written, so the
    /// queue's and not the server's, counted as an arrival that expired in the pool's queue is
    /// (unsent, given up at its age).
    fn no_slot_in_time(
        &self,
        name: u16,
        intended: Instant,
        timeout: Duration,
        rec: &Recorder,
    ) -> SendError {
        rec.given_up(Some(name), intended.elapsed());
        let class = ErrorClass::ClientTimeout;
        let limit = self.conn.borrow().max_streams.unwrap_or(0);
        rec.note(class, || {
            format!(
                "waited {timeout:?} (--timeout) for a free HTTP/2 stream under {}'s limit of {limit} (SETTINGS_MAX_CONCURRENT_STREAMS): never sent",
                self.peer
            )
            .into()
        });
        SendError::Unsent(class)
    }

    /// What the connection counted since (bytes of headers and bodies, window stalls), into the
    /// step's counters.
    fn take_counts(&self, rec: &Recorder) {
        let mut c = self.conn.borrow_mut();
        if c.header_bytes | c.body_bytes | c.stalls == 0 && c.stalled.is_zero() {
            return;
        }
        let (h, b, n, d) = (
            std::mem::take(&mut c.header_bytes),
            std::mem::take(&mut c.body_bytes),
            std::mem::take(&mut c.stalls),
            std::mem::take(&mut c.stalled),
        );
        rec.with(|s| {
            s.counters.header_bytes_in += h;
            s.counters.body_bytes_in += b;
            s.counters.window_stalls += n;
            s.counters.window_stall_us += d.as_micros() as u64;
        });
    }

    /// A stream that ended without its reply: sent again if the server never processed it (not
    /// counted again: `Tries::counted`), otherwise failed in its class and words.
    fn failed(&self, end: StreamEnd, rec: &Recorder) -> Result<(), SendError> {
        match end {
            StreamEnd::Reset(frame::REFUSED_STREAM) => {
                rec.with(|s| s.counters.refused_streams += 1);
                Err(SendError::Stale)
            }
            StreamEnd::AboveGoAway | StreamEnd::Unsent => {
                self.count_end(rec);
                Err(SendError::Stale)
            }
            // Not the server's reset, so not in `stream_resets`: the server broke the protocol on
            // the stream and stampede reset it, as it ends a session the server breaks.
            StreamEnd::ResetByUs { code, why } => {
                let class = ErrorClass::Other;
                rec.note(class, || {
                    format!(
                        "{} broke HTTP/2 on a stream ({why}): stampede reset it ({})",
                        self.peer,
                        frame::code_name(code)
                    )
                    .into()
                });
                Err(SendError::Failed(class))
            }
            StreamEnd::Flooded(how) => {
                let class = ErrorClass::Other;
                rec.note(class, || {
                    format!(
                        "{} flooded an HTTP/2 stream ({}): stampede reset it ({})",
                        self.peer,
                        how.words(),
                        frame::code_name(frame::ENHANCE_YOUR_CALM)
                    )
                    .into()
                });
                Err(SendError::Failed(class))
            }
            StreamEnd::Reset(code) => {
                rec.with(|s| s.counters.stream_resets += 1);
                let class = ErrorClass::ConnReset;
                rec.note(class, || {
                    format!(
                        "{} reset the stream ({})",
                        self.peer,
                        frame::code_name(code)
                    )
                    .into()
                });
                Err(SendError::Failed(class))
            }
            StreamEnd::Connection => self.cut_off(rec),
        }
    }

    /// A stream that ended with its connection, in the words of that end.
    fn cut_off(&self, rec: &Recorder) -> Result<(), SendError> {
        let c = self.conn.borrow();
        let (class, words): (ErrorClass, Cow<'static, str>) = match (&c.goaway, &c.closed) {
            // A stream cut off by the connection's end after the server's GOAWAY (abrupt,
            // with an error code) is the GOAWAY's doing: say so, and after how many
            // streams, which names the limit (keepalive_requests, 1,000).
            (Some(_), _) => (
                ErrorClass::ConnReset,
                format!(
                    "{} after {} streams, this one unanswered",
                    goaway_words(&c, self.peer),
                    self.opened.get()
                )
                .into(),
            ),
            // A stream ends with its connection only when the connection has closed.
            (None, closed) => closed_words(closed.as_ref().unwrap_or(&Closed::Done), self.peer),
        };
        let goaway = c.goaway.is_some();
        drop(c);
        if goaway {
            self.count_end(rec);
        }
        rec.note(class, || words);
        Err(SendError::Failed(class))
    }

    /// Opens a stream for `t`, waiting for a slot under the server's limit if it must (the wait
    /// added to `tries.waited`): its id, and when it opened.
    async fn open_stream(&self, attempt: Attempt<'_>) -> Result<(u32, Instant), StreamEnd> {
        let Attempt {
            t,
            asked,
            deadline,
            opened,
            tries,
            rec,
        } = attempt;
        let ticket = self.conn.borrow_mut().ticket();
        let mut queued = Queued {
            conn: &self.conn,
            ticket,
            waiting: false,
        };
        let opened = std::future::poll_fn(|cx| {
            let mut c = self.conn.borrow_mut();
            if c.ended() {
                // Not opened here: the caller sends it on a fresh connection.
                return Poll::Ready(Err(StreamEnd::AboveGoAway));
            }
            // One clock read: the moment the request is queued is when the server's time begins.
            let now = Instant::now();
            if now >= deadline {
                // Woken for a slot as its timeout came: opened now it would only be reset at
                // once. It leaves the queue to the next in line, and its timeout ends it unsent.
                if std::mem::replace(&mut queued.waiting, false) {
                    c.leave_queue(ticket);
                }
                return Poll::Pending;
            }
            match c.try_open(ticket, cx.waker(), &t.h2_block, &t.body, now) {
                Some(id) => {
                    opened.set(true);
                    if !tries.counted.replace(true) {
                        rec.sent(t.index);
                    }
                    Poll::Ready(Ok((id, now)))
                }
                None => {
                    queued.waiting = true;
                    Poll::Pending
                }
            }
        })
        .await;
        // Its wait is the client's however it ended: opened, or woken by the connection's end (a
        // GOAWAY, the connection gone) to be sent again elsewhere.
        if queued.waiting {
            let until = opened
                .as_ref()
                .map_or_else(|_| Instant::now(), |&(_, at)| at);
            add_wait(&tries.waited, until - asked);
        }
        let opened = opened?;
        // Its slot taken, it is out of the queue.
        queued.waiting = false;
        Ok(opened)
    }

    /// Opens a stream (waiting for a slot under the server's limit if it must, the wait added to
    /// `tries.waited` as it opens), then waits for its reply. Returns the reply and when the stream
    /// opened.
    async fn exchange(&self, attempt: Attempt<'_>) -> Result<(conn::Reply, Instant), StreamEnd> {
        let (id, opened_at) = self.open_stream(attempt).await?;
        // Dropped with the reply in hand it does nothing: the stream is gone from the connection.
        let _open = Open {
            conn: &self.conn,
            id,
        };
        let reply =
            std::future::poll_fn(
                |cx| match self.conn.borrow_mut().poll_reply(id, cx.waker()) {
                    Some(r) => Poll::Ready(r),
                    None => Poll::Pending,
                },
            )
            .await?;
        Ok((reply, opened_at))
    }
}

/// One attempt of a request on a connection: what its stream is sent with and reports into.
#[derive(Clone, Copy)]
struct Attempt<'a> {
    t: &'a Template,
    /// When the stream was asked for: its wait for a slot counts from here.
    asked: Instant,
    /// Its timeout: a slot that frees after it is left to the next in line.
    deadline: Instant,
    /// Set as the stream opens (and so reached the server, or was refused by it).
    opened: &'a Cell<bool>,
    tries: &'a Tries,
    rec: &'a Recorder,
}

/// Adds a stream's wait for a slot to what its request waited so far.
fn add_wait(waited: &Cell<Option<Duration>>, d: Duration) {
    waited.set(Some(waited.get().unwrap_or_default() + d));
}

impl Drop for Conn {
    fn drop(&mut self) {
        let mut c = self.conn.borrow_mut();
        c.closing = true;
        c.driver_woken = false;
        c.wake_driver();
    }
}

/// A stream waiting for a slot; dropped (its caller gave up), it leaves the queue.
struct Queued<'a> {
    conn: &'a RefCell<State>,
    ticket: u64,
    waiting: bool,
}

impl Drop for Queued<'_> {
    fn drop(&mut self) {
        if self.waiting {
            self.conn.borrow_mut().leave_queue(self.ticket);
        }
    }
}

/// An open stream whose reply is awaited; dropped before it came (a timeout, a cancelled step), it
/// is reset so its slot frees.
struct Open<'a> {
    conn: &'a RefCell<State>,
    id: u32,
}

impl Drop for Open<'_> {
    fn drop(&mut self) {
        self.conn.borrow_mut().forget(self.id);
    }
}

/// A `Conn` on an open transport, and the driver that moves its bytes (to be spawned, or run
/// beside the set-up). Refuses at once a TLS connection whose ALPN chose something else.
fn start(io: Stream, peer: SocketAddr) -> Result<(Conn, Driver), SetupError> {
    if io.alpn().is_some_and(|p| p != b"h2") {
        return Err(SetupError {
            class: ErrorClass::Other,
            words: format!(
                "{peer} does not offer HTTP/2 over TLS (ALPN chose {}): use --http auto to fall back to HTTP/1.1, or --http 1.1",
                String::from_utf8_lossy(io.alpn().unwrap_or_default())
            )
            .into(),
        });
    }
    let tls_without_alpn = io.is_tls() && io.alpn().is_none();
    let conn = Rc::new(RefCell::new(State::new(tls_without_alpn)));
    let driver = Driver {
        io,
        conn: conn.clone(),
        read: vec![0; READ_BUFFER],
        filled: 0,
        write: Vec::with_capacity(16 * 1024),
        written: 0,
        flush: false,
        grace: None,
    };
    let session = Conn {
        conn,
        peer,
        opened: Cell::new(0),
        goaway_counted: Cell::new(false),
    };
    Ok((session, driver))
}

/// Moves a connection's bytes: writes what its streams queued, reads what came and gives it to the
/// connection's state, until the connection ends or its `Conn` is dropped and its streams done.
struct Driver {
    io: Stream,
    conn: Rc<RefCell<State>>,
    read: Vec<u8>,
    filled: usize,
    write: Vec<u8>,
    written: usize,
    flush: bool,
    /// Runs from the moment the `Conn` was dropped with its output still unwritten.
    grace: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl Future for Driver {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let me = self.get_mut();
        loop {
            me.take_output(cx.waker());
            let Some(mut progress) = me.write_out(cx) else {
                return Poll::Ready(());
            };
            if me.conn.borrow().closed.is_some() {
                // A GOAWAY of our own is written, as far as the socket takes it at once.
                return Poll::Ready(());
            }
            if me.conn.borrow().closing && me.conn.borrow().active == 0 {
                match me.wind_down(cx) {
                    Poll::Ready(()) => return Poll::Ready(()),
                    Poll::Pending if !progress => return Poll::Pending,
                    Poll::Pending => continue,
                }
            }
            match me.read_in(cx) {
                None => return Poll::Ready(()),
                Some(read) => progress |= read,
            }
            if !progress {
                return Poll::Pending;
            }
        }
    }
}

impl Driver {
    fn end(&mut self, how: Closed) {
        self.conn.borrow_mut().close(how);
    }

    /// Takes what the streams queued into the write buffer (whole, when the last was written).
    fn take_output(&mut self, waker: &std::task::Waker) {
        let mut c = self.conn.borrow_mut();
        c.driver_woken = false;
        if !c.driver.as_ref().is_some_and(|w| w.will_wake(waker)) {
            c.driver = Some(waker.clone());
        }
        // Counted as taken, so a stream can tell whether its request left.
        c.taken += c.out.len() as u64;
        if self.written == self.write.len() {
            self.write.clear();
            self.written = 0;
            std::mem::swap(&mut self.write, &mut c.out);
        } else if !c.out.is_empty() {
            self.write.append(&mut c.out);
        }
    }

    /// Writes what the socket takes now, and flushes it: whether anything was written, or `None`
    /// when the connection ended.
    fn write_out(&mut self, cx: &mut Context<'_>) -> Option<bool> {
        let mut progress = false;
        while self.written < self.write.len() {
            match Pin::new(&mut self.io).poll_write(cx, &self.write[self.written..]) {
                Poll::Ready(Ok(0)) => {
                    self.end(Closed::Io(io::ErrorKind::WriteZero.into()));
                    return None;
                }
                Poll::Ready(Ok(n)) => {
                    self.written += n;
                    self.conn.borrow_mut().written += n as u64;
                    self.flush = true;
                    progress = true;
                }
                Poll::Ready(Err(e)) => {
                    self.end(Closed::Io(e));
                    return None;
                }
                Poll::Pending => break,
            }
        }
        // TLS holds written bytes until flushed.
        if self.flush {
            match Pin::new(&mut self.io).poll_flush(cx) {
                Poll::Ready(Ok(())) => self.flush = false,
                Poll::Ready(Err(e)) => {
                    self.end(Closed::Io(e));
                    return None;
                }
                Poll::Pending => {}
            }
        }
        Some(progress)
    }

    /// The connection's handle dropped and no stream open: ends once its output is written, or
    /// after CLOSE_GRACE.
    fn wind_down(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        let drained = self.conn.borrow().out.is_empty() && self.written == self.write.len();
        if drained {
            self.end(Closed::Done);
            let _ = Pin::new(&mut self.io).poll_shutdown(cx);
            return Poll::Ready(());
        }
        // Nothing is read any more (no stream waits for a reply, and a server's PINGs would only
        // queue more): what is left to write has CLOSE_GRACE, whether or not the server reads it.
        let grace = self
            .grace
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(CLOSE_GRACE)));
        if grace.as_mut().poll(cx).is_ready() {
            self.end(Closed::Done);
            return Poll::Ready(());
        }
        Poll::Pending
    }

    /// Reads what came and gives it to the connection's state: whether anything was read, or
    /// `None` when the connection ended.
    fn read_in(&mut self, cx: &mut Context<'_>) -> Option<bool> {
        let mut buf = ReadBuf::new(&mut self.read[self.filled..]);
        match Pin::new(&mut self.io).poll_read(cx, &mut buf) {
            Poll::Ready(Ok(())) => {
                let n = buf.filled().len();
                if n == 0 {
                    self.end(Closed::Eof);
                    return None;
                }
                self.filled += n;
                let used = self
                    .conn
                    .borrow_mut()
                    .receive(&self.read[..self.filled], Instant::now());
                self.read.copy_within(used..self.filled, 0);
                self.filled -= used;
                Some(true)
            }
            Poll::Ready(Err(e)) => {
                self.end(Closed::Io(e));
                None
            }
            Poll::Pending => Some(false),
        }
    }
}

/// The preflight of a configure, on the target `Endpoint::prepare` made of `w`: asks the target,
/// once before any load, whether it speaks HTTP/2 as asked. With `--http 2` a target that answers
/// in something else, or allows no streams, is an error now, before a step is planned; with
/// `--http auto` over TLS, ALPN's answer says which HTTP the run speaks. HTTP/1.1 asks nothing.
pub async fn preflight(mut target: Endpoint, w: &Workload) -> Result<Endpoint, PrepareError> {
    match (w.http(), w.origin().scheme()) {
        (HttpVersion::Http1, _) | (HttpVersion::Auto, Scheme::Http) => {}
        (HttpVersion::Http2, _) => {
            ask(&target, false).await?;
        }
        (HttpVersion::Auto, Scheme::Https) => {
            if ask(&target, true).await? {
                target.http2 = true;
                target.streams = w.streams().get();
            }
        }
    }
    Ok(target)
}

/// The preflight's question: whether the target speaks HTTP/2 as asked: one connection, set up
/// as every session is, then closed. With `negotiate` (`--http auto` over TLS) the answer is whether
/// ALPN chose h2; otherwise a target that answers in something else, or allows no streams, is an
/// error now, before a step is planned. A target that cannot be reached is left to the run, which
/// counts its failures as over HTTP/1.1, unless the protocol depends on the answer.
async fn ask(target: &Endpoint, negotiate: bool) -> Result<bool, PrepareError> {
    let target = target.clone();
    // On a thread of its own: an HTTP/2 connection lives on one thread, as the workers' do.
    let asked = tokio::task::spawn_blocking(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start the HTTP/2 preflight: {e}"))?;
        rt.block_on(ask_here(&target, negotiate))
    })
    .await
    .map_err(|e| PrepareError::Protocol(format!("the HTTP/2 preflight failed: {e}")))?;
    match asked {
        Ok(Ok(h2)) => Ok(h2),
        Ok(Err(_)) if !negotiate => Ok(true),
        Ok(Err(unreachable)) => Err(PrepareError::Protocol(format!(
            "--http auto cannot tell which HTTP the target speaks: {unreachable}"
        ))),
        Err(wrong) => Err(PrepareError::Protocol(wrong)),
    }
}

/// The preflight's one connection, on the thread it was opened on: `Ok(Ok(h2))` the answer,
/// `Ok(Err(words))` a target that could not be reached (or set up), `Err(words)` one that certainly
/// does not speak HTTP/2 as asked.
async fn ask_here(target: &Endpoint, negotiate: bool) -> Result<Result<bool, String>, String> {
    let rec = Rc::new(Recorder::default());
    let left = target.connect_timeout;
    let io = match transport::open(target, &rec).await {
        Ok(io) => io,
        Err(class) => {
            let words = rec
                .swap()
                .messages
                .get(class)
                .unwrap_or_default()
                .to_string();
            if words.contains("NoApplicationProtocol") {
                return Err(format!(
                    "{} does not offer HTTP/2 over TLS (its ALPN refused h2): use --http auto to fall back to HTTP/1.1, or --http 1.1",
                    target.addr
                ));
            }
            // A TLS failure (a certificate, not TLS at all) fails every connection alike.
            if class == ErrorClass::Other {
                return Err(words);
            }
            return Ok(Err(words));
        }
    };
    if negotiate && io.alpn() != Some(b"h2") {
        return Ok(Ok(false));
    }
    let (session, driver) = start(io, target.addr).map_err(|e| e.words.into_owned())?;
    let set_up = async {
        tokio::select! {
            r = session.set_up() => r,
            // The connection ended: the set-up says how.
            () = driver => session.set_up().await,
        }
    };
    match tokio::time::timeout(left, set_up).await {
        Ok(Ok(_)) => Ok(Ok(true)),
        Ok(Err(e)) if e.class == ErrorClass::Other => Err(e.words.into_owned()),
        Ok(Err(e)) => Ok(Err(e.words.into_owned())),
        Err(_) => Ok(Err(format!(
            "{} sent no HTTP/2 SETTINGS within {left:?} (--connect-timeout)",
            target.addr
        ))),
    }
}

/// The server's GOAWAY in words.
fn goaway_words(c: &State, peer: SocketAddr) -> String {
    let code = c.goaway.map_or(0, |g| g.code);
    format!(
        "{peer} ended the HTTP/2 session (GOAWAY {})",
        frame::code_name(code)
    )
}

/// How a connection's end reads, and its class.
fn closed_words(closed: &Closed, peer: SocketAddr) -> (ErrorClass, Cow<'static, str>) {
    match closed {
        Closed::Io(e) => (io_class(e), format!("HTTP/2 with {peer}: {e}").into()),
        Closed::Eof => (
            ErrorClass::ConnReset,
            format!("{peer} closed the HTTP/2 connection").into(),
        ),
        Closed::Protocol { code, what } => (
            ErrorClass::Other,
            format!(
                "{peer} broke HTTP/2 ({what}): stampede ended the session ({})",
                frame::code_name(*code)
            )
            .into(),
        ),
        Closed::Flood(how) => (
            ErrorClass::Other,
            format!(
                "{peer} flooded HTTP/2 ({}): stampede ended the session (GOAWAY {})",
                how.words(),
                frame::code_name(frame::ENHANCE_YOUR_CALM)
            )
            .into(),
        ),
        Closed::Done => (
            ErrorClass::Other,
            format!("HTTP/2 with {peer}: the session was closed").into(),
        ),
    }
}

/// A set-up failure in words, naming what came instead of HTTP/2 when it was not HTTP/2.
fn setup_error(closed: &Closed, c: &State, peer: SocketAddr) -> SetupError {
    let first = &c.first[..];
    if first.starts_with(b"HTTP/") {
        let line = first.split(|&b| b == b'\r').next().unwrap_or(first);
        return SetupError {
            class: ErrorClass::Other,
            words: format!(
                "{peer} answered the HTTP/2 preface in HTTP/1 (\"{}\"): it does not speak h2c on this port; for HTTP/1.1 write the target http://, not h2c://, and without --http 2{}",
                line.escape_ascii(),
                if c.tls_without_alpn { "" } else { " (or h2:// over TLS)" }
            )
            .into(),
        };
    }
    if matches!(first.first(), Some(0x15 | 0x16)) {
        return SetupError {
            class: ErrorClass::Other,
            words: format!("{peer} speaks TLS, not h2c: use h2:// (or https:// with --http 2)")
                .into(),
        };
    }
    match closed {
        Closed::Eof if first.is_empty() => SetupError {
            class: ErrorClass::ConnReset,
            words: format!("{peer} closed the HTTP/2 connection during its set-up").into(),
        },
        Closed::Protocol { .. } if !c.setup.settings => SetupError {
            class: ErrorClass::Other,
            words: format!(
                "{peer} does not speak HTTP/2: its first bytes were \"{}\", not SETTINGS",
                first.escape_ascii()
            )
            .into(),
        },
        other => {
            let (class, words) = closed_words(other, peer);
            SetupError { class, words }
        }
    }
}

#[cfg(test)]
mod tests;
