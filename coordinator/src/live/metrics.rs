//! `/metrics`: the run as Prometheus scrapes it (OpenMetrics text, written by the Prometheus org's
//! `prometheus-client`), folded from the run's events and merged latencies. Counters per step that
//! end at run.json's exact figures, gauges of what is running now, and each step's latency as a
//! histogram on one fixed geometric grid, so `histogram_quantile` over it lands within
//! [`QUANTILE_BOUND`] of stampede's own percentile (docs/guide/live.md, "Prometheus").
//!
//! Labels are bounded: `target` (the command line's targets), `step`, `agent` (the fleet)
//! and `class` (the seven error classes); never a URL, a status code or anything per request.
//!
//! Cheap by shape: an event folds in a few counters, a merged second's latency is moved onto the
//! grid once (a pass over what it recorded), and a scrape walks only each step's few hundred grid
//! buckets at most, never an HdrHistogram.
use std::sync::Arc;

use hdrhistogram::Histogram;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{
    DescriptorEncoder, EncodeLabel, EncodeLabelSet, EncodeMetric, LabelSetEncoder, MetricEncoder,
    NoLabelSet,
};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::{Registry, Unit};
use results::events::{Event, Line, Live};
use results::step::StepResult;
use shared::metrics::ErrorClass;

/// What `/metrics` is served as: OpenMetrics, which Prometheus asks for first.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The latency grid's buckets per doubling: bucket `i` holds the values in
/// (2^((i-1)/16), 2^(i/16)] microseconds, so each is 2^(1/16) (about 1.0443) times the one below.
pub const PER_OCTAVE: i32 = 16;

/// How far `histogram_quantile` over a step's buckets can be from stampede's own percentile of the
/// same step (HdrHistogram's `value_at_quantile`, run.json's `latency_ms`), relative to the latter:
/// less than one grid bucket's width, 2^(1/16) - 1. Both pick the bucket holding the same rank, and
/// stampede's value is that bucket's member (see [`Grid`]); Prometheus interpolates inside it.
pub const QUANTILE_BOUND: f64 = 0.044_273_782_427_413_84;

/// The run's metrics, folded from its events; owned by whoever feeds them (no locks inside).
#[derive(Debug, Default)]
pub struct Metrics {
    /// Behind an `Arc` to be lent to the crate's registry (its collectors are `'static`) and to be
    /// encoded from a [`Metrics::snapshot`] outside the hub's lock; folding copies it only when an
    /// event comes while an encode still holds the last one (once a second at most).
    state: Arc<State>,
}

#[derive(Debug, Clone, Default)]
struct State {
    targets: Vec<Target>,
    finished: bool,
}

/// One target's run.
#[derive(Debug, Clone, Default)]
struct Target {
    /// The target's name (`NAME=` or `--label`); empty for a run of one target.
    name: String,
    /// The running step's number (0: the warmup), or the last one's until the next starts.
    step: Option<u32>,
    planned: Option<usize>,
    demanded: Option<f64>,
    /// The last merged second's requests sent and replies served, per second.
    sent_per_s: Option<f64>,
    served_per_s: Option<f64>,
    /// The last written step's generator: its busiest agent's CPU (ratio) and lag p99 (s).
    generator: Option<(f64, f64)>,
    agents: Vec<Agent>,
    /// The running step's agents, in its order, as indices into `agents`.
    running: Vec<usize>,
    /// Counted steps (never the warmup), in the order they started.
    steps: Vec<Step>,
}

#[derive(Debug, Clone, Default)]
struct Agent {
    name: String,
    /// Its CPU in the last written step, of what its worker threads can use.
    cpu_ratio: Option<f64>,
    /// Requests sent in the written steps, and in the running one so far.
    done: u64,
    now: u64,
}

#[derive(Debug, Clone, Default)]
struct Step {
    number: u32,
    requests: u64,
    served: u64,
    failed: u64,
    /// Run.json's `errors` once written; each class 0 before (the seconds carry no classes).
    errors: [u64; ErrorClass::COUNT],
    /// Written: the counters are run.json's figures.
    written: bool,
    latency: Grid,
    /// The latency is the step's whole merged histogram; later seconds add nothing.
    latency_whole: bool,
}

impl Metrics {
    pub fn new() -> Metrics {
        Metrics::default()
    }

