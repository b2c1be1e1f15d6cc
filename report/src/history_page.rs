//! The page of `stampede history`: a trend over runs, oldest first, so a server that got slower
//! across commits shows as a line going the wrong way. Three charts against the run's place in
//! time (knee and kept-up-to, p99 at the chosen step, requests per server core-second), each point
//! named by its commit and label on hover and under the axis, then the table of the rows, the
//! TSV's columns and cells.
use std::fmt::Write;

use results::history::{COLUMNS, History, Row, Trust};
use results::quantity::{OK_PER_CORE_S, P99_MS};
use results::step::human;

use crate::chart::{self, Axis, Boundary, Chart, Colour, Mark, Series, Titles, Unit};
use crate::escape::html;
use crate::page::styled_page;

/// The `data-chart` names of a history's page, in page order (the page contract, `lib.rs`).
pub const HISTORY_CHARTS: [&str; 3] = ["history-knee", "history-p99", "history-per-core"];

/// The embedded data's schema name: the history's rows as `History` serializes them.
pub const HISTORY_DATA_SCHEMA: &str = "stampede.history-data/1";

const STYLE: &str = "#history th,#history td.l{text-align:left}#history td{white-space:nowrap}\
#history tr[data-trust=untrusted] td{background:#f9d0d0}.rule{color:#555}\
.banner{background:#fff6d6;border:1px solid #e0c040;padding:.5em}";

/// The HTML page of a history.
pub fn render_history(h: &History) -> String {
    let title = match (h.rows.first(), h.rows.last()) {
        (Some(a), Some(b)) if h.rows.len() > 1 => format!(
            "stampede history: {} runs, {} to {}",
            h.rows.len(),
            a.started_at,
            b.started_at
        ),
        _ => format!(
            "stampede history: {} run{}",
            h.rows.len(),
            if h.rows.len() == 1 { "" } else { "s" }
        ),
    };
    let mut body = String::new();
    let _ = writeln!(body, "<h1>{}</h1>", html(&title));
    let _ = writeln!(
        body,
        "<p class=\"rule\" data-at=\"{}\" data-rule=\"{}\">{}. x: the runs in the order they started, named by commit and label.</p>",
        h.at.rate.map_or(String::new(), |r| r.to_string()),
        match h.at.rule {
            results::history::AtRule::Given => "given",
            results::history::AtRule::Common => "common",
        },
        html(&h.at.words())
    );
    let untrusted = h
        .rows
        .iter()
        .filter(|r| r.trust == Trust::Untrusted)
        .count();
    if untrusted > 0 {
        let _ = writeln!(
            body,
            "<p class=\"banner\">{untrusted} of the runs could not be trusted: their generator could not keep its schedule on some step (red rows); their numbers say little of the server.</p>"
        );
    }
    for c in charts(h) {
        body.push_str(&c);
    }
    body.push_str("<h2>Runs</h2>\n<div class=\"wide\">\n");
    body.push_str(&table(h));
    body.push_str("</div>\n");
    let mut data = serde_json::to_value(h).expect("a History always serializes");
    data["schema"] = HISTORY_DATA_SCHEMA.into();
    let data = serde_json::to_string(&data).expect("a Value always serializes");
    styled_page(&title, STYLE, &body, &data)
}

/// A run's place on the x axis: counted from 1, oldest first.
fn x(i: usize) -> f64 {
    (i + 1) as f64
}

/// The run axis: half a run of room either side, so the first and last points are off the frame.
fn x_axis(h: &History) -> Axis {
    Axis::linear("run, oldest first", Unit::Si)
        .whole()
        .with_range(0.5, h.rows.len() as f64 + 0.5)
}

/// A labelled line at each run naming it (its commit, else its label).
fn names(h: &History) -> Vec<Boundary> {
    h.rows
        .iter()
        .enumerate()
        .map(|(i, r)| Boundary {
            x: x(i),
            label: tag(r),
        })
        .collect()
}

/// A run's name under a chart, short so that neighbours' names fit: its commit as `git log
/// --oneline` cuts a SHA (7), else its label; at most 16 characters (its hover text has it whole).
fn tag(r: &Row) -> String {
    let name = match &r.commit {
        Some(c) if c.len() > 7 && c.chars().all(|c| c.is_ascii_hexdigit()) => c[..7].to_string(),
        Some(c) => c.clone(),
        None => r.label.clone(),
    };
    match name.chars().count() > 16 {
        true => name.chars().take(15).chain(['…']).collect(),
        false => name,
    }
}

/// Each point's hover text: the run's name, when it started, the value.
fn title(r: &Row, what: &str, v: f64, unit: &str) -> String {
    format!(
        "{} ({}, {}): {what} {}{unit}",
        r.name(),
        r.started_at,
        r.trust.name(),
        human(v)
    )
}

/// The marks of `value` over the runs that have one, with their hover texts.
fn series(
    h: &History,
    name: &str,
    colour: Colour,
    value: impl Fn(&Row) -> Option<(f64, bool)>,
    unit: &str,
) -> Option<Series> {
    let mut marks = Vec::new();
    let mut titles = Vec::new();
    for (i, r) in h.rows.iter().enumerate() {
        if let Some((v, lower_bound)) = value(r) {
            marks.push(match lower_bound {
                true => Mark::lower_bound(x(i), v),
                false => Mark::at(x(i), v),
            });
            titles.push(title(r, name, v, unit));
        }
    }
    (!marks.is_empty()).then(|| Series::new(name, colour, marks).titled(titles))
}

