//! The agents of a run as the run task sees them: who they are (name, role, announced limits), whether
//! they are alive, their clocks, and the coordinator's side of the protocol that is not about one step:
//! hello, configure, acknowledgements, clock offsets, heartbeats. Every agent's messages arrive on one
//! channel that the run task owns; the step asks the fleet questions instead of reaching into it.
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use control::link::{Closed, CoordinatorEnd, Link, LinkTx};
use proto::pb::agent_message::Kind as Up;
use proto::pb::coordinator_message::Kind as Down;
use proto::{PROTOCOL_VERSION, pb, to_agent};

use shared::plan::StepShare;
use shared::warning::Warning;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::output::AgentInfo;

mod clock;
mod dial;
mod error;
pub mod feed;
mod greeting;
mod monitor;
mod waiting;

use self::monitor::Watched;
pub use dial::{EMBEDDED, connect};
pub use error::FleetError;
pub use waiting::Waiting;

/// How long an agent may take to answer hello, configure or prepare.
pub const ANSWER_TIMEOUT: Duration = Duration::from_secs(15);
/// How long a peer that accepted the connection may take to answer the greeting: the control
/// stream's headers and the hello reply together. A peer that accepts TCP and never speaks would
/// otherwise hold the run silent.
pub const GREETING_TIMEOUT: Duration = Duration::from_secs(10);
/// Heartbeat period: the agent's dead-man switch fires after a few missed beats.
pub const HEARTBEAT: Duration = Duration::from_millis(500);
/// What the fleet is doing while it greets an agent, as its errors say.
const GREETING: &str = "greeting it";

pub fn unix_ns(t: SystemTime) -> i64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i64)
}

/// What an agent is in the run for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Sends the load: gets a share of every step.
    Load,
    /// Watches the server, read-only: never gets a share, never acknowledges a step.
    Monitor,
}

/// What a link was given as, so the role its hello says can be checked against it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// Named in `--agents`, or the embedded agent.
    Load,
    /// Named in `--monitors`, or the embedded monitor.
    Monitor,
    /// Joined the `--listen` port: either, counted after the hello.
    Either,
}

/// One agent as the run sees it.
struct AgentHandle {
    name: String,
    role: Role,
    expect: Expect,
    /// A monitor, once its hello reply said who it is.
    monitor: Option<Watched>,
    tx: LinkTx<pb::CoordinatorMessage>,
    info: Option<AgentInfo>,
    /// False once lost; a lost agent gets no more work.
    alive: bool,
    /// Agent clock minus coordinator clock, and the round trip it was measured over.
    clock_offset_ns: i64,
    rtt_ns: i64,
    /// When anything last arrived from it, stamped by its reader as it arrived (nanoseconds since
    /// the fleet's `epoch`): a run task busy elsewhere does not make a live agent look silent.
    heard: Arc<AtomicU64>,
    /// Whether its hello reply was taken.
    greeted: bool,
    /// The limits it announced; a plan over them is refused before any load is sent.
    policy: control::policy::Policy,
    /// Its socket limits (fd limit, ports, TIME_WAIT reuse), if it announced them.
    capacity: Option<control::machine::MachineLimits>,
    /// Whether it binds connections to `--source-addrs` (an older agent would ignore them).
    binds_sources: bool,
    /// The feeders whose rows it holds (`feed::ship`): a configure of the same feeders keeps them.
    fed: Vec<shared::plan::Feeder>,
    /// The hashed boot id its hello gave (empty from an older agent): a monitor with the same one
    /// watches the machine this agent loads from.
    machine_id: String,
}

/// An agent's message, or why its stream ended, as its reader queues it.
type Event = (usize, Result<pb::AgentMessage, Closed>);

pub struct Fleet {
    agents: Vec<AgentHandle>,
    events: mpsc::Receiver<Event>,
    /// Each agent's reader holds a clone; kept here so agents can be added as they are reached.
    events_tx: mpsc::Sender<Event>,
    /// What the agents' arrival stamps count from.
    epoch: Instant,
    /// Stops the heartbeat tasks when the run ends.
    stop: CancellationToken,
}

impl Drop for Fleet {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl Fleet {
    /// Load agents over these links. `stop` is cancelled when the fleet is dropped: it ends the
    /// heartbeats (and a join server).
    pub fn new(links: Vec<(String, CoordinatorEnd)>, stop: CancellationToken) -> Fleet {
        let links = links
            .into_iter()
            .map(|(name, link)| (name, Expect::Load, link))
            .collect();
        Fleet::with_roles(links, stop)
    }

