//! The monitor's wire form: its protobuf messages (`proto`'s) converted to and from this crate's data.
//! What is received is checked (a share that is not a number, a missing part, text longer than any the
//! kernel gives) before the coordinator sees it.
use proto::{ConvertError, pb};

use crate::{
    CgroupSample, Cores, CpuStates, HostSample, InterfaceCounters, MonitorInfo, NetScope, Sample,
    TargetSample, TcpCounters,
};

/// Longest text a monitor may send in one field: names, a hostname, "process nginx (3 pids)". The
/// kernel's own names are far shorter (an interface 15 bytes, a thread 15, a hostname 64).
pub const MAX_TEXT: usize = 256;

/// Most cores or interfaces one sample may list; a peer that sends more is not a machine.
pub const MAX_ENTRIES: usize = 4096;

/// A peer's text is words to show, never trusted for more: a long one is cut at a character.
fn text(s: &str) -> String {
    let mut end = s.len().min(MAX_TEXT);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_string()
}

/// A share in %: a number, not negative. Above 100 is possible (a thread sampled across a longer
/// interval than the clock said), so it is not capped here.
fn share(what: &'static str, v: Option<f64>) -> Result<Option<f64>, ConvertError> {
    match v {
        Some(x) if !(x.is_finite() && x >= 0.0) => Err(ConvertError::Invalid(what)),
        other => Ok(other),
    }
}

fn entries(what: &'static str, n: usize) -> Result<(), ConvertError> {
    if n > MAX_ENTRIES {
        return Err(ConvertError::Length {
            what,
            found: n,
            expected: MAX_ENTRIES,
        });
    }
    Ok(())
}

impl From<&MonitorInfo> for pb::MonitorInfo {
    fn from(i: &MonitorInfo) -> Self {
        pb::MonitorInfo {
            name: i.name.clone(),
            hostname: i.hostname.clone(),
            watching: i.watching.clone(),
            cores: Some(pb::MonitorCores {
                online: i.cores.online,
                cpuset: i.cores.cpuset,
                quota: i.cores.quota,
            }),
            machine_id: i.machine_id.clone(),
        }
    }
}

impl TryFrom<&pb::MonitorInfo> for MonitorInfo {
    type Error = ConvertError;

    fn try_from(i: &pb::MonitorInfo) -> Result<Self, ConvertError> {
        if i.name.is_empty() {
            return Err(ConvertError::Missing("monitor name"));
        }
        let c = i
            .cores
            .as_ref()
            .ok_or(ConvertError::Missing("monitor cores"))?;
        if c.online == 0 || c.cpuset == Some(0) {
            return Err(ConvertError::Invalid(
                "monitor cores: none online or in the cpuset",
            ));
        }
        if c.quota.is_some_and(|q| !(q.is_finite() && q > 0.0)) {
            return Err(ConvertError::Invalid(
                "monitor cores: a quota that is not a positive number",
            ));
        }
        Ok(MonitorInfo {
            name: text(&i.name),
            hostname: text(&i.hostname),
            watching: text(&i.watching),
            cores: Cores {
                online: c.online,
                cpuset: c.cpuset,
                quota: c.quota,
            },
            machine_id: text(&i.machine_id),
        })
    }
}

impl From<&CpuStates> for pb::CpuStates {
    fn from(c: &CpuStates) -> Self {
        pb::CpuStates {
            user_ns: c.user_ns,
            nice_ns: c.nice_ns,
            system_ns: c.system_ns,
            idle_ns: c.idle_ns,
            iowait_ns: c.iowait_ns,
            irq_ns: c.irq_ns,
            softirq_ns: c.softirq_ns,
            steal_ns: c.steal_ns,
        }
    }
}

impl From<&pb::CpuStates> for CpuStates {
    fn from(c: &pb::CpuStates) -> Self {
        CpuStates {
            user_ns: c.user_ns,
            nice_ns: c.nice_ns,
            system_ns: c.system_ns,
            idle_ns: c.idle_ns,
            iowait_ns: c.iowait_ns,
            irq_ns: c.irq_ns,
            softirq_ns: c.softirq_ns,
            steal_ns: c.steal_ns,
        }
    }
}

impl From<&CgroupSample> for pb::CgroupCounters {
    fn from(c: &CgroupSample) -> Self {
        pb::CgroupCounters {
            usage_ns: c.usage_ns,
            user_ns: c.user_ns,
            system_ns: c.system_ns,
            periods: c.periods,
            throttled_periods: c.throttled_periods,
            throttled_ns: c.throttled_ns,
            memory_current_bytes: c.memory_current_bytes,
            working_set_bytes: c.working_set_bytes,
            memory_peak_bytes: c.memory_peak_bytes,
            oom_kills: c.oom_kills,
        }
    }
}

