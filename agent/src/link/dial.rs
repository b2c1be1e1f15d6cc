//! Dialing a control port, both ways (a coordinator dialing a listening agent, an agent joining a
//! coordinator): the endpoint (scheme, connect timeout, nodelay, TLS, message limits) set up once,
//! and a failure in words that say which side lacks what, instead of the HTTP/2 or TLS layer's.
use std::time::Duration;

use proto::pb::agent_client::AgentClient;
use proto::pb::coordinator_client::CoordinatorClient;
use tonic::transport::{Channel, Endpoint};

use super::{MAX_MESSAGE_BYTES, Side};
use crate::tls::TlsFiles;

/// How long a TCP connect may take before the peer counts as unreachable.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Debug, thiserror::Error)]
pub enum DialError {
    /// The address or the TLS files are unusable: the user's to fix before anything is dialed.
    #[error("{0}")]
    Setup(String),
    #[error(transparent)]
    Tls(#[from] crate::tls::TlsError),
    /// Nothing answered (refused, timed out): it may yet come up.
    #[error("{0}")]
    Unreachable(String),
    /// Something answered, but the two ends do not agree (TLS on one side only, a certificate the
    /// other does not take): dialing again will not help.
    #[error("{0}")]
    Refused(String),
}

/// How to reach one peer's control port.
#[derive(Debug, Clone)]
pub struct Dialer {
    endpoint: Endpoint,
    /// Whom it dials, for the words of a failure.
    peer: Side,
    /// The name its certificate must carry.
    domain: String,
    tls: bool,
}

impl Dialer {
    /// `authority` is `host:port`; with `tls`, the peer's certificate must name `domain`.
    pub fn new(
        peer: Side,
        authority: &str,
        domain: &str,
        tls: Option<&TlsFiles>,
    ) -> Result<Dialer, DialError> {
        let scheme = if tls.is_some() { "https" } else { "http" };
        let mut endpoint = Endpoint::from_shared(format!("{scheme}://{authority}"))
            .map_err(|e| DialError::Setup(format!("{authority}: {e}")))?
            .connect_timeout(CONNECT_TIMEOUT)
            .tcp_nodelay(true);
        if let Some(tls) = tls {
            endpoint = endpoint
                .tls_config(tls.client(domain)?)
                .map_err(|e| DialError::Setup(e.to_string()))?;
        }
        Ok(Dialer {
            endpoint,
            peer,
            domain: domain.to_string(),
            tls: tls.is_some(),
        })
    }

    async fn connect(&self) -> Result<Channel, DialError> {
        self.endpoint
            .connect()
            .await
            .map_err(|e| match rustls_cause(&e) {
                Some(tls) => DialError::Refused(self.tls_words(tls)),
                None => DialError::Unreachable(in_words(&e)),
            })
    }

    /// A client of a listening agent's `Agent` service.
    pub async fn agent(&self) -> Result<AgentClient<Channel>, DialError> {
        Ok(AgentClient::new(self.connect().await?)
            .max_decoding_message_size(MAX_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_MESSAGE_BYTES))
    }

    /// A client of a coordinator's `Coordinator` service (the join port).
    pub async fn coordinator(&self) -> Result<CoordinatorClient<Channel>, DialError> {
        Ok(CoordinatorClient::new(self.connect().await?)
            .max_decoding_message_size(MAX_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_MESSAGE_BYTES))
    }

    /// The status the peer's first call failed with, in words: the peer's own refusal as it said
    /// it, or a TLS failure below gRPC (an alert after the handshake) with what mutual TLS takes.
    pub fn refused(&self, status: &tonic::Status) -> String {
        let words = super::status_in_words(status);
        if self.tls && std::error::Error::source(status).is_some() {
            format!(
                "{words} (mutual TLS: the {} takes a certificate signed by its --tls-ca, valid now, \
                 given with --tls-cert and --tls-key)",
                self.peer.name()
            )
        } else {
            words
        }
    }

    /// A TLS failure while connecting, as the dialing side says it.
    fn tls_words(&self, e: &rustls::Error) -> String {
        use rustls::CertificateError as Cert;
        let (peer, me) = (self.peer.name(), self.peer.other().name());
        match e {
            // A reply that is not a TLS record: the peer speaks plain text.
            rustls::Error::InvalidMessage(_) => format!(
                "it answers in plain text, not TLS: the {peer} listens without TLS; give it \
                 --tls-cert, --tls-key and --tls-ca too, or this {me} none of them"
            ),
            rustls::Error::InvalidCertificate(Cert::UnknownIssuer | Cert::BadSignature) => {
                format!("its certificate is not signed by this {me}'s --tls-ca")
            }
            rustls::Error::InvalidCertificate(
                Cert::NotValidForName | Cert::NotValidForNameContext { .. },
            ) => format!(
                "its certificate does not name {}: issue one that does with `stampede certs issue`",
                self.domain
            ),
            rustls::Error::InvalidCertificate(Cert::Expired | Cert::ExpiredContext { .. }) => {
                "its certificate has expired".into()
            }
            rustls::Error::AlertReceived(alert) => format!(
                "it refused the TLS handshake ({alert:?}) (mutual TLS: the {peer} takes a \
                 certificate signed by its --tls-ca, valid now, given with --tls-cert and --tls-key)"
            ),
            other => format!("TLS: {other}"),
        }
    }
}

/// The rustls error under a connect error, if TLS is what failed.
fn rustls_cause<'a>(e: &'a (dyn std::error::Error + 'static)) -> Option<&'a rustls::Error> {
    let mut cause = Some(e);
    while let Some(c) = cause {
        if let Some(tls) = c.downcast_ref::<rustls::Error>() {
            return Some(tls);
        }
        // An io::Error hides what it wraps from `source()`; look inside.
        if let Some(tls) = c
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
            .and_then(|inner| inner.downcast_ref::<rustls::Error>())
        {
            return Some(tls);
        }
        cause = c.source();
    }
    None
}

/// A connect error as a person says it: the OS's reason ("connection refused") where there is one,
/// else the innermost cause, never the Debug print of tonic's and hyper's wrappers.
fn in_words(e: &(dyn std::error::Error + 'static)) -> String {
    let mut cause = e;
    loop {
        if let Some(io) = cause.downcast_ref::<std::io::Error>() {
            let kind = io.kind().to_string();
            return if kind.ends_with("other error") || kind.starts_with("uncategorized") {
                io.to_string()
            } else {
                kind
            };
        }
        match cause.source() {
            Some(next) => cause = next,
            None => return cause.to_string(),
        }
    }
}
