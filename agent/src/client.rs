//! The HTTP/1.1 client side of one worker: requests serialized once per run, connections over TCP or TLS
//! whose bytes are counted as they pass, and every failure mapped to one error class and described in
//! words (made only when its class has no message yet in the interval).
//!
//! The client is written for the hot path, as wrk's is: a request is one write of bytes prepared before
//! the step, a reply is read into one buffer owned by its connection and parsed in place, and nothing
//! is allocated, spawned or sent between tasks per request. A general client (hyper) costs a task, a
//! channel and a rebuilt header map per request, which made the generator the heavier side of the
//! benchmark against nginx.
use std::borrow::Cow;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use bytes::Bytes;
use http::header::{
    CONNECTION, CONTENT_LENGTH, HOST, HeaderName, HeaderValue, TRANSFER_ENCODING, USER_AGENT,
};
use http::{HeaderMap, Method, Uri};
use shared::metrics::ErrorClass;
use shared::plan::{Scheme, Workload};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;
use tokio::time::Instant;

use crate::recorder::Recorder;
use crate::response::{Chunked, Framing, HeadError, MAX_HEAD, parse_head};

/// A workload that cannot be prepared for sending.
#[derive(Debug, thiserror::Error)]
pub enum PrepareError {
    #[error("cannot resolve target host '{host}': {source}")]
    Resolve { host: String, source: io::Error },
    #[error("target host '{0}' resolves to no address")]
    NoAddress(String),
    #[error("target host '{host}' has no {family} address, the family of the --source-addrs")]
    NoSourceFamily { host: String, family: &'static str },
    #[error("request {index} cannot be built: {why}")]
    Request { index: usize, why: String },
    #[error("TLS server name '{0}' is not valid")]
    ServerName(String),
}

/// One request, serialized once: every send writes these bytes as they are.
#[derive(Debug, Clone)]
pub struct Template {
    wire: Bytes,
    /// The same request saying `Connection: close`, for the last call on a connection: the server
    /// then closes first and keeps the TIME_WAIT, so the generator's ephemeral ports are not held
    /// for a minute after every connection (at 1,000 connections/s that would exhaust them).
    last: Bytes,
    /// A reply to HEAD has no body, whatever its headers announce.
    head: bool,
}

impl Template {
    /// Serializes a request as hyper would: lower-case header names, a Content-Length for a body (or
    /// for an empty POST/PUT/PATCH) unless the user framed the body themselves.
    fn new(method: &Method, uri: &Uri, headers: &HeaderMap, body: &[u8]) -> Template {
        let target = uri.path_and_query().map_or("/", |p| p.as_str());
        let mut wire = Vec::with_capacity(128 + body.len());
        wire.extend_from_slice(method.as_str().as_bytes());
        wire.push(b' ');
        wire.extend_from_slice(target.as_bytes());
        wire.extend_from_slice(b" HTTP/1.1\r\n");
        for (name, value) in headers {
            wire.extend_from_slice(name.as_str().as_bytes());
            wire.extend_from_slice(b": ");
            wire.extend_from_slice(value.as_bytes());
            wire.extend_from_slice(b"\r\n");
        }
        let framed =
            headers.contains_key(CONTENT_LENGTH) || headers.contains_key(TRANSFER_ENCODING);
        let wants_length =
            !body.is_empty() || matches!(*method, Method::POST | Method::PUT | Method::PATCH);
        if wants_length && !framed {
            wire.extend_from_slice(format!("content-length: {}\r\n", body.len()).as_bytes());
        }
        let mut last = wire.clone();
        // A user's own Connection header is sent as given, on every call.
        if !headers.contains_key(CONNECTION) {
            last.extend_from_slice(b"connection: close\r\n");
        }
        for w in [&mut wire, &mut last] {
            w.extend_from_slice(b"\r\n");
            w.extend_from_slice(body);
        }
        Template {
            wire: Bytes::from(wire),
            last: Bytes::from(last),
            head: *method == Method::HEAD,
        }
    }
}

/// Everything a worker needs to connect and send, shared read-only by all workers of the agent.
#[derive(Clone)]
pub struct Target {
    pub addr: SocketAddr,
    pub templates: Arc<Vec<Template>>,
    pub tls: Option<(
        tokio_rustls::TlsConnector,
        rustls::pki_types::ServerName<'static>,
    )>,
    pub timeout: Duration,
    pub connect_timeout: Duration,
    pub random_order: bool,
    /// `--source-addrs`: new connections leave from these in turn (see `socket`); empty: any.
    pub sources: Arc<[IpAddr]>,
    /// Every request's closing twin makes the server close first (see `Workload::server_closes_last`).
    pub server_closes: bool,
    /// The reply statuses that count as served.
    pub ok_status: shared::status::StatusSet,
}

impl Target {
    pub async fn prepare(w: &Workload) -> Result<Target, PrepareError> {
        let origin = w.origin();
        let resolved = tokio::net::lookup_host((origin.host(), origin.port()))
            .await
            .map_err(|source| PrepareError::Resolve {
                host: origin.host().to_string(),
                source,
            })?;
        let addr =
            crate::socket::choose(resolved, w.source_addrs()).map_err(|family| match family {
                None => PrepareError::NoAddress(origin.host().to_string()),
                Some(family) => PrepareError::NoSourceFamily {
                    host: origin.host().to_string(),
                    family,
                },
            })?;
        let host_value = if origin.port() == default_port(origin.scheme()) {
            if origin.host().contains(':') {
                format!("[{}]", origin.host())
            } else {
                origin.host().to_string()
            }
        } else {
            origin.authority()
        };
        let user_agent = format!("stampede/{}", shared::VERSION);
        let mut templates = Vec::with_capacity(w.requests().len());
        for (i, r) in w.requests().iter().enumerate() {
            let bad = |why: String| PrepareError::Request { index: i + 1, why };
            let mut headers = HeaderMap::new();
            headers.insert(
                HOST,
                HeaderValue::from_str(&host_value).map_err(|e| bad(e.to_string()))?,
            );
            headers.insert(
                USER_AGENT,
                HeaderValue::from_str(&user_agent).map_err(|e| bad(e.to_string()))?,
            );
            for (name, value) in r.headers() {
                let name = HeaderName::from_bytes(name.as_bytes())
                    .map_err(|e| bad(format!("header {name}: {e}")))?;
                let value =
                    HeaderValue::from_str(value).map_err(|e| bad(format!("header {name}: {e}")))?;
                // A user's Host or User-Agent replaces ours; other repeated names are kept.
                if name == HOST || name == USER_AGENT {
                    headers.insert(name, value);
                } else {
                    headers.append(name, value);
                }
            }
            let method =
                Method::from_bytes(r.method().as_bytes()).map_err(|e| bad(e.to_string()))?;
            let uri = r
                .url()
                .path()
                .parse::<Uri>()
                .map_err(|e| bad(e.to_string()))?;
            templates.push(Template::new(&method, &uri, &headers, r.body()));
        }
        let tls = match origin.scheme() {
            Scheme::Http => None,
            Scheme::Https => {
                let name = rustls::pki_types::ServerName::try_from(origin.host().to_string())
                    .map_err(|_| PrepareError::ServerName(origin.host().to_string()))?;
                Some((
                    tokio_rustls::TlsConnector::from(Arc::new(tls_config(w.insecure_tls()))),
                    name,
                ))
            }
        };
        Ok(Target {
            addr,
            templates: Arc::new(templates),
            tls,
            timeout: w.timeout(),
            connect_timeout: w.connect_timeout(),
            random_order: w.url_order() == shared::plan::UrlOrder::Random,
            sources: w.source_addrs().to_vec().into(),
            server_closes: w.server_closes_last(),
            ok_status: w.ok_status().clone(),
        })
    }
}

fn default_port(s: Scheme) -> u16 {
    match s {
        Scheme::Http => 80,
        Scheme::Https => 443,
    }
}

fn tls_config(insecure: bool) -> rustls::ClientConfig {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("ring supports the default protocol versions");
    let mut config = if insecure {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(insecure::AcceptAny))
            .with_no_client_auth()
    } else {
        let roots =
            rustls::RootCertStore::from_iter(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
        builder.with_root_certificates(roots).with_no_client_auth()
    };
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    config
}

mod insecure {
    //! `--insecure`: accept any server certificate (self-signed targets), as curl -k and wrk do.
    use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
    use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
    use rustls::{DigitallySignedStruct, SignatureScheme};

