//! The control plane driven in-process: scripted agents over in-process links, tokio's paused clock
//! (a step's seconds pass at once, exactly), a temporary output directory.
use std::path::Path;
use std::time::Duration;

use proto::pb;
use proto::pb::coordinator_message::Kind as Down;
use results::verdict::Verdict;
use tokio::time::Instant;

use super::fake_agent::{self, Log, Prepare, Script, Start};
use super::*;

/// `stampede run` of 2 s steps (10 and 20 requests/s unless `extra` says --steps; 1 s timeout) into
/// `dir`, plus `extra`.
fn config(dir: &Path, extra: &str) -> RunConfig {
    let steps = if extra.contains("--steps") {
        ""
    } else {
        "--steps 10,20"
    };
    let length = if extra.contains("--step-duration") {
        ""
    } else {
        "--step-duration 2s"
    };
    let line = format!(
        "run http://127.0.0.1:9/ --model requests {steps} {length} --timeout 1s --quiet --out {} {extra}",
        dir.display()
    );
    let argv =
        std::iter::once("stampede".to_string()).chain(line.split_whitespace().map(String::from));
    match crate::cli::parse_from(argv)
        .expect("a valid command line")
        .command
    {
        crate::cli::Command::Run(a) => crate::config::resolve(*a).expect("a valid run"),
        _ => unreachable!("a run command line"),
    }
}

/// Runs `cfg` over agents named a, b, ... playing `scripts`.
async fn run_scripted(
    cfg: RunConfig,
    scripts: Vec<Script>,
    stop: Stop,
) -> (Result<RunOutcome, RunError>, Vec<Log>) {
    let mut links = Vec::new();
    let mut logs = Vec::new();
    for (k, script) in scripts.into_iter().enumerate() {
        let (link, log) = fake_agent::spawn(script);
        links.push((((b'a' + k as u8) as char).to_string(), Expect::Load, link));
        logs.push(log);
    }
    (run_with(cfg, stop, Some(links)).await, logs)
}

/// When the agent was first sent a message like this one, and the message.
fn first(log: &Log, like: impl Fn(&Down) -> bool) -> Option<(Instant, Down)> {
    log.lock().unwrap().iter().find(|(_, d)| like(d)).cloned()
}

fn starts(d: &Down) -> bool {
    matches!(d, Down::StartStep(_))
}

/// The reasons of every abort the agent was sent.
fn aborts(log: &Log) -> Vec<String> {
    let log = log.lock().unwrap();
    log.iter()
        .filter_map(|(_, d)| match d {
            Down::Abort(a) => Some(a.reason.clone()),
            _ => None,
        })
        .collect()
}

/// The (step, part of its arrivals) of every share the agent was asked to prepare.
fn prepared(log: &Log) -> Vec<(u32, f64)> {
    let log = log.lock().unwrap();
    log.iter()
        .filter_map(|(_, d)| match d {
            Down::PrepareStep(p) => {
                // Down the tree of forks, each taking its side's weight of what is left.
                let part = p.path.iter().fold(1.0, |part, f| {
                    let side = if f.right_side { f.right } else { f.left };
                    part * side as f64 / (f.left + f.right) as f64
                });
                Some((p.step, part))
            }
            _ => None,
        })
        .collect()
}

fn run_json(dir: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("run.json")).unwrap()).unwrap()
}

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

#[tokio::test(start_paused = true)]
async fn an_agent_silent_for_3_s_during_a_step_is_lost() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(
        dir.path(),
        "--steps 10 --step-duration 10s --on-agent-loss abort",
    );
    let silent = Script::default().start(0, Start::SilentAfter(Duration::from_secs(1)));
    let (outcome, logs) = run_scripted(cfg, vec![Script::default(), silent], Stop::default()).await;
    let outcome = outcome.unwrap();
    let (started, _) = first(&logs[0], starts).unwrap();
    let (aborted, _) = first(&logs[0], |d| matches!(d, Down::Abort(_))).unwrap();
    // Last heard at its last pong (heartbeats every 500 ms), found on a 250 ms check.
    let after = secs(aborted - started);
    assert!((3.5..=4.3).contains(&after), "lost {after} s into the step");
    assert_eq!(aborts(&logs[0]), vec!["an agent was lost"]);
    let step = &outcome.steps[0];
    assert!(outcome.aborted && step.aborted);
    assert!(step.agents.iter().any(|a| a.agent == "b" && a.lost));
}

#[tokio::test(start_paused = true)]
async fn an_agent_that_does_not_ack_its_share_within_15_s_fails_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), "--on-agent-loss abort");
    let mute = Script::default().prepare(0, Prepare::Ignore);
    let (outcome, logs) = run_scripted(cfg, vec![mute], Stop::default()).await;
    let ended = Instant::now();
    let e = outcome.err().expect("the run fails");
    assert_eq!(
        e.to_string(),
        "agent a did not answer within 15 s while preparing step 1"
    );
    assert_eq!(e.exit_code(), 1);
    let (asked, _) = first(&logs[0], |d| matches!(d, Down::PrepareStep(_))).unwrap();
    assert_eq!(ended - asked, fleet::ANSWER_TIMEOUT);
    let run = run_json(dir.path());
    assert_eq!(run["status"], "failed");
    // Why, in run.json too (it said only "failed").
    assert_eq!(
        run["warnings"][0],
        "the run failed: agent a did not answer within 15 s while preparing step 1"
    );
}

/// The note a step past its deadline makes for agent `who`: 2 s steps, 1 s timeout, 5 s grace.
fn overdue_note(step: u32, who: &str) -> String {
    format!(
        "step {step}: agent {who} sent no step report within 8 s (schedule 2 s + timeout 1 s + 5 s)"
    )
}

