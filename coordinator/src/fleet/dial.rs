//! The coordinator's ends of the control channel's transport: dialing listening agents (`remote`,
//! retried `patiently` while they come up) and serving `Coordinator.Join` for agents that dial in
//! (`accept_joins`), each stream adapted to a `Link`. The endpoint setup and the words for a
//! failure are `control::dial`'s, shared with the agent's `--join`; every agent the join port
//! refuses is logged (`Refused an agent`).
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use agent::Engine;
use control::dial::{self, DialError, Dialer};
use control::link::{self, CoordinatorEnd, Link, MAX_MESSAGE_BYTES, Side, log_refused};
use control::listener::{self, Peer};
use control::mtls::host_of;
use proto::pb;
use proto::pb::coordinator_message::Kind as Down;
use proto::pb::coordinator_server::Coordinator as CoordinatorSvc;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::{Expect, Fleet, FleetError, GREETING_TIMEOUT};
use crate::config::{AgentSpec, DialWait, RunConfig};

/// How long to keep dialing an agent that does not accept connections yet.
const DIAL_WAIT: Duration = Duration::from_secs(10);

/// Connects to the configured agents, waits for joining ones, or starts the embedded one; then the
/// monitors: dialed, and the one in-process. Each is greeted as soon as it is reached and heartbeaten
/// from then on, so the first ones stay alive however long the rest take. Each link is given as what
/// it was named as, so the hello can refuse a monitor among the agents and the other way round.
pub async fn connect(cfg: &RunConfig) -> Result<Fleet, FleetError> {
    // The embedded monitors' targets checked first: a bad --monitor-pid is said before any waiting.
    let mut embedded = Vec::new();
    if let Some(w) = &cfg.monitor {
        embedded.push(embedded_monitor(w, None, cfg.monitor_processes)?);
    }
    for p in &cfg.paired {
        embedded.push(embedded_monitor(
            &p.watch,
            Some(&p.target),
            cfg.monitor_processes,
        )?);
    }
    let stop = CancellationToken::new();
    // Dropped on an error, the fleet cancels `stop`: the heartbeats and the join server end.
    let mut fleet = Fleet::empty(stop.clone());
    let token = cfg.token.as_deref();
    let tls = cfg.tls.as_ref();
    if let Some(join) = &cfg.join {
        // The join server lives as long as the fleet: its streams are the agents' links.
        accept_joins(&mut fleet, join, tls, token, stop.clone()).await?;
    }
    // Only monitors joined (--expect-monitors without --expect-agents): the embedded agent loads.
    let joined_load = cfg.join.as_ref().is_some_and(|j| j.expect > 0);
    if !cfg.agents.is_empty() {
        let peers = Peers {
            expect: Expect::Load,
            tls,
            token,
            quiet: cfg.quiet,
        };
        dial_all(&mut fleet, &cfg.agents, peers, cfg.dial_wait).await?;
    } else if !joined_load {
        let engine = Arc::new(Engine::start(cfg.threads)?);
        // The embedded agent stops when its link is dropped at the end of the run, like a remote one.
        let link = agent::embedded(engine, CancellationToken::new());
        let i = fleet.add(EMBEDDED.to_string(), Expect::Load, link);
        fleet
            .greet(&[i], token, Instant::now() + GREETING_TIMEOUT)
            .await?;
    }
    let peers = Peers {
        expect: Expect::Monitor,
        tls,
        token,
        quiet: cfg.quiet,
    };
    dial_all(&mut fleet, &cfg.monitors, peers, None).await?;
    let mut greeted = Vec::new();
    for (name, link) in embedded {
        greeted.push(fleet.add(name, Expect::Monitor, link));
    }
    if !greeted.is_empty() {
        fleet
            .greet(&greeted, token, Instant::now() + GREETING_TIMEOUT)
            .await?;
    }
    Ok(fleet)
}

/// How the peers of one flag are dialed and greeted.
#[derive(Clone, Copy)]
struct Peers<'a> {
    expect: Expect,
    tls: Option<&'a control::mtls::TlsFiles>,
    token: Option<&'a str>,
    /// `--quiet`: the waits go unsaid.
    quiet: bool,
}

