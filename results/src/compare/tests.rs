//! The comparison model against runs made from the golden run.json: each test changes what it
//! compares, so every expected class and sentence follows from a change made here.
use std::path::Path;

use super::*;

const GOLDEN: &str = include_str!("../../tests/golden/run.json");

/// The golden run (requests model, 100..600 req/s, kept up to 400), labelled.
fn run(label: &str) -> Labelled {
    Labelled {
        label: label.to_string(),
        source: format!("results/{label}"),
        run: RunFile::parse(GOLDEN, Path::new("run.json")).unwrap(),
    }
}

fn compared(runs: Vec<Labelled>) -> Comparison {
    compare(runs, None, Threshold::default()).unwrap()
}

fn metric_index(name: &str) -> usize {
    METRICS.iter().position(|m| m.name == name).unwrap()
}

/// The cell of run `i` at the row whose value is `value`, for metric `name`.
fn cell<'a>(c: &'a Comparison, value: f64, i: usize, name: &str) -> &'a CellEntry {
    let row = c.steps.iter().find(|r| r.value == value).unwrap();
    &row.runs[i].as_ref().unwrap().cells[metric_index(name)]
}

#[test]
fn steps_are_joined_on_their_value_whatever_their_order_or_number() {
    let a = run("a");
    let mut b = run("b");
    // b ran 300, 100 and 700 only, in that order: rows follow the value, not the order run.
    b.run
        .steps
        .retain(|s| s.step_value == 100.0 || s.step_value == 300.0);
    b.run.steps.reverse();
    for (n, s) in b.run.steps.iter_mut().enumerate() {
        s.number = n as u32 + 1;
    }
    let mut extra = b.run.steps[0].clone();
    extra.step_value = 700.0;
    extra.demanded_rate = Some(700.0);
    extra.number = 3;
    b.run.steps.push(extra);
    let c = compared(vec![a, b]);
    let values: Vec<f64> = c.steps.iter().map(|r| r.value).collect();
    assert_eq!(values, [100.0, 200.0, 300.0, 400.0, 500.0, 600.0, 700.0]);
    let has = |i: usize| -> Vec<bool> { c.steps.iter().map(|r| r.runs[i].is_some()).collect() };
    assert_eq!(has(0), [true, true, true, true, true, true, false]);
    assert_eq!(has(1), [true, false, true, false, false, false, true]);
    // b's step at 300 is its first step, and equals a's: every change is nothing (and neither has
    // a server monitor to count core-seconds with).
    let row = c.steps.iter().find(|r| r.value == 300.0).unwrap();
    assert_eq!(row.runs[1].as_ref().unwrap().step, 1);
    assert!(
        row.runs[1]
            .as_ref()
            .unwrap()
            .cells
            .iter()
            .zip(METRICS)
            .all(|(x, m)| x.class
                == if m.name == crate::quantity::OK_PER_CORE_S.key {
                    Change::Missing
                } else {
                    Change::Noise
                })
    );
    assert!(
        row.runs[0]
            .as_ref()
            .unwrap()
            .cells
            .iter()
            .all(|x| x.class == Change::Baseline)
    );
    // 700 has no baseline step: nothing to compare it with.
    assert_eq!(cell(&c, 700.0, 1, "p99_ms").class, Change::Missing);
    assert!(
        c.banners
            .contains(&"b has no step at 200, 400, 500, 600 req/s.".to_string())
    );
    assert!(
        c.banners
            .contains(&"a has no step at 700 req/s.".to_string())
    );
}

#[test]
fn a_value_run_twice_is_joined_time_for_time() {
    let a = run("a");
    let mut b = run("b");
    let mut again = b.run.steps[0].clone();
    again.number = 7;
    again.ok_rate = 50.0;
    b.run.steps.push(again);
    let c = compared(vec![a, b]);
    let at_100: Vec<&StepRow> = c.steps.iter().filter(|r| r.value == 100.0).collect();
    assert_eq!(at_100.len(), 2);
    assert_eq!(at_100[1].runs[1].as_ref().unwrap().step, 7);
    assert!(at_100[1].runs[0].is_none());
}

