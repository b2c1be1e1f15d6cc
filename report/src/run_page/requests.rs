//! A named mix's own section of the report (run.json `steps[].per_request`): each name's served
//! rate and p99 against the offered load, a line per name, and each step's table of its names, the
//! last step's open. A run of unnamed requests has none of it.
use std::fmt::Write;

use results::quantity::{FAILED_PCT, MAX_MS, OK_RATE, P50_MS, P99_MS};
use results::run_file::RunFile;
use results::step::per_request::RequestRow;
use results::step::{StepResult, tsv_number};

use super::charts::{knee_line, step_axis, trust_shades};
use crate::chart::{Axis, Chart, Colour, Dash, Mark, Scale, Series, Titles, Unit, short};
use crate::escape::html;

/// The columns of a step's table of names, by requests.tsv's names (`status` is the replies by
/// status class, in one cell).
pub const REQUEST_COLS: [&str; 9] = [
    "name",
    "weight",
    "requests",
    OK_RATE.key,
    FAILED_PCT.key,
    P50_MS.key,
    P99_MS.key,
    MAX_MS.key,
    "status",
];

/// The tables' CSS (a run without names has none of it): a name reads from the left, a folded
/// step's line shows it opens.
pub const STYLE: &str = "table.requests td:first-child{text-align:left}table.requests td{white-space:nowrap}\
#requests summary{cursor:pointer;margin:.2em 0}";

/// The names of the mix, in the plan's order, as the run's steps carry them (a name only a later
/// step has, after the others).
pub fn names(run: &RunFile) -> Vec<&str> {
    let mut out: Vec<&str> = Vec::new();
    for s in &run.steps {
        for r in &s.per_request {
            if !out.contains(&r.name.as_str()) {
                out.push(&r.name);
            }
        }
    }
    out
}

/// Whether the run has a named mix: its report then has the section.
pub fn any(run: &RunFile) -> bool {
    run.steps.iter().any(|s| !s.per_request.is_empty())
}

/// A name's latency statistic as a table writes it: its given-up requests' ages are among the
/// values, so with any given up each one is a lower bound (the true latency can only be higher).
pub fn latency_cell(r: &RequestRow, v: f64) -> String {
    if r.given_up > 0 {
        format!("≥{}", tsv_number(v))
    } else {
        tsv_number(v)
    }
}

/// The replies by status class, the classes that had any: `2xx 1200 · 5xx 30`, `-` for none.
pub fn status_cell(r: &RequestRow) -> String {
    let parts: Vec<String> = r
        .status
        .0
        .iter()
        .filter(|(_, n)| *n > 0)
        .map(|(class, n)| format!("{class} {n}"))
        .collect();
    if parts.is_empty() {
        "-".into()
    } else {
        parts.join(" · ")
    }
}

/// One row's cells, in [`REQUEST_COLS`]' order.
pub fn cells(r: &RequestRow) -> [String; 9] {
    [
        r.name.clone(),
        r.weight.to_string(),
        r.requests.to_string(),
        tsv_number(r.ok_rate),
        tsv_number(r.failed_pct),
        latency_cell(r, r.latency_ms.p50),
        latency_cell(r, r.latency_ms.p99),
        latency_cell(r, r.latency_ms.max),
        status_cell(r),
    ]
}

