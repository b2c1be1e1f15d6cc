//! The shoot-out's answer: the runs compared ranked by where each server broke. Per run its knee
//! and cause, the highest step it kept up with, and there its p99, its own server's CPU and memory,
//! the requests served per core-second of that CPU and the step's trust; compare.json's `ranking`,
//! compare.tsv's trailing block, the page's first table and the last table on stdout.
//!
//! The order: the later the knee, the better. A run with no knee coped with every step it ran, so
//! its knee lies beyond its highest step: it sorts as if its knee were there, ahead of a knee at that
//! same value. Ties (and runs whose files name no knee, written before knees were) go by how far
//! each kept up, then by the lower p99 there (two servers that both held a ramp that was too
//! gentle for either differ in how fast they answered it), then by the highest rate served. A run
//! with no step is last.
//!
//! Capacity searches (`find-max NAME=URL ...`) are ranked on their answer instead: the highest
//! rate each sustained under the same SLOs, best first, the knee only breaking ties, as the
//! search's probes are not a ramp (they go up and down), so a knee read off them says less than
//! the search's own bounds.
//!
//! Runs whose steps are different quantities (a closed loop's connections beside an open model's
//! requests/s) have no knee or step value in common: 8 connections is not less than 400 req/s.
//! They are ranked on what every model measures alike, the requests/s each served at its kept-up
//! step, then by the lower p99 there and the highest rate served; each one's knee and kept-up step
//! stay in its own unit.
use std::cmp::Ordering;

use serde::Serialize;

use crate::knee::{Knee, KneeCause};
use crate::quantity::{OK_PER_CORE_S, P99_MS, SRV_CPU_UTIL_PCT, SRV_MEM_MB};
use crate::step::{Mark, StepResult, human, human_ms, step_value};
use crate::verdict::Verdict;

use super::{Labelled, axis_of, joined_value};

/// What the runs are ranked on first (see the module's header).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum RankedOn {
    /// The later knee (planned runs on one axis).
    Knee,
    /// The highest rate sustained under the SLOs (capacity searches on one axis).
    MaxRate,
    /// The requests/s served at the kept-up step (runs on different axes).
    Served,
}

/// What `runs` are ranked on: their step values when they are one quantity, else the rate served.
pub fn ranked_on(runs: &[Labelled]) -> RankedOn {
    let first = runs.first().map(|r| axis_of(r.run.model()));
    if runs.iter().any(|r| Some(axis_of(r.run.model())) != first) {
        RankedOn::Served
    } else if searches(runs) {
        RankedOn::MaxRate
    } else {
        RankedOn::Knee
    }
}

/// One run's place in the ranking.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Ranked {
    /// Counted from 1, best first; runs that cannot be told apart share a rank.
    pub rank: u32,
    pub label: String,
    /// What its knee, kept-up value and max rate are in, as [`super::Comparison::axis`] names an
    /// axis: `dem_req_rate` (demanded requests/s) or `connections` (a closed loop's).
    pub axis: &'static str,
    /// Where the server stopped coping, and why; none when no step shows it.
    pub knee: Option<Knee>,
    /// The knee's value on the comparison's axis (demanded requests/s, or connections).
    pub knee_at: Option<f64>,
    /// The highest step value it kept up with (run.json's `summary.kept_up_to`).
    pub kept_up_to: Option<f64>,
    /// The step the numbers below are read at: the kept-up step, or a search's last passing probe
    /// at its highest passing rate.
    pub at_step: Option<u32>,
    pub p99_ms: Option<f64>,
    pub p99_lower_bound: bool,
    /// The requests/s served at that step (`ok_rate`): what runs on different axes are ranked on.
    pub served: Option<f64>,
    /// Its own server's CPU (% of the cores it may use) and memory (MiB, the step's highest) at
    /// that step, and the requests served per core-second of that CPU; none without a
    /// monitor paired with the target.
    pub server_cpu_util_pct: Option<f64>,
    pub server_mem_mb: Option<f64>,
    pub ok_per_core_s: Option<f64>,
    /// The kept-up step's trust, and how many of the run's steps were not trusted at all.
    pub trust: Option<Verdict>,
    pub untrusted_steps: usize,
    /// A capacity search's answer (`find-max`): the highest rate that passed its SLOs, on the
    /// comparison's axis, and how the search ended (`resolved`, `lower_bound_only`, …); none for a
    /// planned run, and no rate when none passed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_rate: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub search: Option<&'static str>,
    /// The run's line of the ranking, in words: "knee at 11,000 req/s (latency); kept up to
    /// 10,000 req/s (p99 1.4 ms)".
    pub sentence: String,
}

