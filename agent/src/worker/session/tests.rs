//! Tests of the session runner against a local server that logs every request it takes: which
//! connection, which URI, when.
use std::net::SocketAddr;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::*;
use proto::pb;
use shared::metrics::Snapshot;
use shared::plan::{Arrival, LoadModel, StepLimit, StepShare, Workload};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::super::{Caps, Job, Report};
use crate::client::Endpoint;
use crate::engine::Engine;

/// What the server took: (connection number, URI, when), in order of arrival.
type Log = Arc<Mutex<Vec<(usize, String, Instant)>>>;

/// An HTTP/1.1 server answering 200 at once but `/slow` (200 ms); `/close` is answered with
/// `Connection: close` and its connection closed, `/reset` gets no reply (the connection is
/// dropped).
async fn server() -> (SocketAddr, Log) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let log: Log = Arc::default();
    let all = log.clone();
    tokio::spawn(async move {
        let mut n = 0;
        while let Ok((mut conn, _)) = listener.accept().await {
            n += 1;
            let (log, id) = (all.clone(), n);
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                loop {
                    let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
                        match conn.read(&mut chunk).await {
                            Ok(n @ 1..) => buf.extend_from_slice(&chunk[..n]),
                            _ => return,
                        }
                        continue;
                    };
                    let head = String::from_utf8_lossy(&buf[..end]).to_string();
                    buf.drain(..end + 4);
                    let uri = head.split(' ').nth(1).unwrap_or_default().to_string();
                    log.lock().unwrap().push((id, uri.clone(), Instant::now()));
                    if uri == "/slow" {
                        tokio::time::sleep(Duration::from_millis(200)).await;
                    }
                    let close = uri == "/close" || head.contains("connection: close");
                    let reply: &[u8] = match uri.as_str() {
                        "/reset" => return,
                        _ if close => {
                            b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
                        }
                        _ => b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n",
                    };
                    if conn.write_all(reply).await.is_err() || close {
                        return;
                    }
                }
            });
        }
    });
    (addr, log)
}

/// An HTTP/2 server (h2c) answering each stream 200 after `delay`, logging its path and counting
/// the most streams it held at once.
async fn h2_server(delay: Duration) -> (SocketAddr, Log, Arc<AtomicU64>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (log, peak): (Log, Arc<AtomicU64>) = Default::default();
    let (all, top) = (log.clone(), peak.clone());
    tokio::spawn(async move {
        let mut n = 0;
        while let Ok((tcp, _)) = listener.accept().await {
            n += 1;
            let (log, peak, id) = (all.clone(), top.clone(), n);
            tokio::spawn(async move {
                let Ok(mut conn) = h2::server::handshake(tcp).await else {
                    return;
                };
                let open = Arc::new(AtomicU64::new(0));
                while let Some(Ok((req, mut respond))) = conn.accept().await {
                    let path = req.uri().path().to_string();
                    log.lock().unwrap().push((id, path, Instant::now()));
                    let (open, peak) = (open.clone(), peak.clone());
                    tokio::spawn(async move {
                        peak.fetch_max(open.fetch_add(1, Ordering::AcqRel) + 1, Ordering::AcqRel);
                        tokio::time::sleep(delay).await;
                        open.fetch_sub(1, Ordering::AcqRel);
                        let reply = http::Response::builder().status(200).body(()).unwrap();
                        let _ = respond.send_response(reply, true);
                    });
                }
            });
        }
    });
    (addr, log, peak)
}

/// The target with the sessions of `log` (httperf's format), think times defaulting to 0.
async fn target(addr: SocketAddr, log: &str) -> Endpoint {
    target_over(addr, log, false).await
}

/// As [`target`], over HTTP/2 (h2c) when `h2`, one stream a connection (`--streams 1`).
async fn target_over(addr: SocketAddr, log: &str, h2: bool) -> Endpoint {
    let parsed = shared::plan::parse_wsesslog(log).unwrap();
    let (requests, sessions) = Sessions::from_log(&parsed, Duration::ZERO).unwrap();
    let w = Workload::try_from(&pb::Configure {
        requests: requests
            .iter()
            .map(|r| pb::RequestTemplate {
                method: r.method.clone(),
                url: format!("http://{addr}{}", r.uri),
                headers: Vec::new(),
                body: r.body.clone(),
            })
            .collect(),
        timeout_ms: 2000,
        connect_timeout_ms: 1000,
        http: if h2 {
            pb::HttpVersion::Http2
        } else {
            pb::HttpVersion::Http1
        } as i32,
        ..Default::default()
    })
    .unwrap()
    .with_sessions(sessions)
    .unwrap();
    let target = Endpoint::prepare(&w).await.unwrap();
    crate::client::preflight(target, &w).await.unwrap()
}