#[tokio::test(start_paused = true)]
async fn a_step_past_its_deadline_ended_the_run_without_naming_the_agent_under_abort() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), "--steps 10,20 --on-agent-loss abort");
    let stuck = Script::default().start(0, Start::Hang);
    let (outcome, logs) = run_scripted(cfg, vec![stuck], Stop::default()).await;
    let outcome = outcome.expect("the late agent is a loss under abort, not an error");
    // The run did not wait for the late agent to read its abort.
    tokio::time::sleep(Duration::from_millis(10)).await;
    let (started, _) = first(&logs[0], starts).unwrap();
    let (aborted, _) = first(&logs[0], |d| matches!(d, Down::Abort(_))).unwrap();
    // 200 ms start lead + 2 s schedule + 1 s timeout + 5 s grace.
    assert_eq!(aborted - started, Duration::from_millis(8200));
    assert_eq!(aborts(&logs[0]), vec!["step deadline passed"]);
    assert!(outcome.aborted && outcome.steps.len() == 1);
    let step = &outcome.steps[0];
    assert!(
        step.notes.contains(&overdue_note(1, "a")),
        "{:?}",
        step.notes
    );
    assert!(step.agents.iter().any(|a| a.agent == "a" && a.lost));
    let json = run_json(dir.path());
    assert_eq!(json["status"], "aborted");
    let notes = json["steps"][0]["notes"].to_string();
    assert!(
        notes.contains("agent a sent no step report within 8 s"),
        "{notes}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_step_past_its_deadline_aborted_the_run_under_degrade() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), "--on-agent-loss degrade");
    let stuck = Script::default().start(0, Start::Hang);
    let (outcome, logs) = run_scripted(cfg, vec![Script::default(), stuck], Stop::default()).await;
    let outcome = outcome.expect("the run goes on without the late agent");
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert!(!outcome.aborted);
    assert_eq!(outcome.steps.len(), 2);
    let step = &outcome.steps[0];
    assert!(!step.aborted, "the agent that reported keeps its step");
    assert!(lost_reason(step), "{:?}", step.reasons);
    assert!(
        step.notes.contains(&overdue_note(1, "b")),
        "{:?}",
        step.notes
    );
    assert!(aborts(&logs[0]).is_empty(), "a reported in time");
    assert_eq!(aborts(&logs[1]), vec!["step deadline passed"]);
    assert_eq!(
        prepared(&logs[0]),
        vec![(0, 0.5), (1, 1.0)],
        "step 2 all on a"
    );
    assert_eq!(prepared(&logs[1]), vec![(0, 0.5)]);
}

#[tokio::test(start_paused = true)]
async fn a_loss_during_prepare_is_split_again_among_the_rest_under_continue() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), "--steps 10 --on-agent-loss continue");
    let gone = Script::default().prepare(0, Prepare::Close);
    let (outcome, logs) = run_scripted(cfg, vec![Script::default(), gone], Stop::default()).await;
    let outcome = outcome.unwrap();
    assert_eq!(
        prepared(&logs[0]),
        vec![(0, 0.5), (0, 1.0)],
        "half, then all"
    );
    assert_eq!(prepared(&logs[1]), vec![(0, 0.5)]);
    assert!(
        first(&logs[1], starts).is_none(),
        "the lost agent is not started"
    );
    let step = &outcome.steps[0];
    assert!(!outcome.aborted && !step.aborted);
    assert!(step.agents.iter().any(|a| a.agent == "b" && a.lost));
}

#[tokio::test(start_paused = true)]
async fn a_loss_during_prepare_fails_the_run_under_abort() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), "--on-agent-loss abort");
    let gone = Script::default().prepare(0, Prepare::Close);
    let (outcome, logs) = run_scripted(cfg, vec![Script::default(), gone], Stop::default()).await;
    let e = outcome.err().expect("the run fails");
    assert_eq!(e.to_string(), "agent b disconnected while preparing step 1");
    assert!(first(&logs[0], starts).is_none(), "nothing was started");
}

/// Two steps; agent b drops its link 1 s into the first.
async fn lose_b_mid_step(policy: &str) -> (RunOutcome, Vec<Log>, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), &format!("--on-agent-loss {policy}"));
    let gone = Script::default().start(0, Start::CloseAfter(Duration::from_secs(1)));
    let (outcome, logs) = run_scripted(cfg, vec![Script::default(), gone], Stop::default()).await;
    (outcome.unwrap(), logs, dir)
}

fn lost_reason(r: &StepResult) -> bool {
    r.reasons
        .iter()
        .any(|w| w == "agent b was lost during the step")
}

#[tokio::test(start_paused = true)]
async fn under_abort_a_lost_agent_ends_the_run_after_its_step() {
    let (outcome, logs, dir) = lose_b_mid_step("abort").await;
    assert!(outcome.aborted);
    assert_eq!(outcome.steps.len(), 1);
    assert!(outcome.steps[0].aborted);
    assert_eq!(aborts(&logs[0]), vec!["an agent was lost"]);
    assert_eq!(prepared(&logs[0]), vec![(0, 0.5)], "step 2 is not prepared");
    assert_eq!(run_json(dir.path())["status"], "aborted");
}

#[tokio::test(start_paused = true)]
async fn under_continue_a_lost_agent_is_left_out_without_a_mark() {
    let (outcome, logs, _dir) = lose_b_mid_step("continue").await;
    assert!(!outcome.aborted);
    assert_eq!(outcome.steps.len(), 2);
    let step = &outcome.steps[0];
    assert!(!step.aborted && !lost_reason(step), "{:?}", step.reasons);
    assert!(step.agents.iter().any(|a| a.agent == "b" && a.lost));
    assert!(aborts(&logs[0]).is_empty());
    assert_eq!(
        prepared(&logs[0]),
        vec![(0, 0.5), (1, 1.0)],
        "step 2 all on a"
    );
}

