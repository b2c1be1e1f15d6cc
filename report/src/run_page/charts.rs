//! The charts of one run, from its run.json and distributions: what each of the page contract's
//! charts draws.
use results::distribution::Distribution;
use results::run_file::RunFile;
use results::step::{LowerBounds, StepResult, step_value};
use results::verdict::{self, Verdict};
use shared::metrics::{ErrorClass, STATUS_CLASSES};
use shared::plan::LoadModel;

use super::labels::{shade_title, unit_label};
use crate::chart::{
    self, Axis, Band, Boundary, Chart, Colour, Dash, KneeLine, Layer, Mark, Marker, Scale, Series,
    Shade, Stack, Unit,
};

/// At most this many steps' distributions share the percentile chart: more lines than colours
/// cannot be told apart.
pub const MAX_DISTRIBUTIONS: usize = 12;

/// Up to this many seconds, the timeline marks each one (to hover); past it, only the line.
const MAX_TIMELINE_DOTS: usize = 300;

/// The x axis of a chart against the step value (the offered rate, or connections), the same for
/// every such chart of a run so their steps line up: from zero to half a step past the last, so the
/// last step's bars and shading are inside.
pub fn step_axis(run: &RunFile) -> Axis {
    step_axis_over(run.model(), run.steps.iter().map(|s| s.step_value))
}

/// The step-value axis over `values` (a comparison: the union of its runs' steps).
pub fn step_axis_over(model: LoadModel, values: impl Iterator<Item = f64>) -> Axis {
    let axis = Axis::linear(&unit_label(model), Unit::Si);
    let values = distinct(values);
    let (Some(&first), Some(&last)) = (values.first(), values.last()) else {
        return axis;
    };
    let lo = first - stretch(&values, first).0;
    axis.with_range(lo.min(0.0), last + stretch(&values, last).1)
}

/// The finite values, rising, each once.
pub(crate) fn distinct(values: impl Iterator<Item = f64>) -> Vec<f64> {
    let mut v: Vec<f64> = values.filter(|v| v.is_finite()).collect();
    v.sort_by(f64::total_cmp);
    v.dedup();
    v
}

/// How far the stretch of the step at `v` reaches below and above it: halfway to each neighbour
/// among `values` (rising, distinct), on an end as far as on its other side, a tenth of the value
/// for a lone step.
pub(crate) fn stretch(values: &[f64], v: f64) -> (f64, f64) {
    let i = values.partition_point(|x| *x < v);
    let below = i.checked_sub(1).map(|j| (v - values[j]) / 2.0);
    let above = values.get(i + 1).map(|n| (n - v) / 2.0);
    let lone = (v.abs() * 0.1).max(0.5);
    (
        below.or(above).unwrap_or(lone),
        above.or(below).unwrap_or(lone),
    )
}

/// Each step's stretch of a step-value axis (halfway to its neighbours) shaded by its verdict, its
/// reasons as hover text. A search probes a rate again: its stretch is shaded by the most trusted
/// of its probes (one invalid probe among valid ones leaves the rate measured), the others' reasons
/// on hover.
pub fn trust_shades(run: &RunFile) -> Vec<Shade> {
    let values = distinct(run.steps.iter().map(|s| s.step_value));
    let shade = |v: f64, verdict: Verdict, title: String| {
        let (below, above) = stretch(&values, v);
        Shade {
            from: v - below,
            to: v + above,
            verdict,
            title,
        }
    };
    if !run.is_search() {
        return run
            .steps
            .iter()
            .map(|s| shade(s.step_value, s.trust, shade_title(run, s)))
            .collect();
    }
    let rank = |v: Verdict| match v {
        Verdict::Valid => 0,
        Verdict::Degraded => 1,
        Verdict::Invalid => 2,
    };
    by_value(run)
        .into_iter()
        .map(|(v, steps)| {
            let best = steps
                .iter()
                .map(|s| s.trust)
                .min_by_key(|t| rank(*t))
                .unwrap_or(Verdict::Valid);
            let titles: Vec<String> = steps.iter().map(|s| shade_title(run, s)).collect();
            shade(v, best, titles.join(" / "))
        })
        .collect()
}

fn points(run: &RunFile, y: impl Fn(&StepResult) -> f64) -> Vec<Mark> {
    run.steps
        .iter()
        .map(|s| Mark::at(s.step_value, y(s)))
        .collect()
}

