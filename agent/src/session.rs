//! One control session with a coordinator. A single task owns the session's state and consumes two
//! streams: commands from the coordinator and reports from the worker threads. The same code serves the
//! embedded agent (in-process channels) and remote ones (a gRPC stream adapted to the same channels).
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use proto::pb::agent_message::Kind as Up;
use proto::pb::coordinator_message::Kind as Down;
use proto::{PROTOCOL_VERSION, from_agent, pb};
use shared::metrics::{Interval, Snapshot};
use shared::plan::{StepShare, Workload};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::capacity::{Capacity, Route};
use crate::client::Target;
use crate::engine::Engine;
use crate::policy::Policy;
use crate::system;
use crate::worker::{self, INTERVAL, Job, Report};

/// Why a session ended early.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error("coordinator speaks protocol version {theirs}; this agent speaks {ours}")]
    Version { theirs: u32, ours: u32 },
    #[error("the coordinator's stream closed")]
    Closed,
    #[error("nothing heard from the coordinator for {0:?}; stopped all load")]
    Silent(Duration),
    #[error("{0}")]
    Auth(&'static str),
    #[error(transparent)]
    Engine(#[from] crate::engine::EngineError),
}

/// The two ends a coordinator holds to drive one agent.
pub struct Link {
    pub tx: mpsc::Sender<pb::CoordinatorMessage>,
    pub rx: mpsc::Receiver<pb::AgentMessage>,
}

/// Bound on queued control messages each way; a coordinator that stops reading slows the agent's
/// reports, it does not grow memory.
pub const LINK_CAPACITY: usize = 64;

/// Starts an agent session in this process and returns the coordinator's ends of its link.
pub fn embedded(engine: Arc<Engine>, shutdown: CancellationToken) -> Link {
    let (down_tx, down_rx) = mpsc::channel(LINK_CAPACITY);
    let (up_tx, up_rx) = mpsc::channel(LINK_CAPACITY);
    tokio::spawn(async move {
        if let Err(e) = serve(engine, Arc::new(Rules::default()), down_rx, up_tx, shutdown).await {
            tracing::warn!(error = %e, "Embedded agent session ended");
        }
    });
    Link {
        tx: down_tx,
        rx: up_rx,
    }
}

struct Running {
    step: u32,
    cancel: CancellationToken,
    reports: mpsc::Receiver<Report>,
    workers: usize,
    start: Instant,
    start_unix_ns: i64,
    /// Intervals received from some workers but not yet all.
    pending: BTreeMap<u32, (usize, Snapshot)>,
    next_seq: u32,
    done: usize,
    tail: Snapshot,
    began: Option<Instant>,
    end: Instant,
}

/// Silence from the coordinator after which an agent stops all load. The coordinator pings every
/// 500 ms, so this is three missed beats, and load stops within 2 s of losing the coordinator.
pub const DEAD_MAN: Duration = Duration::from_millis(1500);

/// Compares a presented token with the expected one without an early exit, so timing does not tell
/// an attacker how much of a guess was right.
fn token_matches(presented: &str, expected: &str) -> bool {
    let (a, b) = (presented.as_bytes(), expected.as_bytes());
    let mut diff = a.len() ^ b.len();
    for i in 0..a.len().max(b.len()) {
        let x = a.get(i).copied().unwrap_or(0);
        let y = b.get(i).copied().unwrap_or(0);
        diff |= usize::from(x ^ y);
    }
    diff == 0
}

/// What a coordinator must present (the token) and what this agent agrees to do (the policy).
#[derive(Debug, Clone, Default)]
pub struct Rules {
    pub token: Option<String>,
    pub policy: Policy,
}

struct Session {
    engine: Arc<Engine>,
    rules: Arc<Rules>,
    /// Scheduled time of the steps started in this session, for --max-run-duration.
    used: Duration,
    out: mpsc::Sender<pb::AgentMessage>,
    greeted: bool,
    target: Option<Target>,
    prepared: Option<Arc<StepShare>>,
    running: Option<Running>,
}

fn unix_ns_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i64)
}

