//! The result schema: one `StepResult` per step, computed only from merged data (by `step/input.rs`;
//! the run's answer over its steps by `step/answer.rs`; its table row is `table.rs`'s). Everything a
//! report says is derived here and below, once, so TSV, JSON and the terminal agree.
use std::time::Duration;

use serde::de::{self, Deserialize, Deserializer};
use serde::ser::{Serialize, SerializeMap, Serializer};

mod answer;
pub mod headline;
mod input;
mod judgement;
pub mod knee;
pub mod per_request;
pub mod sessions;
pub mod setup;
pub mod tls;

pub use answer::{RunSummary, summarize_run};
pub use input::{AgentInput, IntervalSample, StepInput, summarize};
pub use judgement::{Beyond, KEPT_UP_RATIO, PLATEAU_RATIO, judged, kept_up};

use crate::verdict::{Server, Verdict};
use monitor::step::StepServer;
use shared::histogram::{Histogram, us_to_ms};
use shared::metrics::{Counters, FirstErrors, UNLIMITED_STREAMS};

/// `run.json`'s schema name; bump it when a field changes meaning (and keep reading the one before:
/// `run_file::READS`).
pub const RUN_SCHEMA: &str = "stampede.run/3";

/// Which of a latency summary's statistics are lower bounds: they fall among requests that were
/// given up (timed out, expired, dropped at the step's end), whose true latency is at least their age
/// then.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LowerBounds(u8);

impl LowerBounds {
    /// The statistics in the order of [`LatencyStats`], by their JSON names.
    /// (`quantity::LATENCIES` has these as its statistics' `bound`s, in this order.)
    pub const NAMES: [&'static str; 6] = ["mean", "p50", "p90", "p99", "p999", "max"];

    pub fn set(&mut self, i: usize) {
        self.0 |= 1 << i;
    }

    pub fn contains(self, name: &str) -> bool {
        Self::NAMES
            .iter()
            .position(|n| *n == name)
            .is_some_and(|i| self.0 & (1 << i) != 0)
    }

    pub fn names(self) -> Vec<&'static str> {
        Self::NAMES
            .iter()
            .enumerate()
            .filter(|(i, _)| self.0 & (1 << i) != 0)
            .map(|(_, n)| *n)
            .collect()
    }

    pub fn is_empty(self) -> bool {
        self.0 == 0
    }
}

/// Latency statistics in milliseconds, from one merged histogram.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct LatencyStats {
    pub mean: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
    /// Some values are ages of requests given up, not latencies: lower bounds.
    pub censored: bool,
    /// Which statistics those values make lower bounds (known where the given-up requests' own
    /// histogram is at hand: the step's fleet-wide latency).
    pub lower_bounds: LowerBounds,
}

impl Serialize for LatencyStats {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(8))?;
        for (k, v) in LowerBounds::NAMES.iter().zip(self.values()) {
            m.serialize_entry(k, &v)?;
        }
        m.serialize_entry("censored", &self.censored)?;
        m.serialize_entry("lower_bound", &self.lower_bounds.names())?;
        m.end()
    }
}

/// What [`LatencyStats`]'s `Serialize` writes, by hand as it is: the six statistics by their
/// names, `censored`, and `lower_bound` as a list of those names (its `Deserialize` refuses any other).
#[cfg(feature = "schema")]
impl schemars::JsonSchema for LatencyStats {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "LatencyStats".into()
    }

    fn json_schema(g: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let number = g.subschema_for::<f64>();
        let mut properties = serde_json::Map::new();
        for name in LowerBounds::NAMES {
            properties.insert(name.into(), number.clone().into());
        }
        properties.insert("censored".into(), g.subschema_for::<bool>().into());
        properties.insert(
            "lower_bound".into(),
            serde_json::json!({"type": "array", "items": {"enum": LowerBounds::NAMES}}),
        );
        let required: Vec<&String> = properties.keys().collect();
        schemars::json_schema!({
            "description": "Latency statistics in milliseconds, from one merged histogram; `lower_bound` names those that are lower bounds (given-up requests among them).",
            "type": "object",
            "required": required,
            "properties": properties,
        })
    }
}

