//! A server monitor as the fleet keeps it: who it is (`MonitorInfo`, from its hello), the samples it
//! streams every second (kept, bounded, until the steps they can still belong to are written), and
//! whether it was lost. A monitor's samples never reach the step's loop: the fleet takes them as they
//! arrive, so the step waits for load agents only and a monitor lost mid-run ends nothing. The
//! fleet's questions about its monitors (the sample that closes a step, each target's view) are here.
use std::collections::VecDeque;
use std::time::{Duration, SystemTime};

use monitor::step::{StepServer, Window};
use monitor::{MonitorInfo, Sample};
use proto::pb;
use proto::pb::coordinator_message::Kind as Down;
use tokio::time::Instant;

use super::{Fleet, Role, unix_ns};

/// Samples kept per monitor at most: two hours of seconds, more than any step and the pause after it.
/// Older ones are dropped first, and counted.
const MAX_SAMPLES: usize = 7200;
/// Samples a step's computation may still need before its start: the one at or before it.
const KEEP_BEFORE_NS: i64 = 3_000_000_000;

/// One monitor's part of the fleet.
#[derive(Debug)]
pub struct Watched {
    pub info: MonitorInfo,
    samples: VecDeque<Sample>,
    /// Samples dropped because too many were kept, and those that failed their conversion.
    pub dropped: u64,
    pub invalid: u64,
    /// Why it was lost, and the targets (their labels) whose steps' notes have said so: each
    /// target that carries its columns is told once.
    pub lost: Option<String>,
    pub told: Vec<Option<String>>,
}

impl Watched {
    pub fn new(info: MonitorInfo) -> Watched {
        Watched {
            info,
            samples: VecDeque::new(),
            dropped: 0,
            invalid: 0,
            lost: None,
            told: Vec::new(),
        }
    }

    /// Keeps a received sample, checked by `proto`'s conversion; an invalid one is counted and
    /// logged once.
    pub fn receive(&mut self, s: &pb::MonitorSample) {
        match Sample::try_from(s) {
            Ok(sample) => {
                // A sample older than the newest (a clock stepped back) would break the order the
                // step's boundaries are searched in; it is dropped rather than sorted in.
                if self
                    .samples
                    .back()
                    .is_some_and(|last| last.at_unix_ns >= sample.at_unix_ns)
                {
                    self.invalid += 1;
                    return;
                }
                if self.samples.len() == MAX_SAMPLES {
                    self.samples.pop_front();
                    self.dropped += 1;
                }
                self.samples.push_back(sample);
            }
            Err(e) => {
                if self.invalid == 0 {
                    tracing::warn!(monitor = %self.info.name, error = %e, "Invalid monitor sample");
                }
                self.invalid += 1;
            }
        }
    }

    /// Its newest sample's instant on its own clock.
    pub fn newest_ns(&self) -> Option<i64> {
        self.samples.back().map(|s| s.at_unix_ns)
    }

    /// Its view of the step `window` (coordinator's clock), its clock `offset_ns` ahead; then the
    /// samples no later step can need are let go.
    pub fn view(&mut self, window: Window, offset_ns: i64) -> Option<StepServer> {
        let samples = self.samples.make_contiguous();
        let view = StepServer::of(
            &self.info.name,
            &self.info.cores,
            samples,
            window,
            offset_ns,
        );
        let keep_from = window.end_ns + offset_ns - KEEP_BEFORE_NS;
        while self
            .samples
            .front()
            .is_some_and(|s| s.at_unix_ns < keep_from)
        {
            self.samples.pop_front();
        }
        view
    }
}

/// How long after a step's end the monitors may take to send the sample that closes it: a second of
/// sampling, and the way here.
const SAMPLE_WAIT: Duration = Duration::from_millis(2500);

/// The fleet's questions about its monitors: which are live, the sample that closes a step, and
/// the view of it each target carries.
impl Fleet {
    /// A monitor lost: the run goes on without it; the next step's notes say so.
    pub(super) fn lose_monitor(&mut self, i: usize, why: &str) {
        let a = &mut self.agents[i];
        if a.alive {
            tracing::warn!(monitor = %a.name, why, "Monitor lost; the run goes on without it");
            a.alive = false;
            if let Some(m) = a.monitor.as_mut() {
                m.lost = Some(why.to_string());
            }
        }
    }

    /// The live monitors, in fleet order.
    pub fn monitors(&self) -> Vec<usize> {
        (0..self.agents.len())
            .filter(|&i| self.agents[i].alive && self.agents[i].monitor.is_some())
            .collect()
    }

    /// Who every monitor that greeted the run is, lost ones included.
    pub fn monitor_infos(&self) -> Vec<MonitorInfo> {
        self.agents
            .iter()
            .filter_map(|a| a.monitor.as_ref().map(|m| m.info.clone()))
            .collect()
    }

    /// Each monitor that watches a machine a load agent sends from (the same kernel: their machine
    /// ids are equal), with that agent: the generator's CPU there competes with the target's, and
    /// the run should say so.
    pub fn sharing_a_host(&self) -> Vec<(String, String)> {
        let monitors = self.agents.iter().filter_map(|a| a.monitor.as_ref());
        monitors
            .flat_map(|m| {
                self.agents
                    .iter()
                    .filter(|a| a.role == Role::Load && !a.machine_id.is_empty())
                    .filter(move |a| a.machine_id == m.info.machine_id)
                    .map(move |a| (m.info.name.clone(), a.name.clone()))
            })
            .collect()
    }