/// What a run is ranked on, best last so a plain sort puts it first reversed.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Key {
    ran: bool,
    /// What [`RankedOn`] puts first: a search's highest passing rate, or the rate served at the
    /// kept-up step; 0 for all when ranked on the knee.
    first: f64,
    /// The knee's value, or the highest step's when it has none.
    knee: f64,
    /// No knee: it lies beyond `knee`.
    beyond: bool,
    kept_up_to: f64,
    /// p99 at the kept-up step, negated (lower is better); none sorts last.
    neg_p99: f64,
    peak: f64,
}

impl Key {
    fn cmp(&self, other: &Key) -> Ordering {
        self.ran
            .cmp(&other.ran)
            .then(self.first.total_cmp(&other.first))
            .then(self.knee.total_cmp(&other.knee))
            .then(self.beyond.cmp(&other.beyond))
            .then(self.kept_up_to.total_cmp(&other.kept_up_to))
            .then(self.neg_p99.total_cmp(&other.neg_p99))
            .then(self.peak.total_cmp(&other.peak))
    }
}

/// The runs ranked, best first (see the module's header for the order).
pub fn rank(runs: &[Labelled]) -> Vec<Ranked> {
    let on = ranked_on(runs);
    let mut keyed: Vec<(Key, Ranked)> = runs
        .iter()
        .map(|r| {
            let ranked = ranked(r, on);
            (key(r, on, ranked.served), ranked)
        })
        .collect();
    // Stable: runs that tie keep the command line's order.
    keyed.sort_by(|a, b| b.0.cmp(&a.0));
    let mut out: Vec<Ranked> = Vec::with_capacity(keyed.len());
    let mut previous: Option<Key> = None;
    for (i, (k, mut r)) in keyed.into_iter().enumerate() {
        r.rank = match (previous, out.last()) {
            (Some(p), Some(last)) if p.cmp(&k) == Ordering::Equal => last.rank,
            _ => i as u32 + 1,
        };
        previous = Some(k);
        out.push(r);
    }
    out
}

/// Every run compared is a capacity search, so they are ranked on their answers. A search beside
/// a planned run is ranked as a run: one's highest passing rate and the other's knee are not one
/// measure.
pub fn searches(runs: &[Labelled]) -> bool {
    !runs.is_empty() && runs.iter().all(|r| r.run.capacity.is_some())
}

fn key(r: &Labelled, on: RankedOn, served: Option<f64>) -> Key {
    let summary = r.run.summary.as_ref();
    let top = r.run.steps.iter().map(joined_value).max_by(f64::total_cmp);
    let knee = summary.and_then(|s| s.knee.as_ref());
    // Across axes a knee or a step value says nothing against another run's: only the rate served
    // and the latency there are compared.
    let own_axis = on != RankedOn::Served;
    Key {
        ran: top.is_some(),
        first: match on {
            RankedOn::Knee => 0.0,
            RankedOn::MaxRate => max_rate(r).unwrap_or(f64::NEG_INFINITY),
            RankedOn::Served => served.unwrap_or(-1.0),
        },
        knee: match own_axis {
            true => knee.map_or(top.unwrap_or(0.0), knee_at),
            false => 0.0,
        },
        // A generator-bound knee is no knee of the server's: its own lies at least that far.
        beyond: own_axis && knee.is_none_or(|k| !k.servers),
        kept_up_to: match own_axis {
            true => kept_up_at(r).unwrap_or(-1.0),
            false => 0.0,
        },
        neg_p99: summary
            .and_then(|s| s.kept_up_p99_ms)
            .map_or(f64::NEG_INFINITY, |p| -p),
        peak: summary.map_or(0.0, |s| s.peak_ok_rate),
    }
}

