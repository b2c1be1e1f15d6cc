//! What went wrong with an agent, or with reaching one (`FleetError`), and which exit code each
//! kind of it makes: a refusal by its kind, never its words.
use control::link::Closed;
use proto::pb;
use shared::refusal::{Refusal, RefusalKind};

use crate::exit::Exit;

/// What went wrong with an agent, or with reaching one.
#[derive(Debug, thiserror::Error)]
pub enum FleetError {
    #[error("agent {agent} is unreachable: {why}")]
    Unreachable { agent: String, why: String },
    #[error("agent {agent} refused: {message}")]
    Refused {
        agent: String,
        kind: RefusalKind,
        message: String,
    },
    #[error("agent {agent} disconnected while {doing}{}", cause(why))]
    Lost {
        agent: String,
        doing: String,
        why: Closed,
    },
    #[error("agent {agent} did not answer within {secs} s while {doing}")]
    Silent {
        agent: String,
        secs: u64,
        doing: String,
    },
    /// Connected, but the greeting went unanswered: not a stampede-agent, or a wedged one.
    #[error(
        "agent {agent} accepted TCP but has not answered the greeting in {secs} s: is it a stampede-agent, and is it responsive?"
    )]
    Mute { agent: String, secs: u64 },
    #[error("agent {agent} sent an invalid message: {why}")]
    Protocol { agent: String, why: String },
    #[error("agent {agent} would refuse this plan: {message}")]
    Limit { agent: String, message: String },
    /// A monitor where a load agent was expected, or the other way round.
    #[error("{agent} {message}")]
    Role { agent: String, message: String },
    /// A local setup problem (unreadable certificates, a bad TLS configuration, a port taken).
    #[error("{0}")]
    Setup(String),
    #[error("cannot start the embedded agent: {0}")]
    Engine(#[from] agent::engine::EngineError),
}

impl FleetError {
    /// Whether the user must fix something before running (exit 2) or the run failed (exit 1).
    pub fn exit(&self) -> Exit {
        match self {
            FleetError::Limit { .. } | FleetError::Setup(_) | FleetError::Role { .. } => {
                Exit::Usage
            }
            // Decided by the refusal's kind, never its words.
            FleetError::Refused { kind, .. } => Exit::of_refusal(*kind),
            _ => Exit::Failed,
        }
    }

    /// An agent's refusal, as it came over the wire; one whose kind this side does not know is an
    /// invalid message.
    pub fn refused(agent: &str, r: pb::Refusal) -> FleetError {
        match Refusal::try_from(r) {
            Ok(r) => FleetError::Refused {
                agent: agent.to_string(),
                kind: r.kind,
                message: r.message,
            },
            Err(e) => FleetError::Protocol {
                agent: agent.to_string(),
                why: format!("its refusal: {e}"),
            },
        }
    }
}

/// What a closed stream adds to "disconnected": nothing when it simply ended.
fn cause(why: &Closed) -> String {
    match why {
        Closed::Ended => String::new(),
        Closed::Dropped(words) | Closed::Broken(words) => format!(": {words}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_s_exit_is_its_kind_s_whatever_its_words() {
        let refused = |kind, message: &str| {
            let r = Refusal::new(kind, message);
            FleetError::refused("a:1", pb::Refusal::from(&r)).exit()
        };
        // An --allow-target name rule's words once lacked the phrase an address rule's had: exit 1.
        let name_rule =
            "target x resolves to 127.0.0.1, loopback: its name matches --allow-target 'x'";
        assert_eq!(refused(RefusalKind::Policy, name_rule), Exit::Usage);
        assert_eq!(refused(RefusalKind::Target, "cannot resolve"), Exit::Usage);
        assert_eq!(
            refused(RefusalKind::Busy, "this agent's --allow-target"),
            Exit::Failed
        );
        let unknown = pb::Refusal {
            message: "?".into(),
            kind: 99,
        };
        assert!(matches!(
            FleetError::refused("a:1", unknown),
            FleetError::Protocol { .. }
        ));
    }
}
