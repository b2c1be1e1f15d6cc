//! Broken and hostile targets: each lands in the right error class, memory stays bounded (bodies are read
//! and counted, never kept), and the generator keeps its schedule for the other requests.
use std::time::{Duration, Instant};

use tests::{
    AgentProc, H2ControlFlood, Hostile, HostileServer, ServeProcess, peak_rss_kib, rss_kib,
    run_json, run_ok, spawn_stampede,
};

/// Runs 40 req/s for 2 s with a 1 s timeout against a misbehaving server; returns the step and peak RSS.
fn against(how: Hostile) -> (serde_json::Value, u64) {
    let server = HostileServer::start(how);
    let out = tempfile::tempdir().unwrap();
    let url = server.url();
    let mut child = spawn_stampede(&[
        "run",
        &url,
        "--model",
        "requests",
        "--steps",
        "40",
        "--step-duration",
        "2s",
        "--timeout",
        "1s",
        "--threads",
        "1",
        "--quiet",
        "--out",
        out.path().to_str().unwrap(),
    ]);
    let began = Instant::now();
    let mut peak = 0;
    while child.try_wait().unwrap().is_none() {
        peak = peak.max(peak_rss_kib(child.id()));
        assert!(
            began.elapsed() < Duration::from_secs(30),
            "{how:?}: the run must end on its own"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(child.wait().unwrap().success(), "{how:?}");
    let step = run_json(out.path())["steps"][0].clone();
    // The schedule is kept whatever the target does: every arrival was dispatched on time.
    assert!(
        step["generator"]["lag_p99_ms"].as_f64().unwrap() < 50.0,
        "{how:?}: {step}"
    );
    (step, peak)
}

/// The count of one error class, after checking that no reply arrived at all.
fn errors(step: &serde_json::Value, class: &str) -> u64 {
    assert_eq!(step["replies"], 0, "{step}");
    step["errors"][class].as_u64().unwrap()
}

#[test]
fn garbage_instead_of_http_is_other() {
    let _serial = tests::serial();
    let (step, _) = against(Hostile::Garbage);
    assert!(errors(&step, "other") >= 70, "{step}");
}

#[test]
fn a_server_that_never_answers_is_client_timeout() {
    let _serial = tests::serial();
    let (step, _) = against(Hostile::Silent);
    assert!(errors(&step, "client-timeout") >= 70, "{step}");
    assert_eq!(
        step["requests"], 80,
        "every arrival was sent on schedule: {step}"
    );
}

#[test]
fn closing_mid_response_is_conn_reset() {
    let _serial = tests::serial();
    let (step, _) = against(Hostile::ClosesMidResponse);
    assert!(errors(&step, "conn-reset") >= 70, "{step}");
}

#[test]
fn endless_and_gigantic_bodies_are_read_and_counted_with_bounded_memory() {
    let _serial = tests::serial();
    let (step, peak_kib) = against(Hostile::EndlessBody);
    assert!(errors(&step, "client-timeout") >= 70, "{step}");
    assert!(
        step["bytes_in"].as_u64().unwrap() > 64 * 1024 * 1024,
        "{step}"
    );
    assert!(
        peak_kib < 200 * 1024,
        "endless body: peak RSS {peak_kib} KiB"
    );
    // 64 MiB bodies: loopback may deliver some whole within the timeout; each request either completes,
    // times out, or (this server does not keep connections alive) is reset; nothing is kept.
    let (step, peak_kib) = against(Hostile::HugeBody);
    let done = step["replies"].as_u64().unwrap()
        + step["errors"]["client-timeout"].as_u64().unwrap()
        + step["errors"]["conn-reset"].as_u64().unwrap();
    assert_eq!(done, step["requests"].as_u64().unwrap(), "{step}");
    assert!(
        step["bytes_in"].as_u64().unwrap() > 64 * 1024 * 1024,
        "{step}"
    );
    assert!(peak_kib < 200 * 1024, "huge body: peak RSS {peak_kib} KiB");
}

#[test]
fn a_slow_trickle_is_client_timeout() {
    let _serial = tests::serial();
    let (step, _) = against(Hostile::Trickle);
    assert!(errors(&step, "client-timeout") >= 70, "{step}");
}

/// What an agent may hold while an HTTP/2 server floods it: its own few MiB, and a bounded queue
/// of acknowledgements per connection. Unbounded, it passed 3.7 GB in 9 s.
const FLOOD_RSS_KIB: u64 = 100 * 1024;

#[test]
fn an_http2_flood_of_pings_and_settings_unread_leaves_the_agent_bounded_and_its_next_run_clean() {
    let _serial = tests::serial();
    let flood = H2ControlFlood::start();
    let mut agent = AgentProc::start(&[], &[]);
    let pid = agent.child.id();
    let out = tempfile::tempdir().unwrap();
    let url = flood.url();
    let agents = agent.addr.to_string();
    let mut run = spawn_stampede(&[
        "run",
        &url,
        "--agents",
        &agents,
        "--model",
        "concurrency",
        "--steps",
        "2",
        "--streams",
        "4",
        "--step-duration",
        "3s",
        "--timeout",
        "1s",
        "--quiet",
        "--out",
        out.path().to_str().unwrap(),
    ]);
    let began = Instant::now();
    let mut peak = 0;
    let mut watch = |agent: &mut AgentProc, what: &str| {
        let now = rss_kib(pid);
        peak = peak.max(now);
        if now > FLOOD_RSS_KIB {
            // Killed before it takes the machine's memory with it.
            agent.kill();
            panic!("{what}: the agent grew to {now} KiB under the flood");
        }
    };
    while run.try_wait().unwrap().is_none() {
        watch(&mut agent, "during the run");
        assert!(
            began.elapsed() < Duration::from_secs(30),
            "the run must end"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(run.wait().unwrap().success());
    // Its connections end with the run, whatever the server does; a session waits at most a
    // second for the last of its output to be written.
    let ended = Instant::now();
    while flood.open() > 0 && ended.elapsed() < Duration::from_secs(3) {
        watch(&mut agent, "after the run");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(
        flood.open(),
        0,
        "of {} connections, some outlived the run",
        flood.accepted()
    );
    let hwm = peak_rss_kib(pid);
    eprintln!(
        "flood: {} connections, agent RSS peak {peak} KiB (VmHWM {hwm} KiB)",
        flood.accepted()
    );
    assert!(hwm < FLOOD_RSS_KIB, "VmHWM {hwm} KiB");
    let step = run_json(out.path())["steps"][0].clone();
    // Named in the step's notes: the server flooded, stampede said ENHANCE_YOUR_CALM.
    let notes = step["notes"].to_string();
    assert!(
        notes.contains("GOAWAY ENHANCE_YOUR_CALM"),
        "the flood is not named: {step}"
    );

    // The same agent, a healthy server: every request answered on time, nothing blamed on it.
    let healthy = ServeProcess::start(&[]);
    let ran = run_ok(&[
        &healthy.url(),
        "--agents",
        &agents,
        "--model",
        "requests",
        "--steps",
        "500",
        "--step-duration",
        "2s",
    ]);
    let step = ran.step(0);
    assert_eq!(step["server"], "ok", "{step}");
    assert_eq!(step["requests"], 1000, "{step}");
    assert_eq!(step["ok"], 1000, "{step}");
    assert!(
        step["generator"]["lag_p99_ms"].as_f64().unwrap() < 50.0,
        "{step}"
    );
}
