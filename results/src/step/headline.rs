//! The answer at a glance: what a run found of the server ([`Finding`], a kind) rendered once into
//! one line of at most [`MAX_CHARS`] characters (`kept up to 22,000 req/s (p99 1.7 ms); broke at
//! 26,000: p99 ×860, CPU 98 % of 1 core`). The numbers behind it stay in run.json (`summary`,
//! `knee`, the steps) and in the full `answer`: the headline only picks, in order, what fits.
use serde::{Deserialize, Serialize};

use super::knee::{Knee, KneeCause};
use super::{Beyond, StepResult, human, human_ms, judged, step_value};
use crate::verdict::{CPU_LIMIT_PCT, THREAD_LIMIT_PCT};

/// The longest headline: one terminal line with its `answer: ` prefix, a table cell that wraps
/// once.
pub const MAX_CHARS: usize = 120;

/// What the run found of the server. "Nothing answered" and "the generator was the limit" are
/// never a knee: a knee is where the server's service degraded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Finding {
    /// The server's service degraded at the knee (latency, failures, a plateau).
    Knee,
    /// Every judged step kept up: the server's limit lies beyond the ramp.
    BeyondRamp,
    /// Past the last step kept up, the generator (its fds, ports, CPU or schedule, or an agent's
    /// own limit) was the limit: the ramp never reached the server's.
    GeneratorLimit,
    /// Not one request was served at any step: a wrong address, a server down.
    NothingAnswered,
    /// A step fell short without a degradation that held (one step out of line, or cut short).
    Unsettled,
    /// No step ran, or none could be judged (each lost an agent's share).
    NotJudged,
}

impl Finding {
    pub fn of(
        steps: &[StepResult],
        kept: Option<&StepResult>,
        beyond: Option<&Beyond>,
        knee: Option<&Knee>,
    ) -> Option<Finding> {
        let judged: Vec<&StepResult> = steps.iter().filter(|r| judged(r)).collect();
        Some(if judged.is_empty() {
            Finding::NotJudged
        } else if judged.iter().all(|r| r.ok == 0 && !r.generator_bound) {
            Finding::NothingAnswered
        } else if knee.is_some() {
            Finding::Knee
        } else {
            match beyond {
                None if kept.is_some() => Finding::BeyondRamp,
                None => Finding::NotJudged,
                Some(b) if b.generator_bound => Finding::GeneratorLimit,
                Some(_) => Finding::Unsettled,
            }
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Finding::Knee => "knee",
            Finding::BeyondRamp => "beyond_ramp",
            Finding::GeneratorLimit => "generator_limit",
            Finding::NothingAnswered => "nothing_answered",
            Finding::Unsettled => "unsettled",
            Finding::NotJudged => "not_judged",
        }
    }
}

/// The headline of `finding`, from the steps and what the summary picked of them.
pub fn render(
    steps: &[StepResult],
    finding: &Option<Finding>,
    kept: Option<&StepResult>,
    knee: Option<&Knee>,
) -> String {
    let model = steps.first().map_or("", |r| r.model.as_str());
    let value = |v: f64| step_value(model, v);
    let lead = kept.map(|k| {
        format!(
            "kept up to {} (p99 {})",
            value(k.step_value),
            human_ms(k.latency_ms.p99, k.latency_ms.lower_bounds.contains("p99"))
        )
    });
    let Some(finding) = finding else {
        return String::new();
    };
    let line = match (finding, knee) {
        (Finding::Knee, Some(k)) => {
            // The unit once: "kept up to 22,000 req/s …; broke at 26,000".
            let at = match &lead {
                Some(_) => human(k.step_value),
                None => value(k.step_value),
            };
            let head = match &lead {
                Some(lead) => format!("{lead}; broke at {at}: "),
                None => format!("broke at {at}, the first step judged: "),
            };
            // The request that broke first leads, when it fits before the step's own evidence.
            let mut parts = evidence(k);
            if let Some(r) = &k.request {
                let named = r.headline();
                if head.chars().count() + named.chars().count() <= MAX_CHARS {
                    parts.insert(0, named);
                }
            }
            fit(head, &parts)
        }
        (Finding::BeyondRamp, _) => format!(
            "{}: every step kept up, the limit is beyond this ramp",
            lead.unwrap_or_default()
        ),
        (Finding::GeneratorLimit, _) => {
            let past = past_kept(steps, kept);
            let head = match (&lead, past) {
                (Some(lead), Some(p)) => format!(
                    "{lead}; at {} the generator was the limit, not the server",
                    human(p.step_value)
                ),
                (None, Some(p)) => format!(
                    "the generator was the limit from {}, not the server",
                    value(p.step_value)
                ),
                (_, None) => "the generator was the limit, not the server".to_string(),
            };
            fit(head, &[])
        }
        (Finding::NothingAnswered, _) => {
            let failed = steps.iter().map(|r| r.failed_pct).fold(0.0, f64::max);
            let mut head = format!("nothing answered: {}% failed at every step", human(failed));
            if let Some((class, n)) = top_error(steps) {
                head.push_str(&format!(" ({} {class})", human(n as f64)));
            }
            fit(head, &[])
        }
        (Finding::Unsettled, _) => {
            let past = past_kept(steps, kept);
            let head = match (&lead, past) {
                (Some(lead), Some(p)) => format!(
                    "{lead}; fell short at {} (served {}/s), no knee held",
                    human(p.step_value),
                    human(p.ok_rate)
                ),
                (None, Some(p)) => format!(
                    "fell short from {} (served {}/s), no knee held",
                    value(p.step_value),
                    human(p.ok_rate)
                ),
                (_, None) => "no knee held".to_string(),
            };
            fit(head, &[])
        }
        (Finding::Knee, None) | (Finding::NotJudged, _) => {
            if steps.is_empty() {
                "no step ran".to_string()
            } else {
                "no step was judged: each lost part of its load".to_string()
            }
        }
    };
    cut(line)
}

/// The first judged step above the one kept up with (the first judged step without one).
fn past_kept<'a>(steps: &'a [StepResult], kept: Option<&StepResult>) -> Option<&'a StepResult> {
    steps
        .iter()
        .filter(|r| judged(r) && kept.is_none_or(|k| r.step_value > k.step_value))
        .min_by(|a, b| a.step_value.total_cmp(&b.step_value))
}

