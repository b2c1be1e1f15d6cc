//! Each agent's clock offset from the coordinator's, measured before a step over a few pings, so
//! that one start instant can be given in every agent's own clock.
use std::time::{Duration, SystemTime};

use proto::pb;
use proto::pb::agent_message::Kind as Up;
use proto::pb::coordinator_message::Kind as Down;
use tokio::time::Instant;

use super::{Fleet, Waiting, unix_ns};

/// Clock-offset samples per step; the one with the smallest round trip is kept.
const CLOCK_SAMPLES: u32 = 5;
/// How long one round of clock samples waits for its pongs.
const CLOCK_WAIT: Duration = Duration::from_secs(2);

impl Fleet {
    /// Measures each agent's clock offset (Cristian: offset = t_agent - (t_send + t_recv) / 2) over
    /// several pings, keeping the sample with the smallest round trip; its error is at most RTT / 2.
    pub async fn sync_clocks(&mut self, who: &[usize]) {
        let mut best: Vec<Option<(i64, i64)>> = vec![None; self.agents.len()];
        for round in 1..=u64::from(CLOCK_SAMPLES) {
            self.clock_round(who, round, &mut best).await;
        }
        for &i in who {
            if let Some((offset, rtt)) = best[i] {
                self.agents[i].clock_offset_ns = offset;
                self.agents[i].rtt_ns = rtt;
            }
        }
    }

    /// One ping to each agent in `who`; keeps its (offset, round trip) in `best` when the round trip
    /// is the shortest yet.
    async fn clock_round(&mut self, who: &[usize], round: u64, best: &mut [Option<(i64, i64)>]) {
        let mut sent_at = vec![0i64; self.agents.len()];
        let mut pending = Waiting::new(self.agents.len(), []);
        for &i in who {
            sent_at[i] = unix_ns(SystemTime::now());
            if self
                .send(i, Down::Ping(pb::Ping { id: round }))
                .await
                .is_ok()
            {
                pending.insert(i);
            }
        }
        let deadline = Instant::now() + CLOCK_WAIT;
        while !pending.is_empty() {
            let Ok((i, msg)) = tokio::time::timeout_at(deadline, self.next_event()).await else {
                break;
            };
            let msg = match msg {
                Ok(msg) => msg,
                Err(why) => {
                    // Its stream ended: the step will find it lost; stop waiting for it here.
                    self.mark_lost(i, &format!("{why} while measuring its clock"));
                    pending.remove(i);
                    continue;
                }
            };
            if let Up::Pong(p) = msg
                && p.id == round
                && pending.contains(i)
            {
                let recv = unix_ns(SystemTime::now());
                let rtt = recv - sent_at[i];
                let offset = p.agent_unix_nanos - (sent_at[i] + recv) / 2;
                if best[i].is_none_or(|(_, r)| rtt < r) {
                    best[i] = Some((offset, rtt));
                }
                pending.remove(i);
            }
        }
    }
}
