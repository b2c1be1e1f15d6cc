//! The page of `stampede compare`: first the ranking (which server broke where, and why; its CPU and
//! memory there), what differs between their plans, the one-run page's charts with a line per run
//! against the joined step value (one colour per run, the same on every chart and in the ranking),
//! its own server's CPU and memory among them, then the per-step delta table against the baseline
//! (noise greyed, regressions red, untrusted cells and lower bounds marked) with the regression
//! verdicts folded under it: a shoot-out is not a regression test, CI's `--baseline` is.
use std::fmt::Write;

use results::compare::{CellEntry, Change, Compared, Comparison, METRICS, RankedOn, in_unit};
use results::quantity::{
    FAILED_PCT, OK_RATE, P50_MS, P99_MS, Quantity, SRV_CPU_UTIL_PCT, SRV_MEM_MB,
};
use results::step::{human, human_ms};
use results::verdict::Verdict;

use shared::plan::LoadModel;

use crate::chart::{self, Axis, Chart, Colour, Mark, Marker, Series, Titles, Unit};
use crate::escape::html;
use crate::page::styled_page;
use crate::run_page::charts::step_axis_over;

/// The `data-chart` names of a comparison's page, in page order (the page contract, `lib.rs`).
pub const COMPARE_CHARTS: [&str; 4] = ["rates", "latency-p99", "latency-p50", "failures"];

/// The charts a comparison also has, after the others, when a run's own server monitor (the one
/// paired with its target) measured its CPU and memory in a step: a line per run.
pub const COMPARE_MONITOR_CHARTS: [&str; 2] = ["server", "server-memory"];

/// The comparison's own CSS: the banner, the run swatches, the delta table's classes.
const STYLE: &str = ".banner{background:#fff6d6;border:1px solid #e0c040;padding:.5em .5em .5em 2em}\
.swatch{display:inline-block;width:.8em;height:.8em;background:var(--c);margin-right:.4em}\
#compare td{white-space:nowrap}#compare .d{display:block;font-size:85%}#compare td[colspan]{text-align:left}#compare tr.first>*{border-top:2px solid #aaa}\
#compare [data-class=noise],#compare .c-missing,#compare [data-class=missing]{color:#999}#compare [data-class=better]{color:#060}\
#compare [data-class=worse]{color:#a40}#compare .regression{color:#fff;background:#c62828;font-weight:600}#compare [data-class=undecided]{color:#86a}\
#compare .untrusted::after{content:' \\2020';color:#c62828}#compare .bound{text-decoration:underline dotted}\
td.t-degraded{background:#fdf0c4}td.t-invalid{background:#f9d0d0}.verdict.regressed{color:#c62828;font-weight:600}\
.key-of-table span{margin-right:1.2em}#ranking th,#ranking td.l{text-align:left}#ranking .answer{font-size:100%;white-space:normal;min-width:12em}#ranking thead th{white-space:normal;vertical-align:bottom}#ranking th.nw{white-space:nowrap}\
#ranking td,#ranking th{white-space:nowrap}#ranking .cause{font-size:85%;color:#555;white-space:normal;display:block}details.verdicts{margin:1em 0}.max-under-slo{font-size:115%;font-weight:600}details.verdicts summary{cursor:pointer}";

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
    body.push_str(&ranking(c));
    body.push_str(&banners(c));
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
    body.push_str(&regressions(c));
    // Compact: the page embeds every cell, and pretty-printing would double its size.
    let data = serde_json::to_string(c).expect("a Comparison always serializes");
    // The ✕ and □ of an untrusted step are drawn as a search's shaped markers are.
    let style = format!("{STYLE}{}", chart::MARK_STYLE);
    styled_page(&title, &style, &body, &data)
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

