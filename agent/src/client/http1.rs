//! The HTTP/1.1 exchange on one connection: a request written as its template's bytes, the reply
//! read into the connection's own buffer and parsed in place (`crate::response`), counted, not kept.
use std::cell::Cell;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Waker};
use std::time::Duration;

use shared::metrics::ErrorClass;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::time::Instant;

use super::failure::{Doing, Failure, SendError, is_closed};
use super::target::{Endpoint, Template};
use super::transport::{self, Stream};
use crate::recorder::Recorder;
use crate::response::{Chunked, Framing, MAX_HEAD, parse_head};

/// A read buffer starts this small (idle connections cost little) and grows for long bodies.
const BUF_START: usize = 4 * 1024;
const BUF_MAX: usize = 64 * 1024;

/// An open keep-alive connection, ready for one request at a time.
pub struct Conn {
    io: Stream,
    /// The target's address, for the words of a failure.
    peer: SocketAddr,
    /// Reply bytes received and not yet consumed.
    buf: Vec<u8>,
    /// It has carried a reply: an end before the next reply means the server dropped it while idle.
    reused: bool,
    /// The last reply ended the connection (Connection: close, HTTP/1.0, a body read to the close).
    ended: bool,
    /// Started and not yet proven: when, and within what its connect must be done. The first write
    /// proves it (see `Conn::open`).
    connecting: Option<(Instant, Duration)>,
    /// TCP_NODELAY is on.
    nodelay: bool,
}

/// A write no longer than this leaves in one segment on any path (536 bytes, the IPv4 default
/// MSS), so Nagle's algorithm, which holds back only a segment smaller than the MSS while earlier
/// data is unacknowledged, never delays it: it is the request's only segment, and every earlier
/// request was acknowledged by its reply. A longer one turns TCP_NODELAY on first.
const ONE_SEGMENT: usize = 536;

/// How one exchange went wrong.
enum Fault {
    Stale,
    Failed(Failure),
    /// A TLS peer closed without close_notify in the middle of a body (the end only for a body
    /// read to the close; elsewhere a conn-reset).
    Closed,
}

impl From<Failure> for Fault {
    fn from(f: Failure) -> Fault {
        Fault::Failed(f)
    }
}

impl Conn {
    /// Connects (TCP, then TLS if the target is https) within the connect timeout. A plain
    /// connection without a setup is only started: its first request's write proves it, within the
    /// connect timeout, and a connect that failed is that write's `SendError::Connect`. This spares
    /// the wake-up and the SO_ERROR of waiting for it, two of the dozen system calls a new connection
    /// per request costs. TLS and a setup wait for the connect as before: their first writes are not
    /// the request's.
    pub async fn open(target: &Endpoint, rec: &Rc<Recorder>) -> Result<Conn, ErrorClass> {
        let plain = target.tls.is_none() && target.setup.is_none();
        let (io, connecting) = if plain {
            let began = Instant::now();
            let io = transport::start(target, rec)?;
            (io, Some((began, target.connect_timeout)))
        } else {
            // Boxed: a connect waited for (and a TLS handshake) is a future of a kilobyte and more,
            // which would otherwise be built into, and moved with, every connection's task.
            (Box::pin(transport::open(target, rec)).await?, None)
        };
        Ok(Conn {
            io,
            peer: target.addr,
            buf: Vec::new(),
            reused: false,
            ended: false,
            nodelay: connecting.is_none(),
            connecting,
        })
    }