    /// Agents and monitors over these links, each given as what it is expected to be.
    pub fn with_roles(
        links: Vec<(String, Expect, CoordinatorEnd)>,
        stop: CancellationToken,
    ) -> Fleet {
        let mut fleet = Fleet::empty(stop);
        for (name, expect, link) in links {
            fleet.add(name, expect, link);
        }
        fleet
    }

    /// A fleet of no agents yet: they are added as they are reached, each kept alive from then on.
    pub fn empty(stop: CancellationToken) -> Fleet {
        let (events_tx, events) = mpsc::channel(256);
        Fleet {
            agents: Vec::new(),
            events,
            events_tx,
            epoch: Instant::now(),
            stop,
        }
    }

    /// Takes an agent's link: from now on it is heartbeaten (its dead-man switch must not fire
    /// while the rest of the fleet is reached) and its messages are stamped as they arrive. Returns
    /// its index.
    pub fn add(&mut self, name: String, expect: Expect, link: CoordinatorEnd) -> usize {
        self.add_with(name, expect, link, true)
    }

    /// [`Fleet::add`] for a link whose dial already sent the hello and heartbeats it (see
    /// `dial::remote`).
    pub(crate) fn add_dialed(
        &mut self,
        name: String,
        expect: Expect,
        link: CoordinatorEnd,
    ) -> usize {
        self.add_with(name, expect, link, false)
    }

    /// What ends the heartbeats, the fleet's and those its dials start.
    pub(crate) fn stopper(&self) -> CancellationToken {
        self.stop.clone()
    }

    fn add_with(
        &mut self,
        name: String,
        expect: Expect,
        link: CoordinatorEnd,
        beat: bool,
    ) -> usize {
        let i = self.agents.len();
        let heard = Arc::new(AtomicU64::new(0));
        let cmd = self.spawn_link(i, link, &heard, beat);
        self.agents.push(AgentHandle {
            name,
            role: match expect {
                Expect::Monitor => Role::Monitor,
                Expect::Load | Expect::Either => Role::Load,
            },
            expect,
            monitor: None,
            tx: cmd,
            info: None,
            alive: true,
            clock_offset_ns: 0,
            rtt_ns: 0,
            heard,
            greeted: false,
            policy: control::policy::Policy::default(),
            capacity: None,
            binds_sources: false,
            machine_id: String::new(),
            fed: Vec::new(),
        });
        self.stamp(i);
        i
    }

    /// Puts a new link in agent `i`'s place (a joined agent that dialed again after its first link
    /// closed): the same agent, greeted anew.
    pub(crate) fn replace(&mut self, i: usize, name: String, link: CoordinatorEnd) {
        let heard = Arc::new(AtomicU64::new(0));
        let cmd = self.spawn_link(i, link, &heard, true);
        let a = &mut self.agents[i];
        a.name = name;
        a.tx = cmd;
        a.heard = heard;
        a.alive = true;
        a.greeted = false;
        a.monitor = None;
        a.info = None;
        a.role = Role::Load;
        a.fed.clear();
        self.stamp(i);
    }

    /// Starts the reader and (with `beat`) the heartbeat of agent `i`'s link; returns its sender.
    fn spawn_link(
        &self,
        i: usize,
        link: CoordinatorEnd,
        heard: &Arc<AtomicU64>,
        beat: bool,
    ) -> LinkTx<pb::CoordinatorMessage> {
        let Link { tx: cmd, mut rx } = link;
        let events = self.events_tx.clone();
        let (epoch, heard) = (self.epoch, heard.clone());
        tokio::spawn(async move {
            loop {
                let got = rx.recv().await;
                // Stamped here, before it waits in the queue behind others.
                heard.store(epoch.elapsed().as_nanos() as u64, Ordering::Relaxed);
                // A heartbeat's pong says only "alive", which the stamp has kept: not queued, so a
                // fleet being assembled or a busy run task does not fill the queue with them.
                if let Ok(pb::AgentMessage {
                    kind: Some(Up::Pong(pb::Pong { id: 0, .. })),
                }) = &got
                {
                    continue;
                }
                let gone = got.is_err();
                if events.send((i, got)).await.is_err() || gone {
                    return;
                }
            }
        });
        if beat {
            keep_alive(cmd.clone(), self.stop.clone());
        }
        cmd
    }

