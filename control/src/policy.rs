//! What this agent agrees to do, whatever a coordinator asks: which targets it may load (checked on the
//! resolved address, so a name cannot smuggle load elsewhere: a name rule admits the name, and the
//! address it resolves to must not be loopback, link-local, unspecified or multicast unless an address
//! rule names it), how fast, how many connections, how long. A plan over a limit is refused before any
//! load is sent, naming the limit; never clamped silently.
use std::net::IpAddr;
use std::time::Duration;

use shared::plan::{LoadModel, StepShare};
use shared::warning::{Warning, WarningKind};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    #[error(
        "bad --allow-target '{0}': use a CIDR (10.0.0.0/8, ::1/128), an address, or a host pattern (*.example.com)"
    )]
    BadRule(String),
}

/// One `--allow-target` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Allow {
    Net {
        addr: IpAddr,
        prefix: u8,
    },
    /// A host name, or `*.domain` for any name below it.
    Host(String),
}

impl Allow {
    pub fn parse(s: &str) -> Result<Allow, PolicyError> {
        let bad = || PolicyError::BadRule(s.to_string());
        let s = s.trim();
        if s.is_empty() {
            return Err(bad());
        }
        if let Some((a, p)) = s.split_once('/') {
            let addr: IpAddr = a.parse().map_err(|_| bad())?;
            let prefix: u8 = p.parse().map_err(|_| bad())?;
            let max = if addr.is_ipv4() { 32 } else { 128 };
            if prefix > max {
                return Err(bad());
            }
            return Ok(Allow::Net { addr, prefix });
        }
        if let Ok(addr) = s.parse::<IpAddr>() {
            let prefix = if addr.is_ipv4() { 32 } else { 128 };
            return Ok(Allow::Net { addr, prefix });
        }
        let name = s.to_ascii_lowercase();
        let body = name.strip_prefix("*.").unwrap_or(&name);
        if body.is_empty()
            || !body
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-')
        {
            return Err(bad());
        }
        Ok(Allow::Host(name))
    }

    fn allows_addr(&self, ip: IpAddr) -> bool {
        let Allow::Net { addr, prefix } = self else {
            return false;
        };
        match (addr, canonical(ip)) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                let mask = u32::MAX.checked_shl(32 - u32::from(*prefix)).unwrap_or(0);
                u32::from(*net) & mask == u32::from(ip) & mask
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                let mask = u128::MAX.checked_shl(128 - u32::from(*prefix)).unwrap_or(0);
                u128::from(*net) & mask == u128::from(ip) & mask
            }
            _ => false,
        }
    }

    fn allows_name(&self, host: &str) -> bool {
        let Allow::Host(pattern) = self else {
            return false;
        };
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        match pattern.strip_prefix("*.") {
            Some(domain) => host.ends_with(&format!(".{domain}")),
            None => host == *pattern,
        }
    }
}

/// The agent's limits; `None` is no limit.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Policy {
    pub allow: Vec<Allow>,
    pub max_rate: Option<f64>,
    pub max_connections: Option<u32>,
    pub max_step_duration: Option<Duration>,
    pub max_run_duration: Option<Duration>,
}

impl Policy {
    /// Checks a target after resolution, on the address the agent will connect to (it resolves once,
    /// at configure, and connects to that address for the whole run). An address rule that holds the
    /// address admits it, whatever the name. A name rule admits the name, not wherever it resolves: the
    /// address must also be an ordinary one, since a DNS answer of 127.0.0.1 or 169.254.169.254 (the
    /// cloud metadata service) under an allowed domain would otherwise aim load at this host or its
    /// metadata. Such an address is admitted only by an address rule naming it. With no rules every
    /// target is allowed.
    pub fn check_target(&self, host: &str, resolved: IpAddr) -> Result<(), String> {
        if self.allow.is_empty() || self.allow.iter().any(|a| a.allows_addr(resolved)) {
            return Ok(());
        }
        let ip = canonical(resolved);
        let named = self.allow.iter().find(|a| a.allows_name(host));
        match (named, special(ip)) {
            (Some(_), None) => Ok(()),
            (Some(Allow::Host(rule)), Some(what)) => Err(format!(
                "target {host} resolves to {ip}, {what}: its name matches --allow-target '{rule}', \
                 but a name rule does not admit such an address; to load it, add --allow-target {ip} \
                 to this agent"
            )),
            _ => {
                // A name rule would not admit a special address, and an address literal has no name.
                let or_name = if special(ip).is_some() || host.parse::<IpAddr>().is_ok() {
                    String::new()
                } else {
                    format!(" (or {host})")
                };
                Err(format!(
                    "target {host} ({ip}) is outside this agent's --allow-target list; to load it, \
                     add --allow-target {ip}{or_name} to this agent"
                ))
            }
        }
    }