/// How far a run kept up, on the comparison's axis (the demanded rate where the steps have one, as
/// the knee's is): the connections model's conn/s would read 10x low against a knee in req/s at
/// `--num-call 10`.
fn kept_up_at(r: &Labelled) -> Option<f64> {
    let summary = r.run.summary.as_ref()?;
    let kept = summary
        .kept_up_step
        .and_then(|n| r.run.steps.iter().find(|s| s.number == n));
    kept.map(joined_value).or(summary.kept_up_to)
}

/// A search's highest passing rate on the comparison's axis: the demanded rate of the probe that
/// passed at it (the connections model's conn/s is its steps' step value, 10x less than the
/// req/s the knee is in at `--num-call 10`).
fn max_rate(r: &Labelled) -> Option<f64> {
    let offered = r.run.capacity.as_ref()?.max_rate?.offered;
    let probe = r
        .run
        .steps
        .iter()
        .find(|s| (s.step_value - offered).abs() <= offered.abs() * 1e-9);
    Some(probe.map_or(offered, joined_value))
}

/// A knee's value on the comparison's axis, as its steps are joined.
fn knee_at(k: &Knee) -> f64 {
    k.demanded_rate.unwrap_or(k.step_value)
}

fn ranked(r: &Labelled, on: RankedOn) -> Ranked {
    let run = &r.run;
    let model = run.model().name();
    let summary = run.summary.as_ref();
    let there = there(r);
    let own = there.and_then(|s| Some((s, s.own_server()?)));
    let server = |q: &crate::quantity::Quantity| own.and_then(|(s, m)| q.of_server(s, m));
    let knee = summary.and_then(|s| s.knee.clone());
    let kept_up_to = summary.and_then(|s| s.kept_up_to);
    let p99_ms = there.map(|s| s.latency_ms.p99);
    let p99_lower_bound = there.is_some_and(|s| s.latency_ms.lower_bounds.contains("p99"));
    let p99_there = p99_ms.map(|p99| format!(" (p99 {})", human_ms(p99, p99_lower_bound)));
    let served = there.map(|s| s.ok_rate);
    let mut said = Vec::new();
    if let Some(c) = &run.capacity {
        let slos = match c.slos.is_empty() {
            true => "keeping up with the offer".to_string(),
            false => format!("under {}", c.slos.join(", ")),
        };
        let status = match c.status {
            crate::search::Status::Resolved => String::new(),
            s => format!(", {}", s.name()),
        };
        said.push(match c.max_rate {
            Some(m) => format!(
                "max {} {slos}{}{status}",
                step_value(model, m.offered),
                p99_there.clone().unwrap_or_default()
            ),
            None => format!("no rate passed {slos}{status}"),
        });
    }
    match &knee {
        Some(k) => said.push(format!(
            "knee at {} ({}{})",
            step_value(model, k.step_value),
            k.cause.name(),
            k.request
                .as_ref()
                .map_or(String::new(), |r| format!("; {}", r.headline()))
        )),
        None if run.steps.is_empty() => said.push("no step ran".to_string()),
        None => said.push("no knee in its steps".to_string()),
    }
    // A search's "there" is its highest passing probe, said above: how far it kept up adds nothing.
    if run.capacity.is_none() {
        match kept_up_to {
            Some(v) => said.push(format!(
                "kept up to {}{}",
                step_value(model, v),
                p99_there.unwrap_or_default()
            )),
            None if !run.steps.is_empty() => said.push("kept up with no step".to_string()),
            None => {}
        }
    }
    if let (RankedOn::Served, Some(v)) = (on, served) {
        said.push(format!("served {} there", step_value("requests", v)));
    }
    Ranked {
        rank: 0,
        label: r.label.clone(),
        axis: axis_of(run.model()),
        knee_at: knee.as_ref().map(knee_at),
        knee,
        kept_up_to: kept_up_at(r),
        at_step: there.map(|s| s.number),
        p99_ms,
        p99_lower_bound,
        served,
        server_cpu_util_pct: server(&SRV_CPU_UTIL_PCT),
        server_mem_mb: server(&SRV_MEM_MB).map(|v| (v * 10.0).round() / 10.0),
        ok_per_core_s: server(&OK_PER_CORE_S),
        trust: there.map(|s| s.trust),
        untrusted_steps: summary.map_or(0, |s| s.untrusted_steps.len()),
        max_rate: max_rate(r),
        search: run.capacity.as_ref().map(|c| c.status.name()),
        sentence: said.join("; "),
    }
}

