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
    let presented = presented_token(&req);
    if let Some(expected) = &ctx.token
        && !presented
            .as_deref()
            .is_some_and(|p| agent::session::token_matches(p, expected))
    {
        tracing::warn!(viewer = %peer, path = req.uri().path(), "live page: refused a request without the fleet's token");
        let mut r = text(
            StatusCode::UNAUTHORIZED,
            "the live page needs the fleet's token: add ?token=TOKEN to the address\n",
        );
        r.headers_mut()
            .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        return r;
    }
    let hub = &ctx.hub;
    match req.uri().path() {
        "/" => {
            // The stream is asked with the token the page was opened with: EventSource sends no
            // headers of its own.
            let stream = match (&ctx.token, &presented) {
                (Some(_), Some(t)) => format!("events?token={}", query_escape(t)),
                _ => "events".to_string(),
            };
            respond(
                StatusCode::OK,
                "text/html; charset=utf-8",
                hub.page(&stream),
            )
        }
        "/events" => {
            let after = req
                .headers()
                .get("last-event-id")
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.trim().parse::<u64>().ok())
                .unwrap_or(0);
            stream(hub.clone(), after, peer, done, ctx.ending.clone())
        }
        "/metrics" => match hub.metrics() {
            Some(m) => respond(StatusCode::OK, metrics::CONTENT_TYPE, m),
            None => text(StatusCode::NOT_FOUND, "no metrics are kept for this run\n"),
        },
        "/report.html" => match hub.report().map(std::fs::read) {
            Some(Ok(bytes)) => respond(StatusCode::OK, "text/html; charset=utf-8", bytes),
            Some(Err(e)) => text(
                StatusCode::NOT_FOUND,
                format!("the report could not be read: {e}\n"),
            ),
            None => text(
                StatusCode::NOT_FOUND,
                "the report is served once the run is over\n",
            ),
        },
        _ => text(
            StatusCode::NOT_FOUND,
            "not here: the live page is /, its stream /events, its metrics /metrics\n",
        ),
    }
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
                text
            } else {
                ": keep-alive\n\n".to_string()
            };
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
            tokio::select! {
                changed = changed.changed() => if changed.is_err() { return },
                () = tokio::time::sleep(KEEP_ALIVE) => {}
                () = done.cancelled() => return,
                () = ending.cancelled() => return,
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
    if let Some(t) = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
    {
        return Some(t.trim().to_string());
    }
    req.uri()
        .query()?
        .split('&')
        .find_map(|kv| kv.strip_prefix("token="))
        .map(query_unescape)
}

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
            b'+' => out.push(b' '),
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

    #[test]
    fn a_token_survives_the_page_s_stream_address() {
        for t in ["plain", "a b+c/d=e&f%g", "ünï"] {
            assert_eq!(query_unescape(&query_escape(t)), t);
        }
        assert_eq!(query_unescape("%4"), "%4");
        assert_eq!(query_unescape("%zz"), "%zz");
    }
}