    /// Checks one step share against the limits; `used` is the scheduled time of the steps already run.
    pub fn check_step(&self, share: &StepShare, used: Duration) -> Result<(), String> {
        let rate = request_rate(share);
        if let Some(max) = self.max_rate.filter(|m| rate > *m) {
            return Err(format!(
                "step {} asks this agent for {rate:.1} requests/s; its --max-rate is {max}",
                share.step() + 1
            ));
        }
        // A closed loop holds each of its connections open for the whole step, and the requests
        // model's pool may grow to its size: both are known before the step. The connections model's
        // open sockets depend on the target's latency; its cap is held while it runs (see
        // `step_warnings`).
        let connections = match share.model() {
            LoadModel::Concurrency => Some((share.connections(), "a closed loop holds each open")),
            LoadModel::Requests => {
                Some((share.max_connections().get(), "its pool may grow to them"))
            }
            LoadModel::Connections => None,
        };
        if let (Some(max), Some((asked, why))) = (self.max_connections, connections)
            && asked > max
        {
            return Err(format!(
                "step {} asks this agent for {asked} connections ({why}); its --max-connections is {max}",
                share.step() + 1
            ));
        }
        let length = share.scheduled_duration();
        if let Some(max) = self.max_step_duration.filter(|m| length > *m) {
            return Err(format!(
                "step {} lasts {length:?}; this agent's --max-step-duration is {max:?}",
                share.step() + 1
            ));
        }
        if let Some(max) = self.max_run_duration.filter(|m| used + length > *m) {
            return Err(format!(
                "step {} would bring this run to {:?}; this agent's --max-run-duration is {max:?}",
                share.step() + 1,
                used + length
            ));
        }
        Ok(())
    }
}

impl Policy {
    /// How the limits will bind a step that passed [`check_step`](Self::check_step), said with its
    /// ack so that nothing is clamped in silence: a closed loop is paced at `--max-rate` (its rate is
    /// not known before), and the connections model opens no more than `--max-connections` sockets at
    /// once (an arrival beyond them is not sent and counts as the generator's own failure).
    pub fn step_warnings(&self, share: &StepShare) -> Vec<Warning> {
        let mut warnings = Vec::new();
        match (share.model(), self.max_rate, self.max_connections) {
            (LoadModel::Concurrency, Some(max), _) => warnings.push(Warning::new(
                WarningKind::Capacity,
                format!(
                    "step {}: paced at the agent's --max-rate {max} req/s: its {} closed-loop \
                     connections together start at most {max} requests a second, so a faster \
                     server shows this agent's limit, not its own",
                    share.step() + 1,
                    share.connections()
                ),
            )),
            (LoadModel::Connections, _, Some(max)) => warnings.push(Warning::new(
                WarningKind::Capacity,
                format!(
                    "step {}: at most {max} connections open at once (the agent's \
                     --max-connections): an arrival that would open one more is not sent, and \
                     counts as fd-unavailable, the generator's own limit, not the server's",
                    share.step() + 1
                ),
            )),
            _ => {}
        }
        warnings
    }
}

impl From<&Policy> for proto::pb::Limits {
    fn from(p: &Policy) -> Self {
        proto::pb::Limits {
            allow_targets: p
                .allow
                .iter()
                .map(|a| match a {
                    Allow::Net { addr, prefix } => format!("{addr}/{prefix}"),
                    Allow::Host(h) => h.clone(),
                })
                .collect(),
            max_rate: p.max_rate.unwrap_or(0.0),
            max_connections: p.max_connections.unwrap_or(0),
            max_step_duration_ms: p.max_step_duration.map_or(0, |d| d.as_millis() as u64),
            max_run_duration_ms: p.max_run_duration.map_or(0, |d| d.as_millis() as u64),
        }
    }
}

