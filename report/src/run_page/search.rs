//! A capacity search's marks on its report (`stampede find-max`): the answer on top, the `search`
//! chart (each probe's offered rate in the order run, shaped and coloured by its class, its role and
//! why on hover, the bounds found as levels), the bounds on the charts against the offered load, and
//! the `#capacity` table. A search's steps are not in rising rate order: a bisection goes up and
//! down, a confirmation probes a rate again.
use std::fmt::Write;

use results::run_file::RunFile;
use results::search::{Capacity, Mark as Class};
use results::step::{StepResult, human, step_value};

use crate::chart::{
    self, Axis, Boundary, Chart, Colour, Level, Mark, Marker, Scale, Series, Titles, Unit,
};
use crate::escape::html;

use super::labels::{shade_title, unit_label};

/// The search's own CSS: `#capacity` holds sentences, read from the left as `#plan`'s are.
pub const STYLE: &str = "#capacity th,#capacity td{text-align:left}";

/// Each class as the search chart draws it: its name (the legend's, the files'), its shape and its
/// colour, so a class is told by its shape as well as its colour.
const CLASSES: [(Option<Class>, Marker, Colour); 6] = [
    (Some(Class::Pass), Marker::Dot, Colour("#2ca02c")),
    (Some(Class::Fail), Marker::Cross, Colour("#d62728")),
    (Some(Class::Invalid), Marker::Square, Colour("#7f7f7f")),
    (Some(Class::Undecided), Marker::Diamond, Colour("#ff7f0e")),
    (Some(Class::Aborted), Marker::Triangle, Colour("#8c564b")),
    // A step without its probe's mark (not written by a search): drawn, not hidden.
    (None, Marker::Hollow, Colour("#17becf")),
];

fn class_name(c: Option<Class>) -> &'static str {
    c.map_or("not classed", Class::name)
}

/// The headline of a search: its answer and status once it ended; before, its probes so far.
pub fn answer(run: &RunFile) -> String {
    if let Some(c) = &run.capacity {
        return format!(
            "<p class=\"answer\" data-status=\"{0}\"><b>{0}</b>: {1}</p>\n",
            c.status.name(),
            html(&c.answer)
        );
    }
    let Some(last) = run.steps.last() else {
        return "<p class=\"answer\">Searching: no probe has finished yet.</p>\n".into();
    };
    let counts: Vec<String> = CLASSES
        .iter()
        .filter_map(|(class, _, _)| {
            let n = run
                .steps
                .iter()
                .filter(|s| s.probe.as_ref().map(|p| p.class) == *class)
                .count();
            (n > 0).then(|| format!("{n} {}", class_name(*class)))
        })
        .collect();
    let probes = if run.steps.len() == 1 {
        "probe"
    } else {
        "probes"
    };
    format!(
        "<p class=\"answer\" data-status=\"running\">Searching: {} {probes} so far ({}); the last, {}.</p>\n",
        run.steps.len(),
        counts.join(", "),
        html(&said(run, last))
    )
}

/// `probe 7, a bisect at 1,037 req/s: fail`.
fn said(run: &RunFile, s: &StepResult) -> String {
    let value = step_value(run.model().name(), s.step_value);
    match &s.probe {
        Some(p) => format!(
            "probe {}, {} at {value}: {}",
            s.number,
            p.role.name(),
            p.class.name()
        ),
        None => format!("probe {} at {value}", s.number),
    }
}

/// A probe's hover text: number, role, rate, what it served, class, and why.
fn hover(run: &RunFile, s: &StepResult) -> String {
    let value = step_value(run.model().name(), s.step_value);
    let mut t = match &s.probe {
        Some(p) => format!(
            "probe {} · {} · {value} · served {}/s · {}",
            s.number,
            p.role.name(),
            human(s.ok_rate),
            p.class.name()
        ),
        None => format!(
            "probe {} · {value} · served {}/s",
            s.number,
            human(s.ok_rate)
        ),
    };
    if let Some(r) = s.probe.as_ref().and_then(|p| p.reason.as_ref()) {
        t.push_str(": ");
        t.push_str(r);
    }
    t
}

/// The bounds a search found, as levels of its chart or boundaries of the charts against the
/// offered load: `sustained: X` at the highest rate that passed, `fails: Y` at the lowest that
/// failed. None before it ends.
fn bounds(run: &RunFile) -> Vec<(f64, String)> {
    let Some(c) = &run.capacity else {
        return Vec::new();
    };
    let v = |x: f64| step_value(&c.model, x);
    let mut out = Vec::new();
    if let Some(m) = c.max_rate {
        out.push((
            m.offered,
            format!(
                "sustained: {} (served {}/s)",
                v(m.offered),
                human(m.achieved)
            ),
        ));
    }
    if let Some(f) = &c.lowest_fail {
        out.push((f.offered, format!("fails: {} ({})", v(f.offered), f.reason)));
    }
    out
}