    /// Waits until every live monitor has sent a sample at or after `end_ns` (coordinator's clock),
    /// the one that closes a step, or [`SAMPLE_WAIT`] has passed. The load agents' messages meanwhile
    /// are passed over (every step report is in); one whose stream ended is lost.
    ///
    /// Each live monitor is asked for a sample now (`SampleNow`): the step has ended, so the sample
    /// it takes closes it, and the next step need not wait up to a second for the monitor's own tick.
    /// Each sample that arrives is looked at as it comes: a wait that only woke for the load agents'
    /// messages (none come between steps) always ran to its deadline, 2.5 s a step.
    pub async fn await_samples(&mut self, end_ns: i64) {
        let deadline = Instant::now() + SAMPLE_WAIT;
        // The load agents' last reports can come a few tens of ms before the step's end on this
        // clock (their start was converted to their own clocks): a sample asked for then would not
        // close the step.
        let early = end_ns.saturating_sub(unix_ns(SystemTime::now()));
        if early > 0 {
            tokio::time::sleep(Duration::from_nanos(early as u64).min(SAMPLE_WAIT)).await;
        }
        for i in self.monitors() {
            // A monitor whose stream is gone shows as lost below.
            let _ = self.send(i, Down::SampleNow(pb::SampleNow {})).await;
        }
        let covered = |f: &Fleet| {
            f.monitors().into_iter().all(|i| {
                let a = &f.agents[i];
                a.monitor
                    .as_ref()
                    .and_then(Watched::newest_ns)
                    .is_some_and(|t| t - a.clock_offset_ns >= end_ns)
            })
        };
        while !covered(self) {
            let Ok(event) = tokio::time::timeout_at(deadline, self.next_message()).await else {
                return;
            };
            if let Some((i, Err(why))) = event {
                self.mark_lost(i, &format!("{why} after a step"));
            }
        }
    }

    /// The view of the step `window` of every monitor the target labelled `target` `carries`, and
    /// the notes of those lost since its last step (said once to each target). A live monitor
    /// without a view (no sample bracketed the step) is noted too.
    pub fn server_views(
        &mut self,
        window: Window,
        target: Option<&str>,
        carries: impl Fn(&str) -> bool,
    ) -> (Vec<StepServer>, Vec<String>) {
        let mut views = Vec::new();
        let mut notes = Vec::new();
        for a in &mut self.agents {
            let Some(m) = a.monitor.as_mut().filter(|m| carries(&m.info.name)) else {
                continue;
            };
            // Named as its columns are, and where it is when that says more.
            let who = match &m.info.name {
                name if *name == a.name => name.clone(),
                name => format!("{name} ({})", a.name),
            };
            let told = m.told.iter().any(|t| t.as_deref() == target);
            if let Some(why) = m.lost.as_ref().filter(|_| !told) {
                notes.push(format!(
                    "server monitor {who} lost ({why}): its columns are empty from here on"
                ));
                m.told.push(target.map(str::to_string));
            }
            match m.view(window, a.clock_offset_ns) {
                Some(v) => views.push(v),
                None if a.alive => notes.push(format!(
                    "server monitor {who} sent no samples around this step: its columns are empty"
                )),
                None => {}
            }
        }
        (views, notes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use monitor::{Cores, CpuStates, HostSample, NetScope, TcpCounters};

    fn info() -> MonitorInfo {
        MonitorInfo {
            name: "web".into(),
            hostname: "web".into(),
            watching: "pid 1".into(),
            cores: Cores {
                online: 1,
                cpuset: None,
                quota: None,
            },
            machine_id: "m".into(),
        }
    }

    fn sample(at_s: i64, drops: u64) -> pb::MonitorSample {
        (&Sample {
            at_unix_ns: at_s * 1_000_000_000,
            target: None,
            host: HostSample {
                cpu: CpuStates::default(),
                cores: Vec::new(),
                busiest_core_pct: None,
                run_queue: 0,
                mem_available_bytes: 0,
                mem_total_bytes: 1,
            },
            net_scope: NetScope::Host,
            net: Vec::new(),
            tcp: TcpCounters {
                listen_drops: drops,
                ..TcpCounters::default()
            },
            monitor_cpu_ns: 0,
        })
            .into()
    }

    #[test]
    fn samples_out_of_order_are_refused_and_old_ones_let_go_after_a_step() {
        let mut w = Watched::new(info());
        for t in 1..=20 {
            w.receive(&sample(t, t as u64));
        }
        w.receive(&sample(5, 0));
        assert_eq!((w.invalid, w.samples.len()), (1, 20));
        let s = 1_000_000_000;
        // The monitor's clock 2 s ahead: the step from 5 s to 10 s is its 7 to 12.
        let view = w
            .view(
                Window {
                    start_ns: 5 * s,
                    end_ns: 10 * s,
                },
                2 * s,
            )
            .unwrap();
        assert_eq!(view.tcp.listen_drops, 5);
        // Kept: from 3 s before the step's end, on the monitor's clock (12 - 3 = 9).
        assert_eq!(w.samples.front().unwrap().at_unix_ns, 9 * s);
    }
}
