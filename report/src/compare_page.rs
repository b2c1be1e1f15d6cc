//! The page of `stampede compare`: the runs' headlines, what differs between their plans, the
//! one-run page's charts with a line per run (one colour each, the baseline solid, the others
//! dashed) against the joined step value, and the per-step delta table against the baseline (noise
//! greyed, regressions red, untrusted cells and lower bounds marked).
use std::fmt::Write;

use results::compare::{CellEntry, Change, Compared, Comparison, METRICS, RunEntry, in_unit};
use results::quantity::{FAILED_PCT, OK_RATE, P50_MS, P99_MS, SRV_CPU_UTIL_PCT};
use results::step::human;
use results::verdict::Verdict;

use shared::plan::LoadModel;

use crate::chart::{Axis, Chart, Colour, Dash, Mark, Scale, Series, Shade, Titles, Unit};
use crate::escape::html;
use crate::page::styled_page;
use crate::run_page::charts::{distinct, step_axis_over, stretch};
use crate::run_page::server;

/// The `data-chart` names of a comparison's page, in page order (the page contract, `lib.rs`).
pub const COMPARE_CHARTS: [&str; 4] = ["rates", "latency-p99", "latency-p50", "failures"];

/// The charts a comparison also has, after the others, when a server monitor measured the server's
/// CPU in a step of any of its runs.
pub const COMPARE_MONITOR_CHARTS: [&str; 1] = ["server"];

/// The comparison's own CSS: the banner, the run swatches, the delta table's classes.
const STYLE: &str = ".banner{background:#fff6d6;border:1px solid #e0c040;padding:.5em .5em .5em 2em}\
.swatch{display:inline-block;width:.8em;height:.8em;background:var(--c);margin-right:.4em}\
#compare td{white-space:nowrap}#compare .d{display:block;font-size:85%}#compare td[colspan]{text-align:left}#compare tr.first>*{border-top:2px solid #aaa}\
#compare [data-class=noise],#compare .c-missing,#compare [data-class=missing]{color:#999}#compare [data-class=better]{color:#060}\
#compare [data-class=worse]{color:#a40}#compare .regression{color:#fff;background:#c62828;font-weight:600}#compare [data-class=undecided]{color:#86a}\
#compare .untrusted::after{content:' \\2020';color:#c62828}#compare .bound{text-decoration:underline dotted}\
td.t-degraded{background:#fdf0c4}td.t-invalid{background:#f9d0d0}.verdict.regressed{color:#c62828;font-weight:600}\
.key-of-table span{margin-right:1.2em}#headlines th,#headlines td{text-align:left}#headlines .answer{font-size:1em}";

