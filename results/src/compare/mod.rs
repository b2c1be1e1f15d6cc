//! Runs compared side by side (`stampede compare`): ranked by where each server broke
//! ([`ranking`]), and joined on the step value (the load offered, never the time), every step's
//! metrics set against a baseline run's, a change of at most the threshold (or under what the
//! measurement resolves) called noise. Pure: run files in, a [`Comparison`] out, which compare.json
//! serializes whole and from which compare.tsv and the compare page are made.
mod banner;
pub mod gate;
pub mod metric;
pub mod per_request;
pub mod ranking;
mod tsv;

use std::collections::BTreeMap;

use serde::Serialize;

pub use gate::{Gate, GateError, Judged};
pub use metric::{Better, Change, Compared, METRICS, Reading};
pub use ranking::{Ranked, RankedOn};

use crate::run_file::RunFile;
use crate::step::{StepResult, human, human_ms, step_value};
use crate::verdict::{Server, Verdict};
use shared::plan::LoadModel;

/// compare.json's schema name; bump it when a field changes meaning.
pub const COMPARE_SCHEMA: &str = "stampede.compare/2";

/// The threshold when none is given: a change of at most 5 % is noise.
pub const DEFAULT_THRESHOLD_PCT: f64 = 5.0;

/// One run to compare, with the name it goes by.
#[derive(Debug, Clone, PartialEq)]
pub struct Labelled {
    pub label: String,
    /// Where it was read from (its results directory), for messages and the page.
    pub source: String,
    pub run: RunFile,
}

/// How far a value may move before it is a change, in %: at least 0, finite.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Threshold(f64);

impl Threshold {
    /// `5%`, `5` or `2.5 %`.
    pub fn parse(text: &str) -> Result<Threshold, CompareError> {
        let bad = |why: &str| CompareError::Threshold {
            text: text.to_string(),
            why: why.to_string(),
        };
        let number = text.trim().trim_end_matches('%').trim_end();
        let pct: f64 = number
            .parse()
            .map_err(|_| bad("not a number of percent, e.g. 5%"))?;
        Threshold::try_new(pct).map_err(|_| bad("it must be a finite percentage of at least 0"))
    }

    pub fn try_new(pct: f64) -> Result<Threshold, CompareError> {
        if pct.is_finite() && pct >= 0.0 {
            Ok(Threshold(pct))
        } else {
            Err(CompareError::Threshold {
                text: pct.to_string(),
                why: "it must be a finite percentage of at least 0".into(),
            })
        }
    }

    pub fn pct(self) -> f64 {
        self.0
    }
}

impl Default for Threshold {
    fn default() -> Threshold {
        Threshold(DEFAULT_THRESHOLD_PCT)
    }
}

/// Why runs could not be compared.
#[derive(Debug, thiserror::Error)]
pub enum CompareError {
    #[error("nothing to compare with: give at least two runs (got {0})")]
    TooFew(usize),
    #[error("{dir}: its label is empty; give it a --label")]
    EmptyLabel { dir: String },
    #[error("{dir}: label `{label}` holds a tab, a line break or another control character")]
    BadLabel { dir: String, label: String },
    #[error("two runs are labelled `{label}` ({first} and {second}); give each its own --label")]
    DuplicateLabel {
        label: String,
        first: String,
        second: String,
    },
    #[error("--baseline {label}: no run is labelled so (the labels are {known})")]
    UnknownBaseline { label: String, known: String },
    #[error("--threshold {text}: {why}")]
    Threshold { text: String, why: String },
}

