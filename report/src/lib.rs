//! stampede's HTML report: one run's results (run.json and the steps' percentile distributions) in,
//! one self-contained HTML file out. Charts are SVG drawn here; the page carries its own CSS and a
//! few KB of plain JavaScript, and fetches nothing when opened, so it works from a mail attachment.
//! Same input, same bytes.
//!
//! Depends on `shared` only: no tokio, no tonic.
//!
//! The page's contract with its readers (the browser test, scripts that scrape a report):
//! - the data drawn is embedded as JSON in `<script type="application/json" id="stampede-data">`;
//! - every chart is a `<figure class="chart" data-chart="NAME">` holding one `<svg>`; a chart with
//!   nothing to draw yet is `<figure class="chart empty" data-chart="NAME">` with a caption saying why;
//! - the steps table is `<table id="steps">`, its cells `<td data-col="COLUMN">` named and formatted as
//!   steps.tsv names and formats them;
//! - once the page's script has run, `<html data-ready="1">`; a script error sets `data-errors` on
//!   `<html>` to its message.

mod compare_page;
pub mod escape;
mod input;
mod page;
mod run_page;

pub use compare_page::render_compare;
pub use input::{InputError, RunReport};
pub use run_page::render_run;