    #[derive(Debug)]
    pub struct AcceptAny;

    impl ServerCertVerifier for AcceptAny {
        fn verify_server_cert(
            &self,
            _: &CertificateDer<'_>,
            _: &[CertificateDer<'_>],
            _: &ServerName<'_>,
            _: &[u8],
            _: UnixTime,
        ) -> Result<ServerCertVerified, rustls::Error> {
            Ok(ServerCertVerified::assertion())
        }
        fn verify_tls12_signature(
            &self,
            _: &[u8],
            _: &CertificateDer<'_>,
            _: &DigitallySignedStruct,
        ) -> Result<HandshakeSignatureValid, rustls::Error> {
            Ok(HandshakeSignatureValid::assertion())
        }
        fn verify_tls13_signature(
            &self,
            _: &[u8],
            _: &CertificateDer<'_>,
            _: &DigitallySignedStruct,
        ) -> Result<HandshakeSignatureValid, rustls::Error> {
            Ok(HandshakeSignatureValid::assertion())
        }
        fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
            rustls::crypto::ring::default_provider()
                .signature_verification_algorithms
                .supported_schemes()
        }
    }
}

/// A TCP stream that adds the bytes it moves to its worker's counters.
pub struct Counted {
    inner: TcpStream,
    rec: Rc<Recorder>,
}

impl AsyncRead for Counted {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.inner).poll_read(cx, buf);
        let n = (buf.filled().len() - before) as u64;
        if n > 0 {
            self.rec.bytes(n, 0);
        }
        r
    }
}

