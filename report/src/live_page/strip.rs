//! The strip atop the live page: the run's time so far and left, then per target where it is (step k
//! of N, or a search's probe and role), what the step demanded, sent, served and failed, the
//! answer so far and, for a search, the bracket its probes have closed in on. Each figure is a
//! `<dd data-k="NAME">`, its number (when it has one) in `data-v`, so a test reads it as it is.
use std::fmt::Write;

use results::events::{Current, Live, Target};
use results::run_file::RunFile;
use results::search::{Mark, ProbeRole};
use results::step::{StepResult, human, step_value, tsv_number};

use crate::escape::html;

/// One figure of the strip.
struct Figure {
    k: &'static str,
    label: &'static str,
    text: String,
    v: Option<f64>,
}

fn fig(k: &'static str, label: &'static str, text: String, v: Option<f64>) -> Figure {
    Figure { k, label, text, v }
}

fn figures(out: &mut String, figs: &[Figure]) {
    out.push_str("<dl class=\"meta figures\">");
    for f in figs {
        let v =
            f.v.filter(|v| v.is_finite())
                .map_or_else(String::new, |v| format!(" data-v=\"{}\"", tsv_number(v)));
        let _ = write!(
            out,
            "<div><dt>{}</dt><dd data-k=\"{}\"{v}>{}</dd></div>",
            f.label,
            f.k,
            html(&f.text)
        );
    }
    out.push_str("</dl>\n");
}

/// The seconds the run has measured so far: every target's written steps (and warmup) at their
/// lengths, and each running step up to its last second. Side by side the targets take turns on one
/// fleet, so their times add up.
pub fn elapsed_s(live: &Live) -> f64 {
    live.targets
        .iter()
        .map(|l| {
            let written: f64 = l.run.as_ref().map_or(0.0, |r| {
                r.warmup.iter().chain(&r.steps).map(|s| s.duration_s).sum()
            });
            let running = l
                .current
                .as_ref()
                .filter(|c| !c.done)
                .and_then(|c| c.intervals.last())
                .map_or(0.0, |i| i.at_s + i.length_s);
            written + running
        })
        .sum()
}

/// `45 s`, `2 min 05 s`, `1 h 02 min`.
pub fn duration(s: f64) -> String {
    let s = s.max(0.0).round() as u64;
    match s {
        0..60 => format!("{s} s"),
        60..3600 => format!("{} min {:02} s", s / 60, s % 60),
        _ => format!("{} h {:02} min", s / 3600, (s % 3600) / 60),
    }
}

/// The run's own line: how long it has measured, how long is left, whether it is over.
pub fn run_line(live: &Live) -> String {
    let mut out = String::from("<div class=\"run-line\">");
    let Some(begun) = &live.begun else {
        out.push_str("<p>Waiting for the run to begin.</p></div>\n");
        return out;
    };
    let elapsed = elapsed_s(live);
    let left = if live.finished {
        0.0
    } else {
        (begun.total_s - elapsed).max(0.0)
    };
    let left_text = match (live.finished, begun.search) {
        (true, _) => "none: the run is over".to_string(),
        (false, true) => format!("at most ≈{}", duration(left)),
        (false, false) => format!("≈{}", duration(left)),
    };
    figures(
        &mut out,
        &[
            fig(
                "run",
                "run",
                if live.finished { "over" } else { "running" }.into(),
                None,
            ),
            fig("started", "started", begun.started_at.clone(), None),
            fig(
                "elapsed",
                "measured",
                format!("≈{}", duration(elapsed)),
                Some(elapsed),
            ),
            fig("left", "left", left_text, Some(left)),
        ],
    );
    // How "left" is reckoned, said once beside it: an estimate is only as good as its reader knows.
    let how = if begun.search {
        "the search's deadline"
    } else {
        "the planned length"
    };
    let _ = writeln!(
        out,
        "<p class=\"note\">Left: {how} ({}) less the steps' lengths so far; the pauses between \
         steps are not counted, so it runs a little long.</p></div>",
        duration(begun.total_s)
    );
    out
}