#[test]
fn a_slower_candidate_is_worse_and_a_regression_and_a_small_change_is_noise() {
    let a = run("a");
    let mut b = run("b");
    b.run.steps[2].latency_ms.p99 *= 2.0; // 300 req/s
    b.run.steps[3].latency_ms.p99 *= 1.03; // 400 req/s
    b.run.steps[4].ok_rate *= 0.5; // 500 req/s
    let c = compared(vec![a, b]);
    let p99 = cell(&c, 300.0, 1, "p99_ms");
    assert_eq!((p99.class, p99.delta_pct), (Change::Worse, Some(100.0)));
    assert_eq!(cell(&c, 400.0, 1, "p99_ms").class, Change::Noise);
    assert_eq!(cell(&c, 500.0, 1, "ok_rate").class, Change::Worse);
    let found: Vec<(&str, f64, &str)> = c
        .regressions
        .iter()
        .map(|r| (r.label.as_str(), r.value, r.metric))
        .collect();
    assert_eq!(found, [("b", 300.0, "p99_ms"), ("b", 500.0, "ok_rate")]);
    assert_eq!(
        c.regressions[0].sentence(),
        "b at 300 req/s (step 3): p99_ms 3.6 ms against 1.8 ms (+100.0%)"
    );
    assert_eq!(
        c.regressions_by_step()[1],
        "b at 500 req/s (step 5): ok_rate 200/s against 401/s (-50.0%)"
    );
    // The other way round the same changes are improvements, and nothing regressed.
    let c = compare(
        vec![run("a"), {
            let mut b = run("b");
            b.run.steps[2].latency_ms.p99 *= 2.0;
            b
        }],
        Some("b"),
        Threshold::default(),
    )
    .unwrap();
    assert_eq!(c.baseline, "b");
    assert_eq!(cell(&c, 300.0, 0, "p99_ms").class, Change::Better);
    assert!(c.regressions.is_empty(), "{:?}", c.regressions);
}

#[test]
fn an_untrusted_step_is_marked_and_never_a_regression() {
    let a = run("a");
    let mut b = run("b");
    b.run.steps[2].latency_ms.p99 *= 2.0;
    b.run.steps[2].trust = Verdict::Invalid;
    let c = compared(vec![a, b]);
    let p99 = cell(&c, 300.0, 1, "p99_ms");
    assert_eq!(p99.class, Change::Worse);
    assert!(p99.untrusted);
    assert!(!cell(&c, 200.0, 1, "p99_ms").untrusted);
    assert!(c.regressions.is_empty(), "{:?}", c.regressions);
    // The baseline's untrusted step marks the candidate's cell in that row too.
    let mut a = run("a");
    a.run.steps[1].trust = Verdict::Invalid;
    let c = compared(vec![a, run("b")]);
    assert!(cell(&c, 200.0, 1, "ok_rate").untrusted && cell(&c, 200.0, 0, "ok_rate").untrusted);
}

#[test]
fn a_lower_bound_is_marked_and_decides_only_one_way() {
    let a = run("a");
    let mut b = run("b");
    let s = &mut b.run.steps[5];
    s.latency_ms.p99 = 2000.0;
    s.latency_ms.censored = true;
    s.latency_ms.lower_bounds.set(3); // p99
    s.latency_ms.p50 *= 2.0;
    let c = compared(vec![a, b]);
    let p99 = cell(&c, 600.0, 1, "p99_ms");
    assert!(p99.lower_bound && !p99.baseline_lower_bound);
    assert_eq!(p99.class, Change::Worse);
    assert_eq!(c.regressions.len(), 2);
    // One line for the step, its changes in the table's order, the bound written as such.
    assert_eq!(
        c.regressions_by_step(),
        [
            "b at 600 req/s (step 6): p50_ms 505 ms against 253 ms (+100.0%); p99_ms ≥2.0 s against 498 ms (+301.9%)"
        ]
    );
    // As the baseline, its bound cannot be beaten by a higher exact value.
    let mut a = run("a");
    a.run.steps[5].latency_ms = c.inputs()[1].run.steps[5].latency_ms;
    let mut b = run("b");
    b.run.steps[5].latency_ms.p99 = 3000.0;
    let c = compared(vec![a, b]);
    let p99 = cell(&c, 600.0, 1, "p99_ms");
    assert!(p99.baseline_lower_bound && !p99.lower_bound);
    assert_eq!(p99.class, Change::Undecided);
    assert!(c.regressions.is_empty());
}

