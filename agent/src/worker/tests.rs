//! Tests of the worker (`worker.rs`) over real sockets: the load models' pace, counts, drains, caps
//! and abandoned calls.
use std::net::SocketAddr;
use std::sync::atomic::AtomicU64;

use proto::pb;
use shared::plan::{Arrival, StepLimit, Workload};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::*;
use crate::engine::Engine;

/// A local server that answers each request after `delay` (and closes when asked to), counting the
/// requests and the most connections it held open at once.
#[derive(Default)]
struct Seen {
    requests: AtomicU64,
    open: AtomicU64,
    peak: AtomicU64,
}

async fn server(delay: Duration) -> (SocketAddr, Arc<Seen>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = Arc::new(Seen::default());
    let all = seen.clone();
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            let seen = all.clone();
            let now = seen.open.fetch_add(1, Ordering::AcqRel) + 1;
            seen.peak.fetch_max(now, Ordering::AcqRel);
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                while let Ok(n @ 1..) = conn.read(&mut buf).await {
                    // GETs without bodies, one at a time: a request ends at its blank line.
                    let head = &buf[..n];
                    let requests = head.windows(4).filter(|w| w == b"\r\n\r\n").count();
                    seen.requests.fetch_add(requests as u64, Ordering::AcqRel);
                    tokio::time::sleep(delay).await;
                    let reply = b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n".repeat(requests);
                    let close = head.windows(17).any(|w| w == b"connection: close");
                    if conn.write_all(&reply).await.is_err() || close {
                        break;
                    }
                }
                // Counted down as the server closes, before the client can see it closed.
                drop(conn);
                seen.open.fetch_sub(1, Ordering::AcqRel);
            });
        }
    });
    (addr, seen)
}

async fn target(addr: SocketAddr) -> Endpoint {
    target_over(addr, 1).await
}

/// The target over HTTP/2 (h2c) with `streams` per connection when `streams` > 1.
async fn target_over(addr: SocketAddr, streams: u32) -> Endpoint {
    target_timing_out(addr, streams, 5000).await
}

/// As `target_over`, with `--timeout` of `timeout_ms`.
async fn target_timing_out(addr: SocketAddr, streams: u32, timeout_ms: u64) -> Endpoint {
    let h2 = streams > 1;
    let configure = pb::Configure {
        requests: vec![pb::RequestTemplate {
            method: "GET".into(),
            url: format!("http://{addr}/"),
            headers: Vec::new(),
            body: Vec::new(),
        }],
        url_order: pb::UrlOrder::RoundRobin as i32,
        timeout_ms,
        connect_timeout_ms: 1000,
        http: if h2 {
            pb::HttpVersion::Http2
        } else {
            pb::HttpVersion::Http1
        } as i32,
        streams,
        ..Default::default()
    };
    // Prepared as a configure prepares it, the HTTP/2 preflight included.
    let w = Workload::try_from(&configure).unwrap();
    let target = Endpoint::prepare(&w).await.unwrap();
    crate::client::preflight(target, &w).await.unwrap()
}

/// A whole step (this agent's alone) of `length`.
fn share(model: LoadModel, rate: f64, connections: u32, length: Duration) -> StepShare {
    StepShare::try_new(
        0,
        model,
        rate,
        Slice::among(&[1])[0].clone(),
        connections,
        1,
        1000,
        StepLimit::Duration(length),
        Arrival::Uniform,
        7,
    )
    .unwrap()
}

/// Runs one step on `workers` worker threads, as a session launches it, and adds up every report.
async fn run_step(addr: SocketAddr, share: StepShare, caps: Caps, workers: usize) -> Snapshot {
    run_step_on(target(addr).await, share, caps, workers).await
}

