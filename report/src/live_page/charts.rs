//! The live page's charts: the report's charts against the offered load, drawn from a target's run as
//! last written (a point more per step written), a baseline run's line under each, and the running
//! step second by second.
use results::events::Current;
use results::run_file::RunFile;
use results::step::StepResult;

use crate::chart::{self, Axis, Chart, Colour, Dash, Mark, Series, Titles, Unit};
use crate::run_page::charts::{self as run_charts, knee_line, step_axis_over, trust_shades};
use crate::run_page::{search, server};

/// A baseline's lines: grey and dashed, under the run's own colours.
const BASELINE: Colour = Colour("#b0b0b0");

/// The `data-n` prefix of a baseline's series: `baseline: p99`.
pub const BASELINE_PREFIX: &str = "baseline: ";

/// The target's charts against the offered load: for a search its probes first, then served rate,
/// latency, failed share, and the server's CPU and memory when the run has a monitor. `pending` is
/// the running step's value, so the axis has room for the point it will add.
pub fn against_load(run: &RunFile, pending: Option<f64>, baseline: Option<&RunFile>) -> String {
    // A baseline of another model is on another axis (rates against connections): left out, said.
    let (baseline, note) = match baseline {
        Some(b) if b.model() != run.model() => (
            None,
            format!(
                "<p class=\"note\">The baseline is not drawn: it ran {}, this run {}.</p>\n",
                b.model().name(),
                run.model().name()
            ),
        ),
        b => (b, String::new()),
    };
    let mut out = note;
    if baseline.is_none() && run.steps.is_empty() {
        out.push_str(&chart::empty(
            "rates",
            "Served and reply rate",
            "No step has been written yet: each adds its point here as it ends.",
        ));
        return out;
    }
    let axis = step_axis_over(
        run.model(),
        run.steps
            .iter()
            .chain(baseline.iter().flat_map(|b| &b.steps))
            .map(|s| s.step_value)
            .chain(pending),
    );
    if run.is_search() {
        out.push_str(&search::chart(run, &mut Titles::default()));
    }
    let on_axis = |mut c: Chart| {
        c.x = axis.clone();
        c
    };
    let mut rates = on_axis(run_charts::rates(run));
    let mut latency = on_axis(run_charts::latency(run));
    let mut failed = on_axis(failed_share(run));
    if let Some(b) = baseline {
        rates = under(rates, b, "served", |s| Some(s.ok_rate));
        latency = under(latency, b, "p99", |s| Some(s.latency_ms.p99));
        latency = under(latency, b, "p50", |s| Some(s.latency_ms.p50));
        failed = under(failed, b, "failed", |s| Some(s.failed_pct));
    }
    out.push_str(&rates.render());
    out.push_str(&latency.render());
    out.push_str("<div class=\"strip\">\n");
    out.push_str(&failed.render());
    if !server::monitors(run).is_empty() {
        let mut cpu = on_axis(server::cpu(run));
        let mut memory = on_axis(server::memory(run));
        // The baseline's own server: its first monitor, the line its report draws solid.
        if let Some((b, m)) =
            baseline.and_then(|b| Some((b, server::monitors(b).into_iter().next()?)))
        {
            let seen = |s: &StepResult| server::seen(s, &m).and_then(|v| v.target.clone());
            cpu = under(cpu, b, "CPU", |s| seen(s).map(|t| t.cpu_util_pct));
            memory = under(memory, b, "memory", |s| {
                seen(s).map(|t| t.memory_bytes.max / (1024.0 * 1024.0))
            });
        }
        for (c, why) in [
            (cpu, "The monitor has not reported a step yet."),
            (memory, "No step has the memory of watched processes yet."),
        ] {
            if c.series.iter().all(|s| s.marks.is_empty()) && c.bands.is_empty() {
                out.push_str(&chart::empty(&c.name, &c.title, why));
            } else {
                out.push_str(&c.render());
            }
        }
    }
    out.push_str("</div>\n");
    if let Some(b) = baseline {
        out.push_str(&format!(
            "<p class=\"note\">Grey dashed lines: the baseline, {} ({} steps).</p>\n",
            crate::escape::html(b.label.as_deref().unwrap_or(&b.target)),
            b.steps.len()
        ));
    }
    out
}

