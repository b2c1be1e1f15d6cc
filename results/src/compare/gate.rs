//! compare's regression gates (`--regression 'p99[login]>5%'`): a quantity of the step or of one
//! named request, spelt as the condition grammar spells it (its metric and `[name]` parsed by
//! [`crate::condition::parse_subject`]), and the change for the worse, in %, that fails CI. A gate
//! is judged on every joined step that both runs trusted, by the comparison's own rule
//! ([`Compared::class`]): a change counts only beyond the gate's percentage *and* beyond what the
//! measurement resolves (the histogram's buckets, 0.1 ms, 1/s, 0.1 point), and a lower bound only
//! where it cannot be overturned.
use serde::Serialize;

use super::metric::{Change, Compared, METRICS, Reading};
use super::{Comparison, in_unit};
use crate::condition::{self, Cmp, Condition, ConditionError, Metric, Observed, Threshold, Unit};
use crate::step::{StepResult, step_value};
use crate::verdict::Verdict;

/// One gate, as parsed: `p99[login]>5%`.
#[derive(Debug, Clone, PartialEq)]
pub struct Gate {
    /// As written (trimmed), for messages.
    pub text: String,
    pub metric: Metric,
    /// The named request it is about; none: the step's own quantity.
    pub request: Option<String>,
    /// A change for the worse beyond this many % of the baseline's value breaches it.
    pub worse_pct: f64,
}

/// Why a gate was refused: its spelling, or a name no run compared has.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum GateError {
    #[error("--regression '{}': {source}\n{}", source.input, source.pointer())]
    Subject { source: ConditionError },
    #[error("--regression '{text}': {why} at column {column}\n    {text}\n    {}{}", " ".repeat(column - 1), "^".repeat(*width))]
    Syntax {
        text: String,
        column: usize,
        width: usize,
        why: String,
    },
    #[error("--regression '{text}': {metric} is not compared between runs; gate {compared}")]
    NotCompared {
        text: String,
        metric: &'static str,
        compared: String,
    },
    #[error("--regression '{text}': no run compared has a request named '{name}' ({known})")]
    UnknownName {
        text: String,
        name: String,
        known: String,
    },
}

impl Gate {
    /// `metric [ '[' name ']' ] '>' number '%'`: the quantity as `--fail-on` writes it, and the
    /// relative change for the worse, e.g. `p99[login]>5%`, `failed>10%`, `ok_rate[search]>3%`.
    pub fn parse(input: &str) -> Result<Gate, GateError> {
        let text = input.trim();
        let (metric, request, at) =
            condition::parse_subject(text).map_err(|source| GateError::Subject { source })?;
        if compared(metric).is_none() {
            return Err(GateError::NotCompared {
                text: text.to_string(),
                metric: metric.name(),
                compared: gated_text(),
            });
        }
        let column = |byte: usize| text[..byte].chars().count() + 1;
        let bad = |byte: usize, width: usize, why: String| GateError::Syntax {
            text: text.to_string(),
            column: column(byte),
            width: width.max(1),
            why,
        };
        let rest = &text[at..];
        let gap = rest.len() - rest.trim_start().len();
        let op_at = at + gap;
        let Some(after_op) = rest.trim_start().strip_prefix('>') else {
            return Err(bad(
                op_at,
                1,
                "expected '>' and how much worse in %, e.g. p99[login]>5%".to_string(),
            ));
        };
        let number_at = text.len() - after_op.trim_start().len();
        let after = after_op.trim_start();
        let digits = after
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(after.len());
        let pct: f64 = match after[..digits].parse() {
            Ok(v) if f64::is_finite(v) => v,
            _ => {
                let width = after[..digits].chars().count();
                return Err(bad(
                    number_at,
                    width,
                    "expected a change in % after '>', e.g. 5%".to_string(),
                ));
            }
        };
        let unit = after[digits..].trim();
        if unit != "%" {
            return Err(bad(
                text.len() - after[digits..].trim_start().len(),
                unit.chars().count(),
                "a regression is a relative change: write it in % (e.g. 5%)".to_string(),
            ));
        }
        Ok(Gate {
            text: text.to_string(),
            metric,
            request,
            worse_pct: pct,
        })
    }

    /// What it gates, as written: `p99[login]`.
    pub fn subject(&self) -> String {
        match &self.request {
            Some(name) => format!("{}[{name}]", self.metric.name()),
            None => self.metric.name().to_string(),
        }
    }

