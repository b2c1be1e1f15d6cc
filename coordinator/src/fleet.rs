//! The agents of a run: how they are reached (embedded, host:port, dns://), and the coordinator's side
//! of the protocol that is not about one step: hello, configure, clock offsets, heartbeats. Every agent's
//! messages arrive on one channel that the run task owns.
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use agent::Engine;
use agent::link::{Closed, CoordinatorEnd, Link, LinkTx};
use agent::tls::host_of;
use proto::pb::agent_message::Kind as Up;
use proto::pb::coordinator_message::Kind as Down;
use proto::{PROTOCOL_VERSION, pb, to_agent};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::config::{AgentSpec, RunConfig};
use crate::dial::{accept_joins, patiently, remote};
use crate::output::AgentInfo;
use crate::run::RunError;

/// How long an agent may take to answer hello, configure or prepare.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(15);
/// Heartbeat period: the agent's dead-man switch fires after a few missed beats.
pub const HEARTBEAT: Duration = Duration::from_millis(500);
/// Clock-offset samples per step; the one with the smallest round trip is kept.
const CLOCK_SAMPLES: u32 = 5;

pub fn unix_ns(t: SystemTime) -> i64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i64)
}

/// One agent as the run sees it.
pub struct AgentHandle {
    pub name: String,
    tx: LinkTx<pb::CoordinatorMessage>,
    pub info: Option<AgentInfo>,
    /// False once lost; a lost agent gets no more work.
    pub alive: bool,
    /// Agent clock minus coordinator clock, and the round trip it was measured over.
    pub clock_offset_ns: i64,
    pub rtt_ns: i64,
    /// When anything was last heard from it.
    pub last_heard: Instant,
    /// The limits it announced; a plan over them is refused before any load is sent.
    pub policy: agent::policy::Policy,
    /// Its socket limits (fd limit, ports, TIME_WAIT reuse), if it announced them.
    pub capacity: Option<agent::capacity::Capacity>,
    /// Whether it binds connections to `--source-addrs` (an older agent would ignore them).
    pub binds_sources: bool,
}

pub struct Fleet {
    pub agents: Vec<AgentHandle>,
    events: mpsc::Receiver<(usize, Result<pb::AgentMessage, Closed>)>,
    /// Stops the heartbeat tasks when the run ends.
    stop: CancellationToken,
}

