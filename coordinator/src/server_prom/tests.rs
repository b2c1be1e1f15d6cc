//! The Prometheus sources of server metrics without a Prometheus: settings resolved or refused,
//! answers made into a step's view, and one that cannot be reached.
use super::*;

fn given<'a>(
    urls: &'a [String],
    set: Option<&'a str>,
    selector: Option<&'a str>,
    queries: &'a [ServerQueryArg],
) -> Given<'a> {
    Given {
        urls,
        set,
        selector,
        queries,
    }
}

fn urls(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

#[test]
fn a_source_is_named_by_its_target_or_prometheus_and_its_queries_filled() {
    let u = urls(&["http://p:9090", "web=http://p:9090/prom"]);
    let got = resolve(&given(&u, None, Some(r#"job="${name}""#), &[])).unwrap();
    assert_eq!(got[0].name, "prometheus");
    assert_eq!(
        (got[1].name.as_str(), got[1].endpoint.prefix.as_str()),
        ("web", "/prom")
    );
    let cpu = got[1]
        .queries
        .iter()
        .find(|q| q.name == "cpu_cores")
        .unwrap();
    assert_eq!(
        cpu.text,
        r#"sum(rate(node_cpu_seconds_total{mode!~"idle|iowait",job="web"}[${window}])) / sum(rate(node_cpu_seconds_total{job="web"}[${window}])) * count(count by (cpu) (node_cpu_seconds_total{job="web"}))"#
    );
    assert_eq!(got[0].queries.len(), sets::NODE.len());
    assert_eq!(
        got[0].info().watching,
        r#"Prometheus http://p:9090: node queries {job="prometheus"}"#
    );
}

#[test]
fn a_plan_file_query_replaces_the_set_s_of_its_name_or_is_added() {
    let u = urls(&["http://p:9090"]);
    let mine = [
        ServerQueryArg {
            name: "memory_bytes".into(),
            query: "process_resident_memory_bytes{${selector}}".into(),
            unit: None,
        },
        ServerQueryArg {
            name: "gc_pause_s".into(),
            query: "rate(go_gc_duration_seconds_sum[${window}])".into(),
            unit: Some("s/s".into()),
        },
    ];
    let got = resolve(&given(&u, Some("cadvisor"), None, &mine)).unwrap();
    let q = &got[0].queries;
    assert_eq!(q.len(), sets::CADVISOR.len() + 1);
    let mem = q.iter().find(|q| q.name == "memory_bytes").unwrap();
    assert_eq!(mem.text, "process_resident_memory_bytes{}");
    assert_eq!(q.last().unwrap().unit, "s/s");
    let only = resolve(&given(&u, Some("none"), None, &mine[1..])).unwrap();
    assert_eq!(only[0].queries.len(), 1);
}

#[test]
fn what_cannot_be_is_refused_naming_it() {
    let u = urls(&["http://p:9090"]);
    let q = |name: &str, query: &str| ServerQueryArg {
        name: name.into(),
        query: query.into(),
        unit: None,
    };
    let none: [String; 0] = [];
    for (g, says) in [
        (given(&u, Some("k8s"), None, &[]), "'k8s': give node"),
        (
            given(&u, Some("none"), None, &[]),
            "give the queries in the plan file",
        ),
        (given(&u, None, Some("{a=\"b\"}"), &[]), "without braces"),
        (
            given(&none, Some("node"), None, &[]),
            "--server-prometheus-queries asks a Prometheus",
        ),
        (
            given(&none, None, Some("a=\"b\""), &[]),
            "--server-prometheus-selector asks",
        ),
    ] {
        let e = resolve(&g).unwrap_err().to_string();
        assert!(e.contains(says), "{e}");
    }
    let bad = [q("Cpu", "x")];
    let e = resolve(&given(&u, None, None, &bad))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("[[server_query]] Cpu: a name is lowercase"),
        "{e}"
    );
    let bad = [q("x", "rate(x{${instance}}[${window}])")];
    let e = resolve(&given(&u, None, None, &bad))
        .unwrap_err()
        .to_string();
    assert!(e.contains("query x: ${instance} is no placeholder"), "{e}");
    let two = urls(&["http://p:1", "http://q:1"]);
    let e = resolve(&given(&two, None, None, &[]))
        .unwrap_err()
        .to_string();
    assert!(e.contains("two sources named prometheus"), "{e}");
    let https = urls(&["https://p:1"]);
    let e = resolve(&given(&https, None, None, &[]))
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("--server-prometheus 'https://p:1': https:// is not taken"),
        "{e}"
    );
}

fn query(name: &str) -> Query {
    Query {
        name: name.into(),
        text: String::new(),
        unit: if name.starts_with("net") {
            "B/s".into()
        } else {
            String::new()
        },
    }
}

fn one(value: f64) -> Result<Vec<Series>, QueryError> {
    Ok(vec![Series {
        labels: vec![("instance".into(), "h:9100".into())],
        value,
    }])
}

#[test]
fn answers_fill_the_view_s_fields_and_the_rest_are_extras() {
    let qs: Vec<Query> = [
        "samples",
        "cpu_cores",
        "usable_cores",
        "memory_bytes",
        "host_cpu_pct",
        "tcp_retrans",
        "net_rx_bytes_per_s",
    ]
    .into_iter()
    .map(query)
    .collect();
    let values = [5.0, 1.5, 2.0, 1_048_576.0, 80.12345, 3.4, 1000.0];
    let answers = qs.iter().zip(values).map(|(q, v)| (q, one(v))).collect();
    let (seen, notes) = view("web", 5000, answers);
    let v = seen.unwrap();
    assert!(notes.is_empty(), "{notes:?}");
    assert_eq!(v.source, Source::Prometheus);
    assert_eq!((v.samples, v.counted_s, v.rated_s), (5, 5.0, 5.0));
    let t = v.target.as_ref().unwrap();
    assert_eq!(
        (t.cpu_pct, t.cpu_util_pct, t.usable_cores),
        (150.0, 75.0, 2.0)
    );
    assert_eq!(t.memory_bytes.max, 1_048_576.0);
    assert_eq!(v.host.cpu_pct, Some(80.123));
    assert_eq!(v.tcp.retrans_segs, 3);
    assert_eq!(
        v.extra,
        [Extra {
            name: "net_rx_bytes_per_s".into(),
            value: 1000.0,
            unit: "B/s".into()
        }]
    );
    // What reads a monitor's view reads this one: requests per server core-second among them.
    let text = serde_json::to_string(&v).unwrap();
    assert!(text.contains(r#""source":"prometheus""#), "{text}");
    assert_eq!(serde_json::from_str::<StepServer>(&text).unwrap(), v);
}

#[test]
fn no_number_is_made_up_for_what_prometheus_did_not_say() {
    let qs: Vec<Query> = [
        "samples",
        "cpu_cores",
        "host_cpu_pct",
        "host_softirq_pct",
        "tcp_retrans",
    ]
    .into_iter()
    .map(query)
    .collect();
    let answers = vec![
        (&qs[0], one(1.0)),
        (&qs[1], one(0.5)),
        (&qs[2], Ok(Vec::new())),
        (&qs[3], one(f64::NAN)),
        (
            &qs[4],
            Err(QueryError::Refused {
                kind: "execution".into(),
                error: "boom".into(),
            }),
        ),
    ];
    let (seen, notes) = view("web", 1500, answers);
    let v = seen.unwrap();
    // No usable cores: no share of them is guessed; the busy cores stay, as an extra.
    assert!(v.target.is_none());
    assert_eq!(v.extra[0].name, "cpu_cores");
    assert_eq!((v.host.cpu_pct, v.host.softirq_pct), (None, None));
    let all = notes.join("\n");
    for says in [
        "query host_softirq_pct gave NaN over the step: left empty",
        "query tcp_retrans: it answered execution: boom: left empty",
        "no series for host_cpu_pct over the step's 1.5 s window",
        "scraped 1 time(s) in the step's 1.5 s: a rate needs two",
        "usable_cores gave no number",
    ] {
        assert!(all.contains(says), "{says}\n{all}");
    }
    let (none, notes) = view("web", 1500, vec![(&qs[2], Ok(Vec::new()))]);
    assert!(none.is_none() && notes.len() == 1);
}

#[test]
fn several_series_are_named_by_the_labels_that_differ() {
    let s = |instance: &str| Series {
        labels: vec![
            ("instance".into(), instance.into()),
            ("job".into(), "node".into()),
        ],
        value: 1.0,
    };
    let said = several(&[s("a:9100"), s("b:9100")]);
    assert!(
        said.starts_with("2 series, differing in instance (a:9100, b:9100): narrow"),
        "{said}"
    );
}

#[test]
fn a_window_is_whole_milliseconds_and_a_placeholder_filled_once() {
    assert_eq!(window_text(4500), "4500ms");
    assert_eq!(window_text(0), "1ms");
    assert_eq!(
        fill("x{${selector}}[${window}]", "a=\"1\"", "n").unwrap(),
        "x{a=\"1\"}[${window}]"
    );
}

/// A Prometheus that is not there: said, the view empty, nothing waited on past the query's bound.
#[tokio::test]
async fn an_unreachable_prometheus_is_a_note_and_no_view() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let u = urls(&[&format!("http://127.0.0.1:{port}")]);
    let sources = resolve(&given(&u, None, None, &[])).unwrap();
    preflight(&sources).await.unwrap();
    assert!(sources[0].told.load(Ordering::Relaxed));
    let now = (now_s() * 1e9) as i64;
    let window = Window {
        start_ns: now - 2_000_000_000,
        end_ns: now - 1_000_000_000,
    };
    let (views, notes) = observe(&sources, window, |_| true).await;
    assert!(views.is_empty());
    assert_eq!(notes.len(), 1);
    assert!(
        notes[0].starts_with(&format!(
            "Prometheus prometheus (http://127.0.0.1:{port}): cannot reach it"
        )),
        "{}",
        notes[0]
    );
    let (views, notes) = observe(&sources, window, |_| false).await;
    assert!(views.is_empty() && notes.is_empty());
}

/// The knee's `server_cpu` cause and requests per server core-second read a Prometheus's view as
/// they read a monitor's: a container at 1.9 of its 2 cores where the latency broke.
#[test]
fn the_knee_s_server_cpu_cause_reads_a_prometheus_view() {
    let golden = include_str!("../../../results/tests/golden/run.json");
    let run = results::run_file::RunFile::parse(golden, std::path::Path::new("run.json")).unwrap();
    let qs: Vec<Query> = ["cpu_cores", "usable_cores"]
        .into_iter()
        .map(query)
        .collect();
    let pairing = crate::config::pairing::Pairing::new([None]);
    let mut steps = Vec::new();
    for (i, (rate, p99, cores)) in [(100.0, 2.0, 0.4), (200.0, 2.0, 0.9), (300.0, 40.0, 1.9)]
        .into_iter()
        .enumerate()
    {
        let mut r = run.steps[0].clone();
        r.number = i as u32 + 1;
        (r.step_value, r.demanded_rate) = (rate, Some(rate));
        r.due = (rate * r.duration_s) as u64;
        (r.requests, r.replies, r.ok, r.ok_rate) = (r.due, r.due, r.due, rate);
        (r.latency_ms.p99, r.latency_ms.max) = (p99, p99 + 1.0);
        let answers = vec![(&qs[0], one(cores)), (&qs[1], one(2.0))];
        let (seen, _) = view("prometheus", 5000, answers);
        results::quantity::observed(&mut r, pairing.mark(None, seen.into_iter().collect()));
        steps.push(r);
    }
    assert_eq!(steps[2].own_server().unwrap().watches, Watches::Target);
    assert_eq!(steps[2].ok_per_core_s, Some(157.895));
    let knee = results::step::knee::find(&steps).unwrap();
    assert_eq!(knee.step_value, 300.0);
    assert_eq!(
        knee.also,
        [results::step::knee::KneeCause::ServerCpu],
        "{knee:?}"
    );
    assert_eq!(knee.monitor.as_deref(), Some("prometheus"));
    assert_eq!(
        (knee.server_cpu_util_pct, knee.server_cores),
        (Some(95.0), Some(2.0))
    );
}
