//! `/metrics`: the run as Prometheus scrapes it (OpenMetrics text, written by the Prometheus org's
//! `prometheus-client`), folded from the run's events and merged latencies. Counters per step that
//! end at run.json's exact figures, gauges of what is running now, and each step's latency as a
//! histogram on one fixed geometric grid, so `histogram_quantile` over it lands within
//! [`QUANTILE_BOUND`] of stampede's own percentile (docs/guide/live.md, "Prometheus").
//!
//! Labels are bounded: `target` (the command line's targets), `step`, `agent` (the fleet),
//! `class` (the seven error classes) and `request` (the names of the plan file's mix, which the
//! plan bounds); never a URL, a status code or anything per request.
//!
//! Cheap by shape: an event folds in a few counters, a merged second's latency is moved onto the
//! grid once (a pass over what it recorded), and a scrape walks only each step's few hundred grid
//! buckets at most, never an HdrHistogram.
use std::sync::Arc;

use hdrhistogram::Histogram;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::{Registry, Unit};
use push::{Family, Kind, Series, Value};
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
    /// Once written: run.json's `ok_rate` (served per second over the step's own length) and
    /// `duration_s`; absent before, the seconds do not know them.
    ok_rate: Option<f64>,
    length_s: Option<f64>,
    latency: Grid,
    /// The latency is the step's whole merged histogram; later seconds add nothing.
    latency_whole: bool,
    /// A named mix's rows, in the plan's order, once the step is written (the seconds carry none).
    names: Vec<NameStep>,
}

/// One named request's part of a written step: run.json's `per_request` counts, and its latency
/// (served replies and given-up requests) on the same grid as the step's.
#[derive(Debug, Clone, Default)]
struct NameStep {
    name: String,
    requests: u64,
    served: u64,
    failed: u64,
    latency: Grid,
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
                s.ok_rate = Some(step.ok_rate);
                s.length_s = Some(step.duration_s);
                // The grids came first (`set_names_latency`, by place): the rows name them.
                s.names
                    .resize_with(step.per_request.len(), NameStep::default);
                for (n, r) in s.names.iter_mut().zip(&step.per_request) {
                    n.name.clone_from(&r.name);
                    n.requests = r.requests;
                    n.served = r.ok;
                    n.failed = r.failed;
                }
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

    /// A finished step's latency per named request, in the plan's order (before its `Step` event,
    /// which names them).
    pub fn set_names_latency<'h>(
        &mut self,
        target: usize,
        step: u32,
        latency: impl IntoIterator<Item = &'h Histogram<u64>>,
    ) {
        let state = Arc::make_mut(&mut self.state);
        let Some(l) = state.targets.get_mut(target).filter(|_| step > 0) else {
            return;
        };
        let s = l.step_mut(step);
        s.names = latency
            .into_iter()
            .map(|h| {
                let mut n = NameStep::default();
                n.latency.add(h);
                n
            })
            .collect();
    }

    /// The metrics as they stand, sharing what they hold: cheap to take under a lock, to be
    /// encoded after it is let go.
    pub fn snapshot(&self) -> Metrics {
        Metrics {
            state: Arc::clone(&self.state),
        }
    }

    /// The exposition text, ending with `# EOF`: [`Metrics::families`] written by prometheus-client.
    pub fn encode(&self) -> String {
        let families = self.families();
        // About 120 bytes a series; a histogram's bucket is one.
        let series: usize = families
            .iter()
            .flat_map(|f| &f.series)
            .map(|s| match &s.value {
                Value::Number(_) => 1,
                Value::Histogram { counts, .. } => 2 + counts.len(),
            })
            .sum();
        let mut registry = Registry::default();
        registry.register_collector(Box::new(Exposition(families)));
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
    request: Option<&'a str>,
}

impl<'a> Labels<'a> {
    fn target(l: &'a Target) -> Labels<'a> {
        Labels {
            target: &l.name,
            step: None,
            agent: None,
            class: None,
            request: None,
        }
    }

    /// The series' labels in `/metrics`' order: target, step, agent, class, request.
    fn pairs(&self) -> Vec<(String, String)> {
        let mut out = Vec::with_capacity(3);
        if !self.target.is_empty() {
            out.push(("target".to_string(), self.target.to_string()));
        }
        if let Some(step) = self.step {
            out.push(("step".to_string(), step.to_string()));
        }
        if let Some(agent) = self.agent {
            out.push(("agent".to_string(), agent.to_string()));
        }
        if let Some(class) = self.class {
            out.push(("class".to_string(), class.to_string()));
        }
        if let Some(request) = self.request {
            out.push(("request".to_string(), request.to_string()));
        }
        out
    }
}

/// A family of numbers: a gauge or a counter (whose values are whole).
fn numbers<'a>(
    kind: Kind,
    name: &str,
    help: &str,
    unit: &str,
    series: impl Iterator<Item = (Labels<'a>, f64)>,
) -> Family {
    Family {
        name: name.to_string(),
        help: help.to_string(),
        unit: unit.to_string(),
        kind,
        series: series
            .map(|(labels, v)| Series {
                labels: labels.pairs(),
                value: Value::Number(v),
            })
            .collect(),
    }
}

fn gauges<'a>(name: &str, help: &str, series: impl Iterator<Item = (Labels<'a>, f64)>) -> Family {
    numbers(Kind::Gauge, name, help, "", series)
}

