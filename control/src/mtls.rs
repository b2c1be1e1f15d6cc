//! Mutual TLS for the control channel: both sides present a certificate from the fleet's CA (made by
//! `stampede certs init`) and require the peer's. The token stays as a second factor.
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tonic::transport::{Certificate, ClientTlsConfig, Identity};

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read {what} {path}: {source}")]
    Read {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{0}")]
    Incomplete(&'static str),
    #[error("{what} {path} is not usable: {why}")]
    Invalid {
        what: &'static str,
        path: PathBuf,
        why: String,
    },
}

/// The host of `host:port` (brackets of an IPv6 literal removed): the name a peer's certificate must carry.
pub fn host_of(authority: &str) -> &str {
    authority
        .rsplit_once(':')
        .map_or(authority, |(h, _)| h)
        .trim_matches(['[', ']'])
}

/// `--tls-cert`, `--tls-key`, `--tls-ca`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    pub cert: Option<PathBuf>,
    pub key: Option<PathBuf>,
    pub ca: PathBuf,
}

fn read(what: &'static str, path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read {
        what,
        path: path.to_path_buf(),
        source,
    })
}

impl TlsFiles {
    /// From the three optional flags: none means no TLS; a CA is needed whenever any is given.
    pub fn from_flags(
        cert: Option<PathBuf>,
        key: Option<PathBuf>,
        ca: Option<PathBuf>,
    ) -> Result<Option<TlsFiles>, TlsError> {
        match (cert, key, ca) {
            (None, None, None) => Ok(None),
            (cert, key, Some(ca)) => {
                if cert.is_some() != key.is_some() {
                    return Err(TlsError::Incomplete(
                        "give --tls-cert and --tls-key together",
                    ));
                }
                Ok(Some(TlsFiles { cert, key, ca }))
            }
            _ => Err(TlsError::Incomplete(
                "TLS needs --tls-ca (the fleet's CA certificate)",
            )),
        }
    }

    fn identity(&self) -> Result<Option<Identity>, TlsError> {
        match (&self.cert, &self.key) {
            (Some(c), Some(k)) => Ok(Some(Identity::from_pem(
                read("certificate", c)?,
                read("key", k)?,
            ))),
            _ => Ok(None),
        }
    }

    fn ca(&self) -> Result<Certificate, TlsError> {
        Ok(Certificate::from_pem(read("CA certificate", &self.ca)?))
    }

    /// The listening side, for a handshake done by hand (by the link's `accept`, so a refused peer
    /// is logged): presents its certificate, requires one from the peer signed by the CA, and
    /// speaks h2 (tonic's client refuses a connection without it).
    pub fn server(&self) -> Result<Arc<rustls::ServerConfig>, TlsError> {
        let (Some(cert), Some(key)) = (&self.cert, &self.key) else {
            return Err(TlsError::Incomplete(
                "a TLS listener needs --tls-cert and --tls-key",
            ));
        };
        let certs = pem_certs("certificate", cert)?;
        let key = PrivateKeyDer::from_pem_slice(&read("key", key)?)
            .map_err(|e| invalid("key", key, e))?;
        let mut roots = rustls::RootCertStore::empty();
        for ca in pem_certs("CA certificate", &self.ca)? {
            roots
                .add(ca)
                .map_err(|e| invalid("CA certificate", &self.ca, e))?;
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
            Arc::new(roots),
            provider.clone(),
        )
        .build()
        .map_err(|e| invalid("CA certificate", &self.ca, e))?;
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| invalid("certificate", cert, e))?
            .with_client_cert_verifier(verifier)
            .with_single_cert(certs, key)
            .map_err(|e| invalid("certificate", cert, e))?;
        config.alpn_protocols = vec![b"h2".to_vec()];
        Ok(Arc::new(config))
    }

    /// The dialing side: verifies the peer as `domain` against the CA, and presents its own certificate.
    pub fn client(&self, domain: &str) -> Result<ClientTlsConfig, TlsError> {
        let mut config = ClientTlsConfig::new()
            .ca_certificate(self.ca()?)
            .domain_name(domain);
        if let Some(identity) = self.identity()? {
            config = config.identity(identity);
        }
        Ok(config)
    }
}

fn invalid(what: &'static str, path: &Path, why: impl std::fmt::Display) -> TlsError {
    TlsError::Invalid {
        what,
        path: path.to_path_buf(),
        why: why.to_string(),
    }
}

/// Every certificate of a PEM file; none is an error (an empty or mistaken file).
fn pem_certs(what: &'static str, path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs = CertificateDer::pem_slice_iter(&read(what, path)?)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| invalid(what, path, e))?;
    if certs.is_empty() {
        return Err(invalid(what, path, "it holds no PEM certificate"));
    }
    Ok(certs)
}

#[cfg(test)]
mod tests {
    use super::host_of;

    #[test]
    fn host_of_strips_the_port_and_ipv6_brackets() {
        assert_eq!(host_of("agent:7700"), "agent");
        assert_eq!(host_of("127.0.0.1:1"), "127.0.0.1");
        assert_eq!(host_of("[::1]:7700"), "::1");
        assert_eq!(host_of("agent"), "agent");
    }
}
