//! The server monitor. Its data, plain and always built: what it watches (`Watch`), who it is
//! (`MonitorInfo`, sent once), one reading a second (`Sample`), and one monitor's view of a step
//! (`step`), which run.json serializes and the analysis reads. With the `role` feature, the monitor
//! itself: what reads /proc and cgroup v2 (`sensor`), the role's control session (`session`) and the
//! data's wire form (`wire`), which need tokio and protobuf that the analysis does without.
//!
//! Counters are cumulative since some origin the monitor chose (boot, the sensor's start), so whoever
//! holds two samples takes an exact delta between them whatever was lost in between; a delta is only
//! meaningful between two samples of the same monitor. Gauges are instantaneous, or, where only a delta
//! makes sense (the busiest thread, the busiest core), over the interval since the previous sample.
use std::fmt;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

#[cfg(feature = "role")]
pub mod sensor;
#[cfg(feature = "role")]
pub mod session;
pub mod step;
#[cfg(feature = "role")]
pub mod wire;

/// What a monitor watches besides the host (which it always reports).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Watch {
    /// One process, its threads and its descendants (re-read every sample).
    Pid(u32),
    /// Every process whose name (`/proc/PID/comm`) is this (re-read every sample: workers come and go).
    Process(String),
    /// A cgroup v2 directory: its own accounting (cpu.stat, memory.*), and its processes for the rest.
    Cgroup(PathBuf),
    /// A container's id or a unique prefix of it, resolved by the sensor to its cgroup v2 directory.
    Container(String),
}

impl fmt::Display for Watch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Watch::Pid(pid) => write!(f, "pid {pid}"),
            Watch::Process(name) => write!(f, "process {name}"),
            Watch::Cgroup(path) => write!(f, "cgroup {}", path.display()),
            Watch::Container(id) => write!(f, "container {id}"),
        }
    }
}

/// Who a monitor is, sent once when it greets the coordinator.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct MonitorInfo {
    /// `--name`, or the hostname: the suffix of its steps.tsv columns.
    pub name: String,
    pub hostname: String,
    /// What it watches, resolved, for people: `process nginx (3 pids)`, `cgroup /sys/fs/cgroup/x`.
    pub watching: String,
    /// The cores the target may use, for a CPU share "of what it may use".
    pub cores: Cores,
    /// A stable id of the kernel the monitor runs on (a hash, not the raw id): equal ids between a
    /// monitor and a load agent mean generator and target share a host (containers included).
    pub machine_id: String,
}

/// The cores a target may use: the online cores, narrowed by its cpuset and its cgroup's CPU quota.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Cores {
    pub online: u32,
    /// The cores of its cpuset or CPU affinity, when narrower than the online ones.
    pub cpuset: Option<u32>,
    /// `cpu.max`'s quota / period, in cores, when a quota is set.
    pub quota: Option<f64>,
}

impl Cores {
    /// How many cores' worth of CPU the target can use at most (what `srv_cpu_util_pct` divides by).
    pub fn usable(&self) -> f64 {
        let mut cores = f64::from(self.online.max(1));
        if let Some(set) = self.cpuset {
            cores = cores.min(f64::from(set.max(1)));
        }
        if let Some(quota) = self.quota.filter(|q| *q > 0.0) {
            cores = cores.min(quota);
        }
        cores
    }
}

/// One reading, taken every second.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// When it was taken, on the monitor's wall clock (the coordinator corrects by the clock offset).
    pub at_unix_ns: i64,
    /// The watched processes or cgroup; `None` for a monitor of the host alone.
    pub target: Option<TargetSample>,
    pub host: HostSample,
    /// Which network namespace `net` and `tcp` were read in.
    pub net_scope: NetScope,
    /// Counters per interface, sorted by name.
    pub net: Vec<InterfaceCounters>,
    pub tcp: TcpCounters,
    /// Counter: CPU the monitor itself used (user + system, ns), so its own cost is reported.
    pub monitor_cpu_ns: u64,
}

/// The watched processes (and their cgroup, when watching one).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TargetSample {
    /// Gauge: processes found this sample.
    pub processes: u32,
    /// Gauge: their threads.
    pub threads: u32,
    /// Gauge: their open file descriptors (those of processes whose fd table could be read).
    pub open_fds: u64,
    /// Gauge: resident set, summed over the processes (shared pages counted in each).
    pub rss_bytes: u64,
    /// Counters: CPU time in user and system mode. For a process set, kept monotonic by the sensor:
    /// what each process used since the previous sample (all of it for a process new since then), so
    /// a worker that exits takes nothing back. From cpu.stat when watching a cgroup.
    pub cpu_user_ns: u64,
    pub cpu_system_ns: u64,
    /// Counters: context switches (voluntary: it waited; involuntary: it was preempted), kept monotonic
    /// like the CPU.
    pub voluntary_switches: u64,
    pub involuntary_switches: u64,
    /// Gauge over the interval since the previous sample: the busiest thread's CPU, in % of one core.
    /// `None` on the first sample.
    pub busiest_thread_pct: Option<f64>,
    /// The busiest thread's name (`/proc/PID/task/TID/comm`), with the share.
    pub busiest_thread: Option<String>,
    pub cgroup: Option<CgroupSample>,
}