/// The step the ranking's numbers are read at: a search's last passing probe at its highest
/// passing rate (a confirmation, when there was one), a planned run's kept-up step.
fn there(r: &Labelled) -> Option<&StepResult> {
    let run = &r.run;
    match &run.capacity {
        Some(c) => {
            let offered = c.max_rate?.offered;
            run.steps.iter().rev().find(|s| {
                (s.step_value - offered).abs() <= offered.abs() * 1e-9
                    && s.probe.as_ref().is_some_and(|p| p.class == Mark::Pass)
            })
        }
        None => {
            let n = run.summary.as_ref()?.kept_up_step?;
            run.steps.iter().find(|s| s.number == n)
        }
    }
}

/// The ranking's columns, as compare.tsv's block heads them (a search's two last).
pub const COLUMNS: [&str; 13] = [
    "rank",
    "target",
    "knee",
    "cause",
    "kept_up_to",
    // p99 and the server's numbers there, named as steps.tsv names their columns.
    P99_MS.key,
    SRV_CPU_UTIL_PCT.key,
    SRV_MEM_MB.key,
    OK_PER_CORE_S.key,
    "trust",
    "untrusted_steps",
    "max_rate",
    "search",
];

impl Ranked {
    /// The row's cells, for compare.tsv: numbers as numbers, empty where there is none.
    pub fn tsv_cells(&self) -> Vec<String> {
        let n = |v: Option<f64>| v.map_or(String::new(), |v| v.to_string());
        vec![
            self.rank.to_string(),
            self.label.clone(),
            n(self.knee_at),
            self.knee
                .as_ref()
                .map_or(String::new(), |k| k.cause.name().to_string()),
            n(self.kept_up_to),
            n(self.p99_ms),
            n(self.server_cpu_util_pct),
            n(self.server_mem_mb),
            n(self.ok_per_core_s),
            self.trust.map_or(String::new(), |t| t.name().to_string()),
            self.untrusted_steps.to_string(),
            n(self.max_rate),
            self.search.unwrap_or_default().to_string(),
        ]
    }

    /// The row's cells, for people: `11,000`, `1.4 ms`, `97%`, `52 MiB`, `-` where there is none;
    /// ranked `on` the rate served, the knee and kept-up value in its own unit (`8 connections`)
    /// and the rate served after the target.
    pub fn text_cells(&self, on: RankedOn) -> Vec<String> {
        let or_dash = |v: Option<String>| v.unwrap_or_else(|| "-".to_string());
        let knee = match &self.knee {
            Some(k) if !k.servers => format!("≥{}", self.value(knee_at(k), on)),
            Some(k) => self.value(knee_at(k), on),
            None => "-".to_string(),
        };
        let cause = self
            .knee
            .as_ref()
            .map_or_else(|| "none seen".to_string(), causes);
        let trust = match (self.trust, self.untrusted_steps) {
            (Some(t), 0) => t.name().to_string(),
            (Some(t), n) => format!("{} ({n} untrusted)", t.name()),
            (None, 0) => "-".to_string(),
            (None, n) => format!("{n} untrusted"),
        };
        let mut cells = vec![
            self.rank.to_string(),
            self.label.clone(),
            knee,
            cause,
            or_dash(self.kept_up_to.map(|v| self.value(v, on))),
            or_dash(self.p99_ms.map(|v| human_ms(v, self.p99_lower_bound))),
            or_dash(self.server_cpu_util_pct.map(|v| format!("{}%", human(v)))),
            or_dash(self.server_mem_mb.map(|v| format!("{} MiB", human(v)))),
            or_dash(self.ok_per_core_s.map(human)),
            trust,
        ];
        if on == RankedOn::Served {
            cells.insert(2, or_dash(self.served.map(human)));
        }
        cells
    }

