//! Dialing a control port, both ways (a coordinator dialing a listening agent, an agent joining a
//! coordinator): the endpoint (scheme, connect timeout, nodelay, TLS, message limits) set up once,
//! and a failure in words that say which side lacks what, instead of the HTTP/2 or TLS layer's; and
//! both sides of the join handshake, in which the joining agent and the coordinator prove the token
//! to each other before a session starts (`prove_join`, `challenge_join`).
use std::time::Duration;

use proto::pb;
use proto::pb::agent_client::AgentClient;
use proto::pb::coordinator_client::CoordinatorClient;
use tonic::transport::{Channel, Endpoint};

use crate::admission::join;
use crate::link::{AgentEnd, CoordinatorEnd, Link, MAX_MESSAGE_BYTES, Side};
use crate::mtls::TlsFiles;

/// How long a TCP connect may take before the peer counts as unreachable.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Debug, thiserror::Error)]
pub enum DialError {
    /// The address or the TLS files are unusable: the user's to fix before anything is dialed.
    #[error("{0}")]
    Setup(String),
    #[error(transparent)]
    Tls(#[from] crate::mtls::TlsError),
    /// Nothing answered (refused, timed out): it may yet come up.
    #[error("{0}")]
    Unreachable(String),
    /// Something answered, but the two ends do not agree (TLS on one side only, a certificate the
    /// other does not take): dialing again will not help.
    #[error("{0}")]
    Refused(String),
    /// This side refused the peer: its certificate does not name the address dialed, is not
    /// signed by this side's CA, or has expired. Not the peer's refusal, and dialing again will
    /// not help either.
    #[error("{0}")]
    Distrusted(String),
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
                Some(tls @ rustls::Error::InvalidCertificate(_)) => {
                    DialError::Distrusted(self.tls_words(tls))
                }
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
        let words = crate::link::status_in_words(status);
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

/// How long either side of the join handshake waits for the other's next message.
pub const JOIN_PROOF_WAIT: Duration = Duration::from_secs(10);

/// The first of a join stream's messages, within [`JOIN_PROOF_WAIT`]; `what` names it in an error.
async fn handshake_next<Out, In>(end: &mut Link<Out, In>, what: &str) -> Result<In, String> {
    match tokio::time::timeout(JOIN_PROOF_WAIT, end.rx.recv()).await {
        Ok(Ok(msg)) => Ok(msg),
        Ok(Err(closed)) => Err(format!("{closed} before {what}")),
        Err(_) => Err(format!("no {what} within {} s", JOIN_PROOF_WAIT.as_secs())),
    }
}

/// A coordinator's hello in the join handshake, or why there is none: its refusal (an abort), an
/// older coordinator, something else.
async fn join_hello(end: &mut AgentEnd, what: &str) -> Result<pb::Hello, String> {
    use pb::coordinator_message::Kind as Down;
    match handshake_next(end, what).await?.kind {
        Some(Down::Hello(h)) if h.protocol_version != proto::PROTOCOL_VERSION => Err(format!(
            "it speaks protocol {}, this agent {}: run the same stampede version on both",
            h.protocol_version,
            proto::PROTOCOL_VERSION
        )),
        Some(Down::Hello(h)) => Ok(h),
        Some(Down::Abort(a)) => Err(a.reason),
        _ => Err(format!("it sent something other than {what}")),
    }
}

/// The joining agent's side of the handshake ([`join`]): answers the coordinator's challenge
/// with this agent's proof of `token`, then checks the coordinator's. An agent without a token never
/// answers a challenge, and one with a token takes no coordinator without it. Only after this is the
/// session served; its hello then carries no token.
pub async fn prove_join(end: &mut AgentEnd, token: Option<&str>) -> Result<(), String> {
    use pb::agent_message::Kind as Up;
    let challenge = join_hello(end, "its challenge").await?.join_challenge;
    let refuse = |why: &str| {
        Up::Refusal(pb::Refusal::from(&shared::refusal::Refusal::new(
            shared::refusal::RefusalKind::Setup,
            why,
        )))
    };
    let nonce = join::nonce().map_err(|e| e.to_string())?;
    let mac = match (token, challenge.is_empty()) {
        (Some(_), true) => {
            let why = "it has no token and this agent requires one: give the coordinator --token-file or STAMPEDE_TOKEN";
            let _ = end.tx.send(proto::from_agent(refuse(why))).await;
            return Err(why.into());
        }
        (None, false) => {
            let why =
                "the coordinator requires a token: give this agent --token-file or STAMPEDE_TOKEN";
            let _ = end.tx.send(proto::from_agent(refuse(why))).await;
            return Err(why.into());
        }
        (Some(t), false) => join::agent_proof(t, &challenge, &nonce),
        (None, true) => Vec::new(),
    };
    let proof = Up::JoinProof(pb::JoinProof {
        nonce: nonce.clone(),
        mac,
    });
    end.tx
        .send(proto::from_agent(proof))
        .await
        .map_err(|e| format!("{e} while proving the token"))?;
    let proof = join_hello(end, "its proof of the token").await?.join_proof;
    match token {
        Some(t) if !join::verify_coordinator(t, &challenge, &nonce, &proof) => {
            Err("it did not prove it holds this agent's token".into())
        }
        _ => Ok(()),
    }
}

/// The coordinator's side of a join's handshake ([`prove_join`]): challenges the peer and verifies its
/// proof of `token`; returns the message that proves the token back, for the caller to send once it
/// takes the peer (or an abort instead). The token itself is never sent. A peer that fails is told
/// why (an abort) and refused here, in words for the log.
pub async fn challenge_join(
    end: &mut CoordinatorEnd,
    token: Option<&str>,
) -> Result<pb::CoordinatorMessage, String> {
    use pb::agent_message::Kind as Up;
    use pb::coordinator_message::Kind as Down;
    let hello = |join_challenge, join_proof| {
        proto::to_agent(Down::Hello(pb::Hello {
            protocol_version: proto::PROTOCOL_VERSION,
            coordinator_version: shared::VERSION.to_string(),
            token: String::new(),
            join_challenge,
            join_proof,
        }))
    };
    let challenge = match token {
        Some(_) => join::nonce().map_err(|e| e.to_string())?,
        None => Vec::new(),
    };
    end.tx
        .send(hello(challenge.clone(), Vec::new()))
        .await
        .map_err(|e| e.to_string())?;
    let answer = handshake_next(end, "its proof of the token").await?;
    let proof =
        match answer.kind {
            Some(Up::JoinProof(p)) => p,
            Some(Up::Refusal(r)) => return Err(format!("it refused: {}", r.message)),
            _ => return Err(
                "it sent something other than its proof of the token (an older stampede-agent?)"
                    .into(),
            ),
        };
    if let Some(t) = token
        && !join::verify_agent(t, &challenge, &proof.nonce, &proof.mac)
    {
        let why = "it did not prove it holds this coordinator's token";
        let abort = Down::Abort(pb::Abort {
            reason:
                "the coordinator refused this agent: its token does not match the coordinator's"
                    .into(),
        });
        let _ = end.tx.send(proto::to_agent(abort)).await;
        return Err(why.into());
    }
    let proof = match token {
        Some(t) => join::coordinator_proof(t, &challenge, &proof.nonce),
        None => Vec::new(),
    };
    Ok(hello(Vec::new(), proof))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Both sides of the join handshake over an in-process link, holding these tokens.
    async fn handshake(
        coordinator: Option<&str>,
        agent: Option<&str>,
    ) -> (Result<(), String>, Result<(), String>) {
        let (mut c, mut a) = crate::link::pair();
        let coordinator = async {
            let proof = challenge_join(&mut c, coordinator).await?;
            c.tx.send(proof).await.map_err(|e| e.to_string())
        };
        tokio::join!(coordinator, prove_join(&mut a, agent))
    }

    #[tokio::test]
    async fn the_join_handshake_admits_the_token_and_refuses_a_wrong_or_missing_one() {
        let (c, a) = handshake(Some("s3cret"), Some("s3cret")).await;
        assert_eq!((c, a), (Ok(()), Ok(())));
        let (c, a) = handshake(None, None).await;
        assert_eq!((c, a), (Ok(()), Ok(())));
        let (c, a) = handshake(Some("s3cret"), Some("guess")).await;
        assert_eq!(
            c.unwrap_err(),
            "it did not prove it holds this coordinator's token"
        );
        assert!(a.unwrap_err().contains("token does not match"));
        let (c, a) = handshake(Some("s3cret"), None).await;
        assert!(
            c.unwrap_err()
                .contains("it refused: the coordinator requires a token")
        );
        assert!(a.unwrap_err().contains("give this agent --token-file"));
        let (_, a) = handshake(None, Some("s3cret")).await;
        assert!(
            a.unwrap_err()
                .contains("it has no token and this agent requires one")
        );
    }

    /// A coordinator that answers the challenge with the agent's own proof, as a stranger relaying
    /// would: refused by the agent.
    #[tokio::test]
    async fn a_coordinator_that_cannot_prove_the_token_is_refused_by_the_joining_agent() {
        use pb::agent_message::Kind as Up;
        use pb::coordinator_message::Kind as Down;
        let (mut c, mut a) = crate::link::pair();
        let stranger = async move {
            let challenge = join::nonce().unwrap();
            let hello = |join_challenge, join_proof| {
                proto::to_agent(Down::Hello(pb::Hello {
                    protocol_version: proto::PROTOCOL_VERSION,
                    join_challenge,
                    join_proof,
                    ..Default::default()
                }))
            };
            c.tx.send(hello(challenge, Vec::new())).await.unwrap();
            let Ok(pb::AgentMessage {
                kind: Some(Up::JoinProof(p)),
            }) = c.rx.recv().await
            else {
                panic!("expected a proof");
            };
            c.tx.send(hello(Vec::new(), p.mac)).await.unwrap();
            c
        };
        let (_c, refused) = tokio::join!(stranger, prove_join(&mut a, Some("s3cret")));
        assert_eq!(
            refused.unwrap_err(),
            "it did not prove it holds this agent's token"
        );
    }
}