    /// Sends one request and reads the whole reply (counted, not kept). Latency counts from
    /// `intended`; the reply must be complete within `timeout` of the moment the request was written.
    /// `last` says no other request follows on this connection. `counted` is shared by a request's
    /// attempts: the first that writes it counts it as sent, and a resend after `Stale` does not.
    pub async fn send(
        &mut self,
        t: &Template,
        last: bool,
        intended: Instant,
        timeout: Duration,
        rec: &Recorder,
        counted: &Cell<bool>,
    ) -> Result<(), SendError> {
        // A kept-alive connection the server has closed (Connection: close, an idle timeout) is no
        // error of the target's: the caller reconnects and sends.
        if self.ended || (self.reused && self.closed_while_idle()) {
            return Err(SendError::Stale);
        }
        let wire = if last { &t.last } else { &t.wire };
        let written = match self.connecting.take() {
            Some((began, within)) => self
                .first_write(wire, began, within, rec)
                .await
                .map_err(SendError::Connect)?,
            None => 0,
        };
        let sent_at = Instant::now();
        // Counted as it first leaves (the live line shows what is sent now), once: a request the
        // server never saw is sent again and not counted again, so its count stays in the interval
        // it left in and is never taken back from one already reported.
        if !counted.replace(true) {
            rec.sent(t.index);
        }
        let outcome =
            tokio::time::timeout_at(sent_at + timeout, self.exchange(t, wire, written)).await;
        let failure = match outcome {
            Ok(Ok((status, ttfb))) => {
                rec.replied(t.index, status, ttfb, intended.elapsed());
                self.reused = true;
                return Ok(());
            }
            Ok(Err(Fault::Stale)) => return Err(SendError::Stale),
            // A socket-level timeout on an established connection is a reply that never came; its
            // latency is at least its age now.
            Ok(Err(Fault::Failed(Failure {
                class: ErrorClass::ConnectTimeout,
                ..
            })))
            | Err(_) => {
                rec.given_up(Some(t.index), intended.elapsed());
                let class = ErrorClass::ClientTimeout;
                rec.note(class, || {
                    format!("no complete reply within {timeout:?} (--timeout)").into()
                });
                return Err(SendError::Failed(class));
            }
            Ok(Err(Fault::Failed(f))) => f,
            Ok(Err(Fault::Closed)) => Failure::closed(Doing::ReadingBody),
        };
        rec.note(failure.class, || failure.words(self.peer));
        Err(SendError::Failed(failure.class))
    }

    /// Whether the idle connection has been closed (or spoken on unasked, which servers do just
    /// before closing: a 408). Costs no syscall while the socket has nothing to read: tokio keeps
    /// the readiness, cleared by the short read that ended the last reply.
    fn closed_while_idle(&mut self) -> bool {
        if !self.buf.is_empty() {
            return true;
        }
        let mut probe = [0u8; 1];
        let mut rb = ReadBuf::new(&mut probe);
        let mut cx = Context::from_waker(Waker::noop());
        // Ready means an end, an error or bytes nobody asked for: in each case the idle
        // connection is finished.
        Pin::new(&mut self.io)
            .poll_read(&mut cx, &mut rb)
            .is_ready()
    }

    /// Writes the first bytes of a started connection's first request: the connect's proof, its
    /// connect time counted up to the attempt that wrote them (the connection stood by then). A
    /// failure before any byte left is the connect's, in its words and class, within its timeout.
    async fn first_write(
        &mut self,
        wire: &[u8],
        began: Instant,
        within: Duration,
        rec: &Recorder,
    ) -> Result<usize, ErrorClass> {
        self.nodelay_for(wire.len());
        let mut tried = began;
        let io = &mut self.io;
        let write = std::future::poll_fn(|cx| {
            tried = Instant::now();
            Pin::new(&mut *io).poll_write(cx, wire)
        });
        let failure = match tokio::time::timeout_at(began + within, write).await {
            Ok(Ok(n)) if n > 0 => {
                rec.connected(tried - began);
                return Ok(n);
            }
            Ok(Ok(_)) => Failure::io(Doing::Connecting, io::ErrorKind::WriteZero.into()),
            Ok(Err(e)) => Failure::io(Doing::Connecting, e),
            Err(_) => return Err(transport::timed_out(self.peer, within, rec)),
        };
        Err(transport::failed(self.peer, rec, failure))
    }

    /// Turns TCP_NODELAY on before a write of more than one segment (see [`ONE_SEGMENT`]).
    fn nodelay_for(&mut self, len: usize) {
        if !self.nodelay && len > ONE_SEGMENT {
            self.nodelay = self.io.set_nodelay().is_ok();
        }
    }

