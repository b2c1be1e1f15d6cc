//! autobench's two-host run: `stampede run a=URL b=URL` over one fleet, each step on every target in
//! turn, one results directory per label and the comparison beside them.
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use tests::{AgentProc, Lines, ServeProcess, bin, run_json, stampede, text};

/// When a step started, from its hlog's `#[StartTime: SECS (seconds since epoch)]` (the
/// HdrHistogram log's own header, written by the hdrhistogram crate's writer).
fn step_start(dir: &Path, step: usize) -> f64 {
    let log = std::fs::read_to_string(dir.join(format!("hlog/step-{step:03}.hlog"))).unwrap();
    let line = log
        .lines()
        .find_map(|l| l.strip_prefix("#[StartTime: "))
        .expect("a StartTime header");
    line.split_whitespace().next().unwrap().parse().unwrap()
}

/// A step's field as a number.
fn num(step: &serde_json::Value, key: &str) -> f64 {
    step[key]
        .as_f64()
        .unwrap_or_else(|| panic!("{key} in {step}"))
}

fn replies(run: &serde_json::Value) -> u64 {
    let steps = run["steps"].as_array().unwrap();
    steps.iter().map(|s| s["replies"].as_u64().unwrap()).sum()
}

#[test]
fn two_targets_ran_each_step_in_turn_each_into_its_own_directory() {
    let fast = ServeProcess::start(&["--delay", "1ms"]);
    let slow = ServeProcess::start(&["--delay", "40ms"]);
    let out = tempfile::tempdir().unwrap();
    let dir = out.path().join("x");
    let o = stampede(&[
        "run",
        &format!("fast={}a?q=1", fast.url()),
        &format!("slow={}b", slow.url()),
        "--model",
        "requests",
        "--steps",
        "20,40",
        "--step-duration",
        "1s",
        "--timeout",
        "2s",
        "--quiet",
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let mut starts = Vec::new();
    for (label, target) in [("fast", &fast), ("slow", &slow)] {
        let d = dir.join(label);
        let run = run_json(&d);
        assert_eq!(run["label"], label);
        assert_eq!(run["status"], "completed");
        assert_eq!(run["target"], format!("http://{}", target.addr));
        assert_eq!(run["steps"].as_array().unwrap().len(), 2, "{run}");
        let tsv = std::fs::read_to_string(d.join("steps.tsv")).unwrap();
        assert_eq!(tsv.lines().count(), 3, "header + one row per step");
        // What each server counted is what its own run says it answered: nothing of the other's.
        assert_eq!(target.requests(), replies(&run), "{label}");
        starts.push([step_start(&d, 1), step_start(&d, 2)]);
    }
    // Interleaved as autobench does: step 1 on fast, step 1 on slow, step 2 on fast, step 2 on slow.
    let [fast_starts, slow_starts] = [starts[0], starts[1]];
    let order = [
        fast_starts[0],
        slow_starts[0],
        fast_starts[1],
        slow_starts[1],
    ];
    assert!(order.windows(2).all(|w| w[0] < w[1]), "{order:?}");
    // Each run measured its own server: the slow one's 40 ms are in its latency alone.
    let p50 = |label: &str| num(&run_json(&dir.join(label))["steps"][0]["latency_ms"], "p50");
    assert!(p50("slow") >= 40.0, "slow p50 {}", p50("slow"));
    assert!(p50("fast") < p50("slow"), "fast p50 {}", p50("fast"));
    for f in ["compare.html", "compare.tsv", "compare.json"] {
        assert!(dir.join(f).is_file(), "{f} beside the runs");
    }
    let stdout = text(&o.stdout);
    assert!(
        stdout.contains(&format!("== fast ({}) ==", dir.join("fast").display()))
            && stdout.contains("answer (slow): "),
        "{stdout}"
    );
    // It ends with one ranking of both targets (the order is the knee's, which these loads
    // may not reach: not asserted here, but by results' unit tests).
    let last: Vec<&str> = stdout.lines().rev().take(4).collect();
    assert_eq!(last[3], "ranking, best first:", "{stdout}");
    assert!(last[2].starts_with("#  target"), "{stdout}");
    let mut ranked: Vec<&str> = last[..2]
        .iter()
        .map(|l| l.split_whitespace().nth(1).unwrap())
        .collect();
    ranked.sort();
    assert_eq!(ranked, ["fast", "slow"], "{stdout}");
}

#[test]
fn a_target_past_its_stop_on_ended_its_own_ramp_while_the_other_went_on() {
    let fast = ServeProcess::start(&[]);
    let slow = ServeProcess::start(&["--delay", "100ms"]);
    let out = tempfile::tempdir().unwrap();
    let o = stampede(&[
        "run",
        &format!("fast={}", fast.url()),
        &format!("slow={}", slow.url()),
        "--model",
        "requests",
        "--steps",
        "10,10,10",
        "--step-duration",
        "1s",
        "--stop-on",
        "p50>50ms",
        "--quiet",
        "--out",
        out.path().to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let slow_run = run_json(&out.path().join("slow"));
    assert_eq!(slow_run["steps"].as_array().unwrap().len(), 1);
    assert_eq!(slow_run["stopped"]["after_step"], 1);
    assert_eq!(
        slow_run["stopped"]["not_run"],
        serde_json::json!([10.0, 10.0])
    );
    let fast_run = run_json(&out.path().join("fast"));
    assert_eq!(fast_run["steps"].as_array().unwrap().len(), 3);
    assert!(fast_run["stopped"].is_null(), "{}", fast_run["stopped"]);
    assert_eq!(slow.requests(), replies(&slow_run));
    assert_eq!(fast.requests(), replies(&fast_run));
    let stderr = text(&o.stderr);
    assert!(
        stderr.contains("stampede: slow: stopping after step 1 of 3 (--stop-on): p50 ")
            && stderr.contains("; the other targets go on"),
        "{stderr}"
    );
}

#[test]
fn an_agent_that_refuses_one_target_refused_the_run_before_any_load() {
    let allowed = ServeProcess::start(&[]);
    let refused = ServeProcess::start(&[]);
    // A name rule would not admit loopback (SECURITY.md): an address rule admits one target, and
    // another loopback address (refused at configure, before anything dials it) is outside it.
    let agent = AgentProc::start(&["--allow-target", "127.0.0.1"], &[]);
    let out = tempfile::tempdir().unwrap();
    let refused_url = format!("http://127.0.0.2:{}/", refused.addr.port());
    let o = stampede(&[
        "run",
        &format!("ok=http://127.0.0.1:{}/", allowed.addr.port()),
        &format!("app={refused_url}"),
        "--agents",
        &agent.addr.to_string(),
        "--steps",
        "10",
        "--step-duration",
        "1s",
        "--quiet",
        "--out",
        out.path().to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    let stderr = text(&o.stderr);
    let origin = refused_url.trim_end_matches('/');
    assert!(
        stderr.contains(&format!("stampede: target app ({origin}): agent {} refused: target 127.0.0.2 (127.0.0.2) is outside this agent's --allow-target list; to load it, add --allow-target 127.0.0.2 to this agent", agent.addr)),
        "{stderr}"
    );
    assert_eq!(allowed.requests() + refused.requests(), 0, "no load at all");
    for label in ["ok", "app"] {
        assert!(
            !out.path().join(label).join("run.json").exists(),
            "a run refused before its start leaves no run.json in {label}"
        );
    }
}

#[test]
fn target_lists_that_cannot_name_their_directories_are_refused_in_one_line() {
    for (targets, said) in [
        (
            ["a=http://127.0.0.1:9/", "http://127.0.0.1:10/"],
            "stampede: target 2 (http://127.0.0.1:10/) has no label: with several targets, name each NAME=URL (e.g. 127.0.0.1=http://127.0.0.1:10/)",
        ),
        (
            ["a=http://127.0.0.1:9/", "a=http://127.0.0.1:10/"],
            "stampede: label 'a' names targets 1 and 2: each target needs its own",
        ),
        (
            ["a=http://127.0.0.1:9/", "../b=http://127.0.0.1:10/"],
            "stampede: label '../b' is not a valid directory name: use letters, digits, '_', '.' and '-' only",
        ),
    ] {
        let o = stampede(&["run", targets[0], targets[1], "--steps", "1"]);
        assert_eq!(o.status.code(), Some(2), "{targets:?}");
        assert_eq!(text(&o.stderr), format!("{said}\n"), "{targets:?}");
    }
}

#[test]
fn an_interrupt_ended_every_target_and_kept_what_ran() {
    let a = ServeProcess::start(&[]);
    let b = ServeProcess::start(&[]);
    let out = tempfile::tempdir().unwrap();
    let child = Command::new(bin("stampede"))
        .args(["run", &format!("a={}", a.url()), &format!("b={}", b.url())])
        .args([
            "--model",
            "requests",
            "--steps",
            "20,20,20",
            "--step-duration",
            "2s",
        ])
        .args(["--out", out.path().to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut child = child;
    let log = Lines::of(&mut child);
    // Once the first step is over, during the second (b's first).
    assert!(
        log.wait_for("a: step 1/3", Duration::from_secs(60)),
        "{}",
        log.text()
    );
    std::thread::sleep(Duration::from_millis(500));
    tests::signal(&child, libc::SIGINT);
    let began = Instant::now();
    let o = child.wait_with_output().unwrap();
    assert!(
        began.elapsed() < Duration::from_secs(10),
        "the interrupt is obeyed promptly"
    );
    assert_eq!(o.status.code(), Some(1), "{}", log.text());
    let runs = [
        run_json(&out.path().join("a")),
        run_json(&out.path().join("b")),
    ];
    let steps = |r: &serde_json::Value| r["steps"].as_array().unwrap().clone();
    for r in &runs {
        assert_eq!(r["status"], "aborted", "{r}");
    }
    // Both stopped in the same round: b at most one step behind a, and only the step running then
    // marked aborted.
    let (sa, sb) = (steps(&runs[0]), steps(&runs[1]));
    assert!(
        sa.len() == sb.len() || sa.len() == sb.len() + 1,
        "{} {}",
        sa.len(),
        sb.len()
    );
    assert!(sa.len() < 3, "the run went on after the interrupt");
    let aborted: Vec<bool> = sa.iter().chain(&sb).map(|s| s["aborted"] == true).collect();
    assert!(aborted.iter().filter(|&&x| x).count() <= 1, "{aborted:?}");
    assert_eq!(a.requests(), replies(&runs[0]));
    assert_eq!(b.requests(), replies(&runs[1]));
}

#[test]
fn an_agents_run_length_counted_every_targets_steps_in_the_order_they_run() {
    let a = ServeProcess::start(&[]);
    let b = ServeProcess::start(&[]);
    let agent = AgentProc::start(&["--max-run-duration", "2s"], &[]);
    let out = tempfile::tempdir().unwrap();
    let o = stampede(&[
        "run",
        &format!("a={}", a.url()),
        &format!("b={}", b.url()),
        "--agents",
        &agent.addr.to_string(),
        "--steps",
        "10,10",
        "--step-duration",
        "1s",
        "--quiet",
        "--out",
        out.path().to_str().unwrap(),
    ]);
    // a's step 1 and b's step 1 fill the 2 s; a's step 2 would be the third second (run one
    // target after the other, a's would fit and b's first be refused).
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    let origin = a.url().trim_end_matches('/').to_string();
    assert_eq!(
        text(&o.stderr),
        format!(
            "stampede: target a ({origin}): agent {} would refuse this plan: step 2 would bring this run to 3s; this agent's --max-run-duration is 2s\n",
            agent.addr
        )
    );
    assert_eq!(a.requests() + b.requests(), 0, "refused before any load");
}
