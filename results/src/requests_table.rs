//! requests.tsv: a run's rows per step and named request (`StepResult::per_request`), its columns
//! named as the quantities' catalogue names them.
use shared::metrics::{ErrorClass, STATUS_CLASSES};

use crate::quantity;
use crate::step::StepResult;

/// requests.tsv's columns: the step, the name, its counts, its served latency, its failed replies'
/// latency, its statuses by class and its errors by class.
pub fn tsv_header() -> Vec<String> {
    let mut h: Vec<String> = [
        "step",
        "step_value",
        "name",
        "weight",
        "requests",
        "replies",
        "ok",
        "failed",
        quantity::FAILED_PCT.key,
        "given_up",
        "unsent",
        quantity::OK_RATE.key,
        quantity::P50_MS.key,
        quantity::P90_MS.key,
        quantity::P99_MS.key,
        quantity::P999_MS.key,
        quantity::MAX_MS.key,
        "mean_ms",
        "failed_p50_ms",
        "failed_p99_ms",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    h.extend(STATUS_CLASSES.iter().map(|s| format!("status_{s}")));
    h.extend(ErrorClass::ALL.iter().map(|e| e.column()));
    h
}

/// A number as steps.tsv writes one: to three decimals, no grouping.
fn num(v: f64) -> String {
    crate::step::round3(v).to_string()
}

/// requests.tsv whole: a row per step and name, in the steps' and then the plan's order.
pub fn tsv<'a>(steps: impl IntoIterator<Item = &'a StepResult>) -> String {
    let mut out = tsv_header().join("\t");
    out.push('\n');
    for step in steps {
        for r in &step.per_request {
            let l = &r.latency_ms;
            let mut cells = vec![
                step.number.to_string(),
                num(step.step_value),
                r.name.clone(),
                r.weight.to_string(),
                r.requests.to_string(),
                r.replies.to_string(),
                r.ok.to_string(),
                r.failed.to_string(),
                num(r.failed_pct),
                r.given_up.to_string(),
                r.unsent.to_string(),
                num(r.ok_rate),
            ];
            cells.extend(
                [l.p50, l.p90, l.p99, l.p999, l.max, l.mean]
                    .iter()
                    .chain([&r.failed_latency_ms.p50, &r.failed_latency_ms.p99])
                    .map(|v| num(*v)),
            );
            cells.extend(r.status.0.iter().map(|(_, n)| n.to_string()));
            cells.extend(r.errors.0.iter().map(|(_, n)| n.to_string()));
            out.push_str(&cells.join("\t"));
            out.push('\n');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_per_step_and_name_under_a_header_of_as_many_cells() {
        let golden = include_str!("../tests/golden/run.json");
        let run =
            crate::run_file::RunFile::parse(golden, std::path::Path::new("run.json")).unwrap();
        let mut step = run.steps[0].clone();
        let names = ["a".to_string(), "b".to_string()];
        step.per_request = crate::step::per_request::rows(&names, &[1, 2], &[], 1.0);
        let text = tsv([&step]);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3, "{text}");
        let width = lines[0].split('\t').count();
        assert!(
            lines.iter().all(|l| l.split('\t').count() == width),
            "{text}"
        );
        assert!(
            lines[2].starts_with(&format!("{}\t", step.number)),
            "{text}"
        );
        assert!(lines[0].contains("\tp99_ms\t"), "{text}");
    }
}
