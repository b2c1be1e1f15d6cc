//! httperf's sessions checked against httperf itself: one `--wsesslog` file run by httperf and by
//! stampede against the same nginx, whose access log (each request's connection, method, URI and
//! status) shows the same sessions from both, each on a connection of its own with the same
//! requests in the same order, and the same number of them. Over HTTP/2 the same sessions, each a
//! connection whose burst went as concurrent streams.
use std::collections::BTreeMap;
use std::process::{Command, Stdio};

use tests::nginx::{Http2, Nginx};
use tests::{run_ok, text};

/// Three sessions: bursts with embedded requests (indented lines), think times of ~50 ms, a POST
/// with a body; each session's URIs its own, so the access log says which session a request was of.
const LOG: &str = "\
# the sessions.rs test's log, as httperf reads it
/s1/index.html think=0.05
  /s1/style.css
  /s1/logo.png
/s1/login method=POST contents='user=ann&pass=x'

/s2/search?q=shoes think=0.04
/s2/item?id=7
  /s2/img/7.png
  /s2/img/7-large.png

/s3/home
  /s3/news
";

/// Sessions a run sends: the log's three twice, in turn.
const SESSIONS: u64 = 6;

/// The access log's lines from `from` on, as (connection, "METHOD URI STATUS").
fn logged(nginx: &Nginx, from: usize) -> Vec<(u64, String)> {
    let log = std::fs::read_to_string(nginx.dir().join("logs/requests.log")).unwrap_or_default();
    log.lines()
        .skip(from)
        .map(|l| {
            let (conn, rest) = l.split_once(' ').expect("'$connection ...'");
            (conn.parse().expect("a connection number"), rest.to_string())
        })
        .collect()
}

/// Each connection's requests in order, the connections sorted: one session each when nothing
/// reconnected.
fn sessions(lines: &[(u64, String)]) -> Vec<Vec<String>> {
    let mut by: BTreeMap<u64, Vec<String>> = BTreeMap::new();
    for (conn, r) in lines {
        by.entry(*conn).or_default().push(r.clone());
    }
    let mut out: Vec<Vec<String>> = by.into_values().collect();
    out.sort();
    out
}

/// How many times each request was taken.
fn per_request(lines: &[(u64, String)]) -> BTreeMap<String, u64> {
    let mut counts = BTreeMap::new();
    for (_, r) in lines {
        *counts.entry(r.clone()).or_insert(0) += 1;
    }
    counts
}