async fn run_step_on(target: Endpoint, share: StepShare, caps: Caps, workers: usize) -> Snapshot {
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
            caps: caps.clone(),
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

#[tokio::test]
async fn closed_loops_no_longer_outrun_the_agents_max_rate() {
    let (addr, seen) = server(Duration::ZERO).await;
    // 3 connections on 2 workers (2 and 1): their parts of 50 req/s add up to 50.
    let step = share(LoadModel::Concurrency, 0.0, 3, Duration::from_secs(2));
    let sent = run_step(addr, step, Caps::new(Some(50.0), None), 2).await;
    let requests = sent.counters.requests;
    // 2 s at 50 req/s, plus each worker's first slot at the start; unpaced, thousands.
    assert!(
        (50..=105).contains(&requests),
        "{requests} requests in 2 s under --max-rate 50"
    );
    assert_eq!(seen.requests.load(Ordering::Acquire), requests);
    assert_eq!(sent.counters.ok, requests, "paced, every request is served");
}

#[tokio::test]
async fn the_drain_counts_the_replies_after_the_schedule_s_end_and_only_those() {
    // Instant replies: none comes after the end (the last arrival's reply came before it,
    // though the loop had returned at that arrival).
    let (addr, _) = server(Duration::ZERO).await;
    let step = share(LoadModel::Requests, 100.0, 10, Duration::from_secs(1));
    let fast = run_step(addr, step, Caps::default(), 2).await;
    assert_eq!(fast.counters.ok, 100, "{:?}", fast.counters);
    assert_eq!(fast.counters.drained, 0, "{:?}", fast.counters);
    // Replies 300 ms late: those sent in the step's last 300 ms come in the drain.
    let (addr, _) = server(Duration::from_millis(300)).await;
    let step = share(LoadModel::Requests, 100.0, 100, Duration::from_secs(1));
    let slow = run_step(addr, step, Caps::default(), 2).await;
    assert_eq!(slow.counters.ok, 100, "{:?}", slow.counters);
    assert!(
        (20..=45).contains(&slow.counters.drained),
        "{:?}",
        slow.counters
    );
}

#[tokio::test]
async fn a_closed_loop_against_a_refusing_target_is_paced_and_counted_by_turns() {
    // Each refused connect is a turn's request, due and unsent: under --max-rate 50 for 2 s,
    // about 100 of them, where the loop spun thousands past its pace (and past `-n`).
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = closed.local_addr().unwrap();
    drop(closed);
    let step = share(LoadModel::Concurrency, 0.0, 3, Duration::from_secs(2));
    let sent = run_step(addr, step, Caps::new(Some(50.0), None), 2).await;
    let c = &sent.counters;
    assert_eq!(c.requests, 0);
    assert!((50..=105).contains(&c.unsent), "{c:?}");
    assert_eq!(c.error(ErrorClass::ConnRefused), c.unsent);
}

#[tokio::test]
async fn the_connections_model_no_longer_holds_more_sockets_than_max_connections() {
    // Each connection is held 300 ms: 100 arrivals/s would hold about 30 open at once.
    let (addr, seen) = server(Duration::from_millis(300)).await;
    let step = share(
        LoadModel::Connections,
        100.0,
        0,
        Duration::from_millis(1500),
    );
    let sent = run_step(addr, step, Caps::new(None, Some(5)), 2).await;
    let peak = seen.peak.load(Ordering::Acquire);
    assert!((1..=5).contains(&peak), "{peak} connections open at once");
    let c = &sent.counters;
    let refused = c.error(ErrorClass::FdUnavailable);
    assert!(refused > 50, "{c:?}");
    // The generator's own: not due, so not the server's failure; and said in words.
    assert_eq!(c.generator_errors(), refused);
    assert_eq!(c.due(), c.attempts() - refused);
    let words = sent.messages.get(ErrorClass::FdUnavailable).unwrap_or("");
    assert!(words.contains("--max-connections 5"), "{words}");
    assert!(
        c.ok > 0 && c.ok == seen.requests.load(Ordering::Acquire),
        "{c:?}"
    );
}

#[tokio::test]
async fn the_later_calls_of_a_refused_connection_are_abandoned_with_it_the_target_s_doing() {
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let step = StepShare::try_new(
        0,
        LoadModel::Connections,
        50.0,
        Slice::among(&[1])[0].clone(),
        0,
        5,
        1000,
        StepLimit::Duration(Duration::from_millis(600)),
        Arrival::Uniform,
        7,
    )
    .unwrap();
    let sent = run_step(closed, step, Caps::new(None, None), 1).await;
    let c = &sent.counters;
    let refused = c.error(ErrorClass::ConnRefused);
    assert!(refused >= 20, "{c:?}");
    // Each arrival: its first call refused (unsent, in its class), the other 4 gone with it.
    assert_eq!((c.unsent, c.abandoned), (5 * refused, 4 * refused), "{c:?}");
    assert_eq!(c.generator_errors(), 0);
    assert_eq!(
        c.known_failed(),
        c.due(),
        "every due request is known failed: {c:?}"
    );
}

/// What a test's HTTP/2 server saw: requests, connections, streams open at once at most.
#[derive(Default)]
struct SeenH2 {
    requests: AtomicU64,
    connections: AtomicU64,
    open: AtomicU64,
    peak: AtomicU64,
    refused: AtomicU64,
}

/// An h2c server (the h2 crate's) announcing `max_streams`, answering each request after
/// `delay`; with `goaway_after`, it ends each connection after that many streams, gracefully
/// (GOAWAY NO_ERROR, the streams in flight answered) or, with `calm`, abruptly (GOAWAY
/// ENHANCE_YOUR_CALM, the connection closed); with `refuse_every` N > 0, it refuses every Nth
/// stream (REFUSED_STREAM) instead of answering.
#[derive(Clone, Copy)]
struct H2Server {
    max_streams: u32,
    delay: Duration,
    goaway_after: Option<u64>,
    calm: bool,
    refuse_every: u64,
    /// Ends each connection gracefully (GOAWAY) this long after it began.
    goaway_at: Option<Duration>,
    /// Refuses a stream after its `delay`, as a server that queued it first does, not at once.
    slow_refusals: bool,
}

impl H2Server {
    fn new(max_streams: u32, delay: Duration) -> H2Server {
        H2Server {
            max_streams,
            delay,
            goaway_after: None,
            calm: false,
            refuse_every: 0,
            goaway_at: None,
            slow_refusals: false,
        }
    }
}

async fn h2_server(
    max_streams: u32,
    delay: Duration,
    goaway_after: Option<u64>,
) -> (SocketAddr, Arc<SeenH2>) {
    H2Server {
        goaway_after,
        ..H2Server::new(max_streams, delay)
    }
    .start()
    .await
}

impl H2Server {
    async fn start(self) -> (SocketAddr, Arc<SeenH2>) {
        let H2Server {
            max_streams,
            delay,
            goaway_after,
            calm,
            refuse_every,
            goaway_at,
            slow_refusals,
        } = self;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(SeenH2::default());
        let all = seen.clone();
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let seen = all.clone();
                tokio::spawn(async move {
                    let mut b = h2::server::Builder::new();
                    b.max_concurrent_streams(max_streams);
                    let Ok(mut conn) = b.handshake::<_, bytes::Bytes>(tcp).await else {
                        return;
                    };
                    seen.connections.fetch_add(1, Ordering::AcqRel);
                    let mut served = 0;
                    let mut goaway = goaway_at.map(|d| Box::pin(tokio::time::sleep(d)));
                    loop {
                        let accepted = match &mut goaway {
                            Some(at) => tokio::select! {
                                a = conn.accept() => a,
                                _ = at.as_mut() => {
                                    conn.graceful_shutdown();
                                    goaway = None;
                                    continue;
                                }
                            },
                            None => conn.accept().await,
                        };
                        let Some(Ok((_, mut respond))) = accepted else {
                            break;
                        };
                        served += 1;
                        if refuse_every > 0 && served % refuse_every == 0 {
                            seen.refused.fetch_add(1, Ordering::AcqRel);
                            if slow_refusals {
                                tokio::spawn(async move {
                                    tokio::time::sleep(delay).await;
                                    respond.send_reset(h2::Reason::REFUSED_STREAM);
                                });
                            } else {
                                respond.send_reset(h2::Reason::REFUSED_STREAM);
                            }
                            continue;
                        }
                        let seen = seen.clone();
                        tokio::spawn(async move {
                            let now = seen.open.fetch_add(1, Ordering::AcqRel) + 1;
                            seen.peak.fetch_max(now, Ordering::AcqRel);
                            seen.requests.fetch_add(1, Ordering::AcqRel);
                            tokio::time::sleep(delay).await;
                            // Counted down before the reply can free the client's slot.
                            seen.open.fetch_sub(1, Ordering::AcqRel);
                            let reply = http::Response::builder().status(200).body(()).unwrap();
                            if let Ok(mut body) = respond.send_response(reply, false) {
                                let _ = body.send_data(bytes::Bytes::from_static(b"ok"), true);
                            }
                        });
                        if goaway_after == Some(served) {
                            if calm {
                                conn.abrupt_shutdown(h2::Reason::ENHANCE_YOUR_CALM);
                            } else {
                                conn.graceful_shutdown();
                            }
                        }
                    }
                });
            }
        });
        (addr, seen)
    }
}

