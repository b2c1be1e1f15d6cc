//! Tests of the threshold grammar (`condition.rs`): spellings, errors, censored percentiles, words.
use super::*;
use proptest::prelude::*;

/// The help's list of metrics as users read it (built from the catalogue).
const METRICS: &str = "p50, p90, p99, p999, max, mean, failed, errors, ok_rate or requests";

fn observed() -> Observed {
    Observed {
        latency_ms: Some([1.0, 5.0, 812.0, 1500.0, 2000.0, 40.0]),
        latency_lower_bound: [false; 6],
        failed_pct: 12.5,
        errors_pct: 2.0,
        ok_rate: 412.0,
        demanded_rate: Some(500.0),
        ..Default::default()
    }
}

fn err(input: &str) -> (String, usize, String) {
    let e = parse(input).unwrap_err();
    (e.to_string(), e.column, e.pointer())
}

#[test]
fn the_spellings_people_write_parse() {
    let c = parse("p99>500ms").unwrap();
    assert_eq!(c.metric, Metric::Latency(Latency::P99));
    assert_eq!(c.cmp, Cmp::Gt);
    assert_eq!(c.threshold.canonical(), 500.0);
    for (text, canonical, ms) in [
        ("p999 <= 200ms", "p999<=200ms", 200.0),
        ("p99.9<0.2s", "p999<0.2s", 200.0),
        ("  mean >= 2 s ", "mean>=2s", 2000.0),
        ("max>800us", "max>800us", 0.8),
        ("P50<50µs", "p50<50us", 0.05),
        ("failed>5%", "failed>5%", 5.0),
        ("errors < 1 %", "errors<1%", 1.0),
        ("ok_rate<95%", "ok_rate<95%", 95.0),
        ("ok_rate>=1000req/s", "ok_rate>=1000/s", 1000.0),
        ("avg>.5ms", "mean>0.5ms", 0.5),
    ] {
        let c = parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
        assert_eq!(c.to_string(), canonical);
        assert_eq!(c.threshold.canonical(), ms, "{text}");
    }
}

#[test]
fn a_bad_expression_is_pointed_at() {
    let (msg, col, pointer) = err("p99>5x");
    assert_eq!(msg, "unknown unit 'x' at column 6: p99 takes ms, s or us");
    assert_eq!(col, 6);
    assert_eq!(pointer, "    p99>5x\n         ^");
    assert_eq!(
        err("p98>5ms").0,
        format!("unknown metric 'p98' at column 1: use {METRICS}")
    );
    assert_eq!(
        err("p99 5ms").0,
        "expected <, <=, > or >= after p99, found '5' at column 5"
    );
    assert_eq!(
        err("p99=>5ms").0,
        "expected <, <=, > or >= after p99, found '=>' at column 4"
    );
    assert_eq!(
        err("p99>").0,
        "expected a number after '>', found the end at column 5"
    );
    assert_eq!(
        err("p99>-5ms").0,
        "expected a number after '>', found '-' at column 5"
    );
    assert_eq!(
        err("p99>1.2.3ms").0,
        "expected a number after '>', found '1.2.3' at column 5"
    );
    assert_eq!(
        err("p99>5").0,
        "p99 needs a unit at column 6: p99 takes ms, s or us"
    );
    let (msg, col, pointer) = err("failed > 5ms");
    assert_eq!(
        msg,
        "'ms' is not a unit of failed at column 11: use % (a share of requests)"
    );
    assert_eq!(
        (col, pointer.lines().nth(1).unwrap()),
        (11, "              ^^")
    );
    assert_eq!(
        err("ok_rate<95ms").0,
        "'ms' is not a unit of ok_rate at column 11: use % (of the demanded rate) or /s"
    );
    let (msg, _, pointer) = err("failed>150%");
    assert_eq!(
        msg,
        "150% is over 100% at column 8: failed is a share of requests"
    );
    assert_eq!(pointer.lines().nth(1).unwrap(), "           ^^^^");
    assert_eq!(
        err("p99>5ms,failed>1%").0,
        "unexpected ',failed>1%' after the comparison at column 8: one comparison per flag: repeat the flag for more"
    );
    assert_eq!(
        err("  ").0,
        "empty expression at column 1: write e.g. p99>500ms"
    );
    assert_eq!(
        err(">5ms").0,
        format!("expected a metric, found '>' at column 1: use {METRICS}")
    );
}