    /// The exchange of `wire`, of which a started connection's first write sent `written` bytes.
    async fn exchange(
        &mut self,
        t: &Template,
        wire: &[u8],
        written: usize,
    ) -> Result<(u16, Duration), Fault> {
        if let Err(e) = self.write(&wire[written..]).await {
            // The server closed the idle connection just now: nothing reached it.
            return Err(
                if self.reused && is_closed(&e) && wire.len() <= STALE_WRITE_MAX {
                    Fault::Stale
                } else {
                    Failure::io(Doing::Writing, e).into()
                },
            );
        }
        // Time to first byte counts from the end of the write, not the upload of a large body.
        let written_at = Instant::now();
        let mut ttfb = None;
        loop {
            let head = loop {
                match parse_head(&self.buf, t.head) {
                    Ok(Some(head)) => break head,
                    Ok(None) => {}
                    Err(e) => return Err(Failure::head(e, &self.buf).into()),
                }
                // Closed (or reset) as the request arrived, on a connection that had served:
                // the server was done with it and never took this request.
                let stale = self.reused && ttfb.is_none();
                let n = match self.read(MAX_HEAD + 1).await {
                    Ok(n) => n,
                    Err(e) if stale && is_closed(&e) => return Err(Fault::Stale),
                    Err(e) => return Err(Failure::io(Doing::ReadingHead, e).into()),
                };
                if n == 0 {
                    return Err(if stale {
                        Fault::Stale
                    } else {
                        Failure::closed(Doing::ReadingHead).into()
                    });
                }
                ttfb.get_or_insert_with(|| written_at.elapsed());
            };
            self.buf.drain(..head.len);
            // Interim replies (100 Continue, 103 Early Hints) precede the real one.
            if (100..200).contains(&head.status) && head.status != 101 {
                continue;
            }
            self.body(head.framing).await?;
            self.ended = !head.keep_alive;
            return Ok((head.status, ttfb.unwrap_or_default()));
        }
    }

    /// The setup's exchange: the request written, the reply's status, head and body kept (a body up to
    /// `SETUP_BODY_MAX`) for its extractions. Not counted as the mix's.
    pub async fn setup(
        &mut self,
        t: &Template,
        timeout: Duration,
    ) -> Result<(u16, Vec<u8>, Vec<u8>), ErrorClass> {
        let exchange = async {
            self.write(&t.wire)
                .await
                .map_err(|e| Failure::io(Doing::Writing, e))?;
            let head = loop {
                match parse_head(&self.buf, t.head) {
                    Ok(Some(head)) if (100..200).contains(&head.status) && head.status != 101 => {
                        self.buf.drain(..head.len);
                    }
                    Ok(Some(head)) => break head,
                    Ok(None) => {
                        if self
                            .read(MAX_HEAD + 1)
                            .await
                            .map_err(|e| Failure::io(Doing::ReadingHead, e))?
                            == 0
                        {
                            return Err(Failure::closed(Doing::ReadingHead));
                        }
                    }
                    Err(e) => return Err(Failure::head(e, &self.buf)),
                }
            };
            let raw_head: Vec<u8> = self.buf.drain(..head.len).collect();
            let mut body = Vec::new();
            match head.framing {
                Framing::None => {}
                Framing::Length(n) => {
                    while (self.buf.len() as u64) < n {
                        if self
                            .read(BUF_MAX)
                            .await
                            .map_err(|e| Failure::io(Doing::ReadingBody, e))?
                            == 0
                        {
                            return Err(Failure::closed(Doing::ReadingBody));
                        }
                    }
                    body.extend(self.buf.drain(..n as usize));
                }
                Framing::Chunked => {
                    let mut chunks = Chunked::new();
                    let mut raw = Vec::new();
                    loop {
                        let used = chunks.feed(&self.buf).map_err(|_| Failure::chunked())?;
                        raw.extend(self.buf.drain(..used));
                        if chunks.is_done() {
                            break;
                        }
                        if self
                            .read(BUF_MAX)
                            .await
                            .map_err(|e| Failure::io(Doing::ReadingBody, e))?
                            == 0
                        {
                            return Err(Failure::closed(Doing::ReadingBody));
                        }
                    }
                    body = dechunk(&raw);
                }
                Framing::UntilClose => {
                    while self.read(BUF_MAX).await.unwrap_or(0) > 0 {}
                    body = std::mem::take(&mut self.buf);
                }
            }
            self.ended = !head.keep_alive;
            self.reused = true;
            Ok((head.status, raw_head, body))
        };
        match tokio::time::timeout(timeout, exchange).await {
            Ok(Ok(reply)) => Ok(reply),
            Ok(Err(f)) => Err(f.class),
            Err(_) => Err(ErrorClass::ClientTimeout),
        }
    }

