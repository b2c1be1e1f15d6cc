//! The value types of `run`'s settings: what clap parses a flag's text into and serde a plan file's
//! value into, alike (a duration's text, steps, a rate, agent weights, a string or a list of them, the
//! HTTP version as TOML lets one write it), and the closed choices (`Format`, `LossPolicy`).
use std::path::PathBuf;

use serde::Deserialize;
use shared::plan::HttpVersion;

/// `--agent-weights`: each agent's share of the load, keyed by the agent (`a:7700=3,b:7700=1`, or a
/// plan file's table `{ "a:7700" = 3 }`), or the old form, one weight per agent in `--agents` order
/// (`3,1`), taken only where that order is the fleet's.
#[derive(Debug, Clone, PartialEq)]
pub enum AgentWeights {
    InOrder(Vec<u64>),
    ByAgent(Vec<(String, u64)>),
}

impl std::str::FromStr for AgentWeights {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let weight = |w: &str| {
            w.trim()
                .parse::<u64>()
                .map_err(|_| format!("weight '{}' is not a whole number", w.trim()))
        };
        let entries: Vec<&str> = s.split(',').map(str::trim).collect();
        let keyed = entries.iter().filter(|e| e.contains('=')).count();
        if keyed == 0 {
            return entries
                .iter()
                .map(|e| weight(e))
                .collect::<Result<_, _>>()
                .map(AgentWeights::InOrder);
        }
        if keyed != entries.len() {
            return Err(format!(
                "'{s}' mixes AGENT=WEIGHT entries with bare weights: give every one as AGENT=WEIGHT (e.g. a:7700=3,b:7700=1)"
            ));
        }
        entries
            .iter()
            .map(|e| {
                let (agent, w) = e.rsplit_once('=').unwrap_or((e, ""));
                Ok((agent.trim().to_string(), weight(w)?))
            })
            .collect::<Result<_, String>>()
            .map(AgentWeights::ByAgent)
    }
}

impl<'de> Deserialize<'de> for AgentWeights {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Either {
            List(Vec<u64>),
            Table(std::collections::BTreeMap<String, u64>),
            Text(String),
        }
        Ok(match Either::deserialize(d)? {
            Either::List(w) => AgentWeights::InOrder(w),
            Either::Table(t) => AgentWeights::ByAgent(t.into_iter().collect()),
            Either::Text(s) => s.parse().map_err(serde::de::Error::custom)?,
        })
    }
}

/// A duration as written ("10s", "500ms", "2m", or seconds; a plan file may also give a number). It is
/// checked in `config`, which names the setting in its message.
#[derive(Debug, Clone, PartialEq)]
pub struct DurationText(pub String);

/// The command line's value; what it means is checked in `config`. Every duration flag takes a value
/// that starts with '-' (so `-5s` is refused as negative there), and this is the one place that tells
/// such a value from the next flag (`-d --out m4`: `-d` has no value).
impl std::str::FromStr for DurationText {
    type Err = shared::usage::NextOption;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        shared::usage::not_the_next_option(s)?;
        Ok(DurationText(s.to_string()))
    }
}

impl From<std::time::Duration> for DurationText {
    fn from(d: std::time::Duration) -> Self {
        DurationText(humantime::format_duration(d).to_string())
    }
}

impl<'de> Deserialize<'de> for DurationText {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Either {
            Text(String),
            Secs(f64),
        }
        Ok(DurationText(match Either::deserialize(d)? {
            Either::Text(s) => s,
            Either::Secs(n) => n.to_string(),
        }))
    }
}