/// A series of the steps against the step value: joined along it, or for a search, whose rates
/// come back again and again, its points alone.
fn drawn(run: &RunFile, s: Series) -> Series {
    if run.is_search() { s.scatter() } else { s }
}

/// The steps grouped by step value, rising: a search probes a rate again, and a count per second
/// at that rate is all its probes' over all their windows, not their sum stacked.
fn by_value(run: &RunFile) -> Vec<(f64, Vec<&StepResult>)> {
    let mut out: Vec<(f64, Vec<&StepResult>)> = Vec::new();
    for s in &run.steps {
        match out.iter_mut().find(|(v, _)| *v == s.step_value) {
            Some((_, group)) => group.push(s),
            None => out.push((s.step_value, vec![s])),
        }
    }
    out
}

/// Each step value's count per second (`n` of each step over the steps' served windows).
fn per_s(run: &RunFile, n: impl Fn(&StepResult) -> u64) -> Vec<(f64, f64)> {
    by_value(run)
        .into_iter()
        .map(|(v, steps)| {
            let count: u64 = steps.iter().map(|s| n(s)).sum();
            let window: f64 = steps.iter().map(|s| served_window_s(s)).sum();
            (v, count as f64 / window)
        })
        .collect()
}

/// The seconds a step's replies came in over: `ok_rate` is its ok replies over this window (the
/// step, its drain, less the fastest reply), so a count per second over the same window adds up with
/// it. A queueing server's replies arrive long after its step: over the step's length alone, a target
/// serving 400/s of 600/s would draw 600 replies/s.
fn served_window_s(s: &StepResult) -> f64 {
    if s.ok > 0 && s.ok_rate > 0.0 {
        s.ok as f64 / s.ok_rate
    } else {
        s.duration_s.max(1e-9)
    }
}

/// Whether any step of the run failed a request, on either side.
pub fn any_failure(run: &RunFile) -> bool {
    run.steps
        .iter()
        .any(|s| s.failed > 0 || s.errors.0.iter().any(|(_, n)| *n > 0))
}

/// The knee as vertical lines: the highest step kept up with, and the first beyond it; for a
/// search, the bounds it found.
fn knee(run: &RunFile) -> Vec<Boundary> {
    if run.is_search() {
        return super::search::boundaries(run);
    }
    let Some(summary) = &run.summary else {
        return Vec::new();
    };
    let mut lines = Vec::new();
    if let Some(kept) = summary.kept_up_to {
        lines.push(Boundary {
            x: kept,
            label: format!("kept up to {}", chart::short(kept)),
        });
    }
    if let Some(b) = &summary.beyond {
        lines.push(Boundary {
            x: b.step_value,
            label: format!("beyond: {}", chart::short(b.step_value)),
        });
    }
    lines
}

/// The run's knee ([`results::knee`]) as every chart against the step value marks it, labelled
/// with its cause and, of a named mix, the request that broke first (`knee 500: latency, search p99
/// ×40`); none for a search, whose probes go up and down and whose bounds are its answer.
pub fn knee_line(run: &RunFile) -> Option<KneeLine> {
    let k = run
        .summary
        .as_ref()?
        .knee
        .as_ref()
        .filter(|_| !run.is_search())?;
    let cause = match (k.servers, &k.request) {
        (true, Some(r)) => format!("{}, {}", k.cause.words(), r.headline()),
        (true, None) => k.cause.words().to_string(),
        (false, _) => format!("{}, not the server's", k.cause.words()),
    };
    Some(KneeLine {
        x: k.step_value,
        cause: k.cause.name().to_string(),
        label: format!("knee {}: {cause}", chart::short(k.step_value)),
        title: k.sentence(&step_value(run.model().name(), k.step_value)),
    })
}