fn httperf_here() -> bool {
    Command::new("sh")
        .args(["-c", "command -v httperf"])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// httperf's "Session rate [sess/s]: ... (completed/total)".
fn httperf_sessions(out: &str) -> (u64, u64) {
    let line = out
        .lines()
        .find(|l| l.starts_with("Session rate"))
        .unwrap_or_else(|| panic!("httperf says its session rate: {out}"));
    let inner = line
        .rsplit_once('(')
        .and_then(|(_, r)| r.strip_suffix(')'))
        .expect("(completed/total)");
    let (done, all) = inner.split_once('/').expect("completed/total");
    (done.parse().unwrap(), all.parse().unwrap())
}

#[test]
fn httperf_and_stampede_send_the_same_sessions_of_one_log() {
    const TEST: &str = "httperf_and_stampede_send_the_same_sessions_of_one_log";
    if !httperf_here() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "{TEST}: CI=true requires httperf"
        );
        eprintln!("SKIPPED {TEST}: no httperf on this machine (apt-get install httperf)");
        return;
    }
    let Some(nginx) = Nginx::start_with(TEST, "access_log $DIR/logs/requests.log requests;") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("sessions.log");
    std::fs::write(&file, LOG).unwrap();
    let file = file.to_str().unwrap();

    let out = Command::new("httperf")
        .args([
            "--server",
            "127.0.0.1",
            "--port",
            &nginx.addr.port().to_string(),
            &format!("--wsesslog={SESSIONS},0.05,{file}"),
            "--rate",
            "10",
            "--timeout",
            "5",
        ])
        .output()
        .expect("httperf runs");
    let said = text(&out.stdout);
    assert!(out.status.success(), "httperf: {said}{}", text(&out.stderr));
    let theirs = logged(&nginx, 0);
    let (their_done, their_all) = httperf_sessions(&said);

    let url = nginx.url();
    let wsesslog = format!("{SESSIONS},0.05,{file}");
    let ran = run_ok(&[
        &url,
        "--wsesslog",
        &wsesslog,
        "--steps",
        "10",
        "--threads",
        "2",
    ]);
    let ours = logged(&nginx, theirs.len());
    let step = ran.step(0);
    let s = &step["sessions"];

    eprintln!(
        "httperf: {their_done}/{their_all} sessions, {} requests on {} connections; stampede: {}/{} sessions ({} abandoned), {} requests on {} connections, session p50 {} ms p99 {} ms",
        theirs.len(),
        sessions(&theirs).len(),
        s["completed"],
        s["started"],
        s["abandoned"],
        ours.len(),
        sessions(&ours).len(),
        s["length_ms"]["p50"],
        s["length_ms"]["p99"],
    );
    // The same number of sessions, all complete.
    assert_eq!((their_done, their_all), (SESSIONS, SESSIONS), "{said}");
    assert_eq!(s["started"], SESSIONS, "{step}");
    assert_eq!(s["completed"], SESSIONS, "{step}");
    assert_eq!(s["abandoned"], 0, "{step}");
    // The same requests, each as many times, and the same sessions: each a connection of its own
    // with the log's requests in the log's order.
    assert_eq!(per_request(&ours), per_request(&theirs));
    assert_eq!(sessions(&ours), sessions(&theirs));
    assert_eq!(sessions(&ours).len() as u64, SESSIONS);
    // What stampede counted is what nginx logged.
    assert_eq!(step["requests"], ours.len() as u64, "{step}");
    assert_eq!(step["ok"], ours.len() as u64, "{step}");
    // Each session's length counts its think times from its intended start: the first session
    // thinks 50 ms, the second 40 ms, the third not at all.
    let p99 = s["length_ms"]["p99"].as_f64().unwrap();
    assert!(p99 >= 50.0, "{s}");
    // steps.tsv has the session columns.
    let tsv = std::fs::read_to_string(ran.dir.path().join("steps.tsv")).unwrap();
    let head: Vec<&str> = tsv.lines().next().unwrap().split('\t').collect();
    let row: Vec<&str> = tsv.lines().nth(1).unwrap().split('\t').collect();
    let at = |name: &str| row[head.iter().position(|h| *h == name).unwrap()];
    assert_eq!(at("sessions_completed"), SESSIONS.to_string());
    assert_eq!(at("sessions_abandoned"), "0");
}

#[test]
fn over_http2_each_session_is_one_connection_of_the_log_s_requests() {
    const TEST: &str = "over_http2_each_session_is_one_connection_of_the_log_s_requests";
    let Some(nginx) = Nginx::start_http2(
        TEST,
        Http2::Cleartext,
        "access_log $DIR/logs/requests.log requests;",
    ) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("sessions.log");
    std::fs::write(&file, LOG).unwrap();
    let url = format!("h2c://{}/", nginx.addr);
    let wsesslog = format!("{SESSIONS},0.05,{}", file.display());
    let ran = run_ok(&[
        &url,
        "--wsesslog",
        &wsesslog,
        "--steps",
        "10",
        "--threads",
        "2",
    ]);
    let ours = logged(&nginx, 0);
    let s = &ran.step(0)["sessions"];
    assert_eq!(s["completed"], SESSIONS, "{s}");
    // A burst's requests went at once: within a session the order of a burst's others may vary,
    // the set may not.
    let mut got: Vec<Vec<String>> = sessions(&ours)
        .into_iter()
        .map(|mut s| {
            s.sort();
            s
        })
        .collect();
    got.sort();
    let session = |uris: &[&str]| {
        let mut s: Vec<String> = uris.iter().map(|u| u.to_string()).collect();
        s.sort();
        s
    };
    let one = session(&[
        "GET /s1/index.html 200",
        "GET /s1/style.css 200",
        "GET /s1/logo.png 200",
        "POST /s1/login 200",
    ]);
    let two = session(&[
        "GET /s2/search?q=shoes 200",
        "GET /s2/item?id=7 200",
        "GET /s2/img/7.png 200",
        "GET /s2/img/7-large.png 200",
    ]);
    let three = session(&["GET /s3/home 200", "GET /s3/news 200"]);
    let mut want = vec![one.clone(), one, two.clone(), two, three.clone(), three];
    want.sort();
    assert_eq!(got, want);
}

