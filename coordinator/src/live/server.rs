//! The live address's HTTP/1.1 server: the page (`/`), its event stream (`/events`, server-sent
//! events replayed from the start or from the browser's Last-Event-ID), `/metrics` for Prometheus,
//! and once the run is over its report (`/report.html`). Read-only: only GET and HEAD are
//! answered, no request body is read, and nothing received reaches the run. What a request asks
//! for is decided by [`route`], a plain function of its method, target, headers and the token.
//!
//! Bounded, so that nobody without the token holds anything a token holder needs:
//! - a connection is *unproven* until a request on it passes the token check: at most
//!   [`MAX_UNPROVEN`] of them at once ([`MAX_UNPROVEN_PER_IP`] from one address: one more from it
//!   is closed at once; one more from elsewhere closes the oldest of the address holding the
//!   most), each closed [`PROVE_WITHIN`] after its accept unless proven;
//! - a *seat* is taken by the first request that passed the check, and held by its connection: at
//!   most [`MAX_VIEWERS`] ([`MAX_SEATS_PER_IP`] from one address); past them, 503;
//! - `/metrics` at most [`SCRAPES_PER_S`] a second per address (a burst of [`SCRAPE_BURST`]);
//!   beyond, 429. The body is encoded once a change, never once a scrape (`Hub::metrics`);
//! - a request's head within [`HEAD_WITHIN`], and a stream whose browser reads nothing for
//!   [`SLOW_READER`] is dropped (said in the log, one line a second), so a browser that never
//!   reads holds at most a few messages of memory.
use std::collections::{HashMap, VecDeque};
use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full, StreamBody, combinators::BoxBody};
use hyper::body::{Frame, Incoming};
use hyper::header::{self, HeaderValue};
use hyper::service::service_fn;
use hyper::{HeaderMap, Method, Request, Response, StatusCode, Uri};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;

use super::Hub;
use super::metrics;

/// Seats: connections that presented the token, served at once (browsers and scrapers together).
pub const MAX_VIEWERS: usize = 64;
/// Seats one address may hold: half, so one host (or one NAT) of token holders leaves room.
pub const MAX_SEATS_PER_IP: usize = 32;
/// Connections accepted and not yet proven (no request on them has passed the token check).
pub const MAX_UNPROVEN: usize = 64;
/// Unproven connections one address may hold; one more from it is closed at once, so a crowd from
/// one address can never push out a connection from another.
pub const MAX_UNPROVEN_PER_IP: usize = 8;
/// How long a connection has, from its accept, to send a request that passes the token check: a
/// browser's or a scraper's first request comes at once.
pub const PROVE_WITHIN: Duration = Duration::from_secs(3);
/// `/metrics` a second from one address, sustained (Prometheus scrapes every 15 s by default).
pub const SCRAPES_PER_S: f64 = 5.0;
/// `/metrics` one address may ask at once after a quiet spell.
pub const SCRAPE_BURST: f64 = 10.0;
/// How long a stream may wait on a browser that reads nothing before it is dropped.
pub const SLOW_READER: Duration = Duration::from_secs(5);
/// How long a connection has to send a request's head (and a kept-alive one to send its next).
pub const HEAD_WITHIN: Duration = Duration::from_secs(10);
/// A comment line on an idle stream this often, so a proxy or a browser does not take it for dead.
const KEEP_ALIVE: Duration = Duration::from_secs(15);
/// How long the streams have to end whole before the connections are closed.
const STREAMS_END: Duration = Duration::from_millis(200);
/// Stream messages waiting for a browser's connection to take them: one, so a browser that stops
/// reading holds back the very next message, and is dropped [`SLOW_READER`] after.
const STREAM_QUEUE: usize = 1;
/// Addresses whose scrapes are remembered; past it, those whose allowance is whole are forgotten
/// (and all of them if that is not enough), so a sweep of addresses cannot grow the map.
const SCRAPERS_KEPT: usize = 4096;

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
    door: Arc<Door>,
    scrapes: Scrapes,
    hush: Hush,
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
        door: Arc::default(),
        scrapes: Scrapes::default(),
        hush: Hush::default(),
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
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                // Out of descriptors, or a connection reset before it was taken: the next may do.
                Err(_) => { tokio::time::sleep(Duration::from_millis(50)).await; continue; }
            },
            () = stop.cancelled() => return,
        };
        if ctx.scrapes.exhausted(peer.ip(), Instant::now()) {
            // An address past its scrapes is closed at the door until its allowance refills:
            // a 429 read and parsed per request still cost a flood's worth of CPU (55,000 a
            // second from one wrk took a core from the run).
            ctx.hush.say(Refusal::Scrapes, peer.ip());
            drop(stream);
            continue;
        }
        let ticket = match ctx.door.arrive(peer.ip()) {
            Arrival::Let(ticket, closed) => {
                if let Some(closed) = closed {
                    ctx.hush.say(Refusal::Crowded, closed);
                }
                ticket
            }
            Arrival::Refused => {
                // Closed unanswered: an answer would be one more thing for the crowd to hold.
                ctx.hush.say(Refusal::Crowded, peer.ip());
                drop(stream);
                continue;
            }
        };
        small_send_buffer(&stream);
        tokio::spawn(serve(stream, peer, ticket, ctx.clone(), stop.child_token()));
    }
}