    fn stamp(&self, i: usize) {
        let now = self.epoch.elapsed().as_nanos() as u64;
        self.agents[i].heard.store(now, Ordering::Relaxed);
    }

    /// How many agents the run began with, lost ones included: the range of every agent index.
    pub fn len(&self) -> usize {
        self.agents.len()
    }

    pub fn is_empty(&self) -> bool {
        self.agents.is_empty()
    }

    /// The live load agents, in fleet order: who a step is split among.
    pub fn live(&self) -> Vec<usize> {
        (0..self.agents.len())
            .filter(|&i| self.agents[i].alive && self.agents[i].role == Role::Load)
            .collect()
    }

    /// The feeders whose rows agent `i`'s session holds.
    pub(crate) fn fed(&self, i: usize) -> &[shared::plan::Feeder] {
        &self.agents[i].fed
    }

    pub(crate) fn set_fed(&mut self, i: usize, feeders: &[shared::plan::Feeder]) {
        self.agents[i].fed = feeders.to_vec();
    }

    /// Makes agent `i` a monitor (or a load agent again); before the run splits its first step.
    pub fn set_role(&mut self, i: usize, role: Role) {
        self.agents[i].role = role;
    }

    pub fn is_alive(&self, i: usize) -> bool {
        self.agents[i].alive
    }

    pub fn role(&self, i: usize) -> Role {
        self.agents[i].role
    }

    pub fn name(&self, i: usize) -> &str {
        &self.agents[i].name
    }

    /// Every agent's name, in fleet order.
    pub fn names(&self) -> Vec<String> {
        self.agents.iter().map(|a| a.name.clone()).collect()
    }

    /// Its clock minus the coordinator's, as last measured.
    pub fn offset_ns(&self, i: usize) -> i64 {
        self.agents[i].clock_offset_ns
    }

    /// The round trip its clock offset was measured over.
    pub fn rtt(&self, i: usize) -> Duration {
        Duration::from_nanos(self.agents[i].rtt_ns.max(0) as u64)
    }

    /// When anything last arrived from it (its reader's stamp, not when the run task took it).
    pub fn heard_at(&self, i: usize) -> Instant {
        self.epoch + Duration::from_nanos(self.agents[i].heard.load(Ordering::Relaxed))
    }

    /// How long since anything arrived from it.
    pub fn silent_for(&self, i: usize) -> Duration {
        self.heard_at(i).elapsed()
    }

    pub fn infos(&self) -> Vec<AgentInfo> {
        self.agents.iter().filter_map(|a| a.info.clone()).collect()
    }

    pub fn threads(&self, i: usize) -> u32 {
        self.agents[i].info.as_ref().map_or(1, |a| a.threads)
    }

    pub fn cores(&self, i: usize) -> u32 {
        self.agents[i].info.as_ref().map_or(1, |a| a.cores)
    }

    /// The `--max-rate` agent `i` announced: a closed loop on it is paced at that.
    pub fn max_rate(&self, i: usize) -> Option<f64> {
        self.agents[i].policy.max_rate
    }

    /// Each agent's part of the load, for those in `who`: its `--agent-weights` entry, found by its
    /// name (never by its place in the fleet, which joins and monitors change), or its cores. `config`
    /// weighs every agent `--agents` lists, so the cores are the answer only without weights.
    pub fn weights(&self, who: &[usize], agent_weights: Option<&[(String, u64)]>) -> Vec<u64> {
        who.iter()
            .map(|&i| {
                agent_weights
                    .and_then(|w| w.iter().find(|(name, _)| *name == self.agents[i].name))
                    .map_or_else(|| u64::from(self.cores(i)), |(_, w)| *w)
            })
            .collect()
    }

    /// Whether agent `i` would take this share, by what it announced: its policy (`used` is the
    /// scheduled time of the steps before) and its sockets.
    pub fn check_share(
        &self,
        i: usize,
        share: &StepShare,
        used: Duration,
        route: &control::machine::Route,
    ) -> Result<(), FleetError> {
        let agent = &self.agents[i];
        let limit = |message| FleetError::Limit {
            agent: agent.name.clone(),
            message,
        };
        agent.policy.check_step(share, used).map_err(limit)?;
        if let Some(capacity) = &agent.capacity {
            capacity.check_step(share, route).map_err(limit)?;
        }
        Ok(())
    }

    /// Whether agent `i`'s announced policy (its --max-rate and the like) alone takes this share,
    /// whatever its sockets could carry.
    pub fn check_policy(&self, i: usize, share: &StepShare) -> Result<(), FleetError> {
        let agent = &self.agents[i];
        agent
            .policy
            .check_step(share, Duration::ZERO)
            .map_err(|message| FleetError::Limit {
                agent: agent.name.clone(),
                message,
            })
    }