/// Serves one coordinator until it says goodbye, its stream ends, or `shutdown` fires. On shutdown
/// the running step stops sending new requests and its final interval is still reported.
pub async fn serve(
    engine: Arc<Engine>,
    rules: Arc<Rules>,
    mut inbound: mpsc::Receiver<pb::CoordinatorMessage>,
    out: mpsc::Sender<pb::AgentMessage>,
    shutdown: CancellationToken,
) -> Result<(), SessionError> {
    let mut s = Session {
        engine,
        rules,
        used: Duration::ZERO,
        out,
        greeted: false,
        target: None,
        prepared: None,
        running: None,
    };
    let mut closing = false;
    let mut heard = Instant::now();
    loop {
        if closing && s.running.is_none() {
            return Ok(());
        }
        tokio::select! {
            // The dead-man switch: a coordinator that pings every 500 ms and has not been heard from
            // for longer than this is gone (crashed, or cut off without a FIN). Stop all load.
            _ = tokio::time::sleep_until(heard + DEAD_MAN), if !closing => {
                if let Some(r) = &s.running {
                    r.cancel.cancel();
                }
                return Err(SessionError::Silent(DEAD_MAN));
            }
            _ = shutdown.cancelled(), if !closing => {
                closing = true;
                if let Some(r) = &s.running {
                    r.cancel.cancel();
                }
            }
            msg = inbound.recv(), if !closing => match msg {
                Some(m) => {
                    heard = Instant::now();
                    s.handle(m).await?
                }
                None => {
                    // The coordinator is gone. Between steps that is a normal goodbye; during one,
                    // all load stops now.
                    return match &s.running {
                        Some(r) => {
                            r.cancel.cancel();
                            Err(SessionError::Closed)
                        }
                        None => Ok(()),
                    };
                }
            },
            rep = next_report(&mut s.running), if s.running.is_some() => match rep {
                Some(rep) => s.on_report(rep).await?,
                // Every worker's sender is gone without a final report (a worker thread died):
                // finish the step with what was reported rather than hang.
                None => s.finish_step().await?,
            },
        }
    }
}

async fn next_report(running: &mut Option<Running>) -> Option<Report> {
    match running {
        Some(r) => r.reports.recv().await,
        None => std::future::pending().await,
    }
}

impl Session {
    async fn send(&self, kind: Up) -> Result<(), SessionError> {
        self.out
            .send(from_agent(kind))
            .await
            .map_err(|_| SessionError::Closed)
    }

    async fn refuse(&self, message: String) -> Result<(), SessionError> {
        tracing::warn!(%message, "Refused a coordinator request");
        self.send(Up::Refusal(pb::Refusal { message })).await
    }

    async fn handle(&mut self, msg: pb::CoordinatorMessage) -> Result<(), SessionError> {
        let Some(kind) = msg.kind else {
            return self.refuse("empty message".into()).await;
        };
        match kind {
            Down::Hello(h) => {
                if h.protocol_version != PROTOCOL_VERSION {
                    let err = SessionError::Version {
                        theirs: h.protocol_version,
                        ours: PROTOCOL_VERSION,
                    };
                    self.refuse(err.to_string()).await?;
                    return Err(err);
                }
                if let Some(expected) = &self.rules.token {
                    let refusal = if h.token.is_empty() {
                        Some(
                            "this agent requires a token: give the coordinator --token-file or STAMPEDE_TOKEN",
                        )
                    } else if !token_matches(&h.token, expected) {
                        Some("the token does not match this agent's")
                    } else {
                        None
                    };
                    if let Some(why) = refusal {
                        self.refuse(why.to_string()).await?;
                        return Err(SessionError::Auth(why));
                    }
                }
                self.greeted = true;
                let policy = &self.rules.policy;
                let capacity = Capacity::of_this_machine(self.engine.threads());
                let (low, high) = capacity.port_range;
                let reply = pb::HelloReply {
                    protocol_version: PROTOCOL_VERSION,
                    agent_version: shared::VERSION.to_string(),
                    capabilities: Some(pb::Capabilities {
                        cores: system::cores() as u32,
                        threads: self.engine.threads() as u32,
                        fd_limit: capacity.fd_limit,
                        port_range_low: low,
                        port_range_high: high,
                        hostname: system::hostname(),
                        limits: Some(policy.into()),
                        tcp_tw_reuse: system::tcp_tw_reuse(),
                        source_addrs: true,
                    }),
                };
                self.send(Up::HelloReply(reply)).await
            }
            // Heartbeats may overtake the hello; answering them reveals nothing but the clock.
            Down::Ping(p) => {
                self.send(Up::Pong(pb::Pong {
                    id: p.id,
                    agent_unix_nanos: unix_ns_now(),
                }))
                .await
            }
            _ if !self.greeted => self.refuse("say hello first".into()).await,
            Down::Configure(c) => {
                if self.running.is_some() {
                    return self
                        .refuse("cannot reconfigure while a step runs".into())
                        .await;
                }
                let prepared = match Workload::try_from(&c) {
                    Ok(w) => match Target::prepare(&w).await {
                        // Checked on the resolved address, before any load is sent.
                        Ok(t) => self
                            .rules
                            .policy
                            .check_target(w.origin().host(), t.addr.ip())
                            .map(|()| t),
                        Err(e) => Err(e.to_string()),
                    },
                    Err(e) => Err(format!("invalid workload: {e}")),
                };
                match prepared {
                    Ok(t) => {
                        let warnings = missing_sources(&t);
                        for w in &warnings {
                            // Info, not warn: the coordinator prints it anyway, and in its process
                            // (the embedded agent) warn would say it twice.
                            tracing::info!(warning = %w, "Configured with a risk");
                        }
                        self.target = Some(t);
                        self.send(Up::Ack(pb::Ack {
                            what: "configure".into(),
                            step: 0,
                            warnings,
                        }))
                        .await
                    }
                    Err(e) => self.refuse(e).await,
                }
            }
            Down::PrepareStep(p) => {
                let Some(target) = &self.target else {
                    return self
                        .refuse("configure the workload before preparing a step".into())
                        .await;
                };
                let route = Route::of(target);
                if self.running.is_some() {
                    return self
                        .refuse(format!("step {} is still running", p.step + 1))
                        .await;
                }
                match StepShare::try_from(&p) {
                    Ok(share) => {
                        if let Err(why) = self.rules.policy.check_step(&share, self.used) {
                            return self.refuse(why).await;
                        }
                        // The machine's limits are read now, not at hello: ulimit and sysctls can change.
                        let warnings = match Capacity::of_this_machine(self.engine.threads())
                            .check_step(&share, &route)
                        {
                            Ok(w) => w,
                            Err(why) => return self.refuse(why).await,
                        };
                        for w in &warnings {
                            // Info for the same reason as at configure.
                            tracing::info!(step = p.step + 1, warning = %w, "Step accepted with a risk");
                        }
                        self.prepared = Some(Arc::new(share));
                        self.send(Up::Ack(pb::Ack {
                            what: "prepare".into(),
                            step: p.step,
                            warnings,
                        }))
                        .await
                    }
                    Err(e) => {
                        self.refuse(format!("invalid step {}: {e}", p.step + 1))
                            .await
                    }
                }
            }
            Down::StartStep(st) => self.start(st).await,
            Down::Abort(a) => {
                if let Some(r) = &self.running {
                    tracing::info!(step = r.step + 1, reason = %a.reason, "Step aborted by the coordinator");
                    r.cancel.cancel();
                }
                Ok(())
            }
        }
    }