/// One connection, until it ends, the server stops, or it is turned away unproven.
async fn serve(
    stream: TcpStream,
    peer: SocketAddr,
    ticket: Ticket,
    ctx: Arc<Ctx>,
    done: CancellationToken,
) {
    let ticket = Arc::new(ticket);
    let turned_away = ticket.turned_away();
    let svc = {
        let (ctx, ticket, done) = (ctx.clone(), ticket.clone(), done.clone());
        service_fn(move |req| {
            let response = handle(&ctx, &ticket, req, peer, done.clone());
            async move { Ok::<_, Infallible>(response) }
        })
    };
    let conn = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(HEAD_WITHIN)
        // What hyper buffers of a response beyond the socket's own: small, so a browser that
        // stops reading holds back the stream's next message at once (and a request's head is a
        // GET's, never more).
        .max_buf_size(8192)
        .serve_connection(TokioIo::new(stream), svc);
    tokio::select! {
        _ = conn => {}
        () = done.cancelled() => {}
        () = turned_away => {}
    }
    ctx.door.leave(&ticket);
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

/// What is known of a connection at the door.
struct Ticket {
    id: u64,
    ip: IpAddr,
    /// Cancelled when the door closes it unproven to let a newer one in.
    closed: CancellationToken,
    /// Cancelled when a request on it passed the token check and took a seat.
    proven: CancellationToken,
    /// The seat, once taken; given back when the connection ends.
    seat: Mutex<Option<Seat>>,
}

impl Ticket {
    /// Resolves when the connection must be closed unproven: [`PROVE_WITHIN`] passed, or the door
    /// closed it; never once it is proven.
    fn turned_away(&self) -> impl Future<Output = ()> + use<> {
        let (closed, proven) = (self.closed.clone(), self.proven.clone());
        async move {
            tokio::select! {
                biased;
                () = proven.cancelled() => std::future::pending().await,
                () = closed.cancelled() => {}
                () = tokio::time::sleep(PROVE_WITHIN) => {}
            }
        }
    }

    fn seated(&self) -> bool {
        self.proven.is_cancelled()
    }
}

/// The connections that have not proven themselves yet, and the seats of those that have.
#[derive(Default)]
struct Door(Mutex<DoorState>);

#[derive(Default)]
struct DoorState {
    next: u64,
    /// Oldest first: (ticket id, address, its `closed`).
    unproven: VecDeque<(u64, IpAddr, CancellationToken)>,
    seats: HashMap<IpAddr, usize>,
    seated: usize,
}

enum Arrival {
    /// Let in unproven; the address of a connection closed to make room, if one was.
    Let(Ticket, Option<IpAddr>),
    /// Its address already holds [`MAX_UNPROVEN_PER_IP`] unproven connections.
    Refused,
}

/// Why a seat was not given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum NoSeat {
    /// Every seat, or every seat of the address, is taken.
    Full,
    /// The door closed the connection already (to let a newer one in).
    Closed,
}