/// The runs compared, step by step, against the baseline.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Comparison {
    #[cfg_attr(
        feature = "schema",
        schemars(schema_with = "crate::schema::compare_id")
    )]
    pub schema: &'static str,
    /// What the steps are joined on, as compare.tsv's first column: `dem_req_rate` (demanded
    /// requests/s), or `connections` when the baseline is a closed loop.
    pub axis: &'static str,
    /// The baseline's label.
    pub baseline: String,
    pub threshold_pct: f64,
    pub metrics: Vec<MetricInfo>,
    pub runs: Vec<RunEntry>,
    /// What the ranking puts first: the knee, a search's highest passing rate, or (runs on
    /// different axes) the requests/s served at the kept-up step.
    pub ranked_on: RankedOn,
    /// The runs ranked by their knee, best first, or searches by the highest rate each sustained,
    /// or runs on different axes by the rate each served (see [`ranking`]).
    pub ranking: Vec<Ranked>,
    /// Searches compared (`find-max NAME=URL ...`): their answers in one line, best first, "max
    /// under p99<50ms: nginx 31,200 req/s, go 14,900, node 11,800"; absent for planned runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_under_slo: Option<String>,
    /// Differences between the runs' plans, each a sentence: the comparison is made anyway.
    pub banners: Vec<String>,
    /// One row per step value of any run, ascending.
    pub steps: Vec<StepRow>,
    /// Steps whose numbers can be trusted, on both sides, that got worse beyond the threshold.
    pub regressions: Vec<Regression>,
    /// A named mix's requests compared name by name, step by step; absent when no run has one.
    #[serde(skip_serializing_if = "per_request::PerRequest::is_empty")]
    pub per_request: per_request::PerRequest,
    /// `--regression` gates, each judged ([`gate::judge`], set by the caller that was given them);
    /// absent when none was given.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub gates: Vec<Judged>,
    /// The runs as read, for compare.tsv (which tabulates every column of steps.tsv).
    #[serde(skip)]
    inputs: Vec<Labelled>,
}

/// A compared metric as compare.json lists it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct MetricInfo {
    pub name: &'static str,
    pub unit: &'static str,
    pub better: Better,
}

/// One run, as the comparison names and sums it up.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct RunEntry {
    pub label: String,
    pub source: String,
    pub baseline: bool,
    pub target: String,
    pub started_at: String,
    pub status: crate::run_file::RunStatus,
    pub version: String,
    pub model: &'static str,
    pub agents: usize,
    pub headline: Headline,
    /// A capacity search's answer, as its run.json has it (`stampede find-max`); absent for a
    /// planned run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capacity: Option<crate::search::Capacity>,
}

/// A run's answer in a line: how far it kept up, and its p99 there.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Headline {
    pub kept_up_to: Option<f64>,
    pub kept_up_p99_ms: Option<f64>,
    pub kept_up_p99_lower_bound: bool,
    /// How much further (or less far) it kept up than the baseline, in % of the baseline's value;
    /// none for the baseline, when either kept up with no step, or when their steps are different
    /// quantities (connections against requests/s).
    pub kept_up_vs_baseline_pct: Option<f64>,
    /// The requests/s served at the kept-up step (`ok_rate`), whatever the model.
    pub served_at_kept_up: Option<f64>,
    /// How much more (or less) it served there than the baseline at its own kept-up step, in % of
    /// the baseline's: what runs on different axes are set against it by, in place of
    /// `kept_up_vs_baseline_pct`; none otherwise.
    pub served_vs_baseline_pct: Option<f64>,
    pub peak_ok_rate: f64,
    /// "kept up to 400 req/s (p99 5.5 ms)", or "kept up with no step".
    pub sentence: String,
    /// The run's whole answer, as run.json's `summary` says it.
    pub answer: String,
}

impl Headline {
    /// How it compares with the baseline, for stdout's line of the run: `, -25.0% against nginx`,
    /// or across axes `, served 2,000 req/s there: +400.0% against nginx's 399`; empty for the
    /// baseline and where there is nothing to set against it.
    pub fn versus(&self, baseline: &str) -> String {
        match (
            self.kept_up_vs_baseline_pct,
            self.served_vs_baseline_pct,
            self.served_at_kept_up,
        ) {
            (Some(d), _, _) => format!(", {d:+.1}% against {baseline}"),
            (None, Some(d), Some(v)) => {
                let then = v / (1.0 + d / 100.0);
                format!(
                    ", served {} there: {d:+.1}% against {baseline}'s {}",
                    step_value("requests", v),
                    human(then)
                )
            }
            _ => String::new(),
        }
    }
}

