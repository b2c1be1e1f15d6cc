//! The result schema: one `StepResult` per step, computed only from merged data (its table row is
//! `table.rs`'s). Everything a report says is derived here, once, so TSV, JSON and the terminal agree.
use std::time::Duration;

use serde::de::{self, Deserialize, Deserializer};
use serde::ser::{Serialize, SerializeMap, Serializer};

pub mod headline;
pub mod knee;
pub mod tls;

use crate::verdict::{self, Facts, Server, ServerFacts, Verdict};
use knee::Knee;
use monitor::step::StepServer;
use shared::histogram::{Histogram, us_to_ms};
use shared::metrics::{
    Counters, ErrorClass, FirstErrors, STATUS_CLASSES, Snapshot, UNLIMITED_STREAMS,
};
use shared::plan::LoadModel;
use shared::status::StatusSet;

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

impl<'de> Deserialize<'de> for Counts {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        entries(d).map(Counts)
    }
}

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
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
}

/// The drain after an open schedule: how long replies kept coming once the last arrival was sent,
/// and how many did (the backlog the step left: a healthy server's is what it had in flight, a
/// queueing one's grows with the step).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Drain {
    pub seconds: f64,
    pub replies: u64,
}

/// A step's HTTP/2 sessions as the server shaped them.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
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
pub struct LostShare {
    pub agent: String,
    pub pct: f64,
}

/// One full interval of the merged fleet, for the reply-rate series.
#[derive(Debug, Clone, Copy)]
pub struct IntervalSample {
    pub length: Duration,
    pub replies: u64,
}

/// One agent's totals for a step.
#[derive(Debug, Clone)]
pub struct AgentInput {
    pub name: String,
    pub threads: u32,
    /// Its machine's cores: more worker threads than cores share them, and each then gets less than
    /// a core, so the CPU share is taken of the smaller of the two.
    pub cores: u32,
    /// How long its workers ran (schedule plus drain): the CPU share's denominator.
    pub wall: Duration,
    /// Its counters and worker CPU time, summed over its intervals.
    pub counters: Counters,
    pub cpu_ns: u64,
    /// [`LatencyStats::of`] its own merged latency histogram. Given as statistics rather than the
    /// histogram so that a merge over many agents needs only one of their histograms at a time.
    pub latency_ms: LatencyStats,
    pub start_delay: Option<Duration>,
    pub lost: bool,
    pub clock_offset_ns: i64,
    pub rtt: Duration,
}

/// Everything a step produced, merged but not yet summarised.
#[derive(Debug, Clone)]
pub struct StepInput<'a> {
    /// Counted from 1, as [`StepResult::number`].
    pub number: u32,
    pub model: LoadModel,
    pub value: f64,
    pub demanded_rate: Option<f64>,
    pub duration: Duration,
    pub total: &'a Snapshot,
    pub series: &'a [IntervalSample],
    pub agents: Vec<AgentInput>,
    pub aborted: bool,
    /// Whether a lost agent degrades the step (false under `--on-agent-loss continue`).
    pub mark_lost: bool,
    /// Latest minus earliest first send over the agents, on the coordinator's clock.
    pub start_skew: Option<Duration>,
    /// The statuses that count as served.
    pub ok_status: &'a StatusSet,
    /// The lowest median latency of the run's earlier steps whose server was ok (see
    /// [`verdict::judge_server`]).
    pub baseline_p50_ms: Option<f64>,
}

fn round3(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}

fn cpu_pct(cpu_ns: u64, wall: Duration, threads: u32) -> f64 {
    let capacity = wall.as_nanos() as f64 * f64::from(threads.max(1));
    if capacity == 0.0 {
        0.0
    } else {
        round3(cpu_ns as f64 / capacity * 100.0)
    }
}

fn share_pct(part: u64, whole: u64) -> f64 {
    round3(verdict::pct(part, whole))
}

/// One note per error class that has a message: how many, and the first in words ("10 other
/// errors, the first: TLS: certificate signed by unknown issuer: use --insecure ...").
fn error_notes(c: &Counters, messages: &FirstErrors) -> Vec<String> {
    messages
        .iter()
        .filter(|(class, _)| c.error(*class) > 0)
        .map(|(class, words)| match c.error(class) {
            1 => format!("1 {} error: {words}", class.name()),
            n => format!("{n} {} errors, the first: {words}", class.name()),
        })
        .collect()
}

/// The reply rate of each full interval of the merged fleet, per second.
fn reply_rate_series(series: &[IntervalSample]) -> Vec<f64> {
    series
        .iter()
        .map(|s| round3(s.replies as f64 / s.length.as_secs_f64().max(1e-9)))
        .collect()
}

/// Each agent's part of the step, as it is kept in the result.
fn agent_steps(input: &StepInput<'_>) -> Vec<AgentStep> {
    input
        .agents
        .iter()
        .map(|a| AgentStep {
            agent: a.name.clone(),
            threads: a.threads,
            requests: a.counters.requests,
            replies: a.counters.replies,
            ok: a.counters.ok,
            errors: a.counters.target_errors(),
            failed_pct: share_pct(a.counters.failed(), a.counters.due()),
            // Over the step at least: an agent whose share had no arrivals ends at once, and its
            // few microseconds of CPU over a near-zero wall read as a saturated generator.
            cpu_pct: cpu_pct(a.cpu_ns, a.wall.max(input.duration), a.threads.min(a.cores)),
            latency_ms: LatencyStats {
                censored: a.counters.given_up > 0,
                ..a.latency_ms
            },
            start_delay_ms: a.start_delay.map(|d| round3(d.as_secs_f64() * 1000.0)),
            clock_offset_ms: round3(a.clock_offset_ns as f64 / 1e6),
            rtt_ms: round3(a.rtt.as_secs_f64() * 1000.0),
            lost: a.lost,
        })
        .collect()
}