/// The inverse of [`LatencyStats`]'s `Serialize`: the lower bounds come back from their names.
impl<'de> Deserialize<'de> for LatencyStats {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(serde::Deserialize)]
        struct Wire {
            mean: f64,
            p50: f64,
            p90: f64,
            p99: f64,
            p999: f64,
            max: f64,
            censored: bool,
            lower_bound: Vec<String>,
        }
        let w = Wire::deserialize(d)?;
        let mut lower_bounds = LowerBounds::default();
        for name in &w.lower_bound {
            let i = LowerBounds::NAMES
                .iter()
                .position(|n| n == name)
                .ok_or_else(|| de::Error::unknown_variant(name, &LowerBounds::NAMES))?;
            lower_bounds.set(i);
        }
        Ok(LatencyStats {
            mean: w.mean,
            p50: w.p50,
            p90: w.p90,
            p99: w.p99,
            p999: w.p999,
            max: w.max,
            censored: w.censored,
            lower_bounds,
        })
    }
}

/// A JSON object's entries in the order they were written (a `HashMap` would lose it, and the
/// order of named counts is the reader's to choose).
fn entries<'de, D, K, V>(d: D) -> Result<Vec<(K, V)>, D::Error>
where
    D: Deserializer<'de>,
    K: Deserialize<'de>,
    V: Deserialize<'de>,
{
    struct Entries<K, V>(std::marker::PhantomData<(K, V)>);
    impl<'de, K: Deserialize<'de>, V: Deserialize<'de>> de::Visitor<'de> for Entries<K, V> {
        type Value = Vec<(K, V)>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("an object")
        }
        fn visit_map<A: de::MapAccess<'de>>(self, mut m: A) -> Result<Self::Value, A::Error> {
            let mut out = Vec::with_capacity(m.size_hint().unwrap_or(0));
            while let Some(entry) = m.next_entry()? {
                out.push(entry);
            }
            Ok(out)
        }
    }
    d.deserialize_map(Entries(std::marker::PhantomData))
}

/// The quantiles of [`LatencyStats`] after the mean, in order.
const QUANTILES: [f64; 4] = [0.5, 0.9, 0.99, 0.999];

impl LatencyStats {
    pub fn of(h: &Histogram<u64>) -> LatencyStats {
        if h.is_empty() {
            return LatencyStats::default();
        }
        let q = |q: f64| us_to_ms(h.value_at_quantile(q));
        LatencyStats {
            mean: round3(h.mean() / 1000.0),
            p50: q(QUANTILES[0]),
            p90: q(QUANTILES[1]),
            p99: q(QUANTILES[2]),
            p999: q(QUANTILES[3]),
            max: us_to_ms(h.max()),
            censored: false,
            lower_bounds: LowerBounds::default(),
        }
    }

    /// Statistics of `h`, which holds the given-up requests of `censored` among its values. A
    /// percentile is exact when at least its rank of `h`'s values at or below it are real latencies
    /// (the given-up ones can only grow); otherwise it is a lower bound. The mean and the max are
    /// lower bounds whenever anything was given up.
    pub fn with_censored(h: &Histogram<u64>, censored: &Histogram<u64>) -> LatencyStats {
        let mut stats = LatencyStats::of(h);
        if censored.is_empty() || h.is_empty() {
            return stats;
        }
        stats.censored = true;
        stats.lower_bounds.set(0);
        let n = h.len();
        for (i, q) in QUANTILES.iter().enumerate() {
            let v = h.value_at_quantile(*q);
            let rank = ((q * n as f64).ceil() as u64).max(1);
            let real = h
                .count_between(0, v)
                .saturating_sub(censored.count_between(0, v));
            if real < rank {
                stats.lower_bounds.set(i + 1);
            }
        }
        // Any given-up request may have taken longer than the longest reply.
        stats.lower_bounds.set(5);
        stats
    }

