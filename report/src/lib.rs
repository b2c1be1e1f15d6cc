//! stampede's HTML report: one run's results (run.json and the steps' percentile distributions) in,
//! one self-contained HTML file out. Charts are SVG drawn here; the page carries its own CSS and a
//! few KB of plain JavaScript, and fetches nothing when opened, so it works from a mail attachment.
//! Same input, same bytes.
//!
//! Depends on `shared` only: no tokio, no tonic.
//!
//! The page's contract with its readers (the browser test, scripts that scrape a report):
//! - the data drawn is embedded as JSON in `<script type="application/json" id="stampede-data">`
//!   (a run's report: run.json's content, keys sorted, without its indentation);
//! - every chart is a `<figure class="chart" data-chart="NAME">` holding one `<svg>`; a chart with
//!   nothing to draw yet is `<figure class="chart empty" data-chart="NAME">` with a caption saying why;
//!   a run's report has every chart of [`RUN_CHARTS`], in that order; a drawn chart's points carry
//!   `data-v="X Y"` (the values, not pixels) inside a `<g data-n="SERIES">`;
//! - a comparison's page (`stampede compare`) has every chart of [`COMPARE_CHARTS`], in that order,
//!   a series per run (`data-n` its label); its delta table is `<table id="compare">`, a row
//!   `<tr data-value="V" data-run="LABEL">` per step value and run, its cells `<td data-metric="NAME"
//!   data-class="CLASS">` (compare.json's classes), `data-regression="1"` on a regression;
//! - the steps table is `<table id="steps">`, its cells `<td data-col="COLUMN">` named and formatted as
//!   steps.tsv names and formats them; a run's other tables are `#agents` (its header cells
//!   `<th data-col="COLUMN">`), `#plan`, `#fail-on`, `#warnings` and `#stopped`;
//! - once the page's script has run, `<html data-ready="1">`; a script error sets `data-errors` on
//!   `<html>` to its message.

pub mod chart;
mod compare_page;
pub mod escape;
mod input;
mod page;
mod run_page;

pub use compare_page::{COMPARE_CHARTS, render_compare};
pub use input::{InputError, RunReport};
pub use run_page::{RUN_CHARTS, render_run};
