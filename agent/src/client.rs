//! The HTTP/1.1 client side of one worker: requests built once per run, connections over TCP or TLS
//! whose bytes are counted as they pass, and every failure mapped to one error class.
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1;
use hyper::header::{HOST, HeaderName, HeaderValue, USER_AGENT};
use hyper::{HeaderMap, Method, Request, Uri};
use hyper_util::rt::TokioIo;
use shared::metrics::ErrorClass;
use shared::plan::{Scheme, Workload};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::time::Instant;

use crate::recorder::Recorder;

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

/// One request, parsed into hyper's types once; each send clones cheap handles.
#[derive(Debug, Clone)]
pub struct Template {
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
}

impl Template {
    pub fn build(&self) -> Request<Full<Bytes>> {
        let mut req = Request::new(Full::new(self.body.clone()));
        *req.method_mut() = self.method.clone();
        *req.uri_mut() = self.uri.clone();
        *req.headers_mut() = self.headers.clone();
        req
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
}

impl Target {
    pub async fn prepare(w: &Workload) -> Result<Target, PrepareError> {
        let origin = w.origin();
        let resolved = tokio::net::lookup_host((origin.host.as_str(), origin.port))
            .await
            .map_err(|source| PrepareError::Resolve {
                host: origin.host.clone(),
                source,
            })?;
        let addr =
            crate::socket::choose(resolved, &w.source_addrs).map_err(|family| match family {
                None => PrepareError::NoAddress(origin.host.clone()),
                Some(family) => PrepareError::NoSourceFamily {
                    host: origin.host.clone(),
                    family,
                },
            })?;
        let host_value = if origin.port == default_port(origin.scheme) {
            if origin.host.contains(':') {
                format!("[{}]", origin.host)
            } else {
                origin.host.clone()
            }
        } else {
            origin.authority()
        };
        let user_agent = format!("stampede/{}", shared::VERSION);
        let mut templates = Vec::with_capacity(w.requests.len());
        for (i, r) in w.requests.iter().enumerate() {
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
            for (name, value) in &r.headers {
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
            templates.push(Template {
                method: Method::from_bytes(r.method.as_bytes()).map_err(|e| bad(e.to_string()))?,
                uri: r.url.path.parse::<Uri>().map_err(|e| bad(e.to_string()))?,
                headers,
                body: Bytes::from(r.body.clone()),
            });
        }
        let tls = match origin.scheme {
            Scheme::Http => None,
            Scheme::Https => {
                let name = rustls::pki_types::ServerName::try_from(origin.host.clone())
                    .map_err(|_| PrepareError::ServerName(origin.host.clone()))?;
                Some((
                    tokio_rustls::TlsConnector::from(Arc::new(tls_config(w.insecure_tls))),
                    name,
                ))
            }
        };
        Ok(Target {
            addr,
            templates: Arc::new(templates),
            tls,
            timeout: w.timeout,
            connect_timeout: w.connect_timeout,
            random_order: w.url_order == shared::plan::UrlOrder::Random,
            sources: w.source_addrs.clone().into(),
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
    /// The connection had been closed by the server before anything was written: reconnect and send.
    Stale,
    /// The request was written and failed; the connection is unusable.
    Failed(ErrorClass),
}

/// An open keep-alive connection, ready for one request at a time.
pub struct Conn {
    sender: http1::SendRequest<Full<Bytes>>,
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

/// Maps a hyper failure to its class: the OS error underneath when there is one.
fn hyper_class(e: &hyper::Error) -> ErrorClass {
    let mut source: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(e);
    while let Some(s) = source {
        if let Some(io) = s.downcast_ref::<io::Error>() {
            return io_class(io);
        }
        source = s.source();
    }
    if e.is_incomplete_message() || e.is_closed() || e.is_canceled() {
        ErrorClass::ConnReset
    } else {
        ErrorClass::Other
    }
}

impl Conn {
    /// Connects (TCP, then TLS if the target is https) within the connect timeout.
    pub async fn open(target: &Target, rec: &Rc<Recorder>) -> Result<Conn, ErrorClass> {
        let began = Instant::now();
        let connect = async {
            let source = crate::socket::next_source(&target.sources);
            let tcp = crate::socket::connect(target.addr, source)
                .await
                .map_err(|e| io_class(&e))?;
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
                    .map_err(|e| match io_class(&e) {
                        ErrorClass::Other => ErrorClass::Other,
                        c => c,
                    }),
            }
        };
        let stream = tokio::time::timeout(target.connect_timeout, connect)
            .await
            .map_err(|_| ErrorClass::ConnectTimeout)??;
        let (sender, connection) = http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| hyper_class(&e))?;
        // The connection future drives the socket; it ends when the sender is dropped.
        tokio::task::spawn_local(async move {
            let _ = connection.await;
        });
        rec.connected(began.elapsed());
        Ok(Conn { sender })
    }

    /// Sends one request and reads the whole reply (counted, not kept). Latency counts from
    /// `intended`; the reply must be complete within `timeout` of the moment the request was written.
    pub async fn send(
        &mut self,
        req: Request<Full<Bytes>>,
        intended: Instant,
        timeout: Duration,
        rec: &Recorder,
    ) -> Result<(), SendError> {
        // A kept-alive connection the server has closed (Connection: close, an idle timeout) is no
        // error of the target's: nothing was written, so the caller reconnects and sends.
        if self.sender.is_closed() {
            return Err(SendError::Stale);
        }
        match tokio::time::timeout(timeout, self.sender.ready()).await {
            Ok(Ok(())) => {}
            Ok(Err(_)) => return Err(SendError::Stale),
            Err(_) => return Err(SendError::Failed(ErrorClass::ClientTimeout)),
        }
        let sent_at = Instant::now();
        rec.sent();
        let exchange = async {
            let resp = self
                .sender
                .send_request(req)
                .await
                .map_err(|e| hyper_class(&e))?;
            let ttfb = sent_at.elapsed();
            let status = resp.status().as_u16();
            let mut body = resp.into_body();
            while let Some(frame) = body.frame().await {
                frame.map_err(|e| hyper_class(&e))?;
            }
            Ok::<_, ErrorClass>((status, ttfb))
        };
        match tokio::time::timeout_at(sent_at + timeout, exchange).await {
            Ok(Ok((status, ttfb))) => {
                rec.replied(status, ttfb, intended.elapsed());
                Ok(())
            }
            // A socket-level timeout on an established connection is a reply that never came.
            Ok(Err(ErrorClass::ConnectTimeout)) | Err(_) => {
                Err(SendError::Failed(ErrorClass::ClientTimeout))
            }
            Ok(Err(class)) => Err(SendError::Failed(class)),
        }
    }
}
