//! Properties of one monitor's view of a step, over samples built here: counts as exact deltas across
//! the step's edges, rates over the samples inside it, the clock offset applied, windows that add up.

use proptest::prelude::*;

use super::*;
use crate::{CgroupSample, HostSample, NetScope};

const S: i64 = 1_000_000_000;
/// Some wall-clock instant, so the arithmetic is done on epoch-sized numbers as in a run.
const EPOCH: i64 = 1_764_600_000 * S;

fn cores(online: u32) -> Cores {
    Cores {
        online,
        cpuset: None,
        quota: None,
    }
}

fn at(secs: f64) -> i64 {
    EPOCH + (secs * 1e9).round() as i64
}

fn window(from: f64, to: f64) -> Window {
    Window {
        start_ns: at(from),
        end_ns: at(to),
    }
}

/// A sample at `secs` whose counters stand at the given values.
fn sample(secs: f64, cpu_ns: u64, listen_drops: u64, memory: u64) -> Sample {
    Sample {
        at_unix_ns: at(secs),
        target: Some(TargetSample {
            processes: 1,
            threads: 4,
            open_fds: 10,
            rss_bytes: memory,
            cpu_user_ns: cpu_ns,
            cpu_system_ns: 0,
            voluntary_switches: listen_drops * 2,
            involuntary_switches: 0,
            busiest_thread_pct: None,
            busiest_thread: None,
            cgroup: None,
        }),
        host: HostSample {
            cpu: CpuStates {
                user_ns: cpu_ns,
                idle_ns: (secs * 2e9) as u64 - cpu_ns.min((secs * 2e9) as u64),
                ..CpuStates::default()
            },
            cores: Vec::new(),
            busiest_core_pct: None,
            run_queue: 1,
            mem_available_bytes: 1 << 30,
            mem_total_bytes: 2 << 30,
        },
        net_scope: NetScope::Host,
        net: vec![InterfaceCounters {
            name: "lo".into(),
            rx_bytes: listen_drops * 100,
            rx_packets: listen_drops,
            rx_errors: 0,
            rx_drops: 0,
            tx_bytes: 0,
            tx_packets: 0,
            tx_errors: 0,
            tx_drops: 0,
        }],
        tcp: TcpCounters {
            listen_drops,
            retrans_segs: listen_drops / 2,
            ..TcpCounters::default()
        },
        monitor_cpu_ns: (secs * 1e6) as u64,
    }
}

/// Samples at `offset + k` s for k in 0..n, of a target busy `busy(k)` ns in the second before
/// sample k.
fn busy_run(n: usize, offset: f64, busy: impl Fn(usize) -> u64) -> Vec<Sample> {
    let mut cpu = 0;
    (0..n)
        .map(|k| {
            if k > 0 {
                cpu += busy(k);
            }
            sample(offset + k as f64, cpu, 0, 1000)
        })
        .collect()
}

fn of(samples: &[Sample], w: Window) -> StepServer {
    StepServer::of("web", &cores(2), samples, w, 0).expect("the samples bracket the step")
}

#[test]
fn a_known_share_of_a_core_reads_as_that_share_whatever_the_window() {
    let samples = busy_run(40, 0.37, |_| S as u64 / 2);
    for (from, to) in [(10.0, 20.0), (3.5, 4.2), (0.0, 39.0), (12.37, 17.37)] {
        let t = of(&samples, window(from, to)).target.unwrap();
        assert_eq!((t.cpu_pct, t.cpu_util_pct), (50.0, 25.0), "{from}..{to}");
        assert_eq!(t.usable_cores, 2.0);
    }
}

#[test]
fn a_saturated_step_between_idle_ones_reads_100_not_diluted_by_the_idle_edges() {
    // Busy a whole core from 10 s to 20 s; samples on the half second.
    let samples = busy_run(
        30,
        0.5,
        |k| if (11..=19).contains(&k) { S as u64 } else { 0 },
    );
    let w = window(10.0, 20.0);
    let step = of(&samples, w);
    assert_eq!(step.target.as_ref().unwrap().cpu_pct, 100.0);
    assert_eq!(
        step.rated_s, 9.0,
        "from the sample at 10.5 to the one at 19.5"
    );
    assert_eq!(
        step.counted_s, 11.0,
        "from the sample at 9.5 to the one at 20.5"
    );
    assert_eq!(step.samples, 10);
    assert!(!step.partial);
}