/// How the generator itself did: its busiest agent's CPU (`busiest`), its lag and its waits.
fn generator_stats(input: &StepInput<'_>, busiest: f64) -> Generator {
    let t = input.total;
    let lag = &t.hist.lag;
    Generator {
        cpu_pct: busiest,
        lag_p99_ms: if lag.is_empty() {
            0.0
        } else {
            us_to_ms(lag.value_at_quantile(0.99))
        },
        lag_max_ms: us_to_ms(lag.max()),
        late_1ms: lag.count_between(1001, shared::histogram::HIGHEST_US),
        waited: t.counters.waited,
        wait_p99_ms: if t.hist.wait.is_empty() {
            0.0
        } else {
            us_to_ms(t.hist.wait.value_at_quantile(0.99))
        },
        threads: input.agents.iter().map(|a| a.threads).sum(),
    }
}

/// Whether the step's numbers can be trusted: the facts [`verdict::judge`] rests on, gathered.
fn judge_trust(input: &StepInput<'_>, generator: &Generator, achieved: f64) -> verdict::Judgement {
    let t = input.total;
    let lost_agents = input
        .agents
        .iter()
        .filter(|a| a.lost && input.mark_lost)
        .map(|a| a.name.clone())
        .collect();
    verdict::judge(&Facts {
        demanded_rate: input.demanded_rate,
        achieved_rate: achieved,
        cpu_pct: generator.cpu_pct,
        lag_p99_ms: generator.lag_p99_ms,
        late: generator.late_1ms,
        counters: t.counters,
        aborted: input.aborted,
        lost_agents,
        concurrency: (input.model == LoadModel::Concurrency).then_some(input.value as u64),
        messages: t.messages.clone(),
    })
}

/// A drain this long is said in the step's notes (a healthy server's lasts its latency).
const DRAIN_NOTED_S: f64 = 0.1;

/// Whether the agents told the drain's replies apart: an open schedule of one request an arrival
/// (a `connections` step of several calls sends its later calls in the drain).
fn drain_counted(input: &StepInput<'_>) -> bool {
    match input.model {
        LoadModel::Requests => true,
        LoadModel::Connections => input.demanded_rate == Some(input.value),
        LoadModel::Concurrency => false,
    }
}

/// How long the agents ran past the step's length: the drain.
fn ran_past(input: &StepInput<'_>) -> Duration {
    input
        .agents
        .iter()
        .map(|a| a.wall)
        .max()
        .unwrap_or(input.duration)
        .saturating_sub(input.duration)
}

/// Served (ok) replies per second over the step's own length ([`StepResult::ok_rate`]).
fn served_rate(input: &StepInput<'_>) -> f64 {
    let c = &input.total.counters;
    let latency = &input.total.hist.latency;
    let fastest = Duration::from_micros(if latency.is_empty() { 0 } else { latency.min() });
    let (served, window) = if input.aborted || input.model == LoadModel::Concurrency {
        // A closed loop holds at most its connections in flight: what they answer after the end
        // is that last round, sent in the step. Over the step's own length, served is what was
        // sent (nginx -c 50 read "sent 63,690/s, served 63,650/s, failed 0 %": its 6 ms drain in
        // the divisor).
        (c.ok, input.duration)
    } else if drain_counted(input) {
        // The drain's replies are the backlog's, said apart; the window is the step less the
        // time before any reply could come (a 1 s endpoint answers nothing in its first second).
        // Nothing in the drain: every reply came before the end, so none waited a latency of
        // note (and the window is the step's).
        let drained_ok = c.drained.min(c.ok);
        let late_start = if drained_ok > 0 {
            fastest
        } else {
            Duration::ZERO
        };
        let window = input.duration.saturating_sub(late_start);
        (c.ok - drained_ok, window.max(input.duration / 2))
    } else {
        // Not told apart: the drain is in the window, at the server's own pace.
        let window = (input.duration + ran_past(input)).saturating_sub(fastest);
        (c.ok, window.max(input.duration))
    };
    served as f64 / window.as_secs_f64().max(1e-9)
}