/// The HTML page of a comparison.
pub fn render_compare(c: &Comparison) -> String {
    let labels: Vec<&str> = c.runs.iter().map(|r| r.label.as_str()).collect();
    let title = format!("stampede compare: {}", labels.join(" vs "));
    let mut body = String::new();
    let _ = writeln!(body, "<h1>{}</h1>", html(&title));
    let _ = writeln!(
        body,
        "<p class=\"meta\">baseline {} · a change of at most {}% is noise · steps joined on {}, not on time</p>",
        html(&c.baseline),
        human(c.threshold_pct),
        html(c.axis)
    );
    body.push_str(&banners(c));
    body.push_str(&headlines(c));
    body.push_str(&regressions(c));
    body.push_str("<h2>Against the offered load</h2>\n");
    let mut titles = Titles::default();
    for chart in charts(c) {
        body.push_str(&chart.render_in(&mut titles));
    }
    body.push_str("<h2>Step by step, against the baseline</h2>\n<div class=\"wide\">\n");
    body.push_str(&delta_table(c));
    body.push_str("</div>\n");
    let _ = writeln!(
        body,
        "<p class=\"key-of-table\"><span>grey: noise, a change of at most {}%</span>\
         <span>red: a regression</span><span>green: better</span><span>purple: undecided, a lower bound \
         could overturn it</span><span>†: a step of the row was not trusted (trust invalid), never a \
         regression</span><span>dotted: a lower bound on either side (≥: this one)</span></p>",
        human(c.threshold_pct)
    );
    // Compact: the page embeds every cell, and pretty-printing would double its size.
    let data = serde_json::to_string(c).expect("a Comparison always serializes");
    styled_page(&title, STYLE, &body, &data)
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
        "<table id=\"headlines\">\n<thead><tr><th>run</th><th>answer</th><th>kept up vs baseline</th>\
         <th>target</th><th>started</th><th>results</th></tr></thead>\n<tbody>\n",
    );
    for (i, r) in c.runs.iter().enumerate() {
        let role = if r.baseline { " (baseline)" } else { "" };
        let _ = writeln!(
            out,
            "<tr data-run=\"{label}\"><th><i class=\"swatch\" style=\"--c:{colour}\"></i>{label}{role}</th>\
             <td class=\"answer\" title=\"{answer}\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            html(&r.headline.sentence),
            r.headline
                .kept_up_vs_baseline_pct
                .map_or(String::new(), |d| format!("{d:+.1}%")),
            html(&r.target),
            html(&r.started_at),
            html(&r.source),
            label = html(&r.label),
            colour = Colour::nth(i).0,
            answer = html(&r.headline.answer),
        );
    }
    out.push_str("</tbody>\n</table>\n");
    out
}

fn regressions(c: &Comparison) -> String {
    if c.regressions.is_empty() {
        return format!(
            "<p class=\"verdict\">No trusted step got worse than {}'s beyond {}%.</p>\n",
            html(&c.baseline),
            human(c.threshold_pct)
        );
    }
    let lines = c.regressions_by_step();
    let mut out = format!(
        "<p class=\"verdict regressed\">{} step{} regressed against {} (trusted, worse beyond {}%):</p>\n<ul id=\"regressions\">\n",
        lines.len(),
        if lines.len() == 1 { "" } else { "s" },
        html(&c.baseline),
        human(c.threshold_pct)
    );
    for line in &lines {
        let _ = writeln!(out, "<li>{}</li>", html(line));
    }
    out.push_str("</ul>\n");
    out
}

/// The charts of [`COMPARE_CHARTS`], in order, then [`COMPARE_MONITOR_CHARTS`] if a monitor
/// measured a run's server CPU.
fn charts(c: &Comparison) -> Vec<Chart> {
    let offered = c.axis != "connections";
    let mut rates = against(
        c,
        "rates",
        &format!("Served rate ({})", OK_RATE.key),
        OK_RATE.key,
        Unit::Si,
    );
    if offered {
        rates = rates.ideal("ideal: served = offered");
    }
    let p99 =
        against(c, "latency-p99", "Latency p99", P99_MS.key, Unit::Ms).switch_scale(Scale::Log);
    let p50 = against(
        c,
        "latency-p50",
        "Latency p50 (median)",
        P50_MS.key,
        Unit::Ms,
    )
    .switch_scale(Scale::Log);
    let failed = against(
        c,
        "failures",
        &format!("Failed share of the requests due ({})", FAILED_PCT.key),
        FAILED_PCT.key,
        Unit::Percent,
    );
    let mut charts = vec![rates, p99, p50, failed];
    let server = server_cpu(c);
    if server.series.iter().any(|s| !s.marks.is_empty()) {
        charts.push(server);
    }
    charts
}