#[test]
fn exact_values_compare_both_ways() {
    let o = observed();
    let yes = |s: &str| parse(s).unwrap().evaluate(&o);
    assert_eq!(yes("p99>500ms"), Truth::True);
    assert_eq!(yes("p99<500ms"), Truth::False);
    assert_eq!(yes("p99>=812ms"), Truth::True);
    assert_eq!(yes("p99<=0.812s"), Truth::True);
    assert_eq!(yes("failed>5%"), Truth::True);
    assert_eq!(yes("errors>5%"), Truth::False);
    assert_eq!(yes("ok_rate<95%"), Truth::True); // 82.4 % of demanded
    assert_eq!(yes("ok_rate>400/s"), Truth::True);
    assert_eq!(yes("mean>40000us"), Truth::False);
}

#[test]
fn a_censored_percentile_proves_a_breach_but_never_a_pass() {
    let mut o = observed();
    o.latency_ms.as_mut().unwrap()[Latency::P99.index()] = 1000.0;
    o.latency_lower_bound[Latency::P99.index()] = true;
    let t = |s: &str| parse(s).unwrap().evaluate(&o);
    // The true p99 is at least 1000 ms.
    assert_eq!(t("p99>500ms"), Truth::True);
    assert_eq!(t("p99>=1s"), Truth::True);
    assert_eq!(t("p99>2s"), Truth::Unknown);
    assert_eq!(t("p99<50ms"), Truth::False);
    assert_eq!(
        t("p99<2s"),
        Truth::Unknown,
        "a lower bound is no evidence of passing"
    );
    assert_eq!(
        parse("p99>500ms").unwrap().holds_because(&o).unwrap(),
        "p99 ≥1000 ms > 500 ms"
    );
    assert_eq!(parse("p99>2s").unwrap().holds_because(&o), None);
}

#[test]
fn what_was_seen_is_said_in_words() {
    let o = observed();
    let because = |s: &str| parse(s).unwrap().holds_because(&o);
    assert_eq!(because("p99>500ms").unwrap(), "p99 812 ms > 500 ms");
    assert_eq!(because("failed>5%").unwrap(), "failed 12.5% > 5%");
    assert_eq!(
        because("ok_rate<95%").unwrap(),
        "ok_rate 412/s = 82.4% of 500/s demanded < 95%"
    );
    assert_eq!(because("ok_rate>100/s").unwrap(), "ok_rate 412/s > 100/s");
    assert_eq!(because("p99<500ms"), None);
}

#[test]
fn ok_rate_of_demanded_is_unknown_without_a_demanded_rate() {
    let mut o = observed();
    o.demanded_rate = None;
    let c = parse("ok_rate<95%").unwrap();
    assert!(c.needs_demanded_rate());
    assert_eq!(c.evaluate(&o), Truth::Unknown);
    assert!(!parse("ok_rate<95/s").unwrap().needs_demanded_rate());
}

#[test]
fn a_step_without_latency_decides_no_latency_threshold() {
    let mut o = observed();
    o.latency_ms = None;
    assert_eq!(parse("p99>500ms").unwrap().evaluate(&o), Truth::Unknown);
    assert_eq!(parse("p99<500ms").unwrap().evaluate(&o), Truth::Unknown);
    assert_eq!(parse("failed>5%").unwrap().evaluate(&o), Truth::True);
}

#[test]
fn observed_from_a_step_result() {
    let mut s = shared::metrics::Snapshot::default();
    s.counters.requests = 100;
    s.counters.replies = 90;
    s.counters.ok = 80;
    s.counters.given_up = 9;
    s.counters
        .record_error(shared::metrics::ErrorClass::ConnReset);
    for _ in 0..9 {
        s.counters
            .record_error(shared::metrics::ErrorClass::ClientTimeout);
        s.hist.latency.record(1_000_000).unwrap();
        s.hist.censored.record(1_000_000).unwrap();
    }
    for _ in 0..80 {
        s.hist.latency.record(20_000).unwrap();
    }
    let r = crate::step::summarize(&crate::step::StepInput {
        number: 1,
        model: shared::plan::LoadModel::Requests,
        value: 50.0,
        demanded_rate: Some(50.0),
        duration: std::time::Duration::from_secs(2),
        total: &s,
        series: &[],
        agents: vec![],
        aborted: false,
        mark_lost: true,
        start_skew: None,
        ok_status: &shared::status::StatusSet::default(),
        baseline_p50_ms: None,
    });
    let o = Observed::of(&r);
    assert_eq!(o.ok_rate, 40.0);
    assert_eq!(o.demanded_rate, Some(50.0));
    assert_eq!(o.failed_pct, 20.0);
    assert_eq!(o.errors_pct, 10.0);
    let ms = o.latency_ms.unwrap();
    assert!((ms[Latency::P50.index()] - 20.0).abs() < 0.1);
    assert!(ms[Latency::P99.index()] >= 1000.0);
    assert_eq!(
        o.latency_lower_bound,
        [false, true, true, true, true, true],
        "{:?}",
        r.latency_ms
    );
}

