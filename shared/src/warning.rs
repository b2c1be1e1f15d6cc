//! A warning a peer accepted a step with: the kind of failure it predicts, so nobody has to read its
//! wording to tell them apart, and its words for people.
use std::fmt;

/// What an accepted risk would make fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WarningKind {
    /// The worker threads may not dispatch the rate: the step may fall behind its schedule.
    Dispatch,
    /// Connections past the fd limit would fail as fd-unavailable.
    FdUnavailable,
    /// Connections past the local ports would fail as addr-unavailable.
    AddrUnavailable,
    /// Another socket limit of the agent's.
    Capacity,
    /// Not a capacity risk (a source address this machine does not have, ...).
    Other,
}

impl WarningKind {
    /// A capacity risk comes back every step of an ordinary ramp: it is said once per agent and run.
    pub fn is_capacity_risk(self) -> bool {
        self != WarningKind::Other
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Warning {
    pub kind: WarningKind,
    pub text: String,
}

impl Warning {
    pub fn new(kind: WarningKind, text: impl Into<String>) -> Warning {
        Warning {
            kind,
            text: text.into(),
        }
    }
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}
