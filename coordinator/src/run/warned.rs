//! The agents' warnings (an `Ack`'s "accepted, but risky"): said on stderr, a capacity risk once per
//! agent and run, and kept as notes of the step they came with.
use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use shared::warning::{Warning, WarningKind};

use crate::fleet::Fleet;

/// The capacity risks already told on stderr in this run, by agent and kind: an ordinary ramp has one
/// on every step, and a side-by-side run on every target's; repeating them buries everything else.
/// One is shared by the run's targets (a clone is the same record).
#[derive(Default, Clone)]
pub struct Warned(Arc<Mutex<HashSet<(usize, WarningKind)>>>);

/// A step's warnings as notes, and which of those notes repeat a risk the run has said already.
pub struct Announced {
    pub notes: Vec<String>,
    /// Kept in the step's record (run.json), left out of what stdout says at the end.
    pub repeats: Vec<String>,
}

impl Warned {
    /// Prints the agents' warnings on stderr (whatever --quiet says: they explain a result, they are
    /// not progress), a capacity risk once per agent and run, and returns all of them as notes, each
    /// naming its agent: every step's notes keep their own.
    pub fn announce(&self, fleet: &Fleet, warnings: &[(usize, Warning)]) -> Announced {
        let mut repeats = Vec::new();
        let notes = warnings
            .iter()
            .map(|(i, w)| {
                let agent = fleet.name(*i);
                let note = format!("agent {agent}: {w}");
                if self.say(*i, w) {
                    let later = if w.kind.is_capacity_risk() {
                        " (said once per run; later steps' notes name theirs)"
                    } else {
                        ""
                    };
                    eprintln!("stampede: warning from agent {agent}: {w}{later}");
                } else {
                    repeats.push(note.clone());
                }
                note
            })
            .collect();
        Announced { notes, repeats }
    }

    /// Whether to say it now: always, unless it is a capacity risk of a kind this agent said before.
    fn say(&self, i: usize, w: &Warning) -> bool {
        !w.kind.is_capacity_risk()
            || self
                .0
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .insert((i, w.kind))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_capacity_risk_is_said_once_per_agent_and_kind() {
        let warned = Warned::default();
        let fd = Warning::new(WarningKind::FdUnavailable, "step 1 may hold ...");
        let ports = Warning::new(WarningKind::AddrUnavailable, "step 1 may need ...");
        let other = Warning::new(
            WarningKind::Other,
            "source address 10.0.0.9 is not on this machine",
        );
        assert!(warned.say(0, &fd));
        assert!(!warned.say(0, &fd), "the same risk again");
        assert!(warned.say(1, &fd), "another agent's");
        assert!(warned.say(0, &ports), "another kind");
        assert!(
            warned.say(0, &other) && warned.say(0, &other),
            "not a risk: every time"
        );
        // Another target of the run (side by side) shares the record: said once per run.
        let target = warned.clone();
        assert!(!target.say(0, &fd), "another target's step, the same risk");
    }
}