#[test]
fn counts_cover_the_edges_of_the_step_exactly() {
    // One drop in the second before each sample; the step from 10.2 to 15.2 holds the samples at
    // 11..=15; its counting pair is the samples at 10 and 16, six seconds, six drops.
    let samples: Vec<Sample> = (0..30)
        .map(|k| sample(k as f64, 0, k as u64, 1000))
        .collect();
    let step = of(&samples, window(10.2, 15.2));
    assert_eq!(step.tcp.listen_drops, 6);
    assert_eq!(step.tcp.retrans_segs, 16 / 2 - 10 / 2);
    assert_eq!(step.net[0].rx_bytes, 600);
    assert_eq!(step.target.as_ref().unwrap().voluntary_switches, 12);
    assert_eq!(step.series.len(), 6);
    assert_eq!(
        step.series[0].t_s, 0.8,
        "the counting pair's second sample, from the start"
    );
    assert!(step.series.iter().all(|p| p.listen_drops == 1));
    // A sample exactly on a boundary is the boundary.
    assert_eq!(of(&samples, window(10.0, 15.0)).tcp.listen_drops, 5);
}

#[test]
fn gauges_are_over_the_samples_inside() {
    let mut samples = busy_run(10, 0.0, |_| 0);
    for (k, s) in samples.iter_mut().enumerate() {
        let t = s.target.as_mut().unwrap();
        t.rss_bytes = 1000 * k as u64;
        t.busiest_thread_pct = Some(10.0 * k as f64);
        t.busiest_thread = Some(format!("worker-{k}"));
    }
    let t = of(&samples, window(2.5, 6.5)).target.unwrap();
    // Inside: the samples at 3, 4, 5 and 6.
    assert_eq!(
        t.memory_bytes,
        Gauge {
            min: 3000.0,
            avg: 4500.0,
            max: 6000.0
        }
    );
    // The busiest thread of the seconds between the rating pair (3 to 6): the sample at 3 speaks of
    // the second before it, which is partly before the step.
    assert_eq!(t.thread_max_pct, Some(60.0));
    assert_eq!(t.busiest_thread.as_deref(), Some("worker-6"));
}

#[test]
fn the_monitors_clock_is_moved_onto_the_coordinators() {
    let samples = busy_run(
        30,
        0.5,
        |k| if (11..=19).contains(&k) { S as u64 } else { 0 },
    );
    let ahead: Vec<Sample> = samples
        .iter()
        .map(|s| Sample {
            at_unix_ns: s.at_unix_ns + 7 * S + 123,
            ..s.clone()
        })
        .collect();
    let w = window(10.0, 20.0);
    let shifted = StepServer::of("web", &cores(2), &ahead, w, 7 * S + 123).unwrap();
    assert_eq!(shifted, of(&samples, w));
    // Unshifted, the same samples would put the busy seconds outside the step.
    let unshifted = StepServer::of("web", &cores(2), &ahead, w, 0).unwrap();
    assert!(unshifted.target.unwrap().cpu_pct < 50.0);
}

#[test]
fn a_monitor_that_joined_late_or_left_early_is_partial_and_one_with_nothing_inside_is_none() {
    let samples = busy_run(10, 5.0, |_| S as u64);
    let late = of(&samples, window(3.0, 8.0));
    assert!(late.partial);
    assert_eq!(late.target.unwrap().cpu_pct, 100.0);
    assert!(of(&samples, window(12.0, 20.0)).partial);
    assert!(!of(&samples, window(6.0, 9.0)).partial);
    let none = |from, to| StepServer::of("web", &cores(1), &samples, window(from, to), 0);
    assert_eq!(none(0.0, 4.0), None, "all samples after the step");
    assert_eq!(none(15.0, 20.0), None, "all samples before the step");
    assert_eq!(
        StepServer::of("web", &cores(1), &[], window(0.0, 1.0), 0),
        None
    );
}

#[test]
fn a_step_shorter_than_a_sample_interval_is_rated_over_its_counting_pair() {
    let samples = busy_run(10, 0.0, |_| S as u64 / 4);
    let step = of(&samples, window(3.2, 3.9));
    assert_eq!((step.rated_s, step.counted_s, step.samples), (1.0, 1.0, 0));
    assert_eq!(step.target.unwrap().cpu_pct, 25.0);
}

