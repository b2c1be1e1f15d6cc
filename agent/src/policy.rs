//! What this agent agrees to do, whatever a coordinator asks: which targets it may load (checked on the
//! resolved address, so a name cannot smuggle load elsewhere), how fast, how many connections, how long.
//! A plan over a limit is refused before any load is sent, naming the limit; never clamped silently.
use std::net::IpAddr;
use std::time::Duration;

use shared::plan::{LoadModel, StepShare};

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
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4 => v4,
        };
        match (addr, ip) {
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

/// Whether a refusal's words are this agent's policy's (an `--allow-target` or `--max-*` of its own):
/// the plan is the user's to fix, as a limit the coordinator checks up front is. The refusal travels
/// as words only, so its words are the mark: every policy refusal names the flag it comes from.
pub fn is_policy_refusal(message: &str) -> bool {
    message.contains("this agent's --allow-target")
        || message.contains("its --max-")
        || message.contains("this agent's --max-")
}

impl Policy {
    /// Checks a target after resolution: its address must be in an allowed network, or its name must
    /// match an allowed host pattern. With no rules every target is allowed.
    pub fn check_target(&self, host: &str, resolved: IpAddr) -> Result<(), String> {
        if self.allow.is_empty()
            || self
                .allow
                .iter()
                .any(|a| a.allows_addr(resolved) || a.allows_name(host))
        {
            return Ok(());
        }
        Err(format!(
            "target {host} ({resolved}) is outside this agent's --allow-target list"
        ))
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
        let connections = match share.model() {
            LoadModel::Concurrency => Some(share.connections()),
            LoadModel::Requests => Some(share.max_connections().get()),
            LoadModel::Connections => None,
        };
        if let (Some(max), Some(asked)) = (self.max_connections, connections)
            && asked > max
        {
            return Err(format!(
                "step {} asks this agent for {asked} connections; its --max-connections is {max}",
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

/// Requests per second this agent's share of a step sends (0 for the closed model, which is bounded by
/// connections instead).
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
