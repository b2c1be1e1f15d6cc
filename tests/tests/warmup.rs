//! `stampede run --warmup`: load before each target's first step that is shown and recorded, never
//! counted, checked against what the reference target itself counted.
use std::path::Path;

use tests::{ServeProcess, run_json, stampede, text};

/// The replies a run.json's steps (and its warmup) say.
fn replies(run: &serde_json::Value) -> (u64, u64) {
    let steps = run["steps"].as_array().unwrap();
    let counted = steps.iter().map(|s| s["replies"].as_u64().unwrap()).sum();
    (counted, run["warmup"]["replies"].as_u64().unwrap_or(0))
}

/// When a step started, from its hlog's `#[StartTime: SECS ...]` header.
fn step_start(dir: &Path, step: usize) -> f64 {
    let log = std::fs::read_to_string(dir.join(format!("hlog/step-{step:03}.hlog"))).unwrap();
    let line = log
        .lines()
        .find_map(|l| l.strip_prefix("#[StartTime: "))
        .expect("a StartTime header");
    line.split_whitespace().next().unwrap().parse().unwrap()
}

#[test]
fn a_warmup_was_sent_shown_and_recorded_but_never_counted() {
    let target = ServeProcess::start(&[]);
    let out = tempfile::tempdir().unwrap();
    let o = stampede(&[
        "run",
        &target.url(),
        "--model",
        "requests",
        "--steps",
        "20,40",
        "--step-duration",
        "1s",
        "--warmup",
        "1s",
        "--fail-on",
        "p99>10s",
        "--out",
        out.path().to_str().unwrap(),
    ]);
    let (stdout, stderr) = (text(&o.stdout), text(&o.stderr));
    assert!(o.status.success(), "{stderr}");
    let run = run_json(out.path());
    assert_eq!(run["plan"]["warmup_s"], 1.0, "{run}");
    let warmup = &run["warmup"];
    assert_eq!(warmup["step"], 0, "{warmup}");
    assert_eq!(warmup["step_value"], 20.0, "at the first step's rate");
    assert!(warmup["replies"].as_u64().unwrap() > 0, "{warmup}");
    let steps = run["steps"].as_array().unwrap();
    let numbers: Vec<u64> = steps.iter().map(|s| s["step"].as_u64().unwrap()).collect();
    assert_eq!(numbers, [1, 2]);
    // The server answered the warmup too: its count is the steps' and the warmup's, and the steps
    // alone are what the summary counts.
    let (counted, warm) = replies(&run);
    assert_eq!(target.requests(), counted + warm);
    // The summary never names the warmup (step 0) as a step kept up or untrusted.
    let summary = &run["summary"];
    assert_ne!(summary["kept_up_step"], 0, "{summary}");
    let untrusted = summary["untrusted_steps"].as_array().unwrap();
    assert!(untrusted.iter().all(|s| s != 0), "{summary}");
    // steps.tsv: the counted steps only, no stray first row; no hlog of the warmup.
    let tsv = std::fs::read_to_string(out.path().join("steps.tsv")).unwrap();
    assert_eq!(tsv.lines().count(), 3, "header + one row per step:\n{tsv}");
    assert!(tsv.lines().nth(1).unwrap().starts_with("20\t"), "{tsv}");
    assert!(!out.path().join("hlog/step-000.hlog").exists());
    // Shown as such: its own row of the table, said not to count; its progress line too.
    let first_row = stdout.lines().nth(1).unwrap_or_default();
    assert!(first_row.trim_start().starts_with("warmup "), "{stdout}");
    assert!(
        stdout.contains("warmup: 1 s at the first step's value, not counted"),
        "{stdout}"
    );
    assert!(
        stderr.contains("warmup (not counted)  demanded 20.0 req/s"),
        "{stderr}"
    );
    assert!(
        stderr.contains("1 s warmup first (not counted)"),
        "{stderr}"
    );
    assert!(stdout.contains("answer: "), "{stdout}");
}

#[test]
fn side_by_side_each_target_warmed_up_right_before_its_first_step() {
    let a = ServeProcess::start(&[]);
    let b = ServeProcess::start(&[]);
    let out = tempfile::tempdir().unwrap();
    let dir = out.path().join("x");
    let o = stampede(&[
        "run",
        &format!("a={}", a.url()),
        &format!("b={}", b.url()),
        "--model",
        "requests",
        "--steps",
        "20,40",
        "--step-duration",
        "1s",
        "--warmup",
        "1s",
        "--quiet",
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    for (label, target) in [("a", &a), ("b", &b)] {
        let run = run_json(&dir.join(label));
        assert_eq!(run["warmup"]["step"], 0, "{label}: {run}");
        assert_eq!(run["steps"].as_array().unwrap().len(), 2);
        // Each target's own warmup, on its own server: none of the other's.
        let (counted, warm) = replies(&run);
        assert!(warm > 0, "{label}");
        assert_eq!(target.requests(), counted + warm, "{label}");
    }
    // a's step 1 (1 s), then b's warmup (1 s) before b's step 1: at least 2 s between the two.
    let gap = step_start(&dir.join("b"), 1) - step_start(&dir.join("a"), 1);
    assert!(gap >= 2.0, "b's step 1 began {gap} s after a's");
    let stdout = text(&o.stdout);
    assert_eq!(
        stdout
            .matches("warmup: 1 s at the first step's value")
            .count(),
        2,
        "{stdout}"
    );
}
