//! What sessions (httperf's `--wsesslog`) add to a step: the sessions begun, completed and
//! abandoned, and the completed ones' lengths from their intended start (the merged `session`
//! histogram), with the note that says how many the step's end cut.
use shared::histogram::Histogram;
use shared::metrics::Counters;

use super::LatencyStats;

/// A step's sessions.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
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

    /// What a reader should know of them, in words: the sessions cut short, if any.
    pub(super) fn note(&self) -> Option<String> {
        let cut = self.cut();
        (cut > 0).then(|| {
            format!(
                "sessions: {cut} of {} were cut by the step's end (a burst due more than --timeout after it is not sent): their later requests were never due; a step longer than a session keeps them whole",
                self.started
            )
        })
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
        assert_eq!((s.started, s.completed, s.abandoned, s.cut()), (10, 7, 1, 2));
        assert!((s.length_ms.p50 - 400.0).abs() < 1.0, "{:?}", s.length_ms);
        assert!(s.note().unwrap().starts_with("sessions: 2 of 10 were cut"));
        c.sessions_completed = 9;
        assert_eq!(SessionsStep::of(&c, &h).unwrap().note(), None);
    }
}
