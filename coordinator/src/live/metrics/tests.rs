//! Tests of /metrics (`metrics.rs`): the grid, the exposition, counters against run.json, the
//! warmup.
use super::*;
use proptest::prelude::*;
use results::events::{AgentShare, Interval, SCHEMA, StepStart};
use results::run_file::RunFile;

const GOLDEN: &str = include_str!("../../../../results/tests/golden/run.json");

/// The golden run (a real demo run of six steps), its third step given failures of two
/// classes and a second agent.
fn golden() -> RunFile {
    let mut run = RunFile::parse(GOLDEN, std::path::Path::new("run.json")).unwrap();
    let s = &mut run.steps[2];
    s.errors.0 = ErrorClass::ALL
        .iter()
        .map(|c| {
            let n = match c {
                ErrorClass::ConnReset => 4,
                ErrorClass::ClientTimeout => 2,
                _ => 0,
            };
            (c.name().to_string(), n)
        })
        .collect();
    s.failed = 6;
    let mut other = s.agents[0].clone();
    other.agent = "b:7000".into();
    other.requests = 50;
    other.cpu_pct = 40.0;
    s.agents.push(other);
    run
}

/// A run fed event by event, to Live and to the metrics, as live/mod.rs feeds them.
struct Run {
    metrics: Metrics,
    live: Live,
    id: u64,
}

impl Run {
    fn new(targets: &[&str]) -> Run {
        let mut r = Run {
            metrics: Metrics::new(),
            live: Live::default(),
            id: 0,
        };
        r.feed(Event::Begin {
            schema: SCHEMA.into(),
            targets: targets.iter().map(|l| l.to_string()).collect(),
            search: false,
            total_s: 18.0,
            started_at: "2026-12-05T08:00:00.000Z".into(),
        });
        for target in 0..targets.len() {
            let mut run = golden();
            run.steps.clear();
            r.feed(Event::Run {
                target,
                run: Box::new(run),
            });
        }
        r
    }

    fn feed(&mut self, event: Event) {
        self.id += 1;
        let line = Line { id: self.id, event };
        self.live.apply(&line).unwrap();
        self.metrics.apply(&line, &self.live);
    }

    fn start(&mut self, target: usize, s: &StepResult) {
        self.feed(Event::StepStart {
            target,
            step: StepStart {
                step: s.number,
                steps: Some(6),
                role: None,
                value: s.step_value,
                demanded: s.demanded_rate,
                length_s: s.duration_s,
                agents: s
                    .agents
                    .iter()
                    .map(|a| AgentShare {
                        agent: a.agent.clone(),
                        share: 1.0,
                    })
                    .collect(),
            },
        });
    }

    /// A merged second of `sent` requests, `ok` of them served and `failed` failed.
    fn second(&mut self, target: usize, step: u32, sent: u64, ok: u64, failed: u64) {
        self.feed(Event::Interval {
            target,
            interval: Interval {
                step,
                at_s: 0.0,
                length_s: 1.0,
                sent,
                ok,
                failed,
                p50_ms: None,
                p99_ms: None,
                sent_so_far: sent,
                agents_sent: vec![sent],
                merged_unix_ms: 0,
            },
        });
    }

    fn written(&mut self, target: usize, s: &StepResult) {
        self.feed(Event::Step {
            target,
            step: Box::new(s.clone()),
            summary: None,
        });
    }

    /// Every step of the golden run: started, two seconds that undercount it, written.
    fn whole(&mut self, target: usize) {
        for s in golden().steps {
            self.start(target, &s);
            self.second(target, s.number, s.requests / 3, s.ok / 3, 0);
            self.second(target, s.number, s.requests / 3, s.ok / 3, 1);
            self.written(target, &s);
        }
    }

    fn samples(&self) -> Vec<Sample> {
        parse(&self.metrics.encode())
    }
}

#[derive(Debug, Clone)]
struct Sample {
    name: String,
    labels: Vec<(String, String)>,
    value: f64,
}