/// One step value, in every run that has it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct StepRow {
    /// The joined value (see [`Comparison::axis`]).
    pub value: f64,
    /// Index-aligned with [`Comparison::runs`]; none where a run has no such step.
    pub runs: Vec<Option<RunStep>>,
}

/// One run's step in a row.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct RunStep {
    /// Counted from 1, as the run's own table counts.
    pub step: u32,
    /// The plan's value (conn/s, req/s or connections).
    pub step_value: f64,
    pub trust: Verdict,
    pub server: Server,
    /// Index-aligned with [`Comparison::metrics`].
    pub cells: Vec<CellEntry>,
}

/// One metric of one run's step, against the baseline's in the same row.
///
/// compare.json leaves out what is none or false (a cell is written for every metric of every
/// run's step, and the page embeds them all): an absent `value` or `delta_pct` is none, an absent
/// flag false.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct CellEntry {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<f64>,
    /// This value is a lower bound.
    #[serde(skip_serializing_if = "is_false")]
    pub lower_bound: bool,
    /// The baseline's value in this row is a lower bound.
    #[serde(skip_serializing_if = "is_false")]
    pub baseline_lower_bound: bool,
    /// This step or the baseline's was not trusted (`trust` invalid).
    #[serde(skip_serializing_if = "is_false")]
    pub untrusted: bool,
    /// The change against the baseline, in % to three decimals (none: the baseline itself, no
    /// value to compare with, or a rise from 0 that has no finite size).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delta_pct: Option<f64>,
    pub class: Change,
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// A trusted step that got worse beyond the threshold.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Regression {
    pub label: String,
    pub value: f64,
    pub step: u32,
    pub metric: &'static str,
    pub baseline_value: f64,
    pub candidate_value: f64,
    pub delta_pct: Option<f64>,
    /// Where, in words: "app at 400 req/s (step 4)".
    pub at: String,
    /// What, in words: "p99_ms 12.3 ms against 5.1 ms (+141.2%)".
    pub change: String,
}

impl Regression {
    /// "app at 400 req/s (step 4): p99_ms 12.3 ms against 5.1 ms (+141.2%)".
    pub fn sentence(&self) -> String {
        format!("{}: {}", self.at, self.change)
    }
}

/// The axis a run's steps are on, as [`Comparison::axis`] names it: a closed loop's connections,
/// or the demanded requests/s of an open model (a connections run's rate × `--num-call`).
pub fn axis_of(model: LoadModel) -> &'static str {
    match model {
        LoadModel::Concurrency => "connections",
        LoadModel::Connections | LoadModel::Requests => "dem_req_rate",
    }
}

/// An axis' unit, as a column head or a value says it: `connections`, `req/s`.
pub fn axis_unit(axis: &str) -> &'static str {
    match axis {
        "connections" => "connections",
        _ => "req/s",
    }
}

/// The value a step is joined on: steps.tsv's first column (demanded requests/s, or the
/// connection count of a closed loop), so compare.tsv's first column is what joined its rows.
pub(crate) fn joined_value(r: &StepResult) -> f64 {
    r.demanded_rate.unwrap_or(r.step_value)
}

/// The join key of a value: to the table's three decimals, so 0.1 + 0.2 meets 0.3.
fn key(v: f64) -> i64 {
    (v * 1000.0).round() as i64
}