/// One step's table of its names (`<table class="requests" data-step="N">`, a row
/// `<tr data-name="NAME">` each, its cells `<td data-col="COLUMN">`).
pub fn step_table(s: &StepResult) -> String {
    let mut out = format!(
        "<div class=\"wide\"><table class=\"requests\" data-step=\"{}\">\n<thead><tr>",
        s.number
    );
    for c in REQUEST_COLS {
        let _ = write!(out, "<th data-col=\"{c}\">{c}</th>");
    }
    out.push_str("</tr></thead>\n<tbody>\n");
    for r in &s.per_request {
        let _ = write!(out, "<tr data-name=\"{}\">", html(&r.name));
        for (c, v) in REQUEST_COLS.iter().zip(cells(r)) {
            let _ = write!(out, "<td data-col=\"{c}\">{}</td>", html(&v));
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</tbody>\n</table></div>\n");
    out
}

/// Each step's table, the last one open and the others folded (`<details>`, no script needed):
/// twenty names over fifteen steps stay one screen.
pub fn tables(run: &RunFile) -> String {
    let steps: Vec<&StepResult> = run
        .steps
        .iter()
        .filter(|s| !s.per_request.is_empty())
        .collect();
    let mut out = String::from("<div id=\"requests\">\n");
    for (i, s) in steps.iter().enumerate() {
        let open = if i + 1 == steps.len() { " open" } else { "" };
        let _ = writeln!(
            out,
            "<details data-step=\"{0}\"{open}><summary>step {0} ({1}): {2} names</summary>",
            s.number,
            html(&short(s.step_value)),
            s.per_request.len()
        );
        out.push_str(&step_table(s));
        out.push_str("</details>\n");
    }
    out.push_str("</div>\n");
    out
}

/// A name's colour and dash: the palette's ten colours, then again dashed, then dotted, so twenty
/// names are told apart.
fn look(i: usize) -> (Colour, Dash) {
    let dash = match i / 10 {
        0 => Dash::Solid,
        1 => Dash::Dashed,
        _ => Dash::Dotted,
    };
    (Colour::nth(i), dash)
}

/// A chart against the offered load with a line per name of `y` (a step without the name has no
/// point); `bound`: whether that step's value is a lower bound, drawn hollow.
fn per_name(
    run: &RunFile,
    mut c: Chart,
    y: impl Fn(&RequestRow) -> f64,
    bound: impl Fn(&RequestRow) -> bool,
) -> Chart {
    for (i, name) in names(run).into_iter().enumerate() {
        let marks = run
            .steps
            .iter()
            .filter_map(|s| {
                let r = s.per_request.iter().find(|r| r.name == name)?;
                Some(if bound(r) {
                    Mark::lower_bound(s.step_value, y(r))
                } else {
                    Mark::at(s.step_value, y(r))
                })
            })
            .collect();
        let (colour, dash) = look(i);
        let mut series = Series::new(name, colour, marks).dash(dash);
        if run.is_search() {
            series = series.scatter();
        }
        c = c.series(series);
    }
    c.knee(knee_line(run)).shades(trust_shades(run))
}

/// Each name's served rate against the offered load.
pub fn served(run: &RunFile) -> Chart {
    let c = Chart::new(
        "requests-served",
        "Served per name",
        step_axis(run),
        Axis::linear("served/s", Unit::Si),
    );
    per_name(run, c, |r| r.ok_rate, |_| false)
}

/// Each name's p99 against the offered load; a lower bound (a name with requests given up) hollow.
pub fn p99(run: &RunFile) -> Chart {
    let c = Chart::new(
        "requests-p99",
        "p99 per name",
        step_axis(run),
        Axis::linear("p99", Unit::Ms),
    )
    .switch_scale(Scale::Log);
    let c = per_name(run, c, |r| r.latency_ms.p99, |r| r.given_up > 0);
    let any_bound = run
        .steps
        .iter()
        .flat_map(|s| &s.per_request)
        .any(|r| r.given_up > 0);
    if any_bound {
        c.note(
            "Hollow points are lower bounds: that name had requests given up, which enter at their age then.",
        )
    } else {
        c
    }
}

/// The section whole: its heading, the two charts and the tables.
pub fn section(run: &RunFile, titles: &mut Titles) -> String {
    let mut out = String::from("<h2>Requests</h2>\n");
    out.push_str(&served(run).render_in(titles));
    out.push_str(&p99(run).render_in(titles));
    out.push_str(&tables(run));
    out
}

#[cfg(test)]
pub(crate) mod tests;