    /// The six statistics in the order of [`LowerBounds::NAMES`].
    pub fn values(&self) -> [f64; 6] {
        [self.mean, self.p50, self.p90, self.p99, self.p999, self.max]
    }
}

/// Statistics over the 1 s reply-rate samples (autobench's min/avg/max/stddev_rep_rate).
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct RateStats {
    pub min: f64,
    pub avg: f64,
    pub max: f64,
    pub stddev: f64,
}

impl RateStats {
    /// Over the full 1 s samples; a step too short to have one (autobench's `--num_conn` habit makes
    /// such steps) has the one sample it does have, its replies over its duration, rather than a 0
    /// that would read as a dead server.
    pub fn of(samples: &[f64], replies: u64, duration: Duration) -> RateStats {
        if samples.is_empty() {
            let whole = round3(replies as f64 / duration.as_secs_f64().max(1e-9));
            return RateStats {
                min: whole,
                avg: whole,
                max: whole,
                stddev: 0.0,
            };
        }
        let n = samples.len() as f64;
        let avg = samples.iter().sum::<f64>() / n;
        let var = samples.iter().map(|s| (s - avg).powi(2)).sum::<f64>() / n;
        RateStats {
            min: round3(samples.iter().copied().fold(f64::INFINITY, f64::min)),
            avg: round3(avg),
            max: round3(samples.iter().copied().fold(f64::NEG_INFINITY, f64::max)),
            stddev: round3(var.sqrt()),
        }
    }
}

/// Counts per status code, serialized as `{"200": n, "503": m}`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Codes(pub Vec<(u16, u64)>);

impl Serialize for Codes {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            m.serialize_entry(&k.to_string(), v)?;
        }
        m.end()
    }
}

/// What [`Codes`]'s `Serialize` writes: a status code (digits) to its count.
#[cfg(feature = "schema")]
impl schemars::JsonSchema for Codes {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Codes".into()
    }

    fn json_schema(g: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "Replies per status code, the codes seen only.",
            "type": "object",
            "propertyNames": {"pattern": "^[0-9]{1,5}$"},
            "additionalProperties": g.subschema_for::<u64>(),
        })
    }
}

/// The inverse of [`Codes`]'s `Serialize`: only the codes seen are there, each a number as a key.
impl<'de> Deserialize<'de> for Codes {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let mut codes = Vec::new();
        for (k, v) in entries::<D, String, u64>(d)? {
            let code = k
                .parse::<u16>()
                .map_err(|_| de::Error::invalid_value(de::Unexpected::Str(&k), &"a status code"))?;
            codes.push((code, v));
        }
        codes.sort_unstable();
        Ok(Codes(codes))
    }
}

/// Named counts that keep their order in JSON.
#[derive(Debug, Clone, PartialEq)]
pub struct Counts(pub Vec<(String, u64)>);

impl Counts {
    pub fn get(&self, name: &str) -> u64 {
        self.0
            .iter()
            .find(|(n, _)| *n == name)
            .map_or(0, |(_, v)| *v)
    }
}

impl Serialize for Counts {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

/// What [`Counts`]'s `Serialize` writes: a name to its count, in the order they were counted.
#[cfg(feature = "schema")]
impl schemars::JsonSchema for Counts {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Counts".into()
    }

    fn json_schema(g: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "object",
            "additionalProperties": g.subschema_for::<u64>(),
        })
    }
}

