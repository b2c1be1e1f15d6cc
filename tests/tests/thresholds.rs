//! --stop-on, --stop-after and --fail-on end to end: the ramp stops past the knee and says why, a
//! --fail-on breach exits 3 with the outputs written, and a bad expression is pointed at.
use std::path::Path;
use std::process::Output;

use tests::{ServeProcess, run_json, stampede, text};

/// A requests-model run of 1 s steps against `target`, written to `out`, quiet.
fn steps(target: &ServeProcess, steps: &str, extra: &[&str], out: &Path) -> Output {
    let url = target.url();
    let mut args = vec!["run", &url, "--model", "requests", "--steps", steps];
    args.extend([
        "--step-duration",
        "1s",
        "--out",
        out.to_str().unwrap(),
        "--quiet",
    ]);
    args.extend(extra);
    stampede(&args)
}

#[test]
fn a_ramp_past_the_knee_hammered_a_dead_server_to_high_rate() {
    // The target serves 200 req/s: at 400 req/s its queue grows for the whole step, so p99 is far
    // above 200 ms; at 100 req/s it is a few ms.
    let target = ServeProcess::start(&["--capacity", "200"]);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let o = steps(
        &target,
        "100,400,800,1600",
        &[
            "--timeout",
            "3s",
            "--stop-on",
            "p99>200ms",
            "--stop-on",
            "failed>50%",
        ],
        &out,
    );
    let err = text(&o.stderr);
    let stdout = text(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(
        err.contains("stopping after step 2 of 4 (--stop-on): p99 ")
            && err.contains("ms > 200 ms; not run: 800, 1600"),
        "{err}"
    );
    assert!(
        stdout.contains("stopped after step 2 (--stop-on): p99 "),
        "{stdout}"
    );
    assert!(
        stdout.contains("step 2: note: --stop-on p99>200ms: p99 "),
        "{stdout}"
    );
    let run = run_json(&out);
    assert_eq!(run["status"], "completed");
    assert_eq!(run["steps"].as_array().unwrap().len(), 2);
    assert_eq!(run["stopped"]["after_step"], 2);
    assert_eq!(
        run["stopped"]["not_run"],
        serde_json::json!([800.0, 1600.0])
    );
    assert!(
        run["stopped"]["because"]
            .as_str()
            .unwrap()
            .ends_with("ms > 200 ms"),
        "{}",
        run["stopped"]
    );
    assert_eq!(
        run["plan"]["stop_on"],
        serde_json::json!(["p99>200ms", "failed>50%"])
    );
    // The target saw the two steps only: about 100 + 400 requests, never 800/s or 1600/s.
    assert!(target.requests() < 700, "{}", target.requests());
}

#[test]
fn a_fail_on_breach_exited_0_in_ci() {
    let target = ServeProcess::start(&["--delay", "40ms"]);
    let dir = tempfile::tempdir().unwrap();
    let run = |expr: &str, name: &str| {
        let out = dir.path().join(name);
        let o = steps(&target, "20", &["--fail-on", expr], &out);
        (o, run_json(&out))
    };
    let (o, json) = run("p50>20ms", "breached");
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(3), "{err}");
    assert!(
        err.contains("--fail-on p50>20ms: step 1 (20): p50 "),
        "{err}"
    );
    assert!(
        text(&o.stdout).contains("results: "),
        "the table is still printed"
    );
    // Exit 3 comes after the outputs: the run is complete and says what breached.
    assert_eq!(json["status"], "completed");
    assert_eq!(json["fail_on"][0]["step"], 1);
    assert_eq!(json["fail_on"][0]["expression"], "p50>20ms");
    assert!(json["stopped"].is_null());

    let (o, json) = run("p50>5s", "passed");
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert_eq!(json["fail_on"], serde_json::json!([]));
}

#[test]
fn a_bad_threshold_expression_is_pointed_at() {
    let refused = |args: &[&str], first: &str, caret: &str| {
        let o = stampede(args);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{err}");
        let mut lines = err.lines();
        assert_eq!(lines.next(), Some(first), "{err}");
        assert!(lines.next().is_some());
        assert_eq!(lines.next(), Some(caret), "{err}");
        assert!(!err.contains("panicked"), "{err}");
    };
    refused(
        &[
            "run",
            "http://127.0.0.1:1/",
            "--steps",
            "1",
            "--stop-on",
            "p99>5x",
        ],
        "stampede: --stop-on 'p99>5x': unknown unit 'x' at column 6: p99 takes ms, s or us",
        "         ^",
    );
    refused(
        &[
            "run",
            "http://127.0.0.1:1/",
            "--steps",
            "1",
            "--fail-on",
            "failed=>1%",
        ],
        "stampede: --fail-on 'failed=>1%': expected <, <=, > or >= after failed, found '=>' at column 7",
        "          ^^",
    );
    let o = stampede(&[
        "run",
        "http://127.0.0.1:1/",
        "--steps",
        "1",
        "--stop-after",
        "2",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("--stop-after counts steps that breach a --stop-on"));
}