/// The step of `c` as written, once it is (its warmup, for step 0).
pub fn written<'a>(run: Option<&'a RunFile>, c: &Current) -> Option<&'a StepResult> {
    let run = run.filter(|_| c.done)?;
    if c.start.step == 0 {
        return run.warmup.as_ref();
    }
    run.steps.iter().rev().find(|s| s.number == c.start.step)
}

/// A search's bracket as its probes' marks stand: the lowest rate that failed, and the highest that
/// passed below it, a rate passing when its passing probes measured longer than its failing ones
/// (recovery probes left out), as the search itself reckons its bounds. Once it ends, its answer's.
pub fn bracket(run: &RunFile) -> (Option<f64>, Option<f64>) {
    if let Some(c) = &run.capacity {
        return (
            c.max_rate.map(|m| m.offered),
            c.lowest_fail.as_ref().map(|f| f.offered),
        );
    }
    let marked: Vec<(f64, bool, f64)> = run
        .steps
        .iter()
        .filter_map(|s| {
            let p = s.probe.as_ref().filter(|p| p.role != ProbeRole::Recovery)?;
            match p.class {
                Mark::Pass => Some((s.step_value, true, s.duration_s)),
                Mark::Fail => Some((s.step_value, false, s.duration_s)),
                _ => None,
            }
        })
        .collect();
    results::search::bracket(&marked)
}

/// A target's figures: its step, the step's load, its answer so far, its status.
pub fn target(target: &Target, search: bool) -> String {
    let run = target.run.as_ref();
    let model = run.map_or("requests", |r| r.model().name());
    let mut figs = Vec::new();
    match &target.current {
        None => figs.push(fig("step", "step", "none started yet".into(), None)),
        Some(c) => step_figures(&mut figs, c, written(run, c), model, search),
    }
    let status = run.map_or("starting", |r| r.status.name());
    figs.push(fig("status", "status", status.into(), None));
    let answer = match run {
        None => "no step written yet".to_string(),
        Some(r) => match (&r.capacity, &r.summary) {
            (Some(c), _) => c.answer.clone(),
            (None, Some(s)) => s.answer.clone(),
            (None, None) if !r.steps.is_empty() => probes_so_far(r),
            (None, None) => "no step written yet".to_string(),
        },
    };
    figs.push(fig("answer", "answer", answer, None));
    let mut out = String::new();
    figures(&mut out, &figs);
    if let Some(r) = run.filter(|r| search || r.is_search()) {
        out.push_str(&bracket_line(r));
    }
    out
}

/// A search's answer until it ends: its probes so far by class (`6 probes: 4 pass, 2 fail`).
fn probes_so_far(run: &RunFile) -> String {
    let mut counts: Vec<(&str, usize)> = Vec::new();
    for s in &run.steps {
        let class = s.probe.as_ref().map_or("not classed", |p| p.class.name());
        match counts.iter_mut().find(|(c, _)| *c == class) {
            Some((_, n)) => *n += 1,
            None => counts.push((class, 1)),
        }
    }
    let counts: Vec<String> = counts.iter().map(|(c, n)| format!("{n} {c}")).collect();
    let probes = if run.steps.len() == 1 {
        "probe"
    } else {
        "probes"
    };
    format!(
        "searching: {} {probes} so far ({})",
        run.steps.len(),
        counts.join(", ")
    )
}

/// The search's bracket, its two ends each a figure: `data-k="passed"` and `data-k="failed-at"`.
fn bracket_line(run: &RunFile) -> String {
    let (lo, hi) = bracket(run);
    let model = run.model().name();
    let text =
        |v: Option<f64>, none: &str| v.map_or_else(|| none.to_string(), |v| step_value(model, v));
    let mut out = String::from("<p class=\"bracket\" data-k=\"bracket\">bracket: [");
    let _ = write!(
        out,
        "<span data-k=\"passed\"{}>{}</span>, <span data-k=\"failed-at\"{}>{}</span>]",
        lo.map_or_else(String::new, |v| format!(" data-v=\"{}\"", tsv_number(v))),
        html(&text(lo, "none passed yet")),
        hi.map_or_else(String::new, |v| format!(" data-v=\"{}\"", tsv_number(v))),
        html(&text(hi, "none failed yet")),
    );
    out.push_str(
        " <span class=\"note\">the highest rate passed, the lowest failed, from the probes' marks</span></p>\n",
    );
    out
}

