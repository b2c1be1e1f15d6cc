//! A step's server statistics from one monitor's samples (`StepServer::of`): the samples moved onto
//! the coordinator's clock by the monitor's measured offset, as the agents' are, then counters taken as
//! exact deltas between two real samples and gauges as min/avg/max of the samples inside the step.
//!
//! Which two samples: no value is interpolated, since a listen-queue drop count of 0.4 is nothing
//! the kernel said, and every delta stays an exact count. Two pairs are used:
//! - **counts** (drops, retransmits, bytes, context switches, OOM kills) from the sample at or just
//!   before the step's start to the one at or just after its end, so that nothing the step caused is
//!   missed (the second or so beyond each edge is between steps, where no load runs);
//! - **rates** (CPU %, the host's CPU states, throttling) from the first sample at or after the start
//!   to the last at or before the end, so every second they divide by was under load: a saturated
//!   server reads 100 % of its core, not 83 % diluted by the idle seconds around a 10 s step. A step
//!   too short to hold two samples falls back to the counting pair.
//!
//! The rule that picks a boundary sample for an instant is the same at every step, so windows cut at
//! sample instants add up exactly, and windows cut anywhere never count less than the whole.
use serde::{Deserialize, Serialize};

use super::{Cores, CpuStates, InterfaceCounters, Sample, TargetSample, TcpCounters};

/// A step's span on the coordinator's wall clock, in ns since the epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub start_ns: i64,
    pub end_ns: i64,
}

/// A gauge over the samples inside a step.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Gauge {
    pub min: f64,
    pub avg: f64,
    pub max: f64,
}

impl Gauge {
    /// `None` for no values.
    pub fn of(values: impl IntoIterator<Item = f64>) -> Option<Gauge> {
        let (mut n, mut sum) = (0u32, 0.0);
        let (mut min, mut max) = (f64::INFINITY, f64::NEG_INFINITY);
        for v in values {
            n += 1;
            sum += v;
            min = min.min(v);
            max = max.max(v);
        }
        (n > 0).then(|| Gauge {
            min: round3(min),
            avg: round3(sum / f64::from(n)),
            max: round3(max),
        })
    }
}

/// One monitor's view of one step (run.json's `server_monitors[]` of a step).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct StepServer {
    /// The monitor's name (its steps.tsv columns' suffix).
    pub monitor: String,
    /// Whose server it watches, as the run paired monitors with targets: absent in files written
    /// before pairing (read by the rule of then: a step's only monitor of processes is its server).
    #[serde(default, skip_serializing_if = "Watches::is_unsaid")]
    pub watches: Watches,
    /// Seconds between the two samples the counts are taken over (at least the step's length).
    pub counted_s: f64,
    /// Seconds between the two samples the rates are taken over (inside the step where it holds two).
    pub rated_s: f64,
    /// No sample at or before the start, or none at or after the end (the monitor joined late or was
    /// lost): the counts miss part of the step.
    pub partial: bool,
    /// Samples inside the step: what the gauges are over.
    pub samples: u32,
    /// The watched processes or cgroup; null for a monitor of the host alone.
    pub target: Option<TargetStep>,
    pub host: HostStep,
    /// Deltas per interface, over the counting pair.
    pub net: Vec<InterfaceCounters>,
    /// Deltas over the counting pair; `curr_estab` is the most established at any sample inside.
    pub tcp: TcpCounters,
    /// The monitor's own CPU, in % of a core (it must not disturb what it measures).
    pub monitor_cpu_pct: f64,
    /// Each second between the counting pair's samples.
    pub series: Vec<Point>,
    /// Where the view came from: a stampede monitor's samples (absent: every file before it), or a
    /// Prometheus's answers to named queries (`--server-prometheus`).
    #[serde(default, skip_serializing_if = "Source::is_monitor")]
    pub source: Source,
    /// Named query results that fit no field above (a Prometheus view's), in the query set's order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extra: Vec<Extra>,
}

/// Where a step's server view came from (run.json's `source` of a step's `server_monitors[]`).
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// A stampede monitor's 1 s samples (`stampede-agent --monitor`, `--monitor-*`).
    #[default]
    Monitor,
    /// A Prometheus that watches the server, asked over the step's window (`--server-prometheus`).
    Prometheus,
}

impl Source {
    pub fn is_monitor(&self) -> bool {
        *self == Source::Monitor
    }
}

/// One named query's value over a step that no field of the view holds: `net_rx_bytes_per_s`,
/// or a plan file's own `[[server_query]]`.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Extra {
    pub name: String,
    pub value: f64,
    /// As the query set says it (`B/s`); empty when it says none.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub unit: String,
}

