//! When a repeated log line is said: at most once a second per reason, the next line counting the
//! ones not said, so a flood of refusals is not the log's. One rule for every listener (an agent's
//! and a coordinator's control ports, the live page).
use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The least time between two lines of one reason.
pub const LOG_EVERY: Duration = Duration::from_secs(1);
/// Reasons remembered: past it they are forgotten at once, so a peer cannot make the map grow.
const REASONS_KEPT: usize = 256;

/// Per reason `K`, when it was last said and how many since were not.
pub struct Hush<K>(Mutex<BTreeMap<K, (Instant, u64)>>);

impl<K: Ord> Hush<K> {
    pub const fn new() -> Hush<K> {
        Hush(Mutex::new(BTreeMap::new()))
    }

    /// Whether `why` is said at `now`: `Some(how many were not said since its last line)`, or
    /// `None` within [`LOG_EVERY`] of that line.
    pub fn due(&self, why: K, now: Instant) -> Option<u64> {
        let mut said = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if said.len() > REASONS_KEPT {
            said.clear();
        }
        match said.get_mut(&why) {
            Some((at, unsaid)) if now.saturating_duration_since(*at) < LOG_EVERY => {
                *unsaid += 1;
                None
            }
            Some((at, unsaid)) => {
                *at = now;
                Some(std::mem::take(unsaid))
            }
            None => {
                said.insert(why, (now, 0));
                Some(0)
            }
        }
    }
}

impl<K: Ord> Default for Hush<K> {
    fn default() -> Hush<K> {
        Hush::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reason_is_said_once_a_second_and_then_counts_the_unsaid() {
        let hush = Hush::new();
        let t = Instant::now();
        assert_eq!(hush.due("a", t), Some(0));
        assert_eq!(hush.due("a", t + Duration::from_millis(10)), None);
        assert_eq!(hush.due("a", t + Duration::from_millis(20)), None);
        assert_eq!(hush.due("b", t), Some(0), "another reason has its own");
        assert_eq!(hush.due("a", t + LOG_EVERY), Some(2));
        assert_eq!(hush.due("a", t + 2 * LOG_EVERY), Some(0));
    }
}