/// When a wait of `wait` from now ends, for a person: `until 05:20:12 UTC (10 s)`.
pub(crate) fn until(wait: Duration) -> String {
    let at = humantime::format_rfc3339_seconds(std::time::SystemTime::now() + wait).to_string();
    // 2026-12-06T05:20:12Z: the time of day is what a person waiting compares with.
    let time = at.get(11..19).unwrap_or(&at);
    format!("until {time} UTC ({})", crate::progress::span(wait))
}

/// The embedded agent's name.
pub const EMBEDDED: &str = "embedded";

/// A monitor in this process watching `watch`, over a `Link` as the embedded agent is: the monitor
/// role's own session, so it greets, samples and refuses load as a remote one does. Its target is
/// opened once here, so that a pid that does not exist is an error before the run (the session
/// opens it again for itself). Named as its columns will be: the target it is `paired` with
/// (`--monitor-target`), else `server` for a pid (which changes from run to run, while scripts and
/// `stampede compare` read columns by name), the process name, or the cgroup's last component.
fn embedded_monitor(
    watch: &monitor::Watch,
    paired: Option<&str>,
    most: usize,
) -> Result<(String, CoordinatorEnd), FleetError> {
    use monitor::Watch;
    use monitor::session::{self, Monitor};
    let flag = match (paired, watch) {
        (Some(target), _) => format!(
            "--monitor-target {target}={}",
            crate::config::pairing::spelled(watch)
        ),
        (None, Watch::Pid(_)) => "--monitor-pid".into(),
        (None, Watch::Process(_)) => "--monitor-process".into(),
        (None, Watch::Cgroup(_) | Watch::Container(_)) => "--monitor-cgroup".into(),
    };
    let name = match (paired, watch) {
        (Some(target), _) => target.to_string(),
        (None, Watch::Pid(_)) => "server".to_string(),
        (None, Watch::Process(name) | Watch::Container(name)) => name.clone(),
        (None, Watch::Cgroup(path)) => path
            .file_name()
            .map_or("cgroup".into(), |n| n.to_string_lossy().into_owned()),
    };
    let open = session::opener_allowing(watch.clone(), most);
    let opened = open().map_err(|e| {
        let more = match watch {
            Watch::Process(_) if e.contains("running processes are named") => {
                " (or, if all of them are meant, --monitor-processes N)"
            }
            _ => "",
        };
        FleetError::Setup(format!("{flag}: {e}{more}"))
    })?;
    if let Watch::Process(_) = watch {
        // A name matches whatever runs under it: which pids it is, said before the run.
        eprintln!("stampede: {flag} watches {}", opened.info(None).watching);
    }
    let monitor = Arc::new(Monitor {
        name: Some(name.clone()),
        open,
    });
    let (coordinator, end) = link::pair();
    tokio::spawn(async move {
        let rules = Arc::new(control::admission::Rules::default());
        let shutdown = CancellationToken::new();
        if let Err(e) = session::serve(monitor, rules, end, EMBEDDED.into(), shutdown).await {
            tracing::warn!(error = %e, "Embedded monitor session ended");
        }
    });
    Ok((name, coordinator))
}

/// Dials the peers `specs` names (agents or monitors alike), each added to `fleet` named by its
/// address and greeted at once; with `wait` (`--expect-agents`), until that many answer.
async fn dial_all(
    fleet: &mut Fleet,
    specs: &[AgentSpec],
    peers: Peers<'_>,
    wait: Option<DialWait>,
) -> Result<(), FleetError> {
    let deadline = Instant::now() + wait.map_or(DIAL_WAIT, |w| w.wait);
    let addrs = match wait {
        Some(wait) => expected(specs, wait, deadline, peers.quiet).await?,
        None => resolve(specs).await?,
    };
    let stop = fleet.stopper();
    for (name, addr, domain) in addrs {
        // Said once, when the first attempt fails: a silent wait of 10 s (or --wait-agents) looks
        // like a hang.
        let said = std::cell::Cell::new(peers.quiet);
        let (link, greet_by) = patiently_until(
            deadline,
            || remote(&name, addr, &domain, peers.tls, Some((peers.token, &stop))),
            |e| {
                let again = matches!(e, FleetError::Unreachable { .. });
                if again && !said.replace(true) {
                    let left = deadline.saturating_duration_since(Instant::now());
                    eprintln!("stampede: {e}; trying again {}", until(left));
                }
                again
            },
        )
        .await?;
        let i = fleet.add_dialed(name, peers.expect, link);
        fleet.hello_replies(&[i], greet_by).await?;
    }
    Ok(())
}

