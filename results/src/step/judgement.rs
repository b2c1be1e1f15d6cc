//! Whether a step kept up with its load and whether it says anything of the server at all: the
//! rules the knee, the headline and the run's answer share, so none of them takes them from another.
use super::StepResult;
use crate::verdict::{self, Server, Verdict};

/// Served at least this share of what the schedule offered, to have kept up.
pub const KEPT_UP_RATIO: f64 = 0.98;
/// A served rate within this share of the run's peak is on its plateau.
pub const PLATEAU_RATIO: f64 = 0.98;

/// The step past the highest one kept up with: what the target did there.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Beyond {
    pub step: u32,
    pub step_value: f64,
    pub demanded_rate: Option<f64>,
    pub ok_rate: f64,
    pub p99_ms: f64,
    pub p99_lower_bound: bool,
    pub failed_pct: f64,
    pub server: Server,
    pub trust: Verdict,
    pub generator_bound: bool,
    /// Interrupted (Ctrl-C, a lost agent under `abort`) before it finished.
    pub aborted: bool,
}

/// Whether the target kept up with a step: it served what its schedule held (a Poisson schedule
/// holds more or less than the plan's rate; the closed model what was due), failed little, without
/// making requests queue (a server that serves everything, late, is saturated), and the numbers are
/// not untrustworthy.
pub fn kept_up(r: &StepResult) -> bool {
    judged(r)
        && r.trust != Verdict::Invalid
        // The generator's limit says nothing of the server: kept up with no more than failed.
        && !r.generator_bound
        && r.due > 0
        && r.failed_pct <= verdict::FAILING_PCT
        && r.ok as f64 >= KEPT_UP_RATIO * r.due as f64
        // Queueing is not keeping up once it costs throughput: a server at exactly its capacity
        // queues a little and still serves the pace offered.
        && (r.server != Server::Saturated
            || r.ok_rate >= KEPT_UP_RATIO * (r.due as f64 / r.duration_s.max(1e-9)))
}

/// Whether a step says anything of the server: one that lost an agent's share mid-step carried less
/// than its load, and is neither kept up with nor past the limit.
pub fn judged(r: &StepResult) -> bool {
    r.lost_load.is_empty()
}
