//! The report of one run: its answer and what it ran, then (a capacity search's) the search's
//! probes and answer, the charts against the step value, the timeline, and the tables.
/// Also what a comparison draws its step-value axis and shading with.
pub(crate) mod charts;
mod labels;
/// Also what the live page writes a step's table of names with.
pub(crate) mod requests;
/// Also what the live page draws a search's probes with.
pub(crate) mod search;
/// Also what a comparison reads the monitors' view of a step with.
pub(crate) mod server;
/// Also what the live page writes its steps table with.
pub(crate) mod tables;

use std::fmt::Write;

use crate::RunReport;
use crate::chart::{self, Titles};
use crate::escape::html;
use crate::page::styled_page;

/// The `data-chart` names of a run's report, in page order (the page contract, `lib.rs`). Each is
/// there for every run: drawn, or an empty labelled place.
pub const RUN_CHARTS: [&str; 10] = [
    "rates",
    "latency",
    "failures",
    "status",
    "trust-cpu",
    "trust-lag",
    "trust-skew",
    "server",
    "distribution",
    "timeline",
];

/// The charts a run with a server monitor also has, right after `server` (the page contract): a
/// run without one keeps the page it had.
pub const RUN_MONITOR_CHARTS: [&str; 1] = ["server-memory"];

/// The charts a run of a named mix (run.json `steps[].per_request`) also has, right after `status`
/// in its own section (the page contract): a run of unnamed requests keeps the page it had.
pub const RUN_REQUEST_CHARTS: [&str; 2] = ["requests-served", "requests-p99"];

/// The charts a capacity search's report also has, first, before `rates` (the page contract): a
/// planned run keeps the page it had.
pub const RUN_SEARCH_CHARTS: [&str; 1] = ["search"];

/// The HTML report of one run.
pub fn render_run(r: &RunReport) -> String {
    let run = &r.run;
    let name = run.label.as_deref().unwrap_or(&run.target);
    let mut body = header(r);
    let mut titles = Titles::default();
    if run.is_search() {
        body.push_str("<h2>The search</h2>\n");
        body.push_str(&search::chart(run, &mut titles));
        body.push_str(&search::table(run));
    }
    body.push_str("<h2>Against the offered load</h2>\n");
    body.push_str(&charts::rates(run).render_in(&mut titles));
    body.push_str(&charts::latency(run).render_in(&mut titles));
    if charts::any_failure(run) {
        body.push_str(&charts::failures(run).render_in(&mut titles));
    } else {
        body.push_str(&chart::empty(
            "failures",
            "Failures by class",
            "No request failed in this run, on the target's side or the generator's: nothing to draw.",
        ));
    }
    body.push_str(&charts::status(run).render_in(&mut titles));
    if requests::any(run) {
        body.push_str(&requests::section(run, &mut titles));
    }
    body.push_str("<h2>Can the numbers be trusted?</h2>\n<div class=\"strip\">\n");
    for c in charts::trust_strip(run) {
        body.push_str(&c.render_in(&mut titles));
    }
    body.push_str("</div>\n<h2>The server</h2>\n");
    if server::monitors(run).is_empty() {
        body.push_str(&charts::server());
    } else {
        body.push_str(&server::charts(run, &mut titles));
    }
    body.push_str("<h2>Each step's latency distribution</h2>\n");
    body.push_str(&charts::distribution(run, &r.distributions));
    body.push_str("<h2>Over time</h2>\n");
    if run.steps.iter().any(|s| !s.reply_rate_series.is_empty()) {
        body.push_str(&charts::timeline(run).render_in(&mut titles));
    } else {
        body.push_str(&chart::empty(
            "timeline",
            "Served rate over the run (1 s samples)",
            "No step has a 1 s sample yet (a step shorter than a second has none): nothing to draw.",
        ));
    }
    body.push_str("<h2>Steps</h2>\n");
    body.push_str(&tables::steps(run));
    body.push_str(&tables::agents(run));
    body.push_str(&tables::plan(run));
    body.push_str(&tables::warnings_and_notes(run));
    body.push_str(&tables::ending(run));
    // Only a search draws scatters and levels: a planned run's page keeps its bytes.
    let mut style = if run.is_search() {
        format!("{}{}", chart::MARK_STYLE, search::STYLE)
    } else {
        String::new()
    };
    // Likewise only a named mix has tables of names.
    if requests::any(run) {
        style.push_str(requests::STYLE);
    }
    styled_page(
        &format!("stampede: {name}"),
        &style,
        &body,
        &crate::data::embedded(run),
    )
}

/// The run's name, its answer in one sentence, and what ran: target, label, model, when, which
/// version, how many agents.
fn header(r: &RunReport) -> String {
    let run = &r.run;
    let name = run.label.as_deref().unwrap_or(&run.target);
    let mut out = format!("<h1>stampede: {}</h1>\n", html(name));
    // A search's steps are probes up and down, not a ramp: its answer is the search's, not a knee.
    match &run.summary {
        _ if run.is_search() => out.push_str(&search::answer(run)),
        Some(s) => {
            // The headline first, the whole answer with its numbers beneath (older files have
            // no headline: their answer alone).
            if s.headline.is_empty() {
                let _ = writeln!(out, "<p class=\"answer\">{}</p>", html(&s.answer));
            } else {
                let _ = writeln!(
                    out,
                    "<p class=\"answer\"><strong>{}</strong></p>\n<p class=\"answer-detail\">{}</p>",
                    html(&s.headline),
                    html(&s.answer)
                );
            }
        }
        None => out.push_str("<p class=\"answer\">No step has finished yet.</p>\n"),
    }
    let mut facts = vec![
        ("target", run.target.clone()),
        ("model", run.model().name().to_string()),
        ("started", run.started_at.clone()),
        ("status", run.status.name().to_string()),
        (
            "stampede",
            format!("{} {}", run.tool.name, run.tool.version),
        ),
        ("agents", run.agents.len().to_string()),
    ];
    if let Some(l) = &run.label {
        facts.insert(0, ("label", l.clone()));
    }
    if let Some(f) = &run.finished_at {
        facts.insert(4, ("finished", f.clone()));
    }
    if let Some(c) = &run.capacity {
        facts.push((
            "search",
            format!("{}, exit code {}", c.status.name(), c.exit_code),
        ));
    }
    out.push_str("<dl class=\"meta\">");
    for (k, v) in facts {
        let _ = write!(
            out,
            "<div><dt>{k}</dt><dd data-key=\"{k}\">{}</dd></div>",
            html(&v)
        );
    }
    out.push_str("</dl>\n");
    out
}