    async fn start(&mut self, st: pb::StartStep) -> Result<(), SessionError> {
        let (Some(share), Some(target)) = (self.prepared.take(), self.target.clone()) else {
            return self
                .refuse(format!("step {} was not prepared", st.step + 1))
                .await;
        };
        if share.step() != st.step {
            return self
                .refuse(format!(
                    "step {} was prepared, not step {}",
                    share.step() + 1,
                    st.step + 1
                ))
                .await;
        }
        // The start instant comes on the wall clock; waiting happens on the monotonic clock.
        let now = Instant::now();
        let now_unix = unix_ns_now();
        // A start in the past means now; one more than a minute ahead is a clock problem, not a plan.
        let ahead_ns = st
            .start_unix_nanos
            .saturating_sub(now_unix)
            .clamp(0, 60_000_000_000);
        let start = now + Duration::from_nanos(ahead_ns as u64);
        self.used += share.scheduled_duration();
        let workers = self.engine.threads();
        let (tx, rx) = mpsc::channel(workers * 4);
        let cancel = CancellationToken::new();
        let jobs = (0..workers)
            .map(|w| Job {
                share: share.clone(),
                target: target.clone(),
                worker: w as u64,
                workers: workers as u64,
                start,
                cancel: cancel.clone(),
                out: tx.clone(),
            })
            .collect();
        self.engine.dispatch(jobs).await?;
        self.running = Some(Running {
            step: st.step,
            cancel,
            reports: rx,
            workers,
            start,
            start_unix_ns: now_unix + ahead_ns,
            pending: BTreeMap::new(),
            next_seq: 0,
            done: 0,
            tail: Snapshot::default(),
            began: None,
            end: start,
        });
        Ok(())
    }