impl AsyncWrite for Counted {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = r {
            self.rec.bytes(0, n as u64);
        }
        r
    }
    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        if let Poll::Ready(Ok(n)) = r {
            self.rec.bytes(0, n as u64);
        }
        r
    }
    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// Plain or TLS, chosen once per target.
pub enum Stream {
    Plain(Counted),
    Tls(Box<tokio_rustls::client::TlsStream<Counted>>),
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }
    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write_vectored(cx, bufs),
        }
    }
    fn is_write_vectored(&self) -> bool {
        match self {
            Stream::Plain(s) => s.is_write_vectored(),
            Stream::Tls(s) => s.is_write_vectored(),
        }
    }
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_flush(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

/// Why a request was not answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendError {
    /// The server had closed the kept-alive connection before taking the request (nothing reached
    /// it): reconnect and send.
    Stale,
    /// The request was written and failed; the connection is unusable.
    Failed(ErrorClass),
}

fn io_class(e: &io::Error) -> ErrorClass {
    match e.raw_os_error() {
        Some(errno) => ErrorClass::from_errno(errno),
        None => match e.kind() {
            io::ErrorKind::ConnectionRefused => ErrorClass::ConnRefused,
            io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::BrokenPipe
            | io::ErrorKind::UnexpectedEof => ErrorClass::ConnReset,
            io::ErrorKind::TimedOut => ErrorClass::ConnectTimeout,
            _ => ErrorClass::Other,
        },
    }
}

/// A failure's class and what is known of it, carried as it is (no formatting, no allocation) until
/// the recorder asks for words, which it does once per class per interval.
#[derive(Debug)]
struct Failure {
    class: ErrorClass,
    why: Why,
}

#[derive(Debug)]
enum Why {
    /// An OS or TLS error while doing this.
    Io(Doing, io::Error),
    /// The target closed the connection before the reply was complete.
    Closed(Doing),
    /// The reply head did not parse; the bytes it began with.
    Head(HeadError, Prefix),
    Chunked,
}

