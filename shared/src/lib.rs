//! stampede's plain-Rust core, shared by agents and the coordinator: plan types, the arrival schedule,
//! interval metrics and their histogram codec. The analysis of results (the step schema, verdicts,
//! compare, conditions, the capacity search) is the `results` crate's; the server monitor's samples
//! are the `monitor` crate's.
//!
//! Nothing here knows about tokio, tonic or prost; `proto` converts its messages into these types.

pub mod histogram;
pub mod hush;
pub mod metrics;
pub mod plan;
pub mod ready;
pub mod refusal;
pub mod rng;
pub mod schedule;
pub mod status;
#[cfg(feature = "cli")]
pub mod usage;
pub mod warning;

/// The stampede version every binary reports.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