    /// An agent too old to bind `--source-addrs` would send from its default address without a word.
    pub fn check_source_addrs(&self) -> Result<(), FleetError> {
        let mut load = self.agents.iter().filter(|a| a.role == Role::Load);
        match load.find(|a| !a.binds_sources) {
            Some(a) => Err(FleetError::Limit {
                agent: a.name.clone(),
                message: "it does not support --source-addrs (an older stampede-agent); upgrade it"
                    .into(),
            }),
            None => Ok(()),
        }
    }

    pub async fn send(&self, i: usize, kind: Down) -> Result<(), Closed> {
        self.agents[i].tx.send(to_agent(kind)).await
    }

    /// The next message from any agent, or why its stream ended. Empty messages say nothing and
    /// are passed over (but count as heard).
    pub async fn next_event(&mut self) -> (usize, Result<Up, Closed>) {
        loop {
            if let Some(event) = self.next_message().await {
                return event;
            }
        }
    }

    /// The next message from any agent, or `None` when it was the fleet's own to keep: a monitor's
    /// sample or its loss (no step waits on a monitor), or an empty message.
    async fn next_message(&mut self) -> Option<(usize, Result<Up, Closed>)> {
        let Some((i, heard)) = self.events.recv().await else {
            // The forwarders hold senders as long as the fleet lives; unreachable in practice.
            return std::future::pending().await;
        };
        let heard = match (self.agents[i].monitor.as_mut(), heard) {
            (
                Some(m),
                Ok(pb::AgentMessage {
                    kind: Some(Up::MonitorSample(s)),
                }),
            ) => {
                m.receive(&s);
                return None;
            }
            (Some(_), Err(why)) => {
                self.lose_monitor(i, &why.to_string());
                return None;
            }
            (_, heard) => heard,
        };
        match heard {
            Ok(pb::AgentMessage { kind: Some(kind) }) => Some((i, Ok(kind))),
            Ok(pb::AgentMessage { kind: None }) => None,
            Err(why) => Some((i, Err(why))),
        }
    }

    /// Waits for one answer from each agent in `who`; the others' messages are passed over. A refusal
    /// is always an error. A lost agent is an error unless `tolerate_loss`, in which case it is marked
    /// dead and left out.
    pub async fn answers(
        &mut self,
        who: &[usize],
        doing: &str,
        tolerate_loss: bool,
    ) -> Result<Vec<(usize, Up)>, FleetError> {
        let deadline = Instant::now() + ANSWER_TIMEOUT;
        self.answers_until(who, doing, tolerate_loss, deadline)
            .await
    }

    /// [`Fleet::answers`] until `deadline`: a greeting's, or [`ANSWER_TIMEOUT`] from now.
    async fn answers_until(
        &mut self,
        who: &[usize],
        doing: &str,
        tolerate_loss: bool,
        deadline: Instant,
    ) -> Result<Vec<(usize, Up)>, FleetError> {
        let mut got: Vec<(usize, Up)> = Vec::with_capacity(who.len());
        let mut waiting = Waiting::new(self.agents.len(), who.iter().copied());
        while !waiting.is_empty() {
            let Ok((i, msg)) = tokio::time::timeout_at(deadline, self.next_event()).await else {
                self.unanswered(&waiting, doing, tolerate_loss)?;
                break;
            };
            if !waiting.contains(i) {
                // Another agent's stream ended meanwhile: it is gone, whatever is awaited now.
                if let Err(why) = msg {
                    self.mark_lost(i, &format!("{why} while another was {doing}"));
                }
                continue;
            }
            match msg {
                Err(why) if tolerate_loss => {
                    self.mark_lost(i, &format!("{why} while {doing}"));
                    waiting.remove(i);
                }
                Err(why) => return Err(self.lost(i, doing, why)),
                Ok(Up::Refusal(r)) => return Err(FleetError::refused(&self.agents[i].name, r)),
                Ok(Up::Pong(_)) | Ok(Up::Interval(_)) | Ok(Up::StepReport(_)) => {}
                Ok(other) => {
                    got.push((i, other));
                    waiting.remove(i);
                }
            }
        }
        Ok(got)
    }