    /// Folds one event in; `live` is the fold after it (target names, each target's run.json so far).
    pub fn apply(&mut self, line: &Line, live: &Live) {
        let state = Arc::make_mut(&mut self.state);
        if let Event::Begin { .. } = &line.event {
            state.targets = live
                .targets
                .iter()
                .map(|l| Target {
                    name: l.name.clone(),
                    ..Target::default()
                })
                .collect();
            state.finished = false;
            return;
        }
        match &line.event {
            Event::Begin { .. }
            | Event::Baseline { .. }
            | Event::Run { .. }
            | Event::End { .. } => {}
            Event::StepStart {
                target,
                step: start,
            } => {
                let Some(l) = state.targets.get_mut(*target) else {
                    return;
                };
                l.step = Some(start.step);
                l.planned = start.steps;
                l.demanded = start.demanded;
                l.running = start
                    .agents
                    .iter()
                    .map(|a| l.agent(&a.agent))
                    .collect::<Vec<_>>();
                for &a in &l.running {
                    l.agents[a].now = 0;
                }
                if start.step > 0 {
                    // A number seen again (never, in a run) starts over rather than adding up.
                    *l.step_mut(start.step) = Step {
                        number: start.step,
                        ..Step::default()
                    };
                }
            }
            Event::Interval { target, interval } => {
                let Some(l) = state.targets.get_mut(*target) else {
                    return;
                };
                if interval.length_s > 0.0 {
                    l.sent_per_s = Some(interval.sent as f64 / interval.length_s);
                    l.served_per_s = Some(interval.ok as f64 / interval.length_s);
                }
                // The warmup is measured and kept apart, as in run.json: no counter holds it.
                if interval.step == 0 {
                    return;
                }
                let s = l.step_mut(interval.step);
                if s.written {
                    return;
                }
                s.requests += interval.sent;
                s.served += interval.ok;
                s.failed += interval.failed;
                if l.step == Some(interval.step) {
                    for (k, &sent) in interval.agents_sent.iter().enumerate() {
                        if let Some(&a) = l.running.get(k) {
                            l.agents[a].now = sent;
                        }
                    }
                }
            }
            Event::Warmup { target, step } => {
                if let Some(l) = state.targets.get_mut(*target) {
                    l.written(step, false);
                }
            }
            Event::Step { target, step, .. } => {
                let Some(l) = state.targets.get_mut(*target) else {
                    return;
                };
                let s = l.step_mut(step.number);
                // Set, not added: the sum over steps is then steps.tsv's exactly, whatever the
                // seconds said (they miss the drain's replies, and a late second is not sent).
                s.requests = step.requests;
                s.served = step.ok;
                s.failed = step.failed;
                for class in ErrorClass::ALL {
                    s.errors[class.index()] = step.errors.get(class.name());
                }
                s.written = true;
                l.written(step, true);
            }
            Event::Finished { .. } => state.finished = true,
        }
    }

    /// One merged 1 s interval's latency (µs) of target number `target`'s step `step`, added into that step's
    /// histogram. The warmup's (step 0) is left out, as from every counter.
    pub fn add_latency(&mut self, target: usize, step: u32, latency: &Histogram<u64>) {
        let state = Arc::make_mut(&mut self.state);
        let Some(l) = state.targets.get_mut(target).filter(|_| step > 0) else {
            return;
        };
        let s = l.step_mut(step);
        if !s.latency_whole {
            s.latency.add(latency);
        }
    }

    /// A finished step's whole merged latency: replaces what its intervals added.
    pub fn set_step_latency(&mut self, target: usize, step: u32, latency: &Histogram<u64>) {
        let state = Arc::make_mut(&mut self.state);
        let Some(l) = state.targets.get_mut(target).filter(|_| step > 0) else {
            return;
        };
        let s = l.step_mut(step);
        s.latency = Grid::default();
        s.latency.add(latency);
        s.latency_whole = true;
    }

    /// The metrics as they stand, sharing what they hold: cheap to take under a lock, to be
    /// encoded after it is let go.
    pub fn snapshot(&self) -> Metrics {
        Metrics {
            state: Arc::clone(&self.state),
        }
    }