    /// Its quantity's value in `step`: the step's own, as the step deltas read it, or its named
    /// request's, as `--fail-on 'p99[login]…'` reads it; none where there is no such number (nothing
    /// served, the name not due in that step).
    fn read(&self, m: &Compared, step: &StepResult) -> Option<Reading> {
        let Some(name) = &self.request else {
            return m.read(step);
        };
        let unit = match self.metric {
            Metric::Latency(_) => Unit::Ms,
            Metric::OkRate => Unit::PerSecond,
            Metric::Failed | Metric::Errors | Metric::Requests => Unit::Percent,
        };
        let c = Condition {
            metric: self.metric,
            request: Some(name.clone()),
            cmp: Cmp::Gt,
            threshold: Threshold { value: 0.0, unit },
        };
        c.read(&Observed::of(step)).map(|r| Reading {
            value: r.value,
            lower_bound: r.lower_bound,
        })
    }
}

/// The compared metric a grammar metric gates; none for what compare does not compare (a count).
fn compared(metric: Metric) -> Option<Compared> {
    METRICS
        .iter()
        .find(|m| m.judged && m.name == metric.quantity().key)
        .copied()
}

/// "p50, p90, …, errors or ok_rate": what a gate may name, for messages.
fn gated_text() -> String {
    let names: Vec<&str> = crate::quantity::CONDITIONS
        .iter()
        .filter(|q| METRICS.iter().any(|m| m.judged && m.name == q.key))
        .map(|q| q.grammar_name())
        .collect();
    match names.split_last() {
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => String::new(),
    }
}

/// One gate, judged.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Judged {
    /// The gate as written.
    pub gate: String,
    /// The joined steps it could be judged on: both trusted, both with the number.
    pub compared: usize,
    /// The steps it got worse on beyond the gate, in the comparison's order.
    pub breaches: Vec<String>,
}

impl Judged {
    /// stdout's line of it: "--regression p99[login]>5%: held on 2 steps", or what breached.
    pub fn sentence(&self) -> String {
        match (self.compared, self.breaches.is_empty()) {
            (0, _) => format!(
                "--regression {}: nothing to judge (no joined step that both runs trusted has it)",
                self.gate
            ),
            (n, true) => format!(
                "--regression {}: held on {n} step{}",
                self.gate,
                if n == 1 { "" } else { "s" }
            ),
            (_, false) => format!(
                "--regression {}: breached at {}",
                self.gate,
                self.breaches.join("; ")
            ),
        }
    }
}

/// Every gate judged on `c`'s joined steps, each run against the baseline; refused when a gate
/// names a request no run compared has (it could never be judged, and a typo must not pass CI).
pub fn judge(c: &Comparison, gates: &[Gate]) -> Result<Vec<Judged>, GateError> {
    let names = names(c);
    for g in gates {
        if let Some(name) = &g.request
            && !names.contains(&name.as_str())
        {
            return Err(GateError::UnknownName {
                text: g.text.clone(),
                name: name.clone(),
                known: match names.is_empty() {
                    true => "their requests are unnamed: one URL or --urls".to_string(),
                    false => format!("their names: {}", names.join(", ")),
                },
            });
        }
    }
    Ok(gates.iter().map(|g| judge_one(c, g)).collect())
}

/// Every request name of every run compared, in the order first seen.
fn names(c: &Comparison) -> Vec<&str> {
    let mut out: Vec<&str> = Vec::new();
    let rows = c
        .inputs()
        .iter()
        .flat_map(|r| &r.run.steps)
        .flat_map(|s| &s.per_request);
    for r in rows {
        if !out.contains(&r.name.as_str()) {
            out.push(&r.name);
        }
    }
    out
}

fn judge_one(c: &Comparison, g: &Gate) -> Judged {
    let m = compared(g.metric).expect("a parsed gate's metric is compared");
    let base = c.baseline_index();
    let inputs = c.inputs();
    let step_of = |i: usize, n: u32| inputs[i].run.steps.iter().find(|s| s.number == n);
    let mut judged = Judged {
        gate: g.text.clone(),
        compared: 0,
        breaches: Vec::new(),
    };
    for row in &c.steps {
        let Some(b) = row.runs[base].as_ref().and_then(|b| step_of(base, b.step)) else {
            continue;
        };
        for (i, s) in row.runs.iter().enumerate() {
            let Some(s) = s.as_ref().and_then(|s| step_of(i, s.step)) else {
                continue;
            };
            if i == base || s.trust == Verdict::Invalid || b.trust == Verdict::Invalid {
                continue;
            }
            let (Some(then), Some(now)) = (g.read(&m, b), g.read(&m, s)) else {
                continue;
            };
            judged.compared += 1;
            if m.class(then, now, g.worse_pct) != Change::Worse {
                continue;
            }
            let run = &c.runs[i];
            judged.breaches.push(format!(
                "{} at {} (step {}): {} {} against {} ({})",
                run.label,
                step_value(run.model, s.step_value),
                s.number,
                g.subject(),
                in_unit(&m, now.value, now.lower_bound),
                in_unit(&m, then.value, then.lower_bound),
                m.delta_pct(then.value, now.value)
                    .map_or("from 0".to_string(), |d| format!("{d:+.1}%")),
            ));
        }
    }
    judged
}

#[cfg(test)]
mod tests;
