//! The tables of one run besides the steps: the agents' share of each step, the plan, warnings and
//! notes, and how the run ended (`stopped`, `fail_on`).
use std::fmt::Write;

use results::run_file::RunFile;
use results::step::StepResult;

use crate::chart::short;
use crate::data;
use crate::escape::html;

/// One row of `<td data-col>` cells.
fn row(cells: &[(&str, String)]) -> String {
    let mut out = String::from("<tr>");
    for (col, v) in cells {
        let _ = write!(out, "<td data-col=\"{}\">{}</td>", html(col), html(v));
    }
    out.push_str("</tr>\n");
    out
}

/// A table's start (`attrs`: its element's attributes), in a box that scrolls sideways when the
/// table is wider than the page.
fn head(attrs: &str, cols: &[&str]) -> String {
    let mut out = format!("<div class=\"wide\"><table {attrs}>\n<thead><tr>");
    for c in cols {
        let _ = write!(out, "<th data-col=\"{0}\">{0}</th>", html(c));
    }
    out.push_str("</tr></thead>\n<tbody>\n");
    out
}

const FOOT: &str = "</tbody>\n</table></div>\n";

/// The steps, as steps.tsv has them. Only the header names its columns: a cell is its column's by
/// its place in the row (a long run's table was mostly the names repeated in every cell).
pub fn steps(run: &RunFile) -> String {
    let table = run.step_table();
    let header = table.header();
    let names: Vec<&str> = header.iter().map(String::as_str).collect();
    let mut out = head("id=\"steps\"", &names);
    for step in &run.steps {
        out.push_str(&plain_row(&table.row(step)));
    }
    out.push_str(FOOT);
    out
}

/// One row of plain `<td>` cells.
fn plain_row(cells: &[String]) -> String {
    let mut out = String::from("<tr>");
    for c in cells {
        let _ = write!(out, "<td>{}</td>", html(c));
    }
    out.push_str("</tr>\n");
    out
}

/// Up to this many rows, the agents table is written in the page; past it the page's script
/// builds it from the embedded data (a run of 100 steps of 10 agents made it a fifth of the page).
pub const AGENT_ROWS_IN_HTML: usize = 200;

/// Each step's share by agent (run.json `steps[].agents[]`), from the embedded `agent_steps`
/// columns, so the table the page writes and the one its script builds say the same.
pub fn agents(run: &RunFile) -> String {
    let cols = data::agent_steps(run);
    let mut out = String::from("<h2>Agents</h2>\n");
    if cols.rows() > AGENT_ROWS_IN_HTML {
        let _ = writeln!(
            out,
            "<noscript><p>The {} rows of this table are built by the page's script from its embedded data; \
             run.json beside this report has them too.</p></noscript>",
            cols.rows()
        );
        out.push_str(&head(
            "id=\"agents\" data-fill=\"agent_steps\"",
            &data::AGENT_COLS,
        ));
        out.push_str(FOOT);
        return out;
    }
    out.push_str(&head("id=\"agents\"", &data::AGENT_COLS));
    let column = |name: &str| cols.get(name).expect("an agent_steps column");
    let bounds = column("lower_bound");
    for (i, b) in bounds.iter().enumerate() {
        let bound: Vec<&str> = b.as_str().unwrap_or("").split(' ').collect();
        let cells: Vec<String> = data::AGENT_COLS
            .iter()
            .map(|c| {
                let v = &column(c)[i];
                match (*c, v) {
                    ("agent", serde_json::Value::Number(n)) => n
                        .as_u64()
                        .and_then(|k| run.agents.get(k as usize))
                        .map_or_else(|| data::text(v), |a| a.name.clone()),
                    _ if bound.contains(&c.trim_end_matches("_ms")) => {
                        format!("≥{}", data::text(v))
                    }
                    _ => data::text(v),
                }
            })
            .collect();
        out.push_str(&plain_row(&cells));
    }
    out.push_str(FOOT);
    out
}

/// The plan as run.json records it, one key a row in the file's (sorted) order, the keys this
/// build does not know included; a value that is not a string is written as JSON.
pub fn plan(run: &RunFile) -> String {
    let mut out = String::from("<h2>Plan</h2>\n<div class=\"wide\"><table id=\"plan\">\n<tbody>\n");
    let echo = serde_json::to_value(&run.plan).expect("a plan echo has string keys");
    let entries: Vec<(String, &serde_json::Value)> = match &echo {
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
/// A step's note as a list item, the step named by its number and value (the report's list and the
/// live page's).
pub(crate) fn note_item(s: &StepResult, note: &str) -> String {
    format!(
        "<li data-step=\"{0}\">step {0} ({1}): {2}</li>\n",
        s.number,
        html(&short(s.step_value)),
        html(note)
    )
}

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
        out.push_str(&note_item(s, n));
    }
    out.push_str("</ul>\n");
    out
}

/// Whether --stop-on ended the ramp, and which --fail-on expressions were breached.
pub fn ending(run: &RunFile) -> String {
    let mut out = String::from("<h2>How the run ended</h2>\n<p id=\"stopped\">");
    // A search has no ramp to run to its end: its ending is its status.
    let search = run.capacity.as_ref().filter(|_| run.is_search());
    match (&run.stopped, search) {
        (_, Some(c)) => {
            let _ = write!(
                out,
                "The search ended {} (exit code {}) after {:.0} s and {} probes{}.",
                c.status.name(),
                c.exit_code,
                c.elapsed_s,
                c.probes.total(),
                if run.steps.len() as u32 > c.probes.total() {
                    " (the other steps: the warmup, or cut short)"
                } else {
                    ""
                }
            );
        }
        (None, None) => out.push_str(&format!(
            "Not ended yet (the run is {}).",
            html(run.status.name())
        )),
        (Some(None), None) => out.push_str("The ramp ran to its end."),
        (Some(Some(s)), None) => {
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
            out.push_str(&head("id=\"fail-on\"", &COLS));
            for b in breaches {
                let cells = [
                    b.step.to_string(),
                    results::step::tsv_number(b.step_value),
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
