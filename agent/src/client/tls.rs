//! TLS toward the target (not the control channel's mutual TLS, which is `crate::tls`): the rustls
//! client config, verified against the web's roots or, with `--insecure`, not at all; the server
//! name sent as SNI and checked against the certificate; and whether a new connection resumes a
//! session (`--tls-sessions`), from a store of its worker thread's own.
use std::sync::{Arc, Mutex};

use rustls::client::Resumption;
use rustls::pki_types::{InvalidDnsNameError, ServerName};
use shared::plan::{HttpVersion, TlsSessions};
use tokio_rustls::TlsConnector;

/// How many servers' sessions a worker remembers: one run has one target, so 1 would do; rustls'
/// own default, for a target that resolves to several names someday.
const SESSIONS_PER_WORKER: usize = 256;

/// The TLS side of a target, made once per run and cloned into every worker's step.
#[derive(Clone)]
pub struct TlsTarget {
    pub(super) name: ServerName<'static>,
    /// The connector this copy connects with: the run's own (resumption off), or after
    /// [`TlsTarget::for_worker`] with `resume`, the worker's.
    pub(super) connector: TlsConnector,
    sessions: TlsSessions,
    /// `resume`: each worker thread's connector, with a session store of its own, made at its first
    /// step and kept for the run's next ones. Locked once per step and worker, never per
    /// connection; a store shared by all the workers would be locked by each handshake of each.
    workers: Arc<Mutex<Vec<Option<TlsConnector>>>>,
}

impl TlsTarget {
    /// The copy worker `index` connects with: with `fresh`, the run's (no session remembered);
    /// with `resume`, one whose sessions are its own.
    pub(super) fn for_worker(&self, index: u64) -> TlsTarget {
        let mut mine = self.clone();
        if self.sessions == TlsSessions::Resume {
            let index = usize::try_from(index).unwrap_or(usize::MAX);
            // A worker that panicked holding the lock left the table as it was: still usable.
            let mut workers = self.workers.lock().unwrap_or_else(|e| e.into_inner());
            if workers.len() <= index {
                workers.resize(index + 1, None);
            }
            mine.connector = workers[index]
                .get_or_insert_with(|| {
                    let mut config = (**self.connector.config()).clone();
                    config.resumption = Resumption::in_memory_sessions(SESSIONS_PER_WORKER);
                    TlsConnector::from(Arc::new(config))
                })
                .clone();
        }
        mine
    }
}

/// The TLS side of a target for a host, made once per run.
pub(super) fn target(
    host: &str,
    insecure: bool,
    http: HttpVersion,
    sessions: TlsSessions,
) -> Result<TlsTarget, InvalidDnsNameError> {
    let name = ServerName::try_from(host.to_owned())?;
    let mut config = config(insecure);
    config.alpn_protocols = match http {
        HttpVersion::Http1 => vec![b"http/1.1".to_vec()],
        HttpVersion::Http2 => vec![b"h2".to_vec()],
        HttpVersion::Auto => vec![b"h2".to_vec(), b"http/1.1".to_vec()],
    };
    Ok(TlsTarget {
        name,
        connector: TlsConnector::from(Arc::new(config)),
        sessions,
        workers: Arc::default(),
    })
}

/// The client config, offering http/1.1 by ALPN, remembering no session: rustls' default keeps
/// one store for every connection made with the config, which would resume every handshake of the
/// run after the first, and lock the store in each.
pub(super) fn config(insecure: bool) -> rustls::ClientConfig {
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
    config.resumption = Resumption::disabled();
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

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;
    use std::rc::Rc;

    use shared::plan::{HttpVersion, TlsSessions};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    use super::super::target::Endpoint;
    use super::super::testing::{acceptor, target};
    use super::super::transport;
    use crate::recorder::Recorder;

    /// A rustls server that keeps sessions and sends TLS 1.3 tickets (its defaults): each
    /// connection says hello and closes.
    async fn server() -> SocketAddr {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let acc = acceptor();
        tokio::spawn(async move {
            loop {
                let Ok((tcp, _)) = l.accept().await else {
                    return;
                };
                let acc = acc.clone();
                tokio::spawn(async move {
                    if let Ok(mut s) = acc.accept(tcp).await {
                        let _ = s.write_all(b"hello").await;
                        let _ = s.shutdown().await;
                    }
                });
            }
        });
        addr
    }

    /// Opens `n` connections one after another, each read to its end (a session ticket comes
    /// after the handshake): (full, resumed) handshakes counted.
    async fn handshakes(t: &Endpoint, n: usize) -> (u64, u64) {
        let rec = Rc::new(Recorder::default());
        for _ in 0..n {
            let mut io = transport::open(t, &rec).await.unwrap();
            let mut all = Vec::new();
            let _ = io.read_to_end(&mut all).await;
        }
        let c = rec.swap().counters;
        (c.tls_full, c.tls_resumed)
    }

    #[tokio::test]
    async fn fresh_connections_never_resume_a_session_the_server_offers() {
        let addr = server().await;
        let t = target(addr, true);
        // Before the fix the config kept rustls' default store: 1 full, then 4 resumed.
        assert_eq!(handshakes(&t.for_worker(0), 5).await, (5, 0));
    }

    #[tokio::test]
    async fn resume_keeps_one_store_per_worker_through_the_run_s_steps() {
        let addr = server().await;
        let mut t = target(addr, true);
        t.tls = Some(
            super::target("localhost", true, HttpVersion::Http1, TlsSessions::Resume).unwrap(),
        );
        assert_eq!(handshakes(&t.for_worker(0), 5).await, (1, 4));
        // Another worker has sessions of its own: its first handshake is full.
        assert_eq!(handshakes(&t.for_worker(1), 3).await, (1, 2));
        // Worker 0's next step resumes what its last one left.
        assert_eq!(handshakes(&t.for_worker(0), 2).await, (0, 2));
        // The run's own connector (the HTTP/2 probe's) remembers nothing.
        assert_eq!(handshakes(&t, 2).await, (2, 0));
    }
}