#[tokio::test]
async fn http2_concurrency_runs_connections_times_streams_closed_loops() {
    let (addr, seen) = h2_server(100, Duration::from_millis(20), None).await;
    // 3 connections x 8 streams, each request held 20 ms: 24 at once, about 1,200/s.
    let step = share(LoadModel::Concurrency, 0.0, 3, Duration::from_millis(1500));
    let sent = run_step_on(target_over(addr, 8).await, step, Caps::default(), 2).await;
    let c = &sent.counters;
    // And the one that asked, before the step, whether the target speaks HTTP/2.
    assert_eq!(seen.connections.load(Ordering::Acquire), 3 + 1, "{c:?}");
    assert_eq!(seen.peak.load(Ordering::Acquire), 24, "{c:?}");
    assert_eq!(c.connections, 3);
    assert_eq!(c.requests, seen.requests.load(Ordering::Acquire));
    assert_eq!((c.ok, c.failed()), (c.requests, 0), "{c:?}");
    assert!(c.requests > 600, "{c:?}");
    assert_eq!(c.waited, 0, "under the server's limit nothing waits");
    assert_eq!(
        (c.peer_max_streams, c.refused_streams, c.goaways),
        (100, 0, 0)
    );
}

#[tokio::test]
async fn a_refused_stream_is_counted_and_sent_again_not_lost() {
    let (addr, seen) = H2Server {
        refuse_every: 10,
        ..H2Server::new(100, Duration::from_millis(2))
    }
    .start()
    .await;
    let step = share(LoadModel::Concurrency, 0.0, 2, Duration::from_millis(1000));
    let sent = run_step_on(target_over(addr, 4).await, step, Caps::default(), 1).await;
    let c = &sent.counters;
    let refused = seen.refused.load(Ordering::Acquire);
    assert!(refused > 10, "{c:?}");
    assert_eq!(c.refused_streams, refused);
    // Each counted once, as the resend that the server answered.
    assert_eq!(c.requests, seen.requests.load(Ordering::Acquire), "{c:?}");
    assert_eq!((c.ok, c.failed()), (c.requests, 0), "{c:?}");
}

