//! Gates parsed in the condition grammar's spelling, and judged against the golden run given a mix
//! here: each expected breach follows from a change made in the test.
use std::path::Path;

use shared::metrics::NameStats;

use super::super::{Labelled, Threshold, compare as compare_runs};
use super::*;
use crate::run_file::RunFile;

const GOLDEN: &str = include_str!("../../../tests/golden/run.json");

/// The golden run labelled `label`, each step with the mix `names` of `(name, served, µs each)`
/// over 1 s; unnamed when `names` is empty.
fn run(label: &str, names: &[(&str, u64, u64)]) -> Labelled {
    let mut run = RunFile::parse(GOLDEN, Path::new("run.json")).unwrap();
    let list: Vec<String> = names.iter().map(|n| n.0.to_string()).collect();
    let per: Vec<NameStats> = names
        .iter()
        .map(|n| {
            let mut s = NameStats::default();
            s.counters.requests = n.1;
            s.counters.replies = n.1;
            s.counters.ok = n.1;
            s.latency.record_n(n.2, n.1).unwrap();
            s
        })
        .collect();
    for s in &mut run.steps {
        s.per_request = crate::step::per_request::rows(&list, &vec![1; list.len()], &per, 1.0);
    }
    Labelled {
        label: label.into(),
        source: format!("results/{label}"),
        run,
    }
}

fn gates(texts: &[&str]) -> Vec<Gate> {
    texts.iter().map(|t| Gate::parse(t).unwrap()).collect()
}

#[test]
fn a_gate_is_a_condition_s_subject_then_a_change_for_the_worse_in_percent() {
    let g = Gate::parse(" p99[login] > 5% ").unwrap();
    assert_eq!(g.metric, Metric::Latency(condition::Latency::P99));
    assert_eq!(g.request.as_deref(), Some("login"));
    assert_eq!(g.worse_pct, 5.0);
    assert_eq!(
        (g.text.as_str(), g.subject()),
        ("p99[login] > 5%", "p99[login]".into())
    );
    // The grammar's other spellings of a metric, and a step's quantity without a name.
    let g = Gate::parse("p99.9>2.5%").unwrap();
    assert_eq!((g.subject(), g.worse_pct), ("p999".to_string(), 2.5));
    assert_eq!(Gate::parse("ok_rate[search]>0%").unwrap().worse_pct, 0.0);
    assert_eq!(Gate::parse("errors>10%").unwrap().request, None);
}

#[test]
fn a_gate_spelt_wrong_is_refused_with_the_part_pointed_at() {
    for (text, says) in [
        (
            "p98[login]>5%",
            "--regression 'p98[login]>5%': unknown metric 'p98' at column 1: use p50",
        ),
        (
            "p99[login>5%",
            "--regression 'p99[login>5%': expected ']' after the request's name, found '>' at column 10",
        ),
        (
            "errors[login]>5%",
            "--regression 'errors[login]>5%': errors takes no request's name",
        ),
        (
            "p99[login]<5%",
            "--regression 'p99[login]<5%': expected '>' and how much worse in %, e.g. p99[login]>5% at column 11",
        ),
        (
            "p99[login]>5ms",
            "--regression 'p99[login]>5ms': a regression is a relative change: write it in % (e.g. 5%) at column 13",
        ),
        (
            "p99>%",
            "--regression 'p99>%': expected a change in % after '>', e.g. 5% at column 5",
        ),
        (
            "requests[login]>5%",
            "--regression 'requests[login]>5%': requests is not compared between runs; gate p50, p90, p99, p999, max, mean, failed, errors or ok_rate",
        ),
        ("", "--regression '': empty expression"),
    ] {
        let e = Gate::parse(text).unwrap_err().to_string();
        assert!(e.starts_with(says), "{text}: {e}");
    }
    // The caret line is under the bad part.
    let e = Gate::parse("p99[login]>5ms").unwrap_err().to_string();
    assert!(
        e.ends_with("\n    p99[login]>5ms\n                ^^"),
        "{e:?}"
    );
}