/// What the client was doing when it failed.
#[derive(Debug, Clone, Copy)]
enum Doing {
    Connecting,
    Handshake,
    Writing,
    ReadingHead,
    ReadingBody,
}

impl Doing {
    fn words(self) -> &'static str {
        match self {
            Doing::Connecting => "connecting",
            Doing::Handshake => "TLS handshake",
            Doing::Writing => "sending the request",
            Doing::ReadingHead => "reading the reply",
            Doing::ReadingBody => "reading the reply body",
        }
    }
}

/// The first bytes of something that was not a reply head, copied into a fixed array.
#[derive(Debug, Clone, Copy)]
struct Prefix {
    bytes: [u8; 24],
    len: usize,
}

impl Prefix {
    fn of(buf: &[u8]) -> Prefix {
        let mut bytes = [0; 24];
        let len = buf.len().min(bytes.len());
        bytes[..len].copy_from_slice(&buf[..len]);
        Prefix { bytes, len }
    }
}

impl From<Failure> for Fault {
    fn from(f: Failure) -> Fault {
        Fault::Failed(f)
    }
}

impl Failure {
    fn io(doing: Doing, e: io::Error) -> Failure {
        Failure {
            class: io_class(&e),
            why: Why::Io(doing, e),
        }
    }

    fn closed(doing: Doing) -> Failure {
        Failure {
            class: ErrorClass::ConnReset,
            why: Why::Closed(doing),
        }
    }

    /// The failure in words, with a hint where one helps.
    fn words(&self, addr: SocketAddr) -> Cow<'static, str> {
        match &self.why {
            Why::Io(doing, e) => io_words(*doing, e, addr),
            Why::Closed(Doing::ReadingHead) => {
                "the target closed the connection before replying".into()
            }
            Why::Closed(doing) => format!(
                "the target closed the connection while {}, before a complete reply",
                doing.words()
            )
            .into(),
            Why::Head(HeadError::Malformed, p) => {
                let start = &p.bytes[..p.len];
                // A TLS record (an alert, a handshake) where HTTP was expected.
                if matches!(start.first(), Some(0x15 | 0x16)) {
                    "not an HTTP reply: the target speaks TLS, use https://".into()
                } else {
                    format!("not an HTTP reply (it began \"{}\")", start.escape_ascii()).into()
                }
            }
            Why::Head(HeadError::TooLarge, _) => {
                format!("reply head longer than {} KiB", MAX_HEAD / 1024).into()
            }
            Why::Head(HeadError::BadFraming, _) => {
                "reply framing headers contradict each other (Content-Length, Transfer-Encoding)"
                    .into()
            }
            Why::Chunked => "malformed chunked reply body".into(),
        }
    }
}

/// An OS or TLS error in words: the OS's text without its number, or what rustls found, with the
/// flag that changes it where there is one.
fn io_words(doing: Doing, e: &io::Error, addr: SocketAddr) -> Cow<'static, str> {
    if let Some(tls) = e.get_ref().and_then(|i| i.downcast_ref::<rustls::Error>()) {
        return tls_words(tls);
    }
    match e.raw_os_error() {
        Some(libc::ECONNREFUSED) => {
            format!("connection refused by {addr}: is the target up?").into()
        }
        Some(libc::EMFILE | libc::ENFILE) => {
            "too many open files: the generator is out of file descriptors (raise ulimit -n or add agents)"
                .into()
        }
        Some(libc::EADDRNOTAVAIL) => format!(
            "cannot assign requested address: the generator is out of local ports to {addr}, or lacks a --source-addrs address"
        )
        .into(),
        _ => {
            let text = e.to_string();
            // "Connection reset by peer (os error 104)" reads as "connection reset by peer".
            let text = text.split(" (os error").next().unwrap_or_default();
            let mut chars = text.chars();
            let text: String = match chars.next() {
                Some(c) => c.to_lowercase().chain(chars).collect(),
                None => format!("{:?}", e.kind()),
            };
            match doing {
                Doing::Connecting => format!("connecting to {addr}: {text}").into(),
                _ => format!("{}: {text}", doing.words()).into(),
            }
        }
    }
}

