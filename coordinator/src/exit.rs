//! The one map from how a command ended to the process's exit code: every error and outcome says
//! which `Exit` it is, and only `Exit::code` knows the numbers. The table people read is
//! docs/reference/exit-codes.md (a test below keeps it equal to this file's map).
use shared::refusal::RefusalKind;

/// How a `stampede run` (or `demo`) ended, as its exit code says it. find-max's statuses (4-8) are
/// `results::search::Status`'s; compare's codes are its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// Every step ran (or `--stop-on` ended the ramp).
    Ran,
    /// The run started and failed, or was aborted: running it again unchanged may go.
    Failed,
    /// Something in the command, the plan, the target or the fleet's setup must change first: nothing
    /// was sent, and running it again unchanged fails the same way.
    Usage,
    /// A `--fail-on` expression was breached.
    Breached,
}

impl Exit {
    pub const ALL: [Exit; 4] = [Exit::Ran, Exit::Failed, Exit::Usage, Exit::Breached];

    pub fn code(self) -> u8 {
        match self {
            Exit::Ran => 0,
            Exit::Failed => 1,
            Exit::Usage => 2,
            Exit::Breached => 3,
        }
    }

    /// What an agent's refusal makes of the run: a refusal of the plan, its target or the fleet's
    /// setup is the user's to fix (the same rule for a name as for an address, for a limit the
    /// coordinator checks up front as for one the agent checks); an agent busy elsewhere, or one that
    /// refused a request out of order, failed a run that may go as it is.
    pub fn of_refusal(kind: RefusalKind) -> Exit {
        match kind {
            RefusalKind::Setup
            | RefusalKind::Target
            | RefusalKind::Protocol
            | RefusalKind::Policy
            | RefusalKind::Capacity => Exit::Usage,
            RefusalKind::Busy | RefusalKind::Other => Exit::Failed,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_refusal_kind_has_one_exit_and_the_plan_s_own_are_usage() {
        let usage: Vec<_> = RefusalKind::ALL
            .into_iter()
            .filter(|k| Exit::of_refusal(*k) == Exit::Usage)
            .collect();
        assert_eq!(
            usage,
            [
                RefusalKind::Setup,
                RefusalKind::Target,
                RefusalKind::Protocol,
                RefusalKind::Policy,
                RefusalKind::Capacity
            ]
        );
        assert_eq!(Exit::of_refusal(RefusalKind::Busy), Exit::Failed);
        assert_eq!(Exit::of_refusal(RefusalKind::Other), Exit::Failed);
    }

    #[test]
    fn the_exit_codes_page_is_this_map() {
        let page = include_str!("../../docs/reference/exit-codes.md");
        for e in Exit::ALL {
            let row = format!("| {} | `{e:?}` |", e.code());
            assert!(page.contains(&row), "no row {row}");
        }
        for k in RefusalKind::ALL {
            let wire = format!("{k:?}").to_ascii_uppercase();
            let row = page
                .lines()
                .find(|l| l.starts_with(&format!("| `{wire}` |")))
                .unwrap_or_else(|| panic!("no row for {wire}"));
            assert!(
                row.ends_with(&format!("| {} |", Exit::of_refusal(k).code())),
                "{row}"
            );
        }
    }
}
