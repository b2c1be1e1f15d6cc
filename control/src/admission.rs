//! Admission to an agent's session: what a coordinator must present (the protocol version, the token,
//! compared in constant time), the agent's one coordinator seat, and the listener's connection told
//! once a hello admits it. `join` is the proof of the token on a join stream, where it never crosses.
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use proto::{PROTOCOL_VERSION, pb};
use tokio::time::Instant;

use crate::listener::Admission;
use crate::policy::Policy;
use crate::session::SessionError;

pub mod join;

/// How long a peer that connected to this agent's listener has, from opening the control stream, to
/// send a valid hello. Until a valid hello nothing is answered (not even a ping) and the agent is not
/// taken, so a peer without the token cannot hold it.
pub const HELLO_WITHIN: Duration = Duration::from_secs(5);

/// Compares a presented token with the expected one without an early exit, so timing does not tell
/// an attacker how much of a guess was right (the coordinator's live page asks it too).
pub fn token_matches(presented: &str, expected: &str) -> bool {
    let (a, b) = (presented.as_bytes(), expected.as_bytes());
    let mut diff = a.len() ^ b.len();
    for i in 0..a.len().max(b.len()) {
        let x = a.get(i).copied().unwrap_or(0);
        let y = b.get(i).copied().unwrap_or(0);
        diff |= usize::from(x ^ y);
    }
    diff == 0
}

/// An agent's one coordinator seat: taken by a valid hello, given back when that session ends.
#[derive(Debug, Clone, Default)]
pub struct Seat(Arc<AtomicBool>);

/// A session's hold on the [`Seat`]; dropping it (the session ending, however) frees the seat.
#[derive(Debug)]
pub struct Seated(Arc<AtomicBool>);

impl Seat {
    fn take(&self) -> Option<Seated> {
        (!self.0.swap(true, Ordering::AcqRel)).then(|| Seated(self.0.clone()))
    }
}

impl Drop for Seated {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

/// What a coordinator must present (the token), what this agent agrees to do (the policy), and the
/// door it comes through: the agent's seat, and the connection to tell once it is admitted.
#[derive(Debug, Clone, Default)]
pub struct Rules {
    pub token: Option<String>,
    pub policy: Policy,
    /// Shared by every session of one agent: one coordinator at a time.
    pub seat: Seat,
    /// The listener's connection this session came on, admitted (its deadline lifted) by a valid
    /// hello; `None` for a coordinator this agent dialed (`--join`) or the embedded agent.
    pub door: Option<Admission>,
    /// Set by the first hello this session admits. A daemon gives each session its own, so that
    /// `--exit-after-run` ends only after a session that was admitted, never after a refused stranger.
    pub admitted: Arc<AtomicBool>,
}

impl Rules {
    /// This session's rules on the connection `door`: the same token, policy and seat, and a fresh
    /// admission mark.
    pub fn at(&self, door: Admission) -> Rules {
        Rules {
            door: Some(door),
            admitted: Arc::default(),
            ..self.clone()
        }
    }

    /// These rules with a fresh admission mark, for one session this agent dialed (`--join`).
    pub fn for_session(&self) -> Rules {
        Rules {
            admitted: Arc::default(),
            ..self.clone()
        }
    }

    /// Whether a hello was admitted under these rules.
    pub fn was_admitted(&self) -> bool {
        self.admitted.load(Ordering::Acquire)
    }

    /// When a session opened at `opened` must have said a valid hello: on a stream that came through
    /// a listener (a door), where anyone may connect; none on one this agent dialed itself (`--join`)
    /// or in process, whose peer it chose.
    pub fn hello_by(&self, opened: Instant) -> Option<Instant> {
        self.door.as_ref().map(|_| opened + HELLO_WITHIN)
    }

    /// A first hello: checked ([`Rules::check`]), then the seat taken and the connection admitted.
    pub fn admit(&self, h: &pb::Hello) -> Result<Seated, SessionError> {
        self.check(h)?;
        let seated = self.seat.take().ok_or(SessionError::Busy)?;
        if let Some(door) = &self.door {
            door.admit();
        }
        self.admitted.store(true, Ordering::Release);
        Ok(seated)
    }

    /// Checks a hello's protocol version and token: the same door for a load agent and a monitor.
    pub fn check(&self, h: &pb::Hello) -> Result<(), SessionError> {
        if h.protocol_version != PROTOCOL_VERSION {
            return Err(SessionError::Version {
                theirs: h.protocol_version,
                ours: PROTOCOL_VERSION,
            });
        }
        let Some(expected) = &self.token else {
            return Ok(());
        };
        if h.token.is_empty() {
            Err(SessionError::Auth(
                "this agent requires a token: give the coordinator --token-file or STAMPEDE_TOKEN",
            ))
        } else if !token_matches(&h.token, expected) {
            Err(SessionError::Auth("the token does not match this agent's"))
        } else {
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_compare_whole() {
        assert!(token_matches("s3cret", "s3cret"));
        assert!(!token_matches("s3cre", "s3cret"));
        assert!(!token_matches("s3cret!", "s3cret"));
        assert!(!token_matches("S3cret", "s3cret"));
        assert!(!token_matches("", "s3cret"));
    }
}