impl Drop for Fleet {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// Connects to the configured agents, waits for joining ones, or starts the embedded one.
pub async fn connect(cfg: &RunConfig) -> Result<Fleet, RunError> {
    if let Some(join) = &cfg.join {
        let stop = CancellationToken::new();
        let links = accept_joins(join, cfg.tls.as_ref(), stop.clone()).await?;
        // The join server lives as long as the fleet: its streams are the agents' links.
        return Ok(Fleet::new(links, stop));
    }
    if cfg.agents.is_empty() {
        let engine = Arc::new(Engine::start(cfg.threads)?);
        // The embedded agent stops when its link is dropped at the end of the run, like a remote one.
        let link = agent::embedded(engine, CancellationToken::new());
        return Ok(Fleet::new(
            vec![("embedded".to_string(), link)],
            CancellationToken::new(),
        ));
    }
    // (name, address, the name its certificate must carry)
    let mut addrs: Vec<(String, SocketAddr, String)> = Vec::new();
    for spec in &cfg.agents {
        match spec {
            AgentSpec::Addr(a) => {
                let addr = tokio::net::lookup_host(a.as_str())
                    .await
                    .ok()
                    .and_then(|mut it| it.next())
                    .ok_or_else(|| RunError::Unreachable {
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
                        .map_err(|e| RunError::Unreachable {
                            agent: format!("dns://{name}"),
                            why: e.to_string(),
                        })?;
                found.sort();
                found.dedup();
                if found.is_empty() {
                    return Err(RunError::Unreachable {
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
    let mut links = Vec::with_capacity(addrs.len());
    for (name, addr, domain) in addrs {
        let link = patiently(
            || remote(&name, addr, &domain, cfg.tls.as_ref()),
            |e| matches!(e, RunError::Unreachable { .. }),
        )
        .await?;
        links.push((name, link));
    }
    Ok(Fleet::new(links, CancellationToken::new()))
}

impl Fleet {
    /// `stop` is cancelled when the fleet is dropped: it ends the heartbeats (and a join server).
    fn new(links: Vec<(String, CoordinatorEnd)>, stop: CancellationToken) -> Fleet {
        let (tx, events) = mpsc::channel(256);
        let agents = links
            .into_iter()
            .enumerate()
            .map(|(i, (name, link))| {
                let Link { tx: cmd, mut rx } = link;
                let events = tx.clone();
                tokio::spawn(async move {
                    loop {
                        let heard = rx.recv().await;
                        let gone = heard.is_err();
                        if events.send((i, heard)).await.is_err() || gone {
                            return;
                        }
                    }
                });
                // Heartbeats keep the agent's dead-man switch from firing while the run is busy elsewhere.
                let beat = cmd.clone();
                let stop = stop.clone();
                tokio::spawn(async move {
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
                });
                AgentHandle {
                    name,
                    tx: cmd,
                    info: None,
                    alive: true,
                    clock_offset_ns: 0,
                    rtt_ns: 0,
                    last_heard: Instant::now(),
                    policy: agent::policy::Policy::default(),
                    capacity: None,
                    binds_sources: false,
                }
            })
            .collect();
        Fleet {
            agents,
            events,
            stop,
        }
    }

    pub fn alive(&self) -> Vec<usize> {
        (0..self.agents.len())
            .filter(|&i| self.agents[i].alive)
            .collect()
    }

    pub async fn send(&self, i: usize, kind: Down) -> Result<(), Closed> {
        self.agents[i].tx.send(to_agent(kind)).await
    }

    /// The next message from any agent, or why its stream ended. Empty messages say nothing and
    /// are passed over (but count as heard).
    pub async fn next_event(&mut self) -> (usize, Result<Up, Closed>) {
        loop {
            match self.events.recv().await {
                Some((i, heard)) => {
                    self.agents[i].last_heard = Instant::now();
                    match heard {
                        Ok(pb::AgentMessage { kind: Some(kind) }) => return (i, Ok(kind)),
                        Ok(pb::AgentMessage { kind: None }) => {}
                        Err(why) => return (i, Err(why)),
                    }
                }
                // The forwarders hold senders as long as the fleet lives; unreachable in practice.
                None => std::future::pending().await,
            }
        }
    }

    /// Waits for one answer from each agent in `who`. A refusal is always an error. A lost agent is
    /// an error unless `tolerate_loss`, in which case it is marked dead and left out.
    pub async fn answers(
        &mut self,
        who: &[usize],
        doing: &str,
        tolerate_loss: bool,
    ) -> Result<Vec<(usize, Up)>, RunError> {
        let mut got: Vec<(usize, Up)> = Vec::new();
        let mut waiting: Vec<usize> = who.to_vec();
        let deadline = Instant::now() + ANSWER_TIMEOUT;
        while let Some(&first) = waiting.first() {
            let ev = tokio::time::timeout_at(deadline, self.next_event()).await;
            let (i, msg) = match ev {
                Ok(ev) => ev,
                Err(_) if tolerate_loss => {
                    for &i in &waiting {
                        self.mark_lost(
                            i,
                            &format!(
                                "it did not answer within {} s while {doing}",
                                ANSWER_TIMEOUT.as_secs()
                            ),
                        );
                    }
                    break;
                }
                Err(_) => {
                    return Err(RunError::Silent {
                        agent: self.agents[first].name.clone(),
                        secs: ANSWER_TIMEOUT.as_secs(),
                        doing: doing.to_string(),
                    });
                }
            };
            if !waiting.contains(&i) {
                continue;
            }
            let agent = self.agents[i].name.clone();
            match msg {
                Err(why) if tolerate_loss => {
                    self.mark_lost(i, &format!("{why} while {doing}"));
                    waiting.retain(|&w| w != i);
                }
                Err(why) => {
                    return Err(RunError::Lost {
                        agent,
                        doing: doing.to_string(),
                        why,
                    });
                }
                Ok(Up::Refusal(r)) => {
                    return Err(RunError::Refused {
                        agent,
                        message: r.message,
                    });
                }
                Ok(Up::Pong(_)) | Ok(Up::Interval(_)) | Ok(Up::StepReport(_)) => {}
                Ok(other) => {
                    got.push((i, other));
                    waiting.retain(|&w| w != i);
                }
            }
        }
        Ok(got)
    }

    pub fn mark_lost(&mut self, i: usize, why: &str) {
        if self.agents[i].alive {
            tracing::warn!(agent = %self.agents[i].name, why, "Agent lost");
            self.agents[i].alive = false;
        }
    }

    pub async fn hello(&mut self, token: Option<&str>) -> Result<(), RunError> {
        let all: Vec<usize> = (0..self.agents.len()).collect();
        for &i in &all {
            let hello = pb::Hello {
                protocol_version: PROTOCOL_VERSION,
                coordinator_version: shared::VERSION.to_string(),
                token: token.unwrap_or_default().to_string(),
            };
            self.send(i, Down::Hello(hello))
                .await
                .map_err(|why| self.lost(i, "greeting it", why))?;
        }
        for (i, answer) in self.answers(&all, "greeting it", false).await? {
            let agent = self.agents[i].name.clone();
            let Up::HelloReply(h) = answer else {
                return Err(RunError::Protocol {
                    agent,
                    why: "expected a hello reply".into(),
                });
            };
            let caps = h.capabilities.unwrap_or_default();
            if let Some(limits) = &caps.limits {
                self.agents[i].policy =
                    agent::policy::Policy::try_from(limits).map_err(|e| RunError::Protocol {
                        agent: agent.clone(),
                        why: e.to_string(),
                    })?;
            }
            self.agents[i].capacity = agent::capacity::Capacity::from_capabilities(&caps);
            self.agents[i].binds_sources = caps.source_addrs;
            self.agents[i].info = Some(AgentInfo {
                name: agent,
                version: h.agent_version,
                hostname: caps.hostname,
                cores: caps.cores.max(1),
                threads: caps.threads.max(1),
                fd_limit: caps.fd_limit,
                port_range: [caps.port_range_low, caps.port_range_high],
            });
        }
        Ok(())
    }

    pub fn lost(&self, i: usize, doing: &str, why: Closed) -> RunError {
        RunError::Lost {
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
    ) -> Result<Vec<(usize, String)>, RunError> {
        let mut sent = Vec::new();
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
                return Err(RunError::Protocol {
                    agent: self.agents[i].name.clone(),
                    why: format!("expected an acknowledgement while {doing}"),
                });
            };
            warnings.extend(ack.warnings.into_iter().map(|w| (i, w)));
        }
        Ok(warnings)
    }

    /// Measures each agent's clock offset (Cristian: offset = t_agent - (t_send + t_recv) / 2) over
    /// several pings, keeping the sample with the smallest round trip; its error is at most RTT / 2.
    pub async fn sync_clocks(&mut self, who: &[usize]) {
        let mut best: Vec<Option<(i64, i64)>> = vec![None; self.agents.len()];
        for round in 1..=u64::from(CLOCK_SAMPLES) {
            let mut sent_at = vec![0i64; self.agents.len()];
            let mut pending: Vec<usize> = Vec::new();
            for &i in who {
                sent_at[i] = unix_ns(SystemTime::now());
                if self
                    .send(i, Down::Ping(pb::Ping { id: round }))
                    .await
                    .is_ok()
                {
                    pending.push(i);
                }
            }
            let deadline = Instant::now() + Duration::from_secs(2);
            while !pending.is_empty() {
                let Ok((i, msg)) = tokio::time::timeout_at(deadline, self.next_event()).await
                else {
                    break;
                };
                let msg = match msg {
                    Ok(msg) => msg,
                    Err(why) => {
                        // Its stream ended: the step will find it lost; stop waiting for it here.
                        self.mark_lost(i, &format!("{why} while measuring its clock"));
                        pending.retain(|&w| w != i);
                        continue;
                    }
                };
                if let Up::Pong(p) = msg
                    && p.id == round
                    && pending.contains(&i)
                {
                    let recv = unix_ns(SystemTime::now());
                    let rtt = recv - sent_at[i];
                    let offset = p.agent_unix_nanos - (sent_at[i] + recv) / 2;
                    if best[i].is_none_or(|(_, r)| rtt < r) {
                        best[i] = Some((offset, rtt));
                    }
                    pending.retain(|&w| w != i);
                }
            }
        }
        for &i in who {
            if let Some((offset, rtt)) = best[i] {
                self.agents[i].clock_offset_ns = offset;
                self.agents[i].rtt_ns = rtt;
            }
        }
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