/// Runs `arrivals` sessions at `rate` a second on two worker threads and adds up every report.
async fn run_sessions(target: Endpoint, rate: f64, arrivals: u64) -> Snapshot {
    let share = StepShare::try_new(
        0,
        LoadModel::Connections,
        rate,
        Slice::among(&[1])[0].clone(),
        0,
        1,
        1000,
        StepLimit::Connections(std::num::NonZeroU64::new(arrivals).unwrap()),
        Arrival::Uniform,
        7,
    )
    .unwrap();
    let workers = 2;
    let engine = Engine::start(workers).unwrap();
    let (tx, mut rx) = mpsc::channel(64);
    let share = Arc::new(share);
    let start = Instant::now() + Duration::from_millis(50);
    let jobs = (0..workers)
        .map(|w| Job {
            share: share.clone(),
            target: target.clone(),
            worker: w as u64,
            workers: workers as u64,
            start,
            cancel: CancellationToken::new(),
            out: tx.clone(),
            caps: Caps::default(),
        })
        .collect();
    engine.dispatch(jobs).await.unwrap();
    drop(tx);
    let mut total = Snapshot::default();
    let mut done = 0;
    while done < workers {
        let report = tokio::time::timeout(Duration::from_secs(20), rx.recv())
            .await
            .expect("the step ends")
            .expect("every worker reports its end");
        match report {
            Report::Interval { snapshot, .. } => total.add(&snapshot),
            Report::Done { snapshot, .. } => {
                total.add(&snapshot);
                done += 1;
            }
        }
    }
    total
}

/// The URIs each connection took, in order, the connections in order of their first request.
fn by_connection(log: &Log) -> Vec<Vec<String>> {
    let mut out: Vec<(usize, Vec<String>)> = Vec::new();
    for (id, uri, _) in log.lock().unwrap().iter() {
        match out.iter_mut().find(|(c, _)| c == id) {
            Some((_, uris)) => uris.push(uri.clone()),
            None => out.push((*id, vec![uri.clone()])),
        }
    }
    out.into_iter().map(|(_, uris)| uris).collect()
}

#[tokio::test]
async fn each_arrival_runs_the_next_session_of_the_log_on_one_connection_with_its_think_times() {
    let (addr, log) = server().await;
    let target = target(
        addr,
        "/a think=0.08\n  /b\n  /c\n/d\n\n/e think=0.05\n/f method=POST contents='x=1'\n",
    )
    .await;
    // 4 arrivals, 10 ms apart: sessions 1, 2, 1, 2 of the log.
    let total = run_sessions(target, 100.0, 4).await;
    let c = &total.counters;
    assert_eq!(
        (
            c.sessions_started,
            c.sessions_completed,
            c.sessions_abandoned
        ),
        (4, 4, 0),
        "{c:?}"
    );
    assert_eq!((c.requests, c.ok, c.unsent), (12, 12, 0), "{c:?}");
    assert_eq!(c.connections, 4, "one connection a session");
    let mut sessions = by_connection(&log);
    sessions.sort();
    assert_eq!(
        sessions,
        [
            vec!["/a", "/b", "/c", "/d"],
            vec!["/a", "/b", "/c", "/d"],
            vec!["/e", "/f"],
            vec!["/e", "/f"],
        ]
    );
    // The think time after the first burst: /d came 80 ms or more after /c on its connection.
    let log = log.lock().unwrap();
    for id in log
        .iter()
        .filter(|(_, u, _)| u == "/d")
        .map(|(id, _, _)| *id)
    {
        let at = |uri: &str| {
            log.iter()
                .find(|(i, u, _)| *i == id && u == uri)
                .map(|(_, _, t)| *t)
                .unwrap()
        };
        assert!(at("/d") - at("/c") >= Duration::from_millis(80));
    }
    // Each session's length, from its intended start: the longer sessions thought 80 ms.
    let h = &total.hist.session;
    assert_eq!(h.len(), 4);
    assert!(h.max() >= 80_000 && h.min() >= 50_000, "{h:?}");
}