/// Served and reply rate against offered, the 1 s min–max band, and what was demanded: y = x when
/// the step value is the demanded rate, else the demanded rate's own line.
pub fn rates(run: &RunFile) -> Chart {
    let mut c = Chart::new(
        "rates",
        "Served and reply rate",
        step_axis(run),
        Axis::linear("replies/s", Unit::Si),
    )
    .band(Band {
        name: "reply rate, 1 s min–max".into(),
        colour: Colour::nth(0),
        points: run
            .steps
            .iter()
            .map(|s| (s.step_value, s.reply_rate.min, s.reply_rate.max))
            .collect(),
    })
    .series(drawn(
        run,
        Series::new(
            "reply rate (avg of 1 s)",
            Colour::nth(0),
            points(run, |s| s.reply_rate.avg),
        ),
    ))
    .series(drawn(
        run,
        Series::new(
            "served (ok_rate)",
            Colour::nth(2),
            points(run, |s| s.ok_rate),
        ),
    ));
    let demanded: Vec<(f64, f64)> = run
        .steps
        .iter()
        .filter_map(|s| s.demanded_rate.map(|d| (s.step_value, d)))
        .collect();
    if !demanded.is_empty() && demanded.iter().all(|(x, d)| x == d) {
        c = c.ideal("ideal: served = offered");
    } else if !demanded.is_empty() {
        let marks = demanded.iter().map(|(x, d)| Mark::plain(*x, *d)).collect();
        c = c.series(Series::new("demanded requests/s", Colour::GREY, marks).dash(Dash::Dotted));
    }
    c.boundaries(knee(run))
        .knee(knee_line(run))
        .shades(trust_shades(run))
}

/// The latency percentiles against offered; a lower bound is hollow.
pub fn latency(run: &RunFile) -> Chart {
    const SHOWN: [(&str, &str); 5] = [
        ("p50", "p50"),
        ("p90", "p90"),
        ("p99", "p99"),
        ("p999", "p99.9"),
        ("max", "max"),
    ];
    let mut c = Chart::new(
        "latency",
        "Latency",
        step_axis(run),
        Axis::linear("latency", Unit::Ms),
    )
    .switch_scale(Scale::Log);
    let mut any_bound = false;
    for (k, (key, name)) in SHOWN.iter().enumerate() {
        let i = LowerBounds::NAMES
            .iter()
            .position(|n| n == key)
            .expect("a name of LowerBounds::NAMES");
        let marks = run
            .steps
            .iter()
            .map(|s| {
                let v = s.latency_ms.values()[i];
                if s.latency_ms.lower_bounds.contains(key) {
                    any_bound = true;
                    Mark::lower_bound(s.step_value, v)
                } else {
                    Mark::at(s.step_value, v)
                }
            })
            .collect();
        c = c.series(drawn(run, Series::new(name, Colour::nth(k), marks)));
    }
    if any_bound {
        c = c.note(
            "Hollow points are lower bounds: requests given up (timed out, or dropped at the step's end) \
             enter at their age then, so the true latency is higher still.",
        );
    }
    c.boundaries(knee(run))
        .knee(knee_line(run))
        .shades(trust_shades(run))
}

/// Failures per second against offered, by class: the target's (transport errors, unexpected
/// statuses) in one bar, the generator's own (no fd, no port) hatched in the bar beside it.
pub fn failures(run: &RunFile) -> Chart {
    let layer = |name: &str, colour: Colour, n: &dyn Fn(&StepResult) -> u64| {
        Layer::new(name, colour, per_s(run, n))
    };
    let mut target = Vec::new();
    let mut generator = Vec::new();
    for (i, class) in ErrorClass::ALL.iter().enumerate() {
        let name = class.name();
        if class.is_generator_resource() {
            let l = layer(&format!("{name} (generator)"), Colour::nth(i), &|s| {
                s.errors.get(name)
            });
            generator.push(l.hatched());
        } else {
            target.push(layer(name, Colour::nth(i), &|s| s.errors.get(name)));
        }
    }
    target.push(layer("unexpected status", Colour::nth(8), &|s| {
        s.replies.saturating_sub(s.ok)
    }));
    Chart::new(
        "failures",
        "Failures by class",
        step_axis(run),
        Axis::linear("failures/s", Unit::Si),
    )
    .stack(Stack::bars(target).beside(0, 2))
    .stack(Stack::bars(generator).beside(1, 2))
    .note("Left bar: the target's failures. Right bar, hatched: the generator's own (out of file descriptors or local ports); those say nothing about the server.")
    .knee(knee_line(run))
    .shades(trust_shades(run))
}

/// Replies per second against offered, by status class.
pub fn status(run: &RunFile) -> Chart {
    const COLOURS: [Colour; 5] = [
        Colour("#aaa"),
        Colour("#2ca02c"),
        Colour("#1f77b4"),
        Colour("#ff7f0e"),
        Colour("#d62728"),
    ];
    let layers = STATUS_CLASSES
        .iter()
        .zip(COLOURS)
        .map(|(class, colour)| Layer::new(class, colour, per_s(run, |s| s.status.get(class))))
        .collect();
    Chart::new(
        "status",
        "Replies by status class",
        step_axis(run),
        Axis::linear("replies/s", Unit::Si),
    )
    .stack(Stack::bars(layers))
    .knee(knee_line(run))
    .shades(trust_shades(run))
}