impl<'de> Deserialize<'de> for Counts {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        entries(d).map(Counts)
    }
}

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Generator {
    /// The busiest agent's worker-thread CPU, percent of what its worker threads can use: a core
    /// each, and no more than its machine's cores.
    pub cpu_pct: f64,
    pub lag_p99_ms: f64,
    pub lag_max_ms: f64,
    /// Arrivals dispatched more than 1 ms after their intended time.
    pub late_1ms: u64,
    /// Arrivals that waited for a free connection, and how long at p99.
    pub waited: u64,
    pub wait_p99_ms: f64,
    pub threads: u32,
}

/// One agent's part of a step, kept so nobody has to trust an average.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct AgentStep {
    pub agent: String,
    pub threads: u32,
    pub requests: u64,
    pub replies: u64,
    pub ok: u64,
    pub errors: u64,
    pub failed_pct: f64,
    pub cpu_pct: f64,
    pub latency_ms: LatencyStats,
    /// How long after the agreed start instant its first request left (coordinator's clock).
    pub start_delay_ms: Option<f64>,
    /// Its clock minus the coordinator's, and the round trip that was measured over (error <= rtt/2).
    pub clock_offset_ms: f64,
    pub rtt_ms: f64,
    pub lost: bool,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct StepResult {
    /// The step's number as people read it, counted from 1 (run.json `step`, the table, hlog/).
    #[serde(rename = "step")]
    pub number: u32,
    pub model: String,
    /// The step's value as planned: conn/s, req/s, or connections for the closed model.
    pub step_value: f64,
    /// Requests per second the plan demands; null for the closed model.
    pub demanded_rate: Option<f64>,
    pub duration_s: f64,
    pub requests: u64,
    pub replies: u64,
    /// Replies with an expected status (`--ok-status`): what the server really served.
    pub ok: u64,
    pub connections: u64,
    /// Requests that were due but never written (connect failed, or expired waiting for a connection).
    pub unsent: u64,
    /// Requests the schedule held that the target had its chance at (the generator's own failures
    /// left out): the failed share's denominator.
    pub due: u64,
    /// Of those, not served: transport errors, unexpected statuses, never sent.
    pub failed: u64,
    pub failed_pct: f64,
    /// Served replies per second over the step's own length: those that came while the schedule
    /// ran, over its length less the fastest reply's latency (none can come sooner). The drain's
    /// replies are apart ([`StepResult::drain`]), so one straggler does not stretch the window. A
    /// closed loop's is all its replies over the step (its last round is sent in it); connections
    /// of several calls, whose drain is not told apart, over the step and its drain.
    pub ok_rate: f64,
    /// What came after the open schedule ended; absent for a closed loop, connections of several
    /// calls (their later calls are sent in it), and older files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drain: Option<Drain>,
    /// Requests given up (timed out, expired, dropped at the end) that enter the latency at their
    /// age then.
    pub given_up: u64,
    pub achieved_request_rate: f64,
    pub connection_rate: f64,
    pub reply_rate: RateStats,
    pub bytes_in: u64,
    pub bytes_out: u64,
    pub net_io_kb_s: f64,
    pub status: Counts,
    /// Replies per status code, the codes seen only.
    pub status_codes: Codes,
    pub errors: Counts,
    /// The target's transport errors (autobench's `errors`; the generator's own kept out) as a percent
    /// of the requests due.
    pub errors_pct: f64,
    /// Each error class's first message, in words: `{"other": "TLS: certificate signed by ..."}`.
    pub error_messages: FirstErrors,
    /// Expected-status replies and given-up requests (those as lower bounds).
    pub latency_ms: LatencyStats,
    /// Replies with an unexpected status, apart.
    pub unexpected_latency_ms: LatencyStats,
    pub connect_ms: LatencyStats,
    pub ttfb_ms: LatencyStats,
    pub reply_rate_series: Vec<f64>,
    pub generator: Generator,
    /// Whether the numbers can be trusted (the generator's judgement of itself), and why not.
    pub trust: Verdict,
    /// The generator itself was the limit (its fds or ports, or a schedule it could not keep): the
    /// step says nothing about the server.
    pub generator_bound: bool,
    pub reasons: Vec<String>,
    /// How the server fared, and why.
    pub server: Server,
    pub server_reasons: Vec<String>,
    pub notes: Vec<String>,
    pub aborted: bool,
    /// Latest minus earliest first request over the agents, ms (0 for one agent).
    pub start_skew_ms: Option<f64>,
    pub agents: Vec<AgentStep>,
    /// Each server monitor's view of the step; absent without monitors (and in older files).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub server_monitors: Vec<StepServer>,
    /// Served replies per second of the server's CPU (`ok_rate` over its own monitor's `cpu_pct` /
    /// 100: how many requests one core of it serves); absent without an own-server monitor
    /// ([`StepResult::own_server`]) or when that saw no CPU used, never 0. Set with the monitors'
    /// views (`quantity::observed`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ok_per_core_s: Option<f64>,
    /// A capacity search's probe: its role and class; absent in a planned run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe: Option<ProbeMark>,
    /// The shares of agents lost mid-step, which were not all run: the step carried less than its
    /// load, so it is neither kept up with nor the server's limit ([`kept_up`], [`summarize_run`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lost_load: Vec<LostShare>,
    /// What HTTP/2 adds to the step; absent over HTTP/1.1 (no session opened).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http2: Option<Http2Step>,
    /// The step's TLS handshakes, full and resumed; absent over plain TCP (and in older files).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<tls::TlsStep>,
    /// A row per named request of the mix, in the plan's order; absent when the requests are
    /// unnamed (and in older files).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub per_request: Vec<per_request::RequestRow>,
    /// A plan's `[setup]` runs and failures; absent without a setup (and in older files).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub setup: Option<setup::SetupStep>,
    /// The step's sessions (`--wsesslog`): begun, completed, abandoned, and their lengths; absent
    /// without a session log.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sessions: Option<sessions::SessionsStep>,
}

