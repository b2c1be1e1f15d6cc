//! The run as a whole: the demo, files written per step, and Ctrl-C keeping what finished.
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use tests::{Lines, ServeProcess, bin, run_json, stampede, text};

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
    // The demo watches its own process, the target's and the generator's CPU together.
    assert_eq!(run["monitors"].as_array().map(Vec::len), Some(1), "{run}");
    let cpu = |i: usize| steps[i]["server_monitors"][0]["target"]["cpu_pct"].as_f64();
    assert!(cpu(5).is_some_and(|c| c > 0.0), "{}", steps[5]);
    assert!(
        tsv.lines()
            .next()
            .unwrap()
            .contains("\tsrv_cpu_pct_server\t")
    );
    assert!(text(&o.stdout).contains(&format!("results: {}", out.path().display())));
    let report = out.path().join("report.html");
    assert!(text(&o.stdout).contains(&format!("report: {}", report.display())));
    let page = std::fs::read_to_string(&report).unwrap();
    assert!(page.contains("<table id=\"steps\">"), "{page}");
}

#[test]
fn stampede_report_named_what_it_could_not_read_or_write() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("gone");
    let o = stampede(&["report", missing.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(
        text(&o.stderr),
        format!(
            "stampede: {}: no such results directory\n",
            missing.display()
        )
    );
    std::fs::write(dir.path().join("run.json"), "{\"schema\": 3}").unwrap();
    let o = stampede(&["report", dir.path().to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o.stderr).contains("run.json is not a readable run.json"),
        "{}",
        text(&o.stderr)
    );
    let golden = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../results/tests/golden/run.json"
    );
    std::fs::copy(golden, dir.path().join("run.json")).unwrap();
    let to = missing.join("r.html");
    let o = stampede(&[
        "report",
        dir.path().to_str().unwrap(),
        "-o",
        to.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o.stderr).starts_with(&format!("stampede: cannot write {}: ", to.display())),
        "{}",
        text(&o.stderr)
    );
    let o = stampede(&["report", dir.path().to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let written = dir.path().join("report.html");
    assert_eq!(text(&o.stdout), format!("{}\n", written.display()));
    assert!(
        std::fs::read_to_string(written)
            .unwrap()
            .starts_with("<!DOCTYPE html>")
    );
}

#[test]
fn interrupt_keeps_finished_steps_and_marks_the_partial_one_aborted() {
    let target = ServeProcess::start(&[]);
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
    assert_eq!(steps[1]["trust"], "invalid");
    // Everything that was sent, also in the aborted step, is reported.
    let reported: u64 = steps.iter().map(|s| s["requests"].as_u64().unwrap()).sum();
    assert_eq!(reported, target.requests());
    // The report was rewritten after the finish: it says how the run ended.
    let page = std::fs::read_to_string(out.path().join("report.html")).unwrap();
    let data = tests::browser::embedded_data(&tests::dom::Dom::parse(&page));
    assert_eq!(
        data["status"], "aborted",
        "the report says how the run ended"
    );
    assert_eq!(
        tests::browser::assert_embeds_run(&data, out.path()),
        2,
        "the report embeds the finished run.json's steps"
    );
}

/// `stampede run URL --model requests --steps STEPS --step-duration LENGTH --out OUT`, to add to.
fn requests_run(url: &str, steps: &str, length: &str, out: &std::path::Path) -> Command {
    let mut c = Command::new(bin("stampede"));
    c.args(["run", url, "--model", "requests", "--steps", steps])
        .args(["--step-duration", length, "--out", out.to_str().unwrap()])
        .stdin(Stdio::null());
    c
}

/// Waits up to `limit` for the child to exit; kills it past that.
fn exit_within(child: &mut std::process::Child, limit: Duration) -> Option<i32> {
    let began = Instant::now();
    while began.elapsed() < limit {
        if let Some(status) = child.try_wait().unwrap() {
            return status.code();
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}

#[test]
fn a_second_interrupt_did_not_stop_a_run_waiting_on_a_stalled_target() {
    let target = ServeProcess::start(&[]);
    let out = tempfile::tempdir().unwrap();
    let mut child = requests_run(&target.url(), "20,20,20", "1s", out.path())
        .args(["--timeout", "30s"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let err = Lines::of(&mut child);
    assert!(
        err.wait_for("step 1/3", Duration::from_secs(20)),
        "{}",
        err.text()
    );
    // The second step's requests now hang, each for up to the 30 s timeout.
    tests::http_get(target.addr, "/_stampede/stall?ms=60000");
    std::thread::sleep(Duration::from_millis(500));
    tests::signal(&child, libc::SIGINT);
    assert!(
        err.wait_for(
            "waiting up to 30 s (--timeout) for the requests in flight",
            Duration::from_secs(5)
        ),
        "the first interrupt says how long it waits: {}",
        err.text()
    );
    tests::signal(&child, libc::SIGINT);
    let code = exit_within(&mut child, Duration::from_secs(8));
    assert_eq!(
        code,
        Some(1),
        "the second interrupt stops at once: {}",
        err.text()
    );
    let run = run_json(out.path());
    assert_eq!(run["status"], "aborted", "{run}");
    let steps = run["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 1, "only the finished step is kept: {run}");
    assert_eq!(steps[0]["aborted"], false);
    let tsv = std::fs::read_to_string(out.path().join("steps.tsv")).unwrap();
    assert_eq!(tsv.lines().count(), 2, "header + the finished step: {tsv}");
}

#[test]
fn step_numbers_started_at_0_in_run_json_and_hlog() {
    let target = ServeProcess::start(&[]);
    let out = tempfile::tempdir().unwrap();
    let o = requests_run(&target.url(), "20,20", "300ms", out.path())
        .output()
        .unwrap();
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    let run = run_json(out.path());
    let numbers: Vec<u64> = run["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["step"].as_u64().unwrap())
        .collect();
    assert_eq!(numbers, [1, 2], "as the table counts them");
    let mut logs: Vec<String> = std::fs::read_dir(out.path().join("hlog"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    logs.sort();
    assert_eq!(
        logs,
        [
            "step-001.hgrm",
            "step-001.hlog",
            "step-002.hgrm",
            "step-002.hlog"
        ]
    );
    let log = std::fs::read_to_string(out.path().join("hlog/step-002.hlog")).unwrap();
    assert!(log.contains(" step 2: latency"), "{log}");
    assert!(
        err.contains("step 1/2") && err.contains("step 2/2"),
        "{err}"
    );
    let table = text(&o.stdout);
    let rows: Vec<&str> = table.lines().skip(1).take(2).collect();
    assert!(
        rows[0].trim_start().starts_with("1 ") && rows[1].trim_start().starts_with("2 "),
        "{table}"
    );
}

#[test]
fn the_plan_was_not_said_before_the_load() {
    let target = ServeProcess::start(&[]);
    let out = tempfile::tempdir().unwrap();
    let dir = out.path().to_str().unwrap();
    let o = requests_run(&target.url(), "10,20,30,40", "250ms", out.path())
        .output()
        .unwrap();
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    let first = err.lines().next().unwrap_or_default();
    assert_eq!(
        first,
        format!(
            "plan: requests model, 4 steps 10..40 req/s, 250 ms each, over the embedded agent, ~2.2 s in all; results in {dir}"
        ),
        "{err}"
    );
}
