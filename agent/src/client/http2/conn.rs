//! One HTTP/2 connection's state, without its I/O: the driver gives it what it read and writes out
//! what it queued, and the streams of any number of loops open, wait and finish through it. All on
//! one thread, so a `RefCell` holds it and nothing locks.
//!
//! Flow control runs both ways: the server's windows cap what a request body may send (a stream
//! waiting for window is a stall, timed), and stampede's own windows are set large at the start and
//! refilled in bulk, so a reply never waits on the client.
use std::collections::{HashMap, VecDeque};
use std::task::Waker;
use std::time::Duration;

use bytes::Bytes;
use tokio::time::Instant;

use super::frame::{self, Head};
use super::hpack::Decoder;

mod input;
pub use input::fuzz_frames;

/// The receive window stampede gives the connection and every stream (h2load's default too):
/// large enough that no reply waits for a WINDOW_UPDATE.
const RECV_WINDOW: u32 = 1 << 30;
/// Refill a receive window once this much of it is used.
const REFILL: u32 = RECV_WINDOW / 2;
/// The most a reply's header block may hold, over its HEADERS and CONTINUATION frames.
const MAX_HEADER_BLOCK: usize = 256 * 1024;
/// A client's stream ids are odd and at most 2^31 - 1.
const LAST_STREAM_ID: u32 = (1 << 31) - 1;
/// The most PING and SETTINGS acknowledgements queued and not yet taken by the socket. A server
/// that asks for them faster than it reads (CVE-2019-9512 and -9515) would otherwise grow the output
/// without end; past this it is told ENHANCE_YOUR_CALM and the connection ends. 10,000, as Go's
/// server and Netty hold their peers to: 170 KB of PING ACKs, and far more than a server that reads
/// its socket ever has waiting (the kernel's buffers take the output first).
const MAX_PENDING_ACKS: usize = 10_000;
/// The most CONTINUATION frames one header block may take: twice what the largest block allowed
/// (`MAX_HEADER_BLOCK`) takes in whole frames of the 16,384 bytes stampede accepts. Empty ones add
/// nothing to the block's size, so without a count they could come for ever (CVE-2024-27316's
/// pattern).
const MAX_CONTINUATIONS: u32 = 2 * (MAX_HEADER_BLOCK / frame::MAX_FRAME) as u32;
/// The most informational (1xx) replies one request may get before its final one: 100 Continue,
/// 103 Early Hints and a few 102 Processing fit many times over.
const MAX_INFORMATIONAL: u8 = 16;
/// The HPACK dynamic table size an encoder starts with (RFC 7541 4.2, SETTINGS_HEADER_TABLE_SIZE's
/// default).
const DEFAULT_TABLE_SIZE: u32 = 4096;

/// How a stream ended, when it did not end with a whole reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamEnd {
    /// The server reset it with this code (REFUSED_STREAM: it did not process the request).
    Reset(u32),
    /// Stampede reset it with this code, because the server broke the protocol on it (`why`):
    /// the server's fault, but not a reset of the server's.
    ResetByUs { code: u32, why: &'static str },
    /// Stampede reset it with ENHANCE_YOUR_CALM: the server sent on it without end.
    Flooded(Flood),
    /// The connection ended before the stream's header block was wholly written: the server
    /// cannot have taken it, so it is sent again.
    Unsent,
    /// Above the last stream id of the server's GOAWAY: never processed.
    AboveGoAway,
    /// The connection ended first (`State::closed` says how).
    Connection,
}

/// What a server sent without end, past the bound stampede holds it to: the connection (or, for
/// `Informational`, the stream) is ended with ENHANCE_YOUR_CALM.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flood {
    /// PINGs faster than it read their ACKs.
    Pings,
    /// SETTINGS faster than it read their ACKs.
    Settings,
    /// A header block in more than `MAX_CONTINUATIONS` CONTINUATION frames.
    Continuations,
    /// More than `MAX_INFORMATIONAL` informational (1xx) replies on one stream.
    Informational,
}

impl Flood {
    /// What the server did, in words.
    pub fn words(self) -> String {
        match self {
            Flood::Pings => {
                format!("PINGs faster than it read their ACKs: {MAX_PENDING_ACKS} ACKs unread")
            }
            Flood::Settings => {
                format!("SETTINGS faster than it read their ACKs: {MAX_PENDING_ACKS} ACKs unread")
            }
            Flood::Continuations => {
                format!("a header block that went on past {MAX_CONTINUATIONS} CONTINUATION frames")
            }
            Flood::Informational => {
                format!("more than {MAX_INFORMATIONAL} informational (1xx) replies to one request")
            }
        }
    }
}