impl Door {
    fn lock(&self) -> std::sync::MutexGuard<'_, DoorState> {
        // Counts only: whatever a panic left is still a count the next change corrects.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn arrive(&self, ip: IpAddr) -> Arrival {
        let mut d = self.lock();
        if d.unproven.iter().filter(|(_, i, _)| *i == ip).count() >= MAX_UNPROVEN_PER_IP {
            return Arrival::Refused;
        }
        let id = d.next;
        d.next += 1;
        let closed = CancellationToken::new();
        d.unproven.push_back((id, ip, closed.clone()));
        let mut made_room = None;
        if d.unproven.len() > MAX_UNPROVEN {
            // The oldest of the address holding the most: a crowd from a few addresses gives way
            // before anyone else's one connection does.
            let mut per_ip: HashMap<IpAddr, usize> = HashMap::new();
            for (_, i, _) in &d.unproven {
                *per_ip.entry(*i).or_default() += 1;
            }
            let most = per_ip.values().copied().max().unwrap_or(0);
            if let Some(at) = d.unproven.iter().position(|(_, i, _)| per_ip[i] == most)
                && let Some((_, i, token)) = d.unproven.remove(at)
            {
                token.cancel();
                made_room = Some(i);
            }
        }
        let ticket = Ticket {
            id,
            ip,
            closed,
            proven: CancellationToken::new(),
            seat: Mutex::new(None),
        };
        Arrival::Let(ticket, made_room)
    }

    /// A seat for the connection of `ticket`, now that a request on it passed the token check.
    fn seat_for(self: &Arc<Self>, ticket: &Ticket) -> Result<(), NoSeat> {
        let mut d = self.lock();
        let Some(at) = d.unproven.iter().position(|(i, _, _)| *i == ticket.id) else {
            return Err(NoSeat::Closed);
        };
        let mine = d.seats.get(&ticket.ip).copied().unwrap_or(0);
        if d.seated >= MAX_VIEWERS || mine >= MAX_SEATS_PER_IP {
            return Err(NoSeat::Full);
        }
        d.unproven.remove(at);
        d.seated += 1;
        *d.seats.entry(ticket.ip).or_default() += 1;
        drop(d);
        *ticket.seat.lock().unwrap_or_else(|e| e.into_inner()) = Some(Seat {
            door: self.clone(),
            ip: ticket.ip,
        });
        ticket.proven.cancel();
        Ok(())
    }

    /// The connection of `ticket` has ended: out of the unproven, its seat given back.
    fn leave(&self, ticket: &Ticket) {
        let seat = ticket.seat.lock().unwrap_or_else(|e| e.into_inner()).take();
        drop(seat);
        let mut d = self.lock();
        if let Some(at) = d.unproven.iter().position(|(i, _, _)| *i == ticket.id) {
            d.unproven.remove(at);
        }
    }

    #[cfg(test)]
    fn counts(&self) -> (usize, usize) {
        let d = self.lock();
        (d.unproven.len(), d.seated)
    }
}

/// A taken seat, given back when dropped.
struct Seat {
    door: Arc<Door>,
    ip: IpAddr,
}

impl Drop for Seat {
    fn drop(&mut self) {
        let mut d = self.door.lock();
        d.seated = d.seated.saturating_sub(1);
        if let Some(n) = d.seats.get_mut(&self.ip) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                d.seats.remove(&self.ip);
            }
        }
    }
}

/// Each address's allowance of scrapes: a token bucket of [`SCRAPE_BURST`] refilled at
/// [`SCRAPES_PER_S`].
#[derive(Default)]
struct Scrapes(Mutex<HashMap<IpAddr, (f64, Instant)>>);

impl Scrapes {
    /// Whether `ip` has spent its allowance and not yet a whole scrape of it back by `now`.
    fn exhausted(&self, ip: IpAddr, now: Instant) -> bool {
        let m = self.0.lock().unwrap_or_else(|e| e.into_inner());
        m.get(&ip).is_some_and(|(left, at)| {
            left + now.saturating_duration_since(*at).as_secs_f64() * SCRAPES_PER_S < 1.0
        })
    }