#[tokio::test(start_paused = true)]
async fn under_degrade_a_lost_agent_marks_its_step() {
    let (outcome, logs, _dir) = lose_b_mid_step("degrade").await;
    assert!(!outcome.aborted);
    assert_eq!(outcome.steps.len(), 2);
    let step = &outcome.steps[0];
    assert!(lost_reason(step), "{:?}", step.reasons);
    assert!(step.trust != Verdict::Valid);
    assert!(!lost_reason(&outcome.steps[1]));
    assert_eq!(prepared(&logs[0]), vec![(0, 0.5), (1, 1.0)]);
}

/// A run of agents a (honest) and b, which reports `claim` one second into step 1 (at 10 req/s, b's
/// share 5 req/s): its outcome, its run.json, and b's log.
async fn b_claims(claim: pb::Counters) -> (RunOutcome, serde_json::Value, Log) {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), "--on-agent-loss degrade");
    let liar = Script::default().claim(0, claim);
    let (outcome, mut logs) =
        run_scripted(cfg, vec![Script::default(), liar], Stop::default()).await;
    (outcome.unwrap(), run_json(dir.path()), logs.remove(1))
}

/// Counters that convert, `ok` replies in 2xx.
fn claimed(ok: u64) -> pb::Counters {
    pb::Counters {
        status: vec![0, ok, 0, 0, 0],
        errors: vec![0; shared::metrics::ErrorClass::COUNT],
        ..Default::default()
    }
}

/// What a dropped liar's step and run.json must say: b named, why, b lost and stopped, the step not
/// valid, and b given no share of step 2.
fn assert_dropped(outcome: &RunOutcome, json: &serde_json::Value, log: &Log, why: &str) {
    let step = &outcome.steps[0];
    let note = step
        .notes
        .iter()
        .find(|n| n.starts_with("agent b dropped in step 1"));
    assert!(note.is_some_and(|n| n.contains(why)), "{:?}", step.notes);
    assert!(step.agents.iter().any(|a| a.agent == "b" && a.lost));
    assert!(step.trust != Verdict::Valid, "{:?}", step.trust);
    assert_eq!(aborts(log), vec!["this agent was dropped from the run"]);
    assert_eq!(prepared(log), vec![(0, 0.5)], "not given step 2");
    let notes = json["steps"][0]["notes"].to_string();
    assert!(notes.contains("agent b dropped in step 1"), "{notes}");
}

#[tokio::test(start_paused = true)]
async fn a_joined_peer_claiming_a_million_ok_for_a_5_per_s_share_is_dropped_and_named() {
    let million = 1_000_000;
    let claim = pb::Counters {
        requests: million,
        replies: million,
        ok: million,
        ..claimed(million)
    };
    let (outcome, json, log) = b_claims(claim).await;
    let why = "it claims 1000000 requests sent or due so far, where its share allows at most";
    assert_dropped(&outcome, &json, &log, why);
    let served = outcome.steps[0].ok;
    assert!(served < million, "the claim was not merged: {served}");
}

#[tokio::test(start_paused = true)]
async fn a_peer_claiming_a_thousand_more_than_a_slow_share_is_dropped() {
    // Under the old bound (1.1x the share + 1,000 requests) a peer due 5 req/s could claim 262 a
    // second and stay valid; the slack is now its own rate's and 64 arrivals.
    let claim = served(262);
    let (outcome, json, log) = b_claims(claim).await;
    let why = "it claims 262 requests sent or due so far, where its share allows at most 7";
    assert_dropped(&outcome, &json, &log, why);
}

#[tokio::test(start_paused = true)]
async fn counters_near_2_pow_63_are_refused_not_wrapped() {
    let near = (1u64 << 63) + 5;
    let claim = pb::Counters {
        requests: near,
        unsent: near,
        replies: 5,
        ok: 5,
        ..claimed(5)
    };
    let (outcome, json, log) = b_claims(claim).await;
    assert_dropped(&outcome, &json, &log, "counters past 2^64");
    assert!(outcome.steps[0].requests < 1000);
}

/// Honest intervals: `ok` served of as many requests.
fn served(ok: u64) -> pb::Counters {
    pb::Counters {
        requests: ok,
        replies: ok,
        ok,
        ..claimed(ok)
    }
}

#[tokio::test(start_paused = true)]
async fn a_step_that_lost_an_agents_share_is_neither_kept_up_nor_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), "--on-agent-loss degrade");
    // Each serves all of its share (5 and 10 req/s for 2 s); b is lost in step 2, its share unrun.
    let a = Script::default().claim(0, served(10)).claim(1, served(20));
    let b = Script::default()
        .claim(0, served(10))
        .start(1, Start::CloseAfter(Duration::from_millis(1500)));
    let (outcome, _logs) = run_scripted(cfg, vec![a, b], Stop::default()).await;
    assert_eq!(outcome.unwrap().steps.len(), 2);
    let json = run_json(dir.path());
    let answer = json["summary"]["answer"].as_str().unwrap();
    assert!(answer.starts_with("kept up to 10 req/s"), "{answer}");
    assert!(!answer.contains("every step kept up"), "{answer}");
    assert!(
        answer.ends_with("; step 2 lost agent b's share (50 % of the load): not judged"),
        "{answer}"
    );
    assert_eq!(json["summary"]["kept_up_step"], 1);
    assert!(json["summary"]["beyond"].is_null(), "nor is it the limit");
    assert_eq!(json["steps"][1]["lost_load"][0]["agent"], "b");
    assert_eq!(json["steps"][1]["lost_load"][0]["pct"], 50.0);
    // The step itself says so too, where the report and stdout show its notes.
    assert!(
        json["steps"][1]["notes"].to_string().contains(
            "agent b's share (50 % of the load) was not all sent: not judged (neither kept up with nor past the server's limit)"
        ),
        "{}",
        json["steps"][1]
    );
}