impl TryFrom<&pb::CgroupCounters> for CgroupSample {
    type Error = ConvertError;

    fn try_from(c: &pb::CgroupCounters) -> Result<Self, ConvertError> {
        if let (Some(p), Some(t)) = (c.periods, c.throttled_periods)
            && t > p
        {
            return Err(ConvertError::Invalid(
                "cgroup counters have more throttled periods than periods",
            ));
        }
        Ok(CgroupSample {
            usage_ns: c.usage_ns,
            user_ns: c.user_ns,
            system_ns: c.system_ns,
            periods: c.periods,
            throttled_periods: c.throttled_periods,
            throttled_ns: c.throttled_ns,
            memory_current_bytes: c.memory_current_bytes,
            working_set_bytes: c.working_set_bytes,
            memory_peak_bytes: c.memory_peak_bytes,
            oom_kills: c.oom_kills,
        })
    }
}

impl From<&TargetSample> for pb::MonitorTarget {
    fn from(t: &TargetSample) -> Self {
        pb::MonitorTarget {
            processes: t.processes,
            threads: t.threads,
            open_fds: t.open_fds,
            rss_bytes: t.rss_bytes,
            cpu_user_ns: t.cpu_user_ns,
            cpu_system_ns: t.cpu_system_ns,
            voluntary_switches: t.voluntary_switches,
            involuntary_switches: t.involuntary_switches,
            busiest_thread_pct: t.busiest_thread_pct,
            busiest_thread: t.busiest_thread.clone(),
            cgroup: t.cgroup.as_ref().map(Into::into),
        }
    }
}

impl TryFrom<&pb::MonitorTarget> for TargetSample {
    type Error = ConvertError;

    fn try_from(t: &pb::MonitorTarget) -> Result<Self, ConvertError> {
        Ok(TargetSample {
            processes: t.processes,
            threads: t.threads,
            open_fds: t.open_fds,
            rss_bytes: t.rss_bytes,
            cpu_user_ns: t.cpu_user_ns,
            cpu_system_ns: t.cpu_system_ns,
            voluntary_switches: t.voluntary_switches,
            involuntary_switches: t.involuntary_switches,
            busiest_thread_pct: share("busiest_thread_pct is not a share", t.busiest_thread_pct)?,
            busiest_thread: t.busiest_thread.as_deref().map(text),
            cgroup: t.cgroup.as_ref().map(TryInto::try_into).transpose()?,
        })
    }
}

impl From<&HostSample> for pb::MonitorHost {
    fn from(h: &HostSample) -> Self {
        pb::MonitorHost {
            cpu: Some((&h.cpu).into()),
            cores: h.cores.iter().map(Into::into).collect(),
            busiest_core_pct: h.busiest_core_pct,
            run_queue: h.run_queue,
            mem_available_bytes: h.mem_available_bytes,
            mem_total_bytes: h.mem_total_bytes,
        }
    }
}

impl TryFrom<&pb::MonitorHost> for HostSample {
    type Error = ConvertError;

    fn try_from(h: &pb::MonitorHost) -> Result<Self, ConvertError> {
        entries("host cores", h.cores.len())?;
        let busiest = share("busiest_core_pct is not a share", h.busiest_core_pct)?;
        if busiest.is_some_and(|b| b > 100.0) {
            return Err(ConvertError::Invalid("busiest_core_pct is above 100"));
        }
        if h.mem_available_bytes > h.mem_total_bytes {
            return Err(ConvertError::Invalid(
                "the host has more memory available than in total",
            ));
        }
        Ok(HostSample {
            cpu: h
                .cpu
                .as_ref()
                .ok_or(ConvertError::Missing("host cpu"))?
                .into(),
            cores: h.cores.iter().map(Into::into).collect(),
            busiest_core_pct: busiest,
            run_queue: h.run_queue,
            mem_available_bytes: h.mem_available_bytes,
            mem_total_bytes: h.mem_total_bytes,
        })
    }
}

impl From<&InterfaceCounters> for pb::InterfaceCounters {
    fn from(i: &InterfaceCounters) -> Self {
        pb::InterfaceCounters {
            name: i.name.clone(),
            rx_bytes: i.rx_bytes,
            rx_packets: i.rx_packets,
            rx_errors: i.rx_errors,
            rx_drops: i.rx_drops,
            tx_bytes: i.tx_bytes,
            tx_packets: i.tx_packets,
            tx_errors: i.tx_errors,
            tx_drops: i.tx_drops,
        }
    }
}

