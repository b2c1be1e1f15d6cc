//! Latency the test injects itself: a fixed server delay, and a 500 ms stall that only an open model
//! measured from the intended send time can see (coordinated omission).
use std::time::Duration;

use tests::{ServeProcess, run_ok};

#[test]
fn serve_delay_20ms_reports_p50_between_20_and_25_ms() {
    let target = ServeProcess::start(&["--delay", "20ms"]);
    let ran = run_ok(&[
        &target.url(),
        "--model",
        "requests",
        "--steps",
        "50",
        "--step-duration",
        "2s",
    ]);
    let p50 = ran.step(0)["latency_ms"]["p50"].as_f64().unwrap();
    assert!((20.0..=25.0).contains(&p50), "p50 {p50} ms");
}

#[test]
fn coordinated_omission_stall_shows_in_p99() {
    let target = ServeProcess::start(&[]);
    // Stall the target for 500 ms, one second into the step.
    let staller = target.stall_after(Duration::from_millis(1100), 500);
    let ran = run_ok(&[
        &target.url(),
        "--model",
        "requests",
        "--steps",
        "200",
        "--step-duration",
        "3s",
    ]);
    staller.join().unwrap();
    let step = ran.step(0);
    let p99 = step["latency_ms"]["p99"].as_f64().unwrap();
    assert!(p99 >= 400.0, "p99 {p99} ms hides the 500 ms stall: {step}");
    // The generator kept its schedule through the stall: achieved is still the demanded rate.
    let achieved = step["achieved_request_rate"].as_f64().unwrap();
    assert!((achieved - 200.0).abs() <= 4.0, "achieved {achieved}");
}
