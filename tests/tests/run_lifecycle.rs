//! The run as a whole: the demo, files written per step, and Ctrl-C keeping what finished.
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use tests::{Target, bin, run_json, stampede, text};

#[test]
fn demo_runs_past_the_knee_and_writes_everything() {
    let out = tempfile::tempdir().unwrap();
    let o = stampede(&[
        "demo",
        "--step-duration",
        "1s",
        "--quiet",
        "--out",
        out.path().to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let run = run_json(out.path());
    assert_eq!(run["status"], "completed");
    let steps = run["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 6);
    for i in 1..=6 {
        assert!(out.path().join(format!("hlog/step-{i:03}.hlog")).exists());
    }
    let tsv = std::fs::read_to_string(out.path().join("steps.tsv")).unwrap();
    assert_eq!(tsv.lines().count(), 7, "header + one row per step");
    assert!(tsv.starts_with("dem_req_rate\treq_rate_127.0.0.1\tcon_rate_127.0.0.1\t"));
    // The last step is past the 400 req/s knee: its p99 dwarfs the first step's.
    let p99 = |i: usize| steps[i]["latency_ms"]["p99"].as_f64().unwrap();
    assert!(p99(5) > 5.0 * p99(0), "no knee: {} vs {}", p99(5), p99(0));
    assert!(text(&o.stdout).contains(&format!("results: {}", out.path().display())));
}

#[test]
fn interrupt_keeps_finished_steps_and_marks_the_partial_one_aborted() {
    let target = Target::start(&[]);
    let out = tempfile::tempdir().unwrap();
    let child = Command::new(bin("stampede"))
        .args([
            "run",
            &target.url(),
            "--model",
            "requests",
            "--steps",
            "50,50,50",
            "--step-duration",
            "2s",
        ])
        .args(["--quiet", "--out", out.path().to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Interrupt during the second step.
    std::thread::sleep(Duration::from_millis(3000));
    let sent = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    let began = Instant::now();
    let o = child.wait_with_output().unwrap();
    assert!(
        began.elapsed() < Duration::from_secs(10),
        "the interrupt is obeyed promptly"
    );
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    let run = run_json(out.path());
    assert_eq!(run["status"], "aborted");
    let steps = run["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 2, "{run}");
    assert_eq!(steps[0]["aborted"], false);
    assert_eq!(steps[1]["aborted"], true);
    // Rates of the aborted step are over the time it ran before the interrupt, not the drain after.
    let ran_for = steps[1]["duration_s"].as_f64().unwrap();
    assert!(ran_for < 2.0, "duration_s {ran_for}");
    assert_eq!(steps[1]["verdict"], "invalid");
    // Everything that was sent, also in the aborted step, is reported.
    let reported: u64 = steps.iter().map(|s| s["requests"].as_u64().unwrap()).sum();
    assert_eq!(reported, target.requests());
}