/// How the connection ended.
#[derive(Debug)]
pub enum Closed {
    Io(std::io::Error),
    /// The server closed it (end of file).
    Eof,
    /// The server broke the protocol: stampede said GOAWAY with `code` and closed.
    Protocol {
        code: u32,
        what: String,
    },
    /// The server flooded the connection: stampede said GOAWAY ENHANCE_YOUR_CALM and closed.
    Flood(Flood),
    /// The handles were all dropped: stampede closed it.
    Done,
}

/// The server's GOAWAY.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GoAway {
    pub last: u32,
    pub code: u32,
}

/// What the set-up learnt: the server's first frame was SETTINGS, and the PING sent after ours was
/// answered, so every setting the server sent first is applied.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Setup {
    pub settings: bool,
    pub pinged: bool,
}

#[derive(Debug)]
struct Stream {
    /// The reply's status, once its final header block came.
    status: Option<u16>,
    headers_at: Option<Instant>,
    done_at: Option<Instant>,
    end: Option<StreamEnd>,
    waker: Option<Waker>,
    /// The server's window for this stream's request body.
    window: i64,
    /// The request body not yet sent (from `body_at`), waiting for window.
    body: Option<(Bytes, usize)>,
    stalled_since: Option<Instant>,
    /// The reply bytes received since this stream's window was last refilled.
    consumed: u32,
    /// Counted in `active` (open or half-closed, under the server's limit).
    open: bool,
    /// Informational (1xx) replies so far.
    informational: u8,
    /// Where its header block ends in the connection's output (counted as `State::written` is):
    /// until the socket took that much, the server cannot have the request.
    sent_by: u64,
}

/// A connection's state.
#[derive(Debug)]
pub struct State {
    /// Bytes queued for the driver to write.
    pub out: Vec<u8>,
    pub driver: Option<Waker>,
    /// The driver has been woken and not yet run: a second wake is not needed.
    pub driver_woken: bool,
    pub setup: Setup,
    /// The server's SETTINGS_MAX_CONCURRENT_STREAMS; `None` while it has sent none (unlimited).
    pub max_streams: Option<u32>,
    initial_window: i64,
    max_frame: usize,
    send_window: i64,
    recv_consumed: u32,
    next_id: u32,
    streams: HashMap<u32, Stream>,
    /// Streams open under the server's limit.
    pub active: u32,
    /// Streams waiting for a slot under the limit, by ticket, oldest first.
    waiting: VecDeque<(u64, Waker)>,
    next_ticket: u64,
    /// Streams whose body waits for window, oldest first.
    blocked: VecDeque<u32>,
    decoder: Decoder,
    /// A header block still coming in CONTINUATION frames.
    continuing: Option<Continuing>,
    /// Where each PING or SETTINGS ACK not yet taken by the socket ends in the output (counted as
    /// `written` is), oldest first: at most `MAX_PENDING_ACKS`.
    acks: VecDeque<u64>,
    pub goaway: Option<GoAway>,
    pub closed: Option<Closed>,
    /// The first bytes the server sent, to name what came when it was not HTTP/2.
    pub first: Vec<u8>,
    /// All handles are gone: close once no stream is open.
    pub closing: bool,
    /// Counted here, taken by the streams' recorder: header block and DATA payload bytes received.
    pub header_bytes: u64,
    pub body_bytes: u64,
    /// Streams that waited for the server's window, and for how long in all.
    pub stalls: u64,
    pub stalled: Duration,
    /// Over TLS without ALPN (a server that chose no protocol): its refusal reads differently.
    pub tls_without_alpn: bool,
    setup_waker: Option<Waker>,
    /// Bytes of output the driver has taken from `out` so far, and of those, the bytes the socket
    /// took: a stream whose header block lies past `written` when the connection ends never left.
    pub taken: u64,
    pub written: u64,
    /// The HPACK dynamic table size the server's decoder holds ours to: 4,096 until stampede says
    /// otherwise. The encoder indexes nothing, so once it must signal a size it signals 0.
    encoder_table: u32,
    /// The server's SETTINGS_HEADER_TABLE_SIZE went below `encoder_table`: the next header block
    /// must open with a size update (RFC 7541 4.2).
    table_update: bool,
}

/// A header block still coming in CONTINUATION frames.
#[derive(Debug)]
struct Continuing {
    id: u32,
    end_stream: bool,
    block: Vec<u8>,
    /// CONTINUATION frames so far.
    frames: u32,
}