fn charts(h: &History) -> Vec<String> {
    let mut titles = Titles::default();
    let mut out = Vec::new();
    let axis_unit = match h.rows.first().map(|r| r.axis) {
        Some("connections") => "connections",
        _ => "req/s",
    };
    // Knee and kept-up-to.
    let knee = series(
        h,
        "knee",
        Colour::nth(3),
        |r| r.knee.map(|v| (v, false)),
        "",
    );
    let kept = series(
        h,
        "kept up to",
        Colour::nth(0),
        |r| r.kept_up_to.map(|v| (v, false)),
        "",
    );
    let name = HISTORY_CHARTS[0];
    let caption = format!("knee and kept up to ({axis_unit}), run by run");
    out.push(match (knee, kept) {
        (None, None) => chart::empty(name, &caption, "no run kept up with a step or had a knee"),
        (k, c) => {
            let mut chart =
                Chart::new(name, &caption, x_axis(h), Axis::linear(axis_unit, Unit::Si))
                    .boundaries(names(h));
            for s in [c, k].into_iter().flatten() {
                chart = chart.series(s);
            }
            chart.render_in(&mut titles)
        }
    });
    // p99 at the chosen step.
    let name = HISTORY_CHARTS[1];
    let at = h.at.rate.map_or_else(|| "-".to_string(), human);
    let caption = format!(
        "{} at {at} {axis_unit} (or the nearest step below)",
        P99_MS.titled()
    );
    out.push(
        match series(
            h,
            "p99",
            Colour::nth(1),
            |r| r.p99_ms.map(|v| (v, r.p99_lower_bound)),
            " ms",
        ) {
            None => chart::empty(name, &caption, "no run has a step at or below that rate"),
            Some(s) => Chart::new(name, &caption, x_axis(h), Axis::linear("ms", Unit::Ms))
                .boundaries(names(h))
                .series(s)
                .note("hollow: a lower bound (requests still unanswered at the step's end)")
                .render_in(&mut titles),
        },
    );
    // Requests per server core-second there.
    let name = HISTORY_CHARTS[2];
    let caption = format!("{} at {at} {axis_unit}", OK_PER_CORE_S.titled());
    out.push(
        match series(
            h,
            "req/core-s",
            Colour::nth(2),
            |r| r.ok_per_core_s.map(|v| (v, false)),
            "",
        ) {
            None => chart::empty(
                name,
                &caption,
                "no run had its own server watched (--monitor-pid, --monitor-target or --server-prometheus)",
            ),
            Some(s) => Chart::new(name, &caption, x_axis(h), Axis::linear("req/core-s", Unit::Si))
                .boundaries(names(h))
                .series(s)
                .render_in(&mut titles),
        },
    );
    out
}

/// `<table id="history">`: header cells `<th data-col>` (the TSV's columns), a row
/// `<tr data-run="N" data-commit data-trust>` per run (N counted from 1, oldest first), cells
/// `<td data-col>` as the TSV writes them.
fn table(h: &History) -> String {
    let mut out = String::from("<table id=\"history\">\n<thead><tr><th>#</th>");
    for c in COLUMNS {
        let _ = write!(out, "<th data-col=\"{}\">{}</th>", html(c), html(c));
    }
    out.push_str("</tr></thead>\n<tbody>\n");
    for (i, r) in h.rows.iter().enumerate() {
        let _ = write!(
            out,
            "<tr data-run=\"{}\" data-commit=\"{}\" data-trust=\"{}\"><td>{}</td>",
            i + 1,
            html(r.commit.as_deref().unwrap_or_default()),
            r.trust.name(),
            i + 1
        );
        for (c, cell) in COLUMNS.iter().zip(r.tsv_cells()) {
            let _ = write!(out, "<td data-col=\"{}\">{}</td>", html(c), html(&cell));
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</tbody>\n</table>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use results::compare::Labelled;
    use results::run_file::RunFile;
    use std::path::Path;

    const GOLDEN: &str = include_str!("../../results/tests/golden/run.json");

    fn history(n: usize) -> History {
        let runs: Vec<Labelled> = (0..n)
            .map(|i| {
                let mut run = RunFile::parse(GOLDEN, Path::new("run.json")).unwrap();
                run.started_at = format!("2026-12-0{}T01:00:00.000Z", i + 1);
                run.commit = Some(format!("c0mmit{i}<x>"));
                for s in &mut run.steps {
                    s.latency_ms.p99 += i as f64;
                }
                Labelled {
                    label: format!("run{i}"),
                    source: format!("r/{i}"),
                    run,
                }
            })
            .collect();
        results::history::history(&runs, None)
    }

    #[test]
    fn the_page_has_its_charts_a_point_per_run_and_a_row_per_run() {
        let h = history(3);
        let page = render_history(&h);
        for name in HISTORY_CHARTS {
            assert!(
                page.contains(&format!("data-chart=\"{name}\"")),
                "{name} missing"
            );
        }
        for i in 1..=3 {
            assert!(page.contains(&format!("<tr data-run=\"{i}\"")), "row {i}");
        }
        // The commit is escaped wherever it is written.
        assert!(!page.contains("<x>") && page.contains("c0mmit2&lt;x&gt;"));
        // The golden run has no monitor: the per-core chart says why it is empty.
        assert!(page.contains("class=\"chart empty\" data-chart=\"history-per-core\""));
        assert!(!page.contains("src=\"http") && !page.contains("href=\"http"));
        assert!(page.contains(HISTORY_DATA_SCHEMA));
    }

    #[test]
    fn the_table_s_cells_are_the_tsv_s() {
        let h = history(2);
        let page = render_history(&h);
        let tsv = h.tsv();
        let row = tsv.lines().nth(2).unwrap();
        let p99 = COLUMNS.iter().position(|c| *c == P99_MS.key).unwrap();
        let cell = row.split('\t').nth(p99).unwrap();
        assert!(
            page.contains(&format!("<td data-col=\"{}\">{cell}</td>", P99_MS.key)),
            "{cell}"
        );
    }
}