/// The share of the requests due that failed, against the offered load.
fn failed_share(run: &RunFile) -> Chart {
    let marks = run
        .steps
        .iter()
        .map(|s| Mark::at(s.step_value, s.failed_pct))
        .collect();
    let mut s = Series::new("failed, % of due", Colour::nth(3), marks);
    if run.is_search() {
        s = s.scatter();
    }
    Chart::new(
        "failed",
        "Failed share",
        run_charts::step_axis(run),
        Axis::linear("failed (% of due)", Unit::Percent),
    )
    .series(s)
    .knee(knee_line(run))
    .shades(trust_shades(run))
    .size(360.0, 240.0)
}

/// `c` with the baseline's `what` drawn first, under the run's own lines.
fn under(mut c: Chart, b: &RunFile, what: &str, y: impl Fn(&StepResult) -> Option<f64>) -> Chart {
    let marks: Vec<Mark> = b
        .steps
        .iter()
        .filter_map(|s| {
            y(s).filter(|v| v.is_finite())
                .map(|v| Mark::plain(s.step_value, v))
        })
        .collect();
    if marks.is_empty() {
        return c;
    }
    let mut s =
        Series::new(&format!("{BASELINE_PREFIX}{what}"), BASELINE, marks).dash(Dash::Dashed);
    if b.is_search() {
        // A search's probes come back to a rate: a line through them would zigzag.
        s = s.scatter();
        for m in &mut s.marks {
            m.marker = chart::Marker::Dot;
        }
    }
    c.series.insert(0, s);
    c
}

/// The running step (or the last one), second by second: what was sent and served each second
/// against what was demanded (`current`), and each second's p50 and p99 (`current-latency`).
pub fn current(c: &Current, model: &str) -> String {
    let s = &c.start;
    let what = match s.step {
        0 => "The warmup".to_string(),
        n => format!("Step {n} ({})", results::step::step_value(model, s.value)),
    };
    if c.intervals.is_empty() {
        return chart::empty(
            "current",
            &format!("{what}, each second"),
            "No second of it has been merged yet.",
        );
    }
    let end = c
        .intervals
        .iter()
        .map(|i| i.at_s + i.length_s)
        .fold(s.length_s, f64::max);
    let x = || Axis::linear("seconds into the step", Unit::Seconds).with_range(0.0, end);
    let per_s = |n: u64, i: &results::events::Interval| n as f64 / i.length_s.max(1e-9);
    let at = |i: &results::events::Interval| i.at_s + i.length_s;
    let line = |f: &dyn Fn(&results::events::Interval) -> Option<f64>| -> Vec<Mark> {
        c.intervals
            .iter()
            .filter_map(|i| f(i).map(|v| Mark::at(at(i), v)))
            .collect()
    };
    let mut rates = Chart::new(
        "current",
        &format!("{what}: sent and served each second"),
        x(),
        Axis::linear("per second", Unit::Si),
    )
    .series(Series::new(
        "sent/s",
        Colour::nth(0),
        line(&|i| Some(per_s(i.sent, i))),
    ))
    .series(Series::new(
        "served/s",
        Colour::nth(2),
        line(&|i| Some(per_s(i.ok, i))),
    ))
    .size(360.0, 220.0);
    if c.intervals.iter().any(|i| i.failed > 0) {
        rates = rates.series(Series::new(
            "failed/s",
            Colour::nth(3),
            line(&|i| Some(per_s(i.failed, i))),
        ));
    }
    if let Some(d) = s.demanded {
        rates = rates.series(
            Series::new(
                "demanded",
                Colour::GREY,
                vec![Mark::plain(0.0, d), Mark::plain(end, d)],
            )
            .dash(Dash::Dotted),
        );
    }
    let latency = Chart::new(
        "current-latency",
        &format!("{what}: latency each second"),
        x(),
        Axis::linear("latency", Unit::Ms),
    )
    .series(Series::new("p50", Colour::nth(0), line(&|i| i.p50_ms)))
    .series(Series::new("p99", Colour::nth(2), line(&|i| i.p99_ms)))
    .switch_scale(chart::Scale::Log)
    .size(360.0, 220.0);
    format!(
        "<div class=\"strip\">\n{}{}</div>\n",
        rates.render(),
        latency.render()
    )
}