impl Sample {
    fn label(&self, k: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.as_str())
    }
}

/// The exposition read as OpenMetrics text asks: `# HELP`/`# TYPE`/`# UNIT` lines, samples
/// `name{k="v",...} value`, and `# EOF` last. Anything else fails the test.
fn parse(text: &str) -> Vec<Sample> {
    assert!(text.ends_with("# EOF\n"), "no EOF at the end:\n{text}");
    let body = &text[..text.len() - "# EOF\n".len()];
    assert!(!body.contains("# EOF"), "EOF before the end");
    let mut out = Vec::new();
    let mut family = String::new();
    for line in body.lines() {
        if let Some(meta) = line.strip_prefix("# ") {
            let mut words = meta.splitn(3, ' ');
            let (kind, name) = (words.next().unwrap(), words.next().unwrap());
            assert!(["HELP", "TYPE", "UNIT"].contains(&kind), "{line}");
            family = name.to_string();
            continue;
        }
        let (series, value) = line.rsplit_once(' ').expect(line);
        let (name, labels) = match series.split_once('{') {
            Some((name, rest)) => {
                let inner = rest.strip_suffix('}').expect(line);
                let labels = inner
                    .split(',')
                    .map(|kv| {
                        let (k, v) = kv.split_once('=').expect(line);
                        let v = v.strip_prefix('"').and_then(|v| v.strip_suffix('"'));
                        (k.to_string(), v.expect(line).to_string())
                    })
                    .collect();
                (name, labels)
            }
            None => (series, Vec::new()),
        };
        assert!(
            name.starts_with(&family),
            "{name} outside its family {family}"
        );
        out.push(Sample {
            name: name.to_string(),
            labels,
            value: value.parse().expect(line),
        });
    }
    out
}

/// The value of the series `name` with exactly `labels`.
fn value(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    samples
        .iter()
        .find(|s| {
            s.name == name
                && s.labels.len() == labels.len()
                && labels.iter().all(|(k, v)| s.label(k) == Some(v))
        })
        .map(|s| s.value)
}

fn sum(samples: &[Sample], name: &str) -> f64 {
    samples
        .iter()
        .filter(|s| s.name == name)
        .map(|s| s.value)
        .sum()
}

/// A step's `_bucket` series as (le, cumulative count), in the order written.
fn buckets(samples: &[Sample], step: &str) -> Vec<(f64, f64)> {
    samples
        .iter()
        .filter(|s| s.name == "stampede_latency_seconds_bucket" && s.label("step") == Some(step))
        .map(|s| {
            let le = s.label("le").unwrap();
            let le = if le == "+Inf" {
                f64::INFINITY
            } else {
                le.parse().unwrap()
            };
            (le, s.value)
        })
        .collect()
}

/// Prometheus's `histogram_quantile` over classic buckets, as `bucketQuantile` in
/// promql/quantile.go of Prometheus 2.42 (Debian's) computes it: sorted by `le`, `+Inf` last or
/// NaN, equal `le`s coalesced, made monotonic, the rank's bucket found by binary search, and
/// linear interpolation inside it from the bucket below's `le` (0 below the first).
fn bucket_quantile(q: f64, mut buckets: Vec<(f64, f64)>) -> f64 {
    if q.is_nan() {
        return f64::NAN;
    }
    if q < 0.0 {
        return f64::NEG_INFINITY;
    }
    if q > 1.0 {
        return f64::INFINITY;
    }
    buckets.sort_by(|a, b| a.0.partial_cmp(&b.0).unwrap());
    if buckets.last().is_none_or(|b| b.0 != f64::INFINITY) {
        return f64::NAN;
    }
    let mut merged: Vec<(f64, f64)> = Vec::new();
    for b in buckets {
        match merged.last_mut() {
            Some(last) if last.0 == b.0 => last.1 += b.1,
            _ => merged.push(b),
        }
    }
    let mut max = merged[0].1;
    for b in &mut merged[1..] {
        if b.1 > max {
            max = b.1;
        } else {
            b.1 = max;
        }
    }
    if merged.len() < 2 {
        return f64::NAN;
    }
    let observations = merged.last().unwrap().1;
    if observations == 0.0 {
        return f64::NAN;
    }
    let mut rank = q * observations;
    // sort.Search over the buckets but the last.
    let n = merged.len() - 1;
    let b = merged[..n].partition_point(|b| b.1 < rank);
    if b == n {
        return merged[n - 1].0;
    }
    if b == 0 && merged[0].0 <= 0.0 {
        return merged[0].0;
    }
    let (mut start, end, mut count) = (0.0, merged[b].0, merged[b].1);
    if b > 0 {
        start = merged[b - 1].0;
        count -= merged[b - 1].1;
        rank -= merged[b - 1].1;
    }
    start + (end - start) * (rank / count)
}

