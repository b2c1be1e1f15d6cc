//! `stampede-agent --listen`: the control session served over gRPC. The stream is adapted to the same
//! in-process channels the embedded agent uses, so a remote run takes exactly the local code path.
//! Every coordinator it refuses is logged with its address and why (`Refused a coordinator`).
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;

use control::admission::Rules;
use control::dial::{DialError, Dialer};
use control::link::{self, AgentEnd, Link, MAX_MESSAGE_BYTES, Side};
use control::listener::{self, Peer};
use control::mtls::TlsFiles;
use control::policy::Policy;
use control::session::SessionError;
use monitor::session::Monitor;
use proto::pb;
use proto::pb::agent_server::{Agent, AgentServer};
use tokio_util::sync::CancellationToken;
use tonic::{Request, Response, Status, Streaming};

use crate::engine::Engine;
use crate::session;

#[derive(Debug, Clone)]
pub struct DaemonConfig {
    pub listen: SocketAddr,
    pub threads: usize,
    /// The bearer token coordinators must present; required to listen beyond loopback.
    pub token: Option<String>,
    /// What this agent agrees to do, whatever a coordinator asks.
    pub policy: Policy,
    /// Mutual TLS on the control channel.
    pub tls: Option<TlsFiles>,
    /// Where to say, once the port is bound, that the agent is ready (`--ready-file`).
    pub ready_file: Option<PathBuf>,
    /// `--exit-after-run`: end after the first admitted coordinator session (an agent run as a Job).
    pub exit_after_run: bool,
    /// `--monitor`: watch the server instead of sending load (no worker threads are started).
    pub monitor: Option<Monitor>,
}

/// What this daemon's sessions do: send load, or watch the server read-only.
#[derive(Clone)]
enum Duty {
    Load(Arc<Engine>),
    Monitor(Arc<Monitor>),
}

impl Duty {
    fn start(cfg: &DaemonConfig) -> Result<Duty, DaemonError> {
        Ok(match &cfg.monitor {
            Some(m) => Duty::Monitor(Arc::new(m.clone())),
            None => Duty::Load(Arc::new(Engine::start(cfg.threads)?)),
        })
    }

    async fn serve(
        &self,
        rules: Arc<Rules>,
        end: AgentEnd,
        peer: String,
        shutdown: CancellationToken,
    ) -> Result<(), SessionError> {
        match self {
            Duty::Load(engine) => session::serve(engine.clone(), rules, end, peer, shutdown).await,
            Duty::Monitor(m) => {
                monitor::session::serve(m.clone(), rules, end, peer, shutdown).await
            }
        }
    }
}