    /// Reads and drops the body; the buffer keeps only bytes past its end.
    async fn body(&mut self, framing: Framing) -> Result<(), Fault> {
        let mut reads = 0u32;
        let reset = || Failure::closed(Doing::ReadingBody).into();
        match framing {
            Framing::None => Ok(()),
            Framing::Length(mut left) => loop {
                let take = (self.buf.len() as u64).min(left) as usize;
                self.buf.drain(..take);
                left -= take as u64;
                if left == 0 {
                    return Ok(());
                }
                if self.body_read(&mut reads).await? == 0 {
                    return Err(reset());
                }
            },
            Framing::Chunked => {
                let mut chunks = Chunked::new();
                loop {
                    let used = chunks
                        .feed(&self.buf)
                        .map_err(|_| Fault::Failed(Failure::chunked()))?;
                    self.buf.drain(..used);
                    if chunks.is_done() {
                        return Ok(());
                    }
                    if self.body_read(&mut reads).await? == 0 {
                        return Err(reset());
                    }
                }
            }
            Framing::UntilClose => loop {
                self.buf.clear();
                match self.body_read(&mut reads).await {
                    Ok(0) => return Ok(()),
                    Ok(_) => {}
                    // The close is the end of this body, with or without a TLS close_notify (as
                    // curl and hyper read it).
                    Err(Fault::Closed) => return Ok(()),
                    Err(f) => return Err(f),
                }
            },
        }
    }

    /// A read of body bytes. A long body arriving as fast as memory copies would keep this task on
    /// the thread for many reads in a row (tokio's budget allows 128), delaying every arrival
    /// scheduled meanwhile; yielding between reads keeps the schedule, at one task switch per 64 KiB.
    async fn body_read(&mut self, reads: &mut u32) -> Result<usize, Fault> {
        if *reads > 0 {
            tokio::task::yield_now().await;
        }
        *reads += 1;
        self.read(BUF_MAX).await.map_err(|e| {
            if e.kind() == io::ErrorKind::UnexpectedEof {
                Fault::Closed
            } else {
                Failure::io(Doing::ReadingBody, e).into()
            }
        })
    }

    /// Reads what the socket has into the buffer. It grows when a read filled it (a long body, a long
    /// head), up to `limit`, so idle connections stay small and big replies take few reads.
    async fn read(&mut self, limit: usize) -> io::Result<usize> {
        if self.buf.capacity() == 0 {
            self.buf.reserve(BUF_START);
        } else if self.buf.len() == self.buf.capacity() {
            self.buf.reserve(self.buf.capacity());
        }
        let spare = self.buf.capacity() - self.buf.len();
        let n = self.io.read_buf(&mut self.buf).await?;
        if n == spare && self.buf.capacity() < limit {
            self.buf.reserve(self.buf.capacity());
        }
        Ok(n)
    }

    /// After the last reply of a connection the server closes: waits (until `bound` ends) for its
    /// close before dropping the socket, so that the server, which closed first, keeps the TIME_WAIT
    /// and this port is free at once. A server that does not close in time leaves it to us.
    pub async fn linger(mut self, bound: impl std::future::Future<Output = ()>) {
        // Its close already seen with the reply: no read to hear it again.
        if !self.ended || self.io.peer_closed() {
            return;
        }
        tokio::select! {
            _ = self.until_closed() => {}
            _ = bound => {}
        }
    }

    /// Returns when the server has closed (or the connection failed). On a plain connection the
    /// close is seen in the readiness that announces it, without the read that would return 0.
    async fn until_closed(&mut self) {
        loop {
            self.io.readable().await;
            if self.io.peer_closed() {
                return;
            }
            self.buf.clear();
            match self.read(BUF_START).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    }

    async fn write(&mut self, bytes: &[u8]) -> io::Result<()> {
        if bytes.is_empty() {
            return Ok(());
        }
        self.nodelay_for(bytes.len());
        self.io.write_all(bytes).await?;
        self.io.flush().await
    }
}

/// A chunked body's data, from its complete bytes (already checked by `Chunked`).
fn dechunk(mut raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(eol) = raw.windows(2).position(|w| w == b"\r\n") {
        let size = std::str::from_utf8(&raw[..eol])
            .ok()
            .and_then(|l| usize::from_str_radix(l.split(';').next()?.trim(), 16).ok())
            .unwrap_or(0);
        raw = &raw[eol + 2..];
        if size == 0 || size > raw.len() {
            break;
        }
        out.extend_from_slice(&raw[..size]);
        raw = raw.get(size + 2..).unwrap_or_default();
    }
    out
}

/// A request this small leaves in one write: a write error then means the server closed before it
/// took anything. A larger one may have been answered early (413, 401) and the server closed while we
/// still wrote; resending it would send a request the server already answered.
const STALE_WRITE_MAX: usize = 4 * 1024;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::testing::{acceptor, read_request, send_one, target};
    use http::header::{HOST, HeaderValue};
    use http::{HeaderMap, Method};
    use tokio::net::TcpListener;

