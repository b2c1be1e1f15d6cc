//! Tests of the control session (`session.rs`) under tokio's paused clock, as a coordinator would
//! drive it.
use std::sync::atomic::{AtomicU64, Ordering};

use control::admission::Seat;
use control::link::{LINK_CAPACITY, LinkRx};
use control::listener::Admission;
use control::session::STALL_GRACE;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::task::JoinHandle;

use super::*;

/// The test's side of a session: the coordinator's link end and the session's task.
struct Coordinator {
    tx: LinkTx<pb::CoordinatorMessage>,
    rx: LinkRx<pb::AgentMessage>,
    session: JoinHandle<Result<(), SessionError>>,
}

fn session(rules: Rules, prepare: Prepare) -> Coordinator {
    let engine = Arc::new(Engine::start(1).unwrap());
    let (Link { tx, rx }, agent) = link::pair();
    let shutdown = CancellationToken::new();
    let session = tokio::spawn(serve_with(
        engine,
        Arc::new(rules),
        agent,
        "test".into(),
        shutdown,
        prepare,
    ));
    Coordinator { tx, rx, session }
}

impl Coordinator {
    async fn send(&self, kind: Down) {
        self.tx.send(proto::to_agent(kind)).await.unwrap();
    }

    /// The next message, heartbeat answers included.
    async fn next(&mut self) -> Up {
        self.rx.recv().await.unwrap().kind.unwrap()
    }

    /// The next message that is not a heartbeat's answer.
    async fn answer(&mut self) -> Up {
        loop {
            match self.next().await {
                Up::Pong(_) => continue,
                other => return other,
            }
        }
    }

    async fn refused(&mut self) -> String {
        match self.answer().await {
            Up::Refusal(r) => r.message,
            other => panic!("expected a refusal, read {other:?}"),
        }
    }

    async fn acked(&mut self, what: &str) {
        match self.answer().await {
            Up::Ack(a) => assert_eq!(a.what, what),
            other => panic!("expected the {what} ack, read {other:?}"),
        }
    }

    async fn greet(&mut self) {
        self.send(hello("")).await;
        assert!(matches!(self.answer().await, Up::HelloReply(_)));
    }