#[test]
fn the_bound_is_one_grid_bucket_and_every_value_has_its_bucket() {
    let ratio = (1.0 / f64::from(PER_OCTAVE)).exp2();
    assert!((QUANTILE_BOUND - (ratio - 1.0)).abs() < 1e-15);
    for v in (1..5000).chain([3_600_000_000, 1 << 20, (1 << 20) + 1]) {
        let i = grid_index(v);
        assert!(
            edge_us(i - 1) < v as f64 && v as f64 <= edge_us(i),
            "{v} in {i}"
        );
    }
}

#[test]
fn the_exposition_is_openmetrics_and_every_histogram_is_cumulative_up_to_its_count() {
    let mut r = Run::new(&[""]);
    for s in golden().steps {
        let mut h = shared::histogram::new();
        h.record_n((s.latency_ms.p50 * 1000.0) as u64, 90).unwrap();
        h.record_n((s.latency_ms.p99 * 1000.0) as u64, 9).unwrap();
        h.record((s.latency_ms.max * 1000.0) as u64).unwrap();
        r.start(0, &s);
        r.metrics.add_latency(0, s.number, &h);
    }
    let text = r.metrics.encode();
    let samples = parse(&text);
    for step in 1..=6 {
        let step = step.to_string();
        let b = buckets(&samples, &step);
        assert!(b.len() >= 4, "{b:?}");
        assert!(b.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1));
        assert_eq!(
            b[0].1, 0.0,
            "the lowest bucket's lower edge is listed, empty"
        );
        let count = value(
            &samples,
            "stampede_latency_seconds_count",
            &[("step", &step)],
        );
        assert_eq!(b.last().unwrap(), &(f64::INFINITY, 100.0));
        assert_eq!(count, Some(100.0));
    }
    assert!(text.contains("# TYPE stampede_latency_seconds histogram\n"));
    assert!(text.contains("# UNIT stampede_latency_seconds seconds\n"));
    assert!(text.contains("# TYPE stampede_requests counter\n"));
    assert!(
        !text.contains("target="),
        "a run of one target carries no target label"
    );
}