/// Compares `runs` against the one labelled `baseline` (the first when none).
pub fn compare(
    runs: Vec<Labelled>,
    baseline: Option<&str>,
    threshold: Threshold,
) -> Result<Comparison, CompareError> {
    check_labels(&runs)?;
    let base = match baseline {
        None => 0,
        Some(label) => runs.iter().position(|r| r.label == label).ok_or_else(|| {
            CompareError::UnknownBaseline {
                label: label.to_string(),
                known: runs
                    .iter()
                    .map(|r| format!("`{}`", r.label))
                    .collect::<Vec<_>>()
                    .join(", "),
            }
        })?,
    };
    let steps = rows(&runs, base, threshold.pct());
    let regressions = regressions(&runs, &steps, base);
    let per_request = per_request::compare(&runs, &steps, base, threshold.pct());
    let model = runs[base].run.model();
    let ranking = ranking::rank(&runs);
    let ranked_on = ranking::ranked_on(&runs);
    let mut banners = banner::plan_differences(&runs);
    // Each search chooses its own rates: that they differ is how searches work, not news.
    if !ranking::searches(&runs) {
        banners.extend(banner::missing_steps(&runs, &steps, model.name()));
    }
    Ok(Comparison {
        schema: COMPARE_SCHEMA,
        axis: axis_of(model),
        baseline: runs[base].label.clone(),
        threshold_pct: threshold.pct(),
        metrics: METRICS
            .iter()
            .map(|m| MetricInfo {
                name: m.name,
                unit: m.unit,
                better: m.better,
            })
            .collect(),
        runs: runs
            .iter()
            .enumerate()
            .map(|(i, r)| entry(r, i == base, &runs[base]))
            .collect(),
        max_under_slo: max_under_slo(&runs, &ranking),
        ranked_on,
        ranking,
        banners,
        steps,
        regressions,
        per_request,
        gates: Vec::new(),
        inputs: runs,
    })
}

/// Searches' answers in one line, in the ranking's order (see [`crate::search::capacity::ranking`]).
fn max_under_slo(runs: &[Labelled], ranking: &[Ranked]) -> Option<String> {
    // Searches on different axes have no one unit to say their answers in.
    if ranking::ranked_on(runs) != RankedOn::MaxRate {
        return None;
    }
    let ranked: Vec<(&str, &crate::search::Capacity)> = ranking
        .iter()
        .filter_map(|r| {
            let run = runs.iter().find(|i| i.label == r.label)?;
            Some((r.label.as_str(), run.run.capacity.as_ref()?))
        })
        .collect();
    Some(crate::search::capacity::ranking(&ranked))
}

impl Comparison {
    /// The runs as they were read, index-aligned with [`Comparison::runs`].
    pub fn inputs(&self) -> &[Labelled] {
        &self.inputs
    }

    /// compare.json's text: pretty, in the field order above.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a Comparison has string keys and finite numbers")
    }

    /// The regressions in words, a line per step that regressed: "app at 400 req/s (step 4):
    /// p50_ms …; p99_ms …".
    pub fn regressions_by_step(&self) -> Vec<String> {
        let mut lines: Vec<(&str, Vec<&str>)> = Vec::new();
        for r in &self.regressions {
            match lines.last_mut() {
                Some((at, changes)) if *at == r.at => changes.push(&r.change),
                _ => lines.push((&r.at, vec![&r.change])),
            }
        }
        lines
            .into_iter()
            .map(|(at, changes)| format!("{at}: {}", changes.join("; ")))
            .collect()
    }

    /// The ranking as one table for people (stdout's last).
    pub fn ranking_table(&self) -> String {
        ranking::text_table(&self.ranking, self.ranked_on)
    }

    /// The baseline's index in [`Comparison::runs`].
    pub fn baseline_index(&self) -> usize {
        self.runs.iter().position(|r| r.baseline).unwrap_or(0)
    }
}