/// The ranking, best first: per run its knee and cause, how far it kept up and its p99, its own
/// server's CPU and memory and requests per core-second there, the trust there, and its answer.
fn ranking(c: &Comparison) -> String {
    let on = c.ranked_on;
    let heads = results::compare::ranking::heads(&c.ranking, on);
    // Searches are ranked on their answer: the line of them first, then a column of it.
    let searches = c.max_under_slo.is_some();
    let mut out = match &c.max_under_slo {
        Some(line) => format!("<p class=\"max-under-slo\">{}</p>\n", html(line)),
        None => String::new(),
    };
    let max_head = match searches {
        true => format!("<th>{}</th><th>search</th>", html(&heads.max)),
        false => String::new(),
    };
    // Runs on different axes are ranked on the rate each served: it comes first.
    let served_head = heads.served.map_or(String::new(), |h| {
        format!(
            "<th title=\"requests/s served at the kept-up step, whatever the load model\">{}</th>",
            html(h)
        )
    });
    let _ = write!(
        out,
        "<table id=\"ranking\">\n<thead><tr><th>#</th><th>target</th>{served_head}{max_head}<th>{knee}</th>\
         <th>{kept}</th><th>p99 there</th><th title=\"its own server's CPU, % of the \
         cores it may use\">server CPU</th><th>memory</th><th title=\"requests served per second of \
         the server's CPU\" class=\"nw\">req/core-s</th><th>trust</th><th>answer</th></tr></thead>\n<tbody>\n",
        knee = html(&heads.knee),
        kept = html(&heads.kept_up_to),
    );
    for r in &c.ranking {
        let i = run_index(c, &r.label);
        let run = &c.runs[i];
        let dash = |v: Option<String>| v.map_or_else(|| "–".to_string(), |v| html(&v));
        let knee = match &r.knee {
            Some(k) => {
                let at = r.value(r.knee_at.unwrap_or(k.step_value), on);
                let at = if k.servers { at } else { format!("≥{at}") };
                format!(
                    "{} <span class=\"cause\">{}</span>",
                    html(&at),
                    html(&results::compare::ranking::causes(k))
                )
            }
            None => "<span class=\"cause\">none seen</span>".to_string(),
        };
        let trust = match (r.trust, r.untrusted_steps) {
            (Some(t), n) => {
                let more = if n > 0 {
                    format!(" ({n} untrusted)")
                } else {
                    String::new()
                };
                format!("<td class=\"t-{} l\">{}{more}</td>", t.name(), t.name())
            }
            (None, 0) => "<td class=\"l\">–</td>".to_string(),
            (None, n) => format!("<td class=\"l\">{n} untrusted</td>"),
        };
        let served = match heads.served {
            Some(_) => format!("<td>{}</td>", dash(r.served.map(human))),
            None => String::new(),
        };
        let max = match searches {
            true => format!(
                "<td>{}</td><td class=\"l\">{}</td>",
                dash(r.max_rate.map(|v| r.value(v, on))),
                dash(r.search.map(str::to_string))
            ),
            false => String::new(),
        };
        let _ = writeln!(
            out,
            "<tr data-run=\"{label}\" data-rank=\"{rank}\"><td>{rank}</td><th title=\"{target} · {source}\">\
             <i class=\"swatch\" style=\"--c:{colour}\"></i>{label}</th>{served}{max}<td>{knee}</td><td>{kept}</td>\
             <td>{p99}</td><td>{cpu}</td><td>{mem}</td><td>{per_core}</td>{trust}<td class=\"answer l\"{whole}>{answer}</td></tr>",
            rank = r.rank,
            label = html(&r.label),
            target = html(&run.target),
            source = html(&run.source),
            colour = Colour::nth(i).0,
            kept = dash(r.kept_up_to.map(|v| r.value(v, on))),
            p99 = dash(r.p99_ms.map(|v| human_ms(v, r.p99_lower_bound))),
            cpu = dash(r.server_cpu_util_pct.map(|v| format!("{}%", human(v)))),
            mem = dash(r.server_mem_mb.map(|v| format!("{} MiB", human(v)))),
            per_core = dash(r.ok_per_core_s.map(human)),
            // A search's answer is its bounds, not the knee its probes show.
            answer = html(
                run.capacity
                    .as_ref()
                    .map_or(&run.headline.answer, |c| &c.answer)
            ),
            // The headline at a glance; the whole answer, every number behind it, on hover.
            whole = c.inputs()[i]
                .run
                .summary
                .as_ref()
                .filter(|s| run.capacity.is_none() && s.answer != run.headline.answer)
                .map_or(String::new(), |s| format!(" title=\"{}\"", html(&s.answer))),
        );
    }
    out.push_str("</tbody>\n</table>\n");
    out.push_str(&ranking_key(on));
    out
}

/// What the ranking's order and numbers mean, under it.
fn ranking_key(on: RankedOn) -> String {
    let mut out = String::new();
    let (order, at) = match on {
        RankedOn::MaxRate => (
            "best first: the highest rate sustained under the SLOs, then the later knee",
            "its highest passing probe",
        ),
        RankedOn::Knee => (
            "best first: the later the knee, the better; no knee seen: it lies beyond the steps run",
            "the kept-up step",
        ),
        RankedOn::Served => (
            "best first: the most requests/s served at the kept-up step, as the runs' steps are \
             different quantities (connections, requests/s): each one's knee and kept-up step are \
             in its own unit",
            "the kept-up step",
        ),
    };
    let _ = writeln!(
        out,
        "<p class=\"key-of-table\"><span>{order}</span><span>≥: the generator was the limit there, \
         not the server</span><span>p99, CPU, memory, req/core-s: at {at} (its own server's \
         monitor)</span></p>",
    );
    out
}