impl TargetSample {
    pub fn cpu_ns(&self) -> u64 {
        self.cpu_user_ns + self.cpu_system_ns
    }

    /// Gauge: the memory to report: the cgroup's working set when there is one, else the RSS sum.
    pub fn memory_bytes(&self) -> u64 {
        self.cgroup
            .as_ref()
            .and_then(|c| c.working_set_bytes)
            .unwrap_or(self.rss_bytes)
    }
}

/// A cgroup v2's own accounting. A file of a controller the cgroup lacks (memory, cpu) is `None`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CgroupSample {
    /// Counters from cpu.stat (µs there, ns here).
    pub usage_ns: u64,
    pub user_ns: u64,
    pub system_ns: u64,
    /// Counters from cpu.stat with the cpu controller: enforcement periods, those throttled, and the
    /// time throttled.
    pub periods: Option<u64>,
    pub throttled_periods: Option<u64>,
    pub throttled_ns: Option<u64>,
    /// Gauges: memory.current, and the working set = memory.current − memory.stat's inactive_file.
    pub memory_current_bytes: Option<u64>,
    pub working_set_bytes: Option<u64>,
    /// Gauge: memory.peak (kernel 5.19 and later).
    pub memory_peak_bytes: Option<u64>,
    /// Counter: memory.events' oom_kill.
    pub oom_kills: Option<u64>,
}

/// The whole host.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostSample {
    /// Counters: all cores together, per state (/proc/stat's first line).
    pub cpu: CpuStates,
    /// Counters: per core, in /proc/stat's order (cpu0, cpu1, …).
    pub cores: Vec<CpuStates>,
    /// Gauge over the interval since the previous sample: the busiest core's busy share, in %.
    /// `None` on the first sample.
    pub busiest_core_pct: Option<f64>,
    /// Gauge: runnable tasks (/proc/stat's procs_running), the run queue.
    pub run_queue: u32,
    /// Gauges from /proc/meminfo.
    pub mem_available_bytes: u64,
    pub mem_total_bytes: u64,
}

/// Cumulative CPU time per state, in ns (the kernel's clock ticks converted).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuStates {
    pub user_ns: u64,
    pub nice_ns: u64,
    pub system_ns: u64,
    pub idle_ns: u64,
    pub iowait_ns: u64,
    pub irq_ns: u64,
    pub softirq_ns: u64,
    pub steal_ns: u64,
}

impl CpuStates {
    /// Every state; guest time is already inside user and nice, so it is not added again.
    pub fn total_ns(&self) -> u64 {
        self.busy_ns() + self.idle_ns + self.iowait_ns
    }

    /// Time doing anything but waiting: what `mpstat` calls 100 − %idle − %iowait.
    pub fn busy_ns(&self) -> u64 {
        self.user_ns + self.nice_ns + self.system_ns + self.irq_ns + self.softirq_ns + self.steal_ns
    }

    /// Each state's growth from `earlier` to `self`; a counter that went back (a core taken offline
    /// and back) counts as no growth rather than wrapping.
    pub fn since(&self, earlier: &CpuStates) -> CpuStates {
        CpuStates {
            user_ns: self.user_ns.saturating_sub(earlier.user_ns),
            nice_ns: self.nice_ns.saturating_sub(earlier.nice_ns),
            system_ns: self.system_ns.saturating_sub(earlier.system_ns),
            idle_ns: self.idle_ns.saturating_sub(earlier.idle_ns),
            iowait_ns: self.iowait_ns.saturating_sub(earlier.iowait_ns),
            irq_ns: self.irq_ns.saturating_sub(earlier.irq_ns),
            softirq_ns: self.softirq_ns.saturating_sub(earlier.softirq_ns),
            steal_ns: self.steal_ns.saturating_sub(earlier.steal_ns),
        }
    }

    /// Busy share of this span of states, in %; `None` for a span with no time in it.
    pub fn busy_pct(&self) -> Option<f64> {
        let total = self.total_ns();
        (total > 0).then(|| 100.0 * self.busy_ns() as f64 / total as f64)
    }
}

/// Where network and TCP counters were read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum NetScope {
    /// The monitor's own network namespace (the host's, or a shared one).
    Host,
    /// The target's own network namespace (a container's), read through /proc/PID/net.
    Target,
}

/// Counters of one network interface (/proc/net/dev).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct InterfaceCounters {
    pub name: String,
    pub rx_bytes: u64,
    pub rx_packets: u64,
    pub rx_errors: u64,
    pub rx_drops: u64,
    pub tx_bytes: u64,
    pub tx_packets: u64,
    pub tx_errors: u64,
    pub tx_drops: u64,
}