fn tls_words(e: &rustls::Error) -> Cow<'static, str> {
    use rustls::{CertificateError as Cert, Error as Tls};
    match e {
        Tls::InvalidCertificate(Cert::UnknownIssuer) => {
            "TLS: certificate signed by unknown issuer: use --insecure for a self-signed target"
                .into()
        }
        Tls::InvalidCertificate(Cert::NotValidForName | Cert::NotValidForNameContext { .. }) => {
            format!("TLS: {e}: use the host name the certificate names, or --insecure").into()
        }
        Tls::InvalidCertificate(_) => format!("TLS: {e}: use --insecure to accept it").into(),
        Tls::InvalidMessage(_) => format!(
            "TLS: {e}: the target does not speak TLS here (a plain HTTP server? use http://)"
        )
        .into(),
        _ => format!("TLS: {e}").into(),
    }
}

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
}

/// How one exchange went wrong.
enum Fault {
    Stale,
    Failed(Failure),
    /// A TLS peer closed without close_notify in the middle of a body (the end only for a body
    /// read to the close; elsewhere a conn-reset).
    Closed,
}

impl Conn {
    /// Connects (TCP, then TLS if the target is https) within the connect timeout.
    pub async fn open(target: &Target, rec: &Rc<Recorder>) -> Result<Conn, ErrorClass> {
        let began = Instant::now();
        let connect = async {
            let source = crate::socket::next_source(&target.sources);
            let tcp = crate::socket::connect(target.addr, source)
                .await
                .map_err(|e| Failure::io(Doing::Connecting, e))?;
            // Small requests must leave at once, not wait for Nagle.
            let _ = tcp.set_nodelay(true);
            let counted = Counted {
                inner: tcp,
                rec: rec.clone(),
            };
            match &target.tls {
                None => Ok(Stream::Plain(counted)),
                Some((connector, name)) => connector
                    .connect(name.clone(), counted)
                    .await
                    .map(|s| Stream::Tls(Box::new(s)))
                    .map_err(|e| Failure::io(Doing::Handshake, e)),
            }
        };
        let io = match tokio::time::timeout(target.connect_timeout, connect).await {
            Ok(Ok(io)) => io,
            Ok(Err(f)) => {
                rec.note(f.class, || f.words(target.addr));
                return Err(f.class);
            }
            Err(_) => {
                rec.note(ErrorClass::ConnectTimeout, || {
                    format!(
                        "connection to {} not established within {:?} (--connect-timeout)",
                        target.addr, target.connect_timeout
                    )
                    .into()
                });
                return Err(ErrorClass::ConnectTimeout);
            }
        };
        rec.connected(began.elapsed());
        Ok(Conn {
            io,
            peer: target.addr,
            buf: Vec::new(),
            reused: false,
            ended: false,
        })
    }