    /// The exposition text, ending with `# EOF`.
    pub fn encode(&self) -> String {
        let mut registry = Registry::default();
        registry.register_collector(Box::new(Exposition(Arc::clone(&self.state))));
        // About 120 bytes a series; a step's histogram is most of them.
        let series: usize = self
            .state
            .targets
            .iter()
            .map(|l| {
                8 + 2 * l.agents.len()
                    + l.steps
                        .iter()
                        .map(|s| 12 + 2 * s.latency.counts.len())
                        .sum::<usize>()
            })
            .sum();
        let mut out = String::with_capacity(2048 + 120 * series);
        prometheus_client::encoding::text::encode(&mut out, &registry)
            .expect("writing into a String cannot fail");
        out
    }
}

impl Target {
    /// The agent called `name`, added when new: the fleet bounds them.
    fn agent(&mut self, name: &str) -> usize {
        match self.agents.iter().position(|a| a.name == name) {
            Some(i) => i,
            None => {
                self.agents.push(Agent {
                    name: name.to_string(),
                    ..Agent::default()
                });
                self.agents.len() - 1
            }
        }
    }

    fn step_mut(&mut self, number: u32) -> &mut Step {
        // The last step is nearly always the one asked for.
        let i = match self.steps.iter().rposition(|s| s.number == number) {
            Some(i) => i,
            None => {
                self.steps.push(Step {
                    number,
                    ..Step::default()
                });
                self.steps.len() - 1
            }
        };
        &mut self.steps[i]
    }

    /// A step (or with `counted` false, the warmup) written: the gauges of its generator and
    /// agents, and the agents' requests, counted steps only.
    fn written(&mut self, step: &StepResult, counted: bool) {
        self.generator = Some((
            step.generator.cpu_pct / 100.0,
            step.generator.lag_p99_ms / 1000.0,
        ));
        for a in &step.agents {
            let i = self.agent(&a.agent);
            let agent = &mut self.agents[i];
            agent.cpu_ratio = Some(a.cpu_pct / 100.0);
            if counted {
                agent.done += a.requests;
            }
        }
        for &a in &self.running {
            self.agents[a].now = 0;
        }
    }
}

/// A step's latency on the grid: bucket `first + k` counts `counts[k]` values, each HdrHistogram
/// bucket placed by its highest equivalent value, the value `value_at_quantile` reports for it.
/// So the grid bucket holding a rank holds stampede's percentile of that rank.
#[derive(Debug, Clone, Default)]
struct Grid {
    /// Values of 0 µs (`le="0"`, where `histogram_quantile` answers 0 exactly).
    zero: u64,
    first: i32,
    counts: Vec<u64>,
    count: u64,
    /// The values' sum in µs, each at its HdrHistogram bucket's middle (as HdrHistogram's mean).
    sum_us: f64,
}

impl Grid {
    fn add(&mut self, h: &Histogram<u64>) {
        for v in h.iter_recorded() {
            let value = v.value_iterated_to();
            let n = v.count_at_value();
            self.count += n;
            self.sum_us += h.median_equivalent(value) as f64 * n as f64;
            if value == 0 {
                self.zero += n;
            } else {
                self.bump(grid_index(value), n);
            }
        }
    }

    fn bump(&mut self, i: i32, n: u64) {
        if self.counts.is_empty() {
            self.first = i;
        } else if i < self.first {
            let more = (self.first - i) as usize;
            self.counts.splice(0..0, std::iter::repeat_n(0, more));
            self.first = i;
        }
        let k = (i - self.first) as usize;
        if k >= self.counts.len() {
            self.counts.resize(k + 1, 0);
        }
        self.counts[k] += n;
    }

    /// The buckets to list, in seconds and not cumulative (the crate adds them up), `+Inf` last:
    /// each non-empty grid bucket with its lower edge listed too (at the count below it), so that
    /// the bucket `histogram_quantile` interpolates in is exactly one grid bucket, and the first
    /// one does not reach down to 0. Empty stretches between are left out: that only merges empty
    /// buckets, where no rank falls.
    fn buckets(&self) -> Vec<(f64, u64)> {
        let mut out = Vec::with_capacity(2 * self.counts.len() + 2);
        if self.zero > 0 {
            out.push((0.0, self.zero));
        }
        for (k, &n) in self.counts.iter().enumerate() {
            if n == 0 {
                continue;
            }
            let i = self.first + k as i32;
            if k == 0 || self.counts[k - 1] == 0 {
                out.push((le(i - 1), 0));
            }
            out.push((le(i), n));
        }
        out.push((f64::INFINITY, 0));
        out
    }
}

/// The grid's edge `i` in microseconds: 2^(i / PER_OCTAVE).
fn edge_us(i: i32) -> f64 {
    (f64::from(i) / f64::from(PER_OCTAVE)).exp2()
}