#[tokio::test]
async fn a_request_refused_on_every_attempt_is_due_once_though_its_interval_was_reported() {
    // Every stream refused (REFUSED_STREAM) 40 ms after it opened, 60 req/s for 1 s: a request
    // is refused, sent once more and refused again 80 ms after it left, so the last ones'
    // second refusal comes after the interval that counted them as sent was swapped out.
    // Before, each of those was taken back from an interval with nothing left to take from,
    // owed to a later send that never came, and counted unsent too: 65 due of 60.
    let (addr, seen) = H2Server {
        refuse_every: 1,
        slow_refusals: true,
        ..H2Server::new(100, Duration::from_millis(40))
    }
    .start()
    .await;
    let step = share(LoadModel::Requests, 60.0, 1, Duration::from_secs(1));
    let sent = run_step_on(target_over(addr, 4).await, step, Caps::default(), 1).await;
    let c = &sent.counters;
    assert_eq!((c.due(), c.failed(), c.ok), (60, 60, 0), "{c:?}");
    // Each reached the server, which refused it: sent, and failed, once.
    assert_eq!((c.requests, c.unsent), (60, 0), "{c:?}");
    assert_eq!(c.error(ErrorClass::ConnReset), 60, "{c:?}");
    assert_eq!(c.refused_streams, seen.refused.load(Ordering::Acquire));
    assert_eq!(c.refused_streams, 120, "{c:?}");
    let words = sent.messages.get(ErrorClass::ConnReset).unwrap_or_default();
    assert!(words.contains("REFUSED_STREAM"), "{words}");
}

