//! A ramp across the reference target's capacity: the steps past the knee show it, and the verdict
//! does not blame the generator.
use tests::{ServeProcess, run_ok, run_quiet, text};

#[test]
fn ramp_across_capacity_shows_the_knee_without_blaming_the_generator() {
    let target = ServeProcess::start(&["--capacity", "300"]);
    let ran = run_ok(&[
        &target.url(),
        "--model",
        "requests",
        "--steps",
        "100,200,450,600",
        "--step-duration",
        "2s",
        "--timeout",
        "3s",
    ]);
    let steps = ran.steps();
    let p99 = |i: usize| steps[i]["latency_ms"]["p99"].as_f64().unwrap();
    let replies = |i: usize| steps[i]["reply_rate"]["avg"].as_f64().unwrap();
    // Under the knee the target keeps up; past it replies flatten near capacity and latency grows.
    assert!(replies(1) > 190.0, "step 2 replies {}", replies(1));
    for i in [2, 3] {
        let demanded = steps[i]["demanded_rate"].as_f64().unwrap();
        assert!(
            replies(i) < demanded * 0.9 || p99(i) > 10.0 * p99(0),
            "step {} shows no knee: {}",
            i + 1,
            steps[i]
        );
        assert!(p99(i) > p99(1), "latency grows past the knee");
        assert_ne!(steps[i]["trust"], "invalid", "{}", steps[i]);
        for reason in steps[i]["reasons"].as_array().unwrap() {
            assert!(
                !reason.as_str().unwrap().contains("generator"),
                "blames the generator: {reason}"
            );
        }
    }
    // The table on stdout has a row per step.
    let rows = ran
        .stdout
        .lines()
        .filter(|l| l.trim_start().starts_with(char::is_numeric))
        .count();
    assert!(rows >= 4, "{}", ran.stdout);
}

#[test]
fn a_rate_no_worker_thread_could_dispatch_is_refused_before_any_load() {
    // `--steps 100000000`: a typo that ran flat out and blamed the target with fd-unavailable errors.
    let target = ServeProcess::start(&[]);
    let (o, _out) = run_quiet(&[&target.url(), "--steps", "100000000", "--threads", "1"]);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert_eq!(
        err.trim_end(),
        "stampede: agent embedded would refuse this plan: step 1 needs 100000000 new connections/s from this agent but its 1 worker thread can dispatch at most 833333 (each takes at least 1.2 µs of a thread's CPU for a connection and 1 request; it was measured at tens of times that); lower the rate (a typo?) or add agents"
    );
    assert_eq!(target.requests(), 0, "load was sent");
}
