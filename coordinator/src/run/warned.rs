//! The agents' warnings (an `Ack`'s "accepted, but risky"): said on stderr, a capacity risk once per
//! agent and run, and kept as notes of the step they came with.
use shared::warning::{Warning, WarningKind};

use crate::fleet::Fleet;

/// The capacity risks already told on stderr in this run, by agent and kind: an ordinary ramp has one
/// on every step, and repeating them buries everything else.
#[derive(Default)]
pub struct Warned(std::collections::HashSet<(usize, WarningKind)>);

impl Warned {
    /// Prints the agents' warnings on stderr (whatever --quiet says: they explain a result, they are
    /// not progress), a capacity risk once per agent and run, and returns all of them as notes, each
    /// naming its agent: every step's notes keep their own.
    pub fn announce(&mut self, fleet: &Fleet, warnings: &[(usize, Warning)]) -> Vec<String> {
        warnings
            .iter()
            .map(|(i, w)| {
                let agent = fleet.name(*i);
                if self.say(*i, w) {
                    let later = if w.kind.is_capacity_risk() {
                        " (said once per run; later steps' notes name theirs)"
                    } else {
                        ""
                    };
                    eprintln!("stampede: warning from agent {agent}: {w}{later}");
                }
                format!("agent {agent}: {w}")
            })
            .collect()
    }

    /// Whether to say it now: always, unless it is a capacity risk of a kind this agent said before.
    fn say(&mut self, i: usize, w: &Warning) -> bool {
        !w.kind.is_capacity_risk() || self.0.insert((i, w.kind))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_capacity_risk_is_said_once_per_agent_and_kind() {
        let mut warned = Warned::default();
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
    }
}