/// The index in [`Comparison::runs`] of the run labelled `label` (labels are unique).
fn run_index(c: &Comparison, label: &str) -> usize {
    c.runs.iter().position(|r| r.label == label).unwrap_or(0)
}

/// The regression verdicts against the baseline, folded under the table: what CI's `--baseline`
/// and `--fail-on-regression` judge, not what a shoot-out opens with.
fn regressions(c: &Comparison) -> String {
    if c.regressions.is_empty() {
        return format!(
            "<details class=\"verdicts\"><summary class=\"verdict\">Against {}: no trusted step got \
             worse beyond {}% and what the measurement resolves.</summary></details>\n",
            html(&c.baseline),
            human(c.threshold_pct)
        );
    }
    let lines = c.regressions_by_step();
    let mut out = format!(
        "<details class=\"verdicts\"><summary class=\"verdict regressed\">Against {}: {} step{} \
         regressed (trusted, worse beyond {}% and what the measurement resolves)</summary>\n<ul id=\"regressions\">\n",
        html(&c.baseline),
        lines.len(),
        if lines.len() == 1 { "" } else { "s" },
        human(c.threshold_pct)
    );
    for line in &lines {
        let _ = writeln!(out, "<li>{}</li>", html(line));
    }
    out.push_str("</ul>\n</details>\n");
    out
}

/// How many times its lowest a latency chart's highest value may be on a linear scale.
const LOG_SPAN: f64 = 100.0;

/// The charts of [`COMPARE_CHARTS`], in order, then [`COMPARE_MONITOR_CHARTS`] if a monitor
/// measured a run's server CPU.
fn charts(c: &Comparison) -> Vec<Chart> {
    let offered = c.axis != "connections";
    let mut rates = against(
        c,
        "rates",
        &format!("Served rate ({})", OK_RATE.key),
        &OK_RATE,
        Unit::Si,
    );
    if offered {
        rates = rates.ideal("ideal: served = offered");
    }
    // Servers a hundred times apart (4 s beside 37 ms) on a log scale, or the faster lies flat
    // on the axis.
    let p99 =
        against(c, "latency-p99", "Latency p99", &P99_MS, Unit::Ms).log_when_spanning(LOG_SPAN);
    let p50 = against(c, "latency-p50", "Latency p50 (median)", &P50_MS, Unit::Ms)
        .log_when_spanning(LOG_SPAN);
    let failed = against(
        c,
        "failures",
        &format!("Failed share of the requests due ({})", FAILED_PCT.key),
        &FAILED_PCT,
        Unit::Percent,
    );
    let mut charts = vec![rates, p99, p50, failed];
    let cpu = own_server(
        c,
        "server",
        &format!(
            "Its own server's CPU, % of the cores it may use ({})",
            SRV_CPU_UTIL_PCT.key
        ),
        &SRV_CPU_UTIL_PCT,
        Unit::Percent,
    );
    let memory = own_server(
        c,
        "server-memory",
        &format!(
            "Its own server's memory, MiB, the step's highest ({})",
            SRV_MEM_MB.key
        ),
        &SRV_MEM_MB,
        Unit::Si,
    );
    if [&cpu, &memory]
        .iter()
        .any(|chart| chart.series.iter().any(|s| !s.marks.is_empty()))
    {
        charts.push(cpu);
        charts.push(memory);
    }
    charts
}

