//! Tests of the daemon (`daemon.rs`): --exit-after-run, hello over gRPC, refusals of strangers and
//! bad tokens.
use super::*;
use proto::pb::agent_client::AgentClient;
use proto::pb::agent_message::Kind as Up;
use proto::pb::coordinator_message::Kind as Down;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

/// A loopback agent's configuration, with no limits and no TLS.
fn loopback(token: Option<&str>, exit_after_run: bool) -> DaemonConfig {
    DaemonConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        threads: 1,
        token: token.map(str::to_string),
        policy: Policy::default(),
        tls: None,
        ready_file: None,
        monitor: None,
        exit_after_run,
    }
}

async fn start_with(token: Option<&str>) -> (String, CancellationToken) {
    let shutdown = CancellationToken::new();
    let cfg = loopback(token, false);
    let listener = bind(&cfg).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let stop = shutdown.clone();
    tokio::spawn(async move { serve(listener, &cfg, stop).await });
    (format!("http://{addr}"), shutdown)
}

async fn start() -> (String, CancellationToken) {
    start_with(None).await
}

async fn hello(endpoint: &str, version: u32) -> Result<Vec<pb::AgentMessage>, Status> {
    hello_with(endpoint, version, "").await
}

async fn hello_with(
    endpoint: &str,
    version: u32,
    token: &str,
) -> Result<Vec<pb::AgentMessage>, Status> {
    let mut client = AgentClient::connect(endpoint.to_string()).await.unwrap();
    let (tx, rx) = mpsc::channel(4);
    tx.send(proto::to_agent(Down::Hello(pb::Hello {
        protocol_version: version,
        coordinator_version: "test".into(),
        token: token.to_string(),
        ..Default::default()
    })))
    .await
    .unwrap();
    let mut stream = client.control(ReceiverStream::new(rx)).await?.into_inner();
    let first = stream.message().await?.expect("an answer");
    drop(tx);
    Ok(vec![first])
}

/// An `--exit-after-run` agent on a loopback port, and its `serve` to await.
async fn start_once() -> (
    String,
    tokio::task::JoinHandle<Result<(), DaemonError>>,
    CancellationToken,
) {
    start_once_with(None).await
}

async fn start_once_with(
    token: Option<&str>,
) -> (
    String,
    tokio::task::JoinHandle<Result<(), DaemonError>>,
    CancellationToken,
) {
    let shutdown = CancellationToken::new();
    let cfg = loopback(token, true);
    let listener = bind(&cfg).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let stop = shutdown.clone();
    let served = tokio::spawn(async move { serve(listener, &cfg, stop).await });
    (format!("http://{addr}"), served, shutdown)
}

#[tokio::test]
async fn exit_after_run_ends_the_daemon_with_its_first_session() {
    let (endpoint, served, shutdown) = start_once().await;
    let msgs = hello(&endpoint, proto::PROTOCOL_VERSION).await.unwrap();
    assert!(matches!(msgs[0].kind, Some(Up::HelloReply(_))), "{msgs:?}");
    // The coordinator hung up after its hello: the session ended well, and so does the daemon.
    let ended = tokio::time::timeout(std::time::Duration::from_secs(10), served).await;
    let result = ended
        .expect("the daemon still serves after its session")
        .unwrap();
    assert!(result.is_ok(), "{result:?}");
    assert!(!shutdown.is_cancelled(), "no signal was needed");
}

/// A hello as a coordinator sends it.
fn hello_msg(version: u32, token: &str) -> pb::CoordinatorMessage {
    proto::to_agent(Down::Hello(pb::Hello {
        protocol_version: version,
        coordinator_version: "test".into(),
        token: token.to_string(),
        ..Default::default()
    }))
}

