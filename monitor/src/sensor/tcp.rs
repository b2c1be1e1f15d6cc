//! The kernel's TCP counters: /proc/net/netstat's `TcpExt` and /proc/net/snmp's `Tcp`, both written as
//! pairs of lines (a header of names, then the values under the same prefix).
use std::collections::HashMap;

use crate::TcpCounters;

use super::procfs::{ParseError, number};

/// One section's counters by name (`section` is `TcpExt` or `Tcp`). Values are signed: snmp's
/// `MaxConn` is -1.
pub fn parse_section<'t>(
    text: &'t str,
    section: &str,
) -> Result<HashMap<&'t str, i64>, ParseError> {
    let prefix = format!("{section}:");
    let lines: Vec<(usize, &str)> = text
        .lines()
        .enumerate()
        .filter_map(|(i, line)| line.strip_prefix(&prefix).map(|rest| (i + 1, rest)))
        .collect();
    let [(_, names), (at, values)] = lines[..] else {
        return Err(ParseError::new(
            lines.first().map_or(1, |l| l.0),
            format!(
                "{} `{section}:` lines, expected a header and its values",
                lines.len()
            ),
        ));
    };
    let names: Vec<&str> = names.split_whitespace().collect();
    let values: Vec<&str> = values.split_whitespace().collect();
    if names.len() != values.len() {
        return Err(ParseError::new(
            at,
            format!("{} values under {} names", values.len(), names.len()),
        ));
    }
    names
        .into_iter()
        .zip(values)
        .map(|(name, value)| Ok((name, number(value, at, name)?)))
        .collect()
}

/// The counters stampede reports, from both files' text; one missing is an error naming it.
pub fn counters(netstat: &str, snmp: &str) -> Result<(TcpCounters, Missing), ParseError> {
    let ext = parse_section(netstat, "TcpExt")?;
    let tcp = parse_section(snmp, "Tcp")?;
    let mut missing = Missing::default();
    let mut get = |map: &HashMap<&str, i64>, name: &'static str| match map.get(name) {
        Some(v) => u64::try_from(*v).unwrap_or(0),
        None => {
            missing.0.push(name);
            0
        }
    };
    let counters = TcpCounters {
        listen_overflows: get(&ext, "ListenOverflows"),
        listen_drops: get(&ext, "ListenDrops"),
        syncookies_sent: get(&ext, "SyncookiesSent"),
        abort_on_data: get(&ext, "TCPAbortOnData"),
        abort_on_close: get(&ext, "TCPAbortOnClose"),
        abort_on_memory: get(&ext, "TCPAbortOnMemory"),
        abort_on_timeout: get(&ext, "TCPAbortOnTimeout"),
        abort_on_linger: get(&ext, "TCPAbortOnLinger"),
        retrans_segs: get(&tcp, "RetransSegs"),
        estab_resets: get(&tcp, "EstabResets"),
        out_rsts: get(&tcp, "OutRsts"),
        attempt_fails: get(&tcp, "AttemptFails"),
        active_opens: get(&tcp, "ActiveOpens"),
        passive_opens: get(&tcp, "PassiveOpens"),
        curr_estab: get(&tcp, "CurrEstab"),
    };
    Ok((counters, missing))
}

/// Counters this kernel does not have (each is reported as 0, and said once when the sensor opens).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Missing(pub Vec<&'static str>);

#[cfg(test)]
mod tests {
    use super::*;

    // Captured from Linux 6.18 (TcpExt trimmed to a few of its ~120 counters).
    const NETSTAT: &str = "TcpExt: SyncookiesSent SyncookiesRecv ListenOverflows ListenDrops TCPAbortOnData TCPAbortOnClose TCPAbortOnMemory TCPAbortOnTimeout TCPAbortOnLinger
TcpExt: 5 0 1234 1240 7 8 0 2 0
IpExt: InNoRoutes InTruncatedPkts
IpExt: 0 0
";
    const SNMP: &str = "Ip: Forwarding DefaultTTL
Ip: 1 64
Tcp: RtoAlgorithm RtoMin RtoMax MaxConn ActiveOpens PassiveOpens AttemptFails EstabResets CurrEstab InSegs OutSegs RetransSegs InErrs OutRsts InCsumErrors
Tcp: 1 200 120000 -1 300 290 4 6 12 10000 11000 33 0 55 0
Udp: InDatagrams
Udp: 1
";

    #[test]
    fn counters_from_both_files() {
        let (c, missing) = counters(NETSTAT, SNMP).unwrap();
        assert_eq!(missing, Missing::default());
        assert_eq!(
            (c.listen_overflows, c.listen_drops, c.syncookies_sent),
            (1234, 1240, 5)
        );
        assert_eq!((c.retrans_segs, c.estab_resets, c.out_rsts), (33, 6, 55));
        assert_eq!(
            (
                c.active_opens,
                c.passive_opens,
                c.attempt_fails,
                c.curr_estab
            ),
            (300, 290, 4, 12)
        );
        assert_eq!(c.aborts(), 17);
        let maxconn = parse_section(SNMP, "Tcp").unwrap()["MaxConn"];
        assert_eq!(maxconn, -1);
    }

    #[test]
    fn a_missing_counter_is_named() {
        let netstat = "TcpExt: ListenOverflows\nTcpExt: 1\n";
        let (c, missing) = counters(netstat, SNMP).unwrap();
        assert_eq!(c.listen_overflows, 1);
        assert!(missing.0.contains(&"ListenDrops"), "{missing:?}");
    }

    #[test]
    fn broken_sections_name_the_line() {
        let err = parse_section("TcpExt: A B\nTcpExt: 1\n", "TcpExt").unwrap_err();
        assert_eq!(err.line, 2, "{err}");
        let err = parse_section("TcpExt: A\nTcpExt: x\n", "TcpExt").unwrap_err();
        assert_eq!(err.line, 2);
        let err = parse_section("Ip: A\nIp: 1\n", "TcpExt").unwrap_err();
        assert!(err.what.contains("0 `TcpExt:` lines"), "{err}");
    }

    #[test]
    fn this_kernel_has_every_counter() {
        let netstat = std::fs::read_to_string("/proc/net/netstat").unwrap();
        let snmp = std::fs::read_to_string("/proc/net/snmp").unwrap();
        let (_, missing) = counters(&netstat, &snmp).unwrap();
        assert_eq!(missing, Missing::default());
    }
}