fn condition() -> impl Strategy<Value = Condition> {
    let metric = prop_oneof![
        proptest::sample::select(Latency::ALL.to_vec()).prop_map(Metric::Latency),
        Just(Metric::Failed),
        Just(Metric::Errors),
        Just(Metric::OkRate),
        Just(Metric::Requests),
    ];
    let cmp = proptest::sample::select(vec![Cmp::Lt, Cmp::Le, Cmp::Gt, Cmp::Ge]);
    let name = proptest::option::of("[A-Za-z0-9_.-]{1,12}");
    (
        metric,
        name,
        cmp,
        0u32..100_000,
        any::<proptest::sample::Index>(),
    )
        .prop_map(|(metric, name, cmp, n, i)| Condition {
            metric,
            request: name.filter(|_| metric.takes_a_name()),
            cmp,
            threshold: Threshold {
                value: f64::from(n % 10_000) / 100.0,
                unit: *i.get(metric.units()),
            },
        })
}

proptest! {
    #[test]
    fn the_canonical_spelling_parses_back(c in condition()) {
        prop_assert_eq!(parse(&c.to_string()).unwrap(), c);
    }

    #[test]
    fn any_text_parses_or_points_inside_it(s in "\\PC{0,24}") {
        if let Err(e) = parse(&s) {
            let chars = s.chars().count().max(1);
            prop_assert!(e.column >= 1 && e.column <= chars + 1, "{:?} column {}", s, e.column);
            let _ = e.pointer();
        }
    }
}

#[test]
fn a_request_s_name_in_brackets_parses_and_prints_back() {
    let c = parse("p99[login]<200ms").unwrap();
    assert_eq!(c.metric, Metric::Latency(Latency::P99));
    assert_eq!(c.request.as_deref(), Some("login"));
    assert_eq!(c.subject(), "p99[login]");
    for (text, canonical) in [
        ("p99[login]<200ms", "p99[login]<200ms"),
        ("failed [ search ] < 1 %", "failed[search]<1%"),
        ("ok_rate[items]>100/s", "ok_rate[items]>100/s"),
        ("ok_rate[items]>=90%", "ok_rate[items]>=90%"),
        ("p99.9[a.b-c_1]<1s", "p999[a.b-c_1]<1s"),
        ("MAX[Login]>2s", "max[Login]>2s"),
        ("requests[login] >= 1000", "requests[login]>=1000"),
        ("requests>0", "requests>0"),
    ] {
        let c = parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
        assert_eq!(c.to_string(), canonical);
        assert_eq!(parse(canonical).unwrap(), c);
    }
}

#[test]
fn a_bad_name_is_pointed_at() {
    let (msg, col, pointer) = err("errors[login]>1%");
    assert_eq!(
        msg,
        "errors takes no request's name at column 7: a request's transport errors count in its failed share: use failed[name]"
    );
    assert_eq!(
        (col, pointer.lines().nth(1).unwrap()),
        (7, "          ^^^^^^^")
    );
    assert_eq!(
        err("p99[]<1ms").0,
        "expected a request's name in [ ], found ']' at column 5: write the name as the plan's [[request]] has it, e.g. p99[login]<200ms"
    );
    assert_eq!(
        err("p99[login<1ms").0,
        "expected ']' after the request's name, found '<' at column 10: write the name as the plan's [[request]] has it, e.g. p99[login]<200ms"
    );
    assert_eq!(err("p99[log in]<1ms").1, 9);
    assert_eq!(
        err("requests[a]>5ms").0,
        "'ms' is not a unit of requests at column 14: use a bare count (no unit)"
    );
    assert_eq!(
        err("p99[a]<5").0,
        "p99 needs a unit at column 9: p99 takes ms, s or us"
    );
}

/// A step of three named requests where only `search` is slow and failing, and `idle` had nothing
/// due.
fn three_names() -> Observed {
    let name = |p99: f64, failed_pct: f64, ok_rate: f64, due: u64| Observed {
        latency_ms: (due > 0).then_some([1.0, 2.0, p99, p99, p99, 1.5]),
        failed_pct,
        ok_rate,
        demanded_rate: Some(100.0),
        requests: due,
        samples: due,
        due,
        ..Default::default()
    };
    Observed {
        names: vec![
            ("login".into(), name(3.0, 0.0, 100.0, 200)),
            ("search".into(), name(480.0, 4.0, 96.0, 200)),
            ("idle".into(), name(0.0, 0.0, 0.0, 0)),
        ],
        ..observed()
    }
}

