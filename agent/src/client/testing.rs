//! What the client's tests share: a target on a loopback port, a TLS acceptor with a self-signed
//! certificate, and a server's read of one request head.
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use http::header::{HOST, HeaderValue};
use http::{HeaderMap, Method};
use tokio::io::{AsyncRead, AsyncReadExt};

use super::target::{Endpoint, Template};

pub(super) fn target(addr: SocketAddr, tls: bool) -> Endpoint {
    let mut h = HeaderMap::new();
    h.insert(HOST, HeaderValue::from_static("localhost"));
    let t = Template::new(&Method::GET, &"/".parse().unwrap(), &h, b"");
    Endpoint {
        addr,
        templates: Arc::new(vec![t]),
        tls: tls.then(|| {
            super::tls::target(
                "localhost",
                true,
                shared::plan::HttpVersion::Http1,
                shared::plan::TlsSessions::Fresh,
            )
            .unwrap()
        }),
        timeout: Duration::from_secs(2),
        connect_timeout: Duration::from_secs(2),
        mix: Arc::new(
            shared::plan::Mix::try_new(&[1], shared::plan::UrlOrder::RoundRobin).unwrap(),
        ),
        named: false,
        sources: Arc::from(Vec::<IpAddr>::new()),
        server_closes: true,
        ok_status: shared::status::StatusSet::default(),
        http2: false,
        streams: 1,
        sessions: None,
        vars: Default::default(),
        feeds: Arc::new([]),
        setup: None,
    }
}

pub(super) fn acceptor() -> tokio_rustls::TlsAcceptor {
    acceptor_offering(&[])
}

/// A TLS acceptor whose ALPN offers `protocols` (none: it ignores the client's offer).
pub(super) fn acceptor_offering(protocols: &[&[u8]]) -> tokio_rustls::TlsAcceptor {
    let ck = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
    let key = rustls::pki_types::PrivateKeyDer::Pkcs8(rustls::pki_types::PrivatePkcs8KeyDer::from(
        ck.signing_key.serialize_der(),
    ));
    let cfg = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(vec![ck.cert.der().clone()], key)
    .unwrap();
    let mut cfg = cfg;
    cfg.alpn_protocols = protocols.iter().map(|p| p.to_vec()).collect();
    tokio_rustls::TlsAcceptor::from(Arc::new(cfg))
}

pub(super) async fn read_request<S: AsyncRead + Unpin>(s: &mut S) {
    let mut b = Vec::new();
    let mut x = [0u8; 1024];
    while !b.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = s.read(&mut x).await.unwrap();
        assert!(n > 0);
        b.extend_from_slice(&x[..n]);
    }
}

/// A test server's connection, plain or TLS.
pub(super) trait Io: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send> Io for T {}

/// One request on `c` as a request's only attempt (counted as sent when written), without intent
/// lag: what most client tests send.
pub(super) async fn send_one(
    c: &mut super::http1::Conn,
    t: &super::Template,
    timeout: std::time::Duration,
    rec: &crate::recorder::Recorder,
) -> Result<(), super::failure::SendError> {
    let counted = std::cell::Cell::new(false);
    c.send(
        t,
        false,
        tokio::time::Instant::now(),
        timeout,
        rec,
        &counted,
    )
    .await
}