/// An opened stream's reply, complete.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reply {
    pub status: u16,
    pub headers_at: Instant,
    pub done_at: Instant,
}

impl State {
    /// A connection with its preface, SETTINGS, window and set-up PING queued.
    pub fn new(tls_without_alpn: bool) -> State {
        let mut out = Vec::with_capacity(16 * 1024);
        out.extend_from_slice(frame::PREFACE);
        frame::put_settings(
            &mut out,
            &[
                (frame::SETTINGS_ENABLE_PUSH, 0),
                (frame::SETTINGS_INITIAL_WINDOW_SIZE, RECV_WINDOW),
            ],
        );
        frame::put_window_update(&mut out, 0, RECV_WINDOW - frame::DEFAULT_WINDOW as u32);
        frame::put_ping(&mut out, 0, *b"stampede");
        State {
            out,
            driver: None,
            driver_woken: false,
            setup: Setup::default(),
            max_streams: None,
            initial_window: frame::DEFAULT_WINDOW,
            max_frame: frame::MAX_FRAME,
            send_window: frame::DEFAULT_WINDOW,
            recv_consumed: 0,
            next_id: 1,
            streams: HashMap::new(),
            active: 0,
            waiting: VecDeque::new(),
            next_ticket: 0,
            blocked: VecDeque::new(),
            decoder: Decoder::default(),
            continuing: None,
            acks: VecDeque::new(),
            goaway: None,
            closed: None,
            first: Vec::new(),
            closing: false,
            header_bytes: 0,
            body_bytes: 0,
            stalls: 0,
            stalled: Duration::ZERO,
            tls_without_alpn,
            setup_waker: None,
            taken: 0,
            written: 0,
            encoder_table: DEFAULT_TABLE_SIZE,
            table_update: false,
        }
    }

    /// Wakes `waker` when the set-up ends, or the connection does.
    pub fn wait_setup(&mut self, waker: &Waker) {
        self.setup_waker = Some(waker.clone());
    }

    fn setup_moved(&mut self) {
        if let Some(w) = self.setup_waker.take() {
            w.wake();
        }
    }

    /// No new stream may open: the connection ended, the server said GOAWAY, or ids ran out.
    pub fn ended(&self) -> bool {
        self.closed.is_some() || self.goaway.is_some() || self.next_id > LAST_STREAM_ID
    }

    pub fn ready(&self) -> bool {
        self.setup.settings && self.setup.pinged
    }

    pub fn wake_driver(&mut self) {
        if !self.driver_woken {
            self.driver_woken = true;
            if let Some(w) = &self.driver {
                w.wake_by_ref();
            }
        }
    }

    /// A ticket for a stream that may have to wait for a slot.
    pub fn ticket(&mut self) -> u64 {
        self.next_ticket += 1;
        self.next_ticket
    }

    /// Opens a stream if the server's limit has room and no older stream waits, queueing its
    /// request; otherwise the caller waits, woken when a slot frees. `None` while it waits.
    pub fn try_open(
        &mut self,
        ticket: u64,
        waker: &Waker,
        block: &[u8],
        body: &Bytes,
        now: Instant,
    ) -> Option<u32> {
        let room = self.max_streams.is_none_or(|m| self.active < m);
        let first = self.waiting.front().is_none_or(|(t, _)| *t == ticket);
        if !(room && first) {
            match self.waiting.iter_mut().find(|(t, _)| *t == ticket) {
                Some((_, w)) => w.clone_from(waker),
                None => self.waiting.push_back((ticket, waker.clone())),
            }
            return None;
        }
        if self.waiting.front().is_some_and(|(t, _)| *t == ticket) {
            self.waiting.pop_front();
        }
        let id = self.next_id;
        self.next_id += 2;
        self.active += 1;
        self.put_headers(id, block, body.is_empty());
        let mut stream = Stream {
            status: None,
            headers_at: None,
            done_at: None,
            end: None,
            waker: None,
            window: self.initial_window,
            body: (!body.is_empty()).then(|| (body.clone(), 0)),
            stalled_since: None,
            consumed: 0,
            open: true,
            informational: 0,
            sent_by: self.taken + self.out.len() as u64,
        };
        self.send_body(id, &mut stream, now);
        self.streams.insert(id, stream);
        self.wake_driver();
        // The next in line may open too, if there is still room.
        self.wake_next();
        Some(id)
    }

    /// A stream that waited and gave up leaves the queue.
    pub fn leave_queue(&mut self, ticket: u64) {
        let front = self.waiting.front().is_some_and(|(t, _)| *t == ticket);
        self.waiting.retain(|(t, _)| *t != ticket);
        if front {
            self.wake_next();
        }
    }

