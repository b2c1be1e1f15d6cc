//! The result schema: one `StepResult` per step, computed only from merged data, and its autobench-compatible
//! table row. Everything a report says is derived here, once, so TSV, JSON and the terminal agree.
use std::time::Duration;

use serde::ser::{Serialize, SerializeMap, Serializer};

use crate::histogram::{Histogram, us_to_ms};
use crate::metrics::{Counters, ErrorClass, FirstErrors, STATUS_CLASSES, Snapshot};
use crate::plan::LoadModel;
use crate::verdict::{self, Facts, Verdict};

/// `run.json`'s schema name; bump it when a field changes meaning.
pub const RUN_SCHEMA: &str = "stampede.run/1";

/// Latency statistics in milliseconds, from one merged histogram.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct LatencyStats {
    pub mean: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
}

impl LatencyStats {
    pub fn of(h: &Histogram<u64>) -> LatencyStats {
        if h.is_empty() {
            return LatencyStats::default();
        }
        let q = |q: f64| us_to_ms(h.value_at_quantile(q));
        LatencyStats {
            mean: round3(h.mean() / 1000.0),
            p50: q(0.5),
            p90: q(0.9),
            p99: q(0.99),
            p999: q(0.999),
            max: us_to_ms(h.max()),
        }
    }
}

/// Statistics over the 1 s reply-rate samples (autobench's min/avg/max/stddev_rep_rate).
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct RateStats {
    pub min: f64,
    pub avg: f64,
    pub max: f64,
    pub stddev: f64,
}