#[test]
fn labels_must_be_distinct_non_empty_one_line_and_the_baseline_known() {
    let e = compare(vec![run("a"), run("a")], None, Threshold::default())
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "two runs are labelled `a` (results/a and results/a); give each its own --label"
    );
    let mut empty = run("b");
    empty.label = " ".into();
    let e = compare(vec![run("a"), empty], None, Threshold::default()).unwrap_err();
    assert!(
        e.to_string().contains("results/b: its label is empty"),
        "{e}"
    );
    let e = compare(vec![run("a"), run("x\ty")], None, Threshold::default()).unwrap_err();
    assert!(e.to_string().contains("x\\ty"), "{e}");
    let e = compare(vec![run("a"), run("b")], Some("c"), Threshold::default()).unwrap_err();
    assert_eq!(
        e.to_string(),
        "--baseline c: no run is labelled so (the labels are `a`, `b`)"
    );
    let e = compare(vec![run("a")], None, Threshold::default()).unwrap_err();
    assert!(e.to_string().contains("at least two runs (got 1)"), "{e}");
}

#[test]
fn plans_that_differ_are_said_in_a_banner_not_refused() {
    let c = compared(vec![run("a"), run("b")]);
    assert!(c.banners.is_empty(), "{:?}", c.banners);
    let mut b = run("b");
    b.run.plan.step_duration_s = Some(5.0);
    b.run.plan.requests[0].url = "http://127.0.0.1:1/api/v2?x=1".into();
    b.run.tool.version = "9.9.9".into();
    b.run.agents.push(b.run.agents[0].clone());
    b.run.status = crate::run_file::RunStatus::Aborted;
    let mut d = run("d");
    d.run.plan.step_duration_s = Some(5.0);
    let c = compared(vec![run("a"), b, d]);
    assert_eq!(
        c.banners,
        [
            "The plans differ in step length: a 1 s; b, d 5 s.",
            "The plans differ in requests (method and path): a, d GET /; b GET /api/v2?x=1.",
            "The plans differ in agent count: a, d 1; b 2.",
            "The plans differ in stampede version: a, d 0.1.0; b 9.9.9.",
            "b's run did not complete (status aborted): the steps it did not reach are missing.",
        ]
    );
}

#[test]
fn a_closed_loop_beside_an_open_model_is_said_and_the_axis_is_the_baselines() {
    let mut a = run("a");
    a.run.plan.model = "concurrency".into();
    let c = compared(vec![a, run("b")]);
    assert_eq!(c.axis, "connections");
    assert!(
        c.banners
            .iter()
            .any(|b| b.starts_with("The step values are different quantities: a count")),
        "{:?}",
        c.banners
    );
    assert_eq!(compared(vec![run("a"), run("b")]).axis, "dem_req_rate");
}

#[test]
fn every_run_has_its_headline_from_its_summary() {
    let mut b = run("b");
    b.run.summary = Some(crate::step::summarize_run(&b.run.steps[..3]));
    let mut none = run("none");
    none.run.steps.clear();
    none.run.summary = None;
    let c = compared(vec![run("a"), b, none]);
    let lines: Vec<&str> = c
        .runs
        .iter()
        .map(|r| r.headline.sentence.as_str())
        .collect();
    assert_eq!(
        lines,
        [
            "kept up to 400 req/s (p99 4.6 ms)",
            "kept up to 300 req/s (p99 1.8 ms)",
            "no step ran"
        ]
    );
    assert_eq!(c.runs[0].headline.kept_up_to, Some(400.0));
    // b kept up to 300 where the baseline kept up to 400; a run without steps, to nothing.
    let vs: Vec<Option<f64>> = c
        .runs
        .iter()
        .map(|r| r.headline.kept_up_vs_baseline_pct)
        .collect();
    assert_eq!(vs, [None, Some(-25.0), None]);
    assert!(c.runs[0].baseline && !c.runs[1].baseline);
}