fn counters<'a>(name: &str, help: &str, series: impl Iterator<Item = (Labels<'a>, u64)>) -> Family {
    numbers(
        Kind::Counter,
        name,
        help,
        "",
        series.map(|(labels, v)| (labels, v as f64)),
    )
}

/// A family of latencies on the grid, in seconds: the buckets as [`Grid::buckets`] lists them.
fn latencies<'a, 'g>(
    name: &str,
    help: &str,
    series: impl Iterator<Item = (Labels<'a>, &'g Grid)>,
) -> Family {
    Family {
        name: format!("{name}_seconds"),
        help: help.to_string(),
        unit: "seconds".to_string(),
        kind: Kind::Histogram,
        series: series
            .filter(|(_, g)| g.count > 0)
            .map(|(labels, g)| {
                let buckets = g.buckets();
                let mut bounds: Vec<f64> = buckets.iter().map(|b| b.0).collect();
                bounds.pop();
                Series {
                    labels: labels.pairs(),
                    value: Value::Histogram {
                        bounds,
                        counts: buckets.iter().map(|b| b.1).collect(),
                        count: g.count,
                        sum: g.sum_us / 1e6,
                    },
                }
            })
            .collect(),
    }
}

impl Metrics {
    /// Every family `/metrics` serves, in its order, with its series: the one walk of the state
    /// that both the exposition and a push are made from, so their names and labels cannot differ.
    pub fn families(&self) -> Vec<Family> {
        let s = &*self.state;
        let mut out = Vec::with_capacity(20);
        now(s, &mut out);
        agents(s, &mut out);
        steps(s, &mut out);
        requests(s, &mut out);
        out
    }
}

/// The run as it stands: over or not, and each target's running step, rates and generator.
fn now(s: &State, out: &mut Vec<Family>) {
    let per_target = |f: fn(&Target) -> Option<f64>| {
        s.targets
            .iter()
            .filter_map(move |l| f(l).map(|v| (Labels::target(l), v)))
    };
    let none = Target::default();
    out.push(gauges(
        "stampede_run_finished",
        "1 once the whole run is over (every target's run ended), else 0",
        std::iter::once((Labels::target(&none), f64::from(u8::from(s.finished)))),
    ));
    out.push(gauges(
        "stampede_step",
        "The running step's number, from 1 (0: the warmup); the last one's until the next starts",
        per_target(|l| l.step.map(f64::from)),
    ));
    out.push(gauges(
        "stampede_steps_planned",
        "The steps the plan holds (absent for a capacity search)",
        per_target(|l| l.planned.map(|n| n as f64)),
    ));
    out.push(gauges(
        "stampede_demanded_requests_per_second",
        "Requests per second the running step demands (absent for the closed model)",
        per_target(|l| l.demanded),
    ));
    out.push(gauges(
        "stampede_sent_requests_per_second",
        "Requests sent in the last merged second, per second",
        per_target(|l| l.sent_per_s),
    ));
    out.push(gauges(
        "stampede_served_requests_per_second",
        "Replies with an expected status in the last merged second, per second",
        per_target(|l| l.served_per_s),
    ));
    out.push(gauges(
        "stampede_generator_cpu_ratio",
        "The last written step's busiest agent's worker CPU, of what its workers can use",
        per_target(|l| l.generator.map(|g| g.0)),
    ));
    out.push(numbers(
        Kind::Gauge,
        "stampede_generator_lag_p99_seconds",
        "The last written step's p99 of how late arrivals were dispatched",
        "seconds",
        per_target(|l| l.generator.map(|g| g.1)),
    ));
}

/// Each agent's CPU and requests: as many series as the fleet has agents.
fn agents(s: &State, out: &mut Vec<Family>) {
    let targets = || s.targets.iter();
    out.push(gauges(
        "stampede_agent_cpu_ratio",
        "Each agent's worker CPU in the last written step, of what its workers can use",
        targets().flat_map(|l| {
            l.agents.iter().filter_map(move |a| {
                let labels = Labels {
                    agent: Some(&a.name),
                    ..Labels::target(l)
                };
                a.cpu_ratio.map(|v| (labels, v))
            })
        }),
    ));
    out.push(counters(
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
    ));
}