    /// A POST of `len` bytes.
    fn upload(len: usize) -> Template {
        let mut h = HeaderMap::new();
        h.insert(HOST, HeaderValue::from_static("localhost"));
        Template::new(&Method::POST, &"/".parse().unwrap(), &h, &vec![b'x'; len])
    }

    /// A listener whose accept queue is full (backlog 0 and one connection waiting), so the kernel
    /// drops the next SYN and that connect stays in progress until the SYN is sent again (1 s).
    fn full_listener() -> (std::net::TcpListener, std::net::TcpStream) {
        let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
        s.bind(&"127.0.0.1:0".parse::<SocketAddr>().unwrap().into())
            .unwrap();
        s.listen(0).unwrap();
        let l: std::net::TcpListener = s.into();
        let waiting = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        (l, waiting)
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_connect_still_in_progress_at_the_first_write_is_waited_for_and_timed() {
        let (l, waiting) = full_listener();
        let addr = l.local_addr().unwrap();
        let server = std::thread::spawn(move || {
            // Room in the queue after 150 ms; the dropped SYN is sent again about 1 s in.
            std::thread::sleep(Duration::from_millis(150));
            drop(l.accept().unwrap());
            let (mut s, _) = l.accept().unwrap();
            let mut got = [0u8; 1024];
            let _ = std::io::Read::read(&mut s, &mut got).unwrap();
            std::io::Write::write_all(&mut s, b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
                .unwrap();
        });
        let t = target(addr, false);
        let rec = Rc::new(Recorder::default());
        let mut c = Conn::open(&t, &rec).await.unwrap();
        assert!(c.connecting.is_some(), "a plain connection is only started");
        assert_eq!(
            send_one(&mut c, &t.templates[0], t.timeout, &rec).await,
            Ok(())
        );
        server.join().unwrap();
        drop(waiting);
        let s = rec.swap();
        assert_eq!(s.counters.connections, 1);
        // Its connect time is the handshake's, not the moment the first send was tried.
        let connect_ms = s.hist.connect.max() as f64 / 1000.0;
        assert!(connect_ms > 500.0, "connect time {connect_ms} ms");
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_connect_not_done_within_the_connect_timeout_is_the_connect_s_failure() {
        let (l, waiting) = full_listener();
        let mut t = target(l.local_addr().unwrap(), false);
        t.connect_timeout = Duration::from_millis(300);
        let rec = Rc::new(Recorder::default());
        let mut c = Conn::open(&t, &rec).await.unwrap();
        let r = send_one(&mut c, &t.templates[0], t.timeout, &rec).await;
        assert_eq!(r, Err(SendError::Connect(ErrorClass::ConnectTimeout)));
        let s = rec.swap();
        assert_eq!(s.counters.connections, 0);
        assert_eq!(
            s.counters.requests, 0,
            "nothing left: the request is not counted as sent"
        );
        assert!(
            s.messages
                .get(ErrorClass::ConnectTimeout)
                .is_some_and(|w| w.contains("not established within 300ms")),
            "{:?}",
            s.messages.get(ErrorClass::ConnectTimeout)
        );
        drop((l, waiting));
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_request_longer_than_a_segment_turns_nodelay_on_a_short_one_does_not() {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        tokio::spawn(async move {
            loop {
                let (mut s, _) = l.accept().await.unwrap();
                tokio::spawn(async move {
                    let mut got = vec![0u8; 1 << 16];
                    let _ = s.read(&mut got).await;
                    let _ = s
                        .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
                        .await;
                });
            }
        });
        let mut t = target(addr, false);
        for (len, nodelay) in [(10, false), (ONE_SEGMENT + 1, true)] {
            t.templates = std::sync::Arc::new(vec![upload(len)]);
            let rec = Rc::new(Recorder::default());
            let mut c = Conn::open(&t, &rec).await.unwrap();
            assert!(!c.nodelay);
            assert_eq!(
                send_one(&mut c, &t.templates[0], t.timeout, &rec).await,
                Ok(())
            );
            assert_eq!(c.nodelay, nodelay, "a body of {len} bytes");
            let fd = match &c.io {
                Stream::Plain(_) => c.io.tcp_nodelay().unwrap(),
                Stream::Tls(_) => unreachable!(),
            };
            assert_eq!(fd, nodelay, "the socket's TCP_NODELAY, body of {len}");
        }
    }

    async fn send(c: &mut Conn, t: &Endpoint, last: bool) -> Result<(), SendError> {
        let rec = Recorder::default();
        c.send(
            &t.templates[0],
            last,
            Instant::now(),
            t.timeout,
            &rec,
            &Cell::new(false),
        )
        .await
    }

    #[tokio::test(flavor = "current_thread")]
    async fn tls_body_to_the_close_without_close_notify_is_complete() {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let acc = acceptor();
        tokio::spawn(async move {
            let (tcp, _) = l.accept().await.unwrap();
            let mut s = acc.accept(tcp).await.unwrap();
            read_request(&mut s).await;
            s.write_all(b"HTTP/1.1 200 OK\r\n\r\nhello").await.unwrap();
            s.flush().await.unwrap();
            // Dropped without close_notify, as many servers do.
        });
        let t = target(addr, true);
        let mut c = Conn::open(&t, &Rc::new(Recorder::default())).await.unwrap();
        assert_eq!(send(&mut c, &t, false).await, Ok(()));
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_close_as_the_request_arrives_is_stale_over_tcp_and_tls() {
        for tls in [false, true] {
            let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = l.local_addr().unwrap();
            let acc = acceptor();
            tokio::spawn(async move {
                let (tcp, _) = l.accept().await.unwrap();
                let reply = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
                if tls {
                    let mut s = acc.accept(tcp).await.unwrap();
                    read_request(&mut s).await;
                    s.write_all(reply).await.unwrap();
                    s.flush().await.unwrap();
                    read_request(&mut s).await;
                    // A TCP close with nothing unread (a FIN, not a reset), no close_notify.
                    drop(s.into_inner().0);
                } else {
                    let mut s = tcp;
                    read_request(&mut s).await;
                    s.write_all(reply).await.unwrap();
                    read_request(&mut s).await;
                }
            });
            let t = target(addr, tls);
            let mut c = Conn::open(&t, &Rc::new(Recorder::default())).await.unwrap();
            assert_eq!(send(&mut c, &t, false).await, Ok(()), "tls {tls}");
            assert_eq!(
                send(&mut c, &t, false).await,
                Err(SendError::Stale),
                "tls {tls}"
            );
        }
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_request_awaiting_its_reply_is_counted_as_sent() {
        // The live line's `sent` comes from this counter: counted only at the reply, a stalled
        // target showed 0 sent while requests went out, and the rate disagreed with the table's.
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        tokio::spawn(async move {
            let (mut s, _) = l.accept().await.unwrap();
            read_request(&mut s).await;
            tokio::time::sleep(Duration::from_secs(30)).await;
        });
        let t = target(addr, false);
        let rec = Rc::new(Recorder::default());
        let mut c = Conn::open(&t, &rec).await.unwrap();
        let sending = send_one(&mut c, &t.templates[0], t.timeout, &rec);
        let r = tokio::time::timeout(Duration::from_millis(300), sending).await;
        assert!(r.is_err(), "the server never answers");
        assert_eq!(rec.with(|s| s.counters.requests), 1, "counted as it left");
        assert_eq!(rec.with(|s| s.counters.replies), 0);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_large_request_cut_off_by_the_server_is_failed_not_resent() {
        // A server may answer an upload early (413, 401) and close with the body unread while it is
        // still being written. That request reached it: a resend would send it twice.
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        tokio::spawn(async move {
            let (mut s, _) = l.accept().await.unwrap();
            read_request(&mut s).await;
            s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                .await
                .unwrap();
            read_request(&mut s).await;
            let _ = s
                .write_all(b"HTTP/1.1 413 Payload Too Large\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                .await;
            // Dropped with most of the body unread: a reset, while the client still writes.
        });
        let t = target(addr, false);
        // Far more than the socket buffers take, so the write is still going when the reset comes.
        let big = upload(16 << 20);
        let rec = Recorder::default();
        let mut c = Conn::open(&t, &Rc::new(Recorder::default())).await.unwrap();
        assert_eq!(send(&mut c, &t, false).await, Ok(()));
        let r = send_one(&mut c, &big, t.timeout, &rec).await;
        assert!(matches!(r, Err(SendError::Failed(_))), "{r:?}");
        assert_eq!(rec.with(|s| s.counters.requests), 1, "counted as sent");
    }

    #[tokio::test(flavor = "current_thread")]
    async fn time_to_first_byte_counts_from_the_end_of_the_upload() {
        // The server takes 400 ms to read most of a 16 MB body, then the rest at once, and answers
        // right away: the reply's first byte is quick, the exchange is not.
        const BODY: usize = 16 << 20;
        const SLOW: usize = 12 << 20 | 512 << 10;
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        // A fixed, small receive buffer (no autotuning): the upload cannot finish into the
        // server's buffer ahead of its reads; the client's send buffer is at most 4 MB.
        socket.set_recv_buffer_size(64 << 10).unwrap();
        socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let l = socket.listen(1).unwrap();
        let addr = l.local_addr().unwrap();
        tokio::spawn(async move {
            let (mut s, _) = l.accept().await.unwrap();
            let mut got = 0;
            let mut chunk = vec![0u8; 64 << 10];
            // At least the body's length: the head's bytes only bring the answer forward.
            while got < BODY {
                if got < SLOW {
                    tokio::time::sleep(Duration::from_millis(2)).await;
                }
                let n = s.read(&mut chunk).await.unwrap();
                assert!(n > 0);
                got += n;
            }
            s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                .await
                .unwrap();
            tokio::time::sleep(Duration::from_millis(100)).await;
        });
        let mut t = target(addr, false);
        t.timeout = Duration::from_secs(10);
        let upload = upload(BODY);
        let rec = Recorder::default();
        let mut c = Conn::open(&t, &Rc::new(Recorder::default())).await.unwrap();
        let r = send_one(&mut c, &upload, t.timeout, &rec).await;
        assert_eq!(r, Ok(()));
        let (ttfb, latency) = rec.with(|s| (s.hist.ttfb.max(), s.hist.latency.max()));
        assert!(latency >= 350_000, "the upload took {latency} µs");
        assert!(ttfb < 150_000, "ttfb {ttfb} µs of a {latency} µs exchange");
    }

    /// Whether a local port is in TIME_WAIT (state 06 in /proc/net/tcp).
    fn in_time_wait(port: u16) -> bool {
        let table = std::fs::read_to_string("/proc/net/tcp").unwrap();
        table.lines().skip(1).any(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            f.len() > 3 && f[1].ends_with(&format!(":{port:04X}")) && f[3] == "06"
        })
    }

    #[tokio::test(flavor = "current_thread")]
    async fn after_the_last_call_the_server_closes_first() {
        // The server closes 5 ms after its reply (a proxy, a log write): lingering lets it, so the
        // TIME_WAIT is the server's and this port is free at once.
        for linger in [false, true] {
            let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = l.local_addr().unwrap();
            tokio::spawn(async move {
                let (mut s, _) = l.accept().await.unwrap();
                read_request(&mut s).await;
                s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
                    .await
                    .unwrap();
                tokio::time::sleep(Duration::from_millis(5)).await;
            });
            let t = target(addr, false);
            let mut c = Conn::open(&t, &Rc::new(Recorder::default())).await.unwrap();
            let port = c.io.local_addr().unwrap().port();
            assert_eq!(send(&mut c, &t, true).await, Ok(()));
            if linger {
                c.linger(tokio::time::sleep(Duration::from_millis(500)))
                    .await;
            } else {
                drop(c);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
            assert_eq!(in_time_wait(port), !linger, "linger {linger}");
        }
    }
}