/// The server's CPU (of the cores it may use) in every run that had a monitor: a line per run and
/// monitor in the run's colour, the baseline solid, at each joined step value the run's step has.
fn server_cpu(c: &Comparison) -> Chart {
    let mut chart = Chart::new(
        "server",
        &format!(
            "Server CPU, % of the cores it may use ({})",
            SRV_CPU_UTIL_PCT.key
        ),
        joined_axis(c),
        Axis::linear(SRV_CPU_UTIL_PCT.key, Unit::Percent),
    );
    let mut top: f64 = 100.0;
    for (i, (run, input)) in c.runs.iter().zip(c.inputs()).enumerate() {
        for name in server::monitors(&input.run) {
            let marks: Vec<Mark> = c
                .steps
                .iter()
                .filter_map(|row| {
                    let n = row.runs[i].as_ref()?.step;
                    let s = input.run.steps.iter().find(|s| s.number == n)?;
                    let m = server::seen(s, &name)?;
                    let v = m.target.as_ref()?.cpu_util_pct;
                    top = top.max(v);
                    Some(if m.partial {
                        Mark::lower_bound(row.value, v)
                    } else {
                        Mark::at(row.value, v)
                    })
                })
                .collect();
            let title = format!("{}: {name}", run.label);
            chart = chart.series(Series::new(&title, Colour::nth(i), marks).dash(dash_of(run)));
        }
    }
    chart.y = chart.y.with_range(0.0, top);
    chart
        .note(&format!(
            "{} solid, the other runs dashed; a run without a monitor has no line. Hollow: the \
             monitor saw only part of the step.",
            c.baseline
        ))
        .shades(shades(c))
}

/// A run's line: the baseline solid, the others dashed.
fn dash_of(run: &RunEntry) -> Dash {
    if run.baseline {
        Dash::Solid
    } else {
        Dash::Dashed
    }
}

/// The joined step value's axis: demanded requests/s whatever the open model (a connections run's
/// rate × --num-call), or a closed loop's connections.
fn joined_axis(c: &Comparison) -> Axis {
    let joined = if c.axis == "connections" {
        LoadModel::Concurrency
    } else {
        LoadModel::Requests
    };
    step_axis_over(joined, c.steps.iter().map(|r| r.value))
}

/// One metric of every run against the joined step value: a line per run in its colour (the
/// baseline solid), lower bounds hollow, steps that some run could not trust shaded.
fn against(c: &Comparison, name: &str, title: &str, metric: &str, unit: Unit) -> Chart {
    let m = METRICS
        .iter()
        .position(|m| m.name == metric)
        .expect("a compared metric");
    let mut chart = Chart::new(name, title, joined_axis(c), Axis::linear(metric, unit));
    let mut any_bound = false;
    for (i, run) in c.runs.iter().enumerate() {
        let marks: Vec<Mark> = c
            .steps
            .iter()
            .filter_map(|row| {
                let cell = &row.runs[i].as_ref()?.cells[m];
                let v = cell.value?;
                any_bound |= cell.lower_bound;
                Some(if cell.lower_bound {
                    Mark::lower_bound(row.value, v)
                } else {
                    Mark::at(row.value, v)
                })
            })
            .collect();
        chart = chart.series(Series::new(&run.label, Colour::nth(i), marks).dash(dash_of(run)));
    }
    let mut note = format!("{} solid, the other runs dashed.", c.baseline);
    if any_bound {
        note.push_str(
            " Hollow points are lower bounds: requests given up enter at their age then, so the \
             true value is higher still.",
        );
    }
    chart.note(&note).shades(shades(c))
}

/// A shade over each row in which some run's step was not valid, in the worst verdict there, its
/// title naming the runs and their verdicts.
fn shades(c: &Comparison) -> Vec<Shade> {
    let values = distinct(c.steps.iter().map(|r| r.value));
    c.steps
        .iter()
        .filter_map(|row| {
            let doubts: Vec<(Verdict, String)> = c
                .runs
                .iter()
                .zip(&row.runs)
                .filter_map(|(run, s)| {
                    let s = s.as_ref().filter(|s| s.trust != Verdict::Valid)?;
                    Some((s.trust, format!("{} {}", run.label, s.trust.name())))
                })
                .collect();
            let worst = doubts
                .iter()
                .map(|(v, _)| *v)
                .max_by_key(|v| *v == Verdict::Invalid)?;
            let said: Vec<&str> = doubts.iter().map(|(_, s)| s.as_str()).collect();
            let (below, above) = stretch(&values, row.value);
            Some(Shade {
                from: row.value - below,
                to: row.value + above,
                verdict: worst,
                title: format!("{}: {}", human(row.value), said.join(", ")),
            })
        })
        .collect()
}