#[tokio::test]
async fn http2_never_opens_more_streams_than_the_server_allows_and_says_who_waited() {
    // 16 streams asked per connection, the server allows 4: 12 wait for a slot each time.
    let (addr, seen) = h2_server(4, Duration::from_millis(20), None).await;
    let step = share(LoadModel::Concurrency, 0.0, 1, Duration::from_millis(1000));
    let sent = run_step_on(target_over(addr, 16).await, step, Caps::default(), 1).await;
    let c = &sent.counters;
    assert_eq!(seen.peak.load(Ordering::Acquire), 4, "{c:?}");
    assert_eq!(c.peer_max_streams, 4);
    assert_eq!(
        (c.ok, c.failed()),
        (c.requests, 0),
        "no stream refused: {c:?}"
    );
    assert_eq!(c.requests, seen.requests.load(Ordering::Acquire));
    assert!(c.waited > c.requests / 2, "{c:?}");
    // A stream waits about 3 replies (60 ms) for its slot; latency includes it.
    let wait_p50 = sent.hist.wait.value_at_quantile(0.5);
    assert!((20_000..200_000).contains(&wait_p50), "{wait_p50} µs");
}

#[tokio::test]
async fn a_request_timed_out_waiting_for_a_stream_slot_is_unsent_not_a_server_timeout() {
    // One stream at a time, none answered within the 200 ms timeout; 4 closed loops ask at
    // once, so 1 opens and the others wait for the slot as long as it is held, and their
    // timeouts come with its: they time out in the queue, never sent.
    let (addr, seen) = h2_server(1, Duration::from_secs(2), None).await;
    let step = share(LoadModel::Concurrency, 0.0, 1, Duration::from_millis(1000));
    let target = target_timing_out(addr, 4, 200).await;
    let sent = run_step_on(target, step, Caps::default(), 1).await;
    let c = &sent.counters;
    // About 5 rounds of 4: at most one of each round is sent.
    assert!(c.unsent >= 5, "{c:?}");
    assert!(c.requests <= 8, "{c:?}");
    // What was sent timed out at the server; what was not, in the queue: each once.
    assert_eq!(c.errors_total(), c.requests + c.unsent, "{c:?}");
    assert_eq!(c.given_up, c.requests + c.unsent, "{c:?}");
    assert!(c.requests <= seen.requests.load(Ordering::Acquire), "{c:?}");
    assert!(c.waited >= c.unsent, "each waited for the slot: {c:?}");
}

