//! A step's row per named request: its own counts, failures by class and latency, computed from the
//! fleet's merge of that name's histograms (never from the agents' statistics), with its served
//! replies and its failed ones apart, so a fast 503 of one name never hides a slow 200 of another.
use shared::metrics::{ErrorClass, NameStats, STATUS_CLASSES};

use super::{Counts, LatencyStats, round3};

/// One named request's part of a step (run.json `per_request`, requests.tsv).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct RequestRow {
    pub name: String,
    /// Its weight in the mix.
    pub weight: u32,
    /// Requests of this name written to a connection.
    pub requests: u64,
    pub replies: u64,
    /// Replies with an expected status: served.
    pub ok: u64,
    /// Due and not served: a transport error, an unexpected status, or never sent.
    pub failed: u64,
    pub failed_pct: f64,
    /// Given up without a reply (their ages are lower bounds in `latency_ms`).
    pub given_up: u64,
    /// Due and never written (expired in the queue, their connection failed).
    pub unsent: u64,
    /// Served per second over the step's length.
    pub ok_rate: f64,
    pub status: Counts,
    pub errors: Counts,
    /// Served replies (and given-up requests, as lower bounds).
    pub latency_ms: LatencyStats,
    /// Replies with an unexpected status, apart.
    pub failed_latency_ms: LatencyStats,
}

/// The step's rows: one per name, in the workload's order (a name no agent reported is all zeros),
/// over `secs` of the step.
pub fn rows(names: &[String], weights: &[u32], stats: &[NameStats], secs: f64) -> Vec<RequestRow> {
    let none = NameStats::default();
    names
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let n = stats.get(i).unwrap_or(&none);
            let c = &n.counters;
            let due = c.requests + c.unsent;
            RequestRow {
                name: name.clone(),
                weight: weights.get(i).copied().unwrap_or(1),
                requests: c.requests,
                replies: c.replies,
                ok: c.ok,
                failed: c.failed(),
                failed_pct: if due == 0 {
                    0.0
                } else {
                    round3(c.failed() as f64 * 100.0 / due as f64)
                },
                given_up: c.given_up,
                unsent: c.unsent,
                ok_rate: if secs > 0.0 {
                    round3(c.ok as f64 / secs)
                } else {
                    0.0
                },
                status: Counts(
                    STATUS_CLASSES
                        .iter()
                        .map(|s| s.to_string())
                        .zip(c.status)
                        .collect(),
                ),
                errors: Counts(
                    ErrorClass::ALL
                        .iter()
                        .map(|e| (e.name().to_string(), c.error(*e)))
                        .collect(),
                ),
                latency_ms: LatencyStats::of(&n.latency),
                failed_latency_ms: LatencyStats::of(&n.failed),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_name_has_its_own_row_and_a_fast_failure_never_hides_a_slow_success() {
        let mut search = NameStats::default();
        search.counters.requests = 4;
        search.counters.replies = 4;
        search.counters.ok = 2;
        search.counters.status = [0, 2, 0, 0, 2];
        for us in [900_000, 1_000_000] {
            search.latency.record(us).unwrap();
        }
        for us in [1_000, 1_000] {
            search.failed.record(us).unwrap();
        }
        let names = ["login".to_string(), "search".to_string()];
        let rows = rows(&names, &[1, 3], &[NameStats::default(), search], 2.0);
        assert_eq!(rows[0].name, "login");
        assert_eq!(rows[0].requests, 0);
        let s = &rows[1];
        assert_eq!((s.weight, s.ok, s.failed, s.failed_pct), (3, 2, 2, 50.0));
        assert_eq!(s.ok_rate, 1.0);
        assert_eq!(s.status.get("5xx"), 2);
        assert!(s.latency_ms.p50 >= 899.0, "{:?}", s.latency_ms);
        assert!(s.failed_latency_ms.p99 <= 1.01, "{:?}", s.failed_latency_ms);
    }
}