/// The kernel's TCP counters that explain client errors (/proc/net/netstat's TcpExt, /proc/net/snmp's
/// Tcp). All counters but `curr_estab`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct TcpCounters {
    /// SYNs or completed handshakes that found the accept queue full.
    pub listen_overflows: u64,
    /// Every SYN dropped by a listener (overflows included).
    pub listen_drops: u64,
    pub syncookies_sent: u64,
    pub retrans_segs: u64,
    /// Established connections reset (by either side).
    pub estab_resets: u64,
    /// Segments sent with RST.
    pub out_rsts: u64,
    pub attempt_fails: u64,
    pub active_opens: u64,
    pub passive_opens: u64,
    /// Connections aborted: unread data at close, after close, out of memory, on a timeout, on linger.
    pub abort_on_data: u64,
    pub abort_on_close: u64,
    pub abort_on_memory: u64,
    pub abort_on_timeout: u64,
    pub abort_on_linger: u64,
    /// Gauge: connections established now.
    pub curr_estab: u64,
}

impl TcpCounters {
    /// Every abort together.
    pub fn aborts(&self) -> u64 {
        self.abort_on_data
            + self.abort_on_close
            + self.abort_on_memory
            + self.abort_on_timeout
            + self.abort_on_linger
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usable_cores_are_the_narrowest_limit() {
        let cores = |online, cpuset, quota| {
            Cores {
                online,
                cpuset,
                quota,
            }
            .usable()
        };
        assert_eq!(cores(8, None, None), 8.0);
        assert_eq!(cores(8, Some(2), None), 2.0);
        assert_eq!(cores(8, Some(4), Some(1.5)), 1.5);
        assert_eq!(cores(2, None, Some(4.0)), 2.0);
        // A zero quota is not "no CPU": cpu.max never says that; it is read as no limit.
        assert_eq!(cores(2, None, Some(0.0)), 2.0);
    }

    #[test]
    fn cpu_states_delta_and_busy_share() {
        let earlier = CpuStates {
            user_ns: 100,
            idle_ns: 1000,
            ..CpuStates::default()
        };
        let later = CpuStates {
            user_ns: 400,
            softirq_ns: 100,
            idle_ns: 1600,
            iowait_ns: 0,
            ..CpuStates::default()
        };
        let delta = later.since(&earlier);
        assert_eq!(delta.total_ns(), 1000);
        assert_eq!(delta.busy_pct(), Some(40.0));
        assert_eq!(earlier.since(&later).total_ns(), 0);
        assert_eq!(CpuStates::default().busy_pct(), None);
    }

    #[test]
    fn memory_prefers_the_cgroup_working_set() {
        let mut target = TargetSample {
            processes: 1,
            threads: 1,
            open_fds: 3,
            rss_bytes: 10,
            cpu_user_ns: 1,
            cpu_system_ns: 2,
            voluntary_switches: 0,
            involuntary_switches: 0,
            busiest_thread_pct: None,
            busiest_thread: None,
            cgroup: None,
        };
        assert_eq!(target.memory_bytes(), 10);
        assert_eq!(target.cpu_ns(), 3);
        target.cgroup = Some(CgroupSample {
            memory_current_bytes: Some(50),
            working_set_bytes: Some(40),
            ..CgroupSample::default()
        });
        assert_eq!(target.memory_bytes(), 40);
    }

    #[test]
    fn a_sample_survives_json() {
        let sample = Sample {
            at_unix_ns: 1_700_000_000_000_000_000,
            target: None,
            host: HostSample {
                cpu: CpuStates {
                    user_ns: 5,
                    ..CpuStates::default()
                },
                cores: vec![CpuStates::default()],
                busiest_core_pct: Some(12.5),
                run_queue: 2,
                mem_available_bytes: 1 << 30,
                mem_total_bytes: 2 << 30,
            },
            net_scope: NetScope::Target,
            net: vec![InterfaceCounters {
                name: "lo".into(),
                rx_bytes: 1,
                rx_packets: 2,
                rx_errors: 0,
                rx_drops: 0,
                tx_bytes: 1,
                tx_packets: 2,
                tx_errors: 0,
                tx_drops: 0,
            }],
            tcp: TcpCounters {
                listen_drops: 7,
                ..TcpCounters::default()
            },
            monitor_cpu_ns: 9,
        };
        let text = serde_json::to_string(&sample).unwrap();
        assert!(text.contains(r#""net_scope":"target""#), "{text}");
        assert_eq!(serde_json::from_str::<Sample>(&text).unwrap(), sample);
        let watch = Watch::Cgroup("/sys/fs/cgroup/a".into());
        let text = serde_json::to_string(&watch).unwrap();
        assert_eq!(serde_json::from_str::<Watch>(&text).unwrap(), watch);
        assert_eq!(watch.to_string(), "cgroup /sys/fs/cgroup/a");
    }
}
