//! The page of `stampede compare`: the runs' headlines, what differs between their plans, and the
//! per-step delta table against the baseline (noise greyed, regressions red, untrusted cells and
//! lower bounds marked).
use std::fmt::Write;

use shared::compare::{CellEntry, Class, Comparison, METRICS, in_unit};
use shared::report::human;

use crate::escape::html;
use crate::page::page;

/// The HTML page of a comparison.
pub fn render_compare(c: &Comparison) -> String {
    let labels: Vec<&str> = c.runs.iter().map(|r| r.label.as_str()).collect();
    let title = format!("stampede compare: {}", labels.join(" vs "));
    let mut body = String::new();
    let _ = writeln!(body, "<h1>{}</h1>", html(&title));
    let _ = writeln!(
        body,
        "<p class=\"meta\">baseline {} · a change of at most {}% is noise · steps joined on {}</p>",
        html(&c.baseline),
        human(c.threshold_pct),
        html(c.axis)
    );
    body.push_str(&banners(c));
    body.push_str(&headlines(c));
    body.push_str(&delta_table(c));
    page(&title, &body, &c.to_json())
}

fn banners(c: &Comparison) -> String {
    if c.banners.is_empty() {
        return String::new();
    }
    let mut out = String::from("<ul class=\"banner\">\n");
    for b in &c.banners {
        let _ = writeln!(out, "<li>{}</li>", html(b));
    }
    out.push_str("</ul>\n");
    out
}

/// Every run's answer in a line, and where it came from.
fn headlines(c: &Comparison) -> String {
    let mut out = String::from(
        "<table id=\"headlines\">\n<thead><tr><th>run</th><th>answer</th><th>target</th>\
         <th>started</th><th>results</th></tr></thead>\n<tbody>\n",
    );
    for r in &c.runs {
        let role = if r.baseline { " (baseline)" } else { "" };
        let _ = writeln!(
            out,
            "<tr data-run=\"{label}\"><th>{label}{role}</th><td class=\"answer\" title=\"{answer}\">{}</td>\
             <td>{}</td><td>{}</td><td>{}</td></tr>",
            html(&r.headline.sentence),
            html(&r.target),
            html(&r.started_at),
            html(&r.source),
            label = html(&r.label),
            answer = html(&r.headline.answer),
        );
    }
    out.push_str("</tbody>\n</table>\n");
    out
}

/// One row per step value and run: the run's numbers there and their change against the baseline.
fn delta_table(c: &Comparison) -> String {
    let mut out = format!(
        "<table id=\"compare\">\n<thead><tr><th>{}</th><th>run</th><th>step</th><th>trust</th><th>server</th>",
        html(c.axis)
    );
    for m in &METRICS {
        let _ = write!(out, "<th>{}</th>", html(m.name));
    }
    out.push_str("</tr></thead>\n<tbody>\n");
    for row in &c.steps {
        for (run, step) in c.runs.iter().zip(&row.runs) {
            let _ = write!(
                out,
                "<tr data-value=\"{}\" data-run=\"{}\"><th>{}</th><th>{}</th>",
                row.value,
                html(&run.label),
                html(&human(row.value)),
                html(&run.label)
            );
            let Some(s) = step else {
                let _ = writeln!(
                    out,
                    "<td colspan=\"{}\" class=\"c-missing\">no such step</td></tr>",
                    METRICS.len() + 3
                );
                continue;
            };
            let _ = write!(
                out,
                "<td>{}</td><td class=\"t-{trust}\">{trust}</td><td>{}</td>",
                s.step,
                s.server.name(),
                trust = s.trust.name()
            );
            for (m, cell) in METRICS.iter().zip(&s.cells) {
                out.push_str(&delta_cell(m, cell, &c.baseline));
            }
            out.push_str("</tr>\n");
        }
    }
    out.push_str("</tbody>\n</table>\n");
    out
}

fn delta_cell(m: &shared::compare::Metric, cell: &CellEntry, baseline: &str) -> String {
    let Some(v) = cell.value else {
        return format!("<td data-metric=\"{}\" class=\"c-missing\">–</td>", m.name);
    };
    let mut text = in_unit(m, v, cell.lower_bound);
    match (cell.class, cell.delta_pct) {
        (Class::Baseline, _) => {}
        (_, Some(d)) => {
            let _ = write!(text, " ({d:+.1}%)");
        }
        (_, None) => text.push_str(" (from 0)"),
    }
    let mut why = Vec::new();
    if cell.untrusted {
        why.push("a step here was not trusted (trust invalid)".to_string());
    }
    if cell.lower_bound {
        why.push("this value is a lower bound".to_string());
    }
    if cell.baseline_lower_bound {
        why.push(format!("{baseline}'s value is a lower bound"));
    }
    let mark = if why.is_empty() { "" } else { " marked" };
    format!(
        "<td data-metric=\"{}\" data-class=\"{class}\" class=\"c-{class}{mark}\" title=\"{}\">{}</td>",
        m.name,
        html(&why.join("; ")),
        html(&text),
        class = cell.class.name(),
    )
}
