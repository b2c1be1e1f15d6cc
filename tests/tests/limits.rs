//! An agent's own limits bind every load model, on the real binaries over loopback: `--max-rate` paces
//! a closed loop (and the run says so), `--max-connections` caps the sockets of a connection per arrival
//! (counted on the target's side), and a closed loop over `--max-connections` is refused before load.
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use tests::{AgentProc, ServeProcess, run_quiet, text};

/// A target that holds each request `delay` before its reply, closes every connection after one reply,
/// and counts the most connections it held open at once. Stops accepting when dropped.
struct SlowTarget {
    addr: SocketAddr,
    open: Arc<AtomicU64>,
    peak: Arc<AtomicU64>,
    served: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
}

impl SlowTarget {
    fn start(delay: Duration) -> SlowTarget {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let t = SlowTarget {
            addr: listener.local_addr().unwrap(),
            open: Arc::default(),
            peak: Arc::default(),
            served: Arc::default(),
            stop: Arc::default(),
        };
        let (open, peak, served, stop) = (
            t.open.clone(),
            t.peak.clone(),
            t.served.clone(),
            t.stop.clone(),
        );
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let Ok((conn, _)) = listener.accept() else {
                    std::thread::sleep(Duration::from_millis(1));
                    continue;
                };
                let now = open.fetch_add(1, Ordering::AcqRel) + 1;
                peak.fetch_max(now, Ordering::AcqRel);
                let (open, served) = (open.clone(), served.clone());
                std::thread::spawn(move || {
                    conn.set_nonblocking(false).unwrap();
                    conn.set_read_timeout(Some(Duration::from_secs(10)))
                        .unwrap();
                    let mut reader = BufReader::new(conn.try_clone().unwrap());
                    let mut line = String::new();
                    // The head of one GET, up to its blank line.
                    while reader.read_line(&mut line).unwrap_or(0) > 0 && line != "\r\n" {
                        line.clear();
                    }
                    std::thread::sleep(delay);
                    let mut conn = conn;
                    let reply =
                        b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok";
                    if conn.write_all(reply).is_ok() {
                        served.fetch_add(1, Ordering::AcqRel);
                    }
                    // Counted down as the target closes: before the agent can see it closed.
                    drop((conn, reader));
                    open.fetch_sub(1, Ordering::AcqRel);
                });
            }
        });
        t
    }
}