/// Summarises a merged step; percentiles and rates are computed here and only here.
pub fn summarize(input: &StepInput<'_>) -> StepResult {
    let t = input.total;
    let c = &t.counters;
    let secs = input.duration.as_secs_f64().max(1e-9);
    let series = reply_rate_series(input.series);
    let agents = agent_steps(input);
    let busiest = agents.iter().map(|a| a.cpu_pct).fold(0.0, f64::max);
    let achieved = round3(c.requests as f64 / secs);
    let generator = generator_stats(input, busiest);
    let judgement = judge_trust(input, &generator, achieved);
    let latency = LatencyStats::with_censored(&t.hist.latency, &t.hist.censored);
    let unexpected_latency = LatencyStats::of(&t.hist.unexpected);
    let mut notes = judgement.notes;
    notes.extend(error_notes(c, &t.messages));
    notes.extend(failure_notes(input, &latency));
    let http2 = Http2Step::of(c);
    if let Some(h2) = &http2 {
        notes.extend(h2.notes(generator.waited, generator.wait_p99_ms));
    }
    let tls = tls::TlsStep::of(c);
    notes.extend(tls.map(|t| t.note()));
    let ok_rate = served_rate(input);
    let drain = (drain_counted(input) && !input.aborted).then(|| Drain {
        seconds: round3(ran_past(input).as_secs_f64()),
        replies: c.drained,
    });
    if let Some(d) = drain.filter(|d| d.replies > 0 && d.seconds >= DRAIN_NOTED_S) {
        notes.push(format!(
            "{} replies came in the {:.2} s after the schedule ended (the drain): served, and left out of served/s, which is over the step's own length",
            d.replies,
            d.seconds
        ));
    }
    let server = verdict::judge_server(&ServerFacts {
        counters: *c,
        codes: &t.codes,
        ok_status: input.ok_status,
        p50_ms: latency.p50,
        p10_ms: if t.hist.latency.is_empty() {
            0.0
        } else {
            us_to_ms(t.hist.latency.value_at_quantile(0.10))
        },
        baseline_p50_ms: input.baseline_p50_ms,
        served_per_s: ok_rate,
        due_per_s: c.due() as f64 / secs,
        backlog: drain.map(|d| d.replies),
        step_s: secs,
    });
    StepResult {
        number: input.number,
        model: input.model.name().to_string(),
        step_value: input.value,
        demanded_rate: input.demanded_rate,
        duration_s: round3(secs),
        requests: c.requests,
        replies: c.replies,
        ok: c.ok,
        connections: c.connections,
        unsent: c.unsent,
        due: c.due(),
        failed: c.failed(),
        failed_pct: share_pct(c.failed(), c.due()),
        ok_rate: round3(ok_rate),
        drain,
        given_up: c.given_up,
        achieved_request_rate: achieved,
        connection_rate: round3(c.connections as f64 / secs),
        reply_rate: RateStats::of(&series, c.replies, input.duration),
        bytes_in: c.bytes_in,
        bytes_out: c.bytes_out,
        net_io_kb_s: round3((c.bytes_in + c.bytes_out) as f64 / 1024.0 / secs),
        status: Counts(
            STATUS_CLASSES
                .iter()
                .map(|c| c.to_string())
                .zip(c.status)
                .collect(),
        ),
        status_codes: Codes(t.codes.nonzero().collect()),
        errors: Counts(
            ErrorClass::ALL
                .iter()
                .map(|e| (e.name().to_string(), c.error(*e)))
                .collect(),
        ),
        errors_pct: share_pct(c.target_errors(), c.due()),
        error_messages: t.messages.clone(),
        latency_ms: latency,
        unexpected_latency_ms: unexpected_latency,
        connect_ms: LatencyStats::of(&t.hist.connect),
        ttfb_ms: LatencyStats::of(&t.hist.ttfb),
        reply_rate_series: series,
        generator,
        trust: judgement.verdict,
        generator_bound: judgement.generator_bound,
        reasons: judgement.reasons,
        server: server.state,
        server_reasons: server.reasons,
        notes,
        aborted: input.aborted,
        start_skew_ms: input.start_skew.map(|d| round3(d.as_secs_f64() * 1000.0)),
        lost_load: Vec::new(),
        agents,
        server_monitors: Vec::new(),
        ok_per_core_s: None,
        probe: None,
        http2,
        tls,
    }
}

/// Notes that say what the failure share and the censored percentiles are made of, in words.
fn failure_notes(input: &StepInput<'_>, latency: &LatencyStats) -> Vec<String> {
    let t = input.total;
    let c = &t.counters;
    let mut notes = Vec::new();
    let unexpected = verdict::unexpected_codes(&t.codes, input.ok_status);
    if c.replies > 0 && !unexpected.is_empty() {
        let parts: Vec<String> = unexpected
            .iter()
            .take(4)
            .map(|(code, n)| format!("{:.0}% were {code}", *n as f64 * 100.0 / c.replies as f64))
            .collect();
        let others = unexpected.len().saturating_sub(4);
        notes.push(format!(
            "{} of {} replies had a status outside --ok-status {}: {}{}; they are failures, not served, and their latency is reported apart (unexpected_latency_ms)",
            c.unexpected(),
            c.replies,
            input.ok_status,
            parts.join(", "),
            if others > 0 {
                format!(" and {others} other codes")
            } else {
                String::new()
            }
        ));
    }
    if latency.censored {
        let bounds: Vec<&str> = latency
            .lower_bounds
            .names()
            .into_iter()
            .filter(|n| *n != "mean")
            .collect();
        notes.push(format!(
            "{} requests were given up (no reply within the timeout, or never sent) and count in the latency at their age then; {}",
            c.given_up,
            if bounds.is_empty() {
                "the percentiles are exact, the mean a lower bound".to_string()
            } else {
                format!("{} are lower bounds", bounds.join(", "))
            }
        ));
    }
    notes
}

/// Served at least this share of what the schedule offered, to have kept up.
pub const KEPT_UP_RATIO: f64 = 0.98;
/// A served rate within this share of the run's peak is on its plateau.
pub const PLATEAU_RATIO: f64 = 0.98;

/// The step past the highest one kept up with: what the target did there.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Beyond {
    pub step: u32,
    pub step_value: f64,
    pub demanded_rate: Option<f64>,
    pub ok_rate: f64,
    pub p99_ms: f64,
    pub p99_lower_bound: bool,
    pub failed_pct: f64,
    pub server: Server,
    pub trust: Verdict,
    pub generator_bound: bool,
    /// Interrupted (Ctrl-C, a lost agent under `abort`) before it finished.
    pub aborted: bool,
}

/// The run's answer: how far the target kept up, where its served rate plateaued, how p99 moved.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RunSummary {
    /// The highest step value (rate, or connections) kept up with (see [`kept_up`]). Null when no
    /// step was.
    pub kept_up_to: Option<f64>,
    pub kept_up_step: Option<u32>,
    pub kept_up_p99_ms: Option<f64>,
    pub beyond: Option<Beyond>,
    /// The highest served rate of the run, and the first step value that reached 98 % of it.
    pub peak_ok_rate: f64,
    pub plateau_from: Option<f64>,
    /// Steps whose numbers cannot be trusted (the generator's verdict `invalid`).
    pub untrusted_steps: Vec<u32>,
    /// Where the server stopped coping and why ([`crate::knee`]); absent when no step shows it (and
    /// in files written before the knee was named).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub knee: Option<Knee>,
    /// What the run found of the server, as a kind: the structure the headline is rendered from
    /// (absent in files written before it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finding: Option<headline::Finding>,
    /// The answer at a glance, at most [`headline::MAX_CHARS`] characters: what stdout's `answer:`
    /// line, the ranking and the report's lead say. Empty in files written before it.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub headline: String,
    /// The answer in full: every number behind the headline, in one sentence.
    pub answer: String,
}