impl RateStats {
    pub fn of(samples: &[f64]) -> RateStats {
        if samples.is_empty() {
            return RateStats::default();
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

/// Named counts that keep their order in JSON.
#[derive(Debug, Clone, PartialEq)]
pub struct Counts(pub Vec<(&'static str, u64)>);

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

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
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
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct AgentStep {
    pub agent: String,
    pub threads: u32,
    pub requests: u64,
    pub replies: u64,
    pub errors: u64,
    pub cpu_pct: f64,
    pub latency_ms: LatencyStats,
    /// How long after the agreed start instant its first request left (coordinator's clock).
    pub start_delay_ms: Option<f64>,
    /// Its clock minus the coordinator's, and the round trip that was measured over (error <= rtt/2).
    pub clock_offset_ms: f64,
    pub rtt_ms: f64,
    pub lost: bool,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct StepResult {
    pub step: u32,
    pub model: &'static str,
    /// The step's value as planned: conn/s, req/s, or connections for the closed model.
    pub step_value: f64,
    /// Requests per second the plan demands; null for the closed model.
    pub demanded_rate: Option<f64>,
    pub duration_s: f64,
    pub requests: u64,
    pub replies: u64,
    pub connections: u64,
    /// Requests that were due but never written (connect failed, or expired waiting for a connection).
    pub unsent: u64,
    pub achieved_request_rate: f64,
    pub connection_rate: f64,
    pub reply_rate: RateStats,
    pub bytes_in: u64,
    pub bytes_out: u64,
    pub net_io_kb_s: f64,
    pub status: Counts,
    pub errors: Counts,
    /// Errors as a percent of attempts (requests sent plus requests due but never sent).
    pub errors_pct: f64,
    /// Each error class's first message, in words: `{"other": "TLS: certificate signed by ..."}`.
    pub error_messages: FirstErrors,
    pub latency_ms: LatencyStats,
    pub connect_ms: LatencyStats,
    pub ttfb_ms: LatencyStats,
    pub reply_rate_series: Vec<f64>,
    pub generator: Generator,
    pub verdict: Verdict,
    pub reasons: Vec<String>,
    pub notes: Vec<String>,
    pub aborted: bool,
    /// Latest minus earliest first request over the agents, ms (0 for one agent).
    pub start_skew_ms: Option<f64>,
    pub agents: Vec<AgentStep>,
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
    pub step: u32,
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

/// Summarises a merged step; percentiles and rates are computed here and only here.
pub fn summarize(input: &StepInput<'_>) -> StepResult {
    let t = input.total;
    let c = &t.counters;
    let secs = input.duration.as_secs_f64().max(1e-9);
    let series: Vec<f64> = input
        .series
        .iter()
        .map(|s| round3(s.replies as f64 / s.length.as_secs_f64().max(1e-9)))
        .collect();
    let agents: Vec<AgentStep> = input
        .agents
        .iter()
        .map(|a| AgentStep {
            agent: a.name.clone(),
            threads: a.threads,
            requests: a.counters.requests,
            replies: a.counters.replies,
            errors: a.counters.errors_total(),
            cpu_pct: cpu_pct(a.cpu_ns, a.wall, a.threads.min(a.cores)),
            latency_ms: a.latency_ms,
            start_delay_ms: a.start_delay.map(|d| round3(d.as_secs_f64() * 1000.0)),
            clock_offset_ms: round3(a.clock_offset_ns as f64 / 1e6),
            rtt_ms: round3(a.rtt.as_secs_f64() * 1000.0),
            lost: a.lost,
        })
        .collect();
    let busiest = agents.iter().map(|a| a.cpu_pct).fold(0.0, f64::max);
    let achieved = round3(c.requests as f64 / secs);
    let lag = &t.hist.lag;
    let late = lag.count_between(1001, crate::histogram::HIGHEST_US);
    let generator = Generator {
        cpu_pct: busiest,
        lag_p99_ms: if lag.is_empty() {
            0.0
        } else {
            us_to_ms(lag.value_at_quantile(0.99))
        },
        lag_max_ms: us_to_ms(lag.max()),
        late_1ms: late,
        waited: c.waited,
        wait_p99_ms: if t.hist.wait.is_empty() {
            0.0
        } else {
            us_to_ms(t.hist.wait.value_at_quantile(0.99))
        },
        threads: input.agents.iter().map(|a| a.threads).sum(),
    };
    let lost_agents = input
        .agents
        .iter()
        .filter(|a| a.lost && input.mark_lost)
        .map(|a| a.name.clone())
        .collect();
    let judgement = verdict::judge(&Facts {
        demanded_rate: input.demanded_rate,
        achieved_rate: achieved,
        cpu_pct: busiest,
        lag_p99_ms: generator.lag_p99_ms,
        late,
        counters: *c,
        aborted: input.aborted,
        lost_agents,
        concurrency: (input.model == LoadModel::Concurrency).then_some(input.value as u64),
    });
    let attempts = c.attempts();
    StepResult {
        step: input.step,
        model: input.model.name(),
        step_value: input.value,
        demanded_rate: input.demanded_rate,
        duration_s: round3(secs),
        requests: c.requests,
        replies: c.replies,
        connections: c.connections,
        unsent: c.unsent,
        achieved_request_rate: achieved,
        connection_rate: round3(c.connections as f64 / secs),
        reply_rate: RateStats::of(&series),
        bytes_in: c.bytes_in,
        bytes_out: c.bytes_out,
        net_io_kb_s: round3((c.bytes_in + c.bytes_out) as f64 / 1024.0 / secs),
        status: Counts(STATUS_CLASSES.iter().copied().zip(c.status).collect()),
        errors: Counts(
            ErrorClass::ALL
                .iter()
                .map(|e| (e.name(), c.error(*e)))
                .collect(),
        ),
        errors_pct: if attempts == 0 {
            0.0
        } else {
            round3(c.errors_total() as f64 * 100.0 / attempts as f64)
        },
        error_messages: t.messages.clone(),
        latency_ms: LatencyStats::of(&t.hist.latency),
        connect_ms: LatencyStats::of(&t.hist.connect),
        ttfb_ms: LatencyStats::of(&t.hist.ttfb),
        reply_rate_series: series,
        generator,
        verdict: judgement.verdict,
        reasons: judgement.reasons,
        notes: [judgement.notes, error_notes(c, &t.messages)].concat(),
        aborted: input.aborted,
        start_skew_ms: input.start_skew.map(|d| round3(d.as_secs_f64() * 1000.0)),
        agents,
    }
}

/// The table's header: autobench's columns first (with the host suffix), then stampede's.
pub fn table_header(host: &str, model: LoadModel) -> Vec<String> {
    // The closed model has no demanded rate; its x axis is the connection count.
    let first = if model == LoadModel::Concurrency {
        "connections"
    } else {
        "dem_req_rate"
    };
    let mut h = vec![first.to_string()];
    for col in [
        "req_rate",
        "con_rate",
        "min_rep_rate",
        "avg_rep_rate",
        "max_rep_rate",
        "stddev_rep_rate",
        "resp_time",
        "net_io",
        "errors",
    ] {
        h.push(format!("{col}_{host}"));
    }
    for col in ["p50_ms", "p90_ms", "p99_ms", "p999_ms", "max_ms"] {
        h.push(col.to_string());
    }
    for class in STATUS_CLASSES {
        h.push(format!("status_{class}"));
    }
    for e in ErrorClass::ALL {
        h.push(e.column());
    }
    for col in ["gen_cpu_pct", "lag_p99_ms", "start_skew_ms", "verdict"] {
        h.push(col.to_string());
    }
    h
}

/// One step as a table row, matching [`table_header`].
pub fn table_row(r: &StepResult) -> Vec<String> {
    let f = |v: f64| {
        let s = format!("{v:.3}");
        let s = s.trim_end_matches('0').trim_end_matches('.');
        if s.is_empty() || s == "-0" {
            "0".to_string()
        } else {
            s.to_string()
        }
    };
    let mut row = vec![f(r.demanded_rate.unwrap_or(r.step_value))];
    for v in [
        r.achieved_request_rate,
        r.connection_rate,
        r.reply_rate.min,
        r.reply_rate.avg,
        r.reply_rate.max,
        r.reply_rate.stddev,
        r.latency_ms.mean,
        r.net_io_kb_s,
        r.errors_pct,
        r.latency_ms.p50,
        r.latency_ms.p90,
        r.latency_ms.p99,
        r.latency_ms.p999,
        r.latency_ms.max,
    ] {
        row.push(f(v));
    }
    row.extend(r.status.0.iter().map(|(_, v)| v.to_string()));
    row.extend(r.errors.0.iter().map(|(_, v)| v.to_string()));
    row.push(f(r.generator.cpu_pct));
    row.push(f(r.generator.lag_p99_ms));
    row.push(r.start_skew_ms.map_or(String::new(), f));
    row.push(r.verdict.name().to_string());
    row
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::histogram;

    fn snapshot(requests: u64, lat_us: &[u64]) -> Snapshot {
        let mut s = Snapshot::default();
        s.counters.requests = requests;
        s.counters.replies = requests;
        s.counters.connections = requests;
        s.counters.status[1] = requests;
        s.counters.bytes_in = 1024 * requests;
        for v in lat_us {
            s.hist.latency.record(*v).unwrap();
        }
        s
    }

    #[test]
    fn rate_stats_over_samples() {
        let r = RateStats::of(&[10.0, 20.0, 30.0]);
        assert_eq!((r.min, r.avg, r.max), (10.0, 20.0, 30.0));
        assert!((r.stddev - 8.165).abs() < 0.001);
        assert_eq!(RateStats::of(&[]), RateStats::default());
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
            threads: 1,
            cores: 2,
            wall: Duration::from_secs(2),
            counters: s.counters,
            cpu_ns: s.cpu_ns,
            latency_ms: LatencyStats::of(&s.hist.latency),
            start_delay: None,
            lost: false,
            clock_offset_ns: 0,
            rtt: Duration::ZERO,
        };
        let input = StepInput {
            step: 0,
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
        assert_eq!(r.verdict, Verdict::Valid);
        assert_eq!(r.agents.len(), 2);
        assert_eq!(r.agents[1].requests, 100);
        assert!(r.agents[1].latency_ms.p50 > r.agents[0].latency_ms.p50);
        assert_eq!(r.status.get("2xx"), 200);
        let row = table_row(&r);
        assert_eq!(row.len(), table_header("h", LoadModel::Requests).len());
        assert_eq!(row[0], "100");
        assert_eq!(row.last().unwrap(), "valid");

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
        assert_eq!(r.verdict, Verdict::Degraded, "{:?}", r.reasons);
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
                step: 0,
                model: LoadModel::Concurrency,
                value: 4.0,
                demanded_rate: None,
                duration: second,
                total: &total,
                series: &series,
                agents: vec![AgentInput {
                    name: "a".into(),
                    threads,
                    cores,
                    wall: second,
                    counters: s.counters,
                    cpu_ns: used,
                    latency_ms: LatencyStats::of(&s.hist.latency),
                    start_delay: None,
                    lost: false,
                    clock_offset_ns: 0,
                    rtt: Duration::ZERO,
                }],
                aborted: false,
                mark_lost: true,
                start_skew: None,
            });
            assert_eq!(r.generator.cpu_pct, pct, "{threads} threads, {cores} cores");
            assert_eq!(r.agents[0].cpu_pct, pct);
        }
    }

    #[test]
    fn header_keeps_autobench_names_in_order() {
        let h = table_header("web1", LoadModel::Connections);
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
        assert_eq!(h.last().unwrap(), "verdict");
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
            step: 0,
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
}