/// The generator's judgement of itself, three small charts: its CPU, its lag, the agents' start skew.
pub fn trust_strip(run: &RunFile) -> Vec<Chart> {
    let small = |name: &str, title: &str, y: Axis, v: &dyn Fn(&StepResult) -> f64| {
        Chart::new(name, title, step_axis(run), y)
            .series(drawn(
                run,
                Series::new(title, Colour::nth(4), points(run, v)),
            ))
            .knee(knee_line(run))
            .shades(trust_shades(run))
            .size(360.0, 200.0)
    };
    vec![
        small(
            "trust-cpu",
            "Generator CPU (busiest agent)",
            Axis::linear("CPU", Unit::Percent).with_range(0.0, 100.0),
            &|s| s.generator.cpu_pct,
        )
        .series(limit(run, "degraded above", verdict::CPU_DEGRADED_PCT)),
        small(
            "trust-lag",
            "Scheduling lag p99",
            Axis::linear("lag", Unit::Ms),
            &|s| s.generator.lag_p99_ms,
        )
        .series(limit(run, "degraded above", verdict::LAG_DEGRADED_MS)),
        small(
            "trust-skew",
            "Agents' start skew",
            Axis::linear("skew", Unit::Ms),
            &|s| s.start_skew_ms.unwrap_or(0.0),
        ),
    ]
}

/// The verdict's threshold as a dotted line across the step axis, so a point is read against it.
fn limit(run: &RunFile, name: &str, at: f64) -> Series {
    let marks = match step_axis(run).range {
        Some((lo, hi)) => vec![Mark::plain(lo, at), Mark::plain(hi, at)],
        None => Vec::new(),
    };
    Series::new(name, Colour::GREY, marks).dash(Dash::Dotted)
}

/// The server's CPU and memory: a labelled place until the server monitor fills it.
pub fn server() -> String {
    chart::empty(
        "server",
        "Server CPU and memory",
        "Filled by the server monitor: this run had none.",
    )
}

/// Each step's percentile distribution (HdrHistogram's plot: x = 1/(1-q)), its maximum a marker at
/// the far end; at most [`MAX_DISTRIBUTIONS`] steps, spread over the run and always the last.
pub fn distribution(run: &RunFile, distributions: &[Distribution]) -> String {
    let title = "Latency by percentile, per step";
    if distributions.is_empty() {
        return chart::empty(
            "distribution",
            title,
            "No step has a merged distribution (hlog/step-NNN.hgrm) to draw.",
        );
    }
    let shown = chosen(run, distributions);
    let mut c = Chart::new(
        "distribution",
        title,
        Axis::percentile("percentile"),
        Axis::linear("latency", Unit::Ms),
    )
    .switch_scale(Scale::Log);
    for (k, &i) in shown.iter().enumerate() {
        let d = &distributions[i];
        let mut marks: Vec<Mark> = d
            .points
            .iter()
            .filter(|p| p.quantile < 1.0)
            .map(|p| Mark::plain(p.quantile, p.value_ms))
            .collect();
        marks.push(Mark::at(1.0, d.max_ms));
        let value = run
            .steps
            .iter()
            .find(|s| s.number == d.step)
            .map(|s| step_value(run.model().name(), s.step_value));
        let name = match value {
            Some(v) => format!("step {} ({v})", d.step),
            None => format!("step {}", d.step),
        };
        c = c.series(Series::new(&name, Colour::nth(k), marks));
    }
    let mut note = String::from("The dot at the right end of each line is the step's maximum.");
    if shown.len() < distributions.len() {
        note.push_str(&format!(
            " {} of the {} steps are drawn, spread over the run.",
            shown.len(),
            distributions.len()
        ));
    }
    c.note(&note).render()
}