/// The drain after an open schedule: how long replies kept coming once the last arrival was sent,
/// and how many did (the backlog the step left: a healthy server's is what it had in flight, a
/// queueing one's grows with the step).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Drain {
    pub seconds: f64,
    pub replies: u64,
}

/// A step's HTTP/2 sessions as the server shaped them.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Http2Step {
    /// The fewest concurrent streams a server's SETTINGS allowed on a session; null: no limit.
    pub server_max_streams: Option<u64>,
    /// Streams the server refused (REFUSED_STREAM), each sent once more.
    pub refused_streams: u64,
    /// Sessions the server ended with GOAWAY; the streams it had not processed were sent again.
    pub goaways: u64,
    /// Streams the server reset with any other code (each failed, its code in the step's errors).
    #[serde(default)]
    pub stream_resets: u64,
    /// Bytes of the replies' header blocks as received (HPACK-compressed), and of their bodies.
    #[serde(default)]
    pub header_bytes: u64,
    #[serde(default)]
    pub body_bytes: u64,
    /// Request bodies that waited for the server's flow-control window, and how long in all (ms).
    #[serde(default)]
    pub window_stalls: u64,
    #[serde(default)]
    pub window_stall_ms: f64,
}

impl Http2Step {
    /// From the step's counters: `None` when no HTTP/2 session was opened.
    pub fn of(c: &Counters) -> Option<Http2Step> {
        (c.peer_max_streams > 0).then(|| Http2Step {
            server_max_streams: (c.peer_max_streams < UNLIMITED_STREAMS)
                .then_some(c.peer_max_streams),
            refused_streams: c.refused_streams,
            goaways: c.goaways,
            stream_resets: c.stream_resets,
            header_bytes: c.header_bytes_in,
            body_bytes: c.body_bytes_in,
            window_stalls: c.window_stalls,
            window_stall_ms: c.window_stall_us as f64 / 1000.0,
        })
    }