/// Whether the target kept up with a step: it served what its schedule held (a Poisson schedule
/// holds more or less than the plan's rate; the closed model what was due), failed little, without
/// making requests queue (a server that serves everything, late, is saturated), and the numbers are
/// not untrustworthy.
pub fn kept_up(r: &StepResult) -> bool {
    judged(r)
        && r.trust != Verdict::Invalid
        // The generator's limit says nothing of the server: kept up with no more than failed.
        && !r.generator_bound
        && r.due > 0
        && r.failed_pct <= verdict::FAILING_PCT
        && r.ok as f64 >= KEPT_UP_RATIO * r.due as f64
        // Queueing is not keeping up once it costs throughput: a server at exactly its capacity
        // queues a little and still serves the pace offered.
        && (r.server != Server::Saturated
            || r.ok_rate >= KEPT_UP_RATIO * (r.due as f64 / r.duration_s.max(1e-9)))
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

/// Whether a step says anything of the server: one that lost an agent's share mid-step carried less
/// than its load, and is neither kept up with nor past the limit.
pub fn judged(r: &StepResult) -> bool {
    r.lost_load.is_empty()
}

pub fn summarize_run(steps: &[StepResult]) -> RunSummary {
    let knee = knee::find(steps);
    // "Kept up to" is the last step before the knee, so the knee is always above it.
    let kept = steps
        .iter()
        .filter(|r| kept_up(r) && knee.as_ref().is_none_or(|k| r.step_value < k.step_value))
        .max_by(|a, b| a.step_value.total_cmp(&b.step_value));
    let beyond = match &knee {
        Some(k) => steps.iter().find(|r| r.number == k.step),
        None => kept.map_or_else(
            || steps.iter().find(|r| judged(r) && !kept_up(r)),
            |k| {
                steps
                    .iter()
                    .filter(|r| r.step_value > k.step_value && judged(r) && !kept_up(r))
                    .min_by(|a, b| a.step_value.total_cmp(&b.step_value))
            },
        ),
    };
    let peak = steps.iter().map(|r| r.ok_rate).fold(0.0, f64::max);
    let plateau_from = steps
        .iter()
        .filter(|r| peak > 0.0 && r.ok_rate >= PLATEAU_RATIO * peak)
        .map(|r| r.step_value)
        .min_by(f64::total_cmp);
    let untrusted_steps = steps
        .iter()
        .filter(|r| r.trust == Verdict::Invalid)
        .map(|r| r.number)
        .collect();
    let beyond = beyond.map(|r| Beyond {
        step: r.number,
        step_value: r.step_value,
        demanded_rate: r.demanded_rate,
        ok_rate: r.ok_rate,
        p99_ms: r.latency_ms.p99,
        p99_lower_bound: r.latency_ms.lower_bounds.contains("p99"),
        failed_pct: r.failed_pct,
        server: r.server,
        trust: r.trust,
        generator_bound: r.generator_bound,
        aborted: r.aborted,
    });
    let mut answer = answer(steps, kept, beyond.as_ref(), peak, plateau_from);
    if let Some(k) = &knee {
        // A server that served every step past its knee kept up by the served rate alone: its
        // limit of that kind is beyond the ramp, not every limit.
        if k.servers {
            answer = answer.replace(
                BEYOND_THE_RAMP,
                "so its served rate's limit lies beyond this ramp",
            );
        }
        answer = format!("{}; {answer}", knee_lead(steps, k));
    }
    let finding = headline::Finding::of(steps, kept, beyond.as_ref(), knee.as_ref());
    let headline = headline::render(steps, &finding, kept, knee.as_ref());
    RunSummary {
        kept_up_to: kept.map(|r| r.step_value),
        kept_up_step: kept.map(|r| r.number),
        kept_up_p99_ms: kept.map(|r| r.latency_ms.p99),
        beyond,
        peak_ok_rate: peak,
        plateau_from,
        untrusted_steps,
        knee,
        finding,
        headline,
        answer,
    }
}

/// A step value in words; the connections model's with the request rate it demanded, which the
/// tables show beside it.
fn offered_words(model: &str, value: f64, demanded: Option<f64>) -> String {
    match demanded {
        Some(d) if model == "connections" => {
            format!("{} = {} req/s", step_value(model, value), human(d))
        }
        _ => step_value(model, value),
    }
}

/// The answer's lead: the knee, then what the server still served at the highest step beyond it.
fn knee_lead(steps: &[StepResult], k: &Knee) -> String {
    let model = steps.first().map_or("", |r| r.model.as_str());
    let mut s = k.sentence(&offered_words(model, k.step_value, k.demanded_rate));
    let top = steps
        .iter()
        .filter(|r| judged(r) && !r.aborted && r.step_value > k.step_value)
        .max_by(|a, b| a.step_value.total_cmp(&b.step_value));
    if let Some(top) = top.filter(|_| k.servers) {
        s.push_str(&format!(
            "; it still served {}/s at {}",
            human(top.ok_rate),
            step_value(model, top.step_value)
        ));
    }
    s
}

/// What a run every step of which kept up says of its limit.
const BEYOND_THE_RAMP: &str = "so the limit lies beyond this ramp";

fn answer(
    steps: &[StepResult],
    kept: Option<&StepResult>,
    beyond: Option<&Beyond>,
    peak: f64,
    plateau_from: Option<f64>,
) -> String {
    let Some(first) = steps.first() else {
        return "no step ran".to_string();
    };
    let model = first.model.as_str();
    let offered = |value: f64, demanded: Option<f64>| offered_words(model, value, demanded);
    let mut s = match kept {
        Some(k) => {
            let mut doubt = String::new();
            if k.trust == Verdict::Degraded {
                doubt = format!("; trust degraded there: {}", k.reasons.join("; "));
            }
            format!(
                "kept up to {} (p99 {}{doubt})",
                offered(k.step_value, k.demanded_rate),
                human_ms(k.latency_ms.p99, k.latency_ms.lower_bounds.contains("p99"))
            )
        }
        None => "kept up with no step".to_string(),
    };
    match beyond {
        Some(b) => {
            let mut why = String::new();
            if b.failed_pct > verdict::FAILING_PCT {
                why.push_str(&format!(", {}% failed", human(b.failed_pct)));
            }
            if b.aborted {
                why.push_str(" (the step was interrupted before it finished)");
            } else if b.generator_bound {
                why.push_str(" (the generator could not be trusted there)");
            }
            if b.ok_rate > 0.0 || b.p99_ms > 0.0 {
                s.push_str(&format!(
                    "; at {} it served {}/s with p99 {}{why}",
                    offered(b.step_value, b.demanded_rate),
                    human(b.ok_rate),
                    human_ms(b.p99_ms, b.p99_lower_bound)
                ));
            } else {
                // No latency at all: nothing served and nothing given up, so no p99 to speak of.
                s.push_str(&format!(
                    "; at {} it served nothing{why}",
                    offered(b.step_value, b.demanded_rate)
                ));
            }
        }
        None if kept.is_some() && steps.iter().all(judged) => {
            s.push_str(&format!(": every step kept up, {BEYOND_THE_RAMP}"))
        }
        None if kept.is_some() => s.push_str(": every step judged kept up"),
        None => {}
    }
    for r in steps.iter().filter(|r| !judged(r)) {
        let lost: Vec<String> = r
            .lost_load
            .iter()
            .map(|l| format!("agent {}'s share ({} % of the load)", l.agent, human(l.pct)))
            .collect();
        s.push_str(&format!(
            "; step {} lost {}: not judged",
            r.number,
            lost.join(" and ")
        ));
    }
    // A plateau needs a step past where it began.
    let last = steps.iter().map(|r| r.step_value).fold(f64::MIN, f64::max);
    if let Some(from) = plateau_from.filter(|f| beyond.is_some() && peak > 0.0 && *f < last) {
        s.push_str(&format!(
            "; the served rate plateaued at {}/s from {}",
            human(peak),
            step_value(model, from)
        ));
    }
    s
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
pub struct ProbeMark {
    pub role: ProbeRole,
    pub class: Mark,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

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

    use crate::table::StepTable;
    use shared::histogram;

    fn snapshot(requests: u64, lat_us: &[u64]) -> Snapshot {
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
    fn agent_input(s: &Snapshot, threads: u32, cores: u32, wall: Duration) -> AgentInput {
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
    fn one_agent(total: &Snapshot, secs: f64, rate: f64, f: impl FnOnce(&StepResult)) {
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

    #[test]
    fn a_step_whose_every_request_was_served_with_one_straggler_kept_up() {
        // python3 -m http.server at 1,500 req/s for 3 s: 4,500 due, 4,500 served, p99 5.5 ms, one
        // reply at 1,032 ms (a SYN retransmit). Divided by the step plus its drain, it read
        // "served 1284/s of the 1500/s due: requests queued", saturated, and not kept up.
        let mut lat = vec![1_400; 4_450];
        lat.extend([5_500; 49]);
        lat.push(1_032_000);
        let mut t = snapshot(4_500, &lat);
        t.counters.drained = 3;
        let duration = Duration::from_secs(3);
        let r = summarize(&StepInput {
            number: 3,
            model: LoadModel::Requests,
            value: 1_500.0,
            demanded_rate: Some(1_500.0),
            duration,
            total: &t,
            series: &[],
            agents: vec![agent_input(&t, 1, 2, Duration::from_millis(4_032))],
            aborted: false,
            mark_lost: true,
            start_skew: None,
            ok_status: &StatusSet::default(),
            baseline_p50_ms: Some(1.4),
        });
        assert!((1_498.0..=1_500.0).contains(&r.ok_rate), "{}", r.ok_rate);
        assert_eq!(r.server, Server::Ok, "{:?}", r.server_reasons);
        assert_eq!(
            r.drain,
            Some(Drain {
                seconds: 1.032,
                replies: 3
            })
        );
        assert!(kept_up(&r));
        assert!(
            r.notes.contains(&"3 replies came in the 1.03 s after the schedule ended (the drain): served, and left out of served/s, which is over the step's own length".to_string()),
            "{:?}",
            r.notes
        );
    }

    #[test]
    fn a_closed_loop_served_what_it_sent_over_the_step_s_own_length() {
        // nginx -c 50 for 10 s: every request served, the last round 6 ms after the end.
        let t = snapshot(636_900, &[700; 100]);
        let duration = Duration::from_secs(10);
        let r = summarize(&StepInput {
            number: 1,
            model: LoadModel::Concurrency,
            value: 50.0,
            demanded_rate: None,
            duration,
            total: &t,
            series: &[],
            agents: vec![agent_input(&t, 1, 2, Duration::from_millis(10_006))],
            aborted: false,
            mark_lost: true,
            start_skew: None,
            ok_status: &StatusSet::default(),
            baseline_p50_ms: None,
        });
        assert_eq!((r.achieved_request_rate, r.ok_rate), (63_690.0, 63_690.0));
        assert_eq!(r.drain, None);
    }

    #[test]
    fn http_failures_read_as_failures_not_success() {
        // A rate-limited server: a third of its replies are 503, fast.
        let mut t = snapshot(200, &[1_000; 200]);
        t.counters.requests = 300;
        t.counters.replies = 300;
        t.counters.status[4] = 100;
        t.codes.add_count(503, 100);
        for _ in 0..100 {
            t.hist.unexpected.record(200).unwrap();
        }
        one_agent(&t, 3.0, 100.0, |r| {
            assert_eq!(r.ok, 200);
            assert_eq!(r.ok_rate, 66.667);
            assert_eq!(r.failed, 100);
            assert_eq!(r.failed_pct, 33.333);
            // autobench's errors: transport errors only.
            assert_eq!(r.errors_pct, 0.0);
            assert_eq!(r.server, Server::Failing);
            assert!(
                r.server_reasons[0]
                    .starts_with("33.3% of the requests due failed: 100 replies 503"),
                "{:?}",
                r.server_reasons
            );
            assert!(
                r.notes.iter().any(|n| n.contains("33% were 503")),
                "{:?}",
                r.notes
            );
            // The fast 503s are not mixed into the served latency.
            assert_eq!(r.latency_ms.p50, 1.0);
            assert_eq!(r.unexpected_latency_ms.p50, 0.2);
            let table = StepTable::new("h", LoadModel::Requests);
            let (row, head) = (table.row(r), table.header());
            let col = |name: &str| &row[head.iter().position(|h| h == name).unwrap()];
            assert_eq!(col("failed_pct"), "33.333");
            assert_eq!(col("ok_rate"), "66.667");
            assert_eq!(col("errors_h"), "0");
            assert_eq!(col("server"), "failing");
        });
    }

    #[test]
    fn requests_never_completed_count_in_the_latency_as_lower_bounds() {
        // 86 replies at 5 ms; 14 timed out after 1 s: the p50 is exact, p90 and up are not.
        let mut t = snapshot(86, &[5_000; 86]);
        t.counters.requests = 100;
        t.counters.given_up = 14;
        t.counters.record_error(ErrorClass::ClientTimeout);
        t.counters.errors[ErrorClass::ClientTimeout.index()] = 14;
        for _ in 0..14 {
            t.hist.latency.record(1_000_000).unwrap();
            t.hist.censored.record(1_000_000).unwrap();
        }
        one_agent(&t, 1.0, 100.0, |r| {
            let l = &r.latency_ms;
            assert!(l.censored);
            assert!((l.p50 - 5.0).abs() < 0.01, "{l:?}");
            assert!(l.p99 >= 1000.0, "{l:?}");
            assert_eq!(
                l.lower_bounds.names(),
                ["mean", "p90", "p99", "p999", "max"]
            );
            assert_eq!(r.failed, 14);
            let json = serde_json::to_value(r).unwrap();
            assert_eq!(json["latency_ms"]["censored"], true);
            assert_eq!(
                json["latency_ms"]["lower_bound"],
                serde_json::json!(["mean", "p90", "p99", "p999", "max"])
            );
            let table = StepTable::new("h", LoadModel::Requests);
            let (row, head) = (table.row(r), table.header());
            let at = head.iter().position(|h| h == "lower_bound").unwrap();
            assert_eq!(row[at], "mean p90 p99 p999 max");
        });
        // A given-up request younger than every reply leaves the percentiles below the top exact:
        // enough real latencies lie at or under them, whatever its true value.
        let mut t = snapshot(99, &[50_000; 99]);
        t.counters.given_up = 1;
        t.hist.latency.record(1_000).unwrap();
        t.hist.censored.record(1_000).unwrap();
        one_agent(&t, 1.0, 100.0, |r| {
            assert_eq!(r.latency_ms.lower_bounds.names(), ["mean", "p999", "max"]);
        });
    }

    #[test]
    fn short_step_reports_its_reply_rate_not_zero() {
        // 100 replies in 0.5 s: no full 1 s sample.
        let t = snapshot(100, &[1_000; 100]);
        one_agent(&t, 0.5, 200.0, |r| {
            assert_eq!(r.reply_rate.min, 200.0);
            assert_eq!(r.reply_rate.avg, 200.0);
            assert_eq!(r.reply_rate.max, 200.0);
        });
    }

    #[test]
    fn generator_failures_are_not_the_targets() {
        let mut t = snapshot(100, &[1_000; 100]);
        t.counters.unsent = 900;
        t.counters.errors[ErrorClass::FdUnavailable.index()] = 900;
        one_agent(&t, 1.0, 1000.0, |r| {
            assert_eq!(r.errors_pct, 0.0);
            assert_eq!(r.failed_pct, 0.0);
            assert_eq!(r.due, 100);
            assert_eq!(r.trust, Verdict::Invalid);
            assert_eq!(r.server, Server::Ok);
        });
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
    fn summary_is_computed_from_the_merge() {
        let a = snapshot(100, &[1_000; 100]);
        let b = snapshot(100, &[3_000; 100]);
        let mut total = a.clone();
        total.add(&b);
        let series = [IntervalSample {
            length: Duration::from_secs(1),
            replies: 100,
        }; 2];
        let agent = |name: &str, s: &Snapshot| AgentInput {
            name: name.to_string(),
            ..agent_input(s, 1, 2, Duration::from_secs(2))
        };
        let ok = StatusSet::default();
        let input = StepInput {
            number: 1,
            model: LoadModel::Requests,
            value: 100.0,
            demanded_rate: Some(100.0),
            duration: Duration::from_secs(2),
            total: &total,
            series: &series,
            agents: vec![agent("a", &a), agent("b", &b)],
            aborted: false,
            mark_lost: true,
            start_skew: Some(Duration::from_micros(1500)),
            ok_status: &ok,
            baseline_p50_ms: None,
        };
        let r = summarize(&input);
        assert_eq!(r.start_skew_ms, Some(1.5));
        assert_eq!(r.requests, 200);
        assert_eq!(r.achieved_request_rate, 100.0);
        assert!(
            (r.latency_ms.mean - 2.0).abs() < 0.002,
            "{}",
            r.latency_ms.mean
        );
        assert_eq!(r.net_io_kb_s, 100.0);
        assert_eq!(r.reply_rate.avg, 100.0);
        assert_eq!(r.trust, Verdict::Valid);
        assert_eq!(r.agents.len(), 2);
        assert_eq!(r.agents[1].requests, 100);
        assert!(r.agents[1].latency_ms.p50 > r.agents[0].latency_ms.p50);
        assert_eq!(r.status.get("2xx"), 200);
        let table = StepTable::new("h", LoadModel::Requests);
        let (row, head) = (table.row(&r), table.header());
        assert_eq!(row.len(), head.len());
        assert_eq!(row[0], "100");
        let trust = head.iter().position(|h| h == "trust").unwrap();
        assert_eq!(row[trust], "valid");
        assert_eq!(row[trust + 1], "ok");

        // The closed model's step value is a connection count: fewer established is named.
        let mut short = total.clone();
        short.counters.connections = 30;
        let r = summarize(&StepInput {
            model: LoadModel::Concurrency,
            value: 50.0,
            demanded_rate: None,
            total: &short,
            agents: vec![agent("a", &a)],
            ..input
        });
        assert_eq!(r.trust, Verdict::Degraded, "{:?}", r.reasons);
        assert!(
            r.reasons[0].starts_with("only 30 of 50 connections"),
            "{:?}",
            r.reasons
        );
    }

    #[test]
    fn cpu_share_is_of_the_cores_the_threads_can_use() {
        // 2 CPU-seconds a second: all of 2 threads, or of 4 threads on 2 cores (saturated either
        // way); half of 4 threads on 8 cores.
        let second = Duration::from_secs(1);
        let used = 2_000_000_000;
        let s = snapshot(10, &[1_000; 10]);
        let mut total = s.clone();
        total.cpu_ns = used;
        let series = [IntervalSample {
            length: second,
            replies: 10,
        }];
        for (threads, cores, pct) in [(2, 2, 100.0), (4, 2, 100.0), (4, 8, 50.0)] {
            let r = summarize(&StepInput {
                number: 1,
                model: LoadModel::Concurrency,
                value: 4.0,
                demanded_rate: None,
                duration: second,
                total: &total,
                series: &series,
                agents: vec![AgentInput {
                    cpu_ns: used,
                    ..agent_input(&s, threads, cores, second)
                }],
                aborted: false,
                mark_lost: true,
                start_skew: None,
                ok_status: &StatusSet::default(),
                baseline_p50_ms: None,
            });
            assert_eq!(r.generator.cpu_pct, pct, "{threads} threads, {cores} cores");
            assert_eq!(r.agents[0].cpu_pct, pct);
        }
    }

    #[test]
    fn an_agent_without_arrivals_read_as_a_saturated_generator() {
        // 50 µs of CPU over the 40 µs its idle workers took: 125% of one thread, "degraded" though
        // the agent sent nothing. Over the 1 s step it is what it is: next to nothing.
        let second = Duration::from_secs(1);
        let s = snapshot(10, &[1_000; 10]);
        let idle = Snapshot::default();
        let r = summarize(&StepInput {
            number: 1,
            model: LoadModel::Requests,
            value: 10.0,
            demanded_rate: Some(10.0),
            duration: second,
            total: &s,
            series: &[],
            agents: vec![
                agent_input(&s, 1, 1, second),
                AgentInput {
                    cpu_ns: 50_000,
                    ..agent_input(&idle, 1, 1, Duration::from_micros(40))
                },
            ],
            aborted: false,
            mark_lost: true,
            start_skew: None,
            ok_status: &StatusSet::default(),
            baseline_p50_ms: None,
        });
        assert!(r.agents[1].cpu_pct < 1.0, "{}", r.agents[1].cpu_pct);
        assert!(
            !r.reasons.iter().any(|w| w.contains("CPU")),
            "{:?}",
            r.reasons
        );
    }

    #[test]
    fn header_keeps_autobench_names_in_order() {
        let h = StepTable::new("web1", LoadModel::Connections).header();
        assert_eq!(
            &h[..10],
            &[
                "dem_req_rate",
                "req_rate_web1",
                "con_rate_web1",
                "min_rep_rate_web1",
                "avg_rep_rate_web1",
                "max_rep_rate_web1",
                "stddev_rep_rate_web1",
                "resp_time_web1",
                "net_io_web1",
                "errors_web1"
            ]
        );
        assert!(h.contains(&"err_addr_unavailable".to_string()));
        assert_eq!(h[10..12], ["ok_rate", "failed_pct"]);
        assert_eq!(h.last().unwrap(), "server_reason");
    }

    /// A step of the requests model at `rate` that served `ok_rate` with p99 `p99`.
    fn ramp_step(step: u32, rate: f64, ok_rate: f64, p99: f64, trust: Verdict) -> StepResult {
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
    fn the_run_says_how_far_the_target_kept_up() {
        let steps = vec![
            ramp_step(1, 100.0, 100.0, 2.0, Verdict::Valid),
            ramp_step(2, 200.0, 199.0, 2.1, Verdict::Valid),
            ramp_step(3, 400.0, 398.0, 9.3, Verdict::Valid),
            ramp_step(4, 500.0, 401.0, 3300.0, Verdict::Valid),
            ramp_step(5, 600.0, 400.0, 3300.0, Verdict::Valid),
        ];
        let s = summarize_run(&steps);
        assert_eq!(s.kept_up_to, Some(400.0));
        assert_eq!(s.kept_up_step, Some(3));
        assert_eq!(s.beyond.as_ref().unwrap().step_value, 500.0);
        assert_eq!(
            s.answer,
            "knee at 500 req/s: 19.8% failed, p99 rose 1,651x (2.0 ms → 3.3 s), the served rate flattened (401/s, from 398/s a step before); it still served 400/s at 600 req/s; kept up to 400 req/s (p99 9.3 ms); at 500 req/s it served 401/s with p99 3.3 s, 19.8% failed; the served rate plateaued at 401/s from 400 req/s"
        );
        let knee = s.knee.as_ref().unwrap();
        assert_eq!((knee.step, knee.cause), (4, knee::KneeCause::Failures));
        assert_eq!(s.finding, Some(headline::Finding::Knee));
        assert_eq!(
            s.headline,
            "kept up to 400 req/s (p99 9.3 ms); broke at 500: 19.8% failed, p99 ×1,651 (3.3 s), served 401/s"
        );
        // A step the generator could not be trusted on does not count as kept up, nor as the
        // knee: the knee is the server's, where its service degraded.
        let mut untrusted = steps.clone();
        untrusted[2].trust = Verdict::Invalid;
        untrusted[2].generator_bound = true;
        let s = summarize_run(&untrusted);
        assert_eq!(s.kept_up_to, Some(200.0));
        assert_eq!(s.untrusted_steps, [3]);
        assert_eq!(s.knee.as_ref().map(|k| k.step_value), Some(500.0));
        assert_eq!(s.beyond.as_ref().map(|b| b.step_value), Some(500.0));
        // Every step kept up: the limit is beyond the ramp; none did: null.
        let s = summarize_run(&steps[..2]);
        assert!(
            s.answer
                .ends_with("every step kept up, so the limit lies beyond this ramp")
        );
        let s = summarize_run(&steps[3..]);
        assert_eq!(s.kept_up_to, None);
        assert!(
            s.answer.starts_with("knee at 500 req/s: 19.8% failed; ")
                && s.answer.contains("; kept up with no step; at 500 req/s"),
            "{}",
            s.answer
        );
        let json = serde_json::to_value(&s).unwrap();
        assert!(json["kept_up_to"].is_null());
        // An interrupted step is said to be one, not blamed on the generator; a degraded step kept up
        // with says its doubt.
        let mut stopped = steps[..3].to_vec();
        stopped[1].trust = Verdict::Degraded;
        stopped[1].reasons = vec!["lag p99 36.6 ms: 2172 requests left more than 1 ms late".into()];
        stopped[2].trust = Verdict::Invalid;
        stopped[2].aborted = true;
        let s = summarize_run(&stopped);
        assert_eq!(
            s.answer,
            "kept up to 200 req/s (p99 2.1 ms; trust degraded there: lag p99 36.6 ms: 2172 requests left more than 1 ms late); at 400 req/s it served 398/s with p99 9.3 ms (the step was interrupted before it finished)"
        );
        // The connections model's step is in conn/s, the table's rate in req/s: both are said.
        let mut conns = steps[..2].to_vec();
        for r in &mut conns {
            r.model = "connections".into();
            r.demanded_rate = Some(r.step_value * 10.0);
        }
        let s = summarize_run(&conns);
        assert!(
            s.answer
                .starts_with("kept up to 200 conn/s = 2,000 req/s (p99 "),
            "{}",
            s.answer
        );
        // A server that answered only errors has no p99 to report, not one of 0 ms.
        let mut dead = ramp_step(1, 100.0, 0.0, 0.0, Verdict::Valid);
        dead.latency_ms = LatencyStats::default();
        // Nor a knee: nothing answered at any step (a wrong port read "knee at 100 conn/s").
        let s = summarize_run(&[dead]);
        assert_eq!(
            s.answer,
            "kept up with no step; at 100 req/s it served nothing, 100% failed"
        );
        assert_eq!(s.finding, Some(headline::Finding::NothingAnswered));
        assert_eq!(s.headline, "nothing answered: 100% failed at every step");
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
    fn errors_are_noted_with_their_first_message_not_only_counted() {
        let mut total = Snapshot::default();
        total.counters.requests = 10;
        for _ in 0..10 {
            total.counters.record_error(ErrorClass::Other);
        }
        total.messages.keep(ErrorClass::Other, || {
            "TLS: certificate signed by unknown issuer: use --insecure for a self-signed target"
                .into()
        });
        // A message whose class counted nothing (it cannot happen, but never a note of 0).
        total
            .messages
            .keep(ErrorClass::ConnReset, || "connection reset by peer".into());
        let r = summarize(&StepInput {
            number: 1,
            model: LoadModel::Connections,
            value: 10.0,
            demanded_rate: Some(10.0),
            duration: Duration::from_secs(1),
            total: &total,
            series: &[],
            agents: vec![],
            aborted: false,
            mark_lost: true,
            start_skew: None,
            ok_status: &StatusSet::default(),
            baseline_p50_ms: None,
        });
        assert!(
            r.notes.contains(&"10 other errors, the first: TLS: certificate signed by unknown issuer: use --insecure for a self-signed target".to_string()),
            "{:?}",
            r.notes
        );
        assert!(
            !r.notes.iter().any(|n| n.contains("conn-reset")),
            "{:?}",
            r.notes
        );
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(
            json["error_messages"]["other"],
            "TLS: certificate signed by unknown issuer: use --insecure for a self-signed target"
        );
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
