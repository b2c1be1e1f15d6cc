//! What sessions (httperf's `--wsesslog`) add to a step: the sessions begun, completed and
//! abandoned, and the completed ones' lengths from their intended start (the merged `session`
//! histogram), with the note that says them in words (under the stdout table and in run.json).
use shared::histogram::Histogram;
use shared::metrics::Counters;

use super::LatencyStats;

/// A step's sessions.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct SessionsStep {
    /// Arrivals that began a session.
    pub started: u64,
    /// Sessions every request of which had a reply (whatever its status, as httperf counts them).
    pub completed: u64,
    /// Sessions a failed request ended: their later requests are in the step's `abandoned`.
    pub abandoned: u64,
    /// A completed session's length, from its intended start to its last reply.
    pub length_ms: LatencyStats,
}

impl SessionsStep {
    /// From the step's counters and merged session lengths: `None` when no session began (a run
    /// without `--wsesslog`).
    pub fn of(c: &Counters, lengths: &Histogram<u64>) -> Option<SessionsStep> {
        (c.sessions_started > 0).then(|| SessionsStep {
            started: c.sessions_started,
            completed: c.sessions_completed,
            abandoned: c.sessions_abandoned,
            length_ms: LatencyStats::of(lengths),
        })
    }

    /// Sessions begun that neither completed nor failed: the step's end came before their next
    /// burst was due (or the step was stopped).
    pub fn cut(&self) -> u64 {
        self.started
            .saturating_sub(self.completed)
            .saturating_sub(self.abandoned)
    }

    /// What a reader should know of them, in words: how many completed, how long they took, how
    /// many a failed request abandoned and how many the step's end cut.
    pub(super) fn note(&self) -> String {
        let mut words = format!(
            "sessions: {} begun, {} completed",
            self.started, self.completed
        );
        if self.completed > 0 {
            words.push_str(&format!(
                " (length p50 {:.1} ms, p99 {:.1} ms from the intended start)",
                self.length_ms.p50, self.length_ms.p99
            ));
        }
        words.push_str(&format!(
            ", {} abandoned (a request failed)",
            self.abandoned
        ));
        let cut = self.cut();
        if cut > 0 {
            words.push_str(&format!(
                ", {cut} cut by the step's end (their next burst was due over --timeout after it: \
                 its requests were never due; a step longer than a session keeps them whole)"
            ));
        }
        words
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_step_without_sessions_has_none_and_one_with_says_what_was_cut() {
        let mut c = Counters::default();
        let mut h = shared::histogram::new();
        assert_eq!(SessionsStep::of(&c, &h), None);
        c.sessions_started = 10;
        c.sessions_completed = 7;
        c.sessions_abandoned = 1;
        for ms in [100, 200, 300, 400, 500, 600, 700] {
            h.record(ms * 1000).unwrap();
        }
        let s = SessionsStep::of(&c, &h).unwrap();
        assert_eq!(
            (s.started, s.completed, s.abandoned, s.cut()),
            (10, 7, 1, 2)
        );
        assert!((s.length_ms.p50 - 400.0).abs() < 1.0, "{:?}", s.length_ms);
        assert_eq!(
            s.note(),
            "sessions: 10 begun, 7 completed (length p50 400.1 ms, p99 700.4 ms from the intended start), 1 abandoned (a request failed), 2 cut by the step's end (their next burst was due over --timeout after it: its requests were never due; a step longer than a session keeps them whole)"
        );
        c.sessions_completed = 9;
        assert!(
            SessionsStep::of(&c, &h)
                .unwrap()
                .note()
                .ends_with("1 abandoned (a request failed)")
        );
    }
}