/// A plan file's `http`: a name as the flag takes it ("1.1", "2", "auto", or an alias), or the bare
/// number TOML lets one write (`http = 2`, `http = 1.1`), which a person means just the same.
pub(super) fn http_version<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<HttpVersion>, D::Error> {
    use clap::ValueEnum;
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Either {
        Text(String),
        Number(f64),
        Other(serde::de::IgnoredAny),
    }
    let text = match Either::deserialize(d)? {
        Either::Text(s) => Some(s),
        Either::Number(n) => Some(n.to_string()),
        Either::Other(_) => None,
    };
    let version = text
        .as_deref()
        .and_then(|t| HttpVersion::from_str(t, false).ok());
    version.map(Some).ok_or_else(|| {
        let what = text.map_or(String::new(), |t| format!(" {t:?}"));
        serde::de::Error::custom(format!(
            "http{what} is no HTTP version: use \"1.1\", \"2\" or \"auto\""
        ))
    })
}

/// Step values: `30,100,1000` on the command line, `[30, 100, 1000]` in a plan file.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Steps(pub Vec<f64>);

impl std::str::FromStr for Steps {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let parts: Vec<&str> = s.split(',').collect();
        let count = parts.len();
        parts
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let p = p.trim();
                if p.is_empty() {
                    return Err(format!("empty step value (value {} of {count})", i + 1));
                }
                p.parse::<f64>()
                    .map_err(|_| format!("step value '{p}' is not a number"))
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Steps)
    }
}

/// A rate as wrk2/oha (`2000`) or vegeta (`50/1s`, `3000/1m`) write it, in requests per second.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
pub struct Rate(pub f64);

impl std::str::FromStr for Rate {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let (count, per) = s.split_once('/').unwrap_or((s, "1s"));
        let count: f64 = count
            .trim()
            .parse()
            .map_err(|_| format!("'{s}' is not a rate (write 2000, or 50/1s as vegeta does)"))?;
        let per = match per.trim() {
            "s" => "1s",
            "m" => "1m",
            p => p,
        };
        let per = humantime::parse_duration(per)
            .ok()
            .filter(|d| !d.is_zero())
            .ok_or_else(|| format!("'{s}': '{per}' is not a time unit (write 50/1s or 3000/1m)"))?;
        Ok(Rate(count / per.as_secs_f64()))
    }
}

/// One request of a plan file's mix (`[[request]]`): its name and weight, and what it sends. The
/// URL is a path on the target (joined to its origin, so a side-by-side run sends the same mix to
/// every target) or an absolute URL of that origin; the method defaults to the run's (`-X`).
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RequestEntry {
    pub name: Option<String>,
    pub weight: Option<u32>,
    pub method: Option<String>,
    pub url: String,
    #[serde(default)]
    pub headers: Vec<String>,
    pub body: Option<String>,
    pub body_file: Option<PathBuf>,
}

/// One string or a list of them; each is parsed as the flag's value would be.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum StringOrList {
    One(String),
    Many(Vec<String>),
}

impl std::str::FromStr for StringOrList {
    type Err = std::convert::Infallible;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(StringOrList::One(s.to_string()))
    }
}

impl StringOrList {
    pub fn joined(&self) -> String {
        match self {
            StringOrList::One(s) => s.clone(),
            StringOrList::Many(v) => v.join(","),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Format {
    /// tab-separated, autobench's columns first
    Tsv,
    /// comma-separated
    Csv,
}

impl Format {
    pub fn separator(self) -> char {
        match self {
            Format::Tsv => '\t',
            Format::Csv => ',',
        }
    }

    pub fn file_name(self) -> &'static str {
        match self {
            Format::Tsv => "steps.tsv",
            Format::Csv => "steps.csv",
        }
    }
}

/// What happens when an agent is lost mid-run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LossPolicy {
    /// stop the run
    Abort,
    /// finish the step without it, mark the step degraded, re-split later steps
    Degrade,
    /// re-split without marking
    Continue,
}

impl LossPolicy {
    pub fn name(self) -> &'static str {
        match self {
            LossPolicy::Abort => "abort",
            LossPolicy::Degrade => "degrade",
            LossPolicy::Continue => "continue",
        }
    }
}