    /// The answer timeout passed with `waiting` still silent: they are lost, or the first is an error.
    fn unanswered(
        &mut self,
        waiting: &Waiting,
        doing: &str,
        tolerate_loss: bool,
    ) -> Result<(), FleetError> {
        if !tolerate_loss {
            let first = waiting
                .iter()
                .next()
                .expect("called while some are waiting");
            if doing == GREETING {
                return Err(FleetError::Mute {
                    agent: self.agents[first].name.clone(),
                    secs: GREETING_TIMEOUT.as_secs(),
                });
            }
            return Err(FleetError::Silent {
                agent: self.agents[first].name.clone(),
                secs: ANSWER_TIMEOUT.as_secs(),
                doing: doing.to_string(),
            });
        }
        let why = format!(
            "it did not answer within {} s while {doing}",
            ANSWER_TIMEOUT.as_secs()
        );
        for i in waiting.iter() {
            self.mark_lost(i, &why);
        }
        Ok(())
    }

    pub fn mark_lost(&mut self, i: usize, why: &str) {
        if self.agents[i].alive {
            tracing::warn!(agent = %self.agents[i].name, why, "Agent lost");
            self.agents[i].alive = false;
        }
    }

    /// The peers joined on `--listen` whose links are open.
    pub(crate) fn joined(&self) -> usize {
        let joined = self.agents.iter().filter(|a| a.expect == Expect::Either);
        joined.filter(|a| a.alive).count()
    }

    /// A joined peer's place whose link closed before the run started: the next to join takes it.
    pub(crate) fn vacant(&self) -> Option<usize> {
        (0..self.agents.len())
            .find(|&i| self.agents[i].expect == Expect::Either && !self.agents[i].alive)
    }

    /// The peers that joined `--listen` said what they are in their hellos: as many load agents and
    /// monitors as `--expect-agents` and `--expect-monitors` asked for, or an error naming them.
    pub fn check_joined(&self, agents: usize, monitors: usize) -> Result<(), FleetError> {
        let joined = || self.agents.iter().filter(|a| a.expect == Expect::Either);
        let m = joined().filter(|a| a.monitor.is_some()).count();
        let l = joined().count() - m;
        if (l, m) == (agents, monitors) {
            return Ok(());
        }
        let names = |monitor: bool| {
            let n: Vec<&str> = joined()
                .filter(|a| a.monitor.is_some() == monitor)
                .map(|a| a.name.as_str())
                .collect();
            if n.is_empty() {
                String::new()
            } else {
                format!(" ({})", n.join(", "))
            }
        };
        Err(FleetError::Role {
            agent: format!("{} peers joined:", l + m),
            message: format!(
                "{l} load agents{} and {m} monitors{}, where --expect-agents {agents} and --expect-monitors {monitors} were asked for",
                names(false),
                names(true)
            ),
        })
    }

    pub fn lost(&self, i: usize, doing: &str, why: Closed) -> FleetError {
        FleetError::Lost {
            agent: self.agents[i].name.clone(),
            doing: doing.to_string(),
            why,
        }
    }

    /// Sends the same command to each agent in `who` and waits for every acknowledgement. Returns the
    /// warnings the agents acknowledged with, each as (agent, warning).
    pub async fn command_all(
        &mut self,
        who: &[usize],
        make: impl Fn(usize) -> Down,
        doing: &str,
        tolerate_loss: bool,
    ) -> Result<Vec<(usize, Warning)>, FleetError> {
        let mut sent = Vec::with_capacity(who.len());
        for &i in who {
            match self.send(i, make(i)).await {
                Ok(()) => sent.push(i),
                Err(why) if tolerate_loss => self.mark_lost(i, &format!("{why} while {doing}")),
                Err(why) => return Err(self.lost(i, doing, why)),
            }
        }
        let mut warnings = Vec::new();
        for (i, answer) in self.answers(&sent, doing, tolerate_loss).await? {
            let Up::Ack(ack) = answer else {
                return Err(FleetError::Protocol {
                    agent: self.agents[i].name.clone(),
                    why: format!("expected an acknowledgement while {doing}"),
                });
            };
            warnings.extend(ack.warnings.into_iter().map(|w| (i, Warning::from(w))));
        }
        Ok(warnings)
    }