    /// Pings every 500 ms, as a coordinator does, until the session is gone.
    fn heartbeat(&self) -> JoinHandle<()> {
        let tx = self.tx.clone();
        tokio::spawn(async move {
            for id in 0.. {
                if tx.send(proto::to_agent(ping(id))).await.is_err() {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        })
    }

    /// Reads until the session ends, and says how it did.
    async fn ended(mut self) -> Result<(), SessionError> {
        while self.rx.recv().await.is_ok() {}
        self.session.await.unwrap()
    }
}

fn hello(token: &str) -> Down {
    Down::Hello(pb::Hello {
        protocol_version: PROTOCOL_VERSION,
        coordinator_version: "test".into(),
        token: token.into(),
        ..Default::default()
    })
}

fn ping(id: u64) -> Down {
    Down::Ping(pb::Ping { id })
}

fn configure(url: &str) -> Down {
    Down::Configure(pb::Configure {
        requests: vec![pb::RequestTemplate {
            method: "GET".into(),
            url: url.into(),
            headers: Vec::new(),
            body: Vec::new(),
        }],
        url_order: pb::UrlOrder::RoundRobin as i32,
        timeout_ms: 1000,
        connect_timeout_ms: 1000,
        insecure_tls: false,
        ..Default::default()
    })
}

/// A 10 s open-model step at `rate` requests a second, all of it this agent's.
fn prepare(step: u32, rate: f64) -> Down {
    Down::PrepareStep(pb::PrepareStep {
        step,
        model: pb::LoadModel::Requests as i32,
        rate,
        connections: 0,
        num_call: 1,
        max_connections: 4,
        duration_ms: 10_000,
        num_conns: 0,
        arrival: pb::Arrival::Uniform as i32,
        seed: 1,
        // No path: the whole step, as a lone agent is sent.
        path: Vec::new(),
        max_requests: 0,
    })
}

fn start(step: u32) -> Down {
    Down::StartStep(pb::StartStep {
        step,
        start_unix_nanos: 0,
    })
}

/// Targets the scripted lookup knows: one it cannot resolve, one that takes 2 s, one at once.
const UNRESOLVABLE: &str = "http://127.0.0.1:1/";
const SLOW: &str = "http://127.0.0.1:2/";
const FAST: &str = "http://127.0.0.1:3/";
const SLOW_LOOKUP: Duration = Duration::from_secs(2);

/// `Endpoint::prepare` behind a lookup that takes [`SLOW_LOOKUP`] of tokio time for [`SLOW`] and
/// fails for [`UNRESOLVABLE`]; an IP literal's own lookup is immediate.
fn scripted_lookup() -> Prepare {
    Arc::new(|w: Workload| {
        Box::pin(async move {
            match w.origin().port() {
                1 => {
                    return Err(Refusal::new(
                        RefusalKind::Target,
                        "cannot resolve 127.0.0.1: no such host",
                    ));
                }
                2 => tokio::time::sleep(SLOW_LOOKUP).await,
                _ => {}
            }
            Endpoint::prepare(&w).await.map_err(|e| e.refusal())
        })
    })
}

/// A greeted session with the scripted lookup, and a heartbeat keeping it alive.
async fn beating() -> (Coordinator, JoinHandle<()>) {
    let mut c = session(Rules::default(), scripted_lookup());
    c.greet().await;
    let beat = c.heartbeat();
    (c, beat)
}

/// Answers every message that arrives before `until` with its pong, and fails on anything else.
async fn only_pongs_until(c: &mut Coordinator, until: Instant) {
    while let Ok(up) = tokio::time::timeout_at(until, c.next()).await {
        assert!(matches!(up, Up::Pong(_)), "read {up:?}");
    }
}

#[tokio::test]
async fn a_heartbeat_before_the_hello_is_let_through_unanswered() {
    // Regression: the coordinator's first heartbeat could overtake its hello and fail the run.
    // It is not refused; nor is it answered, since nobody has proved the token yet.
    let engine = Arc::new(Engine::start(1).unwrap());
    let Link { tx, mut rx } = embedded(engine, CancellationToken::new());
    tx.send(proto::to_agent(ping(0))).await.unwrap();
    tx.send(proto::to_agent(hello(""))).await.unwrap();
    assert!(matches!(
        rx.recv().await.unwrap().kind,
        Some(Up::HelloReply(_))
    ));
}

/// Rules with a token, a shared seat, and a door: as a session on the agent's listener.
fn with_token(seat: &Seat) -> Rules {
    Rules {
        token: Some("s3cret".into()),
        seat: seat.clone(),
        door: Some(Admission::unlisted()),
        ..Rules::default()
    }
}

#[tokio::test(start_paused = true)]
async fn a_peer_without_the_token_pinging_without_a_hello_held_the_agent() {
    // Regression: pings before a hello were answered and the stream kept the agent busy, so a
    // peer without the token held its only session for as long as it pinged.
    let seat = Seat::default();
    let mut stranger = session(with_token(&seat), scripted_lookup());
    let beat = stranger.heartbeat();
    let opened = Instant::now();
    // Meanwhile the real coordinator is served: the stranger never took the seat.
    let mut real = session(with_token(&seat), scripted_lookup());
    real.send(hello("s3cret")).await;
    assert!(matches!(real.next().await, Up::HelloReply(_)));
    // The stranger was answered nothing, and its stream is closed at the hello deadline.
    let ended = tokio::time::timeout(Duration::from_secs(60), stranger.rx.recv()).await;
    assert!(matches!(ended, Ok(Err(_))), "{ended:?}");
    assert_eq!(opened.elapsed(), HELLO_WITHIN);
    let why = stranger.session.await.unwrap();
    assert!(matches!(why, Err(SessionError::NoHello(_))), "{why:?}");
    beat.abort();
}

#[tokio::test(start_paused = true)]
async fn a_slow_hello_was_waited_for_forever() {
    let seat = Seat::default();
    // Kept alive by heartbeats, a hello 6 s after the stream opened is too late.
    let late = session(with_token(&seat), scripted_lookup());
    let beat = late.heartbeat();
    tokio::time::sleep(Duration::from_secs(6)).await;
    let _ = late.tx.send(proto::to_agent(hello("s3cret"))).await;
    let why = late.ended().await;
    assert!(matches!(why, Err(SessionError::NoHello(_))), "{why:?}");
    assert!(why.unwrap_err().never_seated());
    beat.abort();
    // One within the deadline is served.
    let mut c = session(with_token(&seat), scripted_lookup());
    let beat = c.heartbeat();
    tokio::time::sleep(HELLO_WITHIN - Duration::from_millis(100)).await;
    c.send(hello("s3cret")).await;
    assert!(matches!(c.next().await, Up::HelloReply(_)));
    // Greeted, it outlives the hello deadline.
    tokio::time::sleep(HELLO_WITHIN * 2).await;
    assert!(!c.session.is_finished());
    beat.abort();
}

#[tokio::test(start_paused = true)]
async fn a_second_coordinator_is_refused_only_after_its_valid_hello() {
    let seat = Seat::default();
    let mut first = session(with_token(&seat), scripted_lookup());
    first.send(hello("s3cret")).await;
    assert!(matches!(first.next().await, Up::HelloReply(_)));
    let beat = first.heartbeat();
    // A wrong token is refused for the token, not told the agent is busy.
    let mut stranger = session(with_token(&seat), scripted_lookup());
    stranger.send(hello("guess")).await;
    assert_eq!(
        stranger.refused().await,
        "the token does not match this agent's"
    );
    let mut second = session(with_token(&seat), scripted_lookup());
    second.send(hello("s3cret")).await;
    assert_eq!(
        second.refused().await,
        "this agent is serving another coordinator"
    );
    assert!(matches!(second.ended().await, Err(SessionError::Busy)));
    // The first one's end frees the seat.
    beat.abort();
    drop(first);
    tokio::time::sleep(DEAD_MAN * 2).await;
    let mut third = session(with_token(&seat), scripted_lookup());
    third.send(hello("s3cret")).await;
    assert!(matches!(third.next().await, Up::HelloReply(_)));
}

#[tokio::test(start_paused = true)]
async fn a_command_before_the_hello_is_refused_and_ends_the_stream() {
    let mut c = session(Rules::default(), scripted_lookup());
    c.send(configure(FAST)).await;
    assert_eq!(c.refused().await, "say hello first");
    assert!(matches!(c.ended().await, Err(SessionError::Auth(_))));
}

#[tokio::test(start_paused = true)]
async fn a_refusal_named_the_step_counted_from_0() {
    // The protocol's step ids are indexes; a person reads the step the table calls 2.
    let mut c = session(Rules::default(), scripted_lookup());
    c.greet().await;
    c.send(start(1)).await;
    assert_eq!(c.refused().await, "step 2 was not prepared");
}

#[tokio::test(start_paused = true)]
async fn a_second_configure_drops_the_prepared_step() {
    // Regression: a step prepared for the first workload stayed prepared, and would have run
    // against the second target without being checked against it.
    let mut c = session(Rules::default(), scripted_lookup());
    c.greet().await;
    c.send(configure(FAST)).await;
    c.acked("configure").await;
    c.send(prepare(0, 10.0)).await;
    c.acked("prepare").await;
    c.send(configure("http://127.0.0.1:4/")).await;
    c.acked("configure").await;
    c.send(start(0)).await;
    assert_eq!(c.refused().await, "step 1 was not prepared");
}

#[tokio::test(start_paused = true)]
async fn a_prepare_is_checked_against_the_current_target_not_one_a_refused_configure_replaced() {
    let mut c = session(Rules::default(), scripted_lookup());
    c.greet().await;
    c.send(configure(FAST)).await;
    c.acked("configure").await;
    c.send(configure(UNRESOLVABLE)).await;
    assert!(c.refused().await.contains("no such host"));
    c.send(prepare(0, 10.0)).await;
    assert_eq!(
        c.refused().await,
        "configure the workload before preparing a step"
    );
}

#[tokio::test(start_paused = true)]
async fn a_configure_whose_lookup_takes_2s_does_not_trip_the_dead_man_switch() {
    // Regression: the lookup ran on the session's loop, so a live coordinator's heartbeats went
    // unanswered for 2 s and the 1.5 s switch could fire.
    let mut c = session(Rules::default(), scripted_lookup());
    c.greet().await;
    let asked = Instant::now();
    c.send(configure(SLOW)).await;
    let _beat = c.heartbeat();
    let mut pongs = 0;
    loop {
        match c.next().await {
            Up::Pong(_) => pongs += 1,
            Up::Ack(a) if a.what == "configure" => break,
            other => panic!("read {other:?}"),
        }
    }
    assert_eq!(asked.elapsed(), SLOW_LOOKUP);
    // Beats at 0, 0.5, 1 and 1.5 s were answered while the lookup ran.
    assert!(pongs >= 4, "{pongs} pongs during the lookup");
    only_pongs_until(&mut c, asked + Duration::from_secs(5)).await;
    assert!(!c.session.is_finished());
    c.send(prepare(0, 10.0)).await;
    c.acked("prepare").await;
}

#[tokio::test(start_paused = true)]
async fn a_newer_configure_wins_over_one_still_looking_up() {
    let (mut c, _beat) = beating().await;
    let asked = Instant::now();
    c.send(configure(SLOW)).await;
    c.send(configure(FAST)).await;
    c.acked("configure").await;
    assert!(
        asked.elapsed() < SLOW_LOOKUP,
        "the newer answer waited on the older lookup"
    );
    // The older lookup would have answered at 2 s: it was aborted, so nothing comes.
    only_pongs_until(&mut c, asked + SLOW_LOOKUP * 2).await;
    c.send(prepare(0, 10.0)).await;
    c.acked("prepare").await;
}

#[tokio::test(start_paused = true)]
async fn a_prepare_during_a_configure_is_refused_until_its_ack() {
    let (mut c, _beat) = beating().await;
    c.send(configure(SLOW)).await;
    c.send(prepare(0, 10.0)).await;
    assert!(c.refused().await.contains("still being configured"));
    c.acked("configure").await;
    c.send(prepare(0, 10.0)).await;
    c.acked("prepare").await;
}

#[tokio::test(start_paused = true)]
async fn an_abort_during_a_configure_drops_it() {
    let (mut c, _beat) = beating().await;
    let asked = Instant::now();
    c.send(configure(SLOW)).await;
    c.send(Down::Abort(pb::Abort {
        reason: "interrupted".into(),
    }))
    .await;
    only_pongs_until(&mut c, asked + SLOW_LOOKUP * 2).await;
    c.send(prepare(0, 10.0)).await;
    assert_eq!(
        c.refused().await,
        "configure the workload before preparing a step"
    );
}

/// Queues `n` heartbeats at once without reading their answers, so the session blocks sending.
async fn flood_unread(c: &Coordinator, n: u64) {
    for id in 0..n {
        c.send(ping(id)).await;
    }
}

#[tokio::test(start_paused = true)]
async fn liveness_is_stamped_where_a_message_arrives_so_a_busy_session_keeps_a_live_coordinator() {
    // Regression: a message was stamped when the loop got to it. A session blocked for 3 s
    // (here: sending to a coordinator that reads nothing) then found its deadline passed beside
    // the heartbeats that had come meanwhile, and the loop's pick between the two could stop a
    // live coordinator's run. Five rounds, since that pick was a coin toss.
    let mut c = session(Rules::default(), scripted_lookup());
    c.greet().await;
    for _ in 0..5 {
        flood_unread(&c, LINK_CAPACITY as u64 + 1).await;
        for _ in 0..6 {
            tokio::time::sleep(Duration::from_millis(500)).await;
            c.send(ping(0)).await;
        }
        let drained = Instant::now() + Duration::from_millis(100);
        only_pongs_until(&mut c, drained).await;
        assert!(!c.session.is_finished(), "{:?}", c.session.await);
    }
    c.send(hello("")).await;
    assert!(matches!(c.answer().await, Up::HelloReply(_)));
}

#[tokio::test(start_paused = true)]
async fn liveness_is_stamped_where_a_message_arrives_so_silence_counts_from_the_last_arrival() {
    let mut c = session(Rules::default(), scripted_lookup());
    c.greet().await;
    let last = Instant::now();
    // The first LINK_CAPACITY answers fill the link; the session blocks sending the next, and the
    // beats behind it wait, stamped when they came.
    flood_unread(&c, LINK_CAPACITY as u64 + 10).await;
    // 3 s of silence while the session waits to send; then the coordinator reads again.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let reading = Instant::now();
    assert!(matches!(c.ended().await, Err(SessionError::Silent(_))));
    // Counted from the heartbeats' arrival, the deadline passed while the session was stuck:
    // it fires as soon as the session can tell, not 1.5 s after it read the old beats.
    assert_eq!(reading - last, Duration::from_secs(3));
    assert_eq!(reading.elapsed(), Duration::ZERO);
}

#[tokio::test(start_paused = true)]
async fn the_dead_man_switch_fires_after_1_5s_of_silence() {
    let mut c = session(Rules::default(), scripted_lookup());
    c.greet().await;
    let last = Instant::now();
    let err = c.ended().await.unwrap_err();
    assert!(matches!(err, SessionError::Silent(DEAD_MAN)), "{err}");
    assert_eq!(last.elapsed(), DEAD_MAN);
}

#[tokio::test(start_paused = true)]
async fn a_session_not_run_for_2s_while_pings_queue_in_its_link_is_not_ended() {
    // Regression (the fault suite's agent SIGSTOPped for 2 s mid-step): on resume the deadline
    // had passed while the pings the coordinator sent during the stop still sat in the socket,
    // below the reader; the loop judged before its reader delivered them, and ended the session
    // of a live coordinator.
    let mut c = session(Rules::default(), scripted_lookup());
    c.greet().await;
    for id in 0..2 {
        tokio::time::sleep(Duration::from_millis(500)).await;
        c.send(ping(id)).await;
        assert!(matches!(c.next().await, Up::Pong(_)));
    }
    let stopped = Instant::now();
    // The process stops for 2 s: nothing of it runs, and its clock jumps.
    tokio::time::advance(Duration::from_secs(2)).await;
    // The three pings of the stop reach the session as its reader reads them, a moment after
    // the process resumed.
    tokio::time::sleep(Duration::from_millis(1)).await;
    for id in 2..5 {
        let sent = c.tx.send(proto::to_agent(ping(id))).await;
        assert!(
            sent.is_ok(),
            "the session ended: {:?}",
            (&mut c.session).await
        );
    }
    let _beat = c.heartbeat();
    only_pongs_until(&mut c, stopped + Duration::from_secs(10)).await;
    assert!(!c.session.is_finished(), "{:?}", c.session.await);
    c.send(configure(FAST)).await;
    c.acked("configure").await;
}

#[tokio::test(start_paused = true)]
async fn a_session_back_from_a_stall_to_a_coordinator_gone_stops_one_grace_later() {
    // The reader's grace after a stall does not keep a session whose coordinator is gone.
    let mut c = session(Rules::default(), scripted_lookup());
    c.greet().await;
    let last = Instant::now();
    tokio::time::advance(Duration::from_secs(2)).await;
    let err = c.ended().await.unwrap_err();
    assert!(matches!(err, SessionError::Silent(DEAD_MAN)), "{err}");
    assert_eq!(last.elapsed(), Duration::from_secs(2) + STALL_GRACE);
}

#[tokio::test(start_paused = true)]
async fn a_heartbeat_only_coordinator_keeps_the_session_alive() {
    let (mut c, _beat) = beating().await;
    let began = Instant::now();
    only_pongs_until(&mut c, began + Duration::from_secs(600)).await;
    assert!(!c.session.is_finished());
    c.send(configure(FAST)).await;
    c.acked("configure").await;
}

#[tokio::test(start_paused = true)]
async fn hellos_of_another_version_or_without_the_token_are_refused() {
    let rules = || Rules {
        token: Some("s3cret".into()),
        ..Rules::default()
    };
    let mut c = session(rules(), scripted_lookup());
    c.send(Down::Hello(pb::Hello {
        protocol_version: PROTOCOL_VERSION + 1,
        coordinator_version: "future".into(),
        token: "s3cret".into(),
        ..Default::default()
    }))
    .await;
    assert!(c.refused().await.contains("protocol version"));
    assert!(matches!(c.ended().await, Err(SessionError::Version { .. })));

    for (token, words) in [
        ("", "this agent requires a token"),
        ("guess", "the token does not match"),
    ] {
        let mut c = session(rules(), scripted_lookup());
        c.send(hello(token)).await;
        assert!(c.refused().await.starts_with(words));
        assert!(matches!(c.ended().await, Err(SessionError::Auth(_))));
    }

    let mut c = session(rules(), scripted_lookup());
    c.send(hello("s3cret")).await;
    assert!(matches!(c.answer().await, Up::HelloReply(_)));
}

#[tokio::test(start_paused = true)]
async fn commands_out_of_order_are_refused() {
    let mut c = session(Rules::default(), scripted_lookup());
    c.greet().await;
    c.send(prepare(0, 10.0)).await;
    assert_eq!(
        c.refused().await,
        "configure the workload before preparing a step"
    );
    c.send(configure(FAST)).await;
    c.acked("configure").await;
    c.send(prepare(0, 10.0)).await;
    c.acked("prepare").await;
    c.send(start(1)).await;
    assert_eq!(c.refused().await, "step 1 was prepared, not step 2");
    // A wrong start leaves nothing prepared.
    c.send(start(0)).await;
    assert_eq!(c.refused().await, "step 1 was not prepared");
}

// The tests below run a step: the worker threads run on their own runtimes and the real clock,
// so these run on it too, against a local server, for well under the step's 10 s.

/// A local HTTP server answering 200 to every request and counting them; it lives as long as the
/// test's runtime.
async fn counting_server() -> (String, Arc<AtomicU64>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    let served = Arc::new(AtomicU64::new(0));
    let count = served.clone();
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            let count = count.clone();
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                while let Ok(n @ 1..) = conn.read(&mut buf).await {
                    // GETs without bodies: a request ends at each blank line.
                    let requests = buf[..n].windows(4).filter(|w| w == b"\r\n\r\n").count();
                    count.fetch_add(requests as u64, Ordering::Relaxed);
                    let reply = b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n".repeat(requests);
                    if conn.write_all(&reply).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    (url, served)
}

/// A greeted session running step 1 at 100 requests a second against a counting server, once the
/// server has seen its first request.
async fn running_step() -> (Coordinator, Arc<AtomicU64>, JoinHandle<()>) {
    let (url, served) = counting_server().await;
    let mut c = session(Rules::default(), lookup());
    let beat = c.heartbeat();
    c.greet().await;
    c.send(configure(&url)).await;
    c.acked("configure").await;
    c.send(prepare(0, 100.0)).await;
    c.acked("prepare").await;
    c.send(start(0)).await;
    let deadline = Instant::now() + Duration::from_secs(5);
    while served.load(Ordering::Relaxed) == 0 {
        assert!(Instant::now() < deadline, "the step sent nothing in 5 s");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    (c, served, beat)
}

/// Once requests in flight settled, none arrive for 300 ms: 30 at the step's rate.
async fn assert_load_stopped(served: &AtomicU64) {
    tokio::time::sleep(Duration::from_millis(200)).await;
    let settled = served.load(Ordering::Relaxed);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(served.load(Ordering::Relaxed), settled, "load went on");
}

#[tokio::test]
async fn an_abort_while_running_reports_a_tail_and_an_aborted_step() {
    let (mut c, served, _beat) = running_step().await;
    c.send(Down::Abort(pb::Abort {
        reason: "interrupted".into(),
    }))
    .await;
    let mut tail = false;
    let report = loop {
        match c.answer().await {
            Up::Interval(i) => tail = i.tail,
            Up::StepReport(r) => break r,
            other => panic!("read {other:?}"),
        }
    };
    assert!(tail, "the last interval before the report is the tail");
    assert!(report.aborted);
    assert_load_stopped(&served).await;
    assert!(!c.session.is_finished(), "the session outlives the step");
}

#[tokio::test]
async fn the_dead_man_switch_stops_a_running_step() {
    let (c, served, beat) = running_step().await;
    beat.abort();
    let err = c.ended().await.unwrap_err();
    assert!(matches!(err, SessionError::Silent(DEAD_MAN)), "{err}");
    assert_load_stopped(&served).await;
}

#[tokio::test]
async fn a_broken_stream_during_a_step_stops_it_and_ends_the_session_with_its_reason() {
    let (c, served, _beat) = running_step().await;
    c.tx.clone()
        .close(Closed::Broken("message too large".into()))
        .await;
    match c.ended().await {
        Err(SessionError::Broken(words)) => assert_eq!(words, "message too large"),
        other => panic!("{other:?}"),
    }
    assert_load_stopped(&served).await;
}

/// A configure whose request takes `${id}` from a shard feeder.
fn configure_fed() -> Down {
    let Down::Configure(mut c) = configure(&format!("{FAST}item/${{id}}")) else {
        unreachable!()
    };
    c.feeders = vec![pb::Feeder {
        name: "ids".into(),
        mode: pb::FeederMode::Shard as i32,
        columns: vec!["id".into()],
    }];
    Down::Configure(c)
}

fn rows(ids: std::ops::Range<u32>) -> Down {
    let mut rows = Vec::new();
    for i in ids {
        shared::plan::encode_row(&[i.to_string().into_bytes()], &mut rows);
    }
    Down::FeedRows(pb::FeedRows { feeder: 0, rows })
}

fn end(rows: u64) -> Down {
    Down::FeedEnd(pb::FeedEnd { feeder: 0, rows })
}

#[tokio::test(start_paused = true)]
async fn a_step_waits_for_every_feeder_row_and_a_count_that_differs_is_refused() {
    let mut c = session(Rules::default(), scripted_lookup());
    c.greet().await;
    c.send(configure_fed()).await;
    c.acked("configure").await;
    c.send(prepare(0, 10.0)).await;
    assert_eq!(
        c.refused().await,
        "feeder ids: its rows are not all here yet (no end of rows received)"
    );
    c.send(rows(0..3)).await;
    c.send(end(4)).await;
    c.send(prepare(0, 10.0)).await;
    assert_eq!(
        c.refused().await,
        "feeder ids: 3 rows arrived where 4 were sent"
    );
    // A new configure starts the spools again.
    c.send(configure_fed()).await;
    c.acked("configure").await;
    c.send(rows(0..3)).await;
    c.send(rows(3..5)).await;
    c.send(end(5)).await;
    c.send(prepare(0, 10.0)).await;
    c.acked("prepare").await;
    // The same feeders again (side by side): the rows are kept, nothing need be sent.
    c.send(configure_fed()).await;
    c.acked("configure").await;
    c.send(prepare(1, 10.0)).await;
    c.acked("prepare").await;
    // Rows for a feeder the configure does not have.
    c.send(Down::FeedRows(pb::FeedRows {
        feeder: 3,
        rows: Vec::new(),
    }))
    .await;
    c.send(prepare(2, 10.0)).await;
    assert_eq!(
        c.refused().await,
        "feeder rows for feeder 3, which the configure does not have"
    );
}