    /// What a reader should know of them, in words.
    fn notes(&self, waited: u64, wait_p99_ms: f64) -> Vec<String> {
        let mut notes = Vec::new();
        if waited > 0 {
            let limit = match self.server_max_streams {
                Some(n) => format!(" (the server allows {n} streams per connection)"),
                None => String::new(),
            };
            notes.push(format!(
                "{waited} requests waited for a free HTTP/2 stream{limit}, p99 {wait_p99_ms} ms: the client's queue, counted in their latency from the intended send and shown apart as the queue wait"
            ));
        }
        if self.refused_streams > 0 {
            notes.push(format!(
                "the server refused {} streams (REFUSED_STREAM): each was sent once more, and counted once",
                self.refused_streams
            ));
        }
        if self.goaways > 0 {
            notes.push(format!(
                "the server ended {} HTTP/2 sessions with GOAWAY (its keepalive_requests or http2_max_requests, or a restart): the streams it had not processed were sent again on a new connection",
                self.goaways
            ));
        }
        if self.stream_resets > 0 {
            notes.push(format!(
                "the server reset {} streams (RST_STREAM): each failed, its code in the step's errors",
                self.stream_resets
            ));
        }
        if self.window_stalls > 0 {
            notes.push(format!(
                "{} request bodies waited for the server's HTTP/2 flow-control window, {} ms in all: the server reading slowly, not the network",
                self.window_stalls, self.window_stall_ms
            ));
        }
        notes
    }
}

impl StepResult {
    /// The monitor watching the server this step loaded (its CPU, memory and threads are that
    /// server's, and the knee and requests per server core-second are read from it): the one the
    /// run paired with the step's target (`watches: target`). A step whose monitors all say they
    /// are shared has none. A step written before pairing says nothing: its only monitor, when it
    /// has exactly one that watches processes or a cgroup, was its server then and is now.
    pub fn own_server(&self) -> Option<&StepServer> {
        use monitor::step::Watches;
        let mut said = false;
        for m in &self.server_monitors {
            match m.watches {
                Watches::Target => return Some(m),
                Watches::Shared => said = true,
                Watches::Unsaid => {}
            }
        }
        match self.server_monitors.as_slice() {
            [only] if !said && only.target.is_some() => Some(only),
            _ => None,
        }
    }
}

/// An agent lost mid-step, and its part of the step's load in percent.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct LostShare {
    pub agent: String,
    pub pct: f64,
}

pub(crate) fn round3(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}

/// `12345.6` as `12,346`; below 100 with one decimal when it has one.
pub fn human(v: f64) -> String {
    if v.abs() < 100.0 && v.fract().abs() >= 0.05 {
        return format!("{v:.1}");
    }
    let n = v.round() as i64;
    let digits = n.unsigned_abs().to_string();
    let mut out = String::new();
    for (i, ch) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(ch);
    }
    if n < 0 { format!("-{out}") } else { out }
}

/// A latency for people: `9.3 ms`, `3.3 s`, `≥1000 ms` when a lower bound.
pub fn human_ms(ms: f64, lower_bound: bool) -> String {
    let at_least = if lower_bound { "≥" } else { "" };
    if ms >= 1000.0 {
        format!("{at_least}{:.1} s", ms / 1000.0)
    } else if ms >= 10.0 {
        format!("{at_least}{ms:.0} ms")
    } else {
        format!("{at_least}{ms:.1} ms")
    }
}

/// A step value with its unit: `400 req/s`, `20 conn/s`, `50 connections`.
pub fn step_value(model: &str, v: f64) -> String {
    let unit = match model {
        "connections" => "conn/s",
        "concurrency" if v == 1.0 => "connection",
        "concurrency" => "connections",
        _ => "req/s",
    };
    format!("{} {unit}", human(v))
}

/// A number as the table writes it: at most three decimals, no trailing zeros (the report's tables
/// write theirs so too).
pub fn tsv_number(v: f64) -> String {
    let s = format!("{v:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s.is_empty() || s == "-0" {
        "0".to_string()
    } else {
        s.to_string()
    }
}