/// Which distributions to draw: the knee's two steps (the last kept up with, the first beyond;
/// a search's last pass at its maximum and last fail at its lowest fail),
/// the first and the last, and the rest spread over the run, at most [`MAX_DISTRIBUTIONS`], in step
/// order.
fn chosen(run: &RunFile, distributions: &[Distribution]) -> Vec<usize> {
    let knee: Vec<u32> = if run.is_search() {
        super::search::key_steps(run)
    } else {
        run.summary
            .iter()
            .flat_map(|s| [s.kept_up_step, s.beyond.as_ref().map(|b| b.step)])
            .flatten()
            .collect()
    };
    let n = distributions.len();
    let mut out: Vec<usize> = distributions
        .iter()
        .enumerate()
        .filter(|(i, d)| knee.contains(&d.step) || *i == 0 || *i + 1 == n)
        .map(|(i, _)| i)
        .collect();
    for i in spread(distributions.len(), MAX_DISTRIBUTIONS) {
        if out.len() >= MAX_DISTRIBUTIONS {
            break;
        }
        if !out.contains(&i) {
            out.push(i);
        }
    }
    out.sort_unstable();
    out
}

/// `max` indices out of `0..n`, evenly spread, the first and the last among them.
fn spread(n: usize, max: usize) -> Vec<usize> {
    if n <= max {
        return (0..n).collect();
    }
    let mut out: Vec<usize> = (0..max)
        .map(|k| (k * (n - 1) + (max - 1) / 2) / (max - 1))
        .collect();
    out.dedup();
    out
}

