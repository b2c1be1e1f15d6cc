//! What a step's monitors say in words, on steps of the golden run.json given monitor views: a CPU
//! at its limit, dropped SYNs, one busy thread, throttling, OOM kills, several monitors, a partial view.

use std::path::Path;

use serde_json::json;

use super::*;
use crate::example_server as example;
use crate::run_file::RunFile;

/// A step of the golden run, numbered `number`, watched by monitor `web` seeing `cpu_util_pct` of
/// `cores`, and the rest of `extra` (a StepServer's fields) over the defaults.
fn step(number: u32, cpu_util_pct: f64, cores: f64, extra: serde_json::Value) -> StepResult {
    let golden = include_str!("../../tests/golden/run.json");
    let run = RunFile::parse(golden, Path::new("run.json")).unwrap();
    let mut step = run.steps[0].clone();
    step.number = number;
    let mut m = serde_json::to_value(example("web", cpu_util_pct, cores)).unwrap();
    merge(&mut m, extra);
    step.server_monitors = vec![serde_json::from_value(m).unwrap()];
    step
}

fn merge(into: &mut serde_json::Value, from: serde_json::Value) {
    match (into, from) {
        (serde_json::Value::Object(a), serde_json::Value::Object(b)) => {
            for (k, v) in b {
                merge(a.entry(k).or_insert(serde_json::Value::Null), v);
            }
        }
        (a, b) => *a = b,
    }
}

#[test]
fn a_cpu_at_its_limit_is_said_with_the_step_it_has_been_since() {
    let run: Vec<StepResult> = [20.0, 95.0, 97.0, 98.0]
        .iter()
        .enumerate()
        .map(|(i, u)| step(i as u32 + 1, *u, 1.0, json!({})))
        .collect();
    assert_eq!(notes(&run[0], &[]), Vec::<String>::new());
    assert_eq!(notes(&run[1], &run[..1]), ["server CPU 95 % of its 1 core"]);
    assert_eq!(
        notes(&run[3], &run[..3]),
        ["server CPU 98 % of its 1 core from step 2"]
    );
    let two = step(1, 91.5, 2.0, json!({}));
    assert_eq!(notes(&two, &[]), ["server CPU 91.5 % of its 2 cores"]);
}

#[test]
fn dropped_syns_explain_the_connect_timeouts_when_there_are_some() {
    let tcp = json!({"tcp": {"listen_overflows": 1234, "listen_drops": 1240}});
    let mut s = step(1, 10.0, 1.0, tcp.clone());
    assert_eq!(notes(&s, &[]), ["listen queue overflowed 1,240 times"]);
    s.errors.0.iter_mut().for_each(|(name, n)| {
        if name == "connect-timeout" {
            *n = 17;
        }
    });
    assert_eq!(
        notes(&s, &[]),
        ["listen queue overflowed 1,240 times: the connect timeouts are SYNs the server dropped"]
    );
    let drops = step(1, 10.0, 1.0, json!({"tcp": {"listen_drops": 3}}));
    assert_eq!(notes(&drops, &[]), ["listeners dropped 3 SYNs"]);
}

#[test]
fn a_thread_at_its_limit_a_throttled_container_and_oom_kills() {
    let s = step(
        1,
        30.0,
        4.0,
        json!({"target": {"thread_max_pct": 99.6, "busiest_thread": "node",
                          "throttled_pct": 35.0, "oom_kills": 2}}),
    );
    assert_eq!(
        notes(&s, &[]),
        [
            "busiest server thread (node) at 99.6 % of a core: one thread is the limit, not the cores",
            "container throttled 35 % of the step: its CPU quota was the limit",
            "the kernel killed 2 of the server's processes for want of memory (OOM)",
        ]
    );
    // A thread at its limit in a process at its limit says nothing more.
    let busy = step(1, 99.0, 1.0, json!({"target": {"thread_max_pct": 99.0}}));
    assert_eq!(notes(&busy, &[]), ["server CPU 99 % of its 1 core"]);
}

#[test]
fn several_monitors_are_named_and_a_partial_view_is_said() {
    let mut s = step(1, 95.0, 1.0, json!({"partial": true, "counted_s": 2.0}));
    let mut db = s.server_monitors[0].clone();
    db.monitor = "db".into();
    db.partial = false;
    db.target.as_mut().unwrap().cpu_util_pct = 5.0;
    s.server_monitors.push(db);
    s.duration_s = 5.0;
    assert_eq!(
        notes(&s, &[]),
        [
            "web: the server monitor web saw 2 s of the step's 5 s: its counts miss the rest",
            "web: server CPU 95 % of its 1 core",
        ]
    );
}
