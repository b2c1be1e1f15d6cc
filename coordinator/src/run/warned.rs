//! The agents' warnings (an `Ack`'s "accepted, but risky"): said on stderr, a capacity risk once per
//! agent and run, and kept as notes of the step they came with.
use crate::fleet::Fleet;

/// The capacity risks (an agent's "may hold up to" warnings) already told on stderr in this run: an
/// ordinary ramp has one on every step, and repeating them buries everything else.
#[derive(Default)]
pub struct Warned(std::collections::HashSet<(usize, &'static str)>);

impl Warned {
    /// Prints the agents' warnings on stderr (whatever --quiet says: they explain a result, they are
    /// not progress), a capacity risk once per agent and run, and returns all of them as notes, each
    /// naming its agent: every step's notes keep their own.
    pub fn announce(&mut self, fleet: &Fleet, warnings: &[(usize, String)]) -> Vec<String> {
        warnings
            .iter()
            .map(|(i, w)| {
                let agent = fleet.name(*i);
                let first = match risk(w) {
                    Some(kind) => self.0.insert((*i, kind)),
                    None => true,
                };
                if first {
                    let later = if risk(w).is_some() {
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
}

/// Which capacity risk an agent's step warning is, by the failure it predicts.
fn risk(warning: &str) -> Option<&'static str> {
    // The agent's capacity risks (agent::capacity): per step, each naming what would fail.
    if !warning.starts_with("step ") {
        return None;
    }
    if warning.contains("may fall behind its schedule") {
        return Some("dispatch");
    }
    if !warning.contains("the rest would fail as") {
        return None;
    }
    ["fd-unavailable", "addr-unavailable"]
        .into_iter()
        .find(|class| warning.contains(class))
        .or(Some("capacity"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_capacity_risk_the_agent_words_is_told_once() {
        for (w, kind) in [
            (
                "step 3 may hold up to 2000 connections open if the target stops answering (...), more than the 924 this agent can open (...); the rest would fail as fd-unavailable",
                "fd-unavailable",
            ),
            (
                "step 3 may need up to 200 concurrent connections if the target stops answering (...), more than the 48 this agent can open (...); the rest would fail as fd-unavailable",
                "fd-unavailable",
            ),
            (
                "step 2 may need up to 30000 concurrent connections to one destination if ..., more than the 28232 local ports this agent has (...); the rest would fail as addr-unavailable",
                "addr-unavailable",
            ),
            (
                "step 1 needs 3000000 requests/s from this agent, more than its 2 worker threads will likely dispatch (...); it may fall behind its schedule",
                "dispatch",
            ),
        ] {
            assert_eq!(risk(w), Some(kind), "{w}");
        }
        assert_eq!(risk("source address 10.0.0.9 is not on this machine"), None);
    }
}