    async fn on_report(&mut self, rep: Report) -> Result<(), SessionError> {
        let Some(r) = &mut self.running else {
            return Ok(());
        };
        let mut ready = Vec::new();
        match rep {
            Report::Interval { seq, snapshot, .. } => {
                let slot = r
                    .pending
                    .entry(seq)
                    .or_insert_with(|| (0, Snapshot::default()));
                slot.0 += 1;
                slot.1.add(&snapshot);
                // Emit, in order, every interval all workers have reported.
                while let Some(entry) = r.pending.first_entry() {
                    if *entry.key() != r.next_seq || entry.get().0 < r.workers {
                        break;
                    }
                    let (seq, (_, snapshot)) = entry.remove_entry();
                    ready.push(Interval {
                        step: r.step,
                        seq,
                        offset: INTERVAL * seq,
                        length: INTERVAL,
                        tail: false,
                        snapshot,
                    });
                    r.next_seq += 1;
                }
            }
            Report::Done {
                snapshot,
                began,
                end,
                ..
            } => {
                r.done += 1;
                r.tail.add(&snapshot);
                r.began = match (r.began, began) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                };
                r.end = r.end.max(end);
            }
        }
        for i in &ready {
            self.send(Up::Interval(i.into())).await?;
        }
        let r = self.running.as_mut().expect("checked above");
        if r.done < r.workers {
            return Ok(());
        }
        self.finish_step().await
    }

    /// Every worker is done: whatever was not reported as a full interval is the tail, so nothing
    /// measured is ever dropped. Then the step report.
    async fn finish_step(&mut self) -> Result<(), SessionError> {
        let Some(mut r) = self.running.take() else {
            return Ok(());
        };
        for (_, (_, snap)) in std::mem::take(&mut r.pending) {
            r.tail.add(&snap);
        }
        let offset = INTERVAL * r.next_seq;
        let tail = Interval {
            step: r.step,
            seq: r.next_seq,
            offset,
            length: r.end.saturating_duration_since(r.start + offset),
            tail: true,
            snapshot: r.tail,
        };
        self.send(Up::Interval((&tail).into())).await?;
        let began_unix_nanos = r.began.map_or(0, |f| {
            r.start_unix_ns + f.saturating_duration_since(r.start).as_nanos() as i64
        });
        self.send(Up::StepReport(pb::StepReport {
            step: r.step,
            began_unix_nanos,
            wall_us: r.end.saturating_duration_since(r.start).as_micros() as u64,
            aborted: r.cancel.is_cancelled() || r.done < r.workers,
            intervals: r.next_seq + 1,
        }))
        .await
    }
}

/// A warning naming the source addresses this machine does not have: every connection from them would
/// fail as addr-unavailable. Not a refusal: that is the run's result to report, in its error class.
fn missing_sources(target: &Target) -> Vec<String> {
    let mut missing = Vec::new();
    let mut why = String::new();
    for &source in target.sources.iter() {
        if let Err(e) = crate::socket::probe(source) {
            if why.is_empty() {
                why = e.to_string();
            }
            missing.push(source.to_string());
        }
    }
    if missing.is_empty() {
        return Vec::new();
    }
    const NAMED: usize = 5;
    let more = missing.len().saturating_sub(NAMED);
    missing.truncate(NAMED);
    let list = if more > 0 {
        format!("{} and {more} more", missing.join(", "))
    } else {
        missing.join(", ")
    };
    vec![format!(
        "this agent cannot bind --source-addrs {list} ({why}); connections from {} will fail as addr-unavailable",
        if missing.len() + more == 1 {
            "it"
        } else {
            "them"
        }
    )]
}

/// Re-exported so the agent binary and tests see one name for the interval length.
pub use worker::INTERVAL as REPORT_INTERVAL;

#[cfg(test)]
mod tests {
    use super::*;

    fn hello() -> Down {
        Down::Hello(pb::Hello {
            protocol_version: PROTOCOL_VERSION,
            coordinator_version: "test".into(),
            token: String::new(),
        })
    }

    #[tokio::test]
    async fn a_heartbeat_before_the_hello_is_answered_not_refused() {
        // Regression: the coordinator's first heartbeat could overtake its hello and fail the run.
        let engine = Arc::new(Engine::start(1).unwrap());
        let link = embedded(engine, CancellationToken::new());
        let Link { tx, mut rx } = link;
        tx.send(proto::to_agent(Down::Ping(pb::Ping { id: 0 })))
            .await
            .unwrap();
        tx.send(proto::to_agent(hello())).await.unwrap();
        assert!(matches!(rx.recv().await.unwrap().kind, Some(Up::Pong(_))));
        assert!(matches!(
            rx.recv().await.unwrap().kind,
            Some(Up::HelloReply(_))
        ));
    }

    #[tokio::test]
    async fn a_refusal_named_the_step_counted_from_0() {
        // The protocol's step ids are indexes; a person reads the step the table calls 2.
        let engine = Arc::new(Engine::start(1).unwrap());
        let Link { tx, mut rx } = embedded(engine, CancellationToken::new());
        tx.send(proto::to_agent(hello())).await.unwrap();
        assert!(matches!(
            rx.recv().await.unwrap().kind,
            Some(Up::HelloReply(_))
        ));
        tx.send(proto::to_agent(Down::StartStep(pb::StartStep {
            step: 1,
            start_unix_nanos: 0,
        })))
        .await
        .unwrap();
        match rx.recv().await.unwrap().kind {
            Some(Up::Refusal(r)) => assert_eq!(r.message, "step 2 was not prepared"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn tokens_compare_whole() {
        assert!(token_matches("s3cret", "s3cret"));
        assert!(!token_matches("s3cre", "s3cret"));
        assert!(!token_matches("s3cret!", "s3cret"));
        assert!(!token_matches("S3cret", "s3cret"));
        assert!(!token_matches("", "s3cret"));
    }
}