/// The bounds as vertical lines on a chart against the offered load. A search ends with its
/// bounds close together (within its precision), too close for a label each on the top edge: the
/// first line carries both (`sustained 1037 · fails 1084`).
pub fn boundaries(run: &RunFile) -> Vec<Boundary> {
    let lines = bounds(run);
    let words: Vec<String> = lines
        .iter()
        .map(|(x, label)| {
            let what = label.split(':').next().unwrap_or_default();
            format!("{what} {}", chart::short(*x))
        })
        .collect();
    lines
        .iter()
        .enumerate()
        .map(|(i, (x, _))| Boundary {
            x: *x,
            label: if i == 0 {
                words.join(" · ")
            } else {
                String::new()
            },
        })
        .collect()
}

/// Each probe's offered rate against its number: a series per class (its shape and colour, each
/// point's role and why on hover), the order they ran in as a faint line, each phase's start
/// (ramp, bisect, confirm…) a labelled boundary, the bounds found as levels, the untrusted probes
/// shaded. Log scale (the ramp doubles), with the linear one a switch away.
pub fn chart(run: &RunFile, titles: &mut Titles) -> String {
    let title = "The search: each probe's offered rate";
    let (Some(first), Some(last)) = (run.steps.first(), run.steps.last()) else {
        return chart::empty(
            "search",
            title,
            "No probe has finished yet: each will be drawn here as it ends.",
        );
    };
    let x = Axis::linear("probe (step number)", Unit::Si)
        .whole()
        .with_range(f64::from(first.number) - 0.5, f64::from(last.number) + 0.5);
    // From a little below the lowest rate to a little above the highest, a bound included.
    let rates = run
        .steps
        .iter()
        .map(|s| s.step_value)
        .chain(bounds(run).into_iter().map(|b| b.0))
        .filter(|v| v.is_finite() && *v > 0.0);
    let (lo, hi) = rates.fold((f64::INFINITY, 0.0_f64), |(lo, hi), v| {
        (lo.min(v), hi.max(v))
    });
    let mut y = Axis::log(&unit_label(run.model()), Unit::Si);
    if hi > 0.0 {
        y = y.with_range(lo / 1.25, hi * 1.25);
    }
    let order: Vec<Mark> = run
        .steps
        .iter()
        .map(|s| Mark::plain(f64::from(s.number), s.step_value))
        .collect();
    let mut c = Chart::new("search", title, x, y)
        .switch_scale(Scale::Linear)
        .series(Series::new("order run", Colour("#bbb"), order));
    for (class, marker, colour) in CLASSES {
        let steps: Vec<&StepResult> = run
            .steps
            .iter()
            .filter(|s| s.probe.as_ref().map(|p| p.class) == class)
            .collect();
        if steps.is_empty() {
            continue;
        }
        let marks = steps
            .iter()
            .map(|s| Mark::shaped(f64::from(s.number), s.step_value, marker))
            .collect();
        let titles = steps.iter().map(|s| hover(run, s)).collect();
        c = c.series(
            Series::new(class_name(class), colour, marks)
                .scatter()
                .titled(titles),
        );
    }
    let levels = bounds(run)
        .into_iter()
        .enumerate()
        // The pass below its line, the fail above its own: close bounds keep their labels apart.
        .map(|(i, (y, label))| Level {
            y,
            label,
            below: i == 0,
        })
        .collect();
    let shades = run
        .steps
        .iter()
        .map(|s| chart::Shade {
            from: f64::from(s.number) - 0.5,
            to: f64::from(s.number) + 0.5,
            verdict: s.trust,
            title: shade_title(run, s),
        })
        .collect();
    let mut note = String::from(
        "Each probe at the rate it offered, in the order run; its shape and colour say its class \
         (hover a point for its role and why). Dashed lines across: the bounds found.",
    );
    if run.capacity.is_none() {
        note = String::from(
            "Each probe at the rate it offered, in the order run; its shape and colour say its class \
             (hover a point for its role and why). The bounds are drawn once the search ends.",
        );
    }
    // The plot's width in the drawing's units: 720 less the room for the axes (`plot.rs`).
    c.boundaries(phases(run, 720.0 - 80.0))
        .levels(levels)
        .shades(shades)
        .note(&note)
        .size(720.0, 280.0)
        .render_in(titles)
}