#[tokio::test]
async fn a_stream_that_waited_for_its_slot_and_then_timed_out_still_records_its_wait() {
    // One stream at a time, each answered after 300 ms, a 400 ms timeout, 2 closed loops on
    // one connection: the slot is never free when a loop asks, so every request but the very
    // first waits for it; the second loop's first opens after 300 ms of waiting and times out
    // 100 ms later, at the server.
    let (addr, _) = h2_server(1, Duration::from_millis(300), None).await;
    let step = share(LoadModel::Concurrency, 0.0, 1, Duration::from_millis(1000));
    let target = target_timing_out(addr, 2, 400).await;
    let sent = run_step_on(target, step, Caps::default(), 1).await;
    let c = &sent.counters;
    assert!(c.given_up >= 1, "one timed out after it opened: {c:?}");
    let asked = c.requests + c.unsent;
    assert!(
        c.waited + 1 >= asked,
        "every wait recorded, however the stream ended: {c:?}"
    );
    assert_eq!(sent.hist.wait.len(), c.waited, "{c:?}");
    // The first timed-out stream's wait (about 300 ms) is among them.
    assert!(
        sent.hist.wait.max() >= 250_000,
        "{} µs",
        sent.hist.wait.max()
    );
}

#[tokio::test]
async fn a_stream_waiting_for_its_slot_when_a_goaway_comes_keeps_its_wait_and_counts_once() {
    // One stream at a time, each answered after 300 ms; each connection ends by GOAWAY 100 ms
    // after it began. 2 loops share a connection: one opens, the other waits for the slot until
    // the GOAWAY sends it to a fresh connection, where it opens at once. Its 100 ms of waiting
    // on the first is the client's queue all the same.
    let (addr, seen) = H2Server {
        goaway_at: Some(Duration::from_millis(100)),
        ..H2Server::new(1, Duration::from_millis(300))
    }
    .start()
    .await;
    let step = share(LoadModel::Concurrency, 0.0, 1, Duration::from_millis(1000));
    let sent = run_step_on(target_over(addr, 2).await, step, Caps::default(), 1).await;
    let c = &sent.counters;
    assert!(c.goaways >= 2, "{c:?}");
    assert!(
        c.waited >= 1,
        "the waits before each GOAWAY are recorded: {c:?}"
    );
    assert!(
        sent.hist.wait.max() >= 60_000,
        "{} µs",
        sent.hist.wait.max()
    );
    // Sent again, each counted once, as the server saw them.
    assert_eq!(c.requests, seen.requests.load(Ordering::Acquire), "{c:?}");
    assert_eq!((c.ok, c.failed()), (c.requests, 0), "{c:?}");
}

#[tokio::test]
async fn a_goaway_loses_no_request_the_rest_go_on_a_new_connection() {
    // Each connection ends after 50 streams (nginx's keepalive_requests, as GOAWAY).
    let (addr, seen) = h2_server(100, Duration::from_millis(2), Some(50)).await;
    let step = share(LoadModel::Concurrency, 0.0, 2, Duration::from_millis(1500));
    let sent = run_step_on(target_over(addr, 10).await, step, Caps::default(), 1).await;
    let c = &sent.counters;
    assert!(seen.connections.load(Ordering::Acquire) > 4, "{c:?}");
    assert_eq!(c.connections + 1, seen.connections.load(Ordering::Acquire));
    // Every connection but the last of each loop ended by the server's GOAWAY.
    assert!(
        c.goaways + 2 >= c.connections && c.goaways <= c.connections,
        "{c:?}"
    );
    assert_eq!(c.requests, seen.requests.load(Ordering::Acquire), "{c:?}");
    assert_eq!((c.ok, c.failed()), (c.requests, 0), "{c:?}");
}

