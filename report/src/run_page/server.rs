//! The server's charts, from the monitors' view of each step (run.json `steps[].server_monitors`):
//! its CPU beside its memory, against the step value like every chart of the run, one colour per
//! monitor.
//!
//! CPU is drawn on one 0–100 % axis, each line a share of what saturates it: the watched processes'
//! CPU of the cores they may use (`srv_cpu_util_pct`), the busiest thread of one core, the host's CPU
//! and softirq of all its cores. A line reaching 100 is a resource used up, whatever the core count:
//! a dotted line at `usable × 100 %` on a "% of a core" axis would put an 8-core server's knee off the
//! top of a single-threaded one's chart, and the busiest thread (at most 100) would be lost under it.
use monitor::step::StepServer;
use results::run_file::RunFile;
use results::step::StepResult;

use super::charts::{knee_line, step_axis, trust_shades};
use crate::chart::{self, Axis, Band, Chart, Colour, Dash, Mark, Series, Titles, Unit};

const MB: f64 = 1024.0 * 1024.0;

/// The monitors of a run, by name: those run.json lists, then any a step names that it does not
/// (a file written by hand, or by an older coordinator), in the order first seen.
pub fn monitors(run: &RunFile) -> Vec<String> {
    let mut names: Vec<String> = run.monitors.iter().map(|m| m.name.clone()).collect();
    for m in run.steps.iter().flat_map(|s| &s.server_monitors) {
        if !names.contains(&m.monitor) {
            names.push(m.monitor.clone());
        }
    }
    names
}

/// How a chart names monitor `name`'s lines: with `(Prometheus)` when its views came from one
/// (`--server-prometheus`), so a reader knows which numbers are scrapes and which 1 s samples.
fn shown(run: &RunFile, name: &str) -> String {
    match from_prometheus(run, name) {
        true => format!("{name} (Prometheus)"),
        false => name.to_string(),
    }
}

/// Whether monitor `name`'s views came from a Prometheus (`--server-prometheus`).
fn from_prometheus(run: &RunFile, name: &str) -> bool {
    run.steps
        .iter()
        .filter_map(|s| seen(s, name))
        .any(|m| m.source == monitor::step::Source::Prometheus)
}

/// Monitor `name`'s view of step `s`, if it saw it.
pub fn seen<'a>(s: &'a StepResult, name: &str) -> Option<&'a StepServer> {
    s.server_monitors.iter().find(|m| m.monitor == name)
}

/// Up to this many steps, each step of a server line is a marked point; past it, only the line
/// (and the hollow points): 100 steps' markers on a chart half the page wide overlap into a smear,
/// and were a tenth of the page of a 100-step run. The readout still finds each step along the line.
const MAX_MARKED_STEPS: usize = 40;

/// A step's mark: hollow when the monitor saw only part of the step (it joined late or was lost),
/// as a lower bound is; else a dot, or on the line for a long run.
fn mark(x: f64, y: f64, m: &StepServer, marked: bool) -> Mark {
    if m.partial {
        Mark::lower_bound(x, y)
    } else if marked {
        Mark::at(x, y)
    } else {
        Mark::plain(x, y)
    }
}

/// One line of monitor `name`: the steps it saw that have the value, in step order.
fn line(run: &RunFile, name: &str, v: impl Fn(&StepServer) -> Option<f64>) -> Vec<Mark> {
    let marked = run.steps.len() <= MAX_MARKED_STEPS;
    run.steps
        .iter()
        .filter_map(|s| {
            let m = seen(s, name)?;
            v(m).filter(|y| y.is_finite())
                .map(|y| mark(s.step_value, y, m, marked))
        })
        .collect()
}

fn any_partial(run: &RunFile) -> bool {
    run.steps
        .iter()
        .flat_map(|s| &s.server_monitors)
        .any(|m| m.partial)
}

const PARTIAL_NOTE: &str = " Hollow: the monitor saw only part of the step.";

/// The cores a monitor's target may use, as its CPU line's name says them: `1 core`, `2.5 cores`.
fn cores(run: &RunFile, name: &str) -> Option<String> {
    let usable = run
        .steps
        .iter()
        .filter_map(|s| seen(s, name)?.target.as_ref().map(|t| t.usable_cores))
        .next_back()?;
    let n = chart::short(usable);
    Some(if usable == 1.0 {
        format!("{n} core")
    } else {
        format!("{n} cores")
    })
}