/// Where each phase starts: a boundary before the first probe of each run of one role, labelled
/// with the role, shortened (`rec.`) to fit its phase and the one before it: a chart leaves out a
/// label that would run into the one before, and a lone recovery probe would hide the bisection
/// after it.
fn phases(run: &RunFile, width: f64) -> Vec<Boundary> {
    let mut runs: Vec<(u32, usize, &str)> = Vec::new();
    for s in &run.steps {
        let role = s.probe.as_ref().map_or("", |p| p.role.name());
        match runs.last_mut() {
            Some((_, n, r)) if *r == role => *n += 1,
            _ => runs.push((s.number, 1, role)),
        }
    }
    // The chart's rule: 7 units a character and 4 spare (`boundary_labels`).
    let per_probe = width / run.steps.len().max(1) as f64;
    let fits = |probes: usize| ((probes as f64 * per_probe - 4.0) / 7.0).floor().max(0.0) as usize;
    let mut before = usize::MAX;
    runs.iter()
        .map(|(number, n, role)| {
            let room = fits(*n).min(before);
            before = fits(*n);
            let label = match role.chars().count() {
                len if len <= room => role.to_string(),
                _ if room >= 3 => format!("{}.", role.chars().take(room - 1).collect::<String>()),
                _ => String::new(),
            };
            Boundary {
                x: f64::from(*number) - 0.5,
                label,
            }
        })
        .collect()
}

/// The steps to draw the latency distribution of first: the last probe that passed at the
/// maximum and the last that failed at the lowest fail.
pub fn key_steps(run: &RunFile) -> Vec<u32> {
    let Some(c) = &run.capacity else {
        return Vec::new();
    };
    let at = |rate: Option<f64>, class: Class| {
        run.steps
            .iter()
            .rev()
            .find(|s| {
                Some(s.step_value) == rate && s.probe.as_ref().is_some_and(|p| p.class == class)
            })
            .map(|s| s.number)
    };
    [
        at(c.max_rate.map(|m| m.offered), Class::Pass),
        at(c.lowest_fail.as_ref().map(|f| f.offered), Class::Fail),
    ]
    .into_iter()
    .flatten()
    .collect()
}

/// run.json's `capacity` as a table, one field a row (`#capacity`); before the search ends, a
/// line saying so.
pub fn table(run: &RunFile) -> String {
    let Some(c) = &run.capacity else {
        return "<p id=\"capacity\">The search has not ended: its answer will be here.</p>\n"
            .into();
    };
    let mut out = String::from("<div class=\"wide\"><table id=\"capacity\">\n<tbody>\n");
    for (k, v) in rows(c) {
        let _ = writeln!(
            out,
            "<tr><th data-key=\"{0}\">{0}</th><td data-key=\"{0}\">{1}</td></tr>",
            k,
            html(&v)
        );
    }
    out.push_str("</tbody>\n</table></div>\n");
    out
}

fn rows(c: &Capacity) -> Vec<(&'static str, String)> {
    let v = |x: f64| step_value(&c.model, x);
    let pct = |p: Option<f64>| p.map_or_else(|| "-".to_string(), |p| format!("{p:.1}%"));
    let p = &c.probes;
    vec![
        ("status", c.status.name().to_string()),
        ("exit_code", c.exit_code.to_string()),
        ("slos", c.slos.join(", ")),
        (
            "max_rate",
            c.max_rate.map_or_else(
                || "none passed".to_string(),
                |m| format!("{} offered, {}/s served", v(m.offered), human(m.achieved)),
            ),
        ),
        (
            "lowest_fail",
            c.lowest_fail.as_ref().map_or_else(
                || "none failed".to_string(),
                |f| format!("{}: {}", v(f.offered), f.reason),
            ),
        ),
        (
            "precision",
            format!(
                "{} (asked for {:.1}%)",
                pct(c.precision_pct),
                c.target_precision_pct
            ),
        ),
        ("confirmations", c.confirmations.to_string()),
        ("spread", pct(c.spread_pct)),
        (
            "probes",
            format!(
                "{} ramp, {} bisect, {} confirm, {} recovery; {} invalid, {} undecided",
                p.ramp, p.bisect, p.confirm, p.recovery, p.invalid, p.undecided
            ),
        ),
        ("invalid_at", c.invalid_at.map_or_else(|| "-".into(), v)),
        (
            "ceiling",
            format!("{} ({})", v(c.ceiling.rate), c.ceiling.by),
        ),
        ("elapsed", format!("{:.0} s", c.elapsed_s)),
    ]
}