#[tokio::test]
async fn an_abrupt_goaway_fails_the_streams_it_took_in_words_and_resends_the_rest() {
    // After 30 streams the server says ENHANCE_YOUR_CALM and closes, 10 streams in flight.
    let (addr, seen) = H2Server {
        goaway_after: Some(30),
        calm: true,
        ..H2Server::new(100, Duration::from_millis(20))
    }
    .start()
    .await;
    let step = share(LoadModel::Concurrency, 0.0, 1, Duration::from_millis(800));
    let sent = run_step_on(target_over(addr, 10).await, step, Caps::default(), 1).await;
    let c = &sent.counters;
    assert!(c.goaways >= 2, "{c:?}");
    assert!(c.connections >= 2, "{c:?}");
    // What the server took and never answered failed; nothing vanished.
    assert_eq!(c.requests, c.ok + c.failed(), "{c:?}");
    assert!(c.failed() > 0, "{c:?}");
    let words: Vec<&str> = ErrorClass::ALL
        .iter()
        .filter_map(|class| sent.messages.get(*class))
        .collect();
    assert!(
        words.iter().any(|w| w
            .contains("ended the HTTP/2 session (GOAWAY ENHANCE_YOUR_CALM) after ")
            && w.ends_with(" streams, this one unanswered")),
        "{words:?} {c:?}"
    );
    assert!(seen.requests.load(Ordering::Acquire) >= c.ok);
}

#[tokio::test]
async fn http2_requests_model_holds_the_rate_over_connections_times_streams() {
    let (addr, seen) = h2_server(100, Duration::from_millis(30), None).await;
    // 400/s, each held 30 ms: about 12 at once, over at most 2 connections x 10 streams.
    let step = StepShare::try_new(
        0,
        LoadModel::Requests,
        400.0,
        Slice::among(&[1])[0].clone(),
        0,
        1,
        2,
        StepLimit::Duration(Duration::from_millis(1500)),
        Arrival::Uniform,
        7,
    )
    .unwrap();
    let sent = run_step_on(target_over(addr, 10).await, step, Caps::default(), 1).await;
    let c = &sent.counters;
    assert_eq!(c.requests, 600, "{c:?}");
    assert_eq!((c.ok, seen.requests.load(Ordering::Acquire)), (600, 600));
    assert!(c.connections <= 2, "{c:?}");
    assert_eq!(seen.connections.load(Ordering::Acquire), c.connections + 1);
    assert_eq!(sent.hist.wait.len(), 600, "one wait per arrival");
}

#[tokio::test]
async fn http2_connections_model_multiplexes_each_connection_s_calls() {
    let (addr, seen) = h2_server(100, Duration::from_millis(10), None).await;
    // 20 connections/s, 10 calls each on 5 streams: two rounds of 10 ms per connection, so
    // connections never overlap and the server sees 5 streams at once, never 10 or 1.
    let step = StepShare::try_new(
        0,
        LoadModel::Connections,
        20.0,
        Slice::among(&[1])[0].clone(),
        0,
        10,
        1000,
        StepLimit::Duration(Duration::from_millis(1000)),
        Arrival::Uniform,
        7,
    )
    .unwrap();
    let sent = run_step_on(target_over(addr, 5).await, step, Caps::default(), 1).await;
    let c = &sent.counters;
    assert_eq!(c.connections, 20, "{c:?}");
    assert_eq!(seen.connections.load(Ordering::Acquire), 20 + 1);
    // The last connection opens at 950 ms and its second round is due at about 960: on a
    // loaded machine it can start past the step's deadline, and a call not begun by then is
    // cut (not due), a round of 5 at a time. Whatever was sent, the server saw and served.
    assert!(
        c.requests == 200 || c.requests == 195,
        "{} requests: {c:?}",
        c.requests
    );
    assert_eq!(c.ok, c.requests, "{c:?}");
    assert_eq!(c.unsent, 0, "{c:?}");
    assert_eq!(seen.requests.load(Ordering::Acquire), c.requests);
    assert_eq!(seen.peak.load(Ordering::Acquire), 5);
}

#[test]
fn a_socket_cap_gives_back_what_it_took() {
    let cap = Caps::new(None, Some(2)).sockets.unwrap();
    let a = cap.take().unwrap();
    let _b = cap.take().unwrap();
    assert!(cap.take().is_none());
    drop(a);
    assert!(cap.take().is_some());
}