/// Whose server a monitor watches (run.json's `watches` of a step's `server_monitors[]`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Watches {
    /// The server the step loaded: the monitor paired with the step's target (named as it), or a
    /// one-target run's only monitor of processes or a cgroup.
    Target,
    /// No one target's own: what is behind all of them (a database), or the host alone.
    Shared,
    /// Not said: a step written before monitors were paired with targets.
    #[default]
    Unsaid,
}

impl Watches {
    pub fn is_unsaid(&self) -> bool {
        *self == Watches::Unsaid
    }
}

/// The watched processes over a step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct TargetStep {
    /// CPU in % of one core (200 = two cores busy), and its user and system parts.
    pub cpu_pct: f64,
    pub cpu_user_pct: f64,
    pub cpu_system_pct: f64,
    /// `cpu_pct` of what the target may use (online cores, cpuset, quota): 100 is all of it.
    pub cpu_util_pct: f64,
    pub usable_cores: f64,
    /// The busiest thread's share of a core, the highest of any second inside the step, and its name.
    pub thread_max_pct: Option<f64>,
    pub busiest_thread: Option<String>,
    /// The cgroup's working set, else the RSS sum.
    pub memory_bytes: Gauge,
    pub threads: Gauge,
    pub open_fds: Gauge,
    pub processes: Gauge,
    pub voluntary_switches: u64,
    pub involuntary_switches: u64,
    /// Of the cgroup's CPU enforcement periods in the step, the share throttled (a quota reached).
    pub throttled_pct: Option<f64>,
    pub memory_peak_bytes: Option<u64>,
    pub oom_kills: Option<u64>,
}

/// The host over a step, in % of all its cores' time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct HostStep {
    pub cpu_pct: Option<f64>,
    pub softirq_pct: Option<f64>,
    pub steal_pct: Option<f64>,
    pub iowait_pct: Option<f64>,
    /// The core busiest over the step (its index in /proc/stat) and its busy share.
    pub busiest_core: Option<usize>,
    pub busiest_core_pct: Option<f64>,
    pub run_queue: Option<Gauge>,
    pub mem_available_bytes: Option<Gauge>,
}

/// One second of a step: what changed since the sample before.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Point {
    /// The sample's instant, in seconds from the step's start (coordinator's clock; negative for the
    /// sample just before it).
    pub t_s: f64,
    pub cpu_pct: Option<f64>,
    pub memory_bytes: Option<u64>,
    pub thread_max_pct: Option<f64>,
    pub host_cpu_pct: Option<f64>,
    pub listen_drops: u64,
    pub retrans_segs: u64,
}

/// The indexes of the samples a step is computed from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Pairs {
    /// The counting pair: at or before the start, at or after the end.
    lo: usize,
    hi: usize,
    /// The rating pair.
    a: usize,
    b: usize,
    /// The samples inside the step, `inside.0..inside.1`.
    inside: (usize, usize),
    partial: bool,
}

impl Pairs {
    /// `None` when fewer than two samples bracket any part of the window.
    fn of(times: &[i64], w: Window) -> Option<Pairs> {
        let n = times.len();
        let at_or_before_start = times.partition_point(|&t| t <= w.start_ns);
        let first_in = times.partition_point(|&t| t < w.start_ns);
        let first_at_end = times.partition_point(|&t| t < w.end_ns);
        let past_end = times.partition_point(|&t| t <= w.end_ns);
        let (lo, late) = match at_or_before_start {
            0 => (0, true),
            k => (k - 1, false),
        };
        let (hi, early) = match first_at_end {
            k if k == n => (n.checked_sub(1)?, true),
            k => (k, false),
        };
        if hi <= lo {
            return None;
        }
        let (a, b) = if past_end >= first_in + 2 {
            (first_in, past_end - 1)
        } else {
            (lo, hi)
        };
        Some(Pairs {
            lo,
            hi,
            a,
            b,
            inside: (first_in, past_end.max(first_in)),
            partial: late || early,
        })
    }
}

/// To three decimals, as run.json's other numbers are.
fn round3(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}

fn secs(ns: i64) -> f64 {
    ns as f64 / 1e9
}

/// `part` ns of CPU over `span` ns of wall time, in % of one core.
fn pct(part: u64, span: i64) -> f64 {
    if span <= 0 {
        0.0
    } else {
        round3(part as f64 * 100.0 / span as f64)
    }
}

fn share(part: u64, whole: u64) -> Option<f64> {
    (whole > 0).then(|| round3(part as f64 * 100.0 / whole as f64))
}