impl DaemonConfig {
    /// For the start-up line: "with 4 worker threads", "as a monitor".
    fn duty_words(&self) -> String {
        match &self.monitor {
            None => format!("with {} worker threads", self.threads),
            Some(_) => "as a monitor (read-only: it runs no load)".into(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error(
        "refusing to listen on {0} without a token: anyone who can reach it could {1}; \
         add --token-file FILE (or set STAMPEDE_TOKEN), or listen on 127.0.0.1"
    )]
    NotLoopback(SocketAddr, &'static str),
    #[error(
        "refusing to listen on {0} in plain text: beyond loopback the control channel needs mutual TLS; \
         add --tls-cert, --tls-key and --tls-ca (make them with `stampede certs init`), or listen on 127.0.0.1"
    )]
    PlainText(SocketAddr),
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error(transparent)]
    Engine(#[from] crate::engine::EngineError),
    #[error("gRPC server failed: {0}")]
    Serve(#[from] tonic::transport::Error),
    #[error("cannot join the coordinator at {0}")]
    Join(String),
    #[error(transparent)]
    Tls(#[from] control::mtls::TlsError),
    #[error(transparent)]
    Ready(#[from] shared::ready::ReadyError),
    #[error("the coordinator session ended in error (--exit-after-run): {0}")]
    Session(String),
}

/// `--exit-after-run`: the end of the first coordinator session that was admitted (its hello passed the
/// token and version check) ends the daemon, with an error when the session ended in one, so that an
/// agent can run as a Kubernetes Job (which completes on exit 0). A refused hello, or a peer that never
/// said one, is not its coordinator's run: the daemon keeps waiting.
#[derive(Debug, Clone, Default)]
struct AfterRun {
    ended: CancellationToken,
    error: Arc<Mutex<Option<String>>>,
}

impl AfterRun {
    fn end(&self, outcome: Result<(), String>) {
        if let Err(e) = outcome {
            let mut error = self.error.lock().unwrap_or_else(|p| p.into_inner());
            error.get_or_insert(e);
        }
        self.ended.cancel();
    }

    /// How the daemon ends: as its session did, or (no session ended: a signal) well.
    fn result(&self) -> Result<(), DaemonError> {
        match self.error.lock().unwrap_or_else(|p| p.into_inner()).take() {
            Some(e) => Err(DaemonError::Session(e)),
            None => Ok(()),
        }
    }
}

struct Service {
    duty: Duty,
    /// Their seat is shared: one coordinator at a time, taken by a valid hello; a second one is
    /// refused, not interleaved.
    rules: Arc<Rules>,
    shutdown: CancellationToken,
    after_run: Option<AfterRun>,
}

#[tonic::async_trait]
impl Agent for Service {
    type ControlStream = link::ResponseStream<pb::AgentMessage>;

    async fn control(
        &self,
        request: Request<Streaming<pb::CoordinatorMessage>>,
    ) -> Result<Response<Self::ControlStream>, Status> {
        // Plain text on a TLS port, or another role's certificate: refused in words (and logged
        // when it connected).
        let admitted = Peer::admit(&request)?;
        let peer = admitted.addr.to_string();
        // The session takes the seat, and admits the connection, only at a valid hello: a peer
        // without the token neither holds this agent nor keeps its connection.
        let rules = Arc::new(self.rules.at(admitted.admission()));
        let (out_tx, out_rx) = link::channel();
        let inbound = link::read_peer_stream(request.into_inner(), Side::Agent, peer.clone());
        let end = Link {
            tx: out_tx,
            rx: inbound,
        };
        let duty = self.duty.clone();
        let shutdown = self.shutdown.clone();
        let after_run = self.after_run.clone();
        tokio::spawn(async move {
            let outcome = duty.serve(rules.clone(), end, peer.clone(), shutdown).await;
            match &outcome {
                Ok(()) => tracing::info!(%peer, "Coordinator session ended"),
                Err(e) => tracing::warn!(%peer, error = %e, "Coordinator session ended"),
            }
            // A session whose hello was never admitted (a stranger's, a wrong token, a second
            // coordinator's) was not this agent's run.
            if let Some(after_run) = after_run.filter(|_| rules.was_admitted()) {
                after_run.end(outcome.map_err(|e| e.to_string()));
            }
        });
        Ok(Response::new(link::response_stream(out_rx)))
    }
}

/// Binds the listen address; split from [`serve`] so callers (and tests) learn the bound port.
pub async fn bind(cfg: &DaemonConfig) -> Result<tokio::net::TcpListener, DaemonError> {
    if !cfg.listen.ip().is_loopback() {
        if cfg.token.is_none() {
            let harm = match cfg.monitor {
                None => "aim load anywhere",
                Some(_) => "read what this host and its server are doing",
            };
            return Err(DaemonError::NotLoopback(cfg.listen, harm));
        }
        if cfg.tls.is_none() {
            return Err(DaemonError::PlainText(cfg.listen));
        }
    }
    tokio::net::TcpListener::bind(cfg.listen)
        .await
        .map_err(|source| DaemonError::Bind {
            addr: cfg.listen,
            source,
        })
}

/// Serves coordinators until `shutdown`; a running step is drained (its final interval still sent).
pub async fn serve(
    listener: tokio::net::TcpListener,
    cfg: &DaemonConfig,
    shutdown: CancellationToken,
) -> Result<(), DaemonError> {
    let service = Service {
        duty: Duty::start(cfg)?,
        rules: Arc::new(Rules {
            token: cfg.token.clone(),
            policy: cfg.policy.clone(),
            ..Rules::default()
        }),
        shutdown: shutdown.clone(),
        after_run: cfg.exit_after_run.then(AfterRun::default),
    };
    let after_run = service.after_run.clone();
    let ended = after_run.as_ref().map(|a| a.ended.clone());
    let stop = async move {
        match ended {
            Some(ended) => tokio::select! {
                _ = shutdown.cancelled() => {}
                _ = ended.cancelled() => {}
            },
            None => shutdown.cancelled().await,
        }
    };
    let server = AgentServer::new(service)
        .max_decoding_message_size(MAX_MESSAGE_BYTES)
        .max_encoding_message_size(MAX_MESSAGE_BYTES);
    let tls = cfg.tls.as_ref().map(TlsFiles::server).transpose()?;
    tonic::transport::Server::builder()
        .add_service(server)
        .serve_with_incoming_shutdown(listener::incoming(listener, tls, Side::Agent), stop)
        .await?;
    after_run.map_or(Ok(()), |a| a.result())
}

/// The first wait before dialing again after a failed join, doubled after each failure in a row.
const JOIN_RETRY_FIRST: Duration = Duration::from_secs(1);
/// The longest wait between joins: a coordinator started later is found within this, well inside
/// its --wait-agents (60 s by default).
const JOIN_RETRY_MOST: Duration = Duration::from_secs(10);

/// `stampede-agent --join ADDR`: dial the coordinator (no listening port on the agent, so it works
/// behind NAT) and serve its sessions, one after another, until `shutdown`. After a session it
/// dials again after 1 s; while none can be had it backs off (1 s, doubling to 10 s) and says each
/// reason once, not once a try.
pub async fn join(
    coordinator: String,
    cfg: DaemonConfig,
    shutdown: CancellationToken,
) -> Result<(), DaemonError> {
    control::system::raise_fd_limit();
    let duty = Duty::start(&cfg)?;
    let rules = Rules {
        token: cfg.token.clone(),
        policy: cfg.policy.clone(),
        ..Rules::default()
    };
    let dialer = Dialer::new(
        Side::Coordinator,
        &coordinator,
        control::mtls::host_of(&coordinator),
        cfg.tls.as_ref(),
    )
    .map_err(|e| DaemonError::Join(format!("{coordinator}: {e}")))?;
    eprintln!(
        "stampede-agent: joining the coordinator at {coordinator} {}",
        cfg.duty_words()
    );
    let mut wait = JOIN_RETRY_FIRST;
    // The last failure said, so the same one is not said again on every try.
    let mut said: Option<String> = None;
    while !shutdown.is_cancelled() {
        let rules = Arc::new(rules.for_session());
        let session = join_once(&dialer, &coordinator, &duty, &rules, shutdown.clone());
        let outcome = session.await;
        if cfg.exit_after_run
            && let Some(end) = end_after_run(&outcome, rules.was_admitted())
        {
            return end;
        }
        if rules.was_admitted() {
            wait = JOIN_RETRY_FIRST;
            said = None;
        }
        match outcome {
            Ok(()) => tracing::info!(%coordinator, "Coordinator session ended"),
            Err(failure) => say_join_failure(&coordinator, &failure, wait, &mut said),
        }
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = shutdown.cancelled() => {}
        }
        wait = (wait * 2).min(JOIN_RETRY_MOST);
    }
    Ok(())
}

/// Logs why a join failed, unless it is the failure said last.
fn say_join_failure(
    coordinator: &str,
    failure: &Joined,
    wait: Duration,
    said: &mut Option<String>,
) {
    let words = failure.to_string();
    if said.as_deref() != Some(words.as_str()) {
        let retry_s = wait.as_secs();
        match failure {
            // Both ends are up and disagree (TLS on one side only, a certificate): the user's
            // to fix.
            Joined::Dial(DialError::Refused(why)) => tracing::warn!(
                %coordinator, reason = %why, retry_s, "The coordinator refused this agent"
            ),
            Joined::Dial(DialError::Distrusted(why)) => tracing::warn!(
                %coordinator, reason = %why, retry_s, "This agent refused the coordinator"
            ),
            e => tracing::info!(
                %coordinator, error = %e, retry_s, "No session with the coordinator"
            ),
        }
        *said = Some(words);
    }
}

/// With `--exit-after-run`, how a joining agent ends after an attempt: after a session whose hello was
/// admitted (well or not), or not yet (the coordinator did not answer, refused, or its hello was refused:
/// it may be starting, or fixed meanwhile).
fn end_after_run(outcome: &Result<(), Joined>, admitted: bool) -> Option<Result<(), DaemonError>> {
    match outcome {
        _ if !admitted => None,
        Ok(()) => Some(Ok(())),
        Err(Joined::Session(e)) => Some(Err(DaemonError::Session(e.to_string()))),
        Err(Joined::Dial(_)) => None,
    }
}

/// How one attempt to join ended.
#[derive(Debug, thiserror::Error)]
enum Joined {
    #[error(transparent)]
    Dial(#[from] DialError),
    #[error(transparent)]
    Session(#[from] SessionError),
}

async fn join_once(
    dialer: &Dialer,
    coordinator: &str,
    duty: &Duty,
    rules: &Arc<Rules>,
    shutdown: CancellationToken,
) -> Result<(), Joined> {
    let mut client = dialer.coordinator().await?;
    let (up_tx, up_rx) = link::channel();
    let response = client
        .join(link::request_stream(up_rx))
        .await
        .map_err(|s| DialError::Refused(dialer.refused(&s)))?;
    let mut end = Link {
        tx: up_tx,
        rx: link::read_stream(response.into_inner()),
    };
    control::dial::prove_join(&mut end, rules.token.as_deref())
        .await
        .map_err(|why| DialError::Refused(format!("the join handshake failed: {why}")))?;
    // The coordinator proved the token in the handshake: the session's hello carries none. The
    // same admission mark, so `--exit-after-run` sees this session admitted.
    let proven = Arc::new(Rules {
        token: None,
        ..Rules::clone(rules)
    });
    let peer = coordinator.to_string();
    Ok(duty.serve(proven, end, peer, shutdown).await?)
}

/// `stampede-agent --listen`'s library entry point.
pub async fn run(cfg: DaemonConfig, shutdown: CancellationToken) -> Result<(), DaemonError> {
    control::system::raise_fd_limit();
    let listener = bind(&cfg).await?;
    let addr = listener.local_addr().map_err(|source| DaemonError::Bind {
        addr: cfg.listen,
        source,
    })?;
    eprintln!(
        "stampede-agent: listening on {addr} {}{}",
        cfg.duty_words(),
        if cfg.token.is_some() {
            ", token required"
        } else {
            ""
        }
    );
    if let Some(path) = &cfg.ready_file {
        shared::ready::write(path, addr)?;
    }
    serve(listener, &cfg, shutdown).await
}

#[cfg(test)]
mod tests;