#[tokio::test(start_paused = true)]
async fn a_step_report_claiming_a_year_of_wall_time_drops_its_agent() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), "--on-agent-loss degrade");
    let year = Duration::from_secs(365 * 24 * 3600);
    let liar = Script::default().wall(year);
    let (outcome, mut logs) =
        run_scripted(cfg, vec![Script::default(), liar], Stop::default()).await;
    let (outcome, json, log) = (outcome.unwrap(), run_json(dir.path()), logs.remove(1));
    assert_dropped(
        &outcome,
        &json,
        &log,
        "its step report says it ran 31536000 s",
    );
}

#[tokio::test(start_paused = true)]
async fn an_agent_that_stops_on_its_own_mid_step_is_lost_but_counted() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), "--on-agent-loss degrade");
    let drained = Script::default().start(0, Start::DrainAfter(Duration::from_secs(1)));
    let (outcome, logs) =
        run_scripted(cfg, vec![Script::default(), drained], Stop::default()).await;
    let outcome = outcome.unwrap();
    let step = &outcome.steps[0];
    assert!(!step.aborted && lost_reason(step), "{:?}", step.reasons);
    assert!(aborts(&logs[0]).is_empty(), "the others go on");
    assert_eq!(prepared(&logs[1]), vec![(0, 0.5)], "not given step 2");
}

/// Cancels `stop.drain` after `after`.
fn drain_after(stop: &Stop, after: Duration) {
    let drain = stop.drain.clone();
    tokio::spawn(async move {
        tokio::time::sleep(after).await;
        drain.cancel();
    });
}

#[tokio::test(start_paused = true)]
async fn an_interrupt_while_preparing_aborts_the_step_as_it_starts() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), "");
    let slow = Script::default().prepare(0, Prepare::AckAfter(Duration::from_secs(1)));
    let stop = Stop::default();
    drain_after(&stop, Duration::from_millis(500));
    let (outcome, logs) = run_scripted(cfg, vec![slow], stop).await;
    let outcome = outcome.unwrap();
    assert!(outcome.aborted && outcome.steps.len() == 1 && outcome.steps[0].aborted);
    let (started, _) = first(&logs[0], starts).unwrap();
    let (aborted, _) = first(&logs[0], |d| matches!(d, Down::Abort(_))).unwrap();
    assert_eq!(aborted, started, "stopped as soon as it started");
    assert_eq!(aborts(&logs[0]), vec!["interrupted"]);
    assert_eq!(outcome.steps[0].duration_s, 0.0);
}

#[tokio::test(start_paused = true)]
async fn an_interrupt_while_running_aborts_the_step_and_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), "");
    let stop = Stop::default();
    drain_after(&stop, Duration::from_millis(1200));
    let (outcome, logs) = run_scripted(cfg, vec![Script::default()], stop).await;
    let outcome = outcome.unwrap();
    assert!(outcome.aborted && outcome.steps.len() == 1 && outcome.steps[0].aborted);
    assert_eq!(aborts(&logs[0]), vec!["interrupted"]);
    // Summarised over the second it ran after its 200 ms lead, not its 2 s schedule.
    assert!((outcome.steps[0].duration_s - 1.0).abs() < 0.01);
    assert_eq!(prepared(&logs[0]).len(), 1, "step 2 is not prepared");
}

#[tokio::test(start_paused = true)]
async fn an_interrupt_while_stopping_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), "--on-agent-loss abort");
    let slow = Script::default().abort_delay(Duration::from_secs(3));
    let gone = Script::default().start(0, Start::CloseAfter(Duration::from_millis(500)));
    let stop = Stop::default();
    drain_after(&stop, Duration::from_secs(1));
    let (outcome, logs) = run_scripted(cfg, vec![slow, gone], stop).await;
    let outcome = outcome.unwrap();
    assert_eq!(
        aborts(&logs[0]),
        vec!["an agent was lost"],
        "one abort, its cause kept"
    );
    assert!(outcome.aborted && outcome.steps.len() == 1);
}

#[tokio::test(start_paused = true)]
async fn the_step_source_ends_the_run_after_its_last_step() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), "--steps 10,20,30");
    let (outcome, logs) = run_scripted(cfg, vec![Script::default()], Stop::default()).await;
    let outcome = outcome.unwrap();
    assert!(!outcome.aborted && outcome.stopped.is_none());
    let values: Vec<f64> = outcome.steps.iter().map(|r| r.step_value).collect();
    assert_eq!(values, vec![10.0, 20.0, 30.0]);
    assert_eq!(prepared(&logs[0]), vec![(0, 1.0), (1, 1.0), (2, 1.0)]);
    let json = run_json(dir.path());
    assert_eq!(json["status"], "completed");
    assert_eq!(json["steps"].as_array().map(Vec::len), Some(3));
    assert!(json["summary"].is_object());
}

#[tokio::test(start_paused = true)]
async fn stop_on_ends_the_ramp_and_names_the_steps_not_run() {
    let dir = tempfile::tempdir().unwrap();
    // Nothing is served by a scripted agent: every step's ok rate breaches.
    let cfg = config(dir.path(), "--steps 10,20,30 --stop-on ok_rate<50%");
    let (outcome, logs) = run_scripted(cfg, vec![Script::default()], Stop::default()).await;
    let outcome = outcome.unwrap();
    let stopped = outcome.stopped.expect("--stop-on ended the ramp");
    assert_eq!((stopped.after_step, stopped.not_run), (1, vec![20.0, 30.0]));
    assert_eq!(prepared(&logs[0]).len(), 1);
}

/// What the agent was sent to configure and prepare, in order: `configure PATH` (the workload's first
/// request's path) and `prepare STEP` (the protocol's 0-based index).
fn configured_and_prepared(log: &Log) -> Vec<String> {
    let log = log.lock().unwrap();
    log.iter()
        .filter_map(|(_, d)| match d {
            Down::Configure(c) => {
                let url = &c.requests[0].url;
                Some(format!("configure {}", &url[url.rfind('/').unwrap()..]))
            }
            Down::PrepareStep(p) => Some(format!("prepare {}", p.step)),
            _ => None,
        })
        .collect()
}