#[test]
fn host_states_throttling_and_the_busiest_core() {
    let mut samples = busy_run(6, 0.0, |_| 0);
    for (k, s) in samples.iter_mut().enumerate() {
        let k = k as u64;
        s.host.cpu = CpuStates {
            user_ns: 600 * k,
            softirq_ns: 100 * k,
            steal_ns: 50 * k,
            iowait_ns: 50 * k,
            idle_ns: 200 * k,
            ..CpuStates::default()
        };
        s.host.cores = vec![
            CpuStates {
                user_ns: 100 * k,
                idle_ns: 400 * k,
                ..CpuStates::default()
            },
            CpuStates {
                user_ns: 450 * k,
                idle_ns: 50 * k,
                ..CpuStates::default()
            },
        ];
        s.target.as_mut().unwrap().cgroup = Some(CgroupSample {
            usage_ns: 0,
            user_ns: 0,
            system_ns: 0,
            periods: Some(10 * k),
            throttled_periods: Some(35 * k / 10),
            throttled_ns: Some(0),
            memory_current_bytes: None,
            working_set_bytes: Some(5000 + k),
            memory_peak_bytes: Some(9000 + k),
            oom_kills: Some(k / 2),
        });
    }
    let step = of(&samples, window(1.0, 5.0));
    let h = &step.host;
    assert_eq!(
        (h.cpu_pct, h.softirq_pct, h.steal_pct, h.iowait_pct),
        (Some(75.0), Some(10.0), Some(5.0), Some(5.0))
    );
    assert_eq!((h.busiest_core, h.busiest_core_pct), (Some(1), Some(90.0)));
    let t = step.target.unwrap();
    assert_eq!(t.throttled_pct, Some(35.0));
    assert_eq!(t.memory_bytes.max, 5005.0, "the working set, not the RSS");
    assert_eq!(t.memory_peak_bytes, Some(9005));
    assert_eq!(t.oom_kills, Some(2));
}

#[test]
fn a_host_monitor_has_no_target() {
    let samples: Vec<Sample> = busy_run(5, 0.0, |_| 1)
        .into_iter()
        .map(|s| Sample { target: None, ..s })
        .collect();
    let step = of(&samples, window(1.0, 3.0));
    assert_eq!(step.target, None);
    assert!(step.series.iter().all(|p| p.cpu_pct.is_none()));
    assert_eq!(step.monitor_cpu_pct, 0.1, "1 ms a second");
}

proptest! {
    /// Counts of consecutive steps add up to the whole when the steps are cut at sample instants,
    /// and never to less when cut anywhere (nothing between two steps' edges is lost).
    #[test]
    fn deltas_of_consecutive_windows_add_up_to_the_whole(
        steps in prop::collection::vec((0u64..50, 700_000_000i64..1_300_000_000), 4..60),
        cuts in prop::collection::vec(0.0f64..1.0, 1..6),
    ) {
        let mut t = 0i64;
        let mut drops = 0u64;
        let samples: Vec<Sample> = steps
            .iter()
            .map(|&(d, gap)| {
                t += gap;
                drops += d;
                Sample { at_unix_ns: EPOCH + t, ..sample(0.0, 0, drops, 1) }
            })
            .collect();
        let times: Vec<i64> = samples.iter().map(|s| s.at_unix_ns).collect();
        let (first, last) = (times[0], *times.last().unwrap());
        let whole = samples.last().unwrap().tcp.listen_drops - samples[0].tcp.listen_drops;
        let count = |from: i64, to: i64| {
            StepServer::of("m", &cores(1), &samples, Window { start_ns: from, end_ns: to }, 0)
                .map_or(0, |s| s.tcp.listen_drops)
        };
        // Cuts at sample instants.
        let mut at: Vec<i64> = cuts.iter().map(|c| times[(c * (times.len() - 1) as f64) as usize]).collect();
        at.extend([first, last]);
        at.sort_unstable();
        at.dedup();
        let sum: u64 = at.windows(2).map(|w| count(w[0], w[1])).sum();
        prop_assert_eq!(sum, whole);
        // Cuts anywhere in between.
        let mut anywhere: Vec<i64> = cuts.iter().map(|c| first + ((last - first) as f64 * c) as i64).collect();
        anywhere.extend([first, last]);
        anywhere.sort_unstable();
        anywhere.dedup();
        let sum: u64 = anywhere.windows(2).map(|w| count(w[0], w[1])).sum();
        prop_assert!(sum >= whole, "{} < {}", sum, whole);
    }
}