/// The grid's edge `i` as an `le`, in seconds.
fn le(i: i32) -> f64 {
    edge_us(i) / 1e6
}

/// The grid bucket holding `value_us` (> 0): the `i` with edge(i - 1) < value <= edge(i), by the
/// same `edge_us` the `le`s are written from (the logarithm only guesses).
fn grid_index(value_us: u64) -> i32 {
    let v = value_us as f64;
    let mut i = (v.log2() * f64::from(PER_OCTAVE)).ceil() as i32;
    while edge_us(i) < v {
        i += 1;
    }
    while edge_us(i - 1) >= v {
        i -= 1;
    }
    i
}

/// The labels of one series; an empty target (a run of one) is left out rather than written
/// empty, which Prometheus would read as absent anyway.
#[derive(Clone, Copy)]
struct Labels<'a> {
    target: &'a str,
    step: Option<u32>,
    agent: Option<&'a str>,
    class: Option<&'static str>,
}

impl<'a> Labels<'a> {
    fn target(l: &'a Target) -> Labels<'a> {
        Labels {
            target: &l.name,
            step: None,
            agent: None,
            class: None,
        }
    }
}

impl EncodeLabelSet for Labels<'_> {
    fn encode(&self, e: &mut LabelSetEncoder) -> Result<(), std::fmt::Error> {
        if !self.target.is_empty() {
            EncodeLabel::encode(&("target", self.target), e.encode_label())?;
        }
        if let Some(step) = self.step {
            EncodeLabel::encode(&("step", step), e.encode_label())?;
        }
        if let Some(agent) = self.agent {
            EncodeLabel::encode(&("agent", agent), e.encode_label())?;
        }
        if let Some(class) = self.class {
            EncodeLabel::encode(&("class", class), e.encode_label())?;
        }
        Ok(())
    }
}

/// One step's latency histogram, from its grid counts (the crate's own histogram only observes
/// values one at a time).
struct StepLatency<'a>(&'a Grid);

impl EncodeMetric for StepLatency<'_> {
    fn encode(&self, mut e: MetricEncoder) -> Result<(), std::fmt::Error> {
        let g = self.0;
        e.encode_histogram::<NoLabelSet>(g.sum_us / 1e6, g.count, &g.buckets(), None)
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Histogram
    }
}

/// The state as the registry's collector, for one scrape.
#[derive(Debug)]
struct Exposition(Arc<State>);

/// One family's series: its labels and value, by target.
fn gauges<'a>(
    e: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    unit: Option<&Unit>,
    series: impl Iterator<Item = (Labels<'a>, f64)>,
) -> Result<(), std::fmt::Error> {
    let mut family = e.encode_descriptor(name, help, unit, MetricType::Gauge)?;
    for (labels, v) in series {
        family.encode_family(&labels)?.encode_gauge(&v)?;
    }
    Ok(())
}

fn counters<'a>(
    e: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    series: impl Iterator<Item = (Labels<'a>, u64)>,
) -> Result<(), std::fmt::Error> {
    let mut family = e.encode_descriptor(name, help, None, MetricType::Counter)?;
    for (labels, v) in series {
        family
            .encode_family(&labels)?
            .encode_counter::<NoLabelSet, u64, u64>(&v, None)?;
    }
    Ok(())
}

impl Collector for Exposition {
    fn encode(&self, mut e: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        self.now(&mut e)?;
        self.agents(&mut e)?;
        self.steps(&mut e)
    }
}