#[tokio::test]
async fn exit_after_run_fails_when_its_admitted_session_ended_in_error() {
    // This thread's own subscriber: the refusal's log callsite, first reached here without one,
    // would otherwise be cached as unwanted while the oversized-message test captures it.
    let _logging = tracing::subscriber::set_default(
        tracing_subscriber::fmt()
            .with_writer(std::io::sink)
            .finish(),
    );
    let (endpoint, served, _shutdown) = start_once().await;
    let mut client = AgentClient::connect(endpoint).await.unwrap();
    let (tx, rx) = mpsc::channel(4);
    tx.send(hello_msg(proto::PROTOCOL_VERSION, ""))
        .await
        .unwrap();
    let mut stream = client
        .control(ReceiverStream::new(rx))
        .await
        .unwrap()
        .into_inner();
    let first = stream.message().await.unwrap().expect("an answer");
    assert!(matches!(first.kind, Some(Up::HelloReply(_))), "{first:?}");
    // Admitted, the session then ends in error (a second hello of another version).
    tx.send(hello_msg(99, "")).await.unwrap();
    let second = stream.message().await.unwrap().expect("an answer");
    assert!(matches!(second.kind, Some(Up::Refusal(_))), "{second:?}");
    // Refused, the coordinator hangs up (the server's graceful end waits for its connection).
    drop((tx, stream, client));
    let ended = tokio::time::timeout(std::time::Duration::from_secs(10), served).await;
    let e = ended
        .expect("the daemon still serves")
        .unwrap()
        .unwrap_err();
    assert!(e.to_string().contains("--exit-after-run"), "{e}");
}

#[tokio::test]
async fn exit_after_run_no_longer_exits_on_a_stranger_with_a_wrong_token() {
    let _logging = tracing::subscriber::set_default(
        tracing_subscriber::fmt()
            .with_writer(std::io::sink)
            .finish(),
    );
    let (endpoint, served, shutdown) = start_once_with(Some("s3cret")).await;
    // Strangers: a wrong token, none, another protocol version, and a peer that hangs up before
    // any hello. Each is refused (or just goes), and none of them is this agent's coordinator.
    for (version, token) in [
        (proto::PROTOCOL_VERSION, "guess"),
        (proto::PROTOCOL_VERSION, ""),
        (99, "s3cret"),
    ] {
        let msgs = hello_with(&endpoint, version, token).await.unwrap();
        assert!(matches!(msgs[0].kind, Some(Up::Refusal(_))), "{msgs:?}");
    }
    {
        let mut client = AgentClient::connect(endpoint.clone()).await.unwrap();
        let (tx, rx) = mpsc::channel::<pb::CoordinatorMessage>(1);
        let _ = client.control(ReceiverStream::new(rx)).await;
        drop(tx);
    }
    // Each refused session has ended (the next one was served, not refused as busy); the
    // daemon is still there.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert!(
        !served.is_finished(),
        "the daemon ended on a refused stranger: {:?}",
        served.await
    );
    // Its coordinator's run (hello, then goodbye) ends it, well.
    let msgs = hello_with(&endpoint, proto::PROTOCOL_VERSION, "s3cret")
        .await
        .unwrap();
    assert!(matches!(msgs[0].kind, Some(Up::HelloReply(_))), "{msgs:?}");
    let ended = tokio::time::timeout(std::time::Duration::from_secs(10), served).await;
    let result = ended
        .expect("the daemon ends after its coordinator's run")
        .unwrap();
    assert!(result.is_ok(), "{result:?}");
    assert!(!shutdown.is_cancelled(), "no signal was needed");
}

#[test]
fn a_joining_agent_with_exit_after_run_keeps_trying_after_a_refused_hello() {
    let refused = Err(super::Joined::Session(SessionError::Auth("no")));
    assert!(end_after_run(&refused, false).is_none());
    assert!(
        end_after_run(&Ok(()), false).is_none(),
        "hung up before any hello"
    );
    assert!(matches!(end_after_run(&Ok(()), true), Some(Ok(()))));
    assert!(matches!(end_after_run(&refused, true), Some(Err(_))));
}

#[tokio::test]
async fn without_exit_after_run_the_daemon_outlives_a_session() {
    let (endpoint, shutdown) = start().await;
    hello(&endpoint, proto::PROTOCOL_VERSION).await.unwrap();
    // A second coordinator after the first one's session is served too.
    let msgs = hello(&endpoint, proto::PROTOCOL_VERSION).await.unwrap();
    assert!(matches!(msgs[0].kind, Some(Up::HelloReply(_))), "{msgs:?}");
    shutdown.cancel();
}

