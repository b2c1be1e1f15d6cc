//! Accepting control connections by hand, for both listeners (an agent's `--listen`, a coordinator's
//! join port), so that every peer refused below gRPC is logged with its address and reason: tonic's
//! own TLS server drops a failed handshake silently. The first byte tells TLS from plain text; a
//! plain-text gRPC client on a TLS port is served a refusal in words instead of a TLS alert that it
//! would read as an HTTP/2 frame ("frame with invalid size"). A TLS peer's certificate must say the
//! role this listener takes ([`crate::role`]): a coordinator's on an agent, an agent's or a monitor's
//! on a coordinator.
//!
//! Admission: a connection is closed unless it is admitted within [`ADMIT_WITHIN`] of being accepted
//! (on an agent by a valid hello, on a coordinator by its first request), and at most
//! [`MAX_AWAITING`] connections await admission at once (a newer one closes the oldest; a peer whose
//! certificate passed no longer counts), so peers that connect and never get in cannot hold the
//! listener's descriptors, nor push out one with the fleet's certificate. Refusals are logged at most
//! once a second per reason, with the count of those not logged.
use std::collections::VecDeque;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_rustls::server::TlsStream;
use tokio_stream::Stream;
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;

use crate::link::{Side, hush, log_refused};
use crate::role::{self, CertRole};

/// How long a peer has to send its first byte and finish its TLS handshake (tonic's server used 5 s).
const HANDSHAKE: Duration = Duration::from_secs(5);
/// How long a connection may stay without being admitted (a valid hello on an agent, a first
/// request on a coordinator), counted from its accept: time for a TLS handshake, the HTTP/2
/// preface and the hello over a slow link, never for a stranger to keep it.
pub const ADMIT_WITHIN: Duration = Duration::from_secs(10);
/// Connections accepted and not yet admitted, at most; a newer one closes the oldest, so a peer
/// that comes after a crowd of strangers still gets in.
pub const MAX_AWAITING: usize = 64;
/// A TLS record of type handshake: the first byte of every ClientHello.
const TLS_HANDSHAKE: u8 = 0x16;
/// Connections handshaken but not yet taken by the server.
const BACKLOG: usize = 16;

/// The connections of one listener that await admission, oldest first.
#[derive(Default)]
struct Awaiting {
    queue: Mutex<VecDeque<(u64, SocketAddr, CancellationToken)>>,
    next: AtomicU64,
}

impl Awaiting {
    /// A new connection's admission; the oldest one awaiting is closed if there are too many.
    fn add(self: &Arc<Self>, addr: SocketAddr, me: Side) -> Admission {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let evicted = CancellationToken::new();
        let oldest = {
            let mut queue = self.queue.lock().unwrap_or_else(|p| p.into_inner());
            queue.push_back((id, addr, evicted.clone()));
            (queue.len() > MAX_AWAITING)
                .then(|| queue.pop_front())
                .flatten()
        };
        if let Some((_, addr, token)) = oldest {
            token.cancel();
            let why = format!(
                "more than {MAX_AWAITING} connections awaited admission at once; closed the oldest"
            );
            log_refused(me, &addr, &why);
        }
        Admission(Arc::new(Ticket {
            id,
            admitted: AtomicBool::new(false),
            evicted,
            awaiting: self.clone(),
        }))
    }

    fn remove(&self, id: u64) {
        let mut queue = self.queue.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(at) = queue.iter().position(|(i, _, _)| *i == id) {
            queue.remove(at);
        }
    }
}

struct Ticket {
    id: u64,
    admitted: AtomicBool,
    /// Cancelled when newer connections pushed this one out of [`Awaiting`].
    evicted: CancellationToken,
    awaiting: Arc<Awaiting>,
}

/// One connection's admission: until [`Admission::admit`] it is closed at its deadline, and counts
/// against the listener's [`MAX_AWAITING`].
#[derive(Clone)]
pub struct Admission(Arc<Ticket>);

impl std::fmt::Debug for Admission {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Admission")
            .field("admitted", &self.is_admitted())
            .finish()
    }
}

impl Admission {
    /// The peer proved itself: its connection stays, and no longer counts as awaiting.
    pub fn admit(&self) {
        self.0.admitted.store(true, Ordering::Release);
        self.0.awaiting.remove(self.0.id);
    }

    /// An admission on no listener, for the sessions' tests (the agent's and the monitor's crates).
    pub fn unlisted() -> Admission {
        let awaiting = Arc::new(Awaiting::default());
        awaiting.add(SocketAddr::from(([127, 0, 0, 1], 0)), Side::Agent)
    }