impl Drop for SlowTarget {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// An agent on two worker threads (their parts of a limit must add up) with `limits`.
fn agent(limits: &[&str]) -> AgentProc {
    let mut args = vec!["--listen", "127.0.0.1:0", "--threads", "2"];
    args.extend_from_slice(limits);
    AgentProc::with_args(&args, &[])
}

#[test]
fn max_rate_no_longer_lets_a_closed_loop_run_unpaced() {
    let _serial = tests::serial();
    let target = ServeProcess::start(&[]);
    let capped = agent(&["--max-rate", "50", "--max-connections", "10"]);
    let (o, dir) = run_quiet(&[
        &target.url(),
        "--agents",
        &capped.addr.to_string(),
        "--model",
        "concurrency",
        "--steps",
        "4",
        "--step-duration",
        "2s",
    ]);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    // Said, not clamped in silence: on stderr and in the step's notes.
    assert!(
        err.contains("paced at the agent's --max-rate 50 req/s"),
        "{err}"
    );
    let run = tests::run_json(dir.path());
    let step = &run["steps"][0];
    assert!(
        step["notes"]
            .to_string()
            .contains("paced at the agent's --max-rate 50 req/s"),
        "{step}"
    );
    // 2 s at 50 req/s is 100 (each worker's first start comes at once); unpaced it was thousands.
    let sent = step["requests"].as_u64().unwrap();
    let rate = step["achieved_request_rate"].as_f64().unwrap();
    assert!((40..=130).contains(&sent), "{sent} requests: {step}");
    assert!(rate <= 65.0, "{rate} req/s under --max-rate 50: {step}");
    assert_eq!(
        target.requests(),
        sent,
        "the target counted what was reported"
    );
}

#[test]
fn an_agent_s_max_rate_pacing_a_ramp_is_never_the_server_s_knee() {
    // It read "knee at 2 connections: the served rate flattened", every step valid: the served
    // rate stood at the agent's 50 req/s while the connections doubled.
    let _serial = tests::serial();
    let target = ServeProcess::start(&[]);
    let capped = agent(&["--max-rate", "50"]);
    let (o, dir) = run_quiet(&[
        &target.url(),
        "--agents",
        &capped.addr.to_string(),
        "--model",
        "concurrency",
        "--steps",
        "1,2,4",
        "--step-duration",
        "2s",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let run = tests::run_json(dir.path());
    let summary = &run["summary"];
    assert!(summary.get("knee").is_none(), "{summary:#}");
    assert_eq!(summary["finding"], "generator_limit", "{summary:#}");
    let headline = summary["headline"].as_str().unwrap();
    assert!(
        headline == "the generator was the limit from 1 connection, not the server",
        "{headline}"
    );
    for step in run["steps"].as_array().unwrap() {
        assert_eq!(step["generator_bound"], true, "{step}");
        assert!(
            step["reasons"]
                .to_string()
                .contains("paced at the agents' --max-rate (50 req/s in all)"),
            "{step}"
        );
    }
}

#[test]
fn max_connections_no_longer_lets_the_connections_model_hold_more_sockets() {
    let _serial = tests::serial();
    // Each connection held 400 ms: 100 arrivals/s would hold about 40 open at once.
    let slow = SlowTarget::start(Duration::from_millis(400));
    let capped = agent(&["--max-rate", "500", "--max-connections", "10"]);
    let url = format!("http://{}/", slow.addr);
    let (o, dir) = run_quiet(&[
        &url,
        "--agents",
        &capped.addr.to_string(),
        "--model",
        "connections",
        "--steps",
        "100",
        "--step-duration",
        "2s",
    ]);
    let err = text(&o.stderr);
    assert_ne!(o.status.code(), Some(2), "refused: {err}");
    let peak = slow.peak.load(Ordering::Acquire);
    assert!(
        (1..=10).contains(&peak),
        "{peak} connections open at once under --max-connections 10"
    );
    assert!(err.contains("at most 10 connections open at once"), "{err}");
    // The arrivals beyond the cap are the generator's own failures, in words naming the limit.
    let run = tests::run_json(dir.path());
    let step = &run["steps"][0];
    let refused = step["errors"]["fd-unavailable"].as_u64().unwrap();
    assert!(refused > 20, "{step}");
    assert!(
        step.to_string()
            .contains("--max-connections 10 were all open"),
        "{step}"
    );
    // Its reason names both budgets an fd error can be, not the descriptors alone.
    let reasons = step["reasons"].to_string();
    assert!(
        reasons.contains("fd-unavailable errors: generator out of file descriptors, or at its own --max-connections"),
        "{reasons}"
    );
    assert_eq!(
        step["requests"].as_u64().unwrap(),
        slow.served.load(Ordering::Acquire),
        "{step}"
    );
    assert_eq!(
        slow.open.load(Ordering::Acquire),
        0,
        "all closed after the run"
    );
}

#[test]
fn a_closed_loop_over_max_connections_is_refused_before_any_load() {
    let _serial = tests::serial();
    let target = ServeProcess::start(&[]);
    let capped = agent(&["--max-connections", "10"]);
    let (o, _dir) = run_quiet(&[
        &target.url(),
        "--agents",
        &capped.addr.to_string(),
        "--model",
        "concurrency",
        "--steps",
        "5,20",
        "--step-duration",
        "1s",
    ]);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&format!(
            "agent {} would refuse this plan: step 2 asks this agent for 20 connections \
             (a closed loop holds each open); its --max-connections is 10",
            capped.addr
        )),
        "{err}"
    );
    assert_eq!(target.requests(), 0, "no request before the refusal");
}
