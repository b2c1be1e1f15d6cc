//! The analysis of a run's results, which the coordinator writes and the report reads: the step
//! schema and its summary, the verdict rules, latency distributions, run.json's reader, the
//! comparison of two runs, the stop/fail/SLO condition grammar, the capacity search and the server
//! notes. The agent never uses any of it; it builds on `shared`'s wire and agent core.

pub mod compare;
pub mod condition;
pub mod distribution;
pub mod events;
pub mod history;
pub mod junit;
pub mod quantity;
pub mod requests_table;
pub mod run_file;
#[cfg(feature = "schema")]
pub mod schema;
pub mod search;
pub mod server_notes;
pub mod step;
pub mod table;
pub mod verdict;

/// The knee's types and rules live beside the run's summary that holds them (`step/knee.rs`).
pub use step::knee;

/// A monitor `name`'s view of a step whose target used `cpu_util_pct` of its `cores`, nothing else
/// of note (for tests of what reads a `StepServer`).
#[cfg(test)]
pub(crate) fn example_server(
    name: &str,
    cpu_util_pct: f64,
    cores: f64,
) -> monitor::step::StepServer {
    let gauge = serde_json::json!({"min": 1.0, "avg": 1.0, "max": 1.0});
    serde_json::from_value(serde_json::json!({
        "monitor": name, "counted_s": 5.0, "rated_s": 4.0, "partial": false, "samples": 4,
        "target": {
            "cpu_pct": cpu_util_pct * cores, "cpu_user_pct": 0.0, "cpu_system_pct": 0.0,
            "cpu_util_pct": cpu_util_pct, "usable_cores": cores, "thread_max_pct": null,
            "busiest_thread": null, "memory_bytes": gauge, "threads": gauge, "open_fds": gauge,
            "processes": gauge, "voluntary_switches": 0, "involuntary_switches": 0,
            "throttled_pct": null, "memory_peak_bytes": null, "oom_kills": null
        },
        "host": {"cpu_pct": 10.0, "softirq_pct": 1.0, "steal_pct": 0.0, "iowait_pct": 0.0,
                 "busiest_core": 0, "busiest_core_pct": 20.0, "run_queue": null,
                 "mem_available_bytes": null},
        "net": [], "tcp": monitor::TcpCounters::default(), "monitor_cpu_pct": 0.1,
        "series": []
    }))
    .expect("the example is a StepServer")
}