#[tokio::test]
async fn hello_over_grpc_reports_capabilities() {
    let (endpoint, shutdown) = start().await;
    let msgs = hello(&endpoint, proto::PROTOCOL_VERSION).await.unwrap();
    let Some(Up::HelloReply(r)) = &msgs[0].kind else {
        panic!("expected a hello reply, got {msgs:?}");
    };
    let caps = r.capabilities.as_ref().unwrap();
    assert_eq!(caps.threads, 1);
    assert!(caps.fd_limit > 0);
    assert_eq!(r.role, pb::Role::Load as i32);
    // The id a monitor on this host reports, so a coordinator can tell they share it.
    let sensor = monitor::sensor::Sensor::open(&monitor::Watch::Pid(std::process::id()));
    assert_eq!(caps.machine_id, sensor.unwrap().info(None).machine_id);
    assert_eq!(caps.machine_id.len(), 16, "{}", caps.machine_id);
    shutdown.cancel();
}

#[tokio::test]
async fn version_mismatch_is_refused_with_both_versions_named() {
    let (endpoint, shutdown) = start().await;
    let msgs = hello(&endpoint, 99).await.unwrap();
    let Some(Up::Refusal(r)) = &msgs[0].kind else {
        panic!("expected a refusal, got {msgs:?}");
    };
    assert_eq!(
        r.message,
        format!(
            "coordinator speaks protocol version 99; this agent speaks {}",
            proto::PROTOCOL_VERSION
        )
    );
    shutdown.cancel();
}

