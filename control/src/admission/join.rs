//! The join handshake: an agent that dials a `--listen` coordinator proves it holds the token, and the
//! coordinator proves it back, without the token itself crossing the wire. The coordinator opens with
//! a random challenge; the agent answers with its own nonce and HMAC-SHA256 over both; only once that
//! is verified does the coordinator answer with its HMAC over them the other way round. Each side's
//! MAC is bound to its role by a label, so neither can be replayed as the other's, and both nonces are
//! fresh, so no recorded exchange proves anything again. Verification is ring's, in constant time.
use ring::hmac;
use ring::rand::{SecureRandom, SystemRandom};

/// Bytes of each side's nonce.
pub const NONCE_BYTES: usize = 32;

const AGENT: &[u8] = b"stampede join agent";
const COORDINATOR: &[u8] = b"stampede join coordinator";

#[derive(Debug, thiserror::Error)]
#[error("the system's random number generator failed")]
pub struct RandomError;

/// A fresh random nonce.
pub fn nonce() -> Result<Vec<u8>, RandomError> {
    let mut bytes = vec![0u8; NONCE_BYTES];
    SystemRandom::new()
        .fill(&mut bytes)
        .map_err(|_| RandomError)?;
    Ok(bytes)
}

fn mac(token: &str, label: &[u8], first: &[u8], second: &[u8]) -> hmac::Tag {
    let key = hmac::Key::new(hmac::HMAC_SHA256, token.as_bytes());
    let mut ctx = hmac::Context::with_key(&key);
    // Fixed-length nonces after a fixed label: the concatenation is unambiguous.
    ctx.update(label);
    ctx.update(first);
    ctx.update(second);
    ctx.sign()
}

fn verify(token: &str, label: &[u8], first: &[u8], second: &[u8], tag: &[u8]) -> bool {
    let key = hmac::Key::new(hmac::HMAC_SHA256, token.as_bytes());
    let message = [label, first, second].concat();
    first.len() == NONCE_BYTES
        && second.len() == NONCE_BYTES
        && hmac::verify(&key, &message, tag).is_ok()
}

/// The agent's answer to `challenge`, with its own `nonce`.
pub fn agent_proof(token: &str, challenge: &[u8], nonce: &[u8]) -> Vec<u8> {
    mac(token, AGENT, challenge, nonce).as_ref().to_vec()
}

/// Whether `proof` is the answer to `challenge` of an agent holding `token`.
pub fn verify_agent(token: &str, challenge: &[u8], nonce: &[u8], proof: &[u8]) -> bool {
    verify(token, AGENT, challenge, nonce, proof)
}

/// The coordinator's proof, once the agent's is verified.
pub fn coordinator_proof(token: &str, challenge: &[u8], nonce: &[u8]) -> Vec<u8> {
    mac(token, COORDINATOR, nonce, challenge).as_ref().to_vec()
}

/// Whether `proof` is that of a coordinator holding `token`.
pub fn verify_coordinator(token: &str, challenge: &[u8], nonce: &[u8], proof: &[u8]) -> bool {
    verify(token, COORDINATOR, nonce, challenge, proof)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_side_proves_the_token_and_neither_proof_passes_as_the_other() {
        let (challenge, nonce) = (nonce().unwrap(), nonce().unwrap());
        let agent = agent_proof("secret", &challenge, &nonce);
        let coordinator = coordinator_proof("secret", &challenge, &nonce);
        assert!(verify_agent("secret", &challenge, &nonce, &agent));
        assert!(verify_coordinator(
            "secret",
            &challenge,
            &nonce,
            &coordinator
        ));
        assert!(!verify_agent("other", &challenge, &nonce, &agent));
        assert!(!verify_agent("secret", &challenge, &nonce, &coordinator));
        assert!(!verify_coordinator("secret", &challenge, &nonce, &agent));
        assert!(
            !verify_agent("secret", &nonce, &challenge, &agent),
            "bound to the order"
        );
        assert!(!verify_agent("secret", &challenge, &nonce, b""));
        assert!(!verify_agent(
            "secret",
            b"",
            b"",
            &agent_proof("secret", b"", b"")
        ));
    }
}