#[test]
fn the_tsv_is_autobench_shaped_with_every_run_suffixed_by_its_label() {
    let mut b = run("b");
    b.run.steps.truncate(2);
    let c = compared(vec![run("a"), b]);
    let tsv = c.tsv();
    // The steps, then a blank line and the ranking's commented block.
    let (steps, ranking) = tsv.split_once("\n\n").unwrap();
    let lines: Vec<Vec<&str>> = steps.lines().map(|l| l.split('\t').collect()).collect();
    let header = &lines[0];
    let steps_tsv = include_str!("../../tests/golden/steps.tsv");
    let golden: Vec<Vec<&str>> = steps_tsv.lines().map(|l| l.split('\t').collect()).collect();
    let width = golden[0].len() - 1;
    assert_eq!(header.len(), 1 + 2 * width);
    assert_eq!(header[0], "dem_req_rate");
    assert_eq!(
        &header[1..4],
        ["req_rate_a", "con_rate_a", "min_rep_rate_a"]
    );
    assert!(header.contains(&"ok_rate_b") && header.contains(&"p99_ms_a"));
    // Every run's cells are its steps.tsv cells, in its column order; b has nothing past 200.
    assert_eq!(lines.len(), golden.len());
    for (row, g) in lines[1..].iter().zip(&golden[1..]) {
        assert_eq!(row[0], g[0]);
        assert_eq!(&row[1..=width], &g[1..]);
    }
    assert_eq!(&lines[2][1 + width..], &golden[2][1..]);
    assert!(lines[3][1 + width..].iter().all(|c| c.is_empty()));
    let ranking: Vec<&str> = ranking.lines().collect();
    assert_eq!(ranking[0], "# ranking, best first");
    assert_eq!(
        ranking[1],
        format!("# {}", ranking::COLUMNS.join("\t")),
        "{tsv}"
    );
    // Neither names a knee; both summaries say kept up to 400, but a ran to 600 and b to 200, so
    // a's knee lies further. b's kept-up step is not among its steps: no trust there.
    assert!(ranking[2].starts_with("# 1\ta\t\t\t400\t4.563\t"), "{tsv}");
    // Neither is a search: no max rate, no search status.
    assert!(ranking[2].ends_with("\tvalid\t0\t\t"), "{tsv}");
    assert!(ranking[3].starts_with("# 2\tb\t\t\t400\t"), "{tsv}");
    assert!(ranking[3].ends_with("\t\t0\t\t"), "{tsv}");
    assert_eq!(ranking.len(), 4);
}

#[test]
fn a_monitored_run_s_columns_are_suffixed_with_its_monitor_and_its_label() {
    let mut b = run("b");
    b.run.monitors = vec![monitor::MonitorInfo {
        name: "web".into(),
        hostname: "web.example".into(),
        watching: "process nginx (3 pids)".into(),
        cores: monitor::Cores {
            online: 2,
            cpuset: None,
            quota: None,
        },
        machine_id: "ab12".into(),
    }];
    b.run.steps[1].server_monitors = vec![crate::example_server("web", 98.0, 1.0)];
    let tsv = compared(vec![run("a"), b]).tsv();
    let lines: Vec<Vec<&str>> = tsv.lines().map(|l| l.split('\t').collect()).collect();
    let at = lines[0]
        .iter()
        .position(|h| *h == "srv_cpu_pct_web_b")
        .expect("the monitor's column, suffixed with it and the run's label");
    assert!(
        !lines[0].iter().any(|h| h.ends_with("_web_a")),
        "a had no monitor"
    );
    assert_eq!((lines[1][at], lines[2][at]), ("", "98"));
}

fn monitor(name: &str) -> monitor::MonitorInfo {
    monitor::MonitorInfo {
        name: name.into(),
        hostname: "h".into(),
        watching: "pid 1".into(),
        cores: monitor::Cores {
            online: 1,
            cpuset: None,
            quota: None,
        },
        machine_id: "m".into(),
    }
}

#[test]
fn each_target_s_own_server_is_one_column_per_target_the_shared_ones_suffixed() {
    use monitor::step::Watches;
    let with_own = |label: &str, cpu: f64| {
        let mut r = run(label);
        r.run.monitors = vec![monitor(label), monitor("db")];
        r.run.paired_monitor = Some(label.into());
        let mut own = crate::example_server(label, cpu, 1.0);
        own.watches = Watches::Target;
        let mut db = crate::example_server("db", 5.0, 1.0);
        db.watches = Watches::Shared;
        r.run.steps[0].server_monitors = vec![own, db];
        r
    };
    let tsv = compared(vec![with_own("go", 90.0), with_own("node", 40.0)]).tsv();
    let lines: Vec<Vec<&str>> = tsv.lines().map(|l| l.split('\t').collect()).collect();
    let cpu: Vec<&str> = lines[0]
        .iter()
        .copied()
        .filter(|h| h.starts_with("srv_cpu_pct_"))
        .collect();
    assert_eq!(
        cpu,
        [
            "srv_cpu_pct_go",
            "srv_cpu_pct_db_go",
            "srv_cpu_pct_node",
            "srv_cpu_pct_db_node"
        ]
    );
    let at = |h: &str| lines[0].iter().position(|c| *c == h).unwrap();
    assert_eq!(lines[1][at("srv_cpu_pct_go")], "90");
    assert_eq!(lines[1][at("srv_cpu_pct_node")], "40");
    assert_eq!(lines[1][at("srv_cpu_pct_db_node")], "5");
}

