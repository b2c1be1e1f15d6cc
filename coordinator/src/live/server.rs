//! The live address's HTTP/1.1 server: the page (`/`), its event stream (`/events`, server-sent
//! events replayed from the start or from the browser's Last-Event-ID), `/metrics` for Prometheus,
//! and once the run is over its report (`/report.html`). Read-only: only GET and HEAD are
//! answered, no request body is read, and nothing received reaches the run.
//!
//! Bounded: at most [`MAX_VIEWERS`] connections at once (the next is answered 503 and closed), a
//! request's head within [`HEAD_WITHIN`], and a stream whose browser reads nothing for
//! [`SLOW_READER`] is dropped (said in the log), so a browser that never reads holds at most a few
//! messages of memory.
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, StreamBody, combinators::BoxBody};
use hyper::body::{Frame, Incoming};
use hyper::header::{self, HeaderValue};
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, mpsc};
use tokio::task::JoinHandle;
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;

use super::Hub;
use super::metrics;

/// Connections served at once: browsers and scrapers together.
pub const MAX_VIEWERS: usize = 64;
/// How long a stream may wait on a browser that reads nothing before it is dropped.
pub const SLOW_READER: Duration = Duration::from_secs(5);
/// How long a connection has to send a request's head.
pub const HEAD_WITHIN: Duration = Duration::from_secs(10);
/// A comment line on an idle stream this often, so a proxy or a browser does not take it for dead.
const KEEP_ALIVE: Duration = Duration::from_secs(15);
/// How long the streams have to end whole before the connections are closed.
const STREAMS_END: Duration = Duration::from_millis(200);
/// Stream messages waiting for a browser's connection to take them: one, so a browser that stops
/// reading holds back the very next message, and is dropped [`SLOW_READER`] after.
const STREAM_QUEUE: usize = 1;

#[derive(Debug, thiserror::Error)]
pub enum LiveError {
    #[error("--live {addr}: cannot listen there: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("--live: the run keeps no events to serve")]
    NoFeed,
}

/// A bound, serving live address.
pub struct Bound {
    pub addr: SocketAddr,
    stop: CancellationToken,
    /// Told first when the server stops: every stream ends its body cleanly.
    ending: CancellationToken,
    task: JoinHandle<()>,
}

impl Bound {
    /// Stops accepting and closes every connection.
    pub async fn stop(self) {
        // The streams first, so a reader sees its stream end whole rather than cut mid-chunk.
        self.ending.cancel();
        tokio::time::sleep(STREAMS_END).await;
        self.stop.cancel();
        let _ = self.task.await;
    }
}

type Body = BoxBody<Bytes, Infallible>;

struct Ctx {
    hub: Arc<Hub>,
    token: Option<String>,
    ending: CancellationToken,
    said: Said,
}

pub async fn bind(
    addr: SocketAddr,
    token: Option<String>,
    hub: Arc<Hub>,
) -> Result<Bound, LiveError> {
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|source| LiveError::Bind { addr, source })?;
    let addr = listener
        .local_addr()
        .map_err(|source| LiveError::Bind { addr, source })?;
    let stop = CancellationToken::new();
    let ending = CancellationToken::new();
    let ctx = Arc::new(Ctx {
        hub,
        token,
        ending: ending.clone(),
        said: Said::default(),
    });
    let task = tokio::spawn(accept(listener, ctx, stop.clone()));
    Ok(Bound {
        addr,
        stop,
        ending,
        task,
    })
}

async fn accept(listener: TcpListener, ctx: Arc<Ctx>, stop: CancellationToken) {
    let seats = Arc::new(Semaphore::new(MAX_VIEWERS));
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                // Out of descriptors, or a connection reset before it was taken: the next may do.
                Err(_) => { tokio::time::sleep(Duration::from_millis(50)).await; continue; }
            },
            () = stop.cancelled() => return,
        };
        small_send_buffer(&stream);
        let Ok(seat) = seats.clone().try_acquire_owned() else {
            tokio::spawn(refuse(stream));
            continue;
        };
        let ctx = ctx.clone();
        let done = stop.child_token();
        tokio::spawn(async move {
            let conn_done = done.clone();
            let svc = service_fn(move |req| {
                let ctx = ctx.clone();
                let done = conn_done.clone();
                async move { Ok::<_, Infallible>(handle(&ctx, req, peer, done)) }
            });
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEAD_WITHIN)
                // What hyper buffers of a response beyond the socket's own: small, so a browser
                // that stops reading holds back the stream's next message at once (and a request's
                // head is a GET's, never more).
                .max_buf_size(8192)
                .serve_connection(TokioIo::new(stream), svc);
            tokio::select! {
                _ = conn => {}
                () = done.cancelled() => {}
            }
            drop(seat);
        });
    }
}

/// What the kernel holds of a connection's unsent bytes: the few views a browser a network away
/// has in flight, not the megabytes autotuning would let a browser that stopped reading pile up.
const SEND_BUFFER: libc::c_int = 64 * 1024;