/// The server's two charts side by side, each drawn, or its labelled place when it has nothing to
/// draw: no step seen yet, or (memory) a monitor of the host alone.
pub fn charts(run: &RunFile, titles: &mut Titles) -> String {
    let mut out = String::from("<div class=\"strip\">\n");
    for (c, why) in [
        (cpu(run), "The monitor has not reported a step yet."),
        (
            memory(run),
            "No step has the memory of watched processes: none reported yet, or the monitor watches the host alone.",
        ),
    ] {
        if c.series.iter().all(|s| s.marks.is_empty()) && c.bands.is_empty() {
            out.push_str(&chart::empty(&c.name, &c.title, why));
        } else {
            out.push_str(&c.render_in(titles));
        }
    }
    out.push_str("</div>\n");
    out
}

/// The server's CPU against the step value: per monitor, its target's share of its usable cores
/// (solid), the busiest thread's of one core (dashed), the host's CPU and softirq (dotted).
pub fn cpu(run: &RunFile) -> Chart {
    let mut c = Chart::new(
        "server",
        "Server CPU",
        step_axis(run),
        Axis::linear("CPU, % of what saturates it", Unit::Percent),
    );
    let mut top: f64 = 100.0;
    for (k, name) in monitors(run).iter().enumerate() {
        let colour = Colour::nth(k);
        let of = cores(run, name).map_or_else(String::new, |n| format!(", % of its {n}"));
        let who = shown(run, name);
        let lines = [
            (
                format!("{who}: CPU{of}"),
                Dash::Solid,
                line(run, name, |m| m.target.as_ref().map(|t| t.cpu_util_pct)),
            ),
            (
                format!("{who}: busiest thread, % of a core"),
                Dash::Dashed,
                line(run, name, |m| m.target.as_ref()?.thread_max_pct),
            ),
            (
                format!("{who}: host CPU"),
                Dash::Dotted,
                line(run, name, |m| m.host.cpu_pct),
            ),
            // Dotted as the host's CPU it is part of, and far below it.
            (
                format!("{who}: host softirq"),
                Dash::Dotted,
                line(run, name, |m| m.host.softirq_pct),
            ),
        ];
        for (title, dash, marks) in lines {
            if !marks.is_empty() {
                top = marks.iter().fold(top, |t, m| t.max(m.y));
                c = c.series(Series::new(&title, colour, marks).dash(dash));
            }
        }
    }
    c.y = c.y.with_range(0.0, top);
    let mut note = String::from(
        "Shares of what each saturates at 100: the cores the server may use, one core for its busiest \
         thread, all the host's cores.",
    );
    if any_partial(run) {
        note.push_str(PARTIAL_NOTE);
    }
    c.note(&note)
        .knee(knee_line(run))
        .shades(trust_shades(run))
        .size(360.0, 240.0)
}

/// The server's memory against the step value: per monitor, the step's highest (the line) and its
/// 1 s min–max (the band), in MB (the cgroup's working set, else the processes' RSS).
pub fn memory(run: &RunFile) -> Chart {
    let mut c = Chart::new(
        "server-memory",
        "Server memory",
        step_axis(run),
        Axis::linear("memory (MB)", Unit::Si),
    );
    for (k, name) in monitors(run).iter().enumerate() {
        let colour = Colour::nth(k);
        let band: Vec<(f64, f64, f64)> = run
            .steps
            .iter()
            .filter_map(|s| {
                let g = seen(s, name)?.target.as_ref()?.memory_bytes;
                Some((s.step_value, g.min / MB, g.max / MB))
            })
            .collect();
        if band.is_empty() {
            continue;
        }
        let who = shown(run, name);
        // A Prometheus source has one number a step (its query's), no 1 s samples: no band.
        if !from_prometheus(run, name) {
            c = c.band(Band {
                name: format!("{who}: 1 s min–max"),
                colour,
                points: band,
            });
        }
        c = c.series(Series::new(
            &format!("{who}: highest"),
            colour,
            line(run, name, |m| {
                m.target.as_ref().map(|t| t.memory_bytes.max / MB)
            }),
        ));
    }
    let mut note = String::from("The cgroup's working set, else the watched processes' RSS.");
    if monitors(run).iter().any(|name| from_prometheus(run, name)) {
        note.push_str(
            " A Prometheus source's is its memory_bytes query: with the node set, the host's memory not available.",
        );
    }
    if any_partial(run) {
        note.push_str(PARTIAL_NOTE);
    }
    c.note(&note)
        .knee(knee_line(run))
        .shades(trust_shades(run))
        .size(360.0, 240.0)
}