/// Per step: whether it is written, its counters, its latency histogram, and once written its
/// served rate and length.
fn steps(s: &State, out: &mut Vec<Family>) {
    let steps = || {
        s.targets.iter().flat_map(|l| {
            l.steps.iter().map(move |st| {
                let labels = Labels {
                    step: Some(st.number),
                    ..Labels::target(l)
                };
                (labels, st)
            })
        })
    };
    out.push(gauges(
        "stampede_step_final",
        "1 once the step is written: its counters and latency are then run.json's",
        steps().map(|(labels, st)| (labels, f64::from(u8::from(st.written)))),
    ));
    out.push(counters(
        "stampede_requests",
        "Requests sent in the step (run.json requests once written)",
        steps().map(|(labels, st)| (labels, st.requests)),
    ));
    out.push(counters(
        "stampede_served",
        "Replies with an expected status in the step (run.json ok once written)",
        steps().map(|(labels, st)| (labels, st.served)),
    ));
    out.push(counters(
        "stampede_failed",
        "Requests due in the step and not served (run.json failed once written)",
        steps().map(|(labels, st)| (labels, st.failed)),
    ));
    out.push(counters(
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
    ));
    out.push(latencies(
        "stampede_latency",
        "The step's latency (expected-status replies and given-up requests), on a 2^(1/16) grid",
        steps().map(|(labels, st)| (labels, &st.latency)),
    ));
    out.push(gauges(
        "stampede_step_served_requests_per_second",
        "The written step's served replies per second over its own length (run.json ok_rate)",
        steps().filter_map(|(labels, st)| st.ok_rate.map(|v| (labels, v))),
    ));
    out.push(numbers(
        Kind::Gauge,
        "stampede_step_duration_seconds",
        "The written step's length (run.json duration_s)",
        "seconds",
        steps().filter_map(|(labels, st)| st.length_s.map(|v| (labels, v))),
    ));
}

/// Per written step and named request (a mix's; none for unnamed requests): its counters and
/// its latency histogram, on the step's grid. Families of their own, so a sum over the step's
/// counters never counts a request twice.
fn requests(s: &State, out: &mut Vec<Family>) {
    let names = || {
        s.targets.iter().flat_map(|l| {
            l.steps.iter().flat_map(move |st| {
                st.names
                    .iter()
                    .filter(|n| !n.name.is_empty())
                    .map(move |n| {
                        let labels = Labels {
                            step: Some(st.number),
                            request: Some(&n.name),
                            ..Labels::target(l)
                        };
                        (labels, n)
                    })
            })
        })
    };
    if names().next().is_none() {
        // A run of unnamed requests keeps the exposition it had, without empty families.
        return;
    }
    out.push(counters(
        "stampede_request_requests",
        "Requests of this name sent in the step (run.json per_request requests; counted when the step is written)",
        names().map(|(labels, n)| (labels, n.requests)),
    ));
    out.push(counters(
        "stampede_request_served",
        "Replies of this name with an expected status in the step (run.json per_request ok)",
        names().map(|(labels, n)| (labels, n.served)),
    ));
    out.push(counters(
        "stampede_request_failed",
        "Requests of this name due in the step and not served (run.json per_request failed)",
        names().map(|(labels, n)| (labels, n.failed)),
    ));
    out.push(latencies(
        "stampede_request_latency",
        "This name's latency in the step (expected-status replies and given-up requests), on the step's 2^(1/16) grid",
        names().map(|(labels, n)| (labels, &n.latency)),
    ));
}

/// The families as the registry's collector, for one scrape: written by prometheus-client.
#[derive(Debug)]
struct Exposition(Vec<Family>);

impl Collector for Exposition {
    fn encode(&self, mut e: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        for f in &self.0 {
            let (name, unit) = match f.unit.as_str() {
                "seconds" => (
                    f.name.strip_suffix("_seconds").unwrap_or(&f.name),
                    Some(&Unit::Seconds),
                ),
                _ => (f.name.as_str(), None),
            };
            let ty = match f.kind {
                Kind::Counter => MetricType::Counter,
                Kind::Gauge => MetricType::Gauge,
                Kind::Histogram => MetricType::Histogram,
            };
            let mut family = e.encode_descriptor(name, &f.help, unit, ty)?;
            for s in &f.series {
                let mut m = family.encode_family(&s.labels)?;
                match (&s.value, f.kind) {
                    (Value::Number(v), Kind::Counter) => {
                        m.encode_counter::<NoLabelSet, u64, u64>(&(*v as u64), None)?
                    }
                    (Value::Number(v), _) => m.encode_gauge(v)?,
                    (Value::Histogram { count, sum, .. }, _) => {
                        let buckets = s.value.buckets();
                        m.encode_histogram::<NoLabelSet>(*sum, *count, &buckets, None)?
                    }
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
