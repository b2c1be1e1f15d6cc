//! The load model's vocabulary: which model, how arrivals are spaced, and when a step ends.
use std::fmt;
use std::num::NonZeroU64;
use std::time::Duration;

// The doc comments of these enums' variants are what `--help` shows beside each value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
#[serde(rename_all = "kebab-case")]
pub enum LoadModel {
    /// httperf/autobench: new connections per second, --num-call requests each; a new connection
    /// per request by default (open)
    Connections,
    /// wrk2/k6 arrival rate: requests per second over a keep-alive pool (open)
    Requests,
    /// ab/wrk: N connections, each sending request after request (closed loop)
    Concurrency,
}

impl LoadModel {
    pub fn name(self) -> &'static str {
        match self {
            LoadModel::Connections => "connections",
            LoadModel::Requests => "requests",
            LoadModel::Concurrency => "concurrency",
        }
    }

    /// The model `name` names (as [`LoadModel::name`] writes it).
    pub fn from_name(name: &str) -> Option<LoadModel> {
        [
            LoadModel::Connections,
            LoadModel::Requests,
            LoadModel::Concurrency,
        ]
        .into_iter()
        .find(|m| m.name() == name)
    }

    /// Open models send on a schedule whatever the replies do, so latency counts from the intended send.
    pub fn is_open(self) -> bool {
        !matches!(self, LoadModel::Concurrency)
    }
}

impl fmt::Display for LoadModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How arrivals are spaced in an open model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
#[serde(rename_all = "kebab-case")]
pub enum Arrival {
    /// evenly spaced
    #[cfg_attr(feature = "cli", value(alias = "constant"))]
    #[serde(alias = "constant")]
    Uniform,
    /// exponential gaps, as independent users arrive
    #[cfg_attr(feature = "cli", value(alias = "exponential"))]
    #[serde(alias = "exponential")]
    Poisson,
}

impl Arrival {
    pub fn name(self) -> &'static str {
        match self {
            Arrival::Uniform => "uniform",
            Arrival::Poisson => "poisson",
        }
    }
}

/// When a step ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepLimit {
    Duration(Duration),
    /// autobench's `num_conn`: the step ends once this many connections were opened.
    Connections(NonZeroU64),
}