    fn wake_next(&mut self) {
        if (self.max_streams.is_none_or(|m| self.active < m) || self.ended())
            && let Some((_, w)) = self.waiting.front()
        {
            w.wake_by_ref();
        }
    }

    /// Wakes every waiting stream: the connection can take no more.
    fn wake_all(&mut self) {
        for (_, w) in self.waiting.drain(..) {
            w.wake();
        }
        for s in self.streams.values_mut() {
            if let Some(w) = s.waker.take() {
                w.wake();
            }
        }
    }

    fn put_headers(&mut self, id: u32, block: &[u8], end_stream: bool) {
        let end = if end_stream { frame::END_STREAM } else { 0 };
        // The server's decoder took a table smaller than the 4,096 bytes ours may use: this block
        // (the first after the SETTINGS' ACK) opens by shrinking it, to 0, as nothing is indexed
        // (RFC 7541 4.2 and 6.3; nghttp2 refuses a block without it).
        let update: &[u8] = if std::mem::take(&mut self.table_update) {
            self.encoder_table = 0;
            &[0x20]
        } else {
            &[]
        };
        let len = update.len() + block.len();
        let first_len = len.min(self.max_frame);
        let (first, rest) = block.split_at(first_len - update.len());
        let flags = end
            | if len > self.max_frame {
                0
            } else {
                frame::END_HEADERS
            };
        frame::put_head(&mut self.out, first_len, frame::HEADERS, flags, id);
        self.out.extend_from_slice(update);
        self.out.extend_from_slice(first);
        let mut rest = rest.chunks(self.max_frame).peekable();
        while let Some(c) = rest.next() {
            let flags = if rest.peek().is_none() {
                frame::END_HEADERS
            } else {
                0
            };
            frame::put_head(&mut self.out, c.len(), frame::CONTINUATION, flags, id);
            self.out.extend_from_slice(c);
        }
    }

    /// Sends as much of a stream's body as the windows allow; what is left waits, timed as a stall.
    fn send_body(&mut self, id: u32, s: &mut Stream, now: Instant) {
        let Some((body, mut at)) = s.body.take() else {
            return;
        };
        while at < body.len() {
            let room = s.window.min(self.send_window).min(self.max_frame as i64);
            if room <= 0 {
                if s.stalled_since.is_none() {
                    s.stalled_since = Some(now);
                    self.stalls += 1;
                }
                if !self.blocked.contains(&id) {
                    self.blocked.push_back(id);
                }
                s.body = Some((body, at));
                return;
            }
            let n = (body.len() - at).min(room as usize);
            let last = at + n == body.len();
            let flags = if last { frame::END_STREAM } else { 0 };
            frame::put_head(&mut self.out, n, frame::DATA, flags, id);
            self.out.extend_from_slice(&body[at..at + n]);
            at += n;
            s.window -= n as i64;
            self.send_window -= n as i64;
        }
        if let Some(since) = s.stalled_since.take() {
            self.stalled += now.saturating_duration_since(since);
        }
    }

    /// After a window grew: the blocked bodies go on, oldest first.
    fn unblock(&mut self, now: Instant) {
        for _ in 0..self.blocked.len() {
            let Some(id) = self.blocked.pop_front() else {
                break;
            };
            if let Some(mut s) = self.streams.remove(&id) {
                self.send_body(id, &mut s, now);
                self.streams.insert(id, s);
            }
        }
        self.wake_driver();
    }

    /// The stream's reply, once it is complete or the stream ended: `None` while it is coming.
    pub fn poll_reply(&mut self, id: u32, waker: &Waker) -> Option<Result<Reply, StreamEnd>> {
        let s = self.streams.get_mut(&id)?;
        if let Some(end) = s.end {
            self.streams.remove(&id);
            return Some(Err(end));
        }
        if let (Some(status), Some(headers_at), Some(done_at)) = (s.status, s.headers_at, s.done_at)
        {
            self.streams.remove(&id);
            return Some(Ok(Reply {
                status,
                headers_at,
                done_at,
            }));
        }
        match &mut s.waker {
            Some(w) => w.clone_from(waker),
            None => s.waker = Some(waker.clone()),
        }
        None
    }