    /// Whether `ip` may scrape at `now` (and if so, the scrape is counted).
    fn allow(&self, ip: IpAddr, now: Instant) -> bool {
        let mut m = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if m.len() >= SCRAPERS_KEPT && !m.contains_key(&ip) {
            m.retain(|_, (left, at)| {
                *left + now.saturating_duration_since(*at).as_secs_f64() * SCRAPES_PER_S
                    < SCRAPE_BURST
            });
            if m.len() >= SCRAPERS_KEPT {
                m.clear();
            }
        }
        let (left, at) = m.entry(ip).or_insert((SCRAPE_BURST, now));
        *left = (*left + now.saturating_duration_since(*at).as_secs_f64() * SCRAPES_PER_S)
            .min(SCRAPE_BURST);
        *at = now;
        if *left >= 1.0 {
            *left -= 1.0;
            true
        } else {
            false
        }
    }
}

/// What is said in the log of what the server turned away: one line a second per reason at most,
/// the next one counting those not said, so a flood is not the log's.
#[derive(Default)]
struct Hush(shared::hush::Hush<Refusal>);

/// What the log says of a request or a connection turned away.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Refusal {
    /// A request without the page's token (or with a wrong one).
    NoToken,
    /// On loopback without a token, a request naming another host (DNS rebinding).
    OtherHost,
    /// A connection closed unproven to let a newer one in, or refused for its address's crowd.
    Crowded,
    /// A proven request with every seat (or its address's) taken.
    Full,
    /// A scrape beyond its address's allowance.
    Scrapes,
    /// A stream whose browser read nothing for [`SLOW_READER`].
    SlowReader,
}

impl Refusal {
    fn words(self) -> String {
        match self {
            Refusal::NoToken => "refused a request without the live page's token".into(),
            Refusal::OtherHost => "refused a request naming another host".into(),
            Refusal::Crowded => format!(
                "closed a connection that sent no request with the token (at most \
                 {MAX_UNPROVEN_PER_IP} from one address, {MAX_UNPROVEN} in all)"
            ),
            Refusal::Full => format!(
                "refused a viewer: all {MAX_VIEWERS} seats taken (or {MAX_SEATS_PER_IP} of its \
                 address)"
            ),
            Refusal::Scrapes => {
                format!("refused a scrape: more than {SCRAPES_PER_S} a second from one address")
            }
            Refusal::SlowReader => format!(
                "dropped a browser that read nothing for {} s",
                SLOW_READER.as_secs()
            ),
        }
    }
}

impl Hush {
    fn say(&self, why: Refusal, peer: impl std::fmt::Display) {
        if let Some(unlogged) = self.0.due(why, Instant::now()) {
            let words = why.words();
            if unlogged == 0 {
                tracing::warn!(viewer = %peer, "live page: {words}");
            } else {
                tracing::warn!(viewer = %peer, unlogged, "live page: {words}");
            }
        }
    }
}

/// What to tell a connection the server will not keep, and close it.
fn closing(mut r: Response<Body>) -> Response<Body> {
    r.headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    r
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

/// What a request asks for, once its method, its target and its token are checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// Not GET or HEAD: 405.
    NotAllowed,
    /// Without the page's token where one is asked (or with a wrong one): 401.
    NoToken,
    /// On loopback without a token, a Host (or a target's authority) naming another host: a web
    /// page of elsewhere whose name was pointed at 127.0.0.1 to read the run (DNS rebinding). 403.
    OtherHost,
    Page,
    /// The stream, from the event after this one.
    Events {
        after: u64,
    },
    Metrics,
    /// A file by its name (one path segment): the run's report once it is over, else 404.
    Named(String),
    /// Anything else, a target without a path among it (`GET 127.0.0.1:5665`, `OPTIONS *`): 404.
    NotFound,
}

impl Route {
    /// Whether the request may read the run: it passed the token (or loopback's Host) check.
    pub fn admitted(&self) -> bool {
        !matches!(self, Route::NotAllowed | Route::NoToken | Route::OtherHost)
    }
}