impl From<&pb::InterfaceCounters> for InterfaceCounters {
    fn from(i: &pb::InterfaceCounters) -> Self {
        InterfaceCounters {
            name: text(&i.name),
            rx_bytes: i.rx_bytes,
            rx_packets: i.rx_packets,
            rx_errors: i.rx_errors,
            rx_drops: i.rx_drops,
            tx_bytes: i.tx_bytes,
            tx_packets: i.tx_packets,
            tx_errors: i.tx_errors,
            tx_drops: i.tx_drops,
        }
    }
}

impl From<&TcpCounters> for pb::TcpCounters {
    fn from(t: &TcpCounters) -> Self {
        pb::TcpCounters {
            listen_overflows: t.listen_overflows,
            listen_drops: t.listen_drops,
            syncookies_sent: t.syncookies_sent,
            retrans_segs: t.retrans_segs,
            estab_resets: t.estab_resets,
            out_rsts: t.out_rsts,
            attempt_fails: t.attempt_fails,
            active_opens: t.active_opens,
            passive_opens: t.passive_opens,
            abort_on_data: t.abort_on_data,
            abort_on_close: t.abort_on_close,
            abort_on_memory: t.abort_on_memory,
            abort_on_timeout: t.abort_on_timeout,
            abort_on_linger: t.abort_on_linger,
            curr_estab: t.curr_estab,
        }
    }
}

impl From<&pb::TcpCounters> for TcpCounters {
    fn from(t: &pb::TcpCounters) -> Self {
        TcpCounters {
            listen_overflows: t.listen_overflows,
            listen_drops: t.listen_drops,
            syncookies_sent: t.syncookies_sent,
            retrans_segs: t.retrans_segs,
            estab_resets: t.estab_resets,
            out_rsts: t.out_rsts,
            attempt_fails: t.attempt_fails,
            active_opens: t.active_opens,
            passive_opens: t.passive_opens,
            abort_on_data: t.abort_on_data,
            abort_on_close: t.abort_on_close,
            abort_on_memory: t.abort_on_memory,
            abort_on_timeout: t.abort_on_timeout,
            abort_on_linger: t.abort_on_linger,
            curr_estab: t.curr_estab,
        }
    }
}

impl From<&Sample> for pb::MonitorSample {
    fn from(s: &Sample) -> Self {
        pb::MonitorSample {
            at_unix_nanos: s.at_unix_ns,
            target: s.target.as_ref().map(Into::into),
            host: Some((&s.host).into()),
            net_scope: match s.net_scope {
                NetScope::Host => pb::NetScope::Host,
                NetScope::Target => pb::NetScope::Target,
            } as i32,
            net: s.net.iter().map(Into::into).collect(),
            tcp: Some((&s.tcp).into()),
            monitor_cpu_ns: s.monitor_cpu_ns,
        }
    }
}

impl TryFrom<&pb::MonitorSample> for Sample {
    type Error = ConvertError;

