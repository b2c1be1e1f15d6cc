//! The section of a named mix: present with each name, absent without one.
use std::path::Path;

use shared::metrics::NameStats;

use super::*;

fn golden() -> RunFile {
    let text = include_str!("../../../../results/tests/golden/run.json");
    RunFile::parse(text, Path::new("run.json")).unwrap()
}

/// A name's stats at one step: `n` served replies of `ms`, `gave_up` of them given up.
fn stats(n: u64, ms: u64, gave_up: u64) -> NameStats {
    let mut s = NameStats::default();
    s.counters.requests = n;
    s.counters.replies = n - gave_up;
    s.counters.ok = n - gave_up;
    s.counters.given_up = gave_up;
    s.counters.status = [0, n - gave_up, 0, 0, 0];
    for _ in 0..n {
        s.latency.record(ms * 1000).unwrap();
    }
    s
}

/// The golden run with a mix of `names`: "slow"'s latency grows with the step, the others' not;
/// the last step gives up one "slow" request.
pub(crate) fn named(names: &[&str]) -> RunFile {
    let mut run = golden();
    let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
    let weights: Vec<u32> = (1..=names.len() as u32).collect();
    let last = run.steps.len() - 1;
    for (k, step) in run.steps.iter_mut().enumerate() {
        let per: Vec<NameStats> = names
            .iter()
            .enumerate()
            .map(|(i, n)| {
                let ms = if n == "slow" { 10 * (k as u64 + 1) } else { 2 };
                let gave_up = u64::from(n == "slow" && k == last);
                stats(10 * (i as u64 + 1), ms, gave_up)
            })
            .collect();
        step.per_request = results::step::per_request::rows(&names, &weights, &per, 1.0);
    }
    run
}

#[test]
fn each_step_has_a_table_of_its_names_and_the_last_one_is_open() {
    let run = named(&["home", "slow", "a<b"]);
    let html = tables(&run);
    assert_eq!(html.matches("<details").count(), run.steps.len());
    assert_eq!(html.matches(" open>").count(), 1);
    let last = run.steps.last().unwrap().number;
    assert!(
        html.contains(&format!("<details data-step=\"{last}\" open>")),
        "{html}"
    );
    assert!(
        html.contains("<tr data-name=\"a&lt;b\">"),
        "a name is escaped"
    );
    assert!(!html.contains("a<b"), "{html}");
    // The last step's "slow" gave one request up: its latencies are lower bounds.
    let row = html.rsplit("<tr data-name=\"slow\">").next().unwrap();
    assert!(row.contains("<td data-col=\"p99_ms\">≥"), "{row}");
    let first = html.split("<tr data-name=\"slow\">").nth(1).unwrap();
    assert!(first.contains("<td data-col=\"p99_ms\">10.0"), "{first}");
    assert!(
        first.contains("<td data-col=\"status\">2xx 20</td>"),
        "{first}"
    );
}

#[test]
fn the_charts_draw_a_line_per_name_at_the_steps_values() {
    let run = named(&["home", "slow"]);
    let values: Vec<f64> = run.steps.iter().map(|s| s.step_value).collect();
    for chart in [served(&run), p99(&run)] {
        let drawn: Vec<&str> = chart.series.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(drawn, ["home", "slow"]);
        for s in &chart.series {
            let xs: Vec<f64> = s.marks.iter().map(|m| m.x).collect();
            assert_eq!(xs, values, "{}", s.name);
        }
    }
    let p = p99(&run);
    let slow = &p.series[1];
    assert!(slow.marks.first().unwrap().y < slow.marks.last().unwrap().y);
    assert_eq!(
        slow.marks.last().unwrap().marker,
        crate::chart::Marker::Hollow,
        "a lower bound is hollow"
    );
    assert!(p.series[0].marks.iter().all(|m| m.y == 2.0));
}

#[test]
fn twenty_names_are_told_apart_by_colour_and_dash() {
    let looks: Vec<(Colour, Dash)> = (0..20).map(look).collect();
    for (i, a) in looks.iter().enumerate() {
        for b in &looks[i + 1..] {
            assert_ne!(a, b);
        }
    }
}

#[test]
fn a_report_has_the_section_only_for_a_named_mix() {
    let plain = crate::RunReport {
        run: golden(),
        distributions: Vec::new(),
    };
    let page = crate::render_run(&plain);
    assert!(!page.contains("<h2>Requests</h2>"));
    assert!(!page.contains("requests-served"));
    let named = crate::RunReport {
        run: named(&["home", "slow"]),
        distributions: Vec::new(),
    };
    let page = crate::render_run(&named);
    let status = page.find("data-chart=\"status\"").unwrap();
    let section = page.find("<h2>Requests</h2>").unwrap();
    let served = page.find("data-chart=\"requests-served\"").unwrap();
    let p99 = page.find("data-chart=\"requests-p99\"").unwrap();
    let trust = page.find("data-chart=\"trust-cpu\"").unwrap();
    assert!(status < section && section < served && served < p99 && p99 < trust);
    assert!(page.contains("data-n=\"slow\""), "a series per name");
}