/// A quantity of each run's own server (the monitor paired with its target,
/// `StepResult::own_server`): a line per run in its colour, at each joined step value its step
/// has; a run without one has no line, and a monitor of the database behind them all is none's.
fn own_server(c: &Comparison, name: &str, title: &str, q: &Quantity, unit: Unit) -> Chart {
    let percent = unit == Unit::Percent;
    let mut chart = Chart::new(name, title, joined_axis(c), Axis::linear(&q.titled(), unit));
    let mut top: f64 = if percent { 100.0 } else { 0.0 };
    let mut partial = false;
    let mut doubts = Doubts::default();
    for (i, (run, input)) in c.runs.iter().zip(c.inputs()).enumerate() {
        let marks: Vec<(Mark, Verdict)> = c
            .steps
            .iter()
            .filter_map(|row| {
                let compared = row.runs[i].as_ref()?;
                let s = input.run.steps.iter().find(|s| s.number == compared.step)?;
                let m = s.own_server()?;
                let v = q.of_server(s, m).filter(|v| v.is_finite())?;
                top = top.max(v);
                partial |= m.partial;
                let mark = if m.partial {
                    Mark::lower_bound(row.value, v)
                } else {
                    Mark::at(row.value, v)
                };
                Some((mark, compared.trust))
            })
            .collect();
        // No key for a run without its own server; the others keep their colours.
        if !marks.is_empty() {
            chart = chart.series(doubts.series(&run.label, Colour::nth(i), marks));
        }
    }
    if percent {
        chart.y = chart.y.with_range(0.0, top);
    }
    let mut note = String::from(
        "Each run's own server, the monitor paired with its target; a run without one has no line.",
    );
    if percent {
        note.push_str(" 100 % is every core it may use.");
    }
    if partial {
        note.push_str(" Hollow: the monitor saw only part of the step.");
    }
    note.push_str(&doubts.note());
    chart.note(&note)
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

/// One metric of every run against the joined step value: a line per run in its colour, lower
/// bounds hollow, steps that some run could not trust shaded.
fn against(c: &Comparison, name: &str, title: &str, q: &Quantity, unit: Unit) -> Chart {
    let m = METRICS
        .iter()
        .position(|m| m.name == q.key)
        .expect("a compared metric");
    let mut chart = Chart::new(name, title, joined_axis(c), Axis::linear(&q.titled(), unit));
    let mut any_bound = false;
    let mut doubts = Doubts::default();
    for (i, run) in c.runs.iter().enumerate() {
        let marks: Vec<(Mark, Verdict)> = c
            .steps
            .iter()
            .filter_map(|row| {
                let compared = row.runs[i].as_ref()?;
                let cell = &compared.cells[m];
                let v = cell.value?;
                any_bound |= cell.lower_bound;
                let mark = if cell.lower_bound {
                    Mark::lower_bound(row.value, v)
                } else {
                    Mark::at(row.value, v)
                };
                Some((mark, compared.trust))
            })
            .collect();
        chart = chart.series(doubts.series(&run.label, Colour::nth(i), marks));
    }
    let mut note = String::from("One colour per run, as in the ranking.");
    if any_bound {
        note.push_str(
            " Hollow points are lower bounds: requests given up enter at their age then, so the \
             true value is higher still.",
        );
    }
    note.push_str(&doubts.note());
    chart.note(&note)
}

/// The steps a run could not trust, marked on its own line (a band across the chart would cover
/// every other run's points at that rate as well): crossed where invalid, a hollow square where
/// degraded, each point's hover text naming the run, the step value and the verdict.
#[derive(Default)]
struct Doubts {
    invalid: bool,
    degraded: bool,
}

impl Doubts {
    fn series(&mut self, label: &str, colour: Colour, marks: Vec<(Mark, Verdict)>) -> Series {
        let doubted = marks.iter().any(|(_, t)| *t != Verdict::Valid);
        let titles = marks
            .iter()
            .filter(|_| doubted)
            .map(|(m, t)| format!("{label} at {}: {}", human(m.x), t.name()))
            .collect();
        let marks = marks
            .into_iter()
            .map(|(m, trust)| match trust {
                Verdict::Valid => m,
                Verdict::Degraded => {
                    self.degraded = true;
                    Mark::shaped(m.x, m.y, Marker::Square)
                }
                Verdict::Invalid => {
                    self.invalid = true;
                    Mark::shaped(m.x, m.y, Marker::Cross)
                }
            })
            .collect();
        Series::new(label, colour, marks).titled(titles)
    }

    /// What the marks mean, for the chart's note; empty when every step was trusted.
    fn note(&self) -> String {
        match (self.invalid, self.degraded) {
            (false, false) => String::new(),
            (true, false) => " ✕: a step its run could not trust (invalid; hover for whose).".into(),
            (false, true) => " □: a step its run doubted (degraded; hover for whose).".into(),
            (true, true) => {
                " ✕: a step its run could not trust (invalid), □: one it doubted (degraded); hover for whose."
                    .into()
            }
        }
    }
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
    // No value (a run without its own server has no requests per core-second): a dash, classed
    // as compare.json classes it (the baseline's own cell stays `baseline`).
    let Some(v) = cell.value else {
        return format!(
            "<td data-metric=\"{}\" data-class=\"{}\">–</td>",
            m.name,
            cell.class.name()
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
    // A metric only shown (requests per core-second) is coloured worse, never a regression.
    let regression = m.judged && cell.class == Change::Worse && !cell.untrusted;
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
    use crate::run_page::server;
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
    fn every_chart_is_drawn_with_a_line_per_run_in_its_own_colour() {
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
            // Told apart by colour, every line solid: five dashed lines are unreadable.
            assert!(
                figure.contains("class=\"key line\"") && !figure.contains("class=\"key dash\"")
            );
            for (i, run) in ["nginx", "app"].iter().enumerate() {
                let g = &figure[figure.find(&format!("data-n=\"{run}\"")).unwrap()..];
                let g = &g[..g.find("</g>").unwrap()];
                assert!(
                    g.contains(Colour::nth(i).0),
                    "{name}: {run} in its colour: {g}"
                );
            }
        }
        let p99 = &page[page.find("data-chart=\"latency-p99\"").unwrap()..];
        let p99 = &p99[..p99.find("</figure>").unwrap()];
        // app's step at 200 is drawn at its doubled p99; its last step was not run.
        let app = &p99[p99.find("data-n=\"app\"").unwrap()..];
        let app = &app[..app.find("</g>").unwrap()];
        let points: Vec<&str> = app
            .split("data-v=\"")
            .skip(1)
            .flat_map(|p| p[..p.find('"').unwrap()].split(','))
            .collect();
        assert!(points.contains(&"200 3.9"), "{p99}");
        assert!(!points.iter().any(|p| p.starts_with("600 ")), "{p99}");
        // The untrusted step of app is crossed on app's line alone, in every chart, and says whose;
        // no band covers nginx's point at that rate.
        let crossed = app
            .split("<path")
            .find(|p| p.contains("data-v=\"200 "))
            .unwrap();
        assert!(
            crossed.contains("class=\"mk x\"")
                && crossed.contains("<title>app at 200: invalid</title>"),
            "{app}"
        );
        assert!(!p99.contains("<rect class=\"t-invalid\""), "{p99}");
        assert!(p99.contains("✕: a step its run could not trust"), "{p99}");
        assert_eq!(
            page.matches("<title>app at 200: invalid</title>").count(),
            COMPARE_CHARTS.len() + COMPARE_MONITOR_CHARTS.len(),
            "on every chart, its own server's two among them"
        );
    }

    #[test]
    fn each_run_s_own_server_is_one_cpu_line_and_one_memory_line() {
        assert!(
            !render_compare(&comparison()).contains("data-chart=\"server"),
            "no monitor, no server chart"
        );
        let mut nginx = run("nginx");
        for (i, s) in nginx.run.steps.iter_mut().enumerate() {
            s.server_monitors = vec![server::example("web1", 20.0 * i as f64)];
        }
        nginx.run.steps[1].server_monitors[0].partial = true;
        // app's one monitor watches the host alone: it is nobody's own server.
        let mut app = run("app");
        for s in &mut app.run.steps {
            let mut host = server::example("db", 50.0);
            host.target = None;
            s.server_monitors = vec![host];
        }
        let c = compare(vec![nginx, app], None, Threshold::default()).unwrap();
        let page = render_compare(&c);
        let last = page.find("data-chart=\"failures\"").unwrap();
        let cpu: fn(usize) -> f64 = |i| 20.0 * i as f64;
        let memory: fn(usize) -> f64 = |_| 3.0;
        for (name, want) in [("server", cpu), ("server-memory", memory)] {
            let key = format!("<figure class=\"chart\" data-chart=\"{name}\">");
            let here = page.find(&key).expect("a server chart");
            assert!(here > last, "after the others");
            let figure = &page[here..here + page[here..].find("</figure>").unwrap()];
            assert!(
                !figure.contains("data-n=\"app"),
                "app has no own server: {figure}"
            );
            assert_eq!(figure.matches(" data-n=").count(), 1, "one line per run");
            let g = &figure[figure.find("data-n=\"nginx\"").unwrap()..];
            let g = &g[..g.find("</g>").unwrap()];
            assert!(g.contains(Colour::nth(0).0), "nginx's colour: {g}");
            let values: Vec<&str> = g
                .split("data-v=\"")
                .skip(1)
                .map(|v| &v[..v.find('"').unwrap()])
                .collect();
            let all = values.join(",");
            for (i, row) in c.steps.iter().enumerate() {
                let want = format!("{} {}", row.value, want(i));
                assert!(all.split(',').any(|p| p == want), "{name}: {want} in {all}");
            }
            assert!(
                g.contains("class=\"mk lb\""),
                "the partial step hollow: {g}"
            );
        }
        // The ranking names nginx's CPU and memory at its kept-up step (step 4: 60 %, 3 MiB).
        let row = &page[page.find("<tr data-run=\"nginx\"").unwrap()..];
        let row = &row[..row.find("</tr>").unwrap()];
        assert!(row.contains("<td>60%</td><td>3 MiB</td>"), "{row}");
    }

    #[test]
    fn a_metric_only_shown_is_never_marked_a_regression() {
        // app's server burns twice the CPU for the same replies: fewer requests per core-second,
        // shown worse, judged nothing.
        let mut nginx = run("nginx");
        let mut app = run("app");
        for (r, util) in [(&mut nginx, 20.0), (&mut app, 40.0)] {
            for s in &mut r.run.steps {
                s.server_monitors = vec![server::example("web", util)];
                s.ok_per_core_s = results::quantity::OK_PER_CORE_S.of_step(s);
            }
        }
        let c = compare(vec![nginx, app], None, Threshold::default()).unwrap();
        let page = render_compare(&c);
        let cell = td(&page, "300", "app", "ok_per_core_s");
        assert!(
            cell.contains("data-class=\"worse\"") && !cell.contains("regression"),
            "{cell}"
        );
        assert_eq!(
            page.matches("data-regression=\"1\"").count(),
            c.regressions.len()
        );
    }

    #[test]
    fn the_page_opens_with_the_ranking_and_folds_the_verdicts_under_the_table() {
        let page = render_compare(&comparison());
        let ranking = page.find("<table id=\"ranking\">").expect("a ranking");
        let charts = page.find("<figure").unwrap();
        let table = page.find("<table id=\"compare\">").unwrap();
        let verdicts = page.find("<details class=\"verdicts\">").unwrap();
        assert!(ranking < charts && charts < table && table < verdicts);
        assert!(page[verdicts..].contains("<ul id=\"regressions\">"));
        // nginx kept up further than app (app's untrusted step at 200): first, in nginx's colour.
        let first = &page[ranking..];
        let first = &first[first.find("<tbody>").unwrap()..];
        assert!(
            first.starts_with("<tbody>\n<tr data-run=\"nginx\" data-rank=\"1\">"),
            "{first}"
        );
        let app = &first[first.find("data-run=\"app\"").unwrap()..];
        assert!(app.contains(&format!("--c:{}", Colour::nth(1).0)), "{app}");
    }

    /// Searches side by side open with their answers in one line, and rank on them.
    #[test]
    fn searches_open_with_the_line_of_their_answers_and_a_column_of_them() {
        const SEARCH: &str = include_str!("../../results/tests/golden/find-max-run/run.json");
        let search = |label: &str, scale: f64| {
            let mut run = RunFile::parse(SEARCH, Path::new("run.json")).unwrap();
            for s in &mut run.steps {
                s.step_value *= scale;
                s.demanded_rate = s.demanded_rate.map(|d| d * scale);
            }
            run.capacity
                .as_mut()
                .unwrap()
                .max_rate
                .as_mut()
                .unwrap()
                .offered *= scale;
            Labelled {
                label: label.into(),
                source: format!("results/{label}"),
                run,
            }
        };
        let c = compare(
            vec![search("slow", 1.0), search("fast", 2.0)],
            None,
            Threshold::default(),
        )
        .unwrap();
        let page = render_compare(&c);
        let line = page
            .find(
                "<p class=\"max-under-slo\">max under p99&lt;50ms: fast 1,600 req/s, slow 800</p>",
            )
            .expect("the searches' line");
        let ranking = page.find("<table id=\"ranking\">").unwrap();
        assert!(line < ranking);
        let table = &page[ranking..];
        assert!(
            table.contains("<th>max (req/s)</th><th>search</th>"),
            "{table}"
        );
        let fast = &table[table.find("data-run=\"fast\" data-rank=\"1\"").unwrap()..];
        assert!(
            fast.contains("</th><td>1,600</td><td class=\"l\">resolved</td>"),
            "{fast}"
        );
        // Its answer is the search's bounds; that searches probed other rates is no banner.
        assert!(fast.contains("<td class=\"answer l\">sustains "), "{fast}");
        assert!(
            c.banners.is_empty() && !page.contains("has no step at"),
            "{:?}",
            c.banners
        );
        // A planned run's page has neither.
        let planned = render_compare(&comparison());
        assert!(
            !planned.contains("<p class=\"max-under-slo\">")
                && !planned.contains("<th>search</th>")
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
        // Sub-millisecond jitter is grey: p50 moved by less than 0.1 ms nowhere reads red.
        let jitter = td(&page, "400", "app", "p50_ms");
        assert!(!jitter.contains("regression"), "{jitter}");
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

    /// The `<g class="plot …">` group of chart `name` whose class is `class` (`log`, `lin off`).
    fn plot<'a>(page: &'a str, name: &str, class: &str) -> &'a str {
        let figure = &page[page.find(&format!("data-chart=\"{name}\"")).unwrap()..];
        let figure = &figure[..figure.find("</figure>").unwrap()];
        let g = figure
            .find(&format!("<g class=\"plot {class}\""))
            .unwrap_or_else(|| panic!("{name}: no plot {class}: {figure}"));
        let g = &figure[g..];
        // The plot group ends where the next one or the readout begins.
        let end = g[1..]
            .find("<g class=\"plot")
            .or_else(|| g.find("<text class=\"ro\""))
            .unwrap();
        &g[..end + 1]
    }

    /// The y pixels of `run`'s points in a plot group (each marker's `M x y`).
    fn ys(plot: &str, run: &str) -> Vec<f64> {
        let g = &plot[plot.find(&format!("data-n=\"{run}\"")).unwrap()..];
        let g = &g[..g.find("</g>").unwrap()];
        let d = g.split("class=\"mk\" d=\"").nth(1).unwrap();
        let d = &d[..d.find('"').unwrap()];
        d.split('M')
            .skip(1)
            .map(|p| {
                p.trim_end_matches("h0")
                    .split(' ')
                    .nth(1)
                    .unwrap()
                    .parse()
                    .unwrap()
            })
            .collect()
    }

    /// The y axis' title and tick labels of a plot group.
    fn y_axis(plot: &str) -> (String, Vec<String>) {
        let title = plot
            .split("rotate(-90)\" text-anchor=\"middle\">")
            .nth(1)
            .unwrap();
        let title = title[..title.find("</text>").unwrap()].to_string();
        let ticks = plot
            .split("text-anchor=\"end\">")
            .skip(1)
            .map(|t| t[..t.find("</text>").unwrap()].to_string())
            .filter(|t| !t.is_empty())
            .collect();
        (title, ticks)
    }

    /// Issue 34: aiohttp's 4 s p99 flattened node's 37 ms onto a linear axis's foot, and the axes
    /// were titled `p99_ms`. Values more than 100× apart are drawn on a log scale that says so,
    /// ticked at 1, 2 and 5 of each decade, and both lines stand clear of the axis and each other.
    #[test]
    fn latencies_a_hundred_times_apart_get_a_log_scale_that_says_so() {
        let mut node = run("node");
        let mut aiohttp = run("aiohttp");
        for (i, (n, a)) in node
            .run
            .steps
            .iter_mut()
            .zip(&mut aiohttp.run.steps)
            .enumerate()
        {
            n.latency_ms.p99 = 20.0 + 3.4 * i as f64; // 20 to 37 ms
            a.latency_ms.p99 = 2000.0 + 400.0 * i as f64; // 2 to 4 s
        }
        let page =
            render_compare(&compare(vec![node, aiohttp], None, Threshold::default()).unwrap());
        let log = plot(&page, "latency-p99", "log");
        let (title, ticks) = y_axis(log);
        assert_eq!(title, "p99 latency (ms), log scale");
        assert_eq!(
            ticks,
            [
                "10 ms", "20 ms", "50 ms", "100 ms", "200 ms", "500 ms", "1 s", "2 s", "5 s",
                "10 s"
            ]
        );
        // The frame's foot is at y = 224 (260 high, 36 below); node's lowest point, 20 ms, a
        // tenth of the way up three decades.
        let (node, aiohttp) = (ys(log, "node"), ys(log, "aiohttp"));
        assert_eq!(node.len(), 6);
        assert!(
            node.iter().all(|y| *y < 224.0 - 15.0),
            "clear of the axis: {node:?}"
        );
        let mut all: Vec<f64> = node.iter().chain(&aiohttp).copied().collect();
        all.sort_by(f64::total_cmp);
        all.dedup();
        assert_eq!(
            all.len(),
            12,
            "every point its own height: {node:?} {aiohttp:?}"
        );
        // The linear scale is a switch away, and there node lay on the axis.
        let lin = plot(&page, "latency-p99", "lin off");
        assert_eq!(y_axis(lin).0, "p99 latency (ms)");
        assert!(ys(lin, "node").iter().all(|y| *y > 224.0 - 3.0));
        let figure = &page[page.find("data-chart=\"latency-p99\"").unwrap()..];
        assert!(
            figure.contains(">linear scale</button>"),
            "the switch names the other"
        );
    }

    /// Within 100× a linear scale reads best: the golden run's p50 at 300 req/s and below.
    #[test]
    fn latencies_within_a_hundred_times_stay_linear() {
        let short = |label: &str| {
            let mut r = run(label);
            r.run.steps.truncate(4);
            r
        };
        let page = render_compare(
            &compare(vec![short("a"), short("b")], None, Threshold::default()).unwrap(),
        );
        let lin = plot(&page, "latency-p99", "lin");
        assert_eq!(y_axis(lin).0, "p99 latency (ms)");
        assert_eq!(
            y_axis(plot(&page, "latency-p99", "log off")).0,
            "p99 latency (ms), log scale"
        );
    }

    /// Issue 34: the y axes were titled by column key (`ok_rate`, `p99_ms`): words with units.
    #[test]
    fn every_y_axis_is_titled_in_words_with_its_unit() {
        let page = render_compare(&comparison());
        for (name, want) in [
            ("rates", "served (req/s)"),
            // 1.3 to 253 ms: more than 100× apart.
            ("latency-p50", "p50 latency (ms), log scale"),
            ("failures", "failed (% of requests)"),
        ] {
            let figure = &page[page.find(&format!("data-chart=\"{name}\"")).unwrap()..];
            let g = &figure[figure.find("<g class=\"plot").unwrap()..];
            assert_eq!(y_axis(g).0, want, "{name}");
        }
        for key in ["ok_rate", "p99_ms", "p50_ms", "failed_pct"] {
            assert!(
                !page.contains(&format!("rotate(-90)\" text-anchor=\"middle\">{key}<")),
                "{key}"
            );
        }
    }

    /// Issue 34: the ranking's answer cell held the whole answer in small grey type. It holds
    /// the headline at the table's size, the whole answer on hover, and its knee and kept-up
    /// numbers are the ones the headline says.
    #[test]
    fn the_ranking_shows_each_run_s_headline_at_full_size_agreeing_with_its_numbers() {
        let mut nginx = run("nginx");
        nginx.run.summary = Some(results::step::summarize_run(&nginx.run.steps));
        let summary = nginx.run.summary.clone().unwrap();
        assert!(!summary.headline.is_empty() && summary.headline != summary.answer);
        let c = compare(vec![nginx, run("app")], None, Threshold::default()).unwrap();
        let page = render_compare(&c);
        let row = &page[page.find("<tr data-run=\"nginx\"").unwrap()..];
        let row = &row[..row.find("</tr>").unwrap()];
        let cell = &row[row.find("<td class=\"answer l\"").unwrap()..];
        let text = &cell[cell.find('>').unwrap() + 1..cell.find("</td>").unwrap()];
        assert_eq!(text, html(&summary.headline));
        assert!(
            cell.contains(&format!("title=\"{}\"", html(&summary.answer))),
            "{cell}"
        );
        let css = &page[page.find("#ranking .answer{").unwrap()..];
        let css = &css[..css.find('}').unwrap()];
        // The table's size: neither the old 85 % nor the run page's lead (`.answer`, 1.2em).
        assert!(css.contains("font-size:100%"), "at the table's size: {css}");
        // The knee and kept-up cells say the headline's numbers.
        let r = &c.ranking.iter().find(|r| r.label == "nginx").unwrap();
        let kept = human(r.kept_up_to.unwrap());
        let knee = human(r.knee_at.unwrap());
        assert!(
            summary
                .headline
                .starts_with(&format!("kept up to {kept} req/s")),
            "{}",
            summary.headline
        );
        assert!(
            summary.headline.contains(&format!("broke at {knee}")),
            "{}",
            summary.headline
        );
        assert!(
            row.contains(&format!("<td>{knee} <span class=\"cause\">")),
            "{row}"
        );
        assert!(row.contains(&format!("<td>{kept}</td>")), "{row}");
    }

    /// Issue 34: a closed loop beside a requests run was ranked under "knee (req/s)" and "kept up
    /// to (req/s)" holding its connection counts. Runs on different axes are ranked on the rate
    /// served, its column in req/s, each run's step values in its own unit.
    #[test]
    fn runs_on_different_axes_are_ranked_on_served_requests_with_their_own_units() {
        let mut nginx = run("nginx");
        nginx.run.plan.model = "concurrency".into();
        for (s, n) in nginx
            .run
            .steps
            .iter_mut()
            .zip([1.0, 2.0, 4.0, 8.0, 16.0, 32.0])
        {
            s.model = "concurrency".into();
            (s.step_value, s.demanded_rate, s.ok_rate) = (n, None, 250.0 * n);
        }
        nginx.run.summary.as_mut().unwrap().kept_up_to = Some(8.0);
        let page =
            render_compare(&compare(vec![run("node"), nginx], None, Threshold::default()).unwrap());
        let table = &page[page.find("<table id=\"ranking\">").unwrap()..];
        let head = &table[..table.find("</thead>").unwrap()];
        assert!(head.contains("served there (req/s)</th>"), "{head}");
        assert!(
            !head.contains("(connections)") && !head.contains("knee (req/s)"),
            "{head}"
        );
        let first = &table[table.find("<tbody>").unwrap()..];
        assert!(
            first.starts_with("<tbody>\n<tr data-run=\"nginx\" data-rank=\"1\">"),
            "{first}"
        );
        let nginx = &first[..first.find("</tr>").unwrap()];
        assert!(
            nginx.contains("<td>2,000</td>") && nginx.contains("<td>8 connections</td>"),
            "{nginx}"
        );
        let node = &first[first.find("data-run=\"node\"").unwrap()..];
        assert!(node.contains("<td>400 req/s</td>"), "{node}");
    }
}
