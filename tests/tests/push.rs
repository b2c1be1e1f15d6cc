//! `--prometheus-remote-write` against the real thing: Debian's `prometheus` with its remote-write
//! receiver, started by the test on a free loopback port, holds what a three-step ramp pushed, and
//! its HTTP API's answers are held against run.json: each step's counters exactly, its
//! `histogram_quantile` within the grid's bound of stampede's own percentile. And an endpoint that
//! fails (500) or never answers does not slow the run, and is said once. The first test is skipped
//! without `prometheus` on PATH, except under CI=true.
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use coordinator::live::metrics::QUANTILE_BOUND;
use serde_json::Value;
use tests::prometheus::{Prometheus, prometheus_bin};
use tests::{Lines, ServeProcess, bin};

/// A run of `steps` against `url` (2 s a step unless `step`), pushing to `push` when given: its
/// wall time, its results directory and its stderr.
fn run(
    url: &str,
    steps: &str,
    step: &str,
    push: Option<&str>,
) -> (Duration, tempfile::TempDir, String) {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut cmd = Command::new(bin("stampede"));
    cmd.arg("run")
        .arg(url)
        .args(["--model", "requests", "--steps", steps])
        .args(["--step-duration", step])
        .arg("--out")
        .arg(dir.path().join("out"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    if let Some(p) = push {
        cmd.args(["--prometheus-remote-write", p]);
    }
    let began = Instant::now();
    let mut child = cmd.spawn().expect("stampede runs");
    let log = Lines::of(&mut child);
    let status = child.wait().expect("the run is waited for");
    let took = began.elapsed();
    // The reader thread has the last of stderr once the pipe closes.
    std::thread::sleep(Duration::from_millis(100));
    assert!(status.success(), "{status}: {}", log.text());
    (took, dir, log.text())
}

#[test]
fn prometheus_receiving_a_ramp_holds_run_json_s_counts_and_each_step_s_p99_within_the_bound() {
    let test = "prometheus_receiving_a_ramp";
    let Some(prometheus) = prometheus_bin(test) else {
        return;
    };
    let prom = Prometheus::receiving(&prometheus);
    let serve = ServeProcess::start(&["--delay", "1ms"]);
    let (_, dir, log) = run(&serve.url(), "100,200,300", "3s", Some(&prom.write_url()));
    let out = dir.path().join("out");
    let ran = tests::run_json(&out);
    assert_eq!(ran["status"], "completed", "{log}");
    let steps = ran["steps"].as_array().expect("steps");
    assert_eq!(steps.len(), 3);
    // Every batch reached it: the closing line says so, and nothing was dropped.
    let closing = log
        .lines()
        .find(|l| l.contains("remote write to "))
        .unwrap_or_else(|| panic!("no closing line: {log}"));
    assert!(closing.ends_with(", 0 dropped"), "{closing}");
    assert!(!log.contains("was dropped"), "{log}");

    // The run as the resource: on every series.
    // The run's id: its start as events.ndjson's begin says it.
    let events = std::fs::read_to_string(out.join("events.ndjson")).expect("events.ndjson");
    let begin: Value = serde_json::from_str(events.lines().next().expect("a begin")).unwrap();
    let run_id = begin["started_at"].as_str().expect("started_at");
    let sel = format!("job=\"stampede\",run=\"{run_id}\"");
    let u = |v: &Value| v.as_u64().expect("a count") as f64;
    let requests: f64 = steps.iter().map(|s| u(&s["requests"])).sum();
    assert!(
        requests >= 1700.0,
        "a 100-200-300 ramp of 3 s steps: {requests}"
    );
    assert_eq!(
        prom.one(&format!("sum(stampede_requests_total{{{sel}}})")),
        requests
    );
    assert_eq!(prom.one(&format!("stampede_run_finished{{{sel}}}")), 1.0);
    let url = prom.query(&format!("stampede_run_finished{{{sel}}}"))[0].0["url"].clone();
    assert_eq!(url, ran["target"], "the target's origin is a label");
    let mut off = Vec::new();
    for s in steps {
        let n = s["step"].as_u64().unwrap();
        for (metric, key) in [
            ("stampede_requests_total", "requests"),
            ("stampede_served_total", "ok"),
            ("stampede_failed_total", "failed"),
        ] {
            let got = prom.one(&format!("{metric}{{{sel},step=\"{n}\"}}"));
            assert_eq!(got, u(&s[key]), "step {n}'s {metric} is run.json's {key}");
        }
        for (q, key) in [(0.5, "p50"), (0.99, "p99")] {
            let promql = format!(
                "histogram_quantile({q}, stampede_latency_seconds_bucket{{{sel},step=\"{n}\"}})"
            );
            let got_ms = prom.one(&promql) * 1000.0;
            let ours = s["latency_ms"][key].as_f64().expect("a percentile");
            let rel = (got_ms - ours).abs() / ours;
            assert!(
                rel <= QUANTILE_BOUND,
                "step {n} {key}: Prometheus {got_ms} ms, stampede {ours} ms: {:.2} % off, more \
                 than the bound's {:.2} %",
                rel * 100.0,
                QUANTILE_BOUND * 100.0
            );
            off.push(format!(
                "step {n} {key}: {got_ms:.4} ms vs {ours} ms ({:.2} %)",
                rel * 100.0
            ));
        }
    }
    eprintln!("{test}: {requests} requests; {}; {closing}", off.join("; "));
}

/// An endpoint of the test's own on loopback: `Some(answer)` answers every request with it (after
/// reading the request), `None` reads and never answers. Stopped when dropped.
struct Endpoint {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Endpoint {
    fn start(answer: Option<&'static str>) -> Endpoint {
        let listener = TcpListener::bind("127.0.0.1:0").expect("a loopback port");
        listener.set_nonblocking(true).expect("non-blocking");
        let addr = listener.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut held: Vec<TcpStream> = Vec::new();
            let began = Instant::now();
            // Bounded: a minute at most, whatever the test does.
            while !stopping.load(Ordering::Relaxed) && began.elapsed() < Duration::from_secs(60) {
                match listener.accept() {
                    Ok((mut s, _)) => {
                        s.set_nonblocking(false).unwrap();
                        s.set_read_timeout(Some(Duration::from_millis(200)))
                            .unwrap();
                        let mut buf = [0u8; 65536];
                        if let Some(a) = answer {
                            // One request a connection is all the test needs: answered, closed.
                            let _ = s.read(&mut buf);
                            let _ = s.write_all(a.as_bytes());
                        } else {
                            held.push(s);
                        }
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(10)),
                }
            }
        });
        Endpoint {
            addr,
            stop,
            thread: Some(thread),
        }
    }

    fn url(&self) -> String {
        format!("http://{}/api/v1/write", self.addr)
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[test]
fn a_failing_or_silent_endpoint_never_slows_the_run_and_is_said_once() {
    let serve = ServeProcess::start(&[]);
    let (plain, dir, _) = run(&serve.url(), "100,200,300", "2s", None);
    let plain_steps = tests::run_json(&dir.path().join("out"))["steps"].clone();
    let failing = Endpoint::start(Some(
        "HTTP/1.1 500 Internal Server Error\r\nContent-Length: 22\r\nConnection: close\r\n\r\nstorage is down\nreally",
    ));
    let silent = Endpoint::start(None);
    for (what, endpoint, says) in [
        (
            "failing",
            &failing,
            "failing: 500 Internal Server Error: storage is down",
        ),
        ("silent", &silent, "timed out: no answer within 3000 ms"),
    ] {
        let (took, dir, log) = run(&serve.url(), "100,200,300", "2s", Some(&endpoint.url()));
        // The run's own time, plus at most the end's bounded flush (5 s) and some slack.
        assert!(
            took <= plain + Duration::from_secs(8),
            "{what}: {took:?} against the plain run's {plain:?}: {log}"
        );
        let ran = tests::run_json(&dir.path().join("out"));
        assert_eq!(ran["status"], "completed", "{what}: {log}");
        for (s, p) in ran["steps"]
            .as_array()
            .unwrap()
            .iter()
            .zip(plain_steps.as_array().unwrap())
        {
            assert_eq!(
                s["requests"], p["requests"],
                "{what}: the load sent in full"
            );
            assert_eq!(s["failed"], 0, "{what}: {log}");
        }
        let said: Vec<&str> = log.lines().filter(|l| l.contains("was dropped")).collect();
        assert_eq!(said.len(), 1, "{what}: said once: {log}");
        assert!(said[0].contains(says), "{what}: {}", said[0]);
        assert!(
            !said[0].contains("really"),
            "the first line only: {}",
            said[0]
        );
        let closing = log
            .lines()
            .find(|l| {
                l.contains(&format!("remote write to {}", endpoint.url()))
                    && l.contains("batches sent")
            })
            .unwrap_or_else(|| panic!("{what}: no closing line: {log}"));
        assert!(closing.contains(": 0 batches sent, "), "{what}: {closing}");
        assert!(!closing.contains(", 0 dropped"), "{what}: {closing}");
        eprintln!("{what}: {took:?} (plain {plain:?}); {}; {closing}", said[0]);
    }
}