/// The knee's evidence, most telling first: its cause, then what held with it, then the server's
/// CPU behind it.
fn evidence(k: &Knee) -> Vec<String> {
    let mut parts = Vec::new();
    for cause in std::iter::once(k.cause).chain(k.also.iter().copied()) {
        let part = match cause {
            KneeCause::Failures => format!("{}% failed", human(k.failed_pct)),
            KneeCause::Latency => match k.p99_ratio {
                Some(r) if r >= 10.0 => format!(
                    "p99 ×{} ({})",
                    human(r.round()),
                    human_ms(k.p99_ms, k.p99_lower_bound)
                ),
                Some(r) => format!("p99 ×{r:.1} ({})", human_ms(k.p99_ms, k.p99_lower_bound)),
                None => format!("p99 {}", human_ms(k.p99_ms, k.p99_lower_bound)),
            },
            KneeCause::Plateau => format!("served {}/s", human(k.ok_rate)),
            KneeCause::ServerCpu => cpu(k),
            KneeCause::GeneratorBound => continue,
        };
        parts.push(part);
    }
    parts
}

fn cpu(k: &Knee) -> String {
    let thread = k.server_thread_max_pct.filter(|p| *p >= THREAD_LIMIT_PCT);
    match (k.server_cpu_util_pct, k.server_cores) {
        (Some(util), Some(cores)) if util >= CPU_LIMIT_PCT || thread.is_none() => {
            let cores = if cores == 1.0 {
                "1 core".to_string()
            } else {
                format!("{} cores", human(cores))
            };
            format!("CPU {} % of {cores}", human(util))
        }
        _ => format!("busiest thread {} %", human(thread.unwrap_or(0.0))),
    }
}

/// `head` and as many of `parts` as fit in [`MAX_CHARS`], joined by commas.
fn fit(head: String, parts: &[String]) -> String {
    let mut line = head;
    let mut first = true;
    for p in parts {
        let sep = if first { "" } else { ", " };
        if line.chars().count() + sep.len() + p.chars().count() > MAX_CHARS {
            break;
        }
        line.push_str(sep);
        line.push_str(p);
        first = false;
    }
    line.trim_end_matches([':', ' ']).to_string()
}

/// A line past [`MAX_CHARS`] (a long unit, a lower bound) cut at a word, with an ellipsis.
fn cut(line: String) -> String {
    if line.chars().count() <= MAX_CHARS {
        return line;
    }
    let mut out: String = line.chars().take(MAX_CHARS - 1).collect();
    if let Some(space) = out.rfind(' ') {
        out.truncate(space);
    }
    out.push('…');
    out
}

/// The error class most requests failed in over the run, and how many.
fn top_error(steps: &[StepResult]) -> Option<(String, u64)> {
    let mut totals: Vec<(String, u64)> = Vec::new();
    for r in steps {
        for (class, n) in r.errors.0.iter() {
            match totals.iter_mut().find(|(c, _)| c == class) {
                Some((_, total)) => *total += n,
                None => totals.push((class.clone(), *n)),
            }
        }
    }
    totals
        .into_iter()
        .filter(|(_, n)| *n > 0)
        .max_by_key(|(_, n)| *n)
}
