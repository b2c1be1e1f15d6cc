//! The HTTP/2 exchange: one session per connection (h2c with prior knowledge over TCP, h2 by ALPN
//! over TLS), its frames driven by a task of its own on the worker's thread, and streams opened on it
//! by any number of loops at once, a request each.
//!
//! The server's SETTINGS are known before the first stream opens (a PING answered after them ends
//! the set-up), so stampede never opens more streams than SETTINGS_MAX_CONCURRENT_STREAMS allows: a
//! stream past it waits in h2's queue until one closes. That wait is the client's queue, not the
//! server's time: it is returned to the caller, to be reported apart (the step's queue wait).
//!
//! A request the server did not process is `SendError::Stale`, as a request on a closed HTTP/1.1
//! connection is, and is sent again on a fresh session: a stream above a GOAWAY's last stream id
//! (RFC 9113 6.8), a stream refused (REFUSED_STREAM, 8.7), a request on a session that had ended.
use std::borrow::Cow;
use std::cell::Cell;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use h2::Reason;
use shared::metrics::{ErrorClass, UNLIMITED_STREAMS};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Instant;

use super::failure::{SendError, io_class};
use super::target::{Endpoint, PrepareError, Template};
use super::transport::{self, Stream};
use crate::recorder::Recorder;

/// How many of a connection's first bytes are kept, to name what came instead of HTTP/2.
const SNIFF: usize = 24;

/// One HTTP/2 session on its own connection. Streams are opened through it by any number of loops
/// of the worker's thread at once.
pub struct Session {
    send: h2::client::SendRequest<Bytes>,
    peer: SocketAddr,
    /// The connection ended, or the server said GOAWAY: no new stream may open on it.
    ended: Rc<Cell<bool>>,
    /// Its GOAWAY is counted, once, by the first stream to see it.
    goaway_counted: Cell<bool>,
    /// Streams asked of it so far.
    opened: Cell<u64>,
}

/// What one stream waited for and measured, for its caller to record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Opened {
    /// How long the stream waited for a free slot under the server's stream limit; `None` when it
    /// opened at once.
    pub waited: Option<Duration>,
}

/// Why a session could not be set up, in the words its failure class is noted with.
#[derive(Debug)]
pub(super) struct SetupError {
    pub(super) class: ErrorClass,
    pub(super) words: Cow<'static, str>,
}