fn small_send_buffer(stream: &TcpStream) {
    use std::os::fd::AsRawFd;
    // SAFETY: setsockopt(2) on a socket this task owns, with a pointer to a local int and its size.
    let rc = unsafe {
        libc::setsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_SNDBUF,
            (&SEND_BUFFER as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        tracing::debug!(
            "live page: SO_SNDBUF not set: {}",
            std::io::Error::last_os_error()
        );
    }
}

/// The connection past the bound: told so in one response and closed.
async fn refuse(mut stream: TcpStream) {
    let body = format!(
        "the live page serves at most {MAX_VIEWERS} connections at once; try again later\n"
    );
    let response = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain; charset=utf-8\r\nretry-after: 5\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    let _ = tokio::time::timeout(Duration::from_secs(1), async {
        let _ = stream.write_all(response.as_bytes()).await;
        let _ = stream.shutdown().await;
    })
    .await;
}

fn text(status: StatusCode, body: impl Into<String>) -> Response<Body> {
    respond(status, "text/plain; charset=utf-8", body.into())
}

fn respond(status: StatusCode, kind: &'static str, body: impl Into<Bytes>) -> Response<Body> {
    let mut r = Response::new(Full::new(body.into()).boxed());
    *r.status_mut() = status;
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(kind));
    r.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

fn handle(
    ctx: &Ctx,
    req: Request<Incoming>,
    peer: SocketAddr,
    done: CancellationToken,
) -> Response<Body> {
    if req.method() != Method::GET && req.method() != Method::HEAD {
        let mut r = text(
            StatusCode::METHOD_NOT_ALLOWED,
            "the live page is read-only: GET only\n",
        );
        r.headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
        return r;
    }
    if let Some(refused) = refuse_stranger(ctx, &req, peer) {
        return refused;
    }
    let hub = &ctx.hub;
    match req.uri().path() {
        // The page's script asks its stream with the page's own query (the token, when one is
        // asked), so the page is the same bytes for every browser: rendered once an event.
        "/" => respond(StatusCode::OK, "text/html; charset=utf-8", hub.page()),
        "/events" => {
            // A reconnect says where it was (Last-Event-ID); a page opened mid-run, what it shows.
            let after = req
                .headers()
                .get("last-event-id")
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.trim().parse::<u64>().ok())
                .or_else(|| query(&req, "after").and_then(|v| v.parse().ok()))
                .unwrap_or(0);
            stream(hub.clone(), after, peer, done, ctx.ending.clone())
        }
        "/metrics" => match hub.metrics() {
            Some(m) => respond(StatusCode::OK, metrics::CONTENT_TYPE, m),
            None => text(StatusCode::NOT_FOUND, "no metrics are kept for this run\n"),
        },
        path => match hub.report() {
            // The run's report (side by side, the comparison), by its own name, once it is over.
            Some(report) if report.file_name().is_some_and(|n| path[1..] == *n) => {
                match std::fs::read(&report) {
                    Ok(bytes) => respond(StatusCode::OK, "text/html; charset=utf-8", bytes),
                    Err(e) => text(
                        StatusCode::NOT_FOUND,
                        format!("the report could not be read: {e}\n"),
                    ),
                }
            }
            _ => text(
                StatusCode::NOT_FOUND,
                "not here: the live page is /, its stream /events, its metrics /metrics (and its \
                 report once the run is over)\n",
            ),
        },
    }
}

/// The answer to a request that may not read the run, if this is one: without the page's token
/// where one is asked (401, and the connection closed, so a stranger holds no seat), or, on
/// loopback without a token, one that names another host (a web page of elsewhere whose name was
/// pointed at 127.0.0.1 to read the run: DNS rebinding).
fn refuse_stranger(ctx: &Ctx, req: &Request<Incoming>, peer: SocketAddr) -> Option<Response<Body>> {
    let mut r = match &ctx.token {
        Some(expected) => {
            let presented = presented_token(req);
            if presented
                .as_deref()
                .is_some_and(|p| agent::session::token_matches(p, expected))
            {
                return None;
            }
            ctx.said
                .say(peer, "a request without the live page's token");
            let mut r = text(
                StatusCode::UNAUTHORIZED,
                "the live page needs its token: open the address stampede printed (?token=...)\n",
            );
            r.headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            r
        }
        None => {
            let host = req
                .headers()
                .get(header::HOST)
                .and_then(|h| h.to_str().ok())
                .unwrap_or("");
            if is_loopback_host(host) {
                return None;
            }
            ctx.said.say(peer, "a request naming another host");
            text(
                StatusCode::FORBIDDEN,
                "the live page on loopback answers requests to 127.0.0.1, [::1] or localhost only\n",
            )
        }
    };
    r.headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    Some(r)
}

