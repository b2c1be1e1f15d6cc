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
    if !c.per_request.is_empty() {
        body.push_str(&by_name(c));
    }
    // Compact: the page embeds every cell, and pretty-printing would double its size.
    let data = serde_json::to_string(c).expect("a Comparison always serializes");
    // The ✕ and □ of an untrusted step are drawn as a search's shaped markers are.
    let mut style = format!("{STYLE}{}", chart::MARK_STYLE);
    // Only a named mix has the table of names: a comparison without one keeps its page.
    if !c.per_request.is_empty() {
        style.push_str(&STYLE.replace("#compare ", "#compare-requests "));
    }
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

/// A named mix compared name by name (compare.json `per_request`): `<table id="compare-requests">`,
/// a row `<tr data-value="V" data-run="LABEL" data-name="NAME">` per step value, name and run, its
/// cells as the step table's; then the names only one side has, `<ul id="names-only">`.
fn by_name(c: &Comparison) -> String {
    let metrics = results::compare::per_request::name_metrics();
    let mut out = String::from("<h2>Request by request, against the baseline</h2>\n");
    if !c.per_request.only.is_empty() {
        out.push_str("<ul id=\"names-only\">\n");
        for o in &c.per_request.only {
            for (whose, names) in [
                (o.label.as_str(), &o.run_only),
                (c.baseline.as_str(), &o.baseline_only),
            ] {
                if !names.is_empty() {
                    let other = if whose == o.label {
                        &c.baseline
                    } else {
                        &o.label
                    };
                    let _ = writeln!(
                        out,
                        "<li>only {} has, not {} (not compared): {}</li>",
                        html(whose),
                        html(other),
                        html(&names.join(", "))
                    );
                }
            }
        }
        out.push_str("</ul>\n");
    }
    if c.per_request.rows.is_empty() {
        return out;
    }
    let _ = write!(
        out,
        "<div class=\"wide\">\n<table id=\"compare-requests\">\n<thead><tr><th>{}</th><th>request</th><th>run</th><th>step</th>",
        html(c.axis)
    );
    for m in &metrics {
        let _ = write!(out, "<th>{}</th>", html(m.name));
    }
    out.push_str("</tr></thead>\n<tbody>\n");
    for row in &c.per_request.rows {
        for (i, (run, step)) in c.runs.iter().zip(&row.runs).enumerate() {
            let first = if i == 0 { " class=\"first\"" } else { "" };
            let _ = write!(
                out,
                "<tr{first} data-value=\"{}\" data-run=\"{}\" data-name=\"{}\"><th>{}</th><th>{}</th><th>{}</th>",
                row.value,
                html(&run.label),
                html(&row.name),
                html(&human(row.value)),
                html(&row.name),
                html(&run.label)
            );
            let Some(s) = step else {
                let _ = writeln!(
                    out,
                    "<td colspan=\"{}\" class=\"c-missing\">no such step or name</td></tr>",
                    metrics.len() + 1
                );
                continue;
            };
            let _ = write!(out, "<td>{}</td>", s.step);
            for (m, cell) in metrics.iter().zip(&s.cells) {
                // Shown, never a regression: the step's own metrics judge a run.
                let mut shown = *m;
                shown.judged = false;
                out.push_str(&delta_cell(&shown, cell, &c.baseline));
            }
            out.push_str("</tr>\n");
        }
    }
    out.push_str("</tbody>\n</table>\n</div>\n");
    out.push_str("<p class=\"key-of-table\"><span>each name's p99 (a lower bound where it had requests given up), served rate and failed share, classed as the steps' are; shown, never a regression</span></p>\n");
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
mod tests;
