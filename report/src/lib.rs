//! stampede's HTML report: one run's results (run.json and the steps' percentile distributions) in,
//! one self-contained HTML file out. Charts are SVG drawn here; the page carries its own CSS and a
//! few KB of plain JavaScript, and fetches nothing when opened, so it works from a mail attachment.
//! Same input, same bytes.
//!
//! Depends on `shared` only: no tokio, no tonic.
//!
//! The page's contract with its readers (the browser test, scripts that scrape a report):
//! - the data is embedded as JSON in `<script type="application/json" id="stampede-data">`: a
//!   comparison's page, compare.json's content; a run's report, the run's numbers in the schema
//!   `stampede.report-data/1` (`data.rs`): `schema`, `target`, `label`, `model`, `status`,
//!   `agents` (the agents' names), and two sets of columns, each an object of equal-length arrays by
//!   column name: `steps` (one entry per step: `step`, `step_value`, then steps.tsv's columns, each
//!   cell as steps.tsv writes it, a number where it is one; a monitor's among them,
//!   `srv_cpu_pct_NAME`…) and `agent_steps` (one entry per step and agent: the `#agents` table's columns, `agent` an index into `agents` (or its name, for an agent run.json does not list), and `lower_bound`, which
//!   latencies are lower bounds, space-separated). Numbers have at most three decimals; a missing one
//!   is null. The whole run.json stays beside the report (`stampede report DIR` rebuilds from it);
//! - every chart is a `<figure class="chart" data-chart="NAME">` holding one `<svg>`; a chart with
//!   nothing to draw yet is `<figure class="chart empty" data-chart="NAME">` with a caption saying why;
//!   a run's report has every chart of [`RUN_CHARTS`], in that order, and a run with a server
//!   monitor (run.json `monitors`, or a step's `server_monitors`) also those of
//!   [`RUN_MONITOR_CHARTS`] right after `server` (`server` its CPU, a series per monitor and
//!   measure named `MONITOR: …`; `server-memory` its memory); a capacity search (run.json
//!   `plan.find_max`) also has those of [`RUN_SEARCH_CHARTS`] first, before `rates` (`search`: x the
//!   probe's number, y its offered rate; a series per class, `data-n` the class as steps.tsv names
//!   it, each point's path its own with a `<title>` naming its role and why); a drawn chart's points are
//!   `<path d="M…" data-v="X Y,X Y,…">` inside a `<g data-n="SERIES">` (a series' markers, a layer's
//!   bars): one "X Y" (the values, not pixels) for each `M` of the path, in order; a run's knee
//!   (run.json `summary.knee`, not a search's) is a `<g data-knee="CAUSE">` on every chart against
//!   the offered load, with a `<title>` and a label `knee X: CAUSE` in words (and the request that
//!   broke first, `knee.request`); a run of a named
//!   mix (run.json steps' `per_request`) also has those of [`RUN_REQUEST_CHARTS`] right after
//!   `status`, in a section "Requests" (led by `<p class="knee-request" data-request="NAME">` when
//!   the knee names one; a series per name, `data-n` the name, x the step value),
//!   followed by `<div id="requests">`: per step a `<details data-step="N">` (the last one open)
//!   holding `<table class="requests" data-step="N">`, header cells `<th data-col>` (requests.tsv's
//!   names, and `status`), a row `<tr data-name="NAME">` per name, cells `<td data-col>`;
//! - a comparison's page (`stampede compare`) has every chart of [`COMPARE_CHARTS`], in that order,
//!   a series per run (`data-n` its label, one colour per run on every chart), and when a run's own
//!   server monitor (paired with its target) measured it, then those of [`COMPARE_MONITOR_CHARTS`]
//!   (`server`, `server-memory`: a series per run that has one, `data-n` its label); its ranking is
//!   `<table id="ranking">`, a row `<tr data-run="LABEL" data-rank="N">` per run, best first
//!   (compare.json's `ranking`); its delta table is `<table id="compare">`, a row
//!   `<tr data-value="V" data-run="LABEL">` per step value and run, its cells `<td data-metric="NAME"
//!   data-class="CLASS">` (compare.json's classes), `data-regression="1"` on a regression; runs of
//!   a named mix then `<table id="compare-requests">`, a row `<tr data-value="V" data-run="LABEL"
//!   data-name="NAME">` per step value, name and run, cells as `#compare`'s (never a regression),
//!   and the names only one side has in `<ul id="names-only">`;
//! - the steps table is `<table id="steps">`: its header cells `<th data-col="COLUMN">` name the
//!   columns as steps.tsv does, and the n-th `<td>` of a row is the n-th column's cell, formatted as
//!   steps.tsv formats it. A run's other tables are `#agents` (header cells `<th data-col="COLUMN">`,
//!   cells by place as in `#steps`, a lower bound written `≥N`, none `-`), `#plan`, `#fail-on`,
//!   `#warnings` and `#stopped`; a search's, `#capacity` (run.json `capacity`, a row per field:
//!   `<th data-key>` and `<td data-key>`; until the search ends, a `<p id="capacity">` saying so), and
//!   its answer `<p class="answer" data-status="STATUS">` (`running` until it ends). Past 200 rows, `#agents` is `<table id="agents"
//!   data-fill="agent_steps">` with an empty body that the page's script fills from the embedded
//!   `agent_steps` (a `<noscript>` line says so);
//! - once the page's script has run, `<html data-ready="1">`; a script error sets `data-errors` on
//!   `<html>` to its message.
//!
//! - a history's page (`stampede history`, `history_page.rs`) has every chart of [`HISTORY_CHARTS`],
//!   in that order, x the run's place counted from 1 (oldest first), a labelled boundary at each
//!   naming the run by commit and label, each point's path with a `<title>` naming its run (a
//!   chart with no run to draw is empty, saying why); its table is `<table id="history">`, header
//!   cells `<th data-col>` the TSV's columns, a row `<tr data-run="N" data-commit data-trust>` per
//!   run, oldest first, cells `<td data-col>` as the TSV writes them; its data is the history
//!   (`at`, `rows`) under the schema [`HISTORY_DATA_SCHEMA`]; `<p class="rule" data-at data-rule>`
//!   says which step each run was read at.
//!
//! The live page (`live_page.rs`: a run as it happens, and live.html) has its own contract there.

pub mod chart;
mod compare_page;
mod data;
pub mod escape;
mod history_page;
mod input;
mod live_page;
mod page;
mod run_page;

pub use compare_page::{COMPARE_CHARTS, COMPARE_MONITOR_CHARTS, render_compare};
pub use history_page::{HISTORY_CHARTS, HISTORY_DATA_SCHEMA, render_history};
pub use input::{InputError, RunReport};
pub use live_page::{AGENT_COLS, BASELINE_PREFIX, LIVE_SECTIONS, View, live_page, live_view};
pub use run_page::{
    RUN_CHARTS, RUN_MONITOR_CHARTS, RUN_REQUEST_CHARTS, RUN_SEARCH_CHARTS, render_run,
};