    /// A stream given up by its caller (a timeout, a cancelled step): reset (CANCEL) if it is still
    /// open, so the server stops working on it and its slot frees.
    pub fn forget(&mut self, id: u32) {
        let Some(s) = self.streams.remove(&id) else {
            return;
        };
        // A body given up while it waited for window stalled until now.
        if let Some(since) = s.stalled_since {
            self.stalled += Instant::now().saturating_duration_since(since);
        }
        if s.open {
            self.active -= 1;
            if self.closed.is_none() {
                frame::put_rst(&mut self.out, id, frame::CANCEL);
                self.wake_driver();
            }
            self.wake_next();
        }
        self.blocked.retain(|b| *b != id);
    }

    /// The stream is closed on both sides (or reset): its slot frees.
    fn close_stream(&mut self, id: u32, end: Option<StreamEnd>, now: Instant) {
        let Some(s) = self.streams.get_mut(&id) else {
            return;
        };
        if s.open {
            s.open = false;
            self.active -= 1;
        }
        if end.is_some() && s.end.is_none() && s.done_at.is_none() {
            s.end = end;
        }
        if end.is_none() {
            s.done_at = Some(now);
        }
        if let Some(since) = s.stalled_since.take() {
            self.stalled += now.saturating_duration_since(since);
        }
        if s.body.take().is_some() {
            self.blocked.retain(|b| *b != id);
            // The reply came before the whole request (RFC 9113 8.1): the rest is not sent. A
            // stream ended by a reset (the server's, never answered with one, RFC 9113 5.4.2; or
            // ours, already said) or by GOAWAY is not reset again.
            if end.is_none() {
                frame::put_rst(&mut self.out, id, frame::CANCEL);
            }
        }
        if let Some(w) = s.waker.take() {
            w.wake();
        }
        self.wake_next();
    }

    /// The connection ended: every stream still open ends with it.
    pub fn close(&mut self, how: Closed) {
        if self.closed.is_none() {
            self.closed = Some(how);
        }
        let now = Instant::now();
        for s in self.streams.values_mut() {
            // A body waiting for window when the connection ended stalled until now.
            if let Some(since) = s.stalled_since.take() {
                self.stalled += now.saturating_duration_since(since);
            }
            if s.end.is_some() || s.done_at.is_some() {
                continue;
            }
            // Not wholly written, the request never reached the server: it is sent again.
            s.end = Some(if s.sent_by > self.written {
                StreamEnd::Unsent
            } else {
                StreamEnd::Connection
            });
            s.body = None;
            if s.open {
                s.open = false;
                self.active -= 1;
            }
        }
        self.blocked.clear();
        self.wake_all();
        self.setup_moved();
    }

    /// The server broke the protocol: say GOAWAY with `code`, and end.
    fn broken(&mut self, code: u32, what: impl Into<String>) -> Result<(), ()> {
        // A GOAWAY's last stream id names the peer's streams its sender may act on (RFC 9113 6.8):
        // a server's pushed ones, and stampede takes none (ENABLE_PUSH 0).
        frame::put_goaway(&mut self.out, 0, code);
        self.close(Closed::Protocol {
            code,
            what: what.into(),
        });
        Err(())
    }

    /// The server flooded the connection (`how`): say GOAWAY ENHANCE_YOUR_CALM, and end.
    fn flooded(&mut self, how: Flood) -> Result<(), ()> {
        frame::put_goaway(&mut self.out, 0, frame::ENHANCE_YOUR_CALM);
        self.close(Closed::Flood(how));
        Err(())
    }

    /// Queues an acknowledgement (`put`) of a PING or SETTINGS (`kind`), unless the server has
    /// `MAX_PENDING_ACKS` it has not read yet: then it floods, and the connection ends.
    fn ack(&mut self, kind: Flood, put: impl FnOnce(&mut Vec<u8>)) -> Result<(), ()> {
        while self.acks.front().is_some_and(|&end| end <= self.written) {
            self.acks.pop_front();
        }
        if self.acks.len() >= MAX_PENDING_ACKS {
            return self.flooded(kind);
        }
        put(&mut self.out);
        self.acks.push_back(self.taken + self.out.len() as u64);
        self.wake_driver();
        Ok(())
    }

    /// The server broke the protocol on one stream: stampede resets it with `code` (a stream
    /// error), saying why, and the connection goes on.
    fn reset_by_us(&mut self, id: u32, code: u32, why: &'static str, now: Instant) {
        self.reset(id, code, StreamEnd::ResetByUs { code, why }, now);
    }

    /// Resets a stream with `code`, ending it as `end`.
    fn reset(&mut self, id: u32, code: u32, end: StreamEnd, now: Instant) {
        frame::put_rst(&mut self.out, id, code);
        self.close_stream(id, Some(end), now);
        self.wake_driver();
    }
}

#[cfg(test)]
mod tests;