fn check_labels(runs: &[Labelled]) -> Result<(), CompareError> {
    if runs.len() < 2 {
        return Err(CompareError::TooFew(runs.len()));
    }
    let mut seen: BTreeMap<&str, &str> = BTreeMap::new();
    for r in runs {
        if r.label.trim().is_empty() {
            return Err(CompareError::EmptyLabel {
                dir: r.source.clone(),
            });
        }
        // A label is a column suffix in compare.tsv and a name on the page: one line of text.
        if r.label.chars().any(char::is_control) {
            return Err(CompareError::BadLabel {
                dir: r.source.clone(),
                label: r.label.escape_debug().to_string(),
            });
        }
        if let Some(first) = seen.insert(&r.label, &r.source) {
            return Err(CompareError::DuplicateLabel {
                label: r.label.clone(),
                first: first.to_string(),
                second: r.source.clone(),
            });
        }
    }
    Ok(())
}

/// A row being joined: its value, and each run's step there.
type Joining<'a> = (f64, Vec<Option<&'a StepResult>>);

/// Every run's steps joined on their value. A run that ran one value twice (a re-check at the end
/// of a ramp) has a row per time, its n-th such step joined with the other runs' n-th.
fn rows(runs: &[Labelled], base: usize, threshold_pct: f64) -> Vec<StepRow> {
    let mut joined: BTreeMap<(i64, usize), Joining> = BTreeMap::new();
    for (i, r) in runs.iter().enumerate() {
        let mut times: BTreeMap<i64, usize> = BTreeMap::new();
        for s in &r.run.steps {
            let v = joined_value(s);
            let n = times.entry(key(v)).or_default();
            let row = joined
                .entry((key(v), *n))
                .or_insert_with(|| (v, vec![None; runs.len()]));
            row.1[i] = Some(s);
            *n += 1;
        }
    }
    joined
        .into_values()
        .map(|(value, steps)| StepRow {
            value,
            runs: steps
                .iter()
                .enumerate()
                .map(|(i, s)| s.map(|s| run_step(s, steps[base], i == base, threshold_pct)))
                .collect(),
        })
        .collect()
}

/// One run's step against the baseline's step of the same row (itself, for the baseline).
fn run_step(
    s: &StepResult,
    base: Option<&StepResult>,
    is_base: bool,
    threshold_pct: f64,
) -> RunStep {
    let cells = METRICS
        .iter()
        .map(|m| {
            let now = m.read(s);
            let then = base.and_then(|b| m.read(b));
            let untrusted =
                s.trust == Verdict::Invalid || base.is_some_and(|b| b.trust == Verdict::Invalid);
            let (delta_pct, class) = match (then, now) {
                _ if is_base => (None, Change::Baseline),
                (Some(b), Some(n)) => (m.delta_pct(b.value, n.value), m.class(b, n, threshold_pct)),
                _ => (None, Change::Missing),
            };
            CellEntry {
                value: now.map(|n| n.value),
                lower_bound: now.is_some_and(|n| n.lower_bound),
                baseline_lower_bound: !is_base && then.is_some_and(|b| b.lower_bound),
                untrusted,
                delta_pct,
                class,
            }
        })
        .collect();
    RunStep {
        step: s.number,
        step_value: s.step_value,
        trust: s.trust,
        server: s.server,
        cells,
    }
}

fn regressions(runs: &[Labelled], rows: &[StepRow], base: usize) -> Vec<Regression> {
    let mut out = Vec::new();
    for row in rows {
        let Some(b) = &row.runs[base] else {
            continue;
        };
        for (i, s) in row.runs.iter().enumerate() {
            let Some(s) = s else { continue };
            for (m, (cell, base_cell)) in METRICS.iter().zip(s.cells.iter().zip(&b.cells)) {
                if !m.judged || cell.class != Change::Worse || cell.untrusted {
                    continue;
                }
                let (Some(then), Some(now)) = (base_cell.value, cell.value) else {
                    continue;
                };
                let model = runs[i].run.model().name();
                out.push(Regression {
                    label: runs[i].label.clone(),
                    value: row.value,
                    step: s.step,
                    metric: m.name,
                    baseline_value: then,
                    candidate_value: now,
                    delta_pct: cell.delta_pct,
                    at: format!(
                        "{} at {} (step {})",
                        runs[i].label,
                        step_value(model, s.step_value),
                        s.step
                    ),
                    change: format!(
                        "{} {} against {} ({})",
                        m.name,
                        in_unit(m, now, cell.lower_bound),
                        in_unit(m, then, base_cell.lower_bound),
                        cell.delta_pct
                            .map_or("from 0".to_string(), |d| format!("{d:+.1}%")),
                    ),
                });
            }
        }
    }
    out
}

