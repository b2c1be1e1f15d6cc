//! What every agent-side control session shares, whichever its role (a load agent's or a
//! monitor's): the errors it ends with, the dead-man switch and the arrival stamps it is judged by,
//! and how a refusal is sent.
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use proto::pb;
use proto::pb::agent_message::Kind as Up;
use shared::refusal::{Refusal, RefusalKind};
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::link::{Closed, LINK_CAPACITY, LinkRx};

/// Why a session ended early.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error("coordinator speaks protocol version {theirs}; this agent speaks {ours}")]
    Version { theirs: u32, ours: u32 },
    #[error("the coordinator's stream closed")]
    Closed,
    #[error("the coordinator's stream broke: {0}")]
    Broken(String),
    #[error("nothing heard from the coordinator for {0:?}; stopped all load")]
    Silent(Duration),
    #[error("{0}")]
    Auth(&'static str),
    /// The stream was open this long without a valid hello: a stranger, or a coordinator that hung.
    #[error("no hello within {0:?} of opening the stream; closed it")]
    NoHello(Duration),
    /// A valid hello while another coordinator's session holds this agent.
    #[error("this agent is serving another coordinator")]
    Busy,
    /// The load agent's worker threads failed (boxed: this crate does not know the agent's engine).
    #[error(transparent)]
    Engine(Box<dyn std::error::Error + Send + Sync>),
    /// A monitor cannot read what it watches (the process is gone): the sensor's words.
    #[error("this monitor cannot watch what it was started for: {0}")]
    Watch(String),
}

impl SessionError {
    /// What a refusal that ends the session with this error is about.
    pub fn refusal_kind(&self) -> RefusalKind {
        match self {
            SessionError::Version { .. } | SessionError::Auth(_) | SessionError::Watch(_) => {
                RefusalKind::Setup
            }
            SessionError::Busy => RefusalKind::Busy,
            _ => RefusalKind::Other,
        }
    }

    /// The session ended before it took the agent's seat: no hello in time, or another
    /// coordinator's session held it.
    pub fn never_seated(&self) -> bool {
        matches!(self, SessionError::NoHello(_) | SessionError::Busy)
    }
}

/// Silence from the coordinator after which an agent stops all load. The coordinator pings every
/// 500 ms, so this is three missed beats, and load stops within 2 s of losing the coordinator
/// ([`STALL_GRACE`] later if this process was itself stopped past the deadline).
pub const DEAD_MAN: Duration = Duration::from_millis(1500);

/// A coordinator message, or why there will be none, with the instant it arrived.
pub type Arrival = (Instant, Result<pb::CoordinatorMessage, Closed>);

/// Reads the coordinator's side of the link beside the session loop and stamps each message as it
/// arrives: a heartbeat that came while the loop was busy (sending to a slow reader, starting a step)
/// counts from when it came, not from when the loop got to it, in both directions.
pub fn stamp_arrivals(mut inbound: LinkRx<pb::CoordinatorMessage>) -> mpsc::Receiver<Arrival> {
    let (tx, rx) = mpsc::channel(LINK_CAPACITY);
    tokio::spawn(async move {
        loop {
            let frame = tokio::select! {
                frame = inbound.recv() => frame,
                // The session ended: stop reading, so the coordinator's sends fail as they should.
                () = tx.closed() => return,
            };
            let last = frame.is_err();
            if tx.send((Instant::now(), frame)).await.is_err() || last {
                return;
            }
        }
    });
    rx
}

/// The wall clock in nanoseconds since the Unix epoch, as the protocol's clock samples carry it.
pub fn unix_ns_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i64)
}

/// A deadline passed by more than this when the loop was already waiting on it means the loop did not
/// run in the meantime: its process was stopped (SIGSTOP, a paused VM) or starved of CPU. Timers here
/// fire within a millisecond or so of their deadline; a stall of 2 s is late by half a second or more.
pub const STALL: Duration = Duration::from_millis(100);

/// How long a session back from a stall waits for its reader before judging its coordinator silent:
/// one of the coordinator's 500 ms ping periods, so a live coordinator's next ping comes within it
/// even if nothing of what it sent during the stall was left to read.
pub const STALL_GRACE: Duration = Duration::from_millis(500);

/// The dead-man switch's clock. Silence is judged from what arrived: [`DEAD_MAN`] after the stamp
/// of the last message. A stopped process's reader was stopped too, and what the coordinator sent
/// meanwhile sits unread in the socket when the process resumes, with the deadline already passed;
/// so a loop that finds it was itself stalled gives its reader [`STALL_GRACE`] to deliver before it
/// calls the coordinator silent. A coordinator truly gone still stops the load, one grace later.
pub struct DeadMan {
    /// When the last coordinator message arrived.
    heard: Instant,
    /// Until when the reader's grace after a stall runs.
    grace: Instant,
}

impl DeadMan {
    pub fn new(now: Instant) -> DeadMan {
        DeadMan {
            heard: now,
            grace: now,
        }
    }

    /// When the coordinator is silent unless something arrives.
    pub fn deadline(&self) -> Instant {
        (self.heard + DEAD_MAN).max(self.grace)
    }

    /// A message arrived at `at` (stamped by the reader).
    pub fn heard(&mut self, at: Instant) {
        self.heard = self.heard.max(at);
    }

    /// The loop woke, whatever woke it, after waiting since `waited_since` on the deadline `due`.
    /// Waiting past `due` by more than [`STALL`] means the process did not run: the reader's grace
    /// starts now. A loop busy elsewhere (sending to a slow reader) was not waiting, and the reader,
    /// which ran meanwhile, has stamped what came.
    pub fn woke(&mut self, waited_since: Instant, due: Instant) {
        let now = Instant::now();
        if waited_since < due && now > due + STALL {
            tracing::info!(
                late = ?(now - due),
                "This agent was not running past its dead-man deadline (stopped?); \
                 waiting for what its coordinator sent meanwhile"
            );
            self.grace = now + STALL_GRACE;
        }
    }

    /// Whether the coordinator has been silent past the deadline.
    pub fn silent(&self) -> bool {
        Instant::now() >= self.deadline()
    }
}

/// Builds a refusal, logged here because the coordinator's reading of it is out of our hands. Info,
/// not warn: the coordinator says every refusal it reads, and in its own process (the embedded agent,
/// whose log is the coordinator's stderr) a warn would say the first one twice.
pub fn refusal(kind: RefusalKind, message: impl Into<String>) -> Option<Up> {
    let r = Refusal::new(kind, message);
    tracing::info!(kind = ?r.kind, message = %r.message, "Refused a coordinator request");
    Some(Up::Refusal(pb::Refusal::from(&r)))
}
