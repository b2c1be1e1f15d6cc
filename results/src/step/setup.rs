//! What a plan's `[setup]` did in a step: how many connections ran it, how many runs failed, and
//! the note that says so, since each failed run left a request of the mix unsent.
use shared::metrics::Counters;

/// A step's setup runs: one per connection before its first request of the mix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct SetupStep {
    /// Runs on a connection.
    pub runs: u64,
    /// Of those, runs that failed (no reply, a status outside --ok-status, nothing extracted).
    pub failed: u64,
}

impl SetupStep {
    /// From the step's counters: `None` when no setup ran (a plan without one).
    pub fn of(c: &Counters) -> Option<SetupStep> {
        (c.setups > 0).then_some(SetupStep {
            runs: c.setups,
            failed: c.setup_failed,
        })
    }

    /// Failed runs in words: a failed setup is never skipped, its request counted unsent.
    pub(super) fn note(&self) -> Option<String> {
        (self.failed > 0).then(|| {
            format!(
                "setup: {} of {} runs failed; each left the request that waited for it unsent, in its error class (the first failure's words are in error_messages)",
                self.failed, self.runs
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_and_failures_come_from_the_counters_and_only_failures_are_noted() {
        let mut c = Counters::default();
        assert_eq!(SetupStep::of(&c), None);
        c.setups = 4;
        let ok = SetupStep::of(&c).unwrap();
        assert_eq!((ok.runs, ok.failed, ok.note()), (4, 0, None));
        c.setups = 394;
        c.setup_failed = 394;
        let failed = SetupStep::of(&c).unwrap().note().unwrap();
        assert!(
            failed.starts_with("setup: 394 of 394 runs failed"),
            "{failed}"
        );
    }
}
