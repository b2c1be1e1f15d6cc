//! The live page's tables and lists: the agents on the running step (`#agents-live`), the
//! warnings and notes so far (`#notes`), and the run's end (its status, the report's link).
use std::fmt::Write;

use results::events::{Live, Target};
use results::run_file::RunFile;
use results::step::{StepResult, tsv_number};

use crate::escape::html;

use super::strip::written;

/// A named mix's last written step, name by name (the report's table of it): the events carry a
/// step's names once it is written, not second by second. Nothing for unnamed requests.
pub fn requests(run: &RunFile) -> String {
    let Some(s) = run.steps.iter().rev().find(|s| !s.per_request.is_empty()) else {
        return String::new();
    };
    format!(
        "<div id=\"requests-live\" data-step=\"{0}\">\n<p class=\"note\">Requests by name: step {0} ({1}) as written</p>\n{2}</div>\n",
        s.number,
        html(&crate::chart::short(s.step_value)),
        crate::run_page::requests::step_table(s)
    )
}

/// The columns of `#agents-live`, in order.
pub const AGENT_COLS: [&str; 7] = [
    "agent",
    "share",
    "sent",
    "cpu_pct",
    "start_delay_ms",
    "lost",
    "trust",
];

/// A row per agent of the running step (its share as the step started, what it has sent so far
/// from the last merged second), with what the last written step said of it: its CPU, how late it
/// started, whether it was lost, and the step's trust verdict (`lost` for a lost agent). An agent
/// of that step not running this one still has its row.
pub fn agents(target: &Target) -> String {
    let run = target.run.as_ref();
    let current = target.current.as_ref();
    // The last step written: the running one's predecessor, or the one just written.
    let last: Option<&StepResult> = match current {
        Some(c) if c.done => written(run, c),
        _ => None,
    }
    .or_else(|| run.and_then(|r| r.steps.last()));
    let mut names: Vec<&str> = current
        .map(|c| c.start.agents.iter().map(|a| a.agent.as_str()).collect())
        .unwrap_or_default();
    for a in last.iter().flat_map(|s| &s.agents) {
        if !names.contains(&a.agent.as_str()) {
            names.push(&a.agent);
        }
    }
    let mut out = String::new();
    if names.is_empty() {
        out.push_str("<p class=\"note\">No agent has started a step yet.</p>\n");
        return out;
    }
    let mut caption = Vec::new();
    if let Some(c) = current {
        caption.push(format!(
            "share and sent: step {} ({})",
            c.start.step,
            if c.done { "written" } else { "so far" }
        ));
    }
    if let Some(s) = last {
        caption.push(format!(
            "CPU, start delay, lost and trust: step {} as written",
            s.number
        ));
    }
    let _ = write!(
        out,
        "<div class=\"wide\"><table id=\"agents-live\">\n<caption>{}</caption>\n<thead><tr>",
        html(&caption.join("; "))
    );
    for c in AGENT_COLS {
        let _ = write!(out, "<th data-col=\"{c}\">{c}</th>");
    }
    out.push_str("</tr></thead>\n<tbody>\n");
    let sent = current.and_then(|c| c.intervals.last());
    for name in names {
        let at = current.and_then(|c| c.start.agents.iter().position(|a| a.agent == name));
        let share = at
            .and_then(|i| current.map(|c| tsv_number(c.start.agents[i].share)))
            .unwrap_or_else(|| "-".into());
        let so_far = at
            .and_then(|i| sent?.agents_sent.get(i))
            .map_or_else(|| "-".into(), |n| n.to_string());
        let step = last.and_then(|s| s.agents.iter().find(|a| a.agent == name));
        let dash = || "-".to_string();
        let cells = [
            name.to_string(),
            share,
            so_far,
            step.map_or_else(dash, |a| tsv_number(a.cpu_pct)),
            step.and_then(|a| a.start_delay_ms)
                .map_or_else(dash, tsv_number),
            step.map_or_else(dash, |a| if a.lost { "yes" } else { "no" }.into()),
            match (step, last) {
                (Some(a), _) if a.lost => "lost".into(),
                (Some(_), Some(s)) => s.trust.name().into(),
                _ => dash(),
            },
        ];
        let _ = write!(out, "<tr data-agent=\"{}\">", html(name));
        for (col, v) in AGENT_COLS.iter().zip(cells) {
            let _ = write!(out, "<td data-col=\"{col}\">{}</td>", html(&v));
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</tbody>\n</table></div>\n");
    out
}

/// The target's warnings (the run's, as last written), then every written step's notes in step
/// order: newest last.
pub fn notes(target: &Target) -> String {
    let mut out = String::from("<ol id=\"notes\">\n");
    let mut any = false;
    if let Some(run) = &target.run {
        for w in &run.warnings {
            any = true;
            let _ = writeln!(out, "<li data-kind=\"warning\">{}</li>", html(w));
        }
        for s in run.warmup.iter().chain(&run.steps) {
            for n in &s.notes {
                any = true;
                out.push_str(&crate::run_page::tables::note_item(s, n));
            }
        }
    }
    out.push_str("</ol>\n");
    if !any {
        out.push_str("<p class=\"note\">No warning and no note so far.</p>\n");
    }
    out
}

/// Empty until the whole run is over; then each target's status (a search's too) and the report.
pub fn end(live: &Live) -> String {
    if !live.finished {
        return String::new();
    }
    let several = live.targets.len() > 1;
    let mut out = String::from("<div class=\"end\"><p><b>The run is over.</b>");
    for target in &live.targets {
        let Some(run) = &target.run else { continue };
        let who = match several {
            true => format!("{}: ", html(&super::target_title(target))),
            false => String::new(),
        };
        let search = run
            .capacity
            .as_ref()
            .map_or_else(String::new, |c| format!(", the search {}", c.status.name()));
        let _ = write!(
            out,
            " <span data-lane=\"{}\" data-status=\"{}\">{who}{}{search}.</span>",
            html(&target.name),
            run.status.name(),
            run.status.name()
        );
    }
    let report = live.report.as_deref().unwrap_or("report.html");
    let _ = writeln!(
        out,
        " Its report: <a href=\"{0}\">{0}</a>.</p></div>",
        html(report)
    );
    out
}