impl StepServer {
    /// Monitor `name`'s statistics of the step `window` (coordinator's clock) from its `samples`,
    /// in the order taken, on a clock `clock_offset_ns` ahead of the coordinator's; `cores` are what
    /// the target may use. `None` when the samples do not bracket any of the step.
    pub fn of(
        name: &str,
        cores: &Cores,
        samples: &[Sample],
        window: Window,
        clock_offset_ns: i64,
    ) -> Option<StepServer> {
        let times: Vec<i64> = samples
            .iter()
            .map(|s| s.at_unix_ns - clock_offset_ns)
            .collect();
        let p = Pairs::of(&times, window)?;
        let (lo, hi, a, b) = (&samples[p.lo], &samples[p.hi], &samples[p.a], &samples[p.b]);
        let rated = times[p.b] - times[p.a];
        let inside = &samples[p.inside.0..p.inside.1];
        let gauged = if inside.is_empty() {
            &samples[p.lo..=p.hi]
        } else {
            inside
        };
        // Gauges over an interval (the busiest thread, core) belong to the interval before their
        // sample: those whose interval lies between the rating pair.
        let intervals = &samples[p.a + 1..=p.b];
        let target = match (&a.target, &b.target, &lo.target, &hi.target) {
            (Some(ta), Some(tb), Some(tlo), Some(thi)) => Some(target_step(
                (ta, tb),
                (tlo, thi),
                rated,
                cores,
                gauged,
                intervals,
            )),
            _ => None,
        };
        let mut tcp = tcp_delta(&hi.tcp, &lo.tcp);
        tcp.curr_estab = gauged.iter().map(|s| s.tcp.curr_estab).max().unwrap_or(0);
        Some(StepServer {
            monitor: name.to_string(),
            watches: Watches::Unsaid,
            counted_s: round3(secs(times[p.hi] - times[p.lo])),
            rated_s: round3(secs(rated)),
            partial: p.partial,
            samples: inside.len() as u32,
            target,
            host: host_step(a, b, gauged),
            net: net_delta(&lo.net, &hi.net),
            tcp,
            monitor_cpu_pct: pct(b.monitor_cpu_ns.saturating_sub(a.monitor_cpu_ns), rated),
            series: series(&samples[p.lo..=p.hi], &times[p.lo..=p.hi], window.start_ns),
            source: Source::Monitor,
            extra: Vec::new(),
        })
    }
}

fn target_step(
    (a, b): (&TargetSample, &TargetSample),
    (lo, hi): (&TargetSample, &TargetSample),
    rated: i64,
    cores: &Cores,
    gauged: &[Sample],
    intervals: &[Sample],
) -> TargetStep {
    let cpu_pct = pct(b.cpu_ns().saturating_sub(a.cpu_ns()), rated);
    let usable = cores.usable();
    let targets = || gauged.iter().filter_map(|s| s.target.as_ref());
    let gauge = |f: fn(&TargetSample) -> f64| Gauge::of(targets().map(f)).unwrap_or_default();
    let busiest = intervals
        .iter()
        .filter_map(|s| s.target.as_ref())
        .filter_map(|t| Some((t.busiest_thread_pct?, t.busiest_thread.clone())))
        .max_by(|x, y| x.0.total_cmp(&y.0));
    let cgroup = |t: &TargetSample, f: fn(&super::CgroupSample) -> Option<u64>| {
        t.cgroup.as_ref().and_then(f)
    };
    let delta = |x: &TargetSample, y: &TargetSample, f: fn(&super::CgroupSample) -> Option<u64>| {
        Some(cgroup(y, f)?.saturating_sub(cgroup(x, f)?))
    };
    let throttled_pct = delta(a, b, |c| c.periods)
        .zip(delta(a, b, |c| c.throttled_periods))
        .and_then(|(periods, throttled)| share(throttled, periods));
    TargetStep {
        cpu_pct,
        cpu_user_pct: pct(b.cpu_user_ns.saturating_sub(a.cpu_user_ns), rated),
        cpu_system_pct: pct(b.cpu_system_ns.saturating_sub(a.cpu_system_ns), rated),
        cpu_util_pct: round3(cpu_pct / usable),
        usable_cores: round3(usable),
        thread_max_pct: busiest.as_ref().map(|(p, _)| round3(*p)),
        busiest_thread: busiest.and_then(|(_, name)| name),
        memory_bytes: gauge(|t| t.memory_bytes() as f64),
        threads: gauge(|t| f64::from(t.threads)),
        open_fds: gauge(|t| t.open_fds as f64),
        processes: gauge(|t| f64::from(t.processes)),
        voluntary_switches: hi.voluntary_switches.saturating_sub(lo.voluntary_switches),
        involuntary_switches: hi
            .involuntary_switches
            .saturating_sub(lo.involuntary_switches),
        throttled_pct,
        memory_peak_bytes: targets()
            .filter_map(|t| cgroup(t, |c| c.memory_peak_bytes))
            .max(),
        oom_kills: delta(lo, hi, |c| c.oom_kills),
    }
}