/// A metric's value for people: `5.5 ms`, `≥2.0 s`, `400/s`, `3.0%`.
pub fn in_unit(m: &Compared, v: f64, lower_bound: bool) -> String {
    match m.unit {
        "ms" => human_ms(v, lower_bound),
        "%" => format!("{}%", human(v)),
        unit => format!("{}{unit}", human(v)),
    }
}

/// A run's step it kept up with last.
fn kept_step(run: &RunFile) -> Option<&StepResult> {
    let n = run.summary.as_ref()?.kept_up_step?;
    run.steps.iter().find(|s| s.number == n)
}

/// `now` against `then` in % of `then`, to three decimals; none without both or from 0.
fn pct_of(now: Option<f64>, then: Option<f64>) -> Option<f64> {
    match (now, then) {
        (Some(v), Some(b)) if b > 0.0 => Some(((v - b) / b * 100_000.0).round() / 1000.0),
        _ => None,
    }
}

fn entry(r: &Labelled, baseline: bool, base: &Labelled) -> RunEntry {
    let run = &r.run;
    let model = run.model().name();
    let summary = run.summary.as_ref();
    let kept = kept_step(run);
    let served_at_kept_up = kept.map(|s| s.ok_rate);
    // Connections against requests/s is no percent: then only the rates served are set apart.
    let one_axis = axis_of(run.model()) == axis_of(base.run.model());
    let p99_bound = kept.is_some_and(|s| s.latency_ms.lower_bounds.contains("p99"));
    let kept_up_to = summary.and_then(|s| s.kept_up_to);
    let kept_up_p99_ms = summary.and_then(|s| s.kept_up_p99_ms);
    let sentence = match (kept_up_to, kept_up_p99_ms) {
        (Some(v), Some(p99)) => format!(
            "kept up to {} (p99 {})",
            step_value(model, v),
            human_ms(p99, p99_bound)
        ),
        (Some(v), None) => format!("kept up to {}", step_value(model, v)),
        _ if run.steps.is_empty() => "no step ran".to_string(),
        _ => "kept up with no step".to_string(),
    };
    RunEntry {
        label: r.label.clone(),
        source: r.source.clone(),
        baseline,
        target: run.target.clone(),
        started_at: run.started_at.clone(),
        status: run.status,
        version: run.tool.version.clone(),
        model,
        agents: run.agents.len(),
        headline: Headline {
            kept_up_to,
            kept_up_p99_ms,
            kept_up_p99_lower_bound: p99_bound,
            kept_up_vs_baseline_pct: match !baseline && one_axis {
                true => pct_of(
                    kept_up_to,
                    base.run.summary.as_ref().and_then(|b| b.kept_up_to),
                ),
                false => None,
            },
            served_at_kept_up,
            served_vs_baseline_pct: match !baseline && !one_axis {
                true => pct_of(served_at_kept_up, kept_step(&base.run).map(|s| s.ok_rate)),
                false => None,
            },
            peak_ok_rate: summary.map_or(0.0, |s| s.peak_ok_rate),
            sentence,
            // The headline where the run has one (older files: their whole answer).
            answer: summary.map_or_else(
                || "no step ran".to_string(),
                |s| {
                    if s.headline.is_empty() {
                        s.answer.clone()
                    } else {
                        s.headline.clone()
                    }
                },
            ),
        },
        capacity: run.capacity.clone(),
    }
}

#[cfg(test)]
mod tests;