/// What a request asks for: its method first, then whether it may read the run (`token`: the
/// page's token when one is asked), then its path. Total over every method, target form and header
/// value: no input panics.
pub fn route(method: &Method, uri: &Uri, headers: &HeaderMap, token: Option<&str>) -> Route {
    if method != Method::GET && method != Method::HEAD {
        return Route::NotAllowed;
    }
    match token {
        Some(expected) => {
            let presented = presented_token(uri, headers);
            if !presented
                .as_deref()
                .is_some_and(|p| control::admission::token_matches(p, expected))
            {
                return Route::NoToken;
            }
        }
        None => {
            let host = headers
                .get(header::HOST)
                .and_then(|h| h.to_str().ok())
                .unwrap_or("");
            // A target in absolute form names its host itself, and that is the one that counts.
            let named = uri.authority().map_or(host, |a| a.as_str());
            if !is_loopback_host(host) || !is_loopback_host(named) {
                return Route::OtherHost;
            }
        }
    }
    match uri.path() {
        // The page's script asks its stream with the page's own query (the token, when one is
        // asked), so the page is the same bytes for every browser: rendered once an event.
        "/" => Route::Page,
        "/events" => {
            // A reconnect says where it was (Last-Event-ID); a page opened mid-run, what it shows.
            let after = headers
                .get("last-event-id")
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.trim().parse::<u64>().ok())
                .or_else(|| query(uri, "after").and_then(|v| v.parse().ok()))
                .unwrap_or(0);
            Route::Events { after }
        }
        "/metrics" => Route::Metrics,
        // An authority-form or asterisk-form target has no path: "" or "*".
        path => match path.strip_prefix('/') {
            Some(name) if !name.is_empty() && !name.contains('/') => Route::Named(name.into()),
            _ => Route::NotFound,
        },
    }
}

/// The live routes' fuzz target (`fuzz/fuzz_targets/live_routes.rs`): a request made of
/// whatever bytes (its first byte says whether a token is asked; then a method line, a target line
/// in any form, and `name: value` header lines) is routed without a panic, and admitted only with
/// GET or HEAD and, where a token is asked, only if the token is among what it presents.
pub fn fuzz_route(data: &[u8]) {
    const TOKEN: &str = "0123456789abcdef0123456789abcdef";
    let [flags, rest @ ..] = data else {
        return;
    };
    let mut lines = rest.split(|&b| b == b'\n');
    let (Some(method), Some(target)) = (lines.next(), lines.next()) else {
        return;
    };
    let (Ok(method), Ok(uri)) = (Method::from_bytes(method), Uri::try_from(target)) else {
        return;
    };
    let mut headers = HeaderMap::new();
    for line in lines {
        let Some(colon) = line.iter().position(|&b| b == b':') else {
            continue;
        };
        if let (Ok(name), Ok(value)) = (
            header::HeaderName::from_bytes(&line[..colon]),
            HeaderValue::from_bytes(line[colon + 1..].trim_ascii()),
        ) {
            headers.append(name, value);
        }
    }
    let token = (flags & 1 == 1).then_some(TOKEN);
    let routed = route(&method, &uri, &headers, token);
    if !routed.admitted() {
        return;
    }
    assert!(method == Method::GET || method == Method::HEAD, "{method}");
    if token.is_some() {
        let in_target = query_unescape(&String::from_utf8_lossy(target)).contains(TOKEN);
        let in_header = headers
            .values()
            .any(|v| String::from_utf8_lossy(v.as_bytes()).contains(TOKEN));
        assert!(
            in_target || in_header,
            "admitted without the token: {routed:?}"
        );
    } else {
        let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
        assert!(host.is_some_and(is_loopback_host), "{routed:?}");
    }
    if let Route::Named(name) = &routed {
        assert!(!name.is_empty() && !name.contains('/'), "{name}");
    }
}