fn host_step(a: &Sample, b: &Sample, gauged: &[Sample]) -> HostStep {
    let d = b.host.cpu.since(&a.host.cpu);
    let total = d.total_ns();
    let busiest = b
        .host
        .cores
        .iter()
        .zip(&a.host.cores)
        .enumerate()
        .filter_map(|(i, (later, earlier))| Some((i, later.since(earlier).busy_pct()?)))
        .max_by(|x, y| x.1.total_cmp(&y.1));
    HostStep {
        cpu_pct: share(d.busy_ns(), total),
        softirq_pct: share(d.softirq_ns, total),
        steal_pct: share(d.steal_ns, total),
        iowait_pct: share(d.iowait_ns, total),
        busiest_core: busiest.map(|(i, _)| i),
        busiest_core_pct: busiest.map(|(_, p)| round3(p)),
        run_queue: Gauge::of(gauged.iter().map(|s| f64::from(s.host.run_queue))),
        mem_available_bytes: Gauge::of(gauged.iter().map(|s| s.host.mem_available_bytes as f64)),
    }
}

/// Every counter's growth from `lo` to `hi` (the gauge `curr_estab` is the caller's).
fn tcp_delta(hi: &TcpCounters, lo: &TcpCounters) -> TcpCounters {
    let d = |f: fn(&TcpCounters) -> u64| f(hi).saturating_sub(f(lo));
    TcpCounters {
        listen_overflows: d(|t| t.listen_overflows),
        listen_drops: d(|t| t.listen_drops),
        syncookies_sent: d(|t| t.syncookies_sent),
        retrans_segs: d(|t| t.retrans_segs),
        estab_resets: d(|t| t.estab_resets),
        out_rsts: d(|t| t.out_rsts),
        attempt_fails: d(|t| t.attempt_fails),
        active_opens: d(|t| t.active_opens),
        passive_opens: d(|t| t.passive_opens),
        abort_on_data: d(|t| t.abort_on_data),
        abort_on_close: d(|t| t.abort_on_close),
        abort_on_memory: d(|t| t.abort_on_memory),
        abort_on_timeout: d(|t| t.abort_on_timeout),
        abort_on_linger: d(|t| t.abort_on_linger),
        curr_estab: 0,
    }
}

/// Each interface's growth; one that is not in both samples (it came or went) is left out.
fn net_delta(lo: &[InterfaceCounters], hi: &[InterfaceCounters]) -> Vec<InterfaceCounters> {
    hi.iter()
        .filter_map(|h| {
            let l = lo.iter().find(|l| l.name == h.name)?;
            let d = |f: fn(&InterfaceCounters) -> u64| f(h).saturating_sub(f(l));
            Some(InterfaceCounters {
                name: h.name.clone(),
                rx_bytes: d(|c| c.rx_bytes),
                rx_packets: d(|c| c.rx_packets),
                rx_errors: d(|c| c.rx_errors),
                rx_drops: d(|c| c.rx_drops),
                tx_bytes: d(|c| c.tx_bytes),
                tx_packets: d(|c| c.tx_packets),
                tx_errors: d(|c| c.tx_errors),
                tx_drops: d(|c| c.tx_drops),
            })
        })
        .collect()
}

fn series(samples: &[Sample], times: &[i64], start_ns: i64) -> Vec<Point> {
    samples
        .windows(2)
        .zip(times.windows(2))
        .map(|(s, t)| {
            let span = t[1] - t[0];
            let (x, y) = (&s[0], &s[1]);
            let cpu = |s: &Sample| s.target.as_ref().map(TargetSample::cpu_ns);
            let host: CpuStates = y.host.cpu.since(&x.host.cpu);
            Point {
                t_s: round3(secs(t[1] - start_ns)),
                cpu_pct: cpu(x)
                    .zip(cpu(y))
                    .map(|(x, y)| pct(y.saturating_sub(x), span)),
                memory_bytes: y.target.as_ref().map(TargetSample::memory_bytes),
                thread_max_pct: y
                    .target
                    .as_ref()
                    .and_then(|t| t.busiest_thread_pct)
                    .map(round3),
                host_cpu_pct: host.busy_pct().map(round3),
                listen_drops: y.tcp.listen_drops.saturating_sub(x.tcp.listen_drops),
                retrans_segs: y.tcp.retrans_segs.saturating_sub(x.tcp.retrans_segs),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests;
