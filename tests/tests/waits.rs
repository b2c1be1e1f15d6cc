//! What a run says while it waits and what it leaves when it never starts, with the real binaries on
//! loopback: an unreachable agent is named at once with the wait's end, a run that sent nothing leaves
//! no results directory, and a warning about the generator is said once per run however many targets.
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use tests::{Lines, ServeProcess, bin, closed_port, text, with_nofile};

#[test]
fn an_unreachable_agent_was_10_s_of_silence_and_left_a_directory_with_an_empty_hlog() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let agent = format!("127.0.0.1:{}", closed_port());
    let url = format!("http://127.0.0.1:{}/", closed_port());
    bin("stampede");
    let mut child = Command::new(bin("stampede"))
        .args(["run", &url, "--agents", &agent, "--steps", "10"])
        .args(["--step-duration", "1s", "--out"])
        .arg(&out)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let said = Lines::of(&mut child);
    let began = Instant::now();
    // At once, not after the wait: what is awaited and until when.
    assert!(
        said.wait_for("trying again until", Duration::from_secs(5)),
        "nothing said {:?} into the wait: {}",
        began.elapsed(),
        said.text()
    );
    let first = said.text();
    assert!(
        first.contains(&format!("agent {agent} is unreachable")) && first.contains(" UTC (1"),
        "{first}"
    );
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(1), "{}", said.text());
    assert_eq!(
        said.text().matches("trying again").count(),
        1,
        "said once: {}",
        said.text()
    );
    assert!(!out.exists(), "a run that never started left {out:?}");
}

#[test]
fn an_fd_limit_warning_was_said_once_per_target_and_twice_per_step_on_stdout() {
    let target = ServeProcess::start(&[]);
    let url = target.url();
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(bin("stampede"));
    cmd.arg("run");
    for name in ["a", "b", "c", "d", "e"] {
        cmd.arg(format!("{name}={url}"));
    }
    cmd.args(["--model", "connections", "--steps", "20,30"])
        .args(["--step-duration", "500ms", "--quiet", "--out"])
        .arg(dir.path().join("out"));
    // 20 connections/s held for 10 s of timeouts would pass the 192 descriptors left under 256.
    let o = with_nofile(&mut cmd, 256).output().unwrap();
    let (err, out) = (text(&o.stderr), text(&o.stdout));
    assert!(o.status.success(), "{err}");
    let risk = "more than the 192 this agent can open";
    assert_eq!(err.matches(risk).count(), 1, "stderr: {err}");
    assert_eq!(out.matches(risk).count(), 1, "stdout: {out}");
    // Every step's record still names its own.
    for name in ["a", "b", "c", "d", "e"] {
        let run = tests::run_json(&dir.path().join("out").join(name));
        for step in run["steps"].as_array().unwrap() {
            assert!(step["notes"].to_string().contains(risk), "{name}: {step}");
        }
    }
}
