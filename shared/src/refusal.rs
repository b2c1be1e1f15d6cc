//! Why a peer refused a request, as a kind beside its words: the coordinator decides what a refusal
//! means (its exit code, whether the plan is the user's to fix) from the kind, never from the wording.
use std::fmt;

/// What a refusal is about. Each kind says who must change what before the run can go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RefusalKind {
    /// A request out of order or invalid: a peer's fault, not the plan's.
    Other,
    /// The agent serves another coordinator: the same run may go once that one is done.
    Busy,
    /// The fleet's setup refuses the session: a token, a protocol version, a monitor asked to load, a
    /// monitor that cannot watch what it was started for.
    Setup,
    /// The target's name cannot be resolved, or to no address the run can use.
    Target,
    /// The target does not speak the HTTP asked for (found before any load).
    Protocol,
    /// The agent's own `--allow-target` or `--max-*` limits.
    Policy,
    /// This machine's sockets cannot hold the step (file descriptors, local ports).
    Capacity,
}

impl RefusalKind {
    pub const ALL: [RefusalKind; 7] = [
        RefusalKind::Other,
        RefusalKind::Busy,
        RefusalKind::Setup,
        RefusalKind::Target,
        RefusalKind::Protocol,
        RefusalKind::Policy,
        RefusalKind::Capacity,
    ];
}

/// A refusal: its kind, and its words for people.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub kind: RefusalKind,
    pub message: String,
}

impl Refusal {
    pub fn new(kind: RefusalKind, message: impl Into<String>) -> Refusal {
        Refusal {
            kind,
            message: message.into(),
        }
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}
