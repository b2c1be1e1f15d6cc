//! Mutual TLS for the control channel: both sides present a certificate from the fleet's CA (made by
//! `stampede certs init`) and require the peer's. The token stays as a second factor.
use std::path::{Path, PathBuf};

use tonic::transport::{Certificate, ClientTlsConfig, Identity, ServerTlsConfig};

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

    /// The listening side: presents its certificate and requires one from the peer, signed by the CA.
    pub fn server(&self) -> Result<ServerTlsConfig, TlsError> {
        let identity = self.identity()?.ok_or(TlsError::Incomplete(
            "a TLS listener needs --tls-cert and --tls-key",
        ))?;
        Ok(ServerTlsConfig::new()
            .identity(identity)
            .client_ca_root(self.ca()?)
            .timeout(std::time::Duration::from_secs(5)))
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