    /// Its certificate passed: it no longer counts against [`MAX_AWAITING`], nor can be pushed out.
    fn vouched(&self) {
        self.0.awaiting.remove(self.0.id);
    }

    fn is_admitted(&self) -> bool {
        self.0.admitted.load(Ordering::Acquire)
    }

    /// Resolves when this connection must close, admitted or not: its deadline passed, or it was
    /// pushed out. Callers stop waiting on it once admitted.
    fn expiry(&self, deadline: Instant) -> impl Future<Output = Expired> + Send + 'static {
        let evicted = self.0.evicted.clone();
        async move {
            tokio::select! {
                () = tokio::time::sleep_until(deadline) => Expired::Late,
                () = evicted.cancelled() => Expired::Crowded,
            }
        }
    }
}

/// Why a connection was closed before it was admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expired {
    Late,
    Crowded,
}

/// Removes a connection from the listener's awaiting queue when it goes, however it goes.
struct Slot(Admission);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.0.awaiting.remove(self.0.0.id);
    }
}

/// Who is on the other end of an accepted connection, as a request's extension.
#[derive(Debug, Clone)]
pub struct Peer {
    pub addr: SocketAddr,
    /// Why every request on this connection is refused: plain text to a listener that takes TLS,
    /// or a certificate of another role.
    refusal: Option<String>,
    admission: Admission,
    /// The listener's side: a coordinator admits a joining connection at its first request (its
    /// own greeting's deadlines watch the rest); an agent only at a valid hello.
    me: Side,
}

impl Peer {
    /// The peer of a request that came through [`incoming`], checked: a request from a plain-text
    /// connection to a listener that takes TLS is refused, and so is one that did not come through
    /// [`incoming`] at all (fail closed: nothing reaches a session without passing the check).
    pub fn admit<T>(request: &tonic::Request<T>) -> Result<Peer, tonic::Status> {
        let peer = request
            .extensions()
            .get::<Peer>()
            .cloned()
            .ok_or_else(|| tonic::Status::internal("a connection accepted without its peer"))?;
        peer.check()?;
        if peer.me == Side::Coordinator {
            peer.admission.admit();
        }
        Ok(peer)
    }

    /// This connection's admission, for the session that decides it (an agent's, at the hello).
    pub fn admission(&self) -> Admission {
        self.admission.clone()
    }

    /// Refuses a request from a connection that should not have been plain text.
    fn check(&self) -> Result<(), tonic::Status> {
        match &self.refusal {
            Some(words) => Err(tonic::Status::unauthenticated(words.clone())),
            None => Ok(()),
        }
    }
}

/// An accepted connection, plain or TLS, as tonic's server takes it. Until it is admitted, a read
/// fails once its deadline passes (or newer connections push it out), which ends the HTTP/2
/// connection and frees its descriptor.
pub struct Conn {
    io: Io,
    peer: Peer,
    expiry: Option<Pin<Box<dyn Future<Output = Expired> + Send>>>,
    expired: bool,
    _slot: Slot,
}

impl Conn {
    fn new(io: Io, peer: Peer, slot: Slot, deadline: Instant) -> Conn {
        Conn {
            expiry: Some(Box::pin(peer.admission.expiry(deadline))),
            io,
            peer,
            expired: false,
            _slot: slot,
        }
    }

    /// Whether this connection must close now: not admitted, and its expiry came.
    fn poll_expired(&mut self, cx: &mut Context<'_>) -> bool {
        if let Some(expiry) = self.expiry.as_mut() {
            if self.peer.admission.is_admitted() {
                self.expiry = None;
            } else if let Poll::Ready(why) = expiry.as_mut().poll(cx) {
                self.expiry = None;
                self.expired = true;
                // A connection refused in words was logged when it came; its end says nothing new.
                if self.peer.refusal.is_none() && why == Expired::Late {
                    let why = format!("it was not admitted within {ADMIT_WITHIN:?}; closed it");
                    log_refused(self.peer.me, &self.peer.addr, &why);
                }
            }
        }
        self.expired
    }
}

fn expired_error() -> io::Error {
    io::Error::new(
        io::ErrorKind::TimedOut,
        "the connection was not admitted in time",
    )
}

enum Io {
    Plain(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
}

impl tonic::transport::server::Connected for Conn {
    type ConnectInfo = Peer;

