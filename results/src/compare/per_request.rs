//! A named mix's requests compared (run.json `steps[].per_request`): on each joined step, each name
//! the baseline and a run both have, its p99, served rate and failed share against the baseline's,
//! classed by the step's own rule ([`Compared::class`]: the threshold and the floor of what the
//! histogram resolves); and the names only one side has, listed as such. Shown, never a
//! regression: the step's own metrics judge a run.
use serde::Serialize;

use super::metric::{Compared, METRICS, Reading};
use super::{CellEntry, Change, Labelled, StepRow};
use crate::quantity::{FAILED_PCT, OK_RATE, P99_MS};
use crate::step::StepResult;
use crate::step::per_request::RequestRow;

/// The metrics compared per name, in the table's order, by their steps.tsv names.
pub const NAME_METRICS: [&str; 3] = [P99_MS.key, OK_RATE.key, FAILED_PCT.key];

/// The compared metrics of [`NAME_METRICS`], from the step's catalogue (same units, same rule).
pub fn name_metrics() -> [Compared; 3] {
    NAME_METRICS.map(|n| {
        *METRICS
            .iter()
            .find(|m| m.name == n)
            .expect("a name metric is a step metric")
    })
}

/// The names compared, per step and name (compare.json `per_request`); empty when no run has a
/// named mix.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct PerRequest {
    /// [`NAME_METRICS`].
    pub metrics: Vec<&'static str>,
    /// One row per joined step value and name the baseline has, in the steps' then the plan's
    /// order.
    pub rows: Vec<NameRow>,
    /// Per run other than the baseline, the names only one of the two has (none listed when they
    /// have the same).
    pub only: Vec<OnlyIn>,
}

impl PerRequest {
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty() && self.only.is_empty()
    }
}

/// One name at one joined step value, in every run.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct NameRow {
    pub value: f64,
    pub name: String,
    /// Index-aligned with the comparison's runs: none where a run has no such step or name.
    pub runs: Vec<Option<NameStep>>,
}

/// One run's row of a name at a step.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct NameStep {
    pub step: u32,
    /// The plan's value (conn/s, req/s or connections).
    pub step_value: f64,
    /// Index-aligned with [`NAME_METRICS`].
    pub cells: Vec<CellEntry>,
}

/// The names a run and the baseline do not share.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct OnlyIn {
    pub label: String,
    /// Names this run has and the baseline has not.
    pub run_only: Vec<String>,
    /// Names the baseline has and this run has not.
    pub baseline_only: Vec<String>,
}

/// A name's value of metric `m` in a step: its p99 (a lower bound when it had requests given up,
/// whose ages are among its values), its served rate, its failed share; no latency when it neither
/// served nor gave anything up.
fn read(m: &Compared, r: &RequestRow) -> Option<Reading> {
    let (value, lower_bound) = if m.name == P99_MS.key {
        if r.ok == 0 && r.given_up == 0 {
            return None;
        }
        (r.latency_ms.p99, r.given_up > 0)
    } else if m.name == OK_RATE.key {
        (r.ok_rate, false)
    } else if m.name == FAILED_PCT.key {
        (r.failed_pct, false)
    } else {
        return None;
    };
    Some(Reading { value, lower_bound })
}

/// Every name of every run's steps, in the order first seen.
fn names_of(run: &Labelled) -> Vec<&str> {
    let mut out: Vec<&str> = Vec::new();
    for r in run.run.steps.iter().flat_map(|s| &s.per_request) {
        if !out.contains(&r.name.as_str()) {
            out.push(&r.name);
        }
    }
    out
}

