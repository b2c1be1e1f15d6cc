//! TLS toward the target (not the control channel's mutual TLS, which is `crate::tls`): the rustls
//! client config, verified against the web's roots or, with `--insecure`, not at all; the server
//! name sent as SNI and checked against the certificate.
use std::sync::Arc;

use rustls::pki_types::{InvalidDnsNameError, ServerName};
use shared::plan::HttpVersion;
use tokio_rustls::TlsConnector;

/// The connector and the server name for a target host, made once per run.
pub(super) fn connector(
    host: &str,
    insecure: bool,
    http: HttpVersion,
) -> Result<(TlsConnector, ServerName<'static>), InvalidDnsNameError> {
    let name = ServerName::try_from(host.to_owned())?;
    let mut config = config(insecure);
    config.alpn_protocols = match http {
        HttpVersion::Http1 => vec![b"http/1.1".to_vec()],
        HttpVersion::Http2 => vec![b"h2".to_vec()],
        HttpVersion::Auto => vec![b"h2".to_vec(), b"http/1.1".to_vec()],
    };
    Ok((TlsConnector::from(Arc::new(config)), name))
}

/// The client config, offering http/1.1 by ALPN.
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
