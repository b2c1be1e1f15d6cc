//! The knee of a run (`summary.knee`): the first step at which the server stopped coping, and why —
//! its latency turned up, its served rate flattened, its failures started, or its CPU reached its
//! limit — or at which the generator, not the server, was the limit.
use serde::{Deserialize, Serialize};

/// Why the knee is where it is. When several hold at the knee's step, `cause` is the first of
/// these in this order and the others are in [`Knee::also`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KneeCause {
    /// The generator could not keep its schedule (its fds, ports or CPU): the step says nothing of
    /// the server, so this is the generator's knee, not the server's.
    GeneratorBound,
    /// More than 1 % of the requests due failed.
    Failures,
    /// p99 rose to several times its low-load level, and above an absolute floor.
    Latency,
    /// The served rate stopped rising with the offered load.
    Plateau,
    /// The server's own monitor saw its CPU at the limit of what it may use.
    ServerCpu,
}

impl KneeCause {
    /// The cause as run.json and the report name it.
    pub fn name(self) -> &'static str {
        match self {
            KneeCause::GeneratorBound => "generator_bound",
            KneeCause::Failures => "failures",
            KneeCause::Latency => "latency",
            KneeCause::Plateau => "plateau",
            KneeCause::ServerCpu => "server_cpu",
        }
    }

    /// Whether a knee of this cause is the server's (a generator-bound one is not).
    pub fn is_servers(self) -> bool {
        self != KneeCause::GeneratorBound
    }
}

/// The knee: where, why, and the numbers that show it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Knee {
    /// The knee's step (run.json's `step`) and its value (conn/s, req/s or connections).
    pub step: u32,
    pub step_value: f64,
    pub demanded_rate: Option<f64>,
    pub cause: KneeCause,
    /// The other causes that held at the same step, in [`KneeCause`]'s order.
    #[serde(default)]
    pub also: Vec<KneeCause>,
    /// False for a generator-bound knee: the server's own knee lies beyond what was offered.
    pub servers: bool,
    /// p99 at low load (the lowest of the steps before the knee; null at the first step) and at the
    /// knee, and their ratio.
    pub low_p99_ms: Option<f64>,
    pub p99_ms: f64,
    pub p99_lower_bound: bool,
    pub p99_ratio: Option<f64>,
    /// Served per second at the knee and at the step before it (null at the first step).
    pub ok_rate: f64,
    pub prev_ok_rate: Option<f64>,
    pub failed_pct: f64,
    /// The server's own monitor at the knee: its name, its CPU in % of one core and in % of the
    /// cores it may use, those cores, and the requests served per core-second of its CPU. Null
    /// without an own-server monitor.
    pub monitor: Option<String>,
    pub server_cpu_pct: Option<f64>,
    pub server_cpu_util_pct: Option<f64>,
    pub server_cores: Option<f64>,
    pub ok_per_core_s: Option<f64>,
}
