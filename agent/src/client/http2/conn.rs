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
mod tests {
    use std::task::Waker;

    use proptest::prelude::*;

    use super::*;

    fn frame_of(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        frame::put_head(&mut out, payload.len(), kind, flags, stream);
        out.extend_from_slice(payload);
        out
    }

    fn settings(pairs: &[(u16, u32)]) -> Vec<u8> {
        let mut out = Vec::new();
        frame::put_settings(&mut out, pairs);
        out
    }

    /// A connection whose server sent `pairs` and answered the set-up PING.
    fn ready(pairs: &[(u16, u32)]) -> State {
        let mut c = State::new(false);
        let mut input = settings(pairs);
        input.extend(frame_of(frame::PING, frame::ACK, 0, b"stampede"));
        assert_eq!(c.receive(&input, Instant::now()), input.len());
        assert!(c.ready() && c.closed.is_none(), "{:?}", c.closed);
        wrote_all(&mut c);
        c
    }

    fn open(c: &mut State, body: &'static [u8]) -> Option<u32> {
        let t = c.ticket();
        c.try_open(
            t,
            Waker::noop(),
            &[0x82, 0x86, 0x84],
            &Bytes::from_static(body),
            Instant::now(),
        )
    }

    /// The frames in what the connection queued, as (type, flags, stream, payload length).
    fn frames(out: &[u8]) -> Vec<(u8, u8, u32, usize)> {
        let mut at = 0;
        let mut seen = Vec::new();
        while let Some(h) = Head::parse(&out[at..]) {
            seen.push((h.kind, h.flags, h.stream, h.len));
            at += frame::HEADER_LEN + h.len;
        }
        seen
    }

    #[test]
    fn the_set_up_says_the_preface_and_acknowledges_the_server_s_settings() {
        let c = State::new(false);
        assert!(c.out.starts_with(frame::PREFACE));
        let kinds: Vec<u8> = frames(&c.out[frame::PREFACE.len()..])
            .iter()
            .map(|f| f.0)
            .collect();
        assert_eq!(kinds, [frame::SETTINGS, frame::WINDOW_UPDATE, frame::PING]);
        let mut c = State::new(false);
        c.out.clear();
        c.receive(
            &settings(&[(frame::SETTINGS_MAX_CONCURRENT_STREAMS, 2)]),
            Instant::now(),
        );
        assert!(!c.ready(), "the PING is not answered yet");
        assert_eq!(c.max_streams, Some(2));
        assert!(frames(&c.out).contains(&(frame::SETTINGS, frame::ACK, 0, 0)));
    }

    #[test]
    fn no_more_streams_open_than_the_server_allows_and_the_next_opens_when_one_ends() {
        let mut c = ready(&[(frame::SETTINGS_MAX_CONCURRENT_STREAMS, 2)]);
        assert_eq!(open(&mut c, b""), Some(1));
        assert_eq!(open(&mut c, b""), Some(3));
        let t = c.ticket();
        let block = [0x82u8];
        let none = Bytes::new();
        assert_eq!(
            c.try_open(t, Waker::noop(), &block, &none, Instant::now()),
            None
        );
        // Stream 1's reply: :status 200 (static index 8) and six bytes of body.
        let now = Instant::now();
        c.receive(
            &frame_of(frame::HEADERS, frame::END_HEADERS, 1, &[0x88]),
            now,
        );
        c.receive(
            &frame_of(frame::DATA, frame::END_STREAM, 1, b"hello\n"),
            now,
        );
        let reply = c.poll_reply(1, Waker::noop()).unwrap().unwrap();
        assert_eq!(reply.status, 200);
        assert_eq!((c.header_bytes, c.body_bytes, c.active), (1, 6, 1));
        assert_eq!(
            c.try_open(t, Waker::noop(), &block, &none, Instant::now()),
            Some(5)
        );
    }

    #[test]
    fn a_body_past_the_server_s_window_waits_for_it_and_the_wait_is_timed() {
        let mut c = ready(&[(frame::SETTINGS_INITIAL_WINDOW_SIZE, 10)]);
        let id = open(&mut c, b"0123456789abcdefghijklmno").unwrap();
        let sent = frames(&c.out);
        assert_eq!(sent[1], (frame::DATA, 0, id, 10), "{sent:?}");
        assert_eq!(c.stalls, 1);
        c.out.clear();
        let later = Instant::now() + Duration::from_millis(5);
        c.receive(
            &frame_of(frame::WINDOW_UPDATE, 0, id, &20u32.to_be_bytes()),
            later,
        );
        assert_eq!(frames(&c.out), [(frame::DATA, frame::END_STREAM, id, 15)]);
        assert!(c.stalled >= Duration::from_millis(4), "{:?}", c.stalled);
    }