/// The 1 s served rate over the whole run, the steps' series laid end to end, what was demanded
/// as a staircase, step boundaries, each step shaded by its verdict.
pub fn timeline(run: &RunFile) -> Chart {
    let mut served = Vec::new();
    let mut demanded = Vec::new();
    let mut boundaries = Vec::new();
    let mut shades = Vec::new();
    let mut t = 0.0;
    for s in &run.steps {
        boundaries.push(Boundary {
            x: t,
            label: chart::short(s.step_value),
        });
        for (i, v) in s.reply_rate_series.iter().enumerate() {
            served.push(Mark::plain(t + i as f64 + 1.0, *v));
        }
        if let Some(d) = s.demanded_rate {
            demanded.push(Mark::plain(t, d));
            demanded.push(Mark::plain(t + s.duration_s, d));
        }
        shades.push(Shade {
            from: t,
            to: t + s.duration_s,
            verdict: s.trust,
            title: shade_title(run, s),
        });
        t += s.duration_s;
    }
    // A long run's seconds are a line; a short one's are points to hover.
    if served.len() <= MAX_TIMELINE_DOTS {
        for m in &mut served {
            m.marker = Marker::Dot;
        }
    }
    let mut c = Chart::new(
        "timeline",
        "Served rate over the run (1 s samples)",
        Axis::linear("time into the run", Unit::Seconds),
        Axis::linear("replies/s", Unit::Si),
    )
    .series(Series::new(
        "replies/s, each second",
        Colour::nth(0),
        served,
    ))
    .boundaries(boundaries)
    .shades(shades)
    .size(720.0, 220.0);
    if !demanded.is_empty() {
        c = c.series(Series::new("demanded", Colour::GREY, demanded).dash(Dash::Dotted));
    }
    let unit = match run.model() {
        LoadModel::Connections => "new connections/s",
        LoadModel::Requests => "requests/s",
        LoadModel::Concurrency => "connections",
    };
    let mut note = format!("Dashed lines: each step's start, labelled with its value ({unit}).");
    if run.steps.iter().any(|s| s.trust != Verdict::Valid) {
        note.push_str(" Shaded: steps the generator did not fully trust (hover for why).");
    }
    c.note(&note)
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    fn golden() -> RunFile {
        let text = include_str!("../../../results/tests/golden/run.json");
        RunFile::parse(text, Path::new("run.json")).unwrap()
    }

    #[test]
    fn every_chart_against_the_offered_load_marks_the_knee_with_its_cause() {
        let mut run = golden();
        // The golden run's p99 rose from 1.8 ms to 250 ms at 500 req/s, its served rate flat.
        run.summary = Some(results::step::summarize_run(&run.steps));
        let k = knee_line(&run).unwrap();
        assert_eq!((k.x, k.cause.as_str()), (500.0, "latency"));
        assert_eq!(k.label, "knee 500: latency");
        assert!(
            k.title.starts_with(
                "knee at 500 req/s: p99 rose 139x (1.8 → 250 ms), the served rate flattened"
            ),
            "{}",
            k.title
        );
        let mut charts = vec![rates(&run), latency(&run), failures(&run), status(&run)];
        charts.extend(trust_strip(&run));
        for c in charts {
            assert_eq!(c.knee.as_ref(), Some(&k), "{}", c.name);
            let svg = c.render();
            assert!(
                svg.contains("<g data-knee=\"latency\"><title>knee at 500 req/s")
                    && svg.contains(">knee 500: latency</text>"),
                "{}: {svg}",
                c.name
            );
        }
        // Of a named mix, the request that broke first is on the label too, and in its title.
        run.summary.as_mut().unwrap().knee.as_mut().unwrap().request =
            Some(results::knee::KneeRequest {
                name: "search".into(),
                by: results::knee::KneeCause::Latency,
                low_p99_ms: Some(12.0),
                p99_ms: 480.0,
                p99_lower_bound: false,
                p99_ratio: Some(40.0),
                prev_failed_pct: Some(0.0),
                failed_pct: 0.0,
            });
        let k = knee_line(&run).unwrap();
        assert_eq!(k.label, "knee 500: latency, search p99 ×40");
        assert!(
            k.title
                .starts_with("knee at 500 req/s: search's p99 rose 40x (12 → 480 ms), p99 rose"),
            "{}",
            k.title
        );
        // No knee, no mark: the run's page as it was.
        run.summary.as_mut().unwrap().knee = None;
        assert!(!rates(&run).render().contains("data-knee"));
    }

    #[test]
    fn a_demanded_rate_that_is_not_the_step_value_is_its_own_line() {
        let mut run = golden();
        run.plan.model = "connections".into();
        for s in &mut run.steps {
            s.demanded_rate = Some(10.0 * s.step_value);
        }
        let c = rates(&run);
        assert!(c.ideal.is_none());
        let demanded = c
            .series
            .iter()
            .find(|s| s.name == "demanded requests/s")
            .unwrap();
        assert_eq!(demanded.marks[0].y, 10.0 * run.steps[0].step_value);
        assert!(
            rates(&golden()).ideal.is_some(),
            "req/s steps are their own demand: y = x"
        );
    }

    #[test]
    fn every_step_value_chart_shares_one_x_axis_past_the_last_step() {
        let run = golden();
        let axes = [
            rates(&run).x,
            latency(&run).x,
            failures(&run).x,
            status(&run).x,
        ];
        assert!(axes.iter().all(|a| *a == axes[0]));
        assert_eq!(axes[0].range, Some((0.0, 650.0)));
    }

    #[test]
    fn the_knee_s_distributions_are_among_those_drawn() {
        let mut run = golden();
        let template = run.steps[0].clone();
        run.steps = (1..=40)
            .map(|n| StepResult {
                number: n,
                step_value: 100.0 * n as f64,
                ..template.clone()
            })
            .collect();
        let summary = run.summary.as_mut().unwrap();
        summary.kept_up_step = Some(17);
        summary.beyond.as_mut().unwrap().step = 18;
        let ds: Vec<Distribution> = run
            .steps
            .iter()
            .map(|s| Distribution {
                step: s.number,
                total: 1,
                mean_ms: 1.0,
                stddev_ms: 0.0,
                max_ms: 1.0,
                buckets: 1,
                sub_buckets: 2048,
                points: Vec::new(),
            })
            .collect();
        let shown: Vec<u32> = chosen(&run, &ds).iter().map(|i| ds[*i].step).collect();
        assert_eq!(shown.len(), MAX_DISTRIBUTIONS);
        assert!(
            shown.contains(&17) && shown.contains(&18) && shown.contains(&40),
            "{shown:?}"
        );
        assert!(shown.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn a_step_s_stretch_reaches_halfway_to_its_neighbours() {
        let v = [100.0, 200.0, 400.0];
        assert_eq!(stretch(&v, 100.0), (50.0, 50.0));
        assert_eq!(stretch(&v, 200.0), (50.0, 100.0));
        assert_eq!(stretch(&v, 400.0), (100.0, 100.0));
        assert_eq!(stretch(&[50.0], 50.0), (5.0, 5.0));
        let axis = step_axis_over(
            LoadModel::Requests,
            [400.0, 100.0, 200.0, 200.0].into_iter(),
        );
        assert_eq!(axis.range, Some((0.0, 500.0)));
    }

    #[test]
    fn a_spread_keeps_the_first_and_the_last() {
        assert_eq!(spread(5, 12), [0, 1, 2, 3, 4]);
        let s = spread(100, 12);
        assert_eq!(s.len(), 12);
        assert_eq!((s[0], s[11]), (0, 99));
        assert!(s.windows(2).all(|w| w[0] < w[1]));
    }
}