#[tokio::test(start_paused = true)]
async fn side_by_side_each_step_ran_on_every_target_in_turn_with_its_own_workload() {
    let dir = tempfile::tempdir().unwrap();
    let line = format!(
        "stampede run a=http://127.0.0.1:9/x b=http://127.0.0.1:9/y --model requests --steps 10,20 \
         --step-duration 2s --timeout 1s --out {}",
        dir.path().display()
    );
    let cli = crate::cli::parse_from(line.split_whitespace()).expect("a valid command line");
    let crate::cli::Command::Run(args) = cli.command else {
        unreachable!("a run command line")
    };
    let Ok(crate::config::Runs::Side(side)) = crate::config::resolve_runs(*args) else {
        panic!("two targets run side by side")
    };
    let (link, log) = fake_agent::spawn(Script::default());
    let links = vec![("agent".to_string(), Expect::Load, link)];
    let runs = run_targets(side.runs, Stop::default(), Some(links), None, None)
        .await
        .unwrap();
    // Both checked before any load; then each step on a, then on b, each after its own configure
    // (the check left b's workload on the agent, so the first step reconfigures a).
    assert_eq!(
        configured_and_prepared(&log),
        [
            "configure /x",
            "configure /y",
            "configure /x",
            "prepare 0",
            "configure /y",
            "prepare 0",
            "configure /x",
            "prepare 1",
            "configure /y",
            "prepare 1"
        ]
    );
    for (run, label) in runs.iter().zip(["a", "b"]) {
        assert_eq!(run.label.as_deref(), Some(label));
        assert_eq!(run.dir, dir.path().join(label));
        assert_eq!(run.steps.len(), 2);
        let doc = run_json(&run.dir);
        assert_eq!(doc["label"], label);
        assert_eq!(doc["status"], "completed");
        assert_eq!(doc["steps"].as_array().unwrap().len(), 2);
    }
}

/// Runs `cfg` over a scripted load agent `a` and the `others`, each given as what it was named as.
async fn run_beside(
    cfg: RunConfig,
    others: Vec<(&str, Expect, control::link::CoordinatorEnd)>,
) -> Result<RunOutcome, RunError> {
    let (a, _log) = fake_agent::spawn(Script::default());
    let mut links = vec![("a".to_string(), Expect::Load, a)];
    links.extend(others.into_iter().map(|(n, e, l)| (n.to_string(), e, l)));
    run_with(cfg, Stop::default(), Some(links)).await
}

#[tokio::test(start_paused = true)]
async fn a_monitor_named_among_the_agents_is_refused_naming_its_role() {
    let dir = tempfile::tempdir().unwrap();
    let monitor = fake_agent::spawn_monitor("m", None);
    let e = run_beside(config(dir.path(), ""), vec![("m", Expect::Load, monitor)])
        .await
        .err()
        .expect("refused");
    let words = e.to_string();
    assert!(
        words.starts_with("m is a monitor") && words.contains("name it in --monitors"),
        "{words}"
    );
    assert_eq!(e.exit_code(), 2);
    let (b, _) = fake_agent::spawn(Script::default());
    let e = run_beside(
        config(dir.path(), "--force"),
        vec![("b", Expect::Monitor, b)],
    )
    .await
    .err()
    .expect("refused");
    let words = e.to_string();
    assert!(
        words.starts_with("b is a load agent") && words.contains("name it in --agents"),
        "{words}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_monitor_lost_mid_run_is_a_note_and_the_run_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let monitor = fake_agent::spawn_monitor("m", Some(Duration::from_secs(1)));
    let outcome = run_beside(
        config(dir.path(), ""),
        vec![("m", Expect::Monitor, monitor)],
    )
    .await
    .expect("the run goes on without its monitor");
    assert_eq!(outcome.steps.len(), 2);
    assert!(!outcome.aborted);
    let lost: Vec<&String> = outcome
        .steps
        .iter()
        .flat_map(|s| &s.notes)
        .filter(|n| n.starts_with("server monitor m lost"))
        .collect();
    assert_eq!(lost.len(), 1, "said once: {lost:?}");
    assert!(
        outcome.steps.iter().all(|s| s.trust != Verdict::Invalid),
        "a monitor's loss judges nothing"
    );
    let run = results::run_file::RunFile::read(&dir.path().join("run.json")).unwrap();
    assert_eq!(run.monitors.len(), 1, "it watched the run, lost or not");
    let header = std::fs::read_to_string(dir.path().join("steps.tsv")).unwrap();
    assert!(
        header
            .lines()
            .next()
            .unwrap()
            .ends_with("\ttcp_retrans_m\tok_per_core_s_m")
    );
}

#[tokio::test(start_paused = true)]
async fn side_by_side_a_target_s_lost_monitor_is_its_note_alone_and_the_run_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let line = format!(
        "stampede run a=http://127.0.0.1:9/x b=http://127.0.0.1:9/y --model requests --steps 10,20,30 \
         --step-duration 2s --timeout 1s --out {}",
        dir.path().display()
    );
    let cli = crate::cli::parse_from(line.split_whitespace()).expect("a valid command line");
    let crate::cli::Command::Run(args) = cli.command else {
        unreachable!("a run command line")
    };
    let Ok(crate::config::Runs::Side(side)) = crate::config::resolve_runs(*args) else {
        panic!("two targets run side by side")
    };
    let (link, _log) = fake_agent::spawn(Script::default());
    // Monitors named as the targets are theirs; db is behind both. a's is lost in its first step.
    let links = vec![
        ("agent".to_string(), Expect::Load, link),
        (
            "ma".to_string(),
            Expect::Monitor,
            fake_agent::spawn_monitor("a", Some(Duration::from_secs(1))),
        ),
        (
            "mb".to_string(),
            Expect::Monitor,
            fake_agent::spawn_monitor("b", None),
        ),
        (
            "mdb".to_string(),
            Expect::Monitor,
            fake_agent::spawn_monitor("db", None),
        ),
    ];
    let runs = run_targets(side.runs, Stop::default(), Some(links), None, None)
        .await
        .expect("the run goes on without a's monitor");
    for (run, (own, other)) in runs.iter().zip([("a", "b"), ("b", "a")]) {
        assert_eq!(run.steps.len(), 3, "{own}: every step ran");
        let lost: Vec<&String> = run
            .steps
            .iter()
            .flat_map(|s| &s.notes)
            .filter(|n| n.starts_with("server monitor a (ma) lost"))
            .collect();
        assert_eq!(lost.len(), usize::from(own == "a"), "{own}: {lost:?}");
        for s in &run.steps {
            assert!(
                s.server_monitors.iter().all(|m| m.monitor != other),
                "{own}'s step {} carries {other}'s server",
                s.number
            );
        }
        let file = results::run_file::RunFile::read(&run.dir.join("run.json")).unwrap();
        let names: Vec<&str> = file.monitors.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(names, [own, "db"]);
        assert_eq!(file.paired_monitor.as_deref(), Some(own));
        let tsv = std::fs::read_to_string(run.dir.join("steps.tsv")).unwrap();
        let header: Vec<&str> = tsv.lines().next().unwrap().split('\t').collect();
        assert!(header.contains(&"srv_cpu_pct") && header.contains(&"srv_cpu_pct_db"));
        assert!(!header.iter().any(|h| h.ends_with(&format!("_{other}"))));
        assert!(!header.contains(&format!("srv_cpu_pct_{own}").as_str()));
    }
}