    fn try_from(s: &pb::MonitorSample) -> Result<Self, ConvertError> {
        if s.at_unix_nanos <= 0 {
            return Err(ConvertError::Invalid("a monitor sample without its time"));
        }
        let net_scope = match pb::NetScope::try_from(s.net_scope) {
            Ok(pb::NetScope::Host) => NetScope::Host,
            Ok(pb::NetScope::Target) => NetScope::Target,
            _ => {
                return Err(ConvertError::Unknown {
                    what: "net scope",
                    value: s.net_scope,
                });
            }
        };
        entries("network interfaces", s.net.len())?;
        Ok(Sample {
            at_unix_ns: s.at_unix_nanos,
            target: s.target.as_ref().map(TryInto::try_into).transpose()?,
            host: s
                .host
                .as_ref()
                .ok_or(ConvertError::Missing("host sample"))?
                .try_into()?,
            net_scope,
            net: s.net.iter().map(Into::into).collect(),
            tcp: s
                .tcp
                .as_ref()
                .ok_or(ConvertError::Missing("tcp counters"))?
                .into(),
            monitor_cpu_ns: s.monitor_cpu_ns,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info() -> MonitorInfo {
        MonitorInfo {
            name: "web1".into(),
            hostname: "web1.internal".into(),
            watching: "process nginx (3 pids)".into(),
            cores: Cores {
                online: 8,
                cpuset: Some(2),
                quota: Some(1.5),
            },
            machine_id: "9f2c".into(),
        }
    }

    fn sample() -> Sample {
        let states = |n| CpuStates {
            user_ns: n,
            nice_ns: n + 1,
            system_ns: n + 2,
            idle_ns: n + 3,
            iowait_ns: n + 4,
            irq_ns: n + 5,
            softirq_ns: n + 6,
            steal_ns: n + 7,
        };
        Sample {
            at_unix_ns: 1_700_000_000_123_456_789,
            target: Some(TargetSample {
                processes: 3,
                threads: 9,
                open_fds: 40,
                rss_bytes: 12 << 20,
                cpu_user_ns: 5_000,
                cpu_system_ns: 7_000,
                voluntary_switches: 11,
                involuntary_switches: 13,
                busiest_thread_pct: Some(99.5),
                busiest_thread: Some("nginx".into()),
                cgroup: Some(CgroupSample {
                    usage_ns: 1,
                    user_ns: 2,
                    system_ns: 3,
                    periods: Some(10),
                    throttled_periods: Some(4),
                    throttled_ns: Some(5),
                    memory_current_bytes: Some(6),
                    working_set_bytes: Some(7),
                    memory_peak_bytes: None,
                    oom_kills: Some(0),
                }),
            }),
            host: HostSample {
                cpu: states(100),
                cores: vec![states(10), states(20)],
                busiest_core_pct: Some(87.5),
                run_queue: 3,
                mem_available_bytes: 1 << 30,
                mem_total_bytes: 4 << 30,
            },
            net_scope: NetScope::Target,
            net: vec![InterfaceCounters {
                name: "eth0".into(),
                rx_bytes: 1,
                rx_packets: 2,
                rx_errors: 3,
                rx_drops: 4,
                tx_bytes: 5,
                tx_packets: 6,
                tx_errors: 7,
                tx_drops: 8,
            }],
            tcp: TcpCounters {
                listen_overflows: 1,
                listen_drops: 2,
                syncookies_sent: 3,
                retrans_segs: 4,
                estab_resets: 5,
                out_rsts: 6,
                attempt_fails: 7,
                active_opens: 8,
                passive_opens: 9,
                abort_on_data: 10,
                abort_on_close: 11,
                abort_on_memory: 12,
                abort_on_timeout: 13,
                abort_on_linger: 14,
                curr_estab: 15,
            },
            monitor_cpu_ns: 42,
        }
    }

    /// Through the wire's bytes, not only the generated structs, so a field left out of one side's
    /// conversion shows.
    fn over_the_wire(s: &Sample) -> Result<Sample, ConvertError> {
        use prost::Message;
        let bytes = pb::MonitorSample::from(s).encode_to_vec();
        Sample::try_from(&pb::MonitorSample::decode(bytes.as_slice()).unwrap())
    }

    #[test]
    fn a_sample_and_the_info_roundtrip_losslessly() {
        let s = sample();
        assert_eq!(over_the_wire(&s).unwrap(), s);
        let mut host_only = sample();
        host_only.target = None;
        host_only.net_scope = NetScope::Host;
        host_only.host.busiest_core_pct = None;
        assert_eq!(over_the_wire(&host_only).unwrap(), host_only);
        let i = info();
        assert_eq!(
            MonitorInfo::try_from(&pb::MonitorInfo::from(&i)).unwrap(),
            i
        );
        let mut unlimited = info();
        unlimited.cores.cpuset = None;
        unlimited.cores.quota = None;
        assert_eq!(
            MonitorInfo::try_from(&pb::MonitorInfo::from(&unlimited)).unwrap(),
            unlimited
        );
    }

    #[test]
    fn a_bad_sample_is_refused_by_what_is_wrong() {
        let refused = |edit: fn(&mut pb::MonitorSample)| {
            let mut p = pb::MonitorSample::from(&sample());
            edit(&mut p);
            Sample::try_from(&p).unwrap_err().to_string()
        };
        assert_eq!(refused(|p| p.host = None), "host sample is missing");
        assert_eq!(refused(|p| p.tcp = None), "tcp counters is missing");
        assert_eq!(
            refused(|p| p.at_unix_nanos = 0),
            "a monitor sample without its time"
        );
        assert_eq!(
            refused(|p| p.net_scope = 9),
            "net scope has an unknown value 9"
        );
        assert_eq!(
            refused(|p| p.net_scope = pb::NetScope::Unspecified as i32),
            "net scope has an unknown value 0"
        );
        for bad in [f64::NAN, f64::INFINITY, -1.0] {
            let mut p = pb::MonitorSample::from(&sample());
            p.target.as_mut().unwrap().busiest_thread_pct = Some(bad);
            let e = Sample::try_from(&p).unwrap_err().to_string();
            assert_eq!(e, "busiest_thread_pct is not a share", "{bad}");
            let mut p = pb::MonitorSample::from(&sample());
            p.host.as_mut().unwrap().busiest_core_pct = Some(bad);
            assert!(Sample::try_from(&p).is_err(), "{bad}");
        }
        assert_eq!(
            refused(|p| p.host.as_mut().unwrap().busiest_core_pct = Some(100.5)),
            "busiest_core_pct is above 100"
        );
        assert_eq!(
            refused(|p| p.host.as_mut().unwrap().mem_available_bytes = u64::MAX),
            "the host has more memory available than in total"
        );
        assert_eq!(
            refused(|p| p.host.as_mut().unwrap().cpu = None),
            "host cpu is missing"
        );
        assert_eq!(
            refused(|p| {
                let cg = p.target.as_mut().unwrap().cgroup.as_mut().unwrap();
                cg.throttled_periods = Some(11);
            }),
            "cgroup counters have more throttled periods than periods"
        );
        assert_eq!(
            refused(|p| p.net = vec![pb::InterfaceCounters::default(); MAX_ENTRIES + 1]),
            format!(
                "network interfaces has {} entries, expected {MAX_ENTRIES}",
                MAX_ENTRIES + 1
            )
        );
        assert!(
            refused(|p| p.host.as_mut().unwrap().cores =
                vec![pb::CpuStates::default(); MAX_ENTRIES + 1])
            .starts_with("host cores has")
        );
    }

    #[test]
    fn bad_info_is_refused_and_long_text_cut() {
        let refused = |edit: fn(&mut pb::MonitorInfo)| {
            let mut p = pb::MonitorInfo::from(&info());
            edit(&mut p);
            MonitorInfo::try_from(&p).unwrap_err().to_string()
        };
        assert_eq!(refused(|p| p.name.clear()), "monitor name is missing");
        assert_eq!(refused(|p| p.cores = None), "monitor cores is missing");
        assert!(refused(|p| p.cores.as_mut().unwrap().online = 0).contains("none online"));
        assert!(refused(|p| p.cores.as_mut().unwrap().cpuset = Some(0)).contains("cpuset"));
        for q in [0.0, -1.0, f64::NAN] {
            let mut p = pb::MonitorInfo::from(&info());
            p.cores.as_mut().unwrap().quota = Some(q);
            assert!(MonitorInfo::try_from(&p).is_err(), "{q}");
        }
        let mut p = pb::MonitorInfo::from(&info());
        // Multi-byte characters: the cut falls on a character's boundary, never inside one.
        p.watching = "é".repeat(MAX_TEXT);
        let back = MonitorInfo::try_from(&p).unwrap();
        assert!(back.watching.len() <= MAX_TEXT && back.watching.len() >= MAX_TEXT - 1);
        assert!(back.watching.chars().all(|c| c == 'é'));
        let mut s = pb::MonitorSample::from(&sample());
        s.net[0].name = "x".repeat(10 * MAX_TEXT);
        s.target.as_mut().unwrap().busiest_thread = Some("y".repeat(10 * MAX_TEXT));
        let back = Sample::try_from(&s).unwrap();
        assert_eq!(back.net[0].name.len(), MAX_TEXT);
        assert_eq!(back.target.unwrap().busiest_thread.unwrap().len(), MAX_TEXT);
    }

    mod fuzz {
        use proptest::prelude::*;
        use prost::Message;

        use super::*;

        /// Whatever a peer sends converts or is refused, never panics; what is accepted converts back
        /// to the same sample.
        fn convert(bytes: &[u8]) {
            let Ok(p) = pb::MonitorSample::decode(bytes) else {
                return;
            };
            if let Ok(s) = Sample::try_from(&p) {
                let again = Sample::try_from(&pb::MonitorSample::from(&s)).unwrap();
                assert_eq!(again, s);
            }
            if let Ok(p) = pb::MonitorInfo::decode(bytes)
                && let Ok(i) = MonitorInfo::try_from(&p)
            {
                assert_eq!(
                    MonitorInfo::try_from(&pb::MonitorInfo::from(&i)).unwrap(),
                    i
                );
            }
        }

        proptest! {
            #[test]
            fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
                convert(&bytes);
            }

            #[test]
            fn a_valid_sample_with_bytes_changed_never_panics(
                edits in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..8)
            ) {
                let mut bytes = pb::MonitorSample::from(&super::sample()).encode_to_vec();
                for (at, byte) in edits {
                    let i = at % bytes.len();
                    bytes[i] = byte;
                }
                convert(&bytes);
            }
        }
    }
}