/// An agent to dial: its name, its address, and the name its certificate must carry.
type Dialed = (String, SocketAddr, String);

/// The peers `specs` names, looked up once (a `dns://` name retried while it does not resolve).
async fn resolve(specs: &[AgentSpec]) -> Result<Vec<Dialed>, FleetError> {
    let mut addrs: Vec<Dialed> = Vec::new();
    for spec in specs {
        match spec {
            AgentSpec::Addr(a) => {
                let addr = tokio::net::lookup_host(a.as_str())
                    .await
                    .ok()
                    .and_then(|mut it| it.next())
                    .ok_or_else(|| FleetError::Unreachable {
                        agent: a.clone(),
                        why: "the name does not resolve".into(),
                    })?;
                addrs.push((a.clone(), addr, host_of(a).to_string()));
            }
            AgentSpec::Dns(name) => {
                let lookup = || async {
                    tokio::net::lookup_host(name.as_str())
                        .await
                        .map(|it| it.collect::<Vec<SocketAddr>>())
                };
                let mut found =
                    patiently(lookup, |_| true)
                        .await
                        .map_err(|e| FleetError::Unreachable {
                            agent: format!("dns://{name}"),
                            why: e.to_string(),
                        })?;
                found.sort();
                found.dedup();
                if found.is_empty() {
                    return Err(FleetError::Unreachable {
                        agent: format!("dns://{name}"),
                        why: "no A or AAAA record".into(),
                    });
                }
                let host = host_of(name);
                addrs.extend(
                    found
                        .into_iter()
                        .map(|a| (a.to_string(), a, host.to_string())),
                );
            }
        }
    }
    Ok(addrs)
}
/// `--expect-agents N` with `--agents`: the agents looked up again every 500 ms until there are at
/// least N, until `deadline`. A `dns://` name of a fleet still starting (a StatefulSet whose pods
/// are not all ready) has fewer records than it will have: taking the first lookup would run short.
async fn expected(
    agents: &[AgentSpec],
    wait: DialWait,
    deadline: Instant,
    quiet: bool,
) -> Result<Vec<Dialed>, FleetError> {
    let mut said = quiet;
    loop {
        let (found, why) = match resolve(agents).await {
            Ok(found) if found.len() >= wait.expect => return Ok(found),
            Ok(found) => (found.len(), None),
            Err(e @ FleetError::Unreachable { .. }) => (0, Some(e.to_string())),
            Err(e) => return Err(e),
        };
        if !said {
            said = true;
            let left = deadline.saturating_duration_since(Instant::now());
            eprintln!(
                "stampede: waiting for {} agents at {} ({found} found so far) {}",
                wait.expect,
                names(agents),
                until(left)
            );
        }
        if Instant::now() >= deadline {
            let last = why.map_or_else(String::new, |w| format!(" (last lookup: {w})"));
            return Err(FleetError::Unreachable {
                agent: format!("{} expected at {}", wait.expect, names(agents)),
                why: format!(
                    "{found} found within --wait-agents {}{last}",
                    humantime::format_duration(wait.wait)
                ),
            });
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// `--agents` as a person wrote it, for a message.
fn names(agents: &[AgentSpec]) -> String {
    let names: Vec<String> = agents
        .iter()
        .map(|a| match a {
            AgentSpec::Addr(a) => a.clone(),
            AgentSpec::Dns(name) => format!("dns://{name}"),
        })
        .collect();
    names.join(",")
}

/// Runs `attempt` again every 250 ms while it fails in a way `retry` accepts, for up to `DIAL_WAIT`,
/// then gives its last result. Agents started together with the coordinator (docker compose) may
/// need a moment before their name resolves and before they listen.
pub(crate) async fn patiently<T, E, F: std::future::Future<Output = Result<T, E>>>(
    attempt: impl FnMut() -> F,
    retry: impl Fn(&E) -> bool,
) -> Result<T, E> {
    patiently_until(Instant::now() + DIAL_WAIT, attempt, retry).await
}

/// [`patiently`] until `deadline` (`--wait-agents` when the run waits for its agents).
async fn patiently_until<T, E, F: std::future::Future<Output = Result<T, E>>>(
    deadline: Instant,
    mut attempt: impl FnMut() -> F,
    retry: impl Fn(&E) -> bool,
) -> Result<T, E> {
    loop {
        match attempt().await {
            Err(e) if retry(&e) && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
            done => return done,
        }
    }
}

/// Opens the control stream to a listening agent and adapts it to a `Link`, with the instant its
/// greeting must be answered by ([`GREETING_TIMEOUT`] from the dial: connect, TLS, HTTP/2, the
/// stream's headers and the hello reply together). Only an agent that does not answer yet is
/// `Unreachable` (worth dialing again); one that answers and disagrees (TLS on one side only, a
/// certificate) is `Refused`; one that accepts and then says nothing is `Mute`. With `greet` (the
/// token, and what ends the heartbeats), the hello and the heartbeats go out with the request, before
/// its response headers are back: over a slow link (450 ms each way) the agent hears the coordinator
/// within its dead-man switch from the moment its stream opens.
pub(crate) async fn remote(
    name: &str,
    addr: SocketAddr,
    domain: &str,
    tls: Option<&control::mtls::TlsFiles>,
    greet: Option<(Option<&str>, &CancellationToken)>,
) -> Result<(CoordinatorEnd, Instant), FleetError> {
    let deadline = Instant::now() + GREETING_TIMEOUT;
    let mute = |_| FleetError::Mute {
        agent: name.to_string(),
        secs: GREETING_TIMEOUT.as_secs(),
    };
    let dialer = Dialer::new(Side::Agent, &addr.to_string(), domain, tls).map_err(|e| match e {
        DialError::Tls(e) => setup_error(e),
        e => FleetError::Unreachable {
            agent: name.to_string(),
            why: e.to_string(),
        },
    })?;
    // Refused below the session (a certificate, a gRPC status): the fleet's setup to fix.
    let refused = |message: String| FleetError::Refused {
        agent: name.to_string(),
        kind: shared::refusal::RefusalKind::Setup,
        message,
    };
    // The connect timeout bounds TCP; a peer that accepts and then stalls TLS is bounded here.
    let mut client = tokio::time::timeout_at(deadline, dialer.agent())
        .await
        .map_err(mute)?
        .map_err(|e| match e {
            DialError::Refused(why) | DialError::Distrusted(why) => refused(why),
            e => FleetError::Unreachable {
                agent: name.to_string(),
                why: e.to_string(),
            },
        })?;
    let (down_tx, down_rx) = link::channel();
    if let Some((token, stop)) = greet {
        // A fresh channel of LINK_CAPACITY: the hello does not wait. The heartbeat ends with the
        // stream if this call fails.
        let _ = down_tx.send(super::hello(token)).await;
        super::keep_alive(down_tx.clone(), stop.clone());
    }
    // The call waits for the response headers, which a peer that never speaks never sends.
    let response = tokio::time::timeout_at(deadline, client.control(link::request_stream(down_rx)))
        .await
        .map_err(mute)?
        .map_err(|status| refused(dialer.refused(&status)))?;
    let link = Link {
        tx: down_tx,
        rx: link::read_stream(response.into_inner()),
    };
    Ok((link, deadline))
}

/// The coordinator's side of `Coordinator.Join`: each joining agent's stream becomes a `Link`, once
/// the peer has proved the token (`control::dial::challenge_join`).
pub(crate) struct JoinService {
    joined: mpsc::Sender<(String, CoordinatorEnd)>,
    token: Option<Arc<str>>,
}

#[tonic::async_trait]
impl CoordinatorSvc for JoinService {
    type JoinStream = link::ResponseStream<pb::CoordinatorMessage>;

    async fn join(
        &self,
        request: tonic::Request<tonic::Streaming<pb::AgentMessage>>,
    ) -> Result<tonic::Response<Self::JoinStream>, tonic::Status> {
        // Plain text on a TLS port: refused in words (and logged when it connected).
        let name = Peer::admit(&request)?.addr.to_string();
        let full = "this run has all the agents it expects";
        if self.joined.capacity() == 0 || self.joined.is_closed() {
            log_refused(Side::Coordinator, &name, &full);
            return Err(tonic::Status::resource_exhausted(full));
        }
        let (down_tx, down_rx) = link::channel();
        let inbound = link::read_peer_stream(request.into_inner(), Side::Coordinator, name.clone());
        let mut end = Link {
            tx: down_tx,
            rx: inbound,
        };
        // The handshake runs on the stream this call returns: apart, so the call can return.
        let (joined, token) = (self.joined.clone(), self.token.clone());
        tokio::spawn(async move {
            let proof = match dial::challenge_join(&mut end, token.as_deref()).await {
                Ok(proof) => proof,
                Err(why) => return log_refused(Side::Coordinator, &name, &why),
            };
            // Proven; taken if there is still room, else told so instead of the proof, so that it
            // does not take the refusal for a session that ran.
            let Ok(permit) = joined.try_reserve() else {
                let reason = format!("the coordinator refused this agent: {full}");
                let abort = Down::Abort(pb::Abort { reason });
                let _ = end.tx.send(proto::to_agent(abort)).await;
                return log_refused(Side::Coordinator, &name, &full);
            };
            if end.tx.send(proof).await.is_ok() {
                permit.send((name, end));
            }
        });
        Ok(tonic::Response::new(link::response_stream(down_rx)))
    }
}

/// Serves `Coordinator.Join` until `expect` agents have joined `fleet` and been greeted, or fails
/// after `wait`. Each is greeted as it joins and heartbeaten from then on; one whose link closes
/// before the run starts leaves its place to the next that joins (its own re-dial, as a rule), so
/// an agent that dials again is not counted twice.
pub(crate) async fn accept_joins(
    fleet: &mut Fleet,
    join: &crate::config::JoinSpec,
    tls: Option<&control::mtls::TlsFiles>,
    token: Option<&str>,
    stop: CancellationToken,
) -> Result<(), FleetError> {
    let tls = tls
        .map(control::mtls::TlsFiles::server)
        .transpose()
        .map_err(setup_error)?;
    let listener = tokio::net::TcpListener::bind(join.listen)
        .await
        .map_err(|e| setup_error(format!("cannot listen on {}: {e}", join.listen)))?;
    // The bound address: the port the kernel chose for `:0`.
    let listen = listener.local_addr().unwrap_or(join.listen);
    // Agents and monitors join alike; their hellos tell them apart (`Fleet::check_joined`).
    let expect = join.expect + join.monitors;
    let (joined_tx, mut joined_rx) = mpsc::channel(expect);
    let server = proto::pb::coordinator_server::CoordinatorServer::new(JoinService {
        joined: joined_tx,
        token: token.map(Arc::from),
    })
    .max_decoding_message_size(MAX_MESSAGE_BYTES)
    .max_encoding_message_size(MAX_MESSAGE_BYTES);
    let incoming = listener::incoming(listener, tls, Side::Coordinator);
    let shutdown = stop.clone();
    tokio::spawn(async move {
        let served = tonic::transport::Server::builder()
            .add_service(server)
            .serve_with_incoming_shutdown(incoming, shutdown.cancelled())
            .await;
        if let Err(e) = served {
            tracing::warn!(error = %e, "Join server failed");
        }
    });
    let monitors = match join.monitors {
        0 => String::new(),
        1 => " and 1 monitor".into(),
        n => format!(" and {n} monitors"),
    };
    let waiting = match join.expect {
        0 => format!("{} monitors", join.monitors).replace("1 monitors", "1 monitor"),
        n => format!("{n} agents{monitors}"),
    };
    eprintln!(
        "stampede: waiting for {waiting} to join on {listen} {}",
        until(join.wait)
    );
    if let Some(path) = &join.ready_file {
        shared::ready::write(path, listen).map_err(|e| {
            stop.cancel();
            setup_error(e)
        })?;
    }
    let deadline = Instant::now() + join.wait;
    while fleet.joined() < expect {
        let joined = tokio::select! {
            joined = tokio::time::timeout_at(deadline, joined_rx.recv()) => joined,
            (i, heard) = fleet.next_event() => {
                if let Err(why) = heard {
                    fleet.mark_lost(i, &format!("{why} before the run started"));
                }
                continue;
            }
        };
        let Ok(Some((name, link))) = joined else {
            stop.cancel();
            return Err(FleetError::Unreachable {
                agent: format!("{expect} expected on {listen}"),
                why: format!("only {} joined within {:?}", fleet.joined(), join.wait),
            });
        };
        let i = match fleet.vacant() {
            Some(i) => {
                fleet.replace(i, name, link);
                i
            }
            None => fleet.add(name, Expect::Either, link),
        };
        match fleet
            .greet(&[i], token, Instant::now() + GREETING_TIMEOUT)
            .await
        {
            Ok(()) => {}
            // Gone or mute before it said who it is: its place waits for the next that joins.
            Err(e @ (FleetError::Lost { .. } | FleetError::Mute { .. })) => {
                tracing::warn!(error = %e, "A joined peer left before its greeting was answered");
                fleet.mark_lost(i, "its greeting was not answered");
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// A local setup problem (unreadable certificates, a bad TLS configuration): the user's to fix, exit 2.
fn setup_error(e: impl std::fmt::Display) -> FleetError {
    FleetError::Setup(e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proto::pb::agent_message::Kind as Up;

    /// The join port's address, once `ready` says it is bound.
    async fn bound(ready: &std::path::Path) -> String {
        for _ in 0..100 {
            if let Ok(line) = std::fs::read_to_string(ready) {
                let v: serde_json::Value = serde_json::from_str(&line).unwrap();
                return v["listen"].as_str().unwrap().to_string();
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("the join port is not bound within 5 s");
    }

    /// Joins `addr` as an agent holding `token` and runs the handshake: the link, or why not.
    async fn join_as_agent(addr: &str, token: &str) -> Result<control::link::AgentEnd, String> {
        let mut client =
            pb::coordinator_client::CoordinatorClient::connect(format!("http://{addr}"))
                .await
                .unwrap();
        let (up, up_rx) = link::channel();
        let down = client
            .join(link::request_stream(up_rx))
            .await
            .map_err(|s| s.message().to_string())?
            .into_inner();
        let mut end = Link {
            tx: up,
            rx: link::read_stream(down),
        };
        dial::prove_join(&mut end, Some(token)).await?;
        Ok(end)
    }

    #[tokio::test]
    async fn an_agent_joining_after_the_run_has_its_agents_is_refused_in_words() {
        let dir = tempfile::tempdir().unwrap();
        let ready = dir.path().join("ready");
        let join = crate::config::JoinSpec {
            listen: "127.0.0.1:0".parse().unwrap(),
            expect: 1,
            monitors: 0,
            wait: Duration::from_secs(5),
            ready_file: Some(ready.clone()),
        };
        let stop = CancellationToken::new();
        let serving = stop.clone();
        let served = tokio::spawn(async move {
            let mut fleet = Fleet::empty(serving.clone());
            accept_joins(&mut fleet, &join, None, Some("s3cret"), serving)
                .await
                .map(|()| fleet)
        });
        let addr = bound(&ready).await;
        let kept = join_as_agent(&addr, "s3cret").await.unwrap();
        // A real agent session on the proven link answers the fleet's greeting.
        let engine = Arc::new(Engine::start(1).unwrap());
        let rules = Arc::new(control::admission::Rules::default());
        let session = CancellationToken::new();
        tokio::spawn(agent::session::serve(
            engine,
            rules,
            kept,
            "coordinator".into(),
            session.clone(),
        ));
        let fleet = served.await.unwrap().unwrap();
        assert_eq!(fleet.joined(), 1);
        // The join port still serves (as long as the fleet): a second agent is turned away in words.
        let Err(why) = join_as_agent(&addr, "s3cret").await else {
            panic!("a second agent was taken");
        };
        assert!(why.contains("has all the agents it expects"), "{why}");
        stop.cancel();
    }

    #[tokio::test]
    async fn a_stranger_joining_without_the_token_is_refused_and_never_sent_it() {
        let dir = tempfile::tempdir().unwrap();
        let ready = dir.path().join("ready");
        let join = crate::config::JoinSpec {
            listen: "127.0.0.1:0".parse().unwrap(),
            expect: 1,
            monitors: 0,
            wait: Duration::from_secs(3),
            ready_file: Some(ready.clone()),
        };
        let served = tokio::spawn(async move {
            let stop = CancellationToken::new();
            let mut fleet = Fleet::empty(stop.clone());
            // As a run goes on: whoever joins is greeted as it joins.
            accept_joins(&mut fleet, &join, None, Some("s3cret"), stop).await
        });
        let addr = bound(&ready).await;
        let mut client =
            pb::coordinator_client::CoordinatorClient::connect(format!("http://{addr}"))
                .await
                .unwrap();
        let (up, up_rx) = mpsc::channel(4);
        let mut down = client
            .join(tokio_stream::wrappers::ReceiverStream::new(up_rx))
            .await
            .unwrap()
            .into_inner();
        // Everything the coordinator sends, as bytes on the wire, until it ends the stream.
        let (mut wire, mut sent) = (Vec::new(), Vec::new());
        let until = Instant::now() + Duration::from_secs(4);
        while let Ok(Ok(Some(msg))) = tokio::time::timeout_at(until, down.message()).await {
            wire.extend(prost::Message::encode_to_vec(&msg));
            if let Some(Down::Hello(h)) = &msg.kind
                && !h.join_challenge.is_empty()
            {
                // A guess, not a proof.
                let guess = pb::JoinProof {
                    nonce: vec![7; control::admission::join::NONCE_BYTES],
                    mac: vec![0; 32],
                };
                up.send(proto::from_agent(Up::JoinProof(guess)))
                    .await
                    .unwrap();
            }
            sent.extend(msg.kind);
        }
        assert!(
            !wire.windows(6).any(|w| w == b"s3cret"),
            "the stranger was sent the token: {sent:?}"
        );
        let refused = sent
            .iter()
            .any(|k| matches!(k, Down::Abort(a) if a.reason.contains("its token does not match")));
        assert!(refused, "{sent:?}");
        let e = served.await.unwrap().unwrap_err().to_string();
        assert!(e.contains("only 0 joined"), "{e}");
    }

    /// `expected` for two loopback agents with `--expect-agents expect --wait-agents 5s`, and how long
    /// it took (in paused time).
    async fn expect_of_two(expect: usize) -> (Result<Vec<Dialed>, FleetError>, Duration) {
        let agents = ["127.0.0.1:9", "[::1]:9"].map(|a| AgentSpec::Addr(a.to_string()));
        let wait = DialWait {
            expect,
            wait: Duration::from_secs(5),
        };
        let started = Instant::now();
        let found = expected(&agents, wait, started + wait.wait, true).await;
        (found, started.elapsed())
    }

    #[tokio::test(start_paused = true)]
    async fn expected_agents_are_waited_for_until_the_deadline_then_counted_in_words() {
        let (found, took) = expect_of_two(3).await;
        let e = found.unwrap_err().to_string();
        assert!(took >= Duration::from_secs(5), "gave up early: {e}");
        assert_eq!(
            e,
            "agent 3 expected at 127.0.0.1:9,[::1]:9 is unreachable: 2 found within --wait-agents 5s"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn expected_agents_found_end_the_wait_at_once() {
        let (found, took) = expect_of_two(2).await;
        assert_eq!(took, Duration::ZERO);
        let names: Vec<String> = found.unwrap().into_iter().map(|(n, _, _)| n).collect();
        assert_eq!(names, ["127.0.0.1:9", "[::1]:9"]);
    }
}