impl TryFrom<&proto::pb::Limits> for Policy {
    type Error = PolicyError;

    fn try_from(l: &proto::pb::Limits) -> Result<Self, PolicyError> {
        Ok(Policy {
            allow: l
                .allow_targets
                .iter()
                .map(|a| Allow::parse(a))
                .collect::<Result<_, _>>()?,
            max_rate: (l.max_rate > 0.0).then_some(l.max_rate),
            max_connections: (l.max_connections > 0).then_some(l.max_connections),
            max_step_duration: (l.max_step_duration_ms > 0)
                .then(|| Duration::from_millis(l.max_step_duration_ms)),
            max_run_duration: (l.max_run_duration_ms > 0)
                .then(|| Duration::from_millis(l.max_run_duration_ms)),
        })
    }
}

/// An IPv4-mapped IPv6 address as the IPv4 address it is, so both spellings meet the same rules.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// The AWS metadata service's IPv6 address: a unique-local address, not link-local, so named here.
const METADATA_V6: std::net::Ipv6Addr =
    std::net::Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254);

/// What kind of address a name rule alone must not admit (this host, its link, the cloud metadata
/// service, nowhere, everyone), in words; `None` for an ordinary address.
fn special(ip: IpAddr) -> Option<&'static str> {
    match canonical(ip) {
        IpAddr::V4(v4) if v4.octets() == [169, 254, 169, 254] => {
            Some("the cloud metadata address (link-local)")
        }
        IpAddr::V4(v4) if v4.is_loopback() => Some("a loopback address"),
        IpAddr::V4(v4) if v4.is_link_local() => Some("a link-local address"),
        // 0.0.0.0/8 is "this network": connecting to it reaches this host on Linux.
        IpAddr::V4(v4) if v4.octets()[0] == 0 => Some("an unspecified address"),
        IpAddr::V4(v4) if v4.is_multicast() || v4.is_broadcast() => {
            Some("a multicast or broadcast address")
        }
        IpAddr::V6(v6) if v6 == METADATA_V6 => Some("the cloud metadata address"),
        IpAddr::V6(v6) if v6.is_loopback() => Some("a loopback address"),
        IpAddr::V6(v6) if v6.segments()[0] & 0xffc0 == 0xfe80 => Some("a link-local address"),
        IpAddr::V6(v6) if v6.is_unspecified() => Some("an unspecified address"),
        IpAddr::V6(v6) if v6.is_multicast() => Some("a multicast address"),
        _ => None,
    }
}