    /// A value on the run's own axis: a bare number under a head that names the unit, with its
    /// unit where runs on different axes share a column.
    pub fn value(&self, v: f64, on: RankedOn) -> String {
        match on {
            RankedOn::Served => format!("{} {}", human(v), super::axis_unit(self.axis)),
            RankedOn::Knee | RankedOn::MaxRate => human(v),
        }
    }
}

/// The heads of the ranking's value columns, by what it is ranked on: each names its unit when the
/// runs share one, and the runs' own units are in the cells when they do not.
pub fn heads(ranking: &[Ranked], on: RankedOn) -> Heads {
    match on {
        RankedOn::Served => Heads {
            served: Some("served there (req/s)"),
            knee: "knee".into(),
            kept_up_to: "kept up to".into(),
            max: "max".into(),
        },
        RankedOn::Knee | RankedOn::MaxRate => {
            let unit = super::axis_unit(ranking.first().map_or("dem_req_rate", |r| r.axis));
            Heads {
                served: None,
                knee: format!("knee ({unit})"),
                kept_up_to: format!("kept up to ({unit})"),
                max: format!("max ({unit})"),
            }
        }
    }
}

/// The ranking's column heads that carry a unit (see [`heads`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Heads {
    /// The rate served at the kept-up step, shown when it is what the runs are ranked on.
    pub served: Option<&'static str>,
    pub knee: String,
    pub kept_up_to: String,
    /// A search's highest passing rate.
    pub max: String,
}

/// A knee's cause and those that held at the same step, for people, and of a named mix the
/// request that broke first (run.json `summary.knee.request`): `latency, plateau; search p99 ×40`.
pub fn causes(k: &Knee) -> String {
    let causes = std::iter::once(k.cause)
        .chain(k.also.iter().copied())
        .map(KneeCause::words)
        .collect::<Vec<_>>()
        .join(", ");
    match &k.request {
        Some(r) => format!("{causes}; {}", r.headline()),
        None => causes,
    }
}

