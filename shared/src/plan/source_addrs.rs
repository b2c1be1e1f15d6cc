//! `--source-addrs`: the local addresses connections leave from, parsed and checked however they arrive.
use std::net::IpAddr;

use super::PlanError;

/// The most source addresses one run may list: enough for any real NIC's aliases, and a typo such as
/// `10.0.0.0-10.255.255.255` is refused instead of allocating 16 million entries.
pub const MAX_SOURCE_ADDRS: u128 = 4096;

pub(super) fn family(ip: IpAddr) -> &'static str {
    if ip.is_ipv4() { "IPv4" } else { "IPv6" }
}

/// Parses `--source-addrs`: addresses and inclusive ranges separated by commas, e.g.
/// `127.0.0.1,127.0.0.2` or `127.0.0.1-127.0.0.8` or `10.0.0.5,10.0.0.10-10.0.0.12` (IPv6 alike).
/// The order is kept: it is the round-robin order.
pub fn parse_source_addrs(input: &str) -> Result<Vec<IpAddr>, PlanError> {
    let bad = |why: String| PlanError::BadSourceAddrs {
        input: input.to_string(),
        why,
    };
    let ip = |s: &str| {
        s.trim()
            .parse::<IpAddr>()
            .map_err(|_| bad(format!("'{}' is not an IP address", s.trim())))
    };
    let mut out = Vec::new();
    for item in input.split(',') {
        let item = item.trim();
        if item.is_empty() {
            continue;
        }
        // '-' never occurs in an IPv4 or IPv6 address, so it can only be a range.
        let Some((a, b)) = item.split_once('-') else {
            out.push(ip(item)?);
            continue;
        };
        let (first, last) = (ip(a)?, ip(b)?);
        let (lo, hi) = match (first, last) {
            (IpAddr::V4(a), IpAddr::V4(b)) => (u128::from(u32::from(a)), u128::from(u32::from(b))),
            (IpAddr::V6(a), IpAddr::V6(b)) => (u128::from(a), u128::from(b)),
            _ => return Err(bad(format!("range {item} mixes IPv4 and IPv6"))),
        };
        if lo > hi {
            return Err(bad(format!("range {item} runs backwards")));
        }
        if hi - lo >= MAX_SOURCE_ADDRS || out.len() as u128 + (hi - lo) >= MAX_SOURCE_ADDRS {
            return Err(bad(format!("more than {MAX_SOURCE_ADDRS} addresses")));
        }
        for v in lo..=hi {
            out.push(match first {
                // In range: both ends are IPv4, so every value between fits in 32 bits.
                IpAddr::V4(_) => IpAddr::from(std::net::Ipv4Addr::from(v as u32)),
                IpAddr::V6(_) => IpAddr::from(std::net::Ipv6Addr::from(v)),
            });
        }
    }
    if out.is_empty() {
        return Err(bad("it lists no address".into()));
    }
    check_source_addrs(&out).map_err(bad)?;
    Ok(out)
}

/// What every source list must satisfy, however it arrived (flag, plan file or a coordinator's message).
pub(super) fn check_source_addrs(addrs: &[IpAddr]) -> Result<(), String> {
    if addrs.len() as u128 > MAX_SOURCE_ADDRS {
        return Err(format!("more than {MAX_SOURCE_ADDRS} addresses"));
    }
    let mut seen = std::collections::HashSet::new();
    for a in addrs {
        if a.is_unspecified() || a.is_multicast() || *a == IpAddr::from([255, 255, 255, 255]) {
            return Err(format!(
                "{a} cannot be the source of a TCP connection (unspecified, multicast or broadcast)"
            ));
        }
        if family(*a) != family(addrs[0]) {
            return Err(format!(
                "it mixes IPv4 and IPv6 ({} and {a}); one target has one family",
                addrs[0]
            ));
        }
        if !seen.insert(a) {
            return Err(format!("{a} is listed twice"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn source_addrs_parse_lists_and_ranges_in_order() {
        let ips = |v: &[&str]| {
            v.iter()
                .map(|s| s.parse::<IpAddr>().unwrap())
                .collect::<Vec<_>>()
        };
        assert_eq!(
            parse_source_addrs("127.0.0.1,127.0.0.2, 127.0.0.3").unwrap(),
            ips(&["127.0.0.1", "127.0.0.2", "127.0.0.3"])
        );
        assert_eq!(
            parse_source_addrs("10.0.0.5,10.0.0.254-10.0.1.1").unwrap(),
            ips(&[
                "10.0.0.5",
                "10.0.0.254",
                "10.0.0.255",
                "10.0.1.0",
                "10.0.1.1"
            ])
        );
        assert_eq!(
            parse_source_addrs("fd00::1-fd00::3").unwrap(),
            ips(&["fd00::1", "fd00::2", "fd00::3"])
        );
        assert_eq!(parse_source_addrs("127.0.0.1-127.0.0.8").unwrap().len(), 8);
        assert_eq!(
            parse_source_addrs("10.0.0.0-10.0.15.255").unwrap().len() as u128,
            MAX_SOURCE_ADDRS
        );
    }

    #[test]
    fn bad_source_addrs_say_why() {
        for (input, why) in [
            ("", "lists no address"),
            (" , ", "lists no address"),
            ("127.0.0.1,localhost", "'localhost' is not an IP address"),
            ("127.0.0.300", "is not an IP address"),
            ("127.0.0.8-127.0.0.1", "runs backwards"),
            ("127.0.0.1-::1", "mixes IPv4 and IPv6"),
            ("127.0.0.1,::1", "mixes IPv4 and IPv6"),
            ("127.0.0.1,127.0.0.1", "127.0.0.1 is listed twice"),
            ("127.0.0.1-127.0.0.3,127.0.0.2", "listed twice"),
            ("0.0.0.0", "cannot be the source"),
            ("224.0.0.1", "cannot be the source"),
            ("10.0.0.0-10.255.255.255", "more than 4096 addresses"),
            ("::-ffff::", "more than 4096 addresses"),
            ("1-2-3", "is not an IP address"),
        ] {
            let e = parse_source_addrs(input).unwrap_err().to_string();
            assert!(e.contains(why), "{input}: {e}");
            assert!(
                e.starts_with(&format!("bad --source-addrs '{input}'")),
                "{e}"
            );
        }
    }
}