    #[test]
    fn a_goaway_ends_the_streams_above_its_last_id_unprocessed_and_the_session_for_new_ones() {
        let mut c = ready(&[]);
        let (a, b) = (open(&mut c, b"").unwrap(), open(&mut c, b"").unwrap());
        let mut goaway = a.to_be_bytes().to_vec();
        goaway.extend(11u32.to_be_bytes());
        c.receive(&frame_of(frame::GOAWAY, 0, 0, &goaway), Instant::now());
        assert!(c.ended());
        assert_eq!(c.goaway, Some(GoAway { last: a, code: 11 }));
        assert_eq!(
            c.poll_reply(b, Waker::noop()),
            Some(Err(StreamEnd::AboveGoAway))
        );
        assert_eq!(
            c.poll_reply(a, Waker::noop()),
            None,
            "stream 1 may still be answered"
        );
        c.receive(
            &frame_of(frame::RST_STREAM, 0, a, &7u32.to_be_bytes()),
            Instant::now(),
        );
        assert_eq!(
            c.poll_reply(a, Waker::noop()),
            Some(Err(StreamEnd::Reset(7)))
        );
        assert_eq!(c.active, 0);
    }

    #[test]
    fn a_server_that_breaks_the_protocol_is_told_why_and_the_session_ends() {
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (frame_of(frame::PUSH_PROMISE, 0, 1, &[0; 4]), "PUSH_PROMISE"),
            (frame_of(frame::DATA, 0, 99, b"x"), "never opened"),
            (
                frame_of(frame::HEADERS, frame::PADDED, 1, &[9, 0x88]),
                "padding",
            ),
            (
                frame_of(frame::HEADERS, frame::END_HEADERS, 1, &[0xff, 0xff]),
                "HPACK",
            ),
            (frame_of(frame::PING, 0, 0, &[0; 3]), "PING"),
            (
                frame_of(frame::WINDOW_UPDATE, 0, 0, &0u32.to_be_bytes()),
                "WINDOW_UPDATE of 0",
            ),
            (
                frame_of(frame::CONTINUATION, 0, 1, &[]),
                "CONTINUATION without",
            ),
            (
                settings(&[(frame::SETTINGS_MAX_FRAME_SIZE, 10)]),
                "MAX_FRAME_SIZE",
            ),
            (vec![0, 0x40, 0x01, 0, 0, 0, 0, 0, 1], "over the 16,384"),
        ];
        for (input, says) in cases {
            let mut c = ready(&[]);
            let id = open(&mut c, b"").unwrap();
            wrote_all(&mut c);
            c.receive(&input, Instant::now());
            match &c.closed {
                Some(Closed::Protocol { what, .. }) => assert!(what.contains(says), "{what}"),
                other => panic!("{says}: {other:?}"),
            }
            assert_eq!(frames(&c.out)[0].0, frame::GOAWAY);
            // Its last stream id is the server's streams stampede acted on: none.
            assert_eq!(c.out[9..13], [0, 0, 0, 0], "{says}");
            assert_eq!(
                c.poll_reply(id, Waker::noop()),
                Some(Err(StreamEnd::Connection))
            );
        }
        let mut c = State::new(false);
        c.receive(b"HTTP/1.1 400 Bad Request\r\n\r\n", Instant::now());
        assert!(matches!(c.closed, Some(Closed::Protocol { .. })));
        assert_eq!(&c.first[..8], b"HTTP/1.1");
    }

    /// The payload of every frame of `kind` in what the connection queued.
    fn payloads(out: &[u8], kind: u8) -> Vec<Vec<u8>> {
        let mut at = 0;
        let mut seen = Vec::new();
        while let Some(h) = Head::parse(&out[at..]) {
            let p = &out[at + frame::HEADER_LEN..at + frame::HEADER_LEN + h.len];
            if h.kind == kind {
                seen.push(p.to_vec());
            }
            at += frame::HEADER_LEN + h.len;
        }
        seen
    }

    /// As the driver does: everything queued is taken and written to the socket.
    fn wrote_all(c: &mut State) {
        c.taken += c.out.len() as u64;
        c.written = c.taken;
        c.out.clear();
    }

    fn rst_count(c: &State) -> usize {
        frames(&c.out)
            .iter()
            .filter(|f| f.0 == frame::RST_STREAM)
            .count()
    }

    fn closed_with(c: &State) -> Option<u32> {
        match &c.closed {
            Some(Closed::Protocol { code, .. }) => Some(*code),
            _ => None,
        }
    }

    #[test]
    fn a_header_table_lowered_below_4096_is_signalled_at_the_start_of_the_next_header_block() {
        // nghttp2 (a decoder whose SETTINGS_HEADER_TABLE_SIZE went below the 4,096 the encoder may
        // use) refuses a block that does not open with a size update (RFC 7541 4.2).
        let mut c = ready(&[(0x1, 256)]);
        open(&mut c, b"").unwrap();
        open(&mut c, b"").unwrap();
        let blocks = payloads(&c.out, frame::HEADERS);
        assert_eq!(
            blocks[0],
            [0x20, 0x82, 0x86, 0x84],
            "size 0, then the request"
        );
        assert_eq!(blocks[1], [0x82, 0x86, 0x84], "said once");
        // Once at 0 the table can go no lower: later SETTINGS need no more updates.
        c.out.clear();
        c.receive(&settings(&[(0x1, 0)]), Instant::now());
        open(&mut c, b"").unwrap();
        assert_eq!(payloads(&c.out, frame::HEADERS)[0], [0x82, 0x86, 0x84]);
        // A table left at 4,096 or raised needs none.
        let mut c = ready(&[(0x1, 65_536)]);
        open(&mut c, b"").unwrap();
        assert_eq!(payloads(&c.out, frame::HEADERS)[0], [0x82, 0x86, 0x84]);
        // A size update makes the block longer by a byte; one filling a frame still splits right.
        let mut c = ready(&[(0x1, 0)]);
        let big = vec![0x82u8; frame::MAX_FRAME];
        let t = c.ticket();
        c.try_open(t, Waker::noop(), &big, &Bytes::new(), Instant::now())
            .unwrap();
        let f = frames(&c.out);
        assert_eq!(
            f[0],
            (frame::HEADERS, frame::END_STREAM, 1, frame::MAX_FRAME)
        );
        assert_eq!(f[1], (frame::CONTINUATION, frame::END_HEADERS, 1, 1));
    }

    #[test]
    fn a_reset_from_the_server_is_never_answered_with_a_reset_and_no_stream_is_reset_twice() {
        // A body waiting for window when the server resets the stream: nothing is said back
        // (RFC 9113 5.4.2).
        let mut c = ready(&[(frame::SETTINGS_INITIAL_WINDOW_SIZE, 10)]);
        let id = open(&mut c, b"0123456789abcdefghijklmno").unwrap();
        c.out.clear();
        c.receive(
            &frame_of(frame::RST_STREAM, 0, id, &frame::CANCEL.to_be_bytes()),
            Instant::now(),
        );
        assert_eq!(rst_count(&c), 0, "{:?}", frames(&c.out));
        assert_eq!(
            c.poll_reply(id, Waker::noop()),
            Some(Err(StreamEnd::Reset(8)))
        );
        // DATA before HEADERS on a stream whose body waits: one reset (PROTOCOL_ERROR), not a
        // second (CANCEL) for the body.
        let id = open(&mut c, b"0123456789abcdefghijklmno").unwrap();
        c.out.clear();
        c.receive(&frame_of(frame::DATA, 0, id, b"x"), Instant::now());
        assert_eq!(rst_count(&c), 1, "{:?}", frames(&c.out));
        // Given up after that, it is not reset again.
        c.forget(id);
        assert_eq!(rst_count(&c), 1, "{:?}", frames(&c.out));
    }

    #[test]
    fn a_reset_stampede_sends_itself_is_not_read_as_the_server_s() {
        // DATA before any HEADERS: stampede resets the stream (PROTOCOL_ERROR), not the server.
        let mut c = ready(&[]);
        let id = open(&mut c, b"").unwrap();
        c.receive(&frame_of(frame::DATA, 0, id, b"x"), Instant::now());
        let end = c.poll_reply(id, Waker::noop());
        assert!(
            !matches!(end, Some(Err(StreamEnd::Reset(_)))),
            "read as the server's reset: {end:?}"
        );
        assert_eq!(
            end,
            Some(Err(StreamEnd::ResetByUs {
                code: frame::PROTOCOL_ERROR,
                why: "DATA before the reply's HEADERS"
            }))
        );
    }

    #[test]
    fn streams_not_written_when_the_connection_drops_are_sent_again_not_failed() {
        // No GOAWAY: the socket fails with one request written and one still in the buffer.
        let mut c = ready(&[]);
        let written = open(&mut c, b"").unwrap();
        wrote_all(&mut c);
        let queued = open(&mut c, b"").unwrap();
        // Half of its header block: the server cannot have it whole.
        c.taken += c.out.len() as u64;
        c.written += 9 + 1;
        c.close(Closed::Io(std::io::ErrorKind::BrokenPipe.into()));
        assert_eq!(
            c.poll_reply(written, Waker::noop()),
            Some(Err(StreamEnd::Connection)),
            "the server may have taken it: failed"
        );
        assert_eq!(
            c.poll_reply(queued, Waker::noop()),
            Some(Err(StreamEnd::Unsent)),
            "never left: sent again"
        );
        assert_eq!(c.active, 0);
    }

    #[test]
    fn an_initial_window_raised_past_2_31_on_an_open_stream_is_a_flow_control_error() {
        let mut c = ready(&[]);
        let id = open(&mut c, b"").unwrap();
        // The stream's window to exactly 2^31-1: allowed.
        let inc = (frame::MAX_WINDOW - frame::DEFAULT_WINDOW) as u32;
        c.receive(
            &frame_of(frame::WINDOW_UPDATE, 0, id, &inc.to_be_bytes()),
            Instant::now(),
        );
        assert!(c.closed.is_none(), "{:?}", c.closed);
        // One more by SETTINGS (RFC 9113 6.9.2): a connection error.
        c.receive(
            &settings(&[(frame::SETTINGS_INITIAL_WINDOW_SIZE, 65_536)]),
            Instant::now(),
        );
        assert_eq!(
            closed_with(&c),
            Some(frame::FLOW_CONTROL_ERROR),
            "{:?}",
            c.closed
        );
    }

    #[test]
    fn a_1xx_that_ends_the_stream_is_not_taken_for_the_reply() {
        // :status 103 (literal, name index 8) with END_STREAM: malformed (RFC 9113 8.1).
        let mut c = ready(&[]);
        let id = open(&mut c, b"").unwrap();
        c.out.clear();
        c.receive(
            &frame_of(
                frame::HEADERS,
                frame::END_HEADERS | frame::END_STREAM,
                id,
                &[0x08, 0x03, b'1', b'0', b'3'],
            ),
            Instant::now(),
        );
        let end = c.poll_reply(id, Waker::noop());
        assert!(!matches!(end, Some(Ok(_))), "taken for the reply: {end:?}");
        assert!(end.is_some(), "the stream ended");
        assert_eq!(
            payloads(&c.out, frame::RST_STREAM),
            [frame::PROTOCOL_ERROR.to_be_bytes()]
        );
        assert_eq!(c.active, 0);
    }

    #[test]
    fn a_stalled_upload_given_up_still_counts_its_stall_time() {
        for session_ends in [false, true] {
            let mut c = ready(&[(frame::SETTINGS_INITIAL_WINDOW_SIZE, 10)]);
            let id = open(&mut c, b"0123456789abcdefghijklmno").unwrap();
            assert_eq!(c.stalls, 1);
            std::thread::sleep(Duration::from_millis(5));
            if session_ends {
                c.close(Closed::Eof);
                let _ = c.poll_reply(id, Waker::noop());
            } else {
                c.forget(id);
            }
            assert!(
                c.stalled >= Duration::from_millis(5),
                "session ends {session_ends}: {:?}",
                c.stalled
            );
        }
    }

    #[test]
    fn frames_on_idle_streams_are_a_connection_error() {
        // RFC 9113 5.1: on an idle stream only HEADERS and PRIORITY may come; stream 2 is a
        // server's (push is off), stream 5 is not opened yet.
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (frame_of(frame::DATA, 0, 2, b"x"), "DATA on 2"),
            (
                frame_of(frame::RST_STREAM, 0, 5, &frame::CANCEL.to_be_bytes()),
                "RST_STREAM on 5",
            ),
            (
                frame_of(frame::RST_STREAM, 0, 2, &frame::CANCEL.to_be_bytes()),
                "RST_STREAM on 2",
            ),
            (
                frame_of(frame::WINDOW_UPDATE, 0, 5, &1u32.to_be_bytes()),
                "WINDOW_UPDATE on 5",
            ),
            (
                frame_of(frame::WINDOW_UPDATE, 0, 4, &1u32.to_be_bytes()),
                "WINDOW_UPDATE on 4",
            ),
        ];
        for (input, case) in cases {
            let mut c = ready(&[]);
            open(&mut c, b"").unwrap();
            c.receive(&input, Instant::now());
            assert_eq!(
                closed_with(&c),
                Some(frame::PROTOCOL_ERROR),
                "{case}: {:?}",
                c.closed
            );
        }
        // PRIORITY on an idle stream is allowed.
        let mut c = ready(&[]);
        c.receive(&frame_of(frame::PRIORITY, 0, 9, &[0; 5]), Instant::now());
        assert!(c.closed.is_none(), "{:?}", c.closed);
    }

    /// `n` copies of `one`, as one read.
    fn times(one: &[u8], n: usize) -> Vec<u8> {
        one.repeat(n)
    }

    #[test]
    fn a_server_asking_for_acks_faster_than_it_reads_them_is_told_to_calm_down_and_cut_off() {
        let ping = frame_of(frame::PING, 0, 0, b"floodfld");
        let settings = settings(&[]);
        for (one, kind) in [(&ping, Flood::Pings), (&settings, Flood::Settings)] {
            // The socket takes nothing: the ACKs wait, up to the bound.
            let mut c = ready(&[]);
            let id = open(&mut c, b"").unwrap();
            wrote_all(&mut c);
            c.receive(&times(one, MAX_PENDING_ACKS), Instant::now());
            assert!(c.closed.is_none(), "{kind:?}: {:?}", c.closed);
            let queued = c.out.len();
            c.receive(one, Instant::now());
            assert!(
                matches!(c.closed, Some(Closed::Flood(k)) if k == kind),
                "{kind:?}: {:?}",
                c.closed
            );
            // Said after the ACKs already queued, and no ACK more.
            let said = frames(&c.out[queued..]);
            assert_eq!(said, [(frame::GOAWAY, 0, 0, 8)], "{kind:?}");
            assert_eq!(
                payloads(&c.out[queued..], frame::GOAWAY)[0][4..],
                frame::ENHANCE_YOUR_CALM.to_be_bytes()
            );
            assert_eq!(
                c.poll_reply(id, Waker::noop()),
                Some(Err(StreamEnd::Connection))
            );
            // A server that reads its socket may ask as often as it likes.
            let mut c = ready(&[]);
            for _ in 0..6 {
                c.receive(&times(one, MAX_PENDING_ACKS / 2), Instant::now());
                wrote_all(&mut c);
            }
            assert!(c.closed.is_none(), "{kind:?}: {:?}", c.closed);
            // Only what the socket has not taken counts: half taken, half a bound more fits.
            c.receive(&times(one, MAX_PENDING_ACKS), Instant::now());
            let half = c.out.len() / 2;
            c.taken += half as u64;
            c.written += half as u64;
            c.out.drain(..half);
            c.receive(&times(one, MAX_PENDING_ACKS / 2), Instant::now());
            assert!(c.closed.is_none(), "{kind:?}: {:?}", c.closed);
            c.receive(one, Instant::now());
            assert!(c.closed.is_some(), "{kind:?}");
        }
    }

    #[test]
    fn an_endless_header_block_of_empty_continuations_ends_the_session_as_a_flood() {
        let status_200 = frame_of(frame::HEADERS, 0, 1, &[0x88]);
        let empty = frame_of(frame::CONTINUATION, 0, 1, &[]);
        let mut c = ready(&[]);
        let id = open(&mut c, b"").unwrap();
        wrote_all(&mut c);
        c.receive(&status_200, Instant::now());
        c.receive(&times(&empty, MAX_CONTINUATIONS as usize), Instant::now());
        assert!(c.closed.is_none(), "{:?}", c.closed);
        c.receive(&empty, Instant::now());
        assert!(
            matches!(c.closed, Some(Closed::Flood(Flood::Continuations))),
            "{:?}",
            c.closed
        );
        assert_eq!(frames(&c.out), [(frame::GOAWAY, 0, 0, 8)]);
        assert_eq!(
            payloads(&c.out, frame::GOAWAY)[0][4..],
            frame::ENHANCE_YOUR_CALM.to_be_bytes()
        );
        assert_eq!(
            c.poll_reply(id, Waker::noop()),
            Some(Err(StreamEnd::Connection))
        );
        // Up to the bound, a block is a block: the last CONTINUATION ends it, and the reply comes.
        let mut c = ready(&[]);
        let id = open(&mut c, b"").unwrap();
        c.receive(&status_200, Instant::now());
        c.receive(
            &times(&empty, MAX_CONTINUATIONS as usize - 1),
            Instant::now(),
        );
        c.receive(
            &frame_of(frame::CONTINUATION, frame::END_HEADERS, 1, &[]),
            Instant::now(),
        );
        c.receive(
            &frame_of(frame::DATA, frame::END_STREAM, 1, b"ok"),
            Instant::now(),
        );
        assert!(c.closed.is_none(), "{:?}", c.closed);
        assert_eq!(
            c.poll_reply(id, Waker::noop()).unwrap().unwrap().status,
            200
        );
    }

    #[test]
    fn endless_informational_replies_reset_their_stream_as_a_flood_and_the_session_goes_on() {
        // :status 103 (literal, name index 8), never the final reply.
        let early = [0x08, 0x03, b'1', b'0', b'3'];
        let mut c = ready(&[]);
        let (a, b) = (open(&mut c, b"").unwrap(), open(&mut c, b"").unwrap());
        wrote_all(&mut c);
        let one = frame_of(frame::HEADERS, frame::END_HEADERS, a, &early);
        c.receive(&times(&one, usize::from(MAX_INFORMATIONAL)), Instant::now());
        assert_eq!(c.poll_reply(a, Waker::noop()), None, "still waiting");
        assert!(c.out.is_empty(), "{:?}", frames(&c.out));
        c.receive(&times(&one, 100), Instant::now());
        assert_eq!(
            c.poll_reply(a, Waker::noop()),
            Some(Err(StreamEnd::Flooded(Flood::Informational)))
        );
        assert_eq!(
            payloads(&c.out, frame::RST_STREAM),
            [frame::ENHANCE_YOUR_CALM.to_be_bytes()],
            "reset once"
        );
        assert!(c.closed.is_none(), "{:?}", c.closed);
        // The other stream, with as many 1xx as allowed, gets its reply.
        let one = frame_of(frame::HEADERS, frame::END_HEADERS, b, &early);
        c.receive(&times(&one, usize::from(MAX_INFORMATIONAL)), Instant::now());
        c.receive(
            &frame_of(
                frame::HEADERS,
                frame::END_HEADERS | frame::END_STREAM,
                b,
                &[0x88],
            ),
            Instant::now(),
        );
        assert_eq!(c.poll_reply(b, Waker::noop()).unwrap().unwrap().status, 200);
        assert_eq!(c.active, 0);
    }

    /// Any frame a server might send, as bytes: a real type or not, any flags, a small stream id.
    fn any_frame() -> impl Strategy<Value = Vec<u8>> {
        (
            0u8..12,
            any::<u8>(),
            0u32..8,
            proptest::collection::vec(any::<u8>(), 0..40),
        )
            .prop_map(|(kind, flags, stream, payload)| frame_of(kind, flags, stream, &payload))
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2_000))]

        /// The frame handling is ours, so it is fuzzed (here as real frames of any type, by
        /// `fuzz/`'s h2_frames as any bytes): whatever a server sends, in whatever order
        /// and cut wherever the reads cut it, nothing panics and the stream accounting holds.
        #[test]
        fn whatever_a_server_sends_nothing_panics_and_the_slots_add_up(
            frames in proptest::collection::vec(any_frame(), 0..24),
            cut in 1usize..64,
            opens in 0usize..4,
        ) {
            let mut c = ready(&[(frame::SETTINGS_MAX_CONCURRENT_STREAMS, 3)]);
            let mut ids = Vec::new();
            for _ in 0..opens {
                if let Some(id) = open(&mut c, b"body") {
                    ids.push(id);
                }
            }
            let input: Vec<u8> = frames.concat();
            let mut pending = Vec::new();
            for piece in input.chunks(cut) {
                pending.extend_from_slice(piece);
                let used = c.receive(&pending, Instant::now());
                pending.drain(..used);
                if c.closed.is_some() {
                    break;
                }
            }
            prop_assert!(c.active as usize <= ids.len());
            let open_now = c.streams.values().filter(|s| s.open).count();
            prop_assert_eq!(open_now, c.active as usize);
            for id in ids {
                let _ = c.poll_reply(id, Waker::noop());
                c.forget(id);
            }
            prop_assert_eq!(c.active, 0);
        }
    }
}