/// The ranking as one table for stdout, a head line and a line per run, columns aligned (text
/// left, numbers right).
pub fn text_table(ranking: &[Ranked], on: RankedOn) -> String {
    let heads = heads(ranking, on);
    let mut head: Vec<String> = [
        "#",
        "target",
        &heads.knee,
        "cause",
        &heads.kept_up_to,
        "p99 there",
        "server CPU",
        "memory",
        "req/core-s",
        "trust",
    ]
    .map(str::to_string)
    .to_vec();
    let mut left = vec![
        false, true, false, true, false, false, false, false, false, true,
    ];
    let mut rows: Vec<Vec<String>> = ranking.iter().map(|r| r.text_cells(on)).collect();
    if let Some(served) = heads.served {
        head.insert(2, served.to_string());
        left.insert(2, false);
    }
    // Searches are ranked on their answer: it comes first, and "p99 there" is at it.
    if ranking.iter().any(|r| r.search.is_some()) {
        head.insert(2, heads.max.clone());
        head.insert(3, "search".to_string());
        left.splice(2..2, [false, true]);
        for (row, r) in rows.iter_mut().zip(ranking) {
            let max = r
                .max_rate
                .map_or_else(|| "-".to_string(), |v| r.value(v, on));
            row.insert(2, max);
            row.insert(3, r.search.unwrap_or("-").to_string());
        }
    }
    rows.insert(0, head);
    let widths: Vec<usize> = (0..left.len())
        .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for row in &rows {
        let cells: Vec<String> = row
            .iter()
            .zip(&widths)
            .zip(&left)
            .map(|((cell, &w), &left)| {
                if left {
                    format!("{cell:<w$}")
                } else {
                    format!("{cell:>w$}")
                }
            })
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::knee::KneeCause;
    use crate::run_file::RunFile;

    const GOLDEN: &str = include_str!("../../tests/golden/run.json");

    /// The golden run (100..600 req/s, kept up to 400), labelled, its knee at `knee` (req/s) when
    /// given.
    fn run(label: &str, knee: Option<(f64, KneeCause)>) -> Labelled {
        let mut run = RunFile::parse(GOLDEN, Path::new("run.json")).unwrap();
        let summary = run.summary.as_mut().unwrap();
        summary.knee = knee.map(|(v, cause)| Knee {
            step: (v / 100.0) as u32,
            step_value: v,
            demanded_rate: Some(v),
            cause,
            also: Vec::new(),
            servers: cause.is_servers(),
            low_p99_ms: Some(1.4),
            p99_ms: 59.0,
            p99_lower_bound: false,
            p99_ratio: Some(42.0),
            ok_rate: v,
            prev_ok_rate: None,
            failed_pct: 0.0,
            monitor: None,
            server_cpu_pct: None,
            server_cpu_util_pct: None,
            server_cores: None,
            server_thread_max_pct: None,
            ok_per_core_s: None,
            request: None,
        });
        Labelled {
            label: label.to_string(),
            source: format!("results/{label}"),
            run,
        }
    }

    fn order(ranking: &[Ranked]) -> Vec<(u32, &str)> {
        ranking.iter().map(|r| (r.rank, r.label.as_str())).collect()
    }

    /// A generator-bound knee is the generator's: the server's own lies at least that far, so it
    /// ranks ahead of a server that broke at the same value.
    #[test]
    fn a_generator_bound_knee_ranks_ahead_of_a_server_s_knee_at_the_same_value() {
        let runs = vec![
            run("broke", Some((500.0, KneeCause::Latency))),
            run("unknown", Some((500.0, KneeCause::GeneratorBound))),
        ];
        assert_eq!(order(&rank(&runs)), [(1, "unknown"), (2, "broke")]);
    }

    /// How far a run kept up is on the comparison's axis, as the knee is: the connections model's
    /// 40 conn/s of 10 requests each is 400 req/s, never 40 beside a knee in req/s.
    #[test]
    fn kept_up_to_is_on_the_axis_the_knee_is_on() {
        let mut r = run("httperf", None);
        for s in &mut r.run.steps {
            s.demanded_rate = Some(s.step_value);
            s.step_value /= 10.0;
        }
        let summary = r.run.summary.as_mut().unwrap();
        summary.kept_up_to = summary.kept_up_to.map(|v| v / 10.0);
        let ranking = rank(&[r]);
        assert_eq!(ranking[0].kept_up_to, Some(400.0));
    }

    #[test]
    fn the_later_the_knee_the_better_and_no_knee_is_beyond_the_ramp() {
        let runs = vec![
            run("node", Some((300.0, KneeCause::Latency))),
            run("go", Some((500.0, KneeCause::ServerCpu))),
            run("nginx", None),
            run("aiohttp", Some((200.0, KneeCause::Failures))),
        ];
        let ranking = rank(&runs);
        assert_eq!(
            order(&ranking),
            [(1, "nginx"), (2, "go"), (3, "node"), (4, "aiohttp")]
        );
        assert_eq!(ranking[1].knee_at, Some(500.0));
        assert_eq!(
            ranking[2].sentence,
            "knee at 300 req/s (latency); kept up to 400 req/s (p99 4.6 ms)"
        );
        assert_eq!(
            ranking[0].sentence,
            "no knee in its steps; kept up to 400 req/s (p99 4.6 ms)"
        );
    }

    #[test]
    fn the_request_that_broke_first_is_said_in_the_sentence_and_the_cause() {
        let mut r = run("app", Some((300.0, KneeCause::Latency)));
        let knee = r.run.summary.as_mut().unwrap().knee.as_mut().unwrap();
        knee.also = vec![KneeCause::Plateau];
        knee.request = Some(crate::knee::KneeRequest {
            name: "search".into(),
            by: KneeCause::Latency,
            low_p99_ms: Some(12.0),
            p99_ms: 480.0,
            p99_lower_bound: false,
            p99_ratio: Some(40.0),
            prev_failed_pct: Some(0.0),
            failed_pct: 0.0,
        });
        let ranking = rank(&[r.clone(), run("plain", Some((300.0, KneeCause::Latency)))]);
        assert_eq!(
            ranking[0].sentence,
            "knee at 300 req/s (latency; search p99 ×40); kept up to 400 req/s (p99 4.6 ms)"
        );
        let table = text_table(&ranking, RankedOn::Knee);
        assert!(
            table.contains("  latency, plateau; search p99 ×40  "),
            "{table}"
        );
        // compare.tsv's cause stays the machine's name; a knee with no request says nothing more.
        assert_eq!(ranking[0].tsv_cells()[3], "latency");
        assert_eq!(
            ranking[1].sentence,
            "knee at 300 req/s (latency); kept up to 400 req/s (p99 4.6 ms)"
        );
        assert_eq!(causes(ranking[1].knee.as_ref().unwrap()), "latency");
    }

    #[test]
    fn a_knee_at_the_last_step_ranks_behind_no_knee_and_ties_go_by_kept_up_to() {
        // Both ran up to 600: the one whose knee is at 600 broke there, the other did not.
        let runs = vec![
            run("broke", Some((600.0, KneeCause::Plateau))),
            run("held", None),
        ];
        assert_eq!(order(&rank(&runs)), [(1, "held"), (2, "broke")]);
        // Without knees (files written before knees were named) the farther kept up is first.
        let mut less = run("less", None);
        let summary = less.run.summary.as_mut().unwrap();
        (summary.kept_up_to, summary.kept_up_step) = (Some(300.0), Some(3));
        let runs = vec![less, run("more", None), run("same", None)];
        assert_eq!(order(&rank(&runs)), [(1, "more"), (1, "same"), (3, "less")]);
    }

    #[test]
    fn a_run_with_no_step_is_last_and_said_so() {
        let mut empty = run("empty", None);
        empty.run.steps.clear();
        empty.run.summary.as_mut().unwrap().kept_up_to = None;
        let runs = vec![empty, run("low", Some((100.0, KneeCause::Failures)))];
        let ranking = rank(&runs);
        assert_eq!(order(&ranking), [(1, "low"), (2, "empty")]);
        assert_eq!(ranking[1].sentence, "no step ran");
    }

    #[test]
    fn the_server_numbers_are_its_own_monitor_s_at_the_kept_up_step() {
        let mut with = run("with", None);
        let kept = with.run.summary.as_ref().unwrap().kept_up_step.unwrap();
        for s in &mut with.run.steps {
            let util = if s.number == kept { 80.0 } else { 10.0 };
            s.server_monitors = vec![crate::example_server("web", util, 2.0)];
        }
        let ranking = rank(&[with, run("without", None)]);
        let with = ranking.iter().find(|r| r.label == "with").unwrap();
        assert_eq!(with.server_cpu_util_pct, Some(80.0));
        assert!(with.server_mem_mb.is_some());
        // 1.6 cores busy at the kept-up step.
        let ok_rate =
            RunFile::parse(GOLDEN, Path::new("run.json")).unwrap().steps[kept as usize - 1].ok_rate;
        // As the step has it, unrounded: the same number in steps.tsv, run.json and compare.
        let per_core = with.ok_per_core_s.unwrap();
        assert!((per_core - ok_rate / 1.6).abs() < 5e-4, "{per_core}");
        let without = ranking.iter().find(|r| r.label == "without").unwrap();
        assert_eq!(
            (without.server_cpu_util_pct, without.ok_per_core_s),
            (None, None)
        );
        let cells = without.text_cells(RankedOn::Knee);
        assert_eq!(cells[6], "-", "no monitor, no CPU: {cells:?}");
    }

    const SEARCH: &str = include_str!("../../tests/golden/find-max-run/run.json");

    /// The golden search (max 800 req/s under p99<50ms, passed at probes 4 and 8), every rate
    /// scaled by `scale`, its knee at `knee` (req/s, before scaling) when given.
    fn search(label: &str, scale: f64, knee: Option<f64>) -> Labelled {
        let mut file = RunFile::parse(SEARCH, Path::new("run.json")).unwrap();
        for s in &mut file.steps {
            s.step_value *= scale;
            s.demanded_rate = s.demanded_rate.map(|d| d * scale);
        }
        let c = file.capacity.as_mut().unwrap();
        c.max_rate.as_mut().unwrap().offered *= scale;
        let mut r = run_of(label, file);
        let knee = knee.map(|v| run("k", Some((v * scale, KneeCause::Latency))));
        r.run.summary.as_mut().unwrap().knee = knee.and_then(|k| k.run.summary?.knee);
        r
    }

    fn run_of(label: &str, run: RunFile) -> Labelled {
        Labelled {
            label: label.to_string(),
            source: format!("results/{label}"),
            run,
        }
    }

    /// Searches are ranked on their answers, not on a knee read off probes that go up and down;
    /// the numbers are those of the last probe that passed at the highest passing rate.
    #[test]
    fn searches_are_ranked_by_the_rate_each_sustained_with_its_numbers_at_that_probe() {
        let runs = vec![
            // The later knee, but the lower rate sustained.
            search("node", 1.0, Some(1600.0)),
            search("go", 2.0, Some(400.0)),
        ];
        assert!(searches(&runs));
        let ranking = rank(&runs);
        assert_eq!(order(&ranking), [(1, "go"), (2, "node")]);
        let node = &ranking[1];
        assert_eq!(
            (node.max_rate, node.search),
            (Some(800.0), Some("resolved"))
        );
        // Probe 8, the confirmation at 800: p99 34.1 ms (probe 4's was 12.5).
        assert_eq!((node.at_step, node.p99_ms), (Some(8), Some(34.111)));
        assert_eq!(
            node.sentence,
            "max 800 req/s under p99<50ms (p99 34 ms); knee at 1,600 req/s (latency)"
        );
        let cells = ranking[0].tsv_cells();
        assert_eq!(
            cells[cells.len() - 2..],
            ["1600".to_string(), "resolved".to_string()]
        );
        let table = text_table(&ranking, RankedOn::MaxRate);
        let head = table.lines().next().unwrap();
        assert!(
            head.starts_with("#  target  max (req/s)  search    knee (req/s)"),
            "{table}"
        );
        // A search beside a planned run is ranked as a run: the two answers are not one measure.
        let mixed = vec![search("node", 1.0, None), run("planned", None)];
        assert!(!searches(&mixed));
        assert_eq!(order(&rank(&mixed))[0].1, "node", "its probes reach 1,600");
    }

    #[test]
    fn the_text_table_is_one_aligned_line_per_run_best_first() {
        let runs = vec![
            run("node", Some((300.0, KneeCause::Latency))),
            run("go", Some((500.0, KneeCause::GeneratorBound))),
        ];
        let table = text_table(&rank(&runs), RankedOn::Knee);
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines.len(), 3, "{table}");
        assert!(lines[0].starts_with("#  target  knee (req/s)"), "{table}");
        // A generator-bound knee is the generator's: the server's lies at or beyond it.
        assert!(
            lines[1].starts_with("1  go") && lines[1].contains("≥500  generator bound"),
            "{table}"
        );
        assert!(lines[2].starts_with("2  node") && lines[2].contains("300  latency"));
        let at = |l: &str| l[..l.find("4.6 ms").unwrap()].chars().count();
        assert_eq!(at(lines[1]), at(lines[2]), "aligned:\n{table}");
    }
}