/// One row per step value and run: the run's numbers there and their change against the baseline.
fn delta_table(c: &Comparison) -> String {
    let mut out = format!(
        "<table id=\"compare\">\n<thead><tr><th>{}</th><th>run</th><th>step</th><th>trust</th><th>server</th>",
        html(c.axis)
    );
    for m in &METRICS {
        let better = match m.better {
            results::compare::Better::Higher => "higher is better",
            results::compare::Better::Lower => "lower is better",
        };
        let _ = write!(out, "<th title=\"{better}\">{}</th>", html(m.name));
    }
    out.push_str("</tr></thead>\n<tbody>\n");
    for row in &c.steps {
        for (i, (run, step)) in c.runs.iter().zip(&row.runs).enumerate() {
            let first = if i == 0 { " class=\"first\"" } else { "" };
            let _ = write!(
                out,
                "<tr{first} data-value=\"{}\" data-run=\"{}\"><th>{}</th><th>{}</th>",
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

/// A cell: the value (≥ for a lower bound) and its change; its class names how it compares, and
/// a mark (with the reasons on hover) when a side was not trusted or is a lower bound.
fn delta_cell(m: &Compared, cell: &CellEntry, baseline: &str) -> String {
    let Some(v) = cell.value else {
        return format!(
            "<td data-metric=\"{}\" data-class=\"missing\">–</td>",
            m.name
        );
    };
    let value = html(&in_unit(m, v, cell.lower_bound));
    let delta = match (cell.class, cell.delta_pct) {
        (Change::Baseline | Change::Missing, _) => String::new(),
        (_, Some(d)) => format!("<span class=\"d\">{d:+.1}%</span>"),
        (_, None) => "<span class=\"d\">from 0</span>".to_string(),
    };
    let mut why = Vec::new();
    let mut classes: Vec<&str> = Vec::new();
    if cell.untrusted {
        why.push(
            "a step of this row was not trusted (trust invalid): not a regression".to_string(),
        );
        classes.push("untrusted");
    }
    if cell.lower_bound {
        why.push("this value is a lower bound".to_string());
        classes.push("bound");
    }
    if cell.baseline_lower_bound {
        why.push(format!("{baseline}'s value is a lower bound"));
        classes.push("bound");
    }
    if cell.class == Change::Undecided {
        why.push("a lower bound could overturn the change either way".to_string());
    }
    let regression = cell.class == Change::Worse && !cell.untrusted;
    if regression {
        classes.push("regression");
    }
    classes.dedup();
    // Only what a cell has: the page holds one per metric of every run's step.
    let mut attrs = String::new();
    if regression {
        attrs.push_str(" data-regression=\"1\"");
    }
    if !classes.is_empty() {
        let _ = write!(attrs, " class=\"{}\"", classes.join(" "));
    }
    if !why.is_empty() {
        let _ = write!(attrs, " title=\"{}\"", html(&why.join("; ")));
    }
    format!(
        "<td data-metric=\"{}\" data-class=\"{}\"{attrs}>{value}{delta}</td>",
        m.name,
        cell.class.name(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use results::compare::{Labelled, Threshold, compare};
    use results::run_file::RunFile;
    use std::path::Path;

    const GOLDEN: &str = include_str!("../../results/tests/golden/run.json");

    fn run(label: &str) -> Labelled {
        Labelled {
            label: label.into(),
            source: format!("results/{label}"),
            run: RunFile::parse(GOLDEN, Path::new("run.json")).unwrap(),
        }
    }

    /// nginx against a slower app (p99 doubled at 300 req/s, an untrusted step at 200 req/s and a
    /// censored p99 at 600 req/s).
    fn comparison() -> Comparison {
        let mut app = run("app");
        app.run.steps[2].latency_ms.p99 *= 2.0;
        app.run.steps[1].trust = Verdict::Invalid;
        app.run.steps[1].latency_ms.p99 *= 2.0;
        let s = &mut app.run.steps[5];
        s.latency_ms.censored = true;
        s.latency_ms.lower_bounds.set(3);
        app.run.steps.pop();
        compare(vec![run("nginx"), app], None, Threshold::default()).unwrap()
    }

    /// The `<td>` of `run`'s row at `value` for `metric`.
    fn td<'a>(page: &'a str, value: &str, run: &str, metric: &str) -> &'a str {
        let row = format!("<tr data-value=\"{value}\" data-run=\"{run}\">");
        let row_at = page.find(&row).or_else(|| {
            let first = format!("<tr class=\"first\" data-value=\"{value}\" data-run=\"{run}\">");
            page.find(&first)
        });
        let row = &page[row_at.unwrap()..];
        let row = &row[..row.find("</tr>").unwrap()];
        let at = row.find(&format!("data-metric=\"{metric}\"")).unwrap();
        let start = row[..at].rfind("<td").unwrap();
        &row[start..start + row[start..].find("</td>").unwrap()]
    }

    #[test]
    fn the_same_comparison_gives_the_same_bytes() {
        assert_eq!(render_compare(&comparison()), render_compare(&comparison()));
    }

    #[test]
    fn every_chart_is_drawn_with_a_line_per_run_and_the_baseline_solid() {
        let page = render_compare(&comparison());
        let mut at = 0;
        for name in COMPARE_CHARTS {
            let key = format!("<figure class=\"chart\" data-chart=\"{name}\">");
            assert_eq!(page.matches(&key).count(), 1, "{name}");
            let here = page.find(&key).unwrap();
            assert!(here > at, "{name} in contract order");
            at = here;
            let figure = &page[here..here + page[here..].find("</figure>").unwrap()];
            assert!(figure.contains("<svg"), "{name}");
            assert!(figure.contains("data-n=\"nginx\"") && figure.contains("data-n=\"app\""));
            assert!(figure.contains("class=\"key line\"") && figure.contains("class=\"key dash\""));
        }
        let p99 = &page[page.find("data-chart=\"latency-p99\"").unwrap()..];
        let p99 = &p99[..p99.find("</figure>").unwrap()];
        // app's step at 200 is drawn at its doubled p99; its last step was not run.
        let app = &p99[p99.find("data-n=\"app\"").unwrap()..];
        let app = &app[..app.find("</g>").unwrap()];
        let points = app.split("data-v=\"").nth(1).unwrap();
        let points: Vec<&str> = points[..points.find('"').unwrap()].split(',').collect();
        assert!(points.contains(&"200 3.9"), "{p99}");
        assert!(!points.iter().any(|p| p.starts_with("600 ")), "{p99}");
        // The untrusted step of app is shaded in every chart, and says whose once on the page.
        assert!(p99.contains("<rect class=\"t-invalid\""), "{p99}");
        assert_eq!(page.matches("<title>200: app invalid</title>").count(), 1);
    }

    #[test]
    fn the_server_cpu_is_overlaid_per_run_that_had_a_monitor() {
        assert!(
            !render_compare(&comparison()).contains("data-chart=\"server\""),
            "no monitor, no server chart"
        );
        let mut nginx = run("nginx");
        for (i, s) in nginx.run.steps.iter_mut().enumerate() {
            s.server_monitors = vec![server::example("web1", 20.0 * i as f64)];
        }
        nginx.run.steps[1].server_monitors[0].partial = true;
        let c = compare(vec![nginx, run("app")], None, Threshold::default()).unwrap();
        let page = render_compare(&c);
        let key = "<figure class=\"chart\" data-chart=\"server\">";
        let here = page.find(key).expect("a server chart");
        let last = page.find("data-chart=\"failures\"").unwrap();
        assert!(here > last, "after the others");
        let figure = &page[here..here + page[here..].find("</figure>").unwrap()];
        assert!(
            !figure.contains("data-n=\"app"),
            "app had no monitor: {figure}"
        );
        let g = &figure[figure.find("data-n=\"nginx: web1\"").unwrap()..];
        let g = &g[..g.find("</g>").unwrap()];
        let values: Vec<&str> = g
            .split("data-v=\"")
            .skip(1)
            .map(|v| &v[..v.find('"').unwrap()])
            .collect();
        let all = values.join(",");
        for (i, row) in c.steps.iter().enumerate() {
            let want = format!("{} {}", row.value, 20.0 * i as f64);
            assert!(all.split(',').any(|p| p == want), "{want} in {all}");
        }
        assert!(
            g.contains("class=\"mk lb\""),
            "the partial step hollow: {g}"
        );
    }

    #[test]
    fn the_table_greys_noise_reddens_regressions_and_marks_doubt() {
        let c = comparison();
        let page = render_compare(&c);
        let worse = td(&page, "300", "app", "p99_ms");
        assert!(
            worse.contains("data-class=\"worse\" data-regression=\"1\" class=\"regression\"")
                && worse.contains("<span class=\"d\">+100.0%</span>"),
            "{worse}"
        );
        let noise = td(&page, "300", "app", "p50_ms");
        assert!(noise.contains("data-class=\"noise\">"), "{noise}");
        let untrusted = td(&page, "200", "app", "p99_ms");
        assert!(
            untrusted.contains("data-class=\"worse\" class=\"untrusted\"")
                && !untrusted.contains("data-regression"),
            "{untrusted}"
        );
        assert!(untrusted.contains("not trusted"), "{untrusted}");
        let base = td(&page, "300", "nginx", "p99_ms");
        assert!(base.contains("data-class=\"baseline\">"), "{base}");
        assert!(page.contains("no such step"));
        assert_eq!(
            page.matches("data-regression=\"1\"").count(),
            c.regressions.len()
        );
        assert!(page.contains("<ul id=\"regressions\">"));
        assert!(page.contains("app has no step at 600 req/s."));
    }

    /// Issue 12's budget: a comparison of 5 runs × 20 steps in under 300 KB.
    #[test]
    fn five_runs_of_twenty_steps_fit_in_300_kb() {
        let runs: Vec<Labelled> = (0..5)
            .map(|i| {
                let mut r = run(&format!("run-{i}"));
                let template = r.run.steps.clone();
                r.run.steps = (0..20)
                    .map(|k| {
                        let mut s = template[k % template.len()].clone();
                        s.number = k as u32 + 1;
                        s.step_value = 100.0 * (k + 1) as f64;
                        s.demanded_rate = Some(s.step_value);
                        s.latency_ms.p99 *= 1.0 + 0.1 * i as f64;
                        s
                    })
                    .collect();
                r
            })
            .collect();
        let c = compare(runs, None, Threshold::default()).unwrap();
        assert_eq!(c.steps.len(), 20);
        let page = render_compare(&c);
        assert!(page.len() < 300 * 1024, "{} bytes", page.len());
    }

    #[test]
    fn what_a_run_carries_is_shown_as_text() {
        const PAYLOAD: &str = "</script><img src=x onerror=alert(1)>";
        let mut a = run(PAYLOAD);
        a.run.target = PAYLOAD.into();
        let c = compare(vec![a, run("b")], None, Threshold::default()).unwrap();
        let page = render_compare(&c);
        assert!(!page.contains("<img"), "markup from a run reached the page");
        assert!(page.contains("&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;"));
        // The embedded JSON cannot end its script element, and reads back the label.
        let start = page.find("id=\"stampede-data\">").unwrap() + "id=\"stampede-data\">".len();
        let json = &page[start..start + page[start..].find("</script>").unwrap()];
        let v: serde_json::Value = serde_json::from_str(json).unwrap();
        assert_eq!(v["runs"][0]["label"], PAYLOAD);
    }
}