#[test]
fn a_bad_session_log_or_setting_is_one_line_and_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.log");
    std::fs::write(&bad, "/a\n  /b contents='never closed\n").unwrap();
    let good = dir.path().join("good.log");
    std::fs::write(&good, LOG).unwrap();
    let (bad, good) = (bad.display().to_string(), good.display().to_string());
    let url = format!("http://127.0.0.1:{}/", tests::closed_port());
    let cases: [(String, &[&str], &str); 4] = [
        (
            format!("1,0,{bad}"),
            &[],
            "line 2: the contents' quote is never closed",
        ),
        ("3,0.5".to_string(), &[], "is not N,X,FILE"),
        (
            format!("1,0,{good}"),
            &["--model", "requests"],
            "runs in the connections model",
        ),
        (
            format!("0,0,{good}"),
            &["--num-call", "3"],
            "--wsesslog and --num-call",
        ),
    ];
    for (wsesslog, extra, words) in &cases {
        let mut all = vec!["run", url.as_str(), "--steps", "1", "--wsesslog", wsesslog];
        all.extend_from_slice(extra);
        let o = tests::stampede(&all);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{all:?}: {err}");
        assert!(err.contains(words), "{all:?}: expected '{words}' in: {err}");
        assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
    }
}

#[test]
fn a_fleet_of_three_agents_sends_the_log_s_sessions_in_turn_each_as_often() {
    const TEST: &str = "a_fleet_of_three_agents_sends_the_log_s_sessions_in_turn_each_as_often";
    let Some(nginx) = Nginx::start_with(TEST, "access_log $DIR/logs/requests.log requests;") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("sessions.log");
    std::fs::write(&file, LOG).unwrap();
    let agents: Vec<tests::AgentProc> = (0..3).map(|_| tests::AgentProc::start(&[], &[])).collect();
    let list: Vec<String> = agents.iter().map(|a| a.addr.to_string()).collect();
    // 12 sessions at 40 a second, dealt among three agents: the log's three, four times each.
    let wsesslog = format!("12,0.01,{}", file.display());
    let ran = run_ok(&[
        &nginx.url(),
        "--agents",
        &list.join(","),
        "--wsesslog",
        &wsesslog,
        "--steps",
        "40",
    ]);
    let step = ran.step(0);
    assert_eq!(step["sessions"]["completed"], 12, "{step}");
    let per_agent: Vec<u64> = step["agents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["requests"].as_u64().unwrap())
        .collect();
    assert!(
        per_agent.iter().all(|n| *n > 0),
        "each agent ran some: {per_agent:?}"
    );
    let ours = logged(&nginx, 0);
    let firsts: BTreeMap<String, u64> =
        sessions(&ours)
            .into_iter()
            .fold(BTreeMap::new(), |mut m, s| {
                *m.entry(s[0].clone()).or_insert(0) += 1;
                m
            });
    assert_eq!(
        firsts.into_iter().collect::<Vec<_>>(),
        [
            ("GET /s1/index.html 200".to_string(), 4),
            ("GET /s2/search?q=shoes 200".to_string(), 4),
            ("GET /s3/home 200".to_string(), 4),
        ]
    );
    assert_eq!(step["requests"], ours.len() as u64);
}