/// Log lines written on this thread, for a test to read.
#[derive(Clone, Default)]
struct Captured(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Captured {
    type Writer = Captured;
    fn make_writer(&'a self) -> Captured {
        self.clone()
    }
}

#[tokio::test]
async fn an_oversized_message_is_refused_and_the_daemon_keeps_serving() {
    // A current-thread runtime: the server's tasks log on this thread, into `logs`.
    let logs = Captured::default();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(logs.clone())
        .with_ansi(false)
        .finish();
    let _logging = tracing::subscriber::set_default(subscriber);
    // A callsite first reached by a parallel test, on a thread with no subscriber, may have
    // cached "never" as its interest; asked again, it counts this thread's subscriber too.
    tracing::callsite::rebuild_interest_cache();
    let (endpoint, shutdown) = start().await;
    let mut client = AgentClient::connect(endpoint.clone()).await.unwrap();
    let (tx, rx) = mpsc::channel(4);
    let huge = pb::Configure {
        requests: vec![pb::RequestTemplate {
            method: "POST".into(),
            url: "http://127.0.0.1:1/".into(),
            headers: vec![],
            body: vec![0u8; MAX_MESSAGE_BYTES + 1024],
        }],
        ..Default::default()
    };
    tx.send(proto::to_agent(Down::Configure(huge)))
        .await
        .unwrap();
    let outcome = async {
        let mut stream = client.control(ReceiverStream::new(rx)).await?.into_inner();
        stream.message().await
    }
    .await;
    // Refused: either an error status, or the session closes without a single answer.
    match outcome {
        Err(status) => assert_ne!(status.code(), tonic::Code::Ok, "{status:?}"),
        Ok(reply) => assert!(
            reply.is_none(),
            "no answer to an oversized message: {reply:?}"
        ),
    }
    drop(tx);
    // The next coordinator is served as usual (once the broken session has been released).
    let mut answered = None;
    for _ in 0..50 {
        match hello(&endpoint, proto::PROTOCOL_VERSION).await {
            Ok(msgs) => {
                answered = Some(msgs);
                break;
            }
            Err(s) if s.code() == tonic::Code::ResourceExhausted => {
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
            Err(s) => panic!("{s:?}"),
        }
    }
    let msgs = answered.expect("served again within 5 s");
    assert!(matches!(msgs[0].kind, Some(Up::HelloReply(_))), "{msgs:?}");
    let log = String::from_utf8_lossy(&logs.0.lock().unwrap()).into_owned();
    assert!(
        log.contains("Refused a coordinator peer=127.0.0.1:")
            && log.contains("decoded message length too large"),
        "the oversized message's sender is not in the log: {log}"
    );
    shutdown.cancel();
}

#[tokio::test]
async fn non_loopback_listen_without_a_token_is_refused() {
    let e = bind(&DaemonConfig {
        listen: "0.0.0.0:0".parse().unwrap(),
        threads: 1,
        token: None,
        policy: Policy::default(),
        tls: None,
        ready_file: None,
        monitor: None,
        exit_after_run: false,
    })
    .await
    .unwrap_err();
    assert!(
        e.to_string()
            .contains("add --token-file FILE (or set STAMPEDE_TOKEN)"),
        "{e}"
    );
}

async fn refusal(endpoint: &str, token: &str) -> String {
    let msgs = hello_with(endpoint, proto::PROTOCOL_VERSION, token)
        .await
        .unwrap();
    match &msgs[0].kind {
        Some(Up::Refusal(r)) => r.message.clone(),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[tokio::test]
async fn wrong_and_missing_tokens_are_refused() {
    let (endpoint, shutdown) = start_with(Some("s3cret")).await;
    assert_eq!(
        refusal(&endpoint, "guess").await,
        "the token does not match this agent's"
    );
    assert!(
        refusal(&endpoint, "")
            .await
            .starts_with("this agent requires a token")
    );
    let ok = hello_with(&endpoint, proto::PROTOCOL_VERSION, "s3cret")
        .await
        .unwrap();
    assert!(matches!(ok[0].kind, Some(Up::HelloReply(_))), "{ok:?}");
    shutdown.cancel();
}

#[tokio::test]
async fn a_stream_without_the_token_held_the_agent_by_pinging() {
    let (endpoint, shutdown) = start_with(Some("s3cret")).await;
    // A stranger opens the control stream and pings, without a hello.
    let mut client = AgentClient::connect(endpoint.clone()).await.unwrap();
    let (tx, rx) = mpsc::channel(4);
    tx.send(proto::to_agent(Down::Ping(pb::Ping { id: 1 })))
        .await
        .unwrap();
    let mut stranger = client.control(ReceiverStream::new(rx)).await.unwrap();
    let beat = tokio::spawn(async move {
        for id in 2.. {
            let ping = proto::to_agent(Down::Ping(pb::Ping { id }));
            if tx.send(ping).await.is_err() {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        }
    });
    // The coordinator with the token is served meanwhile.
    let ok = hello_with(&endpoint, proto::PROTOCOL_VERSION, "s3cret")
        .await
        .unwrap();
    assert!(matches!(ok[0].kind, Some(Up::HelloReply(_))), "{ok:?}");
    // The stranger is answered nothing, and its stream ends at the hello deadline.
    let patience = control::admission::HELLO_WITHIN + std::time::Duration::from_secs(5);
    let read = tokio::time::timeout(patience, stranger.get_mut().message()).await;
    assert!(
        matches!(read, Ok(Ok(None)) | Ok(Err(_))),
        "the stranger read {read:?}"
    );
    beat.abort();
    shutdown.cancel();
}

/// A coordinator's `Coordinator.Join` port that hands each joining agent's streams to the test.
struct JoinPort(mpsc::Sender<Joined>);

type Joined = (
    Streaming<pb::AgentMessage>,
    mpsc::Sender<Result<pb::CoordinatorMessage, Status>>,
);

#[tonic::async_trait]
impl pb::coordinator_server::Coordinator for JoinPort {
    type JoinStream = ReceiverStream<Result<pb::CoordinatorMessage, Status>>;

    async fn join(
        &self,
        request: Request<Streaming<pb::AgentMessage>>,
    ) -> Result<Response<Self::JoinStream>, Status> {
        let (down, rx) = mpsc::channel(16);
        let _ = self.0.send((request.into_inner(), down)).await;
        Ok(Response::new(ReceiverStream::new(rx)))
    }
}

#[tokio::test]
async fn a_monitor_joins_with_the_token_streams_samples_and_refuses_load() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (joined_tx, mut joined) = mpsc::channel(4);
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(pb::coordinator_server::CoordinatorServer::new(JoinPort(
                joined_tx,
            )))
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener)),
    );
    let cfg = DaemonConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        threads: 1,
        token: Some("s3cret".into()),
        policy: Policy::default(),
        tls: None,
        ready_file: None,
        monitor: Some(Monitor {
            name: Some("self".into()),
            open: monitor::session::opener(monitor::Watch::Pid(std::process::id())),
        }),
        exit_after_run: false,
    };
    let shutdown = CancellationToken::new();
    let daemon = tokio::spawn(join(addr.to_string(), cfg, shutdown.clone()));
    let patience = std::time::Duration::from_secs(10);
    let (mut up, down) = tokio::time::timeout(patience, joined.recv())
        .await
        .expect("the monitor joins within 10 s")
        .unwrap();
    let send = |kind| down.send(Ok(proto::to_agent(kind)));
    // The next message that is not a heartbeat's answer.
    let mut next = async || loop {
        let msg = tokio::time::timeout(patience, up.message()).await;
        match msg
            .expect("an answer within 10 s")
            .unwrap()
            .unwrap()
            .kind
            .unwrap()
        {
            Up::Pong(_) => continue,
            other => return other,
        }
    };
    // The join handshake: the monitor proves the token, then the coordinator does.
    let challenge = control::admission::join::nonce().unwrap();
    let hello = |join_challenge, join_proof| {
        Down::Hello(pb::Hello {
            protocol_version: proto::PROTOCOL_VERSION,
            coordinator_version: "test".into(),
            join_challenge,
            join_proof,
            ..Default::default()
        })
    };
    send(hello(challenge.clone(), Vec::new())).await.unwrap();
    let Up::JoinProof(proof) = next().await else {
        panic!("expected the monitor's proof of the token");
    };
    assert!(control::admission::join::verify_agent(
        "s3cret",
        &challenge,
        &proof.nonce,
        &proof.mac
    ));
    let ours = control::admission::join::coordinator_proof("s3cret", &challenge, &proof.nonce);
    send(hello(Vec::new(), ours)).await.unwrap();
    // The session's own hello, without the token.
    send(hello(Vec::new(), Vec::new())).await.unwrap();
    let Up::HelloReply(reply) = next().await else {
        panic!("expected the hello reply");
    };
    assert_eq!(reply.role, pb::Role::Monitor as i32);
    assert_eq!(reply.monitor.unwrap().name, "self");
    // Heartbeats, as a coordinator sends them, keep the dead-man switch quiet.
    let pinger = down.clone();
    let _beat = tokio_util::task::AbortOnDropHandle::new(tokio::spawn(async move {
        for id in 0.. {
            let ping = Ok(proto::to_agent(Down::Ping(pb::Ping { id })));
            if pinger.send(ping).await.is_err() {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        }
    }));
    let Up::MonitorSample(first) = next().await else {
        panic!("expected a sample");
    };
    send(Down::Configure(pb::Configure::default()))
        .await
        .unwrap();
    let mut refused = None;
    let mut second = None;
    while refused.is_none() || second.is_none() {
        match next().await {
            Up::Refusal(r) => refused = Some(r.message),
            Up::MonitorSample(s) => second = Some(s),
            other => panic!("read {other:?}"),
        }
    }
    assert_eq!(refused.unwrap(), monitor::session::NO_LOAD);
    let gap = second.unwrap().at_unix_nanos - first.at_unix_nanos;
    assert!(
        (800_000_000..1_200_000_000).contains(&gap),
        "{gap} ns apart"
    );
    shutdown.cancel();
    let ended = tokio::time::timeout(patience, daemon).await;
    assert!(matches!(ended, Ok(Ok(Ok(())))), "{ended:?}");
}