fn handle(
    ctx: &Arc<Ctx>,
    ticket: &Arc<Ticket>,
    req: Request<Incoming>,
    peer: SocketAddr,
    done: CancellationToken,
) -> Response<Body> {
    let route = route(req.method(), req.uri(), req.headers(), ctx.token.as_deref());
    match route {
        Route::NotAllowed => {
            let mut r = text(
                StatusCode::METHOD_NOT_ALLOWED,
                "the live page is read-only: GET only\n",
            );
            r.headers_mut()
                .insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
            return r;
        }
        // Closed after the answer, so a stranger holds no connection (it never held a seat).
        Route::NoToken => {
            ctx.hush.say(Refusal::NoToken, peer);
            let mut r = text(
                StatusCode::UNAUTHORIZED,
                "the live page needs its token: open the address stampede printed (?token=...)\n",
            );
            r.headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            return closing(r);
        }
        Route::OtherHost => {
            ctx.hush.say(Refusal::OtherHost, peer);
            return closing(text(
                StatusCode::FORBIDDEN,
                "the live page on loopback answers requests to 127.0.0.1, [::1] or localhost only\n",
            ));
        }
        _ => {}
    }
    if !ticket.seated() {
        match ctx.door.seat_for(ticket) {
            Ok(()) => {}
            Err(NoSeat::Closed) => {
                return closing(text(StatusCode::SERVICE_UNAVAILABLE, "try again\n"));
            }
            Err(NoSeat::Full) => {
                ctx.hush.say(Refusal::Full, peer);
                let mut r = text(
                    StatusCode::SERVICE_UNAVAILABLE,
                    format!(
                        "the live page serves at most {MAX_VIEWERS} viewers at once \
                         ({MAX_SEATS_PER_IP} from one address); try again later\n"
                    ),
                );
                r.headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from_static("5"));
                return closing(r);
            }
        }
    }
    let hub = &ctx.hub;
    match route {
        Route::Page => respond(StatusCode::OK, "text/html; charset=utf-8", hub.page()),
        Route::Events { after } => stream(ctx.clone(), after, peer, done),
        Route::Metrics => {
            if !ctx.scrapes.allow(peer.ip(), Instant::now()) {
                ctx.hush.say(Refusal::Scrapes, peer);
                let mut r = text(
                    StatusCode::TOO_MANY_REQUESTS,
                    format!("at most {SCRAPES_PER_S} scrapes a second from one address\n"),
                );
                r.headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
                // Its connection too: the next request comes on a new one, which the door
                // closes while the address's allowance is spent.
                return closing(r);
            }
            match hub.metrics() {
                Some(m) => respond(StatusCode::OK, metrics::CONTENT_TYPE, m),
                None => text(StatusCode::NOT_FOUND, "no metrics are kept for this run\n"),
            }
        }
        // The run's report (side by side, the comparison), by its own name, once it is over.
        Route::Named(name) => match hub.report() {
            Some(report) if report.file_name().is_some_and(|n| *n == *name) => {
                match std::fs::read(&report) {
                    Ok(bytes) => respond(StatusCode::OK, "text/html; charset=utf-8", bytes),
                    Err(e) => text(
                        StatusCode::NOT_FOUND,
                        format!("the report could not be read: {e}\n"),
                    ),
                }
            }
            _ => not_here(),
        },
        Route::NotFound | Route::NotAllowed | Route::NoToken | Route::OtherHost => not_here(),
    }
}

fn not_here() -> Response<Body> {
    text(
        StatusCode::NOT_FOUND,
        "not here: the live page is /, its stream /events, its metrics /metrics (and its report \
         once the run is over)\n",
    )
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

/// A query parameter's value, unescaped.
fn query(uri: &Uri, key: &str) -> Option<String> {
    uri.query()?
        .split('&')
        .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))
        .map(query_unescape)
}

/// The stream: every event after `after`, each with its id, then the view after the last; then the
/// same for each new event, until the run's server stops or the browser goes.
fn stream(ctx: Arc<Ctx>, after: u64, peer: SocketAddr, done: CancellationToken) -> Response<Body> {
    let (tx, rx) = mpsc::channel::<Result<Frame<Bytes>, Infallible>>(STREAM_QUEUE);
    tokio::spawn(async move {
        let (hub, ending) = (&ctx.hub, &ctx.ending);
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
                        ctx.hush.say(Refusal::SlowReader, peer);
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
fn presented_token(uri: &Uri, headers: &HeaderMap) -> Option<String> {
    let header = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, t)| t.trim().to_string());
    header.or_else(|| query(uri, "token"))
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
mod tests;
