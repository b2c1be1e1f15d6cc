//! Conditions per name end to end (issue 38): a plan of three named requests against a server that
//! stalls only `/slow`; `--fail-on 'p99[slow]>100ms'` exits 3 and the same of `fast` exits 0, only
//! the slow name's p99 shows the stall, and a name the plan lacks is refused before any load.
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tests::{run_json, stampede, text};

/// How long the server stalls a request to `/slow`.
const STALL: Duration = Duration::from_millis(500);

/// An HTTP/1.1 keep-alive server (a thread per connection) that answers every request at once but
/// those to `/slow`, which it answers after its stall; it counts the requests of each path. Stops
/// accepting when dropped.
struct StallingServer {
    addr: SocketAddr,
    counts: Arc<Mutex<BTreeMap<String, u64>>>,
    stop: Arc<AtomicBool>,
}

impl StallingServer {
    fn start(stall: Duration) -> StallingServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let counts = Arc::new(Mutex::new(BTreeMap::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (c, s) = (counts.clone(), stop.clone());
        std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((conn, _)) => {
                        let counts = c.clone();
                        std::thread::spawn(move || serve(conn, &counts, stall));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(2)),
                }
            }
        });
        StallingServer { addr, counts, stop }
    }

    fn counts(&self) -> BTreeMap<String, u64> {
        self.counts.lock().unwrap().clone()
    }
}

impl Drop for StallingServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// One connection's requests (GETs, no body), each answered `ok`, until the client closes it.
fn serve(conn: TcpStream, counts: &Mutex<BTreeMap<String, u64>>, stall: Duration) {
    conn.set_nonblocking(false).unwrap();
    conn.set_nodelay(true).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut reader = BufReader::new(conn.try_clone().unwrap());
    let mut writer = conn;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let path = line.split_whitespace().nth(1).unwrap_or("").to_string();
        loop {
            let mut h = String::new();
            if reader.read_line(&mut h).unwrap_or(0) == 0 {
                return;
            }
            if h == "\r\n" {
                break;
            }
        }
        if path == "/slow" {
            std::thread::sleep(stall);
        }
        *counts.lock().unwrap().entry(path).or_default() += 1;
        if writer
            .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
            .is_err()
        {
            return;
        }
    }
}

/// A plan of three equally weighted names, `fast`, `slow` and `other`, at 60 req/s for 3 s.
fn plan(dir: &Path, server: &StallingServer) -> String {
    let p = dir.join("plan.toml");
    let mut text = format!(
        "url = \"http://{}/\"\nmodel = \"requests\"\nsteps = [60]\nstep_duration = \"3s\"\ntimeout = \"5s\"\n",
        server.addr
    );
    for name in ["fast", "slow", "other"] {
        text.push_str(&format!(
            "\n[[request]]\nname = \"{name}\"\nurl = \"/{name}\"\n"
        ));
    }
    std::fs::write(&p, text).unwrap();
    p.to_str().unwrap().to_string()
}

/// Each name's p99 (ms) and requests in the run's one step.
fn per_name(run: &serde_json::Value) -> BTreeMap<String, (f64, u64)> {
    run["steps"][0]["per_request"]
        .as_array()
        .expect("per_request rows")
        .iter()
        .map(|r| {
            (
                r["name"].as_str().unwrap().to_string(),
                (
                    r["latency_ms"]["p99"].as_f64().unwrap(),
                    r["requests"].as_u64().unwrap(),
                ),
            )
        })
        .collect()
}

#[test]
fn a_fail_on_of_the_slow_name_fails_the_run_and_one_of_a_fast_name_does_not() {
    let dir = tempfile::tempdir().unwrap();
    // The same plan against the server stalling nothing: each name's p99 where nothing stalls.
    let calm = StallingServer::start(Duration::ZERO);
    let out = dir.path().join("calm");
    let o = stampede(&[
        "run",
        &plan(dir.path(), &calm),
        "--out",
        out.to_str().unwrap(),
        "--quiet",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let calm = per_name(&run_json(&out));
    eprintln!("per name (p99 ms, requests), nothing stalled: {calm:?}");
    for name in ["fast", "slow", "other"] {
        assert!(calm[name].0 < 100.0, "{name}: {calm:?}");
    }
    let server = StallingServer::start(STALL);
    let plan = plan(dir.path(), &server);
    let out = dir.path().join("slow");
    let o = stampede(&[
        "run",
        &plan,
        "--out",
        out.to_str().unwrap(),
        "--quiet",
        "--fail-on",
        "p99[slow]>100ms",
    ]);
    let (err, stdout) = (text(&o.stderr), text(&o.stdout));
    assert_eq!(o.status.code(), Some(3), "{err}\n{stdout}");
    assert!(
        stdout.contains("--fail-on p99[slow]>100ms: p99[slow] "),
        "{stdout}"
    );
    let run = run_json(&out);
    let breach = &run["fail_on"][0];
    assert_eq!(breach["expression"], "p99[slow]>100ms");
    let names = per_name(&run);
    eprintln!("per name (p99 ms, requests) with /slow stalled: {names:?}");
    // The stall shows in the slow name's p99 alone; the others' stay far below it.
    let (slow_p99, _) = names["slow"];
    assert!(slow_p99 >= STALL.as_millis() as f64, "{names:?}");
    for name in ["fast", "other"] {
        assert!(names[name].0 < 100.0, "{name}: {names:?}");
    }
    // The server counted what stampede says it sent of each name.
    let counts = server.counts();
    for name in ["fast", "slow", "other"] {
        assert_eq!(
            counts.get(&format!("/{name}")).copied(),
            Some(names[name].1),
            "{name}: {counts:?} against {names:?}"
        );
    }

    let out = dir.path().join("fast");
    let o = stampede(&[
        "run",
        &plan,
        "--out",
        out.to_str().unwrap(),
        "--quiet",
        "--fail-on",
        "p99[fast]>100ms",
        "--fail-on",
        "p99[other]>100ms",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let run = run_json(&out);
    assert_eq!(run["fail_on"], serde_json::json!([]));
    eprintln!(
        "per name (p99 ms, requests), second run: {:?}",
        per_name(&run)
    );
}

#[test]
fn a_name_the_plan_does_not_have_is_refused_before_any_load() {
    let server = StallingServer::start(STALL);
    let dir = tempfile::tempdir().unwrap();
    let plan = plan(dir.path(), &server);
    let o = stampede(&["run", &plan, "--quiet", "--stop-on", "p99[slwo]>1s"]);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert_eq!(
        err.trim_end(),
        "stampede: --stop-on 'p99[slwo]>1s': the plan has no request named 'slwo' (its names: fast, slow, other)"
    );
    // Unnamed requests have no name to give.
    let url = format!("http://{}/", server.addr);
    let o = stampede(&["run", &url, "--steps", "1", "--fail-on", "failed[x]>1%"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o.stderr).contains("the requests are unnamed (one URL or --urls)"),
        "{}",
        text(&o.stderr)
    );
    assert!(server.counts().is_empty(), "no load was sent");
}