#[test]
fn a_named_condition_reads_its_request_s_row_alone() {
    let o = three_names();
    let t = |s: &str| parse(s).unwrap().evaluate(&o);
    // The step's p99 is 812 ms; each name's is its own.
    assert_eq!(t("p99>500ms"), Truth::True);
    assert_eq!(t("p99[search]>100ms"), Truth::True);
    assert_eq!(t("p99[login]>100ms"), Truth::False);
    assert_eq!(t("p99[login]<100ms"), Truth::True);
    assert_eq!(t("failed[search]>1%"), Truth::True);
    assert_eq!(t("failed[login]>1%"), Truth::False);
    assert_eq!(t("ok_rate[search]<97%"), Truth::True);
    assert_eq!(t("ok_rate[login]>=100/s"), Truth::True);
    assert_eq!(t("requests[login]>=200"), Truth::True);
    assert_eq!(t("requests[login]>200"), Truth::False);
    // A name with nothing due tells nothing, either way: no breach, no pass.
    for c in [
        "p99[idle]>1ms",
        "p99[idle]<1ms",
        "failed[idle]<1%",
        "requests[idle]<1",
    ] {
        assert_eq!(t(c), Truth::Unknown, "{c}");
        assert_eq!(parse(c).unwrap().holds_because(&o), None, "{c}");
    }
    // So does a name the step does not have (a config check refuses it before any load).
    assert_eq!(t("p99[nobody]>1ms"), Truth::Unknown);
    let because = |s: &str| parse(s).unwrap().holds_because(&o).unwrap();
    assert_eq!(because("p99[search]>100ms"), "p99[search] 480 ms > 100 ms");
    assert_eq!(because("failed[search]>1%"), "failed[search] 4% > 1%");
    assert_eq!(
        because("ok_rate[search]<97%"),
        "ok_rate[search] 96/s = 96% of 100/s demanded < 97%"
    );
    assert_eq!(
        because("requests[search]>=100"),
        "requests[search] 200 >= 100"
    );
}

#[test]
fn observed_names_come_from_the_step_s_rows_with_their_share_of_the_demanded_rate() {
    use shared::metrics::NameStats;
    let stats = |ok: u64, given_up: u64, us: u64| {
        let mut n = NameStats::default();
        n.counters.requests = ok + given_up;
        n.counters.replies = ok;
        n.counters.ok = ok;
        n.counters.status = [0, ok, 0, 0, 0];
        n.counters.given_up = given_up;
        for _ in 0..ok + given_up {
            n.latency.record(us).unwrap();
        }
        n
    };
    let names = ["login".to_string(), "search".to_string()];
    let rows = crate::step::per_request::rows(
        &names,
        &[1, 3],
        &[stats(100, 0, 2_000), stats(290, 10, 300_000)],
        1.0,
    );
    let mut r = crate::run_file::RunFile::parse(
        include_str!("../../tests/golden/run.json"),
        std::path::Path::new("run.json"),
    )
    .unwrap()
    .steps[0]
        .clone();
    r.demanded_rate = Some(400.0);
    r.per_request = rows;
    let o = Observed::of(&r);
    let (login, search) = (&o.names[0].1, &o.names[1].1);
    assert_eq!(o.names[0].0, "login");
    // A quarter and three quarters of the 400/s demanded, by weight.
    assert_eq!(
        (login.demanded_rate, search.demanded_rate),
        (Some(100.0), Some(300.0))
    );
    assert_eq!(
        (search.requests, search.samples, search.due),
        (300, 300, 300)
    );
    // Its given-up requests' ages are among its latencies: every statistic a lower bound.
    assert_eq!(search.latency_lower_bound, [true; 6]);
    assert_eq!(login.latency_lower_bound, [false; 6]);
    let t = |s: &str| parse(s).unwrap().evaluate(&o);
    assert_eq!(t("p99[search]>100ms"), Truth::True);
    assert_eq!(
        t("p99[search]<1s"),
        Truth::Unknown,
        "a lower bound proves no pass"
    );
    assert_eq!(t("p99[login]<10ms"), Truth::True);
    assert_eq!(t("ok_rate[search]<97%"), Truth::True); // 290 of 300/s
}