impl Exposition {
    /// The run as it stands: over or not, and each target's running step, rates and generator.
    fn now(&self, e: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let s = &*self.0;
        let per_target = |f: fn(&Target) -> Option<f64>| {
            s.targets
                .iter()
                .filter_map(move |l| f(l).map(|v| (Labels::target(l), v)))
        };
        gauges(
            e,
            "stampede_run_finished",
            "1 once the whole run is over (every target's run ended), else 0",
            None,
            std::iter::once((
                Labels::target(&Target::default()),
                f64::from(u8::from(s.finished)),
            )),
        )?;
        gauges(
            e,
            "stampede_step",
            "The running step's number, from 1 (0: the warmup); the last one's until the next starts",
            None,
            per_target(|l| l.step.map(f64::from)),
        )?;
        gauges(
            e,
            "stampede_steps_planned",
            "The steps the plan holds (absent for a capacity search)",
            None,
            per_target(|l| l.planned.map(|n| n as f64)),
        )?;
        gauges(
            e,
            "stampede_demanded_requests_per_second",
            "Requests per second the running step demands (absent for the closed model)",
            None,
            per_target(|l| l.demanded),
        )?;
        gauges(
            e,
            "stampede_sent_requests_per_second",
            "Requests sent in the last merged second, per second",
            None,
            per_target(|l| l.sent_per_s),
        )?;
        gauges(
            e,
            "stampede_served_requests_per_second",
            "Replies with an expected status in the last merged second, per second",
            None,
            per_target(|l| l.served_per_s),
        )?;
        gauges(
            e,
            "stampede_generator_cpu_ratio",
            "The last written step's busiest agent's worker CPU, of what its workers can use",
            None,
            per_target(|l| l.generator.map(|g| g.0)),
        )?;
        gauges(
            e,
            "stampede_generator_lag_p99",
            "The last written step's p99 of how late arrivals were dispatched",
            Some(&Unit::Seconds),
            per_target(|l| l.generator.map(|g| g.1)),
        )?;
        Ok(())
    }

    /// Each agent's CPU and requests: as many series as the fleet has agents.
    fn agents(&self, e: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let targets = || self.0.targets.iter();
        gauges(
            e,
            "stampede_agent_cpu_ratio",
            "Each agent's worker CPU in the last written step, of what its workers can use",
            None,
            targets().flat_map(|l| {
                l.agents.iter().filter_map(move |a| {
                    let labels = Labels {
                        agent: Some(&a.name),
                        ..Labels::target(l)
                    };
                    a.cpu_ratio.map(|v| (labels, v))
                })
            }),
        )?;
        counters(
            e,
            "stampede_agent_requests",
            "Requests each agent sent over the counted steps (the warmup's left out)",
            targets().flat_map(|l| {
                l.agents.iter().map(move |a| {
                    let labels = Labels {
                        agent: Some(&a.name),
                        ..Labels::target(l)
                    };
                    (labels, a.done + a.now)
                })
            }),
        )?;
        Ok(())
    }

    /// Per step: whether it is written, its counters and its latency histogram.
    fn steps(&self, e: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let steps = || {
            self.0.targets.iter().flat_map(|l| {
                l.steps.iter().map(move |st| {
                    let labels = Labels {
                        step: Some(st.number),
                        ..Labels::target(l)
                    };
                    (labels, st)
                })
            })
        };
        gauges(
            e,
            "stampede_step_final",
            "1 once the step is written: its counters and latency are then run.json's",
            None,
            steps().map(|(labels, st)| (labels, f64::from(u8::from(st.written)))),
        )?;
        counters(
            e,
            "stampede_requests",
            "Requests sent in the step (run.json requests once written)",
            steps().map(|(labels, st)| (labels, st.requests)),
        )?;
        counters(
            e,
            "stampede_served",
            "Replies with an expected status in the step (run.json ok once written)",
            steps().map(|(labels, st)| (labels, st.served)),
        )?;
        counters(
            e,
            "stampede_failed",
            "Requests due in the step and not served (run.json failed once written)",
            steps().map(|(labels, st)| (labels, st.failed)),
        )?;
        counters(
            e,
            "stampede_errors",
            "Transport errors in the step by class (run.json errors; counted when the step is written)",
            steps().flat_map(|(labels, st)| {
                ErrorClass::ALL.into_iter().map(move |class| {
                    let labels = Labels {
                        class: Some(class.name()),
                        ..labels
                    };
                    (labels, st.errors[class.index()])
                })
            }),
        )?;
        let mut family = e.encode_descriptor(
            "stampede_latency",
            "The step's latency (expected-status replies and given-up requests), on a 2^(1/16) grid",
            Some(&Unit::Seconds),
            MetricType::Histogram,
        )?;
        for (labels, st) in steps().filter(|(_, st)| st.latency.count > 0) {
            StepLatency(&st.latency).encode(family.encode_family(&labels)?)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use results::events::{AgentShare, Interval, SCHEMA, StepStart};
    use results::run_file::RunFile;

    const GOLDEN: &str = include_str!("../../../results/tests/golden/run.json");

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
            .filter(|s| {
                s.name == "stampede_latency_seconds_bucket" && s.label("step") == Some(step)
            })
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
}