/// The names compared across `runs`' joined `rows` against run `base`.
pub fn compare(runs: &[Labelled], rows: &[StepRow], base: usize, threshold_pct: f64) -> PerRequest {
    let base_names = names_of(&runs[base]);
    let only: Vec<OnlyIn> = runs
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != base)
        .filter_map(|(_, r)| {
            let names = names_of(r);
            let run_only: Vec<String> = names
                .iter()
                .filter(|n| !base_names.contains(n))
                .map(|n| n.to_string())
                .collect();
            let baseline_only: Vec<String> = base_names
                .iter()
                .filter(|n| !names.contains(n))
                .map(|n| n.to_string())
                .collect();
            (!run_only.is_empty() || !baseline_only.is_empty()).then(|| OnlyIn {
                label: r.label.clone(),
                run_only,
                baseline_only,
            })
        })
        .collect();
    if base_names.is_empty() && only.is_empty() {
        return PerRequest::default();
    }
    let metrics = name_metrics();
    let mut out_rows = Vec::new();
    for row in rows {
        // The steps of this row, found again by their run and number (a value run twice has a row
        // per time, each with its own step number).
        let steps: Vec<Option<&StepResult>> = row
            .runs
            .iter()
            .zip(runs)
            .map(|(s, r)| {
                let n = s.as_ref()?.step;
                r.run.steps.iter().find(|s| s.number == n)
            })
            .collect();
        let Some(b) = steps[base] else { continue };
        for base_row in &b.per_request {
            let name = &base_row.name;
            let cells = |i: usize| -> Option<NameStep> {
                let s = steps[i]?;
                let r = s.per_request.iter().find(|r| r.name == *name)?;
                let untrusted = s.trust == crate::verdict::Verdict::Invalid
                    || b.trust == crate::verdict::Verdict::Invalid;
                let cells = metrics
                    .iter()
                    .map(|m| {
                        let now = read(m, r);
                        let then = read(m, base_row);
                        let (delta_pct, class) = match (then, now) {
                            _ if i == base => (None, Change::Baseline),
                            (Some(t), Some(n)) => {
                                (m.delta_pct(t.value, n.value), m.class(t, n, threshold_pct))
                            }
                            _ => (None, Change::Missing),
                        };
                        CellEntry {
                            value: now.map(|n| n.value),
                            lower_bound: now.is_some_and(|n| n.lower_bound),
                            baseline_lower_bound: i != base && then.is_some_and(|t| t.lower_bound),
                            untrusted,
                            delta_pct,
                            class,
                        }
                    })
                    .collect();
                Some(NameStep {
                    step: s.number,
                    step_value: s.step_value,
                    cells,
                })
            };
            let runs_of_name: Vec<Option<NameStep>> = (0..runs.len()).map(cells).collect();
            // A name no other run has at this step compares with nothing: it is in `only`.
            if runs_of_name
                .iter()
                .enumerate()
                .any(|(i, s)| i != base && s.is_some())
            {
                out_rows.push(NameRow {
                    value: row.value,
                    name: name.clone(),
                    runs: runs_of_name,
                });
            }
        }
    }
    PerRequest {
        metrics: NAME_METRICS.to_vec(),
        rows: out_rows,
        only,
    }
}

/// A name's change beyond the noise, in words: "app at 400 req/s (step 4) search: p99_ms 12 ms
/// against 5.1 ms (+135.3%)", for each run's cells classed `class` (worse, or better).
pub fn changes(c: &super::Comparison, class: Change) -> Vec<String> {
    let metrics = name_metrics();
    let base = c.baseline_index();
    let mut out = Vec::new();
    for row in &c.per_request.rows {
        let Some(b) = &row.runs[base] else { continue };
        for (i, s) in row.runs.iter().enumerate() {
            let Some(s) = s else { continue };
            let words: Vec<String> = metrics
                .iter()
                .zip(s.cells.iter().zip(&b.cells))
                .filter(|(_, (cell, _))| cell.class == class && !cell.untrusted)
                .filter_map(|(m, (cell, base_cell))| {
                    Some(format!(
                        "{} {} against {} ({})",
                        m.name,
                        super::in_unit(m, cell.value?, cell.lower_bound),
                        super::in_unit(m, base_cell.value?, base_cell.lower_bound),
                        cell.delta_pct
                            .map_or("from 0".to_string(), |d| format!("{d:+.1}%")),
                    ))
                })
                .collect();
            if words.is_empty() {
                continue;
            }
            let run = &c.runs[i];
            out.push(format!(
                "{} at {} (step {}) {}: {}",
                run.label,
                crate::step::step_value(run.model, s.step_value),
                s.step,
                row.name,
                words.join("; ")
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests;