#[test]
fn the_json_carries_its_schema_and_classes_by_name() {
    let mut b = run("b");
    b.run.steps[0].ok_rate = 10.0;
    let c = compared(vec![run("a"), b]);
    let v: serde_json::Value = serde_json::from_str(&c.to_json()).unwrap();
    assert_eq!(v["schema"], COMPARE_SCHEMA);
    assert_eq!(v["baseline"], "a");
    assert_eq!(v["threshold_pct"], 5.0);
    assert_eq!(v["metrics"][0]["better"], "higher");
    let first = &v["steps"][0]["runs"][1]["cells"][metric_index("ok_rate")];
    assert_eq!(first["class"], "worse");
    assert_eq!(first["delta_pct"], -90.0);
    assert_eq!(v["steps"][0]["runs"][0]["cells"][0]["class"], "baseline");
    assert_eq!(v["runs"][1]["headline"]["kept_up_to"], 400.0);
    assert_eq!(v["regressions"][0]["metric"], "ok_rate");
    assert!(v.get("inputs").is_none());
}

#[test]
fn a_threshold_is_a_finite_percentage_of_at_least_zero() {
    assert_eq!(Threshold::parse("5%").unwrap().pct(), 5.0);
    assert_eq!(Threshold::parse(" 2.5 %").unwrap().pct(), 2.5);
    assert_eq!(Threshold::parse("0").unwrap().pct(), 0.0);
    for bad in ["-1%", "five", "inf", "NaN", "%", ""] {
        let e = Threshold::parse(bad).unwrap_err().to_string();
        assert!(e.starts_with(&format!("--threshold {bad}: ")), "{e}");
    }
}

#[test]
fn a_change_below_what_the_measurement_resolves_is_never_a_regression() {
    // Issue 22: every latency 0.09 ms slower, every rate 0.9/s lower, 0.05 % more failures: at a
    // threshold of 0 each is a change in percent, and none is one the measurement resolves.
    let mut b = run("b");
    for s in &mut b.run.steps {
        let l = &mut s.latency_ms;
        for v in [
            &mut l.mean,
            &mut l.p50,
            &mut l.p90,
            &mut l.p99,
            &mut l.p999,
            &mut l.max,
        ] {
            *v += 0.09;
        }
        s.ok_rate -= 0.9;
        s.failed_pct += 0.05;
    }
    let c = compare(
        vec![run("a"), b.clone()],
        None,
        Threshold::try_new(0.0).unwrap(),
    )
    .unwrap();
    assert!(c.regressions.is_empty(), "{:?}", c.regressions_by_step());
    assert_eq!(cell(&c, 100.0, 1, "p50_ms").class, Change::Noise);
    // A change the histogram does resolve is one, at the default threshold too.
    b.run.steps[0].latency_ms.p99 += 1.0;
    let c = compared(vec![run("a"), b]);
    let said: Vec<String> = c.regressions.iter().map(Regression::sentence).collect();
    assert_eq!(said.len(), 1, "{said:?}");
    assert!(
        said[0].starts_with("b at 100 req/s (step 1): p99_ms"),
        "{said:?}"
    );
}

/// The golden run as a closed loop of `connections[i]` connections at step i, each serving
/// `per_conn` × 50 requests/s (at 5, 8 connections serve 2,000 req/s at its kept-up step, 4).
fn closed_loop(label: &str, connections: [f64; 6], per_conn: f64) -> Labelled {
    let mut r = run(label);
    r.run.plan.model = "concurrency".into();
    for (s, c) in r.run.steps.iter_mut().zip(connections) {
        s.model = "concurrency".into();
        s.ok_rate = c * per_conn * 50.0;
        (s.step_value, s.demanded_rate) = (c, None);
    }
    let summary = r.run.summary.as_mut().unwrap();
    summary.kept_up_to = Some(connections[3]);
    r
}

