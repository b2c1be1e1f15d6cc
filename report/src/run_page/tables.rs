//! The tables of one run besides the steps: the agents' share of each step, the plan, warnings and
//! notes, and how the run ended (`stopped`, `fail_on`).
use std::fmt::Write;

use shared::report::StepResult;
use shared::run_file::RunFile;

use crate::chart::short;
use crate::escape::html;

/// A number as steps.tsv writes one: at most three decimals, no trailing zeros.
fn num(v: f64) -> String {
    let s = crate::chart::trimmed(&format!("{v:.3}"));
    if s == "-0" { "0".into() } else { s }
}

/// One row of `<td data-col>` cells.
fn row(cells: &[(&str, String)]) -> String {
    let mut out = String::from("<tr>");
    for (col, v) in cells {
        let _ = write!(out, "<td data-col=\"{}\">{}</td>", html(col), html(v));
    }
    out.push_str("</tr>\n");
    out
}

/// A table's start, in a box that scrolls sideways when the table is wider than the page.
fn head(id: &str, cols: &[&str]) -> String {
    let mut out = format!("<div class=\"wide\"><table id=\"{id}\">\n<thead><tr>");
    for c in cols {
        let _ = write!(out, "<th data-col=\"{0}\">{0}</th>", html(c));
    }
    out.push_str("</tr></thead>\n<tbody>\n");
    out
}

const FOOT: &str = "</tbody>\n</table></div>\n";

/// The steps, as steps.tsv has them.
pub fn steps(run: &RunFile) -> String {
    let table = run.step_table();
    let header = table.header();
    let names: Vec<&str> = header.iter().map(String::as_str).collect();
    let mut out = head("steps", &names);
    for step in &run.steps {
        let cells: Vec<(&str, String)> = header
            .iter()
            .map(String::as_str)
            .zip(table.row(step))
            .collect();
        out.push_str(&row(&cells));
    }
    out.push_str(FOOT);
    out
}

/// Each step's share by agent (run.json `steps[].agents[]`).
pub fn agents(run: &RunFile) -> String {
    const COLS: [&str; 15] = [
        "step",
        "agent",
        "threads",
        "requests",
        "replies",
        "ok",
        "errors",
        "failed_pct",
        "cpu_pct",
        "p50_ms",
        "p99_ms",
        "max_ms",
        "start_delay_ms",
        "clock_offset_ms",
        "lost",
    ];
    let mut out = String::from("<h2>Agents</h2>\n");
    out.push_str(&head("agents", &COLS));
    for s in &run.steps {
        for a in &s.agents {
            let bound = |name: &str, v: f64| {
                let at_least = if a.latency_ms.lower_bounds.contains(name) {
                    "≥"
                } else {
                    ""
                };
                format!("{at_least}{}", num(v))
            };
            let cells = [
                s.number.to_string(),
                a.agent.clone(),
                a.threads.to_string(),
                a.requests.to_string(),
                a.replies.to_string(),
                a.ok.to_string(),
                a.errors.to_string(),
                num(a.failed_pct),
                num(a.cpu_pct),
                bound("p50", a.latency_ms.p50),
                bound("p99", a.latency_ms.p99),
                bound("max", a.latency_ms.max),
                a.start_delay_ms.map_or_else(|| "-".into(), num),
                num(a.clock_offset_ms),
                if a.lost { "lost" } else { "" }.to_string(),
            ];
            // Plain cells, named by their column's header: a long run has thousands of rows.
            out.push_str("<tr>");
            for c in cells {
                let _ = write!(out, "<td>{}</td>", html(&c));
            }
            out.push_str("</tr>\n");
        }
    }
    out.push_str(FOOT);
    out
}

/// The plan as run.json records it, one key a row; a value that is not a string is written as JSON.
pub fn plan(run: &RunFile) -> String {
    let mut out = String::from("<h2>Plan</h2>\n<div class=\"wide\"><table id=\"plan\">\n<tbody>\n");
    let entries: Vec<(String, &serde_json::Value)> = match &run.plan {
        serde_json::Value::Object(m) => m.iter().map(|(k, v)| (k.clone(), v)).collect(),
        other => vec![("plan".to_string(), other)],
    };
    for (k, v) in entries {
        let text = match v {
            serde_json::Value::String(s) => s.clone(),
            v => v.to_string(),
        };
        let _ = writeln!(
            out,
            "<tr><th data-key=\"{0}\">{0}</th><td data-key=\"{0}\">{1}</td></tr>",
            html(&k),
            html(&text)
        );
    }
    out.push_str(FOOT);
    out
}

/// The run's warnings and each step's notes.
pub fn warnings_and_notes(run: &RunFile) -> String {
    let mut out = String::from("<h2>Warnings and notes</h2>\n");
    let notes: Vec<(&StepResult, &String)> = run
        .steps
        .iter()
        .flat_map(|s| s.notes.iter().map(move |n| (s, n)))
        .collect();
    if run.warnings.is_empty() && notes.is_empty() {
        out.push_str("<p id=\"warnings\">No warning, no note.</p>\n");
        return out;
    }
    out.push_str("<ul id=\"warnings\">\n");
    for w in &run.warnings {
        let _ = writeln!(out, "<li>{}</li>", html(w));
    }
    for (s, n) in notes {
        let _ = writeln!(
            out,
            "<li data-step=\"{0}\">step {0} ({1}): {2}</li>",
            s.number,
            html(&short(s.step_value)),
            html(n)
        );
    }
    out.push_str("</ul>\n");
    out
}

/// Whether --stop-on ended the ramp, and which --fail-on expressions were breached.
pub fn ending(run: &RunFile) -> String {
    let mut out = String::from("<h2>How the run ended</h2>\n<p id=\"stopped\">");
    match &run.stopped {
        None => out.push_str(&format!(
            "Not ended yet (the run is {}).",
            html(&run.status)
        )),
        Some(None) => out.push_str("The ramp ran to its end."),
        Some(Some(s)) => {
            let not_run: Vec<String> = s.not_run.iter().map(|v| short(*v)).collect();
            let _ = write!(
                out,
                "--stop-on ended the ramp after step {}: {}.",
                s.after_step,
                html(&s.because)
            );
            if !not_run.is_empty() {
                let _ = write!(out, " Not run: {}.", html(&not_run.join(", ")));
            }
        }
    }
    out.push_str("</p>\n");
    match &run.fail_on {
        None => {}
        Some(b) if b.is_empty() => {
            out.push_str("<p id=\"fail-on\">No --fail-on expression was breached.</p>\n")
        }
        Some(breaches) => {
            const COLS: [&str; 4] = ["step", "step_value", "expression", "because"];
            out.push_str(&head("fail-on", &COLS));
            for b in breaches {
                let cells = [
                    b.step.to_string(),
                    num(b.step_value),
                    b.expression.clone(),
                    b.because.clone(),
                ];
                let cells: Vec<(&str, String)> = COLS.iter().copied().zip(cells).collect();
                out.push_str(&row(&cells));
            }
            out.push_str(FOOT);
        }
    }
    out
}