/// The figures of the step running (or the last one): until it is written, its seconds added up;
/// after, its own numbers as run.json has them.
fn step_figures(
    figs: &mut Vec<Figure>,
    c: &Current,
    done: Option<&StepResult>,
    model: &str,
    search: bool,
) {
    let s = &c.start;
    let which = match (s.step, s.steps, search) {
        (0, _, _) => "warmup".to_string(),
        (n, _, true) => format!("probe {n}"),
        (n, Some(of), false) => format!("{n} of {of}"),
        (n, None, false) => n.to_string(),
    };
    figs.push(fig("step", "step", which, Some(f64::from(s.step))));
    if let Some(role) = &s.role {
        figs.push(fig("role", "role", role.clone(), None));
    }
    figs.push(fig(
        "phase",
        "phase",
        if c.done { "written" } else { "running" }.into(),
        None,
    ));
    figs.push(fig(
        "value",
        "value",
        step_value(model, s.value),
        Some(s.value),
    ));
    let rate = |v: f64| format!("{}/s", human(v));
    match done {
        Some(r) => {
            figs.push(fig(
                "at",
                "length",
                duration(r.duration_s),
                Some(r.duration_s),
            ));
            if let Some(d) = r.demanded_rate {
                figs.push(fig("demanded", "demanded", rate(d), Some(d)));
            }
            figs.push(fig(
                "sent",
                "sent",
                format!(
                    "{} ({} requests)",
                    rate(r.achieved_request_rate),
                    human(r.requests as f64)
                ),
                Some(r.achieved_request_rate),
            ));
            figs.push(fig(
                "served",
                "served",
                format!("{} ({} ok)", rate(r.ok_rate), human(r.ok as f64)),
                Some(r.ok_rate),
            ));
            figs.push(fig(
                "failed",
                "failed",
                format!(
                    "{}% ({} of {} due)",
                    tsv_number(r.failed_pct),
                    human(r.failed as f64),
                    human(r.due as f64)
                ),
                Some(r.failed_pct),
            ));
        }
        None => {
            let secs: f64 = c.intervals.iter().map(|i| i.length_s).sum();
            let (sent, ok, failed) = c.totals();
            let per_s = |n: u64| if secs > 0.0 { n as f64 / secs } else { 0.0 };
            let into = c.intervals.last().map_or(0.0, |i| i.at_s + i.length_s);
            figs.push(fig(
                "at",
                "into the step",
                format!("{} of {}", duration(into), duration(s.length_s)),
                Some(into),
            ));
            if let Some(d) = s.demanded {
                figs.push(fig("demanded", "demanded", rate(d), Some(d)));
            }
            figs.push(fig(
                "sent",
                "sent",
                format!("{} ({} requests)", rate(per_s(sent)), human(sent as f64)),
                Some(per_s(sent)),
            ));
            figs.push(fig(
                "served",
                "served",
                format!("{} ({} ok)", rate(per_s(ok)), human(ok as f64)),
                Some(per_s(ok)),
            ));
            // Of those sent so far: the step's own share (of those due) is known once written.
            let pct = if sent > 0 {
                100.0 * failed as f64 / sent as f64
            } else {
                0.0
            };
            figs.push(fig(
                "failed",
                "failed",
                format!(
                    "{}% ({} of {} sent)",
                    tsv_number(pct),
                    human(failed as f64),
                    human(sent as f64)
                ),
                Some(pct),
            ));
        }
    }
}