#[test]
fn a_named_gate_breaches_on_the_name_that_got_slower_only() {
    let base = run("base", &[("login", 100, 2_000), ("search", 100, 5_000)]);
    let cand = run("cand", &[("login", 100, 2_050), ("search", 100, 50_000)]);
    let steps = base.run.steps.len();
    let c = compare_runs(vec![base, cand], None, Threshold::default()).unwrap();
    let judged = judge(
        &c,
        &gates(&[
            "p99[search]>5%",
            "p99[login]>5%",
            "p99>5%",
            "ok_rate[search]>5%",
        ]),
    )
    .unwrap();
    let search = &judged[0];
    assert_eq!(search.compared, steps);
    assert_eq!(search.breaches.len(), steps, "{search:?}");
    assert!(
        search.breaches[0]
            .starts_with("cand at 100 req/s (step 1): p99[search] 50 ms against 5.0 ms (+"),
        "{search:?}"
    );
    assert!(
        search
            .sentence()
            .starts_with("--regression p99[search]>5%: breached at cand at")
    );
    // login moved by 50 µs: under the 5 % and under the floor, it held on every step.
    assert_eq!((judged[1].compared, judged[1].breaches.len()), (steps, 0));
    assert_eq!(
        judged[1].sentence(),
        format!("--regression p99[login]>5%: held on {steps} steps")
    );
    // The step's own p99 (the golden run's, the same on both sides) held; search served as much.
    assert!(
        judged[2].breaches.is_empty() && judged[2].compared > 0,
        "{judged:?}"
    );
    assert!(judged[3].breaches.is_empty(), "{judged:?}");
}

#[test]
fn a_change_under_what_the_histogram_resolves_never_breaches_even_at_zero_percent() {
    // At 1 s a bucket is about half a millisecond wide: 0.4 ms more is within two buckets.
    let base = run("base", &[("slow", 100, 1_000_000)]);
    let cand = run("cand", &[("slow", 100, 1_000_400)]);
    let c = compare_runs(vec![base, cand], None, Threshold::default()).unwrap();
    let j = judge(&c, &gates(&["p99[slow]>0%"])).unwrap();
    assert!(j[0].compared > 0 && j[0].breaches.is_empty(), "{j:?}");
    // 5 ms more is beyond it.
    let base = run("base", &[("slow", 100, 1_000_000)]);
    let cand = run("cand", &[("slow", 100, 1_005_000)]);
    let c = compare_runs(vec![base, cand], None, Threshold::default()).unwrap();
    let j = judge(&c, &gates(&["p99[slow]>0%"])).unwrap();
    assert!(!j[0].breaches.is_empty(), "{j:?}");
}

#[test]
fn an_untrusted_step_on_either_side_is_not_judged() {
    let base = run("base", &[("search", 100, 5_000)]);
    let mut cand = run("cand", &[("search", 100, 50_000)]);
    for s in &mut cand.run.steps {
        s.trust = Verdict::Invalid;
    }
    let c = compare_runs(vec![base, cand], None, Threshold::default()).unwrap();
    let j = judge(&c, &gates(&["p99[search]>5%"])).unwrap();
    assert_eq!((j[0].compared, j[0].breaches.len()), (0, 0));
    assert!(
        j[0].sentence().contains("nothing to judge"),
        "{}",
        j[0].sentence()
    );
}

#[test]
fn a_name_no_run_has_is_refused_and_one_side_s_name_is_not() {
    let base = run("base", &[("login", 100, 2_000)]);
    let cand = run("cand", &[("login", 100, 2_000), ("new", 10, 1_000)]);
    let c = compare_runs(vec![base, cand], None, Threshold::default()).unwrap();
    let e = judge(&c, &gates(&["p99[logn]>5%"]))
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "--regression 'p99[logn]>5%': no run compared has a request named 'logn' (their names: login, new)"
    );
    // A name only the candidate has compares with nothing: judged on no step, not refused.
    let j = judge(&c, &gates(&["p99[new]>5%"])).unwrap();
    assert_eq!(j[0].compared, 0);
    let c = compare_runs(
        vec![run("a", &[]), run("b", &[])],
        None,
        Threshold::default(),
    )
    .unwrap();
    let e = judge(&c, &gates(&["failed[x]>1%"]))
        .unwrap_err()
        .to_string();
    assert!(
        e.ends_with("(their requests are unnamed: one URL or --urls)"),
        "{e}"
    );
}