    pub async fn abort_all(&self, who: &[usize], reason: &str) {
        for &i in who {
            let _ = self
                .send(
                    i,
                    Down::Abort(pb::Abort {
                        reason: reason.to_string(),
                    }),
                )
                .await;
        }
    }
}

/// The hello, with the token.
pub(crate) fn hello(token: Option<&str>) -> pb::CoordinatorMessage {
    to_agent(Down::Hello(pb::Hello {
        protocol_version: PROTOCOL_VERSION,
        coordinator_version: shared::VERSION.to_string(),
        token: token.unwrap_or_default().to_string(),
        ..Default::default()
    }))
}

/// Heartbeats a link until `stop` or until it closes.
pub(crate) fn keep_alive(beat: LinkTx<pb::CoordinatorMessage>, stop: CancellationToken) {
    tokio::spawn(heartbeat(beat, stop));
}

/// Keeps the agent's dead-man switch from firing while the run is busy elsewhere.
async fn heartbeat(beat: LinkTx<pb::CoordinatorMessage>, stop: CancellationToken) {
    let mut tick = tokio::time::interval_at(Instant::now() + HEARTBEAT, HEARTBEAT);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stop.cancelled() => return,
        }
        if beat
            .send(to_agent(Down::Ping(pb::Ping { id: 0 })))
            .await
            .is_err()
        {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ack(step: u32) -> pb::AgentMessage {
        pb::AgentMessage {
            kind: Some(Up::Ack(pb::Ack {
                what: "prepare".into(),
                step,
                warnings: Vec::new(),
            })),
        }
    }

    /// A real agent session in this process: its dead-man switch fires 1.5 s after the last
    /// message it got.
    fn real_agent() -> CoordinatorEnd {
        let engine = std::sync::Arc::new(agent::Engine::start(1).unwrap());
        agent::embedded(engine, CancellationToken::new())
    }

    #[tokio::test(start_paused = true)]
    async fn an_agent_reached_first_disconnected_while_a_late_one_was_awaited() {
        let mut fleet = Fleet::empty(CancellationToken::new());
        let a = fleet.add("a".into(), Expect::Load, real_agent());
        fleet
            .greet(&[a], None, Instant::now() + GREETING_TIMEOUT)
            .await
            .unwrap();
        // The second agent comes up 3 s later (still dialed, its name not yet resolving): twice
        // the first one's dead-man switch.
        tokio::time::sleep(Duration::from_secs(3)).await;
        let b = fleet.add("b".into(), Expect::Load, real_agent());
        fleet.hello(None).await.unwrap();
        assert!(fleet.is_alive(a) && fleet.is_alive(b));
        // Both still answer: the first one's link outlived the wait.
        let got = fleet
            .command_all(
                &[a, b],
                |_| Down::Configure(pb::Configure::default()),
                "configuring it",
                false,
            )
            .await;
        assert!(
            !matches!(got, Err(FleetError::Lost { .. })),
            "{:?}",
            got.err()
        );
        assert!(fleet.silent_for(a) < Duration::from_secs(1));
    }

    #[tokio::test(start_paused = true)]
    async fn agent_weights_were_read_by_place_in_the_fleet() {
        // A monitor joined first: the load agents are 1 and 2, the weights two, by name.
        let names = ["monitor", "a:1", "b:2"];
        let ends: Vec<_> = names.iter().map(|_| control::link::pair()).collect();
        let links = names
            .iter()
            .zip(ends)
            .map(|(n, (link, _end))| (n.to_string(), link))
            .collect();
        let mut fleet = Fleet::new(links, CancellationToken::new());
        fleet.set_role(0, Role::Monitor);
        let weights = [("b:2".to_string(), 5), ("a:1".to_string(), 3)];
        assert_eq!(fleet.weights(&fleet.live(), Some(&weights)), vec![3, 5]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_monitor_gets_no_share_and_its_messages_answer_nothing() {
        let (load, load_end) = control::link::pair();
        let (monitor, monitor_end) = control::link::pair();
        let links = vec![("load".to_string(), load), ("monitor".to_string(), monitor)];
        let mut fleet = Fleet::new(links, CancellationToken::new());
        fleet.set_role(1, Role::Monitor);
        assert_eq!(fleet.live(), vec![0], "only load agents are split among");
        assert_eq!(fleet.weights(&fleet.live(), None), vec![1]);
        // The monitor's ack comes first; the answer awaited is the load agent's.
        monitor_end.tx.send(ack(7)).await.unwrap();
        load_end.tx.send(ack(3)).await.unwrap();
        let got = fleet
            .answers(&fleet.live(), "preparing step 1", false)
            .await
            .unwrap();
        assert_eq!(got.len(), 1);
        assert!(matches!(&got[0], (0, Up::Ack(a)) if a.step == 3), "{got:?}");
    }
}