/// Whether a Host header names this machine's loopback: `127.x.y.z`, `[::1]` or `localhost`, with
/// or without a port.
fn is_loopback_host(host: &str) -> bool {
    let name = match host.strip_prefix('[') {
        Some(rest) => rest.split(']').next().unwrap_or(""),
        None => host.rsplit_once(':').map_or(host, |(h, _)| h),
    };
    name.eq_ignore_ascii_case("localhost")
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// What is said of refused requests: once a second per reason at most, so a stranger's flood is
/// not the log's.
#[derive(Default)]
struct Said(std::sync::Mutex<Vec<(&'static str, std::time::Instant)>>);

impl Said {
    fn say(&self, peer: SocketAddr, why: &'static str) {
        let now = std::time::Instant::now();
        let mut said = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, at)) = said.iter_mut().find(|(w, _)| *w == why) {
            if now.duration_since(*at) < Duration::from_secs(1) {
                return;
            }
            *at = now;
        } else {
            said.push((why, now));
        }
        tracing::warn!(viewer = %peer, "live page: refused {why}");
    }
}

/// A query parameter's value, unescaped.
fn query(req: &Request<Incoming>, key: &str) -> Option<String> {
    req.uri()
        .query()?
        .split('&')
        .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))
        .map(query_unescape)
}

/// The stream: every event after `after`, each with its id, then the view after the last; then the
/// same for each new event, until the run's server stops or the browser goes.
fn stream(
    hub: Arc<Hub>,
    after: u64,
    peer: SocketAddr,
    done: CancellationToken,
    ending: CancellationToken,
) -> Response<Body> {
    let (tx, rx) = mpsc::channel::<Result<Frame<Bytes>, Infallible>>(STREAM_QUEUE);
    tokio::spawn(async move {
        let mut changed = hub.subscribe();
        let mut sent = after;
        let mut first = true;
        // Set when the server stops (or the run's feed is gone): what is new is sent, then the
        // stream ends whole.
        let mut closing = false;
        loop {
            changed.mark_unchanged();
            let (lines, last, view) = hub.since(sent);
            let message = if first || last > sent {
                let mut text = String::from(if first { "retry: 1000\n\n" } else { "" });
                for (k, line) in lines.iter().enumerate() {
                    let id = sent + 1 + k as u64;
                    text.push_str(&format!("id: {id}\nevent: e\ndata: {line}\n\n"));
                }
                text.push_str(&format!("event: view\ndata: {view}\n\n"));
                sent = last;
                first = false;
                Some(text)
            } else if closing {
                None
            } else {
                Some(": keep-alive\n\n".to_string())
            };
            if let Some(message) = message {
                match tx
                    .send_timeout(Ok(Frame::data(Bytes::from(message))), SLOW_READER)
                    .await
                {
                    Ok(()) => {}
                    Err(mpsc::error::SendTimeoutError::Timeout(_)) => {
                        tracing::warn!(
                            viewer = %peer,
                            "live page: dropped a browser that read nothing for {} s",
                            SLOW_READER.as_secs()
                        );
                        done.cancel();
                        return;
                    }
                    Err(mpsc::error::SendTimeoutError::Closed(_)) => return,
                }
            }
            if closing {
                return;
            }
            tokio::select! {
                biased;
                () = done.cancelled() => return,
                () = ending.cancelled() => closing = true,
                changed = changed.changed() => closing = changed.is_err(),
                () = tokio::time::sleep(KEEP_ALIVE) => {}
            }
        }
    });
    let mut r = Response::new(BodyExt::boxed(StreamBody::new(ReceiverStream::new(rx))));
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

/// The token a request presents: `Authorization: Bearer T`, or `?token=T`.
fn presented_token(req: &Request<Incoming>) -> Option<String> {
    let header = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, t)| t.trim().to_string());
    header.or_else(|| query(req, "token"))
}

fn query_unescape(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => match (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                (Some(h), Some(l)) => {
                    out.push(h << 4 | l);
                    i += 3;
                    continue;
                }
                _ => out.push(b'%'),
            },
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn hex(b: u8) -> Option<u8> {
    (b as char).to_digit(16).map(|d| d as u8)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query_escape(s: &str) -> String {
        let mut out = String::new();
        for b in s.bytes() {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                out.push(b as char);
            } else {
                out.push_str(&format!("%{b:02X}"));
            }
        }
        out
    }

    #[test]
    fn only_loopback_names_are_loopback_hosts() {
        for h in [
            "127.0.0.1:5665",
            "127.1.2.3",
            "localhost:80",
            "LOCALHOST",
            "[::1]:5665",
            "[::1]",
        ] {
            assert!(is_loopback_host(h), "{h}");
        }
        for h in [
            "evil.example:5665",
            "10.0.0.1:5665",
            "",
            "[::2]:1",
            "localhost.evil:1",
            "0.0.0.0:1",
        ] {
            assert!(!is_loopback_host(h), "{h}");
        }
    }

    #[test]
    fn a_token_survives_the_page_s_stream_address() {
        for t in ["plain", "a b+c/d=e&f%g", "ünï"] {
            assert_eq!(query_unescape(&query_escape(t)), t);
        }
        assert_eq!(query_unescape("%4"), "%4");
        assert_eq!(query_unescape("%zz"), "%zz");
    }
}