#[tokio::test]
async fn a_connection_the_server_closes_mid_session_is_reopened_for_the_rest() {
    let (addr, log) = server().await;
    let target = target(addr, "/a\n/close\n/b\n").await;
    let total = run_sessions(target, 50.0, 2).await;
    let c = &total.counters;
    assert_eq!((c.sessions_completed, c.requests, c.ok), (2, 6, 6), "{c:?}");
    assert_eq!(c.connections, 4, "each session reopened once");
    let mut sessions = by_connection(&log);
    sessions.sort();
    assert_eq!(
        sessions,
        [
            vec!["/a", "/close"],
            vec!["/a", "/close"],
            vec!["/b"],
            vec!["/b"]
        ]
    );
}

#[tokio::test]
async fn a_failed_request_abandons_the_session_and_its_later_requests_count_as_abandoned() {
    let (addr, log) = server().await;
    // The second session fails at its second request; its last two are never sent.
    let target = target(addr, "/a\n\n/b\n/reset\n  /c\n/d\n").await;
    let total = run_sessions(target, 50.0, 2).await;
    let c = &total.counters;
    assert_eq!(
        (
            c.sessions_started,
            c.sessions_completed,
            c.sessions_abandoned
        ),
        (2, 1, 1),
        "{c:?}"
    );
    // Sent: /a, /b, /reset (failed); abandoned: /c and /d, due and unsent.
    assert_eq!(
        (c.requests, c.ok, c.unsent, c.abandoned),
        (3, 2, 2, 2),
        "{c:?}"
    );
    assert_eq!(c.failed(), 3, "the failed request and the two abandoned");
    let uris: Vec<String> = log.lock().unwrap().iter().map(|e| e.1.clone()).collect();
    assert!(!uris.iter().any(|u| u == "/c" || u == "/d"), "{uris:?}");
    assert_eq!(
        total.hist.session.len(),
        1,
        "only a completed session's length"
    );
}

#[tokio::test]
async fn over_http2_a_burst_s_others_go_at_once_as_streams_of_the_session_s_connection() {
    let (addr, log, peak) = h2_server(Duration::from_millis(100)).await;
    let target = target_over(addr, "/page\n  /a\n  /b\n  /c\n/next\n", true).await;
    let total = run_sessions(target, 10.0, 1).await;
    let c = &total.counters;
    assert_eq!((c.sessions_completed, c.requests, c.ok), (1, 5, 5), "{c:?}");
    assert_eq!(c.connections, 1, "{c:?}");
    // /a, /b and /c at once after /page's reply, though --streams is 1.
    assert_eq!(peak.load(Ordering::Acquire), 3);
    let uris: Vec<String> = log.lock().unwrap().iter().map(|e| e.1.clone()).collect();
    assert_eq!(uris.first().map(String::as_str), Some("/page"));
    assert_eq!(uris.last().map(String::as_str), Some("/next"));
    // Three rounds of 100 ms: /page, the burst's others together, /next.
    let h = &total.hist.session;
    assert!((300_000..450_000).contains(&h.max()), "{}", h.max());
}

#[tokio::test]
async fn a_slow_reply_lengthens_its_session_and_a_later_burst_counts_from_that_reply() {
    let (addr, _) = server().await;
    let target = target(addr, "/slow think=0.05\n/b\n").await;
    let total = run_sessions(target, 10.0, 1).await;
    let (latency, session) = (&total.hist.latency, &total.hist.session);
    assert_eq!(latency.len(), 2);
    // /slow took 200 ms from the arrival; /b, due 50 ms after that reply, was quick: the stall is
    // charged to the request that stalled, and to the whole session, not again to /b.
    assert!(latency.max() >= 200_000, "{}", latency.max());
    assert!(latency.min() < 50_000, "{}", latency.min());
    assert!(session.min() >= 250_000, "{}", session.min());
}
