//! Names compared against the golden run given a mix here: each expected class follows from a
//! change made in the test.
use std::path::Path;

use shared::metrics::NameStats;

use super::super::{Comparison, Threshold, compare as compare_runs};
use super::*;
use crate::run_file::RunFile;

const GOLDEN: &str = include_str!("../../../tests/golden/run.json");

/// A name's stats: `ok` served of `us` each, `failed` replies of a 5xx.
fn stats(ok: u64, us: u64, failed: u64) -> NameStats {
    let mut s = NameStats::default();
    s.counters.requests = ok + failed;
    s.counters.replies = ok + failed;
    s.counters.ok = ok;
    s.counters.status = [0, ok, 0, 0, failed];
    s.latency.record_n(us, ok).unwrap();
    s
}

/// The golden run labelled `label`, each step with the mix `names`, each name of `(ok, µs, failed)`
/// per second (the step's length made 1 s).
fn run(label: &str, names: &[(&str, u64, u64, u64)]) -> Labelled {
    let mut run = RunFile::parse(GOLDEN, Path::new("run.json")).unwrap();
    let list: Vec<String> = names.iter().map(|n| n.0.to_string()).collect();
    let per: Vec<NameStats> = names.iter().map(|n| stats(n.1, n.2, n.3)).collect();
    for s in &mut run.steps {
        s.per_request = crate::step::per_request::rows(&list, &vec![1; list.len()], &per, 1.0);
    }
    Labelled {
        label: label.into(),
        source: format!("results/{label}"),
        run,
    }
}

fn compared(runs: Vec<Labelled>) -> Comparison {
    compare_runs(runs, None, Threshold::default()).unwrap()
}

fn class(c: &Comparison, name: &str, run: usize, metric: &str) -> Change {
    let m = NAME_METRICS.iter().position(|n| *n == metric).unwrap();
    let row = c.per_request.rows.iter().find(|r| r.name == name).unwrap();
    row.runs[run].as_ref().unwrap().cells[m].class
}

#[test]
fn a_slower_name_is_worse_and_the_others_are_noise() {
    let base = run("base", &[("home", 100, 2_000, 0), ("slow", 100, 5_000, 0)]);
    let cand = run("cand", &[("home", 100, 2_010, 0), ("slow", 90, 40_000, 5)]);
    let c = compared(vec![base, cand]);
    let steps = c.steps.len();
    assert_eq!(
        c.per_request.rows.len(),
        2 * steps,
        "a row per step and name"
    );
    assert!(c.per_request.only.is_empty());
    assert_eq!(class(&c, "home", 0, "p99_ms"), Change::Baseline);
    assert_eq!(class(&c, "home", 1, "p99_ms"), Change::Noise);
    assert_eq!(class(&c, "home", 1, "ok_rate"), Change::Noise);
    assert_eq!(class(&c, "slow", 1, "p99_ms"), Change::Worse);
    assert_eq!(class(&c, "slow", 1, "ok_rate"), Change::Worse);
    assert_eq!(class(&c, "slow", 1, "failed_pct"), Change::Worse);
    let worse = changes(&c, Change::Worse);
    assert_eq!(worse.len(), steps, "{worse:?}");
    assert!(
        worse[0].starts_with("cand at 100 req/s (step 1) slow: p99_ms 40"),
        "{worse:?}"
    );
    // Shown, not judged: the steps themselves did not change.
    assert!(c.regressions.is_empty());
}

#[test]
fn a_change_below_the_histogram_s_resolution_is_never_flagged() {
    // At 1 s a bucket is about half a millisecond wide: 0.4 ms more is within two buckets.
    let base = run("base", &[("home", 100, 1_000_000, 0)]);
    let cand = run("cand", &[("home", 100, 1_000_400, 0)]);
    let c = compared(vec![base, cand]);
    let zero = compare_runs(
        vec![
            run("base", &[("home", 100, 1_000_000, 0)]),
            run("cand", &[("home", 100, 1_000_400, 0)]),
        ],
        None,
        Threshold::try_new(0.0).unwrap(),
    )
    .unwrap();
    for c in [&c, &zero] {
        assert_eq!(class(c, "home", 1, "p99_ms"), Change::Noise);
    }
}

#[test]
fn names_only_one_side_has_are_listed_as_such() {
    let base = run("base", &[("home", 100, 2_000, 0), ("login", 10, 2_000, 0)]);
    let cand = run("cand", &[("home", 100, 2_000, 0), ("search", 10, 2_000, 0)]);
    let c = compared(vec![base, cand]);
    assert_eq!(
        c.per_request.only,
        [OnlyIn {
            label: "cand".into(),
            run_only: vec!["search".into()],
            baseline_only: vec!["login".into()],
        }]
    );
    let names: Vec<&str> = c.per_request.rows.iter().map(|r| r.name.as_str()).collect();
    assert!(names.iter().all(|n| *n == "home"), "{names:?}");
}

#[test]
fn runs_without_names_compare_as_before() {
    let c = compared(vec![run("a", &[]), run("b", &[])]);
    assert!(c.per_request.is_empty());
    assert!(!c.to_json().contains("per_request"));
}
