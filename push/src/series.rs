//! What is pushed: a moment's metric families, as `/metrics` names and labels them, plain data.

/// Who pushed: becomes OTLP's resource attributes, and labels on every remote-write series.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Resource {
    /// (key, value), e.g. `("service.name", "stampede")`, the run's id, its target and `--label`.
    pub attributes: Vec<(String, String)>,
}

/// The families at one moment.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Batch {
    /// Milliseconds since the Unix epoch: the moment every sample is of.
    pub at_ms: i64,
    /// Milliseconds since the Unix epoch: the run's start, from which its counters and histograms
    /// count (OTLP's start time of a cumulative point; remote write has no such field).
    pub start_ms: i64,
    pub resource: Resource,
    pub families: Vec<Family>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Counter,
    Gauge,
    Histogram,
}

/// One metric family, as `/metrics` declares it: `name` is OpenMetrics' family name, the unit's
/// suffix included (`stampede_latency_seconds`, as `# TYPE` says it), without the `_total`,
/// `_bucket`, `_sum` or `_count` a format adds.
#[derive(Debug, Clone, PartialEq)]
pub struct Family {
    pub name: String,
    pub help: String,
    /// `seconds`, `ratio` or empty.
    pub unit: String,
    pub kind: Kind,
    pub series: Vec<Series>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// (name, value) in `/metrics`' order.
    pub labels: Vec<(String, String)>,
    pub value: Value,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// A counter's or a gauge's value.
    Number(f64),
    /// Explicit buckets: `bounds` are the upper edges (seconds) in increasing order, without +Inf;
    /// `counts[i]` the values in bucket `i` (not cumulative), `counts.len() == bounds.len() + 1`,
    /// the last being above every bound.
    Histogram {
        bounds: Vec<f64>,
        counts: Vec<u64>,
        count: u64,
        sum: f64,
    },
}

impl Value {
    /// A histogram's buckets as (upper edge, count in it), `+Inf` last; none for a number.
    pub fn buckets(&self) -> Vec<(f64, u64)> {
        match self {
            Value::Number(_) => Vec::new(),
            Value::Histogram { bounds, counts, .. } => bounds
                .iter()
                .copied()
                .chain([f64::INFINITY])
                .zip(counts.iter().copied())
                .collect(),
        }
    }
}
