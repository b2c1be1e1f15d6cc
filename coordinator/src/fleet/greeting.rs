//! The fleet's greeting: the hello sent to each agent, and what its reply announces kept (its role,
//! and a load agent's limits, sockets and machine, or who a monitor is).
use monitor::MonitorInfo;
use proto::pb;
use proto::pb::agent_message::Kind as Up;
use tokio::time::Instant;

use super::monitor::Watched;
use super::{Expect, Fleet, FleetError, GREETING, GREETING_TIMEOUT, Role, hello};
use crate::output::AgentInfo;

impl Fleet {
    /// Greets every agent not greeted yet (the links a test gave): each must answer within
    /// [`GREETING_TIMEOUT`].
    pub async fn hello(&mut self, token: Option<&str>) -> Result<(), FleetError> {
        let ungreeted: Vec<usize> = (0..self.agents.len())
            .filter(|&i| !self.agents[i].greeted)
            .collect();
        self.greet(&ungreeted, token, Instant::now() + GREETING_TIMEOUT)
            .await
    }

    /// Sends each agent in `who` the hello and takes their replies, all by `deadline`. The agents
    /// greeted before are heartbeaten meanwhile, and their messages passed over.
    pub async fn greet(
        &mut self,
        who: &[usize],
        token: Option<&str>,
        deadline: Instant,
    ) -> Result<(), FleetError> {
        for &i in who {
            // A joined peer proved the token in the join handshake, and was given none: nor here.
            let token = match self.agents[i].expect {
                Expect::Either => None,
                Expect::Load | Expect::Monitor => token,
            };
            self.agents[i]
                .tx
                .send(hello(token))
                .await
                .map_err(|why| self.lost(i, GREETING, why))?;
        }
        self.hello_replies(who, deadline).await
    }

    /// Takes the hello replies of the agents in `who`, whose hellos were sent, by `deadline`.
    pub(crate) async fn hello_replies(
        &mut self,
        who: &[usize],
        deadline: Instant,
    ) -> Result<(), FleetError> {
        for (i, answer) in self.answers_until(who, GREETING, false, deadline).await? {
            let Up::HelloReply(h) = answer else {
                return Err(FleetError::Protocol {
                    agent: self.agents[i].name.clone(),
                    why: "expected a hello reply".into(),
                });
            };
            self.introduce(i, h)?;
            self.agents[i].greeted = true;
        }
        Ok(())
    }

    /// Keeps what an agent's hello reply announced: its role, and its limits, sockets and machine (a
    /// load agent's) or who it is (a monitor's).
    fn introduce(&mut self, i: usize, h: pb::HelloReply) -> Result<(), FleetError> {
        let a = &mut self.agents[i];
        let is_monitor = h.role() == pb::Role::Monitor;
        let wrong = match (a.expect, is_monitor) {
            (Expect::Load, true) => Some(
                "is a monitor (stampede-agent --monitor), which runs no load: name it in --monitors, not --agents",
            ),
            (Expect::Monitor, false) => Some(
                "is a load agent, not a monitor (stampede-agent --monitor): name it in --agents, not --monitors",
            ),
            _ => None,
        };
        if let Some(message) = wrong {
            return Err(FleetError::Role {
                agent: a.name.clone(),
                message: message.into(),
            });
        }
        if is_monitor {
            let info = h.monitor.as_ref().ok_or_else(|| FleetError::Protocol {
                agent: a.name.clone(),
                why: "a monitor's hello reply without who it is".into(),
            })?;
            let info = MonitorInfo::try_from(info).map_err(|e| FleetError::Protocol {
                agent: a.name.clone(),
                why: e.to_string(),
            })?;
            // Its name suffixes its columns: two alike would make two columns of one name.
            let twin = self
                .agents
                .iter()
                .find(|b| b.monitor.as_ref().is_some_and(|m| m.info.name == info.name));
            if let Some(twin) = twin {
                return Err(FleetError::Role {
                    agent: self.agents[i].name.clone(),
                    message: format!(
                        "is a monitor named {}, as {} is: give each its own --name (its steps.tsv columns are suffixed with it, and a monitor named as a target is that target's server: one per target)",
                        info.name, twin.name
                    ),
                });
            }
            let a = &mut self.agents[i];
            a.role = Role::Monitor;
            a.monitor = Some(Watched::new(info));
            return Ok(());
        }
        let caps = h.capabilities.unwrap_or_default();
        if let Some(limits) = &caps.limits {
            a.policy =
                control::policy::Policy::try_from(limits).map_err(|e| FleetError::Protocol {
                    agent: a.name.clone(),
                    why: e.to_string(),
                })?;
        }
        a.capacity = control::machine::MachineLimits::from_capabilities(&caps);
        a.binds_sources = caps.source_addrs;
        a.machine_id = caps.machine_id.clone();
        a.info = Some(AgentInfo {
            name: a.name.clone(),
            version: h.agent_version,
            hostname: caps.hostname,
            cores: caps.cores.max(1),
            threads: caps.threads.max(1),
            fd_limit: caps.fd_limit,
            port_range: [caps.port_range_low, caps.port_range_high],
        });
        Ok(())
    }
}