/// Monitor `name`'s view of a step whose target used `cpu_util_pct` of its 2 cores, its busiest
/// thread 45 % of one, 1–3 MB, the host 30 % busy and 2 % in softirq (for tests of what draws it).
#[cfg(test)]
pub(crate) fn example(name: &str, cpu_util_pct: f64) -> StepServer {
    let gauge =
        |min: f64, max: f64| serde_json::json!({"min": min, "avg": (min + max) / 2.0, "max": max});
    serde_json::from_value(serde_json::json!({
        "monitor": name, "counted_s": 5.0, "rated_s": 4.0, "partial": false, "samples": 4,
        "target": {
            "cpu_pct": 2.0 * cpu_util_pct, "cpu_user_pct": 0.0, "cpu_system_pct": 0.0,
            "cpu_util_pct": cpu_util_pct, "usable_cores": 2.0, "thread_max_pct": 45.0,
            "busiest_thread": "worker", "memory_bytes": gauge(MB, 3.0 * MB),
            "threads": gauge(4.0, 4.0), "open_fds": gauge(9.0, 9.0), "processes": gauge(1.0, 1.0),
            "voluntary_switches": 0, "involuntary_switches": 0,
            "throttled_pct": null, "memory_peak_bytes": null, "oom_kills": null
        },
        "host": {"cpu_pct": 30.0, "softirq_pct": 2.0, "steal_pct": 0.0, "iowait_pct": 0.0,
                 "busiest_core": 0, "busiest_core_pct": 60.0, "run_queue": null,
                 "mem_available_bytes": null},
        "net": [], "tcp": monitor::TcpCounters::default(), "monitor_cpu_pct": 0.1,
        "series": []
    }))
    .expect("the example is a StepServer")
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    fn monitored() -> RunFile {
        let text = include_str!("../../../results/tests/golden/run.json");
        let mut run = RunFile::parse(text, Path::new("run.json")).unwrap();
        for (i, s) in run.steps.iter_mut().enumerate() {
            let mut v = example("web1", 10.0 * (i + 1) as f64);
            v.partial = i == 0;
            s.server_monitors = vec![v];
        }
        run
    }

    #[test]
    fn each_monitor_line_is_its_steps_values_a_partial_step_hollow() {
        let run = monitored();
        let c = cpu(&run);
        let srv = &c.series[0];
        assert_eq!(srv.name, "web1: CPU, % of its 2 cores");
        let ys: Vec<f64> = srv.marks.iter().map(|m| m.y).collect();
        let want: Vec<f64> = (1..=run.steps.len()).map(|i| 10.0 * i as f64).collect();
        assert_eq!(ys, want);
        assert_eq!(srv.marks[0].marker, crate::chart::Marker::Hollow);
        assert_eq!(srv.marks[1].marker, crate::chart::Marker::Dot);
        assert!(c.note.as_deref().unwrap().contains("only part of the step"));
        let names: Vec<&str> = c.series.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(
            names[1..],
            [
                "web1: busiest thread, % of a core",
                "web1: host CPU",
                "web1: host softirq"
            ]
        );
        assert_eq!(c.x, step_axis(&run), "the x axis of every chart");
    }

    #[test]
    fn memory_is_the_step_s_highest_over_its_min_max_band_in_mb() {
        let c = memory(&monitored());
        assert_eq!(c.bands[0].points[0].1, 1.0);
        assert_eq!(c.bands[0].points[0].2, 3.0);
        assert_eq!(c.series[0].marks[0].y, 3.0);
    }

    #[test]
    fn a_step_a_monitor_missed_has_no_point_and_a_host_monitor_no_target_line() {
        let mut run = monitored();
        run.steps[1].server_monitors.clear();
        for s in &mut run.steps {
            for m in &mut s.server_monitors {
                m.target = None;
            }
        }
        let c = cpu(&run);
        assert_eq!(c.series[0].name, "web1: host CPU");
        assert_eq!(c.series[0].marks.len(), run.steps.len() - 1);
        assert!(memory(&run).series.is_empty());
    }

    #[test]
    fn a_prometheus_source_s_lines_say_so() {
        let mut run = monitored();
        for s in &mut run.steps {
            for m in &mut s.server_monitors {
                m.source = monitor::step::Source::Prometheus;
            }
        }
        let names: Vec<String> = cpu(&run).series.iter().map(|s| s.name.clone()).collect();
        assert!(
            names.iter().all(|n| n.contains(" (Prometheus): ")),
            "{names:?}"
        );
        let plain: Vec<String> = cpu(&monitored())
            .series
            .iter()
            .map(|s| s.name.clone())
            .collect();
        assert!(plain.iter().all(|n| !n.contains("Prometheus")), "{plain:?}");
        // One number a step, no 1 s samples: no min–max band drawn or named in the legend.
        assert!(memory(&run).bands.is_empty());
        assert!(!memory(&monitored()).bands.is_empty());
    }

    #[test]
    fn a_cpu_past_its_cores_widens_the_axis_rather_than_leaving_it() {
        let mut run = monitored();
        run.steps[0].server_monitors[0]
            .target
            .as_mut()
            .unwrap()
            .cpu_util_pct = 130.0;
        assert_eq!(cpu(&run).y.range, Some((0.0, 130.0)));
        assert_eq!(cpu(&monitored()).y.range, Some((0.0, 100.0)));
    }
}