#[tokio::test(start_paused = true)]
async fn peers_that_joined_are_counted_by_the_role_their_hello_says() {
    let (a, _log) = fake_agent::spawn(Script::default());
    let m = fake_agent::spawn_monitor("m", None);
    let links = vec![
        ("a".to_string(), Expect::Either, a),
        ("m".to_string(), Expect::Either, m),
    ];
    let mut fleet = Fleet::with_roles(links, CancellationToken::new());
    fleet.hello(None).await.unwrap();
    assert_eq!((fleet.live(), fleet.monitors()), (vec![0], vec![1]));
    fleet.check_joined(1, 1).unwrap();
    let e = fleet.check_joined(2, 0).unwrap_err();
    // Two monitors of one name would make two columns of one name.
    let twin = fake_agent::spawn_monitor("m", None);
    let mut two = Fleet::with_roles(
        vec![
            (
                "x".to_string(),
                Expect::Monitor,
                fake_agent::spawn_monitor("m", None),
            ),
            ("y".to_string(), Expect::Monitor, twin),
        ],
        CancellationToken::new(),
    );
    let refused = two.hello(None).await.unwrap_err().to_string();
    assert!(
        refused.starts_with("y is a monitor named m, as x is: give each its own --name"),
        "{refused}"
    );
    assert_eq!(
        e.to_string(),
        "2 peers joined: 1 load agents (a) and 1 monitors (m), where --expect-agents 2 and --expect-monitors 0 were asked for"
    );
    assert_eq!(e.exit(), crate::exit::Exit::Usage);
}

#[tokio::test(start_paused = true)]
async fn agents_heard_while_the_run_task_was_away_4_s_were_declared_lost() {
    let (a, _log) = fake_agent::spawn(Script::default());
    let (b, _log) = fake_agent::spawn(Script::default());
    let links = vec![
        ("a".to_string(), Expect::Load, a),
        ("b".to_string(), Expect::Load, b),
    ];
    let mut fleet = Fleet::with_roles(links, CancellationToken::new());
    fleet.hello(None).await.unwrap();
    // The run task takes nothing from the fleet for 4 s (a stalled loop, a blocked write) while the
    // heartbeats' pongs keep arriving.
    tokio::time::sleep(Duration::from_secs(4)).await;
    for i in 0..2 {
        let silent = fleet.silent_for(i);
        assert!(
            silent <= Duration::from_millis(500),
            "agent {i} silent for {silent:?}"
        );
        assert!(silent < LOSS_SILENCE);
    }
}

#[tokio::test(start_paused = true)]
async fn a_coordinator_stalled_4_s_mid_step_lost_its_live_agents() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(
        dir.path(),
        "--steps 10 --step-duration 10s --on-agent-loss abort",
    );
    // 2 s in, the whole process stops for 4 s (SIGSTOP, a blocked stderr on every thread): the
    // clock jumps with no task run, so what the agents sent meanwhile is read only afterwards.
    tokio::spawn(async {
        tokio::time::sleep(Duration::from_secs(2)).await;
        tokio::time::advance(Duration::from_secs(4)).await;
    });
    // Several agents: each one's pong must be read before the first look for silence.
    let scripts = vec![Script::default(); 8];
    let (outcome, logs) = run_scripted(cfg, scripts, Stop::default()).await;
    let outcome = outcome.unwrap();
    let step = &outcome.steps[0];
    assert!(!outcome.aborted && !step.aborted, "{:?}", step.reasons);
    assert!(step.agents.iter().all(|a| !a.lost), "{:?}", step.agents);
    assert!(logs.iter().all(|l| aborts(l).is_empty()));
}