#[test]
fn step_counters_grow_by_the_seconds_and_end_at_run_json_s_figures() {
    let steps = golden().steps;
    let mut r = Run::new(&[""]);
    r.start(0, &steps[0]);
    r.second(0, 1, 30, 29, 1);
    r.second(0, 1, 33, 33, 0);
    let m = r.samples();
    assert_eq!(
        value(&m, "stampede_requests_total", &[("step", "1")]),
        Some(63.0)
    );
    assert_eq!(
        value(&m, "stampede_served_total", &[("step", "1")]),
        Some(62.0)
    );
    assert_eq!(
        value(&m, "stampede_failed_total", &[("step", "1")]),
        Some(1.0)
    );
    assert_eq!(
        value(&m, "stampede_step_final", &[("step", "1")]),
        Some(0.0)
    );
    assert_eq!(value(&m, "stampede_step", &[]), Some(1.0));
    assert_eq!(value(&m, "stampede_steps_planned", &[]), Some(6.0));
    assert_eq!(
        value(&m, "stampede_demanded_requests_per_second", &[]),
        steps[0].demanded_rate
    );
    assert_eq!(
        value(&m, "stampede_sent_requests_per_second", &[]),
        Some(33.0)
    );
    let embedded = [("agent", "embedded")];
    assert_eq!(
        value(&m, "stampede_agent_requests_total", &embedded),
        Some(33.0)
    );
    assert_eq!(
        value(&m, "stampede_generator_cpu_ratio", &[]),
        None,
        "none written yet"
    );

    r.written(0, &steps[0]);
    for s in &steps[1..] {
        r.start(0, s);
        r.second(0, s.number, 7, 7, 0);
        r.written(0, s);
    }
    r.feed(Event::Finished { report: None });
    let m = r.samples();
    let total: u64 = steps.iter().map(|s| s.requests).sum();
    assert_eq!(sum(&m, "stampede_requests_total"), total as f64);
    for s in &steps {
        let n = s.number.to_string();
        let step = [("step", n.as_str())];
        assert_eq!(
            value(&m, "stampede_requests_total", &step),
            Some(s.requests as f64)
        );
        assert_eq!(value(&m, "stampede_served_total", &step), Some(s.ok as f64));
        assert_eq!(
            value(&m, "stampede_failed_total", &step),
            Some(s.failed as f64)
        );
        assert_eq!(value(&m, "stampede_step_final", &step), Some(1.0));
    }
    let last = steps.last().unwrap();
    assert_eq!(
        value(&m, "stampede_generator_cpu_ratio", &[]),
        Some(last.generator.cpu_pct / 100.0)
    );
    assert_eq!(
        value(&m, "stampede_generator_lag_p99_seconds", &[]),
        Some(last.generator.lag_p99_ms / 1000.0)
    );
    let agent_total: u64 = steps.iter().map(|s| s.agents[0].requests).sum();
    assert_eq!(
        value(&m, "stampede_agent_requests_total", &embedded),
        Some(agent_total as f64)
    );
    assert_eq!(value(&m, "stampede_run_finished", &[]), Some(1.0));
}

#[test]
fn failures_by_class_and_agents_come_with_their_step_and_targets_are_labelled() {
    let mut r = Run::new(&["a", "b"]);
    r.whole(0);
    r.whole(1);
    let m = r.samples();
    let steps = golden().steps;
    for target in ["a", "b"] {
        let reset = [("target", target), ("step", "3"), ("class", "conn-reset")];
        assert_eq!(value(&m, "stampede_errors_total", &reset), Some(4.0));
        let timeout = [
            ("target", target),
            ("step", "3"),
            ("class", "client-timeout"),
        ];
        assert_eq!(value(&m, "stampede_errors_total", &timeout), Some(2.0));
        let other = [("target", target), ("agent", "b:7000")];
        assert_eq!(
            value(&m, "stampede_agent_requests_total", &other),
            Some(50.0)
        );
        assert_eq!(value(&m, "stampede_agent_cpu_ratio", &other), Some(0.4));
    }
    let classes = m
        .iter()
        .filter(|s| s.name == "stampede_errors_total")
        .count();
    assert_eq!(
        classes,
        2 * steps.len() * ErrorClass::COUNT,
        "every class, every step"
    );
    assert!(
        m.iter()
            .filter(|s| s.name != "stampede_run_finished")
            .all(|s| s.label("target").is_some())
    );
    let total: u64 = steps.iter().map(|s| s.requests).sum();
    assert_eq!(sum(&m, "stampede_requests_total"), 2.0 * total as f64);
}