/// Requests per second this agent's share of a step sends (0 for the closed model, whose rate is the
/// server's to set: it is paced at `--max-rate` while it runs instead).
pub fn request_rate(share: &StepShare) -> f64 {
    let fraction = share.slice().fraction();
    match share.model() {
        LoadModel::Connections => share.rate() * fraction * f64::from(share.num_call().get()),
        LoadModel::Requests => share.rate() * fraction,
        LoadModel::Concurrency => 0.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shared::plan::{Arrival, Slice, StepLimit};

    /// Half of a step's arrivals, as one of two equal agents.
    fn share(model: LoadModel, rate: f64, connections: u32, secs: u64) -> StepShare {
        let half = Slice::among(&[1, 1])[0].clone();
        let limit = StepLimit::Duration(Duration::from_secs(secs));
        StepShare::try_new(
            2,
            model,
            rate,
            half,
            connections,
            1,
            10,
            limit,
            Arrival::Uniform,
            0,
        )
        .unwrap()
    }

    #[test]
    fn rules_parse_and_match_after_resolution() {
        let p = Policy {
            allow: ["127.0.0.0/8", "::1", "*.test.internal", "web"]
                .iter()
                .map(|r| Allow::parse(r).unwrap())
                .collect(),
            ..Policy::default()
        };
        assert!(
            p.check_target("localhost", "127.0.0.1".parse().unwrap())
                .is_ok()
        );
        assert!(p.check_target("localhost", "::1".parse().unwrap()).is_ok());
        assert!(
            p.check_target("a.test.internal", "10.1.2.3".parse().unwrap())
                .is_ok()
        );
        assert!(p.check_target("web", "10.9.9.9".parse().unwrap()).is_ok());
        // A name outside the patterns that resolves outside the networks is refused.
        let e = p
            .check_target("evil.example", "93.184.216.34".parse().unwrap())
            .unwrap_err();
        assert!(
            e.contains("outside this agent's --allow-target list"),
            "{e}"
        );
        assert!(
            p.check_target("test.internal.evil", "10.0.0.1".parse().unwrap())
                .is_err()
        );
        for bad in ["", "10.0.0.0/33", "::1/129", "a b", "*."] {
            assert!(Allow::parse(bad).is_err(), "{bad}");
        }
    }

    fn rules(list: &[&str]) -> Policy {
        Policy {
            allow: list.iter().map(|r| Allow::parse(r).unwrap()).collect(),
            ..Policy::default()
        }
    }

    #[test]
    fn a_name_pattern_no_longer_admits_a_name_that_resolves_to_loopback_or_metadata() {
        let p = rules(&["*.staging.internal", "web"]);
        // Each kind of address a name rule alone must not admit, and how the refusal names it.
        for (ip, what) in [
            ("127.0.0.1", "a loopback address"),
            ("127.9.9.9", "a loopback address"),
            ("::1", "a loopback address"),
            ("::ffff:127.0.0.1", "a loopback address"),
            ("169.254.169.254", "the cloud metadata address"),
            ("169.254.10.1", "a link-local address"),
            ("fe80::1", "a link-local address"),
            ("fd00:ec2::254", "the cloud metadata address"),
            ("0.0.0.0", "an unspecified address"),
            ("::", "an unspecified address"),
            ("224.0.0.1", "a multicast"),
            ("ff02::1", "a multicast address"),
        ] {
            let e = p
                .check_target("api.staging.internal", ip.parse().unwrap())
                .unwrap_err();
            let shown = canonical(ip.parse().unwrap());
            assert!(
                e.starts_with(&format!(
                    "target api.staging.internal resolves to {shown}, {what}"
                )) && e.contains("matches --allow-target '*.staging.internal'")
                    && e.ends_with(&format!("add --allow-target {shown} to this agent")),
                "{ip}: {e}"
            );
        }
        // An exact name rule is a name rule too.
        let e = p
            .check_target("web", "127.0.0.1".parse().unwrap())
            .unwrap_err();
        assert!(e.contains("matches --allow-target 'web'"), "{e}");
        // An ordinary address under the pattern is admitted by the name, as before.
        for ip in ["10.1.2.3", "192.168.7.7", "2001:db8::5", "fd00::1"] {
            assert!(
                p.check_target("api.staging.internal", ip.parse().unwrap())
                    .is_ok(),
                "{ip}"
            );
        }
    }

    #[test]
    fn a_special_address_is_admitted_only_by_an_address_rule_naming_it() {
        let p = rules(&["*.staging.internal", "127.0.0.1", "169.254.0.0/16"]);
        assert!(
            p.check_target("api.staging.internal", "127.0.0.1".parse().unwrap())
                .is_ok()
        );
        assert!(
            p.check_target("api.staging.internal", "169.254.169.254".parse().unwrap())
                .is_ok()
        );
        // Another loopback address is not the one the rule names.
        let e = p
            .check_target("api.staging.internal", "127.0.0.2".parse().unwrap())
            .unwrap_err();
        assert!(e.contains("add --allow-target 127.0.0.2"), "{e}");
        // An address rule admits its address under any name (and without one).
        assert!(
            p.check_target("elsewhere.example", "127.0.0.1".parse().unwrap())
                .is_ok()
        );
        // Outside every rule: the refusal names the name, the address, and the rules that would admit it.
        let e = p
            .check_target("evil.example", "93.184.216.34".parse().unwrap())
            .unwrap_err();
        assert_eq!(
            e,
            "target evil.example (93.184.216.34) is outside this agent's --allow-target list; \
             to load it, add --allow-target 93.184.216.34 (or evil.example) to this agent"
        );
        let e = p
            .check_target("localhost", "::1".parse().unwrap())
            .unwrap_err();
        assert_eq!(
            e,
            "target localhost (::1) is outside this agent's --allow-target list; \
             to load it, add --allow-target ::1 to this agent"
        );
    }

    #[test]
    fn max_rate_and_max_connections_now_bind_the_closed_loop_and_the_connections_model() {
        let p = Policy {
            max_rate: Some(50.0),
            max_connections: Some(10),
            ..Policy::default()
        };
        // A closed loop within its connections runs, paced, and its ack says so.
        let closed = share(LoadModel::Concurrency, 0.0, 8, 10);
        assert!(p.check_step(&closed, Duration::ZERO).is_ok());
        let w = p.step_warnings(&closed);
        assert_eq!(w.len(), 1, "{w:?}");
        assert_eq!(w[0].kind, WarningKind::Capacity);
        assert!(
            w[0].text
                .starts_with("step 3: paced at the agent's --max-rate 50 req/s: its 8 closed-loop"),
            "{}",
            w[0].text
        );
        // More connections than it may hold: refused before any load, both numbers named.
        let e = p
            .check_step(&share(LoadModel::Concurrency, 0.0, 11, 10), Duration::ZERO)
            .unwrap_err();
        assert_eq!(
            e,
            "step 3 asks this agent for 11 connections (a closed loop holds each open); \
             its --max-connections is 10"
        );
        // A connection per arrival within the rate runs, its sockets capped, and its ack says so.
        let open = share(LoadModel::Connections, 80.0, 0, 10);
        assert!(p.check_step(&open, Duration::ZERO).is_ok());
        let w = p.step_warnings(&open);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].text.contains("at most 10 connections open at once")
                && w[0].text.contains("counts as fd-unavailable"),
            "{}",
            w[0].text
        );
        // Its rate binds it before the step as the requests model's does (40 of 80/s is this agent's).
        let e = p
            .check_step(&share(LoadModel::Connections, 120.0, 0, 10), Duration::ZERO)
            .unwrap_err();
        assert!(e.contains("60.0 requests/s; its --max-rate is 50"), "{e}");
        // Without limits nothing is said.
        assert!(Policy::default().step_warnings(&closed).is_empty());
        assert!(Policy::default().step_warnings(&open).is_empty());
    }

    #[test]
    fn limits_name_themselves() {
        let p = Policy {
            max_rate: Some(100.0),
            max_connections: Some(10),
            max_step_duration: Some(Duration::from_secs(30)),
            max_run_duration: Some(Duration::from_secs(60)),
            ..Policy::default()
        };
        // Half of 150 req/s is this agent's: within 100.
        assert!(
            p.check_step(&share(LoadModel::Requests, 150.0, 0, 10), Duration::ZERO)
                .is_ok()
        );
        assert!(
            p.check_step(&share(LoadModel::Concurrency, 0.0, 5, 10), Duration::ZERO)
                .is_ok()
        );
        let e = p
            .check_step(&share(LoadModel::Requests, 300.0, 0, 10), Duration::ZERO)
            .unwrap_err();
        assert_eq!(
            e,
            "step 3 asks this agent for 150.0 requests/s; its --max-rate is 100"
        );
        let e = p
            .check_step(&share(LoadModel::Concurrency, 0.0, 11, 10), Duration::ZERO)
            .unwrap_err();
        assert!(e.contains("--max-connections is 10"), "{e}");
        let e = p
            .check_step(&share(LoadModel::Concurrency, 0.0, 1, 31), Duration::ZERO)
            .unwrap_err();
        assert!(e.contains("--max-step-duration"), "{e}");
        let e = p
            .check_step(
                &share(LoadModel::Concurrency, 0.0, 1, 20),
                Duration::from_secs(50),
            )
            .unwrap_err();
        assert!(e.contains("--max-run-duration"), "{e}");
    }
}