#[tokio::test(start_paused = true)]
async fn a_find_max_probe_that_lost_an_agent_is_invalid_not_a_pass() {
    use results::step::Mark;
    let dir = tempfile::tempdir().unwrap();
    let line = format!(
        "stampede find-max http://127.0.0.1:9/ --model requests --slo p50<50ms --start 100 --max-rate 400 \
         --probe 2s --warmup 0s --confirm 2s --cooldown 0s --deadline 10m --timeout 1s --quiet --out {}",
        dir.path().display()
    );
    let cfg = match crate::cli::parse_from(line.split_whitespace().map(String::from))
        .expect("a valid command line")
        .command
    {
        crate::cli::Command::FindMax(a) => {
            crate::config::resolve_find_max(*a).expect("a valid search")
        }
        _ => unreachable!("a find-max command line"),
    };
    // Both serve all they send of the first probe, but b is lost in it: half its offer never went.
    let a = Script::default().claim(0, served(10));
    let b = Script::default()
        .claim(0, served(10))
        .start(0, Start::CloseAfter(Duration::from_millis(1500)));
    let links = [("a", a), ("b", b)]
        .into_iter()
        .map(|(name, s)| (name.to_string(), Expect::Load, fake_agent::spawn(s).0))
        .collect();
    let crate::config::Runs::One(run) = cfg.runs else {
        unreachable!("one target")
    };
    let mut runs = run_targets(
        vec![*run],
        Stop::default(),
        Some(links),
        None,
        Some(cfg.setup),
    )
    .await
    .unwrap();
    let run = runs.remove(0);
    let first = &run.steps[0];
    let mark = first.probe.as_ref().expect("a probe's mark");
    assert_eq!(mark.class, Mark::Invalid, "{mark:?}");
    let reason = mark.reason.as_deref().unwrap_or_default();
    assert!(
        reason.starts_with("an agent was lost during the probe"),
        "{reason}"
    );
    assert_eq!(first.lost_load.first().map(|l| l.agent.as_str()), Some("b"));
}

/// The (step, length in ms) of every share the agent was asked to prepare.
fn prepared_lengths(log: &Log) -> Vec<(u32, u64)> {
    let log = log.lock().unwrap();
    log.iter()
        .filter_map(|(_, d)| match d {
            Down::PrepareStep(p) => Some((p.step, p.duration_ms)),
            _ => None,
        })
        .collect()
}

#[tokio::test(start_paused = true)]
async fn a_warmup_ran_before_step_1_and_counted_for_nothing() {
    let dir = tempfile::tempdir().unwrap();
    // The warmup serves 20 of its 40 requests (50 %), a breach of --fail-on and --stop-on; the
    // steps serve all of theirs.
    let cfg = config(
        dir.path(),
        "--warmup 4s --fail-on ok_rate<80% --stop-on ok_rate<80%",
    );
    let agent = Script::default().claim(0, served(20)).claim(1, served(40));
    let (outcome, logs) = run_scripted(cfg, vec![agent], Stop::default()).await;
    let outcome = outcome.unwrap();
    // Sent first, at step 1's rate, for its own length; then the plan's steps.
    assert_eq!(
        prepared_lengths(&logs[0]),
        vec![(0, 4000), (0, 2000), (1, 2000)]
    );
    let log = logs[0].lock().unwrap();
    let started: Vec<Instant> = log
        .iter()
        .filter(|(_, d)| starts(d))
        .map(|(at, _)| *at)
        .collect();
    drop(log);
    assert_eq!(started.len(), 3);
    assert!(
        secs(started[1] - started[0]) >= 4.0,
        "step 1 began after the warmup ended"
    );
    // Not a step: not among them, not judged, not in the answer.
    let warmup = outcome.warmup.as_ref().expect("the warmup is kept");
    assert_eq!((warmup.number, warmup.step_value), (0, 10.0));
    assert!(warmup.ok_rate < 8.0, "{}", warmup.ok_rate);
    assert!(
        warmup.notes.iter().all(|n| !n.starts_with("--")),
        "{:?}",
        warmup.notes
    );
    let numbers: Vec<u32> = outcome.steps.iter().map(|r| r.number).collect();
    assert_eq!(numbers, vec![1, 2]);
    assert!(outcome.breaches.is_empty(), "{:?}", outcome.breaches);
    assert!(outcome.stopped.is_none() && !outcome.aborted);
    let json = run_json(dir.path());
    assert_eq!(json["warmup"]["step"], 0);
    assert_eq!(json["plan"]["warmup_s"], 4.0);
    assert_eq!(json["steps"].as_array().map(Vec::len), Some(2));
    assert_eq!(json["summary"]["kept_up_step"], 2);
    assert_eq!(json["fail_on"], serde_json::json!([]));
    let tsv = std::fs::read_to_string(dir.path().join("steps.tsv")).unwrap();
    assert_eq!(tsv.lines().count(), 3, "a header and the two steps:\n{tsv}");
}

#[tokio::test(start_paused = true)]
async fn without_a_warmup_the_steps_are_all_there_is() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), "--warmup 0s");
    let (outcome, logs) = run_scripted(cfg, vec![Script::default()], Stop::default()).await;
    assert!(outcome.unwrap().warmup.is_none());
    assert_eq!(prepared_lengths(&logs[0]), vec![(0, 2000), (1, 2000)]);
    let json = run_json(dir.path());
    assert!(json.get("warmup").is_none() && json["plan"].get("warmup_s").is_none());
}

#[tokio::test(start_paused = true)]
async fn side_by_side_each_target_warmed_up_right_before_its_first_step() {
    let dir = tempfile::tempdir().unwrap();
    let line = format!(
        "stampede run a=http://127.0.0.1:9/x b=http://127.0.0.1:9/y --model requests --steps 10,20 \
         --step-duration 2s --timeout 1s --warmup 3s --out {}",
        dir.path().display()
    );
    let cli = crate::cli::parse_from(line.split_whitespace()).expect("a valid command line");
    let crate::cli::Command::Run(args) = cli.command else {
        unreachable!("a run command line")
    };
    let Ok(crate::config::Runs::Side(side)) = crate::config::resolve_runs(*args) else {
        panic!("two targets run side by side")
    };
    let (link, log) = fake_agent::spawn(Script::default());
    let links = vec![("agent".to_string(), Expect::Load, link)];
    let runs = run_targets(side.runs, Stop::default(), Some(links), None, None)
        .await
        .unwrap();
    let sent: Vec<String> = {
        let log = log.lock().unwrap();
        log.iter()
            .filter_map(|(_, d)| match d {
                Down::Configure(c) => {
                    let url = &c.requests[0].url;
                    Some(format!("configure {}", &url[url.rfind('/').unwrap()..]))
                }
                Down::PrepareStep(p) => Some(format!("prepare {} {}ms", p.step, p.duration_ms)),
                _ => None,
            })
            .collect()
    };
    // After the checks, a's warmup then its step 1, b's warmup then its step 1; step 2 on each.
    assert_eq!(
        sent[2..],
        [
            "configure /x",
            "prepare 0 3000ms",
            "prepare 0 2000ms",
            "configure /y",
            "prepare 0 3000ms",
            "prepare 0 2000ms",
            "configure /x",
            "prepare 1 2000ms",
            "configure /y",
            "prepare 1 2000ms"
        ]
    );
    for run in &runs {
        assert_eq!(run.warmup.as_ref().map(|w| w.number), Some(0));
        assert_eq!(run.steps.len(), 2);
        assert_eq!(run_json(&run.dir)["warmup"]["step_value"], 10.0);
    }
}

