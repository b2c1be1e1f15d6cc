//! stampede's plain-Rust core, shared by agents and the coordinator: plan types, the arrival schedule,
//! interval metrics and their histogram codec, the verdict rules and the result schema.
//!
//! Nothing here knows about tokio, tonic or prost; `proto` converts its messages into these types.

pub mod compare;
pub mod condition;
pub mod distribution;
pub mod histogram;
pub mod metrics;
pub mod monitor;
pub mod plan;
pub mod probe_mark;
pub mod ready;
pub mod report;
pub mod rng;
pub mod run_file;
pub mod schedule;
pub mod search;
pub mod server_notes;
pub mod status;
#[cfg(feature = "cli")]
pub mod usage;
pub mod verdict;
pub mod warning;

/// The stampede version every binary reports.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