// A capacity search's mark on a step (run.json's `steps[].probe`, steps.tsv's `role` and `class`):
// the step's data, which the search makes.

/// What a probe is for, as steps.tsv and run.json name it. `Warmup` is the coordinator's: a probe
/// at the start rate before the search, which the search never sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum ProbeRole {
    Warmup,
    Ramp,
    Bisect,
    Confirm,
    Recovery,
}

impl ProbeRole {
    pub fn name(self) -> &'static str {
        match self {
            ProbeRole::Warmup => "warmup",
            ProbeRole::Ramp => "ramp",
            ProbeRole::Bisect => "bisect",
            ProbeRole::Confirm => "confirm",
            ProbeRole::Recovery => "recovery",
        }
    }
}

/// A probe's class as the files name it; `aborted` for a probe cut short (Ctrl-C), which the
/// search never counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Mark {
    Pass,
    Fail,
    Invalid,
    Undecided,
    Aborted,
}

impl Mark {
    pub fn name(self) -> &'static str {
        match self {
            Mark::Pass => "pass",
            Mark::Fail => "fail",
            Mark::Invalid => "invalid",
            Mark::Undecided => "undecided",
            Mark::Aborted => "aborted",
        }
    }
}

/// One step's part in a search: what it was for, how it was classed, and why when it failed.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ProbeMark {
    pub role: ProbeRole,
    pub class: Mark,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use shared::histogram;
    use shared::metrics::Snapshot;
    use shared::plan::LoadModel;
    use shared::status::StatusSet;

    // Steps made up from a merge, for the step modules' tests (`input`, `answer`) and this one's.

    pub(crate) fn snapshot(requests: u64, lat_us: &[u64]) -> Snapshot {
        let mut s = Snapshot::default();
        s.counters.requests = requests;
        s.counters.replies = requests;
        s.counters.connections = requests;
        s.counters.status[1] = requests;
        s.counters.ok = requests;
        s.codes.add_count(200, requests);
        s.counters.bytes_in = 1024 * requests;
        for v in lat_us {
            s.hist.latency.record(*v).unwrap();
        }
        s
    }

    /// Agent "a" that measured all of `s` on `threads` of `cores` over `wall`.
    pub(crate) fn agent_input(
        s: &Snapshot,
        threads: u32,
        cores: u32,
        wall: Duration,
    ) -> AgentInput {
        AgentInput {
            name: "a".into(),
            threads,
            cores,
            wall,
            counters: s.counters,
            cpu_ns: s.cpu_ns,
            latency_ms: LatencyStats::of(&s.hist.latency),
            start_delay: None,
            lost: false,
            clock_offset_ns: 0,
            rtt: Duration::ZERO,
        }
    }

    /// One agent's step of `total` over `secs`, in the requests model at `rate`.
    pub(crate) fn one_agent(total: &Snapshot, secs: f64, rate: f64, f: impl FnOnce(&StepResult)) {
        let duration = Duration::from_secs_f64(secs);
        let series: Vec<IntervalSample> = (0..secs as usize)
            .map(|_| IntervalSample {
                length: Duration::from_secs(1),
                replies: (total.counters.replies as f64 / secs) as u64,
            })
            .collect();
        let r = summarize(&StepInput {
            number: 1,
            model: LoadModel::Requests,
            value: rate,
            demanded_rate: Some(rate),
            duration,
            total,
            series: &series,
            agents: vec![agent_input(total, 1, 2, duration)],
            aborted: false,
            mark_lost: true,
            start_skew: None,
            ok_status: &StatusSet::default(),
            baseline_p50_ms: None,
        });
        f(&r);
    }

    /// A step of the requests model at `rate` that served `ok_rate` with p99 `p99`.
    pub(crate) fn ramp_step(
        step: u32,
        rate: f64,
        ok_rate: f64,
        p99: f64,
        trust: Verdict,
    ) -> StepResult {
        let mut t = snapshot(ok_rate as u64 * 10, &[(p99 * 1000.0) as u64; 10]);
        t.counters.unsent = (rate - ok_rate) as u64 * 10;
        let mut r = None;
        one_agent(&t, 10.0, rate, |s| r = Some(s.clone()));
        let mut r = r.unwrap();
        r.number = step;
        r.trust = trust;
        r
    }

    #[test]
    fn a_step_s_own_server_is_the_monitor_paired_with_its_target() {
        use monitor::step::Watches;
        let mut r = ramp_step(1, 100.0, 100.0, 2.0, Verdict::Valid);
        let mark = |name: &str, w: Watches| {
            let mut m = crate::example_server(name, 50.0, 1.0);
            m.watches = w;
            m
        };
        // Written before pairing: the only monitor of processes.
        r.server_monitors = vec![mark("server", Watches::Unsaid)];
        assert_eq!(r.own_server().map(|m| m.monitor.as_str()), Some("server"));
        r.server_monitors.push(mark("db", Watches::Unsaid));
        assert!(r.own_server().is_none(), "one of two is nobody's own");
        // Paired: the target's, wherever it stands among the shared ones.
        r.server_monitors = vec![mark("db", Watches::Shared), mark("go", Watches::Target)];
        assert_eq!(r.own_server().map(|m| m.monitor.as_str()), Some("go"));
        // Side by side, a database behind both targets is neither's server.
        r.server_monitors = vec![mark("db", Watches::Shared)];
        assert!(r.own_server().is_none());
    }

    #[test]
    fn rate_stats_over_samples() {
        let r = RateStats::of(&[10.0, 20.0, 30.0], 60, Duration::from_secs(3));
        assert_eq!((r.min, r.avg, r.max), (10.0, 20.0, 30.0));
        assert!((r.stddev - 8.165).abs() < 0.001);
        assert_eq!(
            RateStats::of(&[], 0, Duration::from_secs(1)),
            RateStats::default()
        );
    }

    #[test]
    fn numbers_for_people() {
        assert_eq!(human(30000.0), "30,000");
        assert_eq!(human(19680.4), "19,680");
        assert_eq!(human(12.5), "12.5");
        assert_eq!(human_ms(9.31, false), "9.3 ms");
        assert_eq!(human_ms(3300.0, true), "≥3.3 s");
    }

    #[test]
    fn empty_histogram_gives_zeros() {
        assert_eq!(LatencyStats::of(&histogram::new()), LatencyStats::default());
    }

    #[test]
    fn http2_counters_make_their_block_and_notes_and_http1_has_none() {
        let mut c = Counters::default();
        assert_eq!(Http2Step::of(&c), None, "no session: HTTP/1.1");
        c.peer_max_streams = shared::metrics::UNLIMITED_STREAMS;
        assert_eq!(
            Http2Step::of(&c).unwrap().server_max_streams,
            None,
            "no limit"
        );
        c.peer_max_streams = 8;
        c.refused_streams = 3;
        c.goaways = 2;
        let h2 = Http2Step::of(&c).unwrap();
        assert_eq!(
            (h2.server_max_streams, h2.refused_streams, h2.goaways),
            (Some(8), 3, 2)
        );
        let notes = h2.notes(120, 4.5);
        assert_eq!(notes.len(), 3, "{notes:?}");
        assert!(notes[0].starts_with("120 requests waited for a free HTTP/2 stream (the server allows 8 streams per connection), p99 4.5 ms"), "{}", notes[0]);
        assert!(notes[1].contains("refused 3 streams"), "{}", notes[1]);
        assert!(
            notes[2].contains("ended 2 HTTP/2 sessions with GOAWAY"),
            "{}",
            notes[2]
        );
        assert!(h2.notes(0, 0.0).len() == 2);
    }
}