#[test]
fn the_warmup_is_in_no_counter_and_no_histogram() {
    let mut r = Run::new(&[""]);
    let mut warm = golden().steps[0].clone();
    warm.number = 0;
    r.start(0, &warm);
    r.second(0, 0, 50, 50, 0);
    let mut h = shared::histogram::new();
    h.record_n(900, 50).unwrap();
    r.metrics.add_latency(0, 0, &h);
    r.metrics.set_step_latency(0, 0, &h);
    r.feed(Event::Warmup {
        target: 0,
        step: Box::new(warm),
    });
    let m = r.samples();
    assert_eq!(value(&m, "stampede_step", &[]), Some(0.0));
    assert_eq!(
        value(&m, "stampede_sent_requests_per_second", &[]),
        Some(50.0)
    );
    assert!(m.iter().all(|s| s.label("step").is_none()), "{m:?}");
    assert_eq!(sum(&m, "stampede_agent_requests_total"), 0.0);
}

#[test]
fn a_step_s_whole_latency_replaces_its_seconds() {
    let s = golden().steps[0].clone();
    let mut r = Run::new(&[""]);
    r.start(0, &s);
    let mut second = shared::histogram::new();
    second.record_n(5_000, 10).unwrap();
    r.metrics.add_latency(0, 1, &second);
    r.metrics.add_latency(0, 1, &second);
    let m = r.samples();
    assert_eq!(
        value(&m, "stampede_latency_seconds_count", &[("step", "1")]),
        Some(20.0)
    );
    let mut whole = shared::histogram::new();
    whole.record_n(1_000, 21).unwrap();
    r.metrics.set_step_latency(0, 1, &whole);
    r.metrics.add_latency(0, 1, &second);
    let m = r.samples();
    assert_eq!(
        value(&m, "stampede_latency_seconds_count", &[("step", "1")]),
        Some(21.0)
    );
    let mean = value(&m, "stampede_latency_seconds_sum", &[("step", "1")]).unwrap() / 21.0;
    assert!(
        (mean - whole.mean() / 1e6).abs() < 1e-12,
        "the sum is HdrHistogram's mean's"
    );
    let b = buckets(&m, "1");
    assert_eq!(b.len(), 3, "1 ms's bucket, its lower edge and +Inf: {b:?}");
}

