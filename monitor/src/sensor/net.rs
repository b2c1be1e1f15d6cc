//! Network counters per interface (/proc/net/dev), in the monitor's network namespace or the target's
//! (a container's own, read through /proc/PID/net), and which of the two the target lives in.
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::InterfaceCounters;

use super::procfs::{ParseError, number};

/// /proc/net/dev: two header lines, then `name: 16 counters` per interface; sorted by name.
pub fn parse_dev(text: &str) -> Result<Vec<InterfaceCounters>, ParseError> {
    let mut interfaces = Vec::new();
    for (i, line) in text.lines().enumerate().skip(2) {
        if line.trim().is_empty() {
            continue;
        }
        let (name, rest) = line
            .split_once(':')
            .ok_or_else(|| ParseError::new(i + 1, "no `name:` before the counters"))?;
        let mut values = [0u64; 16];
        let mut n = 0;
        for (slot, field) in values.iter_mut().zip(rest.split_whitespace()) {
            *slot = number(field, i + 1, "a counter")?;
            n += 1;
        }
        if n < 16 {
            return Err(ParseError::new(i + 1, format!("{n} counters, expected 16")));
        }
        interfaces.push(InterfaceCounters {
            name: name.trim().to_string(),
            rx_bytes: values[0],
            rx_packets: values[1],
            rx_errors: values[2],
            rx_drops: values[3],
            tx_bytes: values[8],
            tx_packets: values[9],
            tx_errors: values[10],
            tx_drops: values[11],
        });
    }
    interfaces.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(interfaces)
}

/// Where a process's network counters are read: `/proc/PID/net` when it has a network namespace of
/// its own, `None` when it shares the monitor's (or its namespace cannot be told: then the monitor's).
pub fn own_namespace(pid: u32) -> Option<PathBuf> {
    let ours = std::fs::metadata("/proc/self/ns/net").ok()?;
    let theirs = std::fs::metadata(format!("/proc/{pid}/ns/net")).ok()?;
    let differs = ours.ino() != theirs.ino() || ours.dev() != theirs.dev();
    differs.then(|| PathBuf::from(format!("/proc/{pid}/net")))
}

/// The monitor's own /proc/net.
pub fn ours() -> &'static Path {
    Path::new("/proc/net")
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEV: &str = "Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo: 82586395  667312    0    0    0     0          0         0 82586395  667312    0    0    0     0       0          0
  eth0: 1000 10 1 2 0 0 0 0 2000 20 3 4 0 0 0 0
";

    #[test]
    fn dev_counters_per_interface() {
        let net = parse_dev(DEV).unwrap();
        assert_eq!(net.len(), 2);
        assert_eq!(net[0].name, "eth0");
        assert_eq!(
            (
                net[0].rx_bytes,
                net[0].rx_packets,
                net[0].rx_errors,
                net[0].rx_drops
            ),
            (1000, 10, 1, 2)
        );
        assert_eq!(
            (
                net[0].tx_bytes,
                net[0].tx_packets,
                net[0].tx_errors,
                net[0].tx_drops
            ),
            (2000, 20, 3, 4)
        );
        assert_eq!(net[1].tx_bytes, 82586395);
    }

    #[test]
    fn dev_errors_name_the_line() {
        let short = format!("{DEV}  eth1: 1 2 3\n");
        assert_eq!(parse_dev(&short).unwrap_err().line, 5);
        let garbled = format!("{DEV}  eth1 1 2 3\n");
        assert_eq!(parse_dev(&garbled).unwrap_err().line, 5);
    }

    #[test]
    fn our_own_namespace_is_not_another() {
        assert_eq!(own_namespace(std::process::id()), None);
        assert!(parse_dev(&std::fs::read_to_string(ours().join("dev")).unwrap()).is_ok());
    }
}