impl Session {
    /// Connects (TCP, then TLS if the target is https), says the HTTP/2 preface and waits for the
    /// server's SETTINGS, all within the connect timeout; the session's frames are then driven on
    /// this thread until it is dropped and its streams are done, or the connection ends.
    pub async fn open(target: &Endpoint, rec: &Rc<Recorder>) -> Result<Session, ErrorClass> {
        let began = Instant::now();
        let io = transport::open(target, rec).await?;
        let left = target.connect_timeout.saturating_sub(began.elapsed());
        match tokio::time::timeout(left, handshake(io, target.addr)).await {
            Ok(Ok((send, conn))) => {
                let limit = send.current_max_send_streams();
                let limit =
                    u64::try_from(limit).map_or(UNLIMITED_STREAMS, |n| n.min(UNLIMITED_STREAMS));
                rec.with(|s| s.counters.saw_peer_max_streams(limit));
                let ended = Rc::new(Cell::new(false));
                let flag = ended.clone();
                tokio::task::spawn_local(async move {
                    // Its end is seen by every stream on it, each with its own class and words.
                    let _ = conn.await;
                    flag.set(true);
                });
                Ok(Session {
                    send,
                    peer: target.addr,
                    ended,
                    goaway_counted: Cell::new(false),
                    opened: Cell::new(0),
                })
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

    /// Whether the session can open no more streams (its connection ended, or GOAWAY came).
    pub fn ended(&self) -> bool {
        self.ended.get()
    }

    /// Counts why an ended session ended, if a GOAWAY did it and no stream has counted it yet: the
    /// session's error, which any handle reports.
    pub fn count_end(&self, rec: &Recorder) {
        if let Some(e) = self.session_error() {
            self.count(&e, rec);
        }
    }

    /// The session's own error, once it has one (a GOAWAY received, the connection lost).
    fn session_error(&self) -> Option<h2::Error> {
        let mut cx = Context::from_waker(std::task::Waker::noop());
        match self.send.clone().poll_ready(&mut cx) {
            Poll::Ready(Err(e)) => Some(e),
            _ => None,
        }
    }

    /// Sends one request on a stream of its own and reads the whole reply (counted, not kept).
    /// Latency counts from `intended`; the reply must be complete within `timeout` of the moment the
    /// stream was asked for.
    pub async fn send(
        &self,
        t: &Template,
        intended: Instant,
        timeout: Duration,
        rec: &Recorder,
    ) -> Result<Opened, SendError> {
        if self.ended.get() {
            self.count_end(rec);
            return Err(SendError::Stale);
        }
        let asked = Instant::now();
        self.opened.set(self.opened.get() + 1);
        // Counted as it leaves, as over HTTP/1.1, and taken back if the server never took it.
        rec.sent();
        let outcome = tokio::time::timeout_at(asked + timeout, self.exchange(t, asked)).await;
        match outcome {
            Ok(Ok((status, ttfb, opened))) => {
                rec.replied(status, ttfb, intended.elapsed());
                Ok(opened)
            }
            Ok(Err(e)) => {
                self.count(&e, rec);
                if unprocessed(&e) {
                    rec.unsend();
                    return Err(SendError::Stale);
                }
                let class = class_of(&e);
                // A stream cut off by the connection's end after the server's GOAWAY (abrupt, with
                // an error code) is the GOAWAY's doing: say so, and after how many streams, which
                // names the limit (keepalive_requests, 1,000).
                let ended_by = self
                    .session_error()
                    .filter(|s| s.is_go_away() && s.is_remote());
                if let Some(goaway) = &ended_by {
                    self.count(goaway, rec);
                }
                rec.note(class, || {
                    match ended_by
                        .as_ref()
                        .or((e.is_go_away() && e.is_remote()).then_some(&e))
                    {
                        Some(goaway) => format!(
                            "{} after {} streams, this one unanswered",
                            words(goaway, self.peer),
                            self.opened.get()
                        )
                        .into(),
                        None => words(&e, self.peer),
                    }
                });
                Err(SendError::Failed(class))
            }
            Err(_) => {
                // Dropping the stream resets it (CANCEL): the session goes on.
                rec.given_up(intended.elapsed());
                let class = ErrorClass::ClientTimeout;
                rec.note(class, || {
                    format!("no complete reply within {timeout:?} (--timeout)").into()
                });
                Err(SendError::Failed(class))
            }
        }
    }

    /// Counts what HTTP/2 adds to a step: a refused stream, the session's GOAWAY (once).
    fn count(&self, e: &h2::Error, rec: &Recorder) {
        if e.is_reset() && e.is_remote() && e.reason() == Some(Reason::REFUSED_STREAM) {
            rec.with(|s| s.counters.refused_streams += 1);
        }
        if e.is_go_away() && e.is_remote() {
            self.ended.set(true);
            if !self.goaway_counted.replace(true) {
                rec.with(|s| s.counters.goaways += 1);
            }
        }
    }

    async fn exchange(
        &self,
        t: &Template,
        asked: Instant,
    ) -> Result<(u16, Duration, Opened), h2::Error> {
        let mut send = self.send.clone();
        let no_body = t.body.is_empty();
        let (reply, mut body) = send.send_request(t.h2.clone(), no_body)?;
        if !no_body {
            body.send_data(t.body.clone(), true)?;
        }
        // Ready again once this stream has left h2's queue of streams waiting for a slot under the
        // server's limit: from here on the time is the server's.
        let mut polls = 0u32;
        std::future::poll_fn(|cx| {
            polls += 1;
            send.poll_ready(cx)
        })
        .await?;
        let opened = Instant::now();
        let reply = reply.await?;
        let ttfb = opened.elapsed();
        let status = reply.status().as_u16();
        let mut data = reply.into_body();
        while let Some(chunk) = data.data().await {
            let chunk = chunk?;
            // Read and forgotten: the window is given back at once, so a long body never stalls on
            // flow control of our own making.
            let _ = data.flow_control().release_capacity(chunk.len());
        }
        Ok((
            status,
            ttfb,
            Opened {
                waited: (polls > 1).then(|| opened - asked),
            },
        ))
    }
}

/// Asks the target, once before any load, whether it speaks HTTP/2 as asked: one connection, set up
/// as every session is, then closed. With `negotiate` (`--http auto` over TLS) the answer is whether
/// ALPN chose h2; otherwise a target that answers in something else, or allows no streams, is an
/// error now, before a step is planned. A target that cannot be reached is left to the run, which
/// counts its failures as over HTTP/1.1, unless the protocol depends on the answer.
pub(super) async fn probe(target: &Endpoint, negotiate: bool) -> Result<bool, PrepareError> {
    let target = target.clone();
    // On a thread of its own: a session lives on one thread, as the workers' do.
    let asked = tokio::task::spawn_blocking(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start the HTTP/2 probe: {e}"))?;
        rt.block_on(async {
            let rec = Rc::new(Recorder::default());
            let left = target.connect_timeout;
            let io = match transport::open(&target, &rec).await {
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
            match tokio::time::timeout(left, handshake(io, target.addr)).await {
                Ok(Ok(_)) => Ok(Ok(true)),
                Ok(Err(e)) if e.class == ErrorClass::Other => Err(e.words.into_owned()),
                Ok(Err(e)) => Ok(Err(e.words.into_owned())),
                Err(_) => Ok(Err(format!(
                    "{} sent no HTTP/2 SETTINGS within {left:?} (--connect-timeout)",
                    target.addr
                ))),
            }
        })
    })
    .await
    .map_err(|e| PrepareError::Protocol(format!("the HTTP/2 probe failed: {e}")))?;
    match asked {
        Ok(Ok(h2)) => Ok(h2),
        Ok(Err(_)) if !negotiate => Ok(true),
        Ok(Err(unreachable)) => Err(PrepareError::Protocol(format!(
            "--http auto cannot tell which HTTP the target speaks: {unreachable}"
        ))),
        Err(wrong) => Err(PrepareError::Protocol(wrong)),
    }
}

/// The set-up on an open connection: the preface and SETTINGS out, then a PING whose answer comes
/// after the server's SETTINGS, so its stream limit is known before any stream opens.
async fn handshake(
    io: Stream,
    peer: SocketAddr,
) -> Result<
    (
        h2::client::SendRequest<Bytes>,
        h2::client::Connection<Sniffed, Bytes>,
    ),
    SetupError,
> {
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
    let sniffed = Sniffed::new(io);
    let seen = sniffed.seen.clone();
    let mut builder = h2::client::Builder::new();
    // Until the server's SETTINGS say how many streams it takes, open one (the PING below waits for
    // them): a client that assumes the RFC's 100 has its streams past the server's limit refused.
    builder.initial_max_send_streams(1);
    let failed = |e: h2::Error| setup_error(&e, &seen.first(), tls_without_alpn, peer);
    let (send, mut conn) = builder.handshake(sniffed).await.map_err(&failed)?;
    let mut ping = conn
        .ping_pong()
        .expect("a new connection's ping_pong is there");
    let answered = tokio::select! {
        r = &mut conn => Err(r.err()),
        r = ping.ping(h2::Ping::opaque()) => r.map_err(Some),
    };
    match answered {
        Ok(_) => {}
        Err(Some(e)) => return Err(failed(e)),
        Err(None) => {
            return Err(SetupError {
                class: ErrorClass::ConnReset,
                words: format!("{peer} closed the HTTP/2 connection during its set-up").into(),
            });
        }
    }
    if send.current_max_send_streams() == 0 {
        return Err(SetupError {
            class: ErrorClass::Other,
            words: format!(
                "{peer}'s HTTP/2 SETTINGS allow 0 concurrent streams (SETTINGS_MAX_CONCURRENT_STREAMS 0): it takes no requests"
            )
            .into(),
        });
    }
    Ok((send, conn))
}

/// A set-up failure in words, naming what came instead of HTTP/2 when it was not HTTP/2.
fn setup_error(
    e: &h2::Error,
    first: &[u8],
    tls_without_alpn: bool,
    peer: SocketAddr,
) -> SetupError {
    if first.starts_with(b"HTTP/") {
        let line = first.split(|&b| b == b'\r').next().unwrap_or(first);
        return SetupError {
            class: ErrorClass::Other,
            words: format!(
                "{peer} answered the HTTP/2 preface in HTTP/1 (\"{}\"): it does not speak h2c on this port; use --http 1.1{}",
                line.escape_ascii(),
                if tls_without_alpn { "" } else { ", or h2:// over TLS" }
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
    SetupError {
        class: class_of(e),
        words: words(e, peer),
    }
}

/// Whether the server never processed the request, so it may be sent again: above a GOAWAY's last
/// stream id, refused, or refused by a session that had ended before the stream could open.
fn unprocessed(e: &h2::Error) -> bool {
    (e.is_go_away() && e.is_remote())
        || (e.is_reset() && e.reason() == Some(Reason::REFUSED_STREAM))
}

/// The error class of an HTTP/2 failure: an I/O error is classed as over HTTP/1.1, the server's
/// ending the stream or the session is conn-reset, the rest (a protocol error) other.
fn class_of(e: &h2::Error) -> ErrorClass {
    if let Some(io) = e.get_io() {
        return io_class(io);
    }
    if e.is_remote() {
        ErrorClass::ConnReset
    } else {
        ErrorClass::Other
    }
}

/// An HTTP/2 failure in words a person can act on.
fn words(e: &h2::Error, peer: SocketAddr) -> Cow<'static, str> {
    if let Some(io) = e.get_io() {
        return format!("HTTP/2 with {peer}: {io}").into();
    }
    let said = match e.reason() {
        Some(r) if e.is_go_away() && e.is_remote() => {
            // h2 writes an error code as RFC 9113 names it (ENHANCE_YOUR_CALM).
            format!("{peer} ended the HTTP/2 session (GOAWAY {r:?})")
        }
        Some(r) if e.is_reset() && e.is_remote() => {
            format!("{peer} reset the stream ({r:?})")
        }
        _ => format!("HTTP/2 with {peer}: {e}"),
    };
    said.into()
}

/// The session's connection, keeping its first bytes received to name what came instead of HTTP/2.
pub(super) struct Sniffed {
    io: Stream,
    seen: Rc<First>,
}

/// A connection's first bytes received.
#[derive(Default)]
struct First {
    bytes: Cell<[u8; SNIFF]>,
    len: Cell<usize>,
}

impl First {
    fn first(&self) -> Vec<u8> {
        self.bytes.get()[..self.len.get()].to_vec()
    }
}

impl Sniffed {
    fn new(io: Stream) -> Sniffed {
        Sniffed {
            io,
            seen: Rc::default(),
        }
    }
}

impl AsyncRead for Sniffed {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let me = self.get_mut();
        let before = buf.filled().len();
        let r = Pin::new(&mut me.io).poll_read(cx, buf);
        let have = me.seen.len.get();
        if have < SNIFF {
            let new = &buf.filled()[before..];
            let take = new.len().min(SNIFF - have);
            let mut bytes = me.seen.bytes.get();
            bytes[have..have + take].copy_from_slice(&new[..take]);
            me.seen.bytes.set(bytes);
            me.seen.len.set(have + take);
        }
        r
    }
}

impl AsyncWrite for Sniffed {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write(cx, buf)
    }
    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write_vectored(cx, bufs)
    }
    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use shared::plan::{HttpVersion, RequestSpec, UrlOrder, Workload};
    use tokio::io::AsyncWriteExt;
    use tokio::net::TcpListener;

    use super::*;
    use crate::client::testing::{acceptor_offering, read_request};

    async fn prepare(url: String, http: HttpVersion, streams: u32) -> Result<Endpoint, String> {
        let w = Workload::try_new(
            vec![RequestSpec::try_new("GET", &url, vec![], vec![]).unwrap()],
            UrlOrder::RoundRobin,
            Duration::from_secs(2),
            Duration::from_secs(2),
            true,
        )
        .unwrap()
        .with_http(http, streams)
        .unwrap();
        Endpoint::prepare(&w).await.map_err(|e| e.to_string())
    }

    /// A plain server that answers whatever comes with `reply`, once per connection.
    async fn answering(reply: &'static [u8]) -> SocketAddr {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = l.accept().await {
                tokio::spawn(async move {
                    let mut b = [0u8; 1024];
                    let _ = tokio::io::AsyncReadExt::read(&mut s, &mut b).await;
                    let _ = s.write_all(reply).await;
                });
            }
        });
        addr
    }

    /// An h2c (or, with ALPN `protocols`, TLS) server announcing `max_streams`, answering 200.
    async fn h2_server(max_streams: u32, tls: Option<&[&[u8]]>) -> SocketAddr {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let acc = tls.map(acceptor_offering);
        tokio::spawn(async move {
            while let Ok((tcp, _)) = l.accept().await {
                let acc = acc.clone();
                tokio::spawn(async move {
                    let mut b = h2::server::Builder::new();
                    b.max_concurrent_streams(max_streams);
                    let io: Box<dyn crate::client::testing::Io> = match acc {
                        None => Box::new(tcp),
                        Some(acc) => {
                            let Ok(mut s) = acc.accept(tcp).await else {
                                return;
                            };
                            if s.get_ref().1.alpn_protocol() != Some(b"h2") {
                                // An HTTP/1.1 server behind the same port.
                                read_request(&mut s).await;
                                let _ = s
                                    .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n")
                                    .await;
                                return;
                            }
                            Box::new(s)
                        }
                    };
                    let Ok(mut conn) = b.handshake::<_, Bytes>(io).await else {
                        return;
                    };
                    while let Some(Ok((_, mut respond))) = conn.accept().await {
                        let reply = http::Response::builder().status(200).body(()).unwrap();
                        let _ = respond.send_response(reply, true);
                    }
                });
            }
        });
        addr
    }

    #[tokio::test]
    async fn h2c_to_an_http1_server_names_what_came_back_before_any_load() {
        let addr = answering(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n").await;
        let e = prepare(format!("http://{addr}/"), HttpVersion::Http2, 1)
            .await
            .err()
            .unwrap();
        assert_eq!(
            e,
            format!(
                "before any load, {addr} answered the HTTP/2 preface in HTTP/1 (\"HTTP/1.1 400 Bad Request\"): it does not speak h2c on this port; use --http 1.1, or h2:// over TLS"
            )
        );
    }

    #[tokio::test]
    async fn a_server_allowing_no_streams_is_refused_before_any_load() {
        let addr = h2_server(0, None).await;
        let e = prepare(format!("http://{addr}/"), HttpVersion::Http2, 4)
            .await
            .err()
            .unwrap();
        assert!(e.contains("SETTINGS allow 0 concurrent streams"), "{e}");
    }

    #[tokio::test]
    async fn over_tls_h2_needs_the_server_s_alpn_and_auto_falls_back() {
        // ALPN offers only http/1.1.
        let h1 = h2_server(100, Some(&[b"http/1.1"])).await;
        let url = format!("https://localhost:{}/", h1.port());
        let e = prepare(url.clone(), HttpVersion::Http2, 4)
            .await
            .err()
            .unwrap();
        assert!(
            e.contains("does not offer HTTP/2 over TLS (its ALPN refused h2): use --http auto"),
            "{e}"
        );
        let auto = prepare(url, HttpVersion::Auto, 4).await.unwrap();
        assert_eq!((auto.http2, auto.streams), (false, 1));

        let h2 = h2_server(100, Some(&[b"h2", b"http/1.1"])).await;
        let url = format!("https://localhost:{}/", h2.port());
        let auto = prepare(url.clone(), HttpVersion::Auto, 4).await.unwrap();
        assert_eq!((auto.http2, auto.streams), (true, 4));
        let forced = prepare(url, HttpVersion::Http2, 4).await.unwrap();
        assert!(forced.http2);
    }

    #[tokio::test]
    async fn an_unreachable_target_is_left_to_the_run_unless_auto_must_ask_it() {
        let port = TcpListener::bind("127.0.0.1:0")
            .await
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let h2 = prepare(format!("http://127.0.0.1:{port}/"), HttpVersion::Http2, 2).await;
        assert!(h2.is_ok_and(|e| e.http2));
        let e = prepare(format!("https://localhost:{port}/"), HttpVersion::Auto, 2)
            .await
            .err()
            .unwrap();
        assert!(
            e.starts_with(
                "before any load, --http auto cannot tell which HTTP the target speaks: connection refused"
            ),
            "{e}"
        );
    }
}