/// Latencies (µs, count): scattered over 1 µs to an hour, or crowded around one value (the
/// interpolation inside one bucket is then what counts), with some zeros.
fn latencies() -> impl Strategy<Value = Vec<(u64, u64)>> {
    let scattered = prop::collection::vec((0.0f64..31.7, 1u64..2000), 1..200);
    let crowded = (4.0f64..30.0, 0.001f64..0.2).prop_flat_map(|(at, spread)| {
        prop::collection::vec((at - spread..at + spread, 1u64..5000), 1..100)
    });
    let zeros = prop_oneof![3 => Just(0u64), 1 => 1u64..50];
    (prop_oneof![scattered, crowded], zeros).prop_map(|(values, zeros)| {
        let mut v: Vec<(u64, u64)> = values
            .into_iter()
            .map(|(e, n)| (e.exp2() as u64, n))
            .collect();
        if zeros > 0 {
            v.push((0, zeros));
        }
        v
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// Prometheus's `histogram_quantile` over a step's buckets, as /metrics writes them, lands
    /// within QUANTILE_BOUND of stampede's own percentile of the same histogram.
    #[test]
    fn histogram_quantile_lands_within_the_bound_of_stampede_s_percentile(values in latencies()) {
        let mut h = shared::histogram::new();
        for (v, n) in &values {
            h.record_n(*v, *n).unwrap();
        }
        let s = golden().steps[0].clone();
        let mut r = Run::new(&[""]);
        r.start(0, &s);
        r.metrics.set_step_latency(0, 1, &h);
        let m = r.samples();
        let b = buckets(&m, "1");
        prop_assert_eq!(b.last().unwrap().1, h.len() as f64);
        for q in [0.5, 0.9, 0.99, 0.999] {
            let prom = bucket_quantile(q, b.clone());
            let ours = h.value_at_quantile(q) as f64 / 1e6;
            prop_assert!(
                (prom - ours).abs() <= QUANTILE_BOUND * ours * (1.0 + 1e-9),
                "q {}: histogram_quantile {} s, stampede {} s ({} off)", q, prom, ours,
                (prom - ours).abs() / ours
            );
        }
    }
}

/// The golden run's step `s` with a mix of "home" (`n` served of 2 ms) and "slow" (`n` served of
/// 400 ms, one failed), its rows and its names' latencies.
fn named_step(s: &StepResult, n: u64) -> (StepResult, Vec<Histogram<u64>>) {
    let mut stats = [
        shared::metrics::NameStats::default(),
        shared::metrics::NameStats::default(),
    ];
    for (k, ms) in [2u64, 400].into_iter().enumerate() {
        let c = &mut stats[k].counters;
        c.requests = n + k as u64;
        c.replies = n + k as u64;
        c.ok = n;
        c.status = [0, n, 0, 0, k as u64];
        stats[k].latency.record_n(ms * 1000, n).unwrap();
    }
    let mut s = s.clone();
    let names = ["home".to_string(), "slow".to_string()];
    s.per_request = results::step::per_request::rows(&names, &[3, 1], &stats, s.duration_s);
    let hists = stats.into_iter().map(|n| n.latency).collect();
    (s, hists)
}

#[test]
fn a_named_mix_has_its_series_with_a_request_label_and_the_step_s_are_unchanged() {
    let plain = {
        let mut r = Run::new(&[""]);
        r.whole(0);
        r.metrics.encode()
    };
    assert!(
        !plain.contains("stampede_request_"),
        "no family without names"
    );
    let mut r = Run::new(&[""]);
    for s in golden().steps {
        let (named, hists) = named_step(&s, 100);
        // As `whole` feeds the plain run, and the names' latencies before the step is written.
        r.start(0, &named);
        r.second(0, s.number, s.requests / 3, s.ok / 3, 0);
        r.second(0, s.number, s.requests / 3, s.ok / 3, 1);
        r.metrics.set_names_latency(0, s.number, &hists);
        r.written(0, &named);
    }
    let text = r.metrics.encode();
    // Every line of the plain exposition is still there: the named mix only adds.
    for line in plain.lines().filter(|l| !l.starts_with('#')) {
        assert!(text.contains(line), "{line} lost");
    }
    let samples = parse(&text);
    for step in 1..=6 {
        let step = step.to_string();
        let at = |name: &str, request: &str| {
            value(&samples, name, &[("step", &step), ("request", request)])
        };
        assert_eq!(at("stampede_request_served_total", "home"), Some(100.0));
        assert_eq!(at("stampede_request_requests_total", "slow"), Some(101.0));
        assert_eq!(at("stampede_request_failed_total", "slow"), Some(1.0));
        assert_eq!(
            at("stampede_request_latency_seconds_count", "slow"),
            Some(100.0)
        );
        let buckets: Vec<(f64, f64)> = samples
            .iter()
            .filter(|x| {
                x.name == "stampede_request_latency_seconds_bucket"
                    && x.label("step") == Some(step.as_str())
                    && x.label("request") == Some("slow")
            })
            .map(|x| {
                (
                    x.label("le").unwrap().parse().unwrap_or(f64::INFINITY),
                    x.value,
                )
            })
            .collect();
        let p99 = bucket_quantile(0.99, buckets);
        assert!(
            (p99 - 0.4).abs() <= 0.4 * QUANTILE_BOUND,
            "slow's p99 {p99} s on the step's grid"
        );
    }
    assert!(text.contains("# TYPE stampede_request_latency_seconds histogram\n"));
}

#[test]
fn a_name_s_latency_before_its_step_is_written_is_not_listed_unnamed() {
    let mut r = Run::new(&[""]);
    let s = &golden().steps[0];
    let (_, hists) = named_step(s, 10);
    r.start(0, s);
    r.metrics.set_names_latency(0, s.number, &hists);
    let text = r.metrics.encode();
    assert!(!text.contains("request=\"\""), "{text}");
    assert!(!text.contains("stampede_request_"), "{text}");
}

/// A push and a scrape are the same walk's: every remote-write series, less the resource's
/// labels, is a sample of /metrics with the same name, labels (`le` written alike) and value, and
/// the other way round.
#[test]
fn a_pushed_batch_holds_every_scraped_series_and_no_other() {
    let mut r = Run::new(&["a", "b"]);
    r.whole(0);
    let s = &golden().steps[0];
    r.start(1, s);
    r.second(1, s.number, 40, 39, 1);
    let mut h = Histogram::<u64>::new(3).unwrap();
    for v in [0, 90, 1_000, 1_001, 250_000] {
        h.record(v).unwrap();
    }
    r.metrics.add_latency(1, s.number, &h);
    let key = |name: &str, labels: &[(String, String)], value: f64| {
        let mut labels = labels.to_vec();
        labels.sort();
        format!("{name}{labels:?} {value}")
    };
    let mut scraped: Vec<String> = r
        .samples()
        .iter()
        .map(|s| key(&s.name, &s.labels, s.value))
        .collect();
    let batch = push::Batch {
        at_ms: 1,
        start_ms: 0,
        resource: push::Resource {
            attributes: vec![
                ("service.name".into(), "stampede".into()),
                ("stampede.run".into(), "r".into()),
            ],
        },
        families: r.metrics.families(),
    };
    let mut pushed: Vec<String> = push::remote_write::write_request(&batch)
        .timeseries
        .iter()
        .map(|t| {
            let name = &t
                .labels
                .iter()
                .find(|l| l.name == "__name__")
                .unwrap()
                .value;
            let labels: Vec<(String, String)> = t
                .labels
                .iter()
                .filter(|l| !["__name__", "job", "run"].contains(&l.name.as_str()))
                .map(|l| (l.name.clone(), l.value.clone()))
                .collect();
            key(name, &labels, t.samples[0].value)
        })
        .collect();
    scraped.sort();
    pushed.sort();
    assert!(scraped.len() > 100, "{}", scraped.len());
    assert!(
        scraped.iter().any(|s| s.contains("\"le\", \"0.0\"")),
        "a zero bucket"
    );
    assert_eq!(pushed, scraped);
}

#[test]
fn a_written_step_s_served_rate_and_length_are_run_json_s_and_a_closed_step_has_them_too() {
    let steps = golden().steps;
    let mut r = Run::new(&[""]);
    r.start(0, &steps[0]);
    r.second(0, 1, 30, 29, 1);
    let m = r.samples();
    let one = [("step", "1")];
    assert_eq!(
        value(&m, "stampede_step_served_requests_per_second", &one),
        None,
        "not before the step is written"
    );
    assert_eq!(value(&m, "stampede_step_duration_seconds", &one), None);
    r.written(0, &steps[0]);
    // A closed-model step: no demanded rate, still a served rate.
    let mut closed = steps[1].clone();
    closed.model = "concurrency".into();
    closed.demanded_rate = None;
    closed.ok_rate = 123.456;
    r.start(0, &closed);
    r.second(0, closed.number, 7, 7, 0);
    r.written(0, &closed);
    let m = r.samples();
    assert_eq!(
        value(&m, "stampede_demanded_requests_per_second", &[]),
        None
    );
    for s in [&steps[0], &closed] {
        let n = s.number.to_string();
        let step = [("step", n.as_str())];
        assert_eq!(
            value(&m, "stampede_step_served_requests_per_second", &step),
            Some(s.ok_rate),
            "step {n}"
        );
        assert_eq!(
            value(&m, "stampede_step_duration_seconds", &step),
            Some(s.duration_s),
            "step {n}"
        );
    }
}