/// Issue 34: a closed loop's "kept up to 8 connections" beside a requests baseline's "400 req/s"
/// read "-98.0% against" it and ranked by 8 against 400 (then by its 32 connections against the
/// baseline's 600 req/s): counts of different things. Runs on different axes are ranked on the
/// rate each served at its kept-up step, and no percent is taken across units.
#[test]
fn runs_on_different_axes_are_ranked_on_the_rate_served_never_a_percent_across_units() {
    let nginx = closed_loop("nginx", [1.0, 2.0, 4.0, 8.0, 16.0, 32.0], 5.0);
    let c = compared(vec![run("requests"), nginx]);
    assert_eq!(c.runs[1].headline.kept_up_vs_baseline_pct, None);
    // nginx served 2,000 req/s at 8 connections; the baseline 399 req/s at 400 req/s.
    let order: Vec<&str> = c.ranking.iter().map(|r| r.label.as_str()).collect();
    assert_eq!(order, ["nginx", "requests"]);
    assert_eq!(c.ranked_on, RankedOn::Served);
    let head = &c.runs[1].headline;
    assert_eq!(head.served_at_kept_up, Some(2000.0));
    // +401.087 %: 2,000 against 399.133.
    assert!(
        head.served_vs_baseline_pct
            .is_some_and(|d| (d - 401.087).abs() < 1e-3),
        "{head:?}"
    );
    // Each run's values stay on its own axis, with the rate served beside them.
    let by = |l: &str| c.ranking.iter().find(|r| r.label == l).unwrap();
    let n = by("nginx");
    assert_eq!(
        (n.axis, n.kept_up_to, n.served),
        ("connections", Some(8.0), Some(2000.0))
    );
    let r = by("requests");
    assert_eq!(
        (r.axis, r.kept_up_to, r.served),
        ("dem_req_rate", Some(400.0), Some(399.133))
    );
    assert_eq!(
        c.runs[0].headline.served_vs_baseline_pct, None,
        "the baseline"
    );
    // Runs on one axis keep their knee order and percent of how far each kept up.
    let same = compared(vec![run("a"), run("b")]);
    assert_eq!(same.ranked_on, RankedOn::Knee);
    assert_eq!(same.runs[1].headline.kept_up_vs_baseline_pct, Some(0.0));
    assert_eq!(same.runs[1].headline.served_vs_baseline_pct, None);
    // The other way round too: a baseline that served more is first.
    let slow = closed_loop("slow", [1.0, 2.0, 4.0, 8.0, 16.0, 32.0], 0.2);
    let c = compared(vec![run("requests"), slow]);
    let order: Vec<&str> = c.ranking.iter().map(|r| r.label.as_str()).collect();
    assert_eq!(order, ["requests", "slow"]);
}

/// The words of a comparison across axes: the ranking's heads name the rate served in req/s and
/// leave the step values' unit to the cells; stdout's line sets the rates served side by side.
#[test]
fn across_axes_the_table_says_each_run_s_unit_and_the_line_the_rates_served() {
    let nginx = closed_loop("nginx", [1.0, 2.0, 4.0, 8.0, 16.0, 32.0], 5.0);
    let c = compared(vec![run("requests"), nginx]);
    let table = c.ranking_table();
    let lines: Vec<&str> = table.lines().collect();
    let heads: Vec<&str> = lines[0]
        .split("  ")
        .map(str::trim)
        .filter(|h| !h.is_empty())
        .collect();
    assert_eq!(
        heads[..6],
        [
            "#",
            "target",
            "served there (req/s)",
            "knee",
            "cause",
            "kept up to"
        ],
        "{table}"
    );
    assert!(!lines[0].contains("(connections)"), "{table}");
    assert!(
        lines[1].contains("2,000") && lines[1].contains("8 connections"),
        "{table}"
    );
    assert!(
        lines[2].contains("399") && lines[2].contains("400 req/s"),
        "{table}"
    );
    assert_eq!(
        c.runs[1].headline.versus("requests"),
        ", served 2,000 req/s there: +401.1% against requests's 399"
    );
    assert!(
        c.ranking[0]
            .sentence
            .ends_with("; served 2,000 req/s there"),
        "{}",
        c.ranking[0].sentence
    );
    let same = compared(vec![run("a"), run("b")]);
    assert_eq!(same.runs[1].headline.versus("a"), ", +0.0% against a");
    assert_eq!(same.runs[0].headline.versus("a"), "");
    assert!(same.ranking_table().starts_with("#  target  knee (req/s)"));
}