    /// Sends one request and reads the whole reply (counted, not kept). Latency counts from
    /// `intended`; the reply must be complete within `timeout` of the moment the request was written.
    /// `last` says no other request follows on this connection.
    pub async fn send(
        &mut self,
        t: &Template,
        last: bool,
        intended: Instant,
        timeout: Duration,
        rec: &Recorder,
    ) -> Result<(), SendError> {
        // A kept-alive connection the server has closed (Connection: close, an idle timeout) is no
        // error of the target's: the caller reconnects and sends.
        if self.ended || (self.reused && self.closed_while_idle()) {
            return Err(SendError::Stale);
        }
        let sent_at = Instant::now();
        // Counted as it leaves (the live line shows what is sent now), and taken back if the
        // server never saw it, so a resent request counts once.
        rec.sent();
        let outcome = tokio::time::timeout_at(sent_at + timeout, self.exchange(t, last)).await;
        if matches!(outcome, Ok(Err(Fault::Stale))) {
            rec.unsend();
        }
        let failure = match outcome {
            Ok(Ok((status, ttfb))) => {
                rec.replied(status, ttfb, intended.elapsed());
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
                rec.given_up(intended.elapsed());
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

    async fn exchange(&mut self, t: &Template, last: bool) -> Result<(u16, Duration), Fault> {
        let wire = if last { &t.last } else { &t.wire };
        if let Err(e) = self.write(wire).await {
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
                    Err(e) => {
                        return Err(Failure {
                            class: ErrorClass::Other,
                            why: Why::Head(e, Prefix::of(&self.buf)),
                        }
                        .into());
                    }
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
                    let used = chunks.feed(&self.buf).map_err(|_| {
                        Fault::Failed(Failure {
                            class: ErrorClass::Other,
                            why: Why::Chunked,
                        })
                    })?;
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

    /// After the last reply of a connection the server closes: waits (at most `within`) for its close
    /// before dropping the socket, so that the server, which closed first, keeps the TIME_WAIT and
    /// this port is free at once. A server that does not close in time leaves it to us.
    pub async fn linger(mut self, within: Duration) {
        if !self.ended {
            return;
        }
        let _ = tokio::time::timeout(within, async {
            loop {
                self.buf.clear();
                match self.read(BUF_START).await {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {}
                }
            }
        })
        .await;
    }

    async fn write(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.io.write_all(bytes).await?;
        self.io.flush().await
    }
}

/// The peer closed or reset the connection. UnexpectedEof is how rustls reports a TCP close without a
/// TLS close_notify, which many servers do.
fn is_closed(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::BrokenPipe
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::UnexpectedEof
    )
}

/// A request this small leaves in one write: a write error then means the server closed before it
/// took anything. A larger one may have been answered early (413, 401) and the server closed while we
/// still wrote; resending it would send a request the server already answered.
const STALE_WRITE_MAX: usize = 4 * 1024;

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::net::TcpListener;

    fn target(addr: SocketAddr, tls: bool) -> Target {
        let mut h = HeaderMap::new();
        h.insert(HOST, HeaderValue::from_static("localhost"));
        let t = Template::new(&Method::GET, &"/".parse().unwrap(), &h, b"");
        Target {
            addr,
            templates: Arc::new(vec![t]),
            tls: tls.then(|| {
                (
                    tokio_rustls::TlsConnector::from(Arc::new(tls_config(true))),
                    rustls::pki_types::ServerName::try_from("localhost".to_string()).unwrap(),
                )
            }),
            timeout: Duration::from_secs(2),
            connect_timeout: Duration::from_secs(2),
            random_order: false,
            sources: Arc::from(Vec::<IpAddr>::new()),
            server_closes: true,
            ok_status: shared::status::StatusSet::default(),
        }
    }

    fn acceptor() -> tokio_rustls::TlsAcceptor {
        let ck = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
        let key = rustls::pki_types::PrivateKeyDer::Pkcs8(
            rustls::pki_types::PrivatePkcs8KeyDer::from(ck.signing_key.serialize_der()),
        );
        let cfg = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![ck.cert.der().clone()], key)
        .unwrap();
        tokio_rustls::TlsAcceptor::from(Arc::new(cfg))
    }

    async fn read_request<S: AsyncRead + Unpin>(s: &mut S) {
        let mut b = Vec::new();
        let mut x = [0u8; 1024];
        while !b.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = s.read(&mut x).await.unwrap();
            assert!(n > 0);
            b.extend_from_slice(&x[..n]);
        }
    }

    /// A POST of `len` bytes.
    fn upload(len: usize) -> Template {
        let mut h = HeaderMap::new();
        h.insert(HOST, HeaderValue::from_static("localhost"));
        Template::new(&Method::POST, &"/".parse().unwrap(), &h, &vec![b'x'; len])
    }

    async fn send(c: &mut Conn, t: &Target, last: bool) -> Result<(), SendError> {
        let rec = Recorder::default();
        c.send(&t.templates[0], last, Instant::now(), t.timeout, &rec)
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
        let sending = c.send(&t.templates[0], false, Instant::now(), t.timeout, &rec);
        let r = tokio::time::timeout(Duration::from_millis(300), sending).await;
        assert!(r.is_err(), "the server never answers");
        assert_eq!(rec.with(|s| s.counters.requests), 1, "counted as it left");
        assert_eq!(rec.with(|s| s.counters.replies), 0);
    }

    #[test]
    fn a_stale_request_taken_back_after_a_swap_still_counts_once() {
        let rec = Recorder::default();
        rec.sent();
        let first = rec.swap();
        // It turned out stale after its interval left; it is resent in the next one.
        rec.unsend();
        rec.sent();
        rec.sent();
        let second = rec.swap();
        assert_eq!(first.counters.requests + second.counters.requests, 2);
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
        let r = c.send(&big, false, Instant::now(), t.timeout, &rec).await;
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
        let r = c
            .send(&upload, false, Instant::now(), t.timeout, &rec)
            .await;
        assert_eq!(r, Ok(()));
        let (ttfb, latency) = rec.with(|s| (s.hist.ttfb.max(), s.hist.latency.max()));
        assert!(latency >= 350_000, "the upload took {latency} µs");
        assert!(ttfb < 150_000, "ttfb {ttfb} µs of a {latency} µs exchange");
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_failure_is_kept_in_words_not_only_counted() {
        // A self-signed certificate without --insecure.
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let acc = acceptor();
        tokio::spawn(async move {
            let (tcp, _) = l.accept().await.unwrap();
            let _ = acc.accept(tcp).await;
        });
        let mut t = target(addr, true);
        t.tls.as_mut().unwrap().0 = tokio_rustls::TlsConnector::from(Arc::new(tls_config(false)));
        let rec = Rc::new(Recorder::default());
        assert!(matches!(Conn::open(&t, &rec).await, Err(ErrorClass::Other)));
        assert_eq!(
            rec.swap().messages.get(ErrorClass::Other),
            Some(
                "TLS: certificate signed by unknown issuer: use --insecure for a self-signed target"
            )
        );

        // Something that is not HTTP, then a plain request to a TLS server.
        for (reply, words) in [
            (
                &b"SSH-2.0-OpenSSH_9.2 nothing like HTTP\r\n"[..],
                "not an HTTP reply (it began \"SSH-2.0-OpenSSH_9.2 noth\")",
            ),
            (
                &b"\x15\x03\x03\x00\x02\x02\x32"[..],
                "not an HTTP reply: the target speaks TLS, use https://",
            ),
        ] {
            let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = l.local_addr().unwrap();
            tokio::spawn(async move {
                let (mut s, _) = l.accept().await.unwrap();
                read_request(&mut s).await;
                s.write_all(reply).await.unwrap();
            });
            let t = target(addr, false);
            let rec = Recorder::default();
            let mut c = Conn::open(&t, &Rc::new(Recorder::default())).await.unwrap();
            let r = c.send(&t.templates[0], false, Instant::now(), t.timeout, &rec);
            assert_eq!(r.await, Err(SendError::Failed(ErrorClass::Other)));
            assert_eq!(rec.swap().messages.get(ErrorClass::Other), Some(words));
        }

        // Nothing listening.
        let port = TcpListener::bind("127.0.0.1:0")
            .await
            .unwrap()
            .local_addr()
            .unwrap();
        let rec = Rc::new(Recorder::default());
        let r = Conn::open(&target(port, false), &rec).await;
        assert!(matches!(r, Err(ErrorClass::ConnRefused)));
        assert_eq!(
            rec.swap().messages.get(ErrorClass::ConnRefused),
            Some(format!("connection refused by {port}: is the target up?").as_str())
        );
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
            let Stream::Plain(p) = &c.io else {
                unreachable!()
            };
            let port = p.inner.local_addr().unwrap().port();
            assert_eq!(send(&mut c, &t, true).await, Ok(()));
            if linger {
                c.linger(Duration::from_millis(500)).await;
            } else {
                drop(c);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
            assert_eq!(in_time_wait(port), !linger, "linger {linger}");
        }
    }
}
