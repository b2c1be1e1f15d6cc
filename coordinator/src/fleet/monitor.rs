//! A server monitor as the fleet keeps it: who it is (`MonitorInfo`, from its hello), the samples it
//! streams every second (kept, bounded, until the steps they can still belong to are written), and
//! whether it was lost. A monitor's samples never reach the step's loop: the fleet takes them as they
//! arrive, so the step waits for load agents only and a monitor lost mid-run ends nothing.
use std::collections::VecDeque;

use monitor::step::{StepServer, Window};
use monitor::{MonitorInfo, Sample};
use proto::pb;

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
