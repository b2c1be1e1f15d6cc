//! The report of one run.
use std::fmt::Write;

use crate::RunReport;
use crate::escape::html;
use crate::page::page;

/// The HTML report of one run.
pub fn render_run(r: &RunReport) -> String {
    let run = &r.run;
    let mut body = String::new();
    let name = run.label.as_deref().unwrap_or(&run.target);
    let _ = write!(
        body,
        "<h1>stampede: {}</h1>\n<p class=\"meta\">{} · started {}</p>\n",
        html(name),
        html(&run.target),
        html(&run.started_at)
    );
    if let Some(s) = &run.summary {
        let _ = writeln!(body, "<p class=\"answer\">{}</p>", html(&s.answer));
    }
    body.push_str(&steps_table(r));
    page(&format!("stampede: {name}"), &body, &run.to_json())
}

/// The steps, as steps.tsv has them.
fn steps_table(r: &RunReport) -> String {
    let mut out = String::from("<table id=\"steps\">\n<thead><tr>");
    let table = r.run.step_table();
    for name in table.header() {
        let _ = write!(out, "<th>{}</th>", html(&name));
    }
    out.push_str("</tr></thead>\n<tbody>\n");
    let header = table.header();
    for step in &r.run.steps {
        out.push_str("<tr>");
        for (name, cell) in header.iter().zip(table.row(step)) {
            let _ = write!(out, "<td data-col=\"{}\">{}</td>", html(name), html(&cell));
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</tbody>\n</table>\n");
    out
}