/// `stampede find-max a=... b=...` of 2 s probes from 100 req/s into `dir`: each target's
/// configuration (its `out` under `dir`) and the search's.
fn two_searches(dir: &Path) -> (Vec<RunConfig>, crate::config::SearchSetup) {
    let line = format!(
        "stampede find-max a=http://127.0.0.1:9/ b=http://127.0.0.1:8/ --model requests --slo p50<50ms \
         --start 100 --max-rate 400 --probe 2s --warmup 0s --confirm 2s --cooldown 0s --deadline 10m \
         --timeout 1s --quiet --out {}",
        dir.display()
    );
    let cfg = match crate::cli::parse_from(line.split_whitespace().map(String::from))
        .expect("a valid command line")
        .command
    {
        crate::cli::Command::FindMax(a) => {
            crate::config::resolve_find_max(*a).expect("a valid search")
        }
        _ => unreachable!("a find-max command line"),
    };
    let crate::config::Runs::Side(side) = cfg.runs else {
        unreachable!("two targets")
    };
    (side.runs, cfg.setup)
}

#[tokio::test(start_paused = true)]
async fn two_searches_took_turns_each_configured_before_its_probe_and_each_concluded() {
    let dir = tempfile::tempdir().unwrap();
    let (runs, setup) = two_searches(dir.path());
    // The agent serves nothing: every probe fails, and each search ends at its start.
    let (link, log) = fake_agent::spawn(Script::default());
    let runs = run_targets(
        runs,
        Stop::default(),
        Some(vec![("a".to_string(), Expect::Load, link)]),
        Some(dir.path()),
        Some(setup),
    )
    .await
    .unwrap();
    // The check before any load configured both targets' workloads; then each probe ran on its
    // own target's, a's and b's in turn.
    let seen: Vec<String> = log
        .lock()
        .unwrap()
        .iter()
        .filter_map(|(_, d)| match d {
            Down::Configure(c) => Some(format!("configure {}", c.requests[0].url)),
            Down::StartStep(s) => Some(format!("start {}", s.step)),
            _ => None,
        })
        .collect();
    let a = "configure http://127.0.0.1:9/";
    let b = "configure http://127.0.0.1:8/";
    assert_eq!(seen, [a, b, a, "start 0", b, "start 0"]);
    for (run, (label, port)) in runs.iter().zip([("a", 9), ("b", 8)]) {
        let c = run.capacity.as_ref().expect("each search's answer");
        assert_eq!(c.status, results::search::Status::Doomed, "{label}");
        assert_eq!(run.steps.len(), 1, "{label}");
        let json = run_json(&dir.path().join(label));
        assert_eq!(json["capacity"]["status"], "doomed", "{label}");
        let target = json["target"].as_str().unwrap_or_default();
        assert!(target.contains(&format!(":{port}")), "{label}: {target}");
    }
    assert!(dir.path().join("compare.json").is_file());
}

#[tokio::test(start_paused = true)]
async fn ctrl_c_in_one_target_s_probe_concluded_both_searches_as_interrupted() {
    let dir = tempfile::tempdir().unwrap();
    let (runs, setup) = two_searches(dir.path());
    let stop = Stop::default();
    // a's first probe has run (its 2 s), b's is under way (from 2 s to 4 s).
    drain_after(&stop, Duration::from_secs(3));
    let (link, _log) = fake_agent::spawn(Script::default());
    let runs = run_targets(
        runs,
        stop,
        Some(vec![("a".to_string(), Expect::Load, link)]),
        Some(dir.path()),
        Some(setup),
    )
    .await
    .unwrap();
    let [a, b] = &runs[..] else {
        unreachable!("two targets")
    };
    for (run, label) in [(a, "a"), (b, "b")] {
        let c = run.capacity.as_ref().expect("each search's answer");
        assert_eq!(
            c.status,
            results::search::Status::Interrupted,
            "{label}: {c:?}"
        );
        let json = run_json(&dir.path().join(label));
        assert_eq!(json["status"], "aborted", "{label}");
        assert_eq!(json["capacity"]["status"], "interrupted", "{label}");
    }
    // a's probe was judged (its failure a bound); b's was cut short and is no bound.
    let (a, b) = (
        a.capacity.as_ref().unwrap(),
        (b, b.capacity.as_ref().unwrap()),
    );
    assert_eq!(a.lowest_fail.as_ref().map(|f| f.offered), Some(100.0));
    let (b, b_capacity) = b;
    assert!(b.steps[0].aborted);
    let mark = b.steps[0].probe.as_ref().expect("a probe's mark");
    assert_eq!(mark.reason.as_deref(), Some("interrupted: not counted"));
    assert!(b_capacity.lowest_fail.is_none() && b_capacity.max_rate.is_none());
    // Nor is it counted among the probes: a's one ramp probe ran, b's did not.
    assert_eq!((a.probes.ramp, b_capacity.probes.ramp), (1, 0));
}