    fn connect_info(&self) -> Peer {
        self.peer.clone()
    }
}

impl AsyncRead for Conn {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.poll_expired(cx) {
            return Poll::Ready(Err(expired_error()));
        }
        match &mut this.io {
            Io::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Conn {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match &mut self.get_mut().io {
            Io::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match &mut self.get_mut().io {
            Io::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match &self.io {
            Io::Plain(s) => s.is_write_vectored(),
            Io::Tls(s) => s.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.get_mut().io {
            Io::Plain(s) => Pin::new(s).poll_flush(cx),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.get_mut().io {
            Io::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

/// The connections of `listener` for `me`'s gRPC server: TLS handshaken when `tls` is given (a
/// failed handshake logged and dropped), plain text otherwise. The accept loop ends when the server
/// drops the stream.
pub fn incoming(
    listener: TcpListener,
    tls: Option<Arc<rustls::ServerConfig>>,
    me: Side,
) -> impl Stream<Item = Result<Conn, io::Error>> {
    let (tx, rx) = mpsc::channel(BACKLOG);
    let acceptor = tls.map(tokio_rustls::TlsAcceptor::from);
    let awaiting = Arc::new(Awaiting::default());
    tokio::spawn(async move {
        loop {
            let (tcp, addr) = tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok(a) => a,
                    Err(e) => {
                        // Out of descriptors, say: the listener stays; try again shortly.
                        if let Some(unlogged) = hush(me, "accept failed") {
                            tracing::warn!(error = %e, unlogged, "Cannot accept a connection");
                        }
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                },
                _ = tx.closed() => return,
            };
            let deadline = Instant::now() + ADMIT_WITHIN;
            let slot = Slot(awaiting.add(addr, me));
            let (tx, acceptor) = (tx.clone(), acceptor.clone());
            // Each handshake on a task of its own: a slow peer does not hold up the next one.
            tokio::spawn(async move {
                let expiry = slot.0.expiry(deadline);
                let opened = tokio::select! {
                    opened = open(tcp, addr, acceptor.as_ref(), me) => opened,
                    // Pushed out (or past its deadline) before it was even handshaken.
                    _ = expiry => None,
                };
                if let Some((io, refusal)) = opened {
                    // A certificate of the fleet's CA and the right role is no stranger's: it keeps
                    // its deadline, but a flood of peers without one cannot push it out.
                    if matches!(io, Io::Tls(_)) && refusal.is_none() {
                        slot.0.vouched();
                    }
                    let peer = Peer {
                        addr,
                        refusal,
                        admission: slot.0.clone(),
                        me,
                    };
                    let _ = tx.send(Ok(Conn::new(io, peer, slot, deadline))).await;
                }
            });
        }
    });
    ReceiverStream::new(rx)
}

/// One accepted connection made ready for gRPC, with the refusal every request on it gets (if
/// any); or refused (and logged).
async fn open(
    tcp: TcpStream,
    addr: SocketAddr,
    acceptor: Option<&tokio_rustls::TlsAcceptor>,
    me: Side,
) -> Option<(Io, Option<String>)> {
    let _ = tcp.set_nodelay(true);
    let mut first = [0u8; 1];
    let speaks_tls = match tokio::time::timeout(HANDSHAKE, tcp.peek(&mut first)).await {
        // Connected and closed without a word (a port check): nothing to refuse.
        Ok(Ok(0)) | Ok(Err(_)) => return None,
        Ok(Ok(_)) => first[0] == TLS_HANDSHAKE,
        Err(_) => {
            log_refused(me, &addr, &format!("it sent nothing within {HANDSHAKE:?}"));
            return None;
        }
    };
    let other = me.other().name();
    match (acceptor, speaks_tls) {
        (Some(acceptor), true) => {
            match tokio::time::timeout(HANDSHAKE, acceptor.accept(tcp)).await {
                Ok(Ok(tls)) => {
                    let refusal = role_refusal(&tls, me);
                    if let Some(why) = &refusal {
                        log_refused(me, &addr, why);
                    }
                    Some((Io::Tls(Box::new(tls)), refusal))
                }
                Ok(Err(e)) => {
                    log_refused(me, &addr, &handshake_words(&e, me));
                    None
                }
                Err(_) => {
                    let why = format!("its TLS handshake did not finish within {HANDSHAKE:?}");
                    log_refused(me, &addr, &why);
                    None
                }
            }
        }
        (Some(_), false) => {
            log_refused(
                me,
                &addr,
                &format!("it speaks plain text; this {} takes TLS only", me.name()),
            );
            let refusal = format!(
                "this {} takes mutual TLS only: give the {other} --tls-cert, --tls-key and \
                 --tls-ca (made by `stampede certs init`)",
                me.name()
            );
            Some((Io::Plain(tcp), Some(refusal)))
        }
        (None, true) => {
            // Passed on all the same: the HTTP/2 server's plain-text answer is what tells the
            // peer's TLS client, for certain, that nobody speaks TLS here.
            log_refused(
                me,
                &addr,
                &format!("it speaks TLS; this {} listens in plain text", me.name()),
            );
            Some((Io::Plain(tcp), None))
        }
        (None, false) => Some((Io::Plain(tcp), None)),
    }
}

/// The roles a listener of `me` takes from its peers: an agent serves only a coordinator; a
/// coordinator's join port takes agents and monitors.
fn admits(me: Side) -> &'static [CertRole] {
    match me {
        Side::Agent => &[CertRole::Coordinator],
        Side::Coordinator => &[CertRole::Agent, CertRole::Monitor],
    }
}

/// "a coordinator's", "an agent's".
fn whose(r: CertRole) -> String {
    let article = if r == CertRole::Agent { "an" } else { "a" };
    format!("{article} {}'s", r.name())
}

/// Why a handshaken peer is refused for the role its certificate says, in words for it; `None`
/// when the role is one `me` takes.
fn role_refusal(tls: &TlsStream<TcpStream>, me: Side) -> Option<String> {
    let wanted = admits(me);
    let says = tls
        .get_ref()
        .1
        .peer_certificates()
        .and_then(|certs| certs.first())
        .and_then(|leaf| role::of_certificate(leaf))
        .unwrap_or_default();
    if says.iter().any(|r| wanted.contains(r)) {
        return None;
    }
    let takes = wanted
        .iter()
        .map(|r| whose(*r))
        .collect::<Vec<_>>()
        .join(" or ");
    let theirs = match says.first() {
        Some(r) => format!("it is {}", whose(*r)),
        None => format!("it says no role (no SAN URI {}…)", role::MARKER),
    };
    Some(format!(
        "this {} takes only {takes} certificate and {theirs}: re-issue it with `stampede certs \
         issue DIR NAME --role {}`",
        me.name(),
        wanted[0].name()
    ))
}

/// Why a peer's TLS handshake failed, as the listener says it.
fn handshake_words(e: &io::Error, me: Side) -> String {
    let other = me.other().name();
    let Some(tls) = e.get_ref().and_then(|i| i.downcast_ref::<rustls::Error>()) else {
        return format!("its TLS handshake failed: {e}");
    };
    use rustls::CertificateError as Cert;
    match tls {
        rustls::Error::NoCertificatesPresented => format!(
            "it presented no certificate (mutual TLS: give the {other} --tls-cert and --tls-key)"
        ),
        rustls::Error::InvalidCertificate(Cert::UnknownIssuer | Cert::BadSignature) => {
            format!(
                "its certificate is not signed by this {}'s --tls-ca",
                me.name()
            )
        }
        rustls::Error::InvalidCertificate(Cert::Expired | Cert::ExpiredContext { .. }) => {
            "its certificate has expired".into()
        }
        rustls::Error::InvalidCertificate(Cert::NotValidYet | Cert::NotValidYetContext { .. }) => {
            "its certificate is not valid yet".into()
        }
        other => format!("its TLS handshake failed: {other}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn connections_awaiting_admission_were_unbounded_and_a_crowd_pushed_out_the_vouched() {
        let awaiting = Arc::new(Awaiting::default());
        let addr = SocketAddr::from(([127, 0, 0, 1], 1));
        let first = awaiting.add(addr, Side::Agent);
        let admitted = awaiting.add(addr, Side::Agent);
        admitted.admit();
        let rest: Vec<Admission> = (0..MAX_AWAITING - 1)
            .map(|_| awaiting.add(addr, Side::Agent))
            .collect();
        // Admitted, one no longer counts: the queue is full, and no one was pushed out yet.
        assert_eq!(awaiting.queue.lock().unwrap().len(), MAX_AWAITING);
        assert!(!first.0.evicted.is_cancelled());
        // One more closes the oldest awaiting.
        let newest = awaiting.add(addr, Side::Agent);
        assert!(first.0.evicted.is_cancelled());
        let far = Instant::now() + Duration::from_secs(3600);
        let expired = tokio::time::timeout(Duration::from_secs(1), first.expiry(far)).await;
        assert_eq!(expired, Ok(Expired::Crowded));
        assert!(!rest[0].0.evicted.is_cancelled() && !newest.0.evicted.is_cancelled());
        // One whose certificate passed cannot be pushed out by any number of strangers after it.
        let vouched = awaiting.add(addr, Side::Agent);
        vouched.vouched();
        for _ in 0..MAX_AWAITING * 2 {
            awaiting.add(addr, Side::Agent);
        }
        assert!(!vouched.0.evicted.is_cancelled());
        assert!(newest.0.evicted.is_cancelled());
        // A connection that goes frees its place.
        let last = awaiting.add(addr, Side::Agent);
        drop(Slot(last));
        assert_eq!(awaiting.queue.lock().unwrap().len(), MAX_AWAITING - 1);
    }
}
