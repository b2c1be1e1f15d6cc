//! The Grafana dashboard shipped in deploy/grafana/stampede.json, held against a real Prometheus
//! (Debian's) that watched a real run, twice: one that scraped its `--live` /metrics, and one that
//! only received its remote writes (`--prometheus-remote-write`), so the dashboard serves both.
//! Every PromQL expression in it (every panel's every query, every template variable's query) is
//! run against each, must answer something, and must answer that run's numbers, by one table below
//! that says, panel by panel, what each query must equal. A query the table does not know fails the
//! test, and so does a table entry no query uses: a panel added to the dashboard cannot go
//! unchecked. A closed-model run (no demanded rate) is pushed beside it: its served rate per step
//! is still run.json's. No Grafana runs here; the variables are filled in as Grafana fills them
//! (see `Vars`). Skipped without `prometheus` on PATH, except under CI=true.
use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use coordinator::live::metrics::QUANTILE_BOUND;
use serde_json::Value;
use tests::ServeProcess;
use tests::prometheus::{
    JOB, Prometheus, now_s, prometheus_bin, run_until_seen_finished, wait_until,
};

/// A mix of two named requests, so the `stampede_request_*` panels have series.
const MIX: &str = r#"
[[request]]
name = "home"
weight = 3
url = "/a"

[[request]]
name = "items"
weight = 1
url = "/b"
"#;
const TARGETS: [&str; 2] = ["one", "two"];

/// How Grafana fills a query in, as this test does it:
/// - `$datasource`: the panels' datasource, never inside an expression;
/// - a query variable at "All" (`$job`, `$request`, and `$step` where a query does not iterate
///   it): its `allValue`, `.*`, as Grafana substitutes it;
/// - `$target`: one target's name, regex-escaped, as Grafana writes a single value into a
///   regex matcher (each query runs once per target of the run);
/// - `$step`: each of the run's steps in turn (its own variable's answer), where a query has it;
/// - `$__range`: the dashboard's time range, here 1h (the whole run and more: the test's
///   Prometheus holds this one run only); `$__interval`: 1s, the scrape interval, which
///   Grafana's interval becomes for a range of a few minutes at the default max data points.
///
/// Panels' queries are evaluated as an instant query at one time after the run's end (while
/// `--live-keep` still serves), which is what a table panel asks and a time series panel's last
/// point; a time series panel's queries are also asked as a range query over the run, which must
/// answer something too.
struct Vars<'a> {
    target: &'a str,
    step: Option<&'a str>,
}

const RANGE: &str = "1h";
const INTERVAL: &str = "1s";

impl Vars<'_> {
    fn value(&self, name: &str) -> Option<String> {
        match name {
            "job" | "request" => Some(".*".to_string()),
            "target" => Some(regex_escape(self.target)),
            "step" => Some(self.step.map_or_else(|| ".*".to_string(), regex_escape)),
            "__range" => Some(RANGE.to_string()),
            "__interval" => Some(INTERVAL.to_string()),
            _ => None,
        }
    }

    /// `expr` with every `$name` and `${name}` filled in; an unknown variable fails the test.
    fn fill(&self, expr: &str) -> String {
        let mut out = String::new();
        let mut rest = expr;
        while let Some(i) = rest.find('$') {
            out.push_str(&rest[..i]);
            let after = &rest[i + 1..];
            let (name, len) = if let Some(braced) = after.strip_prefix('{') {
                let end = braced.find('}').expect("a closing brace");
                (&braced[..end], end + 2)
            } else {
                let end = after
                    .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .unwrap_or(after.len());
                (&after[..end], end)
            };
            let value = self.value(name).unwrap_or_else(|| {
                panic!("{expr}: the test does not know ${name}: add it to Vars")
            });
            out.push_str(&value);
            rest = &after[len..];
        }
        out.push_str(rest);
        out
    }
}

/// A value as a regular expression matching it alone (Grafana's Prometheus regex escape).
fn regex_escape(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        if "\\^$.|?*+()[]{}".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// One target's run as stampede wrote it: run.json and its last merged second (events.ndjson).
struct Ran {
    name: &'static str,
    run: Value,
    last_second: Value,
}

impl Ran {
    fn steps(&self) -> &Vec<Value> {
        self.run["steps"].as_array().expect("steps")
    }

    fn last_step(&self) -> &Value {
        self.steps().last().expect("a step")
    }

    fn step(&self, labels: &Value) -> &Value {
        let n: usize = label(labels, "step").parse().expect("a step number");
        &self.steps()[n - 1]
    }
}

fn label<'a>(labels: &'a Value, name: &str) -> &'a str {
    labels[name]
        .as_str()
        .unwrap_or_else(|| panic!("no {name} label: {labels}"))
}

/// How a number Prometheus answers must stand to the run's.
#[derive(Clone, Copy, Debug)]
enum Cmp {
    Exact,
    /// Relative, of the run's number.
    Within(f64),
    /// Absolute.
    Abs(f64),
}

impl Cmp {
    fn holds(self, got: f64, want: f64) -> bool {
        match self {
            Cmp::Exact => got == want,
            Cmp::Within(r) => (got - want).abs() <= r * want.abs() + 1e-12,
            Cmp::Abs(a) => (got - want).abs() <= a,
        }
    }
}

/// What one query must answer.
#[derive(Clone, Copy)]
enum Check {
    /// One series a step (label `step`), all the run's steps (or the one `$step` names), each
    /// standing to that step's number in run.json.
    PerStep(fn(&Value) -> f64, Cmp),
    /// One series a step and error class: run.json's `errors`.
    PerStepClass,
    /// One series a class (all seven): the class's errors summed over the steps.
    PerClass,
    /// One series a named request and step: that step's `per_request` row of that name.
    PerName(fn(&Value) -> f64, Cmp),
    /// One series an agent: standing to the run's number for it.
    PerAgent(fn(&Ran, &str) -> f64, Cmp),
    /// One series, standing to the run's number.
    One(fn(&Ran) -> f64, Cmp),
}

fn ms(v: &Value) -> f64 {
    v.as_f64().expect("a number") / 1000.0
}
fn num(v: &Value) -> f64 {
    v.as_f64().expect("a number")
}

/// The table: panel title and query refId → what the query must answer. Latencies are seconds in
/// Prometheus and milliseconds in run.json; quantiles lie within `QUANTILE_BOUND` of run.json's
/// (docs/guide/live.md), means within run.json's rounding to the microsecond.
fn checks() -> Vec<(&'static str, &'static str, Check)> {
    use Check::*;
    use Cmp::*;
    let q = Within(QUANTILE_BOUND);
    vec![
        (
            "Offered and served rate per step",
            "A",
            PerStep(|s| num(&s["demanded_rate"]), Exact),
        ),
        // Run.json's ok_rate (served per second over the step's own length), as written.
        (
            "Offered and served rate per step",
            "B",
            PerStep(|s| num(&s["ok_rate"]), Exact),
        ),
        (
            "Latency per step",
            "A",
            PerStep(|s| ms(&s["latency_ms"]["p50"]), q),
        ),
        (
            "Latency per step",
            "B",
            PerStep(|s| ms(&s["latency_ms"]["p90"]), q),
        ),
        (
            "Latency per step",
            "C",
            PerStep(|s| ms(&s["latency_ms"]["p99"]), q),
        ),
        (
            "Latency per step",
            "D",
            PerStep(|s| ms(&s["latency_ms"]["mean"]), Abs(0.0005e-3 + 1e-12)),
        ),
        (
            "Requests, served and failed per step",
            "A",
            PerStep(|s| num(&s["requests"]), Exact),
        ),
        (
            "Requests, served and failed per step",
            "B",
            PerStep(|s| num(&s["ok"]), Exact),
        ),
        (
            "Requests, served and failed per step",
            "C",
            PerStep(|s| num(&s["failed"]), Exact),
        ),
        (
            "Requests, served and failed per step",
            "D",
            PerStep(|s| num(&s["ok"]) / num(&s["requests"]), Exact),
        ),
        ("Errors by class", "A", PerClass),
        ("Errors by class", "B", PerStepClass),
        (
            "The running step: demanded, sent and served per second",
            "A",
            One(|r| num(&r.last_step()["demanded_rate"]), Exact),
        ),
        (
            "The running step: demanded, sent and served per second",
            "B",
            One(
                |r| num(&r.last_second["sent"]) / num(&r.last_second["length_s"]),
                Within(1e-12),
            ),
        ),
        (
            "The running step: demanded, sent and served per second",
            "C",
            One(
                |r| num(&r.last_second["ok"]) / num(&r.last_second["length_s"]),
                Within(1e-12),
            ),
        ),
        (
            "The running step's latency",
            "A",
            One(|r| ms(&r.last_step()["latency_ms"]["p50"]), q),
        ),
        (
            "The running step's latency",
            "B",
            One(|r| ms(&r.last_step()["latency_ms"]["p99"]), q),
        ),
        ("Step", "A", One(|r| num(&r.last_step()["step"]), Exact)),
        ("Step", "B", One(|r| r.steps().len() as f64, Exact)),
        ("Step", "C", One(|_| 1.0, Exact)),
        (
            "Generator: busiest agent's CPU",
            "A",
            One(
                |r| num(&r.last_step()["generator"]["cpu_pct"]) / 100.0,
                Within(1e-12),
            ),
        ),
        (
            "Generator: dispatch lag p99",
            "A",
            One(
                |r| ms(&r.last_step()["generator"]["lag_p99_ms"]),
                Within(1e-12),
            ),
        ),
        (
            "CPU per agent",
            "A",
            PerAgent(
                |r, agent| num(&agent_of(r.last_step(), agent)["cpu_pct"]) / 100.0,
                Within(1e-12),
            ),
        ),
        (
            "Requests per agent",
            "A",
            PerAgent(
                |r, agent| {
                    r.steps()
                        .iter()
                        .map(|s| num(&agent_of(s, agent)["requests"]))
                        .sum()
                },
                Exact,
            ),
        ),
        (
            "Named requests per step",
            "A",
            PerName(|n| num(&n["requests"]), Exact),
        ),
        (
            "Named requests per step",
            "B",
            PerName(|n| num(&n["ok"]), Exact),
        ),
        (
            "Named requests per step",
            "C",
            PerName(|n| num(&n["failed"]), Exact),
        ),
        (
            "Named requests' latency per step",
            "A",
            PerName(|n| ms(&n["latency_ms"]["p50"]), q),
        ),
        (
            "Named requests' latency per step",
            "B",
            PerName(|n| ms(&n["latency_ms"]["p99"]), q),
        ),
    ]
}

fn agent_of<'a>(step: &'a Value, agent: &str) -> &'a Value {
    step["agents"]
        .as_array()
        .expect("agents")
        .iter()
        .find(|a| a["agent"] == agent)
        .unwrap_or_else(|| panic!("no agent {agent} in step {}", step["step"]))
}

/// A panel's query as the dashboard holds it.
struct Query {
    title: String,
    ref_id: String,
    expr: String,
    /// A time series panel's: asked over a range too.
    range: bool,
}

/// Every panel's every query, each panel checked to have a datasource (the `$datasource`
/// variable's) and at least one expression.
fn panel_queries(dashboard: &Value) -> Vec<Query> {
    let mut out = Vec::new();
    for p in dashboard["panels"].as_array().expect("panels") {
        let title = p["title"].as_str().expect("a panel title");
        assert_eq!(
            p["datasource"]["uid"], "${datasource}",
            "{title}: the panel's datasource is the dashboard's variable"
        );
        let targets = p["targets"].as_array().expect("targets");
        assert!(!targets.is_empty(), "{title}: no query");
        for t in targets {
            assert_eq!(t["datasource"]["uid"], "${datasource}", "{title}");
            let expr = t["expr"].as_str().expect("an expr");
            assert!(!expr.trim().is_empty(), "{title}: an empty expr");
            out.push(Query {
                title: title.to_string(),
                ref_id: t["refId"].as_str().expect("a refId").to_string(),
                expr: expr.to_string(),
                range: t["range"] == true,
            });
        }
    }
    out
}

/// A query variable's `label_values(SELECTOR, LABEL)`, which Grafana answers with Prometheus's
/// label values API (`/api/v1/label/LABEL/values?match[]=SELECTOR`) over the dashboard's range.
fn label_values_of(query: &str) -> (&str, &str) {
    let inner = query
        .strip_prefix("label_values(")
        .and_then(|q| q.strip_suffix(')'))
        .unwrap_or_else(|| panic!("{query}: the test knows only label_values(SELECTOR, LABEL)"));
    let (selector, label) = inner
        .rsplit_once(',')
        .expect("label_values(SELECTOR, LABEL)");
    (selector.trim(), label.trim())
}

/// The Prometheuses the dashboard is held against, each holding the same run: one scraped its
/// `--live` address, the other only received its remote writes (pushed series carry `job`, `run`,
/// `url`, where scraped ones carry `job`, `instance`).
struct Sources {
    scraped: Prometheus,
    pushed: Prometheus,
}

/// Runs the ramp side by side against two targets with `--live`, scraped by one Prometheus and
/// pushed (`--prometheus-remote-write`) to another; returns each target's run and the time range
/// they saw, once both saw the run finished.
fn watched_run(prometheus: &Path, dir: &Path) -> (Sources, Vec<Ran>, f64, std::process::Child) {
    let serve = ServeProcess::start(&[]);
    let live = SocketAddr::from(([127, 0, 0, 1], tests::closed_port()));
    let scraped = Prometheus::start(prometheus, live);
    let pushed = Prometheus::receiving(prometheus);
    let began = now_s();
    let plan = dir.join("mix.toml");
    std::fs::write(&plan, MIX).expect("the plan is written");
    let out = dir.join("out");
    let (run, log) = run_until_seen_finished(
        &scraped,
        live,
        ["run", plan.to_str().expect("a UTF-8 path")]
            .into_iter()
            .map(String::from)
            .chain(TARGETS.map(|t| format!("{t}={}", serve.url())))
            .chain(
                [
                    "--model",
                    "requests",
                    "--steps",
                    "100,200,300",
                    "--step-duration",
                    "3s",
                    "--warmup",
                    "3s",
                    "--live-keep",
                    "60s",
                    "--prometheus-remote-write",
                    &pushed.write_url(),
                    "--out",
                ]
                .map(String::from),
            )
            .chain([out.to_str().expect("a UTF-8 path").to_string()]),
    );
    // The end's push is sent as the run finishes; the receiver has it a moment later.
    wait_until(
        "the pushed Prometheus holding the run's end",
        Duration::from_secs(10),
        || pushed.query("stampede_run_finished == 1").len() == 1,
    );
    drop(serve);
    let events = std::fs::read_to_string(out.join("events.ndjson")).expect("events.ndjson");
    let ran = TARGETS
        .iter()
        .enumerate()
        .map(|(lane, &name)| {
            let run = tests::run_json(&out.join(name));
            assert_eq!(run["status"], "completed", "{name}: {}", log.text());
            let last_second = events
                .lines()
                .rev()
                .map(|l| serde_json::from_str::<Value>(l).expect("an event"))
                .find(|e| e["event"] == "interval" && e["lane"] == lane)
                .expect("a merged second")["interval"]
                .clone();
            Ran {
                name,
                run,
                last_second,
            }
        })
        .collect();
    (Sources { scraped, pushed }, ran, began, run)
}

/// A run of `url` in `model` over `steps` (1 s each), pushed to `prom`: its run.json.
fn pushed_run(prom: &Prometheus, url: &str, model: &str, steps: &str) -> Value {
    let write = prom.write_url();
    let ran = tests::run_ok(&[
        url,
        "--model",
        model,
        "--steps",
        steps,
        "--step-duration",
        "1s",
        "--prometheus-remote-write",
        &write,
    ]);
    assert_eq!(ran.run["status"], "completed", "{model} {steps}");
    ran.run
}

/// A closed-model run (no demanded rate) of one target, pushed to a Prometheus of its own: that
/// Prometheus and the run, once the run has ended (its end flushes its pushes).
fn closed_run(prometheus: &Path, url: &str) -> (Prometheus, Ran) {
    let prom = Prometheus::receiving(prometheus);
    let run = pushed_run(&prom, url, "concurrency", "1,2");
    let ran = Ran {
        name: "",
        run,
        last_second: Value::Null,
    };
    (prom, ran)
}

/// Two open runs of one target pushed one after the other to one Prometheus, the second within the
/// first's lookback (remote write marks nothing stale): each run's demanded rates per step, in order.
fn two_pushed_runs(prometheus: &Path, url: &str) -> (Prometheus, Vec<Vec<f64>>) {
    let prom = Prometheus::receiving(prometheus);
    let demanded = ["300,400", "100,200"]
        .into_iter()
        .map(|steps| {
            let run = pushed_run(&prom, url, "requests", steps);
            run["steps"]
                .as_array()
                .expect("steps")
                .iter()
                .map(|s| num(&s["demanded_rate"]))
                .collect()
        })
        .collect();
    (prom, demanded)
}

#[test]
fn every_query_of_the_grafana_dashboard_answers_the_run_s_numbers_from_a_real_prometheus() {
    let test = "grafana_dashboard";
    let dashboard: Value = serde_json::from_str(
        &std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/grafana/stampede.json"),
        )
        .expect("deploy/grafana/stampede.json"),
    )
    .expect("the dashboard is JSON");
    // The table before any load: a query it does not know fails at once.
    let table = checks();
    let queries = panel_queries(&dashboard);
    for q in &queries {
        assert!(
            table
                .iter()
                .any(|(t, r, _)| *t == q.title && *r == q.ref_id),
            "panel \"{}\" query {} has no check in this test's table: {}",
            q.title,
            q.ref_id,
            q.expr
        );
    }
    for (title, ref_id, _) in &table {
        assert!(
            queries
                .iter()
                .any(|q| q.title == *title && q.ref_id == *ref_id),
            "the table checks panel \"{title}\" query {ref_id}, which the dashboard lacks"
        );
    }
    let Some(prometheus) = prometheus_bin(test) else {
        return;
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let started = Instant::now();
    // The closed run beside the ramp, on a server and a Prometheus of its own.
    let closed = {
        let prometheus = prometheus.clone();
        std::thread::spawn(move || {
            let serve = ServeProcess::start(&[]);
            let (prom, ran) = closed_run(&prometheus, &serve.url());
            let two = two_pushed_runs(&prometheus, &serve.url());
            (prom, ran, two)
        })
    };
    let (sources, ran, began, mut run) = watched_run(&prometheus, dir.path());
    let at = now_s();
    let mut said = Vec::new();
    for (source, prom) in [("scraped", &sources.scraped), ("pushed", &sources.pushed)] {
        let answered = dashboard_answers(
            source,
            &dashboard,
            &queries,
            &table,
            prom,
            &ran,
            (began, at),
        );
        said.push(format!("{source}: {answered} answers"));
    }
    tests::signal(&run, libc::SIGINT);
    let status = run.wait().expect("the run is waited for");
    assert!(status.success(), "{status}");

    // A closed-model step has no demanded rate, and still its served rate: run.json's ok_rate.
    let (closed_prom, closed, (two_prom, demanded)) = closed.join().expect("the closed run");
    let panel = "Offered and served rate per step";
    let at = now_s();
    for q in queries.iter().filter(|q| q.title == panel) {
        let vars = Vars {
            target: closed.name,
            step: None,
        };
        let promql = vars.fill(&q.expr);
        let what = format!("panel \"{panel}\" {} for a closed run ({promql})", q.ref_id);
        let got = closed_prom.query_at(&promql, at);
        if q.ref_id == "A" {
            assert!(got.is_empty(), "{what}: no demanded rate: {got:?}");
        } else {
            assert!(!got.is_empty(), "{what}: no series");
            verify(check_of(&table, q), &got, &closed, None, &what);
            let rates: Vec<String> = got
                .iter()
                .map(|(l, v)| format!("step {} {v}/s", label(l, "step")))
                .collect();
            said.push(format!("closed run: {}", rates.join(", ")));
        }
    }
    // Two pushed runs of one target a second apart: each step's offered rate is its own run's,
    // never the last gauge of the run before, which stays current for Prometheus's lookback.
    let offered = queries
        .iter()
        .find(|q| q.title == panel && q.ref_id == "A")
        .expect("the offered rate's query");
    let vars = Vars {
        target: "",
        step: None,
    };
    let mut runs: std::collections::BTreeMap<String, Vec<(u64, f64)>> = Default::default();
    for (labels, v) in two_prom.query_at(&vars.fill(&offered.expr), now_s()) {
        let step: u64 = label(&labels, "step").parse().expect("a step number");
        runs.entry(label(&labels, "run").to_string())
            .or_default()
            .push((step, v));
    }
    let mut seen: Vec<Vec<f64>> = runs
        .into_values()
        .map(|mut steps| {
            steps.sort_by_key(|(n, _)| *n);
            steps.into_iter().map(|(_, v)| v).collect()
        })
        .collect();
    seen.sort_by(|a, b| a[0].total_cmp(&b[0]));
    let mut want = demanded.clone();
    want.sort_by(|a, b| a[0].total_cmp(&b[0]));
    assert_eq!(
        seen, want,
        "two pushed runs' offered rates per step, each run's own (run.json's: {demanded:?})"
    );
    said.push(format!("two pushed runs: offered {seen:?}"));
    eprintln!(
        "{test}: {} panel queries and {} variables, against run.json: {} in {:.1?}",
        queries.len(),
        dashboard["templating"]["list"]
            .as_array()
            .map_or(0, Vec::len),
        said.join("; "),
        started.elapsed()
    );
}

fn check_of(table: &[(&str, &str, Check)], q: &Query) -> Check {
    table
        .iter()
        .find(|(t, r, _)| *t == q.title && *r == q.ref_id)
        .map(|(_, _, c)| *c)
        .expect("checked above")
}

/// Every variable's and every panel's query asked of `prom` (the `source` named in what fails),
/// which holds the run `ran` (from `began` on), at `at`, each answer held against run.json by the table: how many were checked.
fn dashboard_answers(
    source: &str,
    dashboard: &Value,
    queries: &[Query],
    table: &[(&str, &str, Check)],
    prom: &Prometheus,
    ran: &[Ran],
    (began, at): (f64, f64),
) -> usize {
    let mut answered = 0;
    // The variables: each answers the run's values.
    let mut steps_of = BTreeMap::new();
    for v in dashboard["templating"]["list"]
        .as_array()
        .expect("variables")
    {
        let name = v["name"].as_str().expect("a variable's name");
        match v["type"].as_str() {
            Some("datasource") => {
                assert_eq!(v["query"], "prometheus", "{name}");
                continue;
            }
            Some("query") => {}
            other => panic!("variable {name}: the test knows no {other:?} variable"),
        }
        let query = v["definition"].as_str().expect("a definition");
        assert_eq!(
            v["query"]["query"], query,
            "{name}: its query is its definition"
        );
        assert_eq!(v["datasource"]["uid"], "${datasource}", "{name}");
        assert_eq!(v["allValue"], ".*", "{name}: All matches every value");
        for r in ran {
            let vars = Vars {
                target: r.name,
                step: None,
            };
            let (selector, label) = label_values_of(query);
            let got = prom.label_values(&vars.fill(selector), label, began - 60.0, at);
            let want: Vec<String> = match name {
                "job" => vec![JOB.to_string()],
                "target" => TARGETS.iter().map(|t| t.to_string()).collect(),
                "step" => r
                    .steps()
                    .iter()
                    .map(|s| s["step"].to_string())
                    .collect::<BTreeSet<_>>()
                    .into_iter()
                    .collect(),
                "request" => vec!["home".to_string(), "items".to_string()],
                _ => panic!("variable {name}: the test does not know what it must answer"),
            };
            assert_eq!(
                got, want,
                "{source}: variable {name} ({query}) for target {}",
                r.name
            );
            answered += 1;
            if name == "step" {
                steps_of.insert(r.name, got);
            }
        }
    }

    // The panels: each query, once per target (and per step where it has $step).
    for q in queries {
        let check = check_of(table, q);
        for r in ran {
            let steps: Vec<Option<&str>> = if q.expr.contains("$step") {
                steps_of[r.name].iter().map(|s| Some(s.as_str())).collect()
            } else {
                vec![None]
            };
            for step in steps {
                let vars = Vars {
                    target: r.name,
                    step,
                };
                let promql = vars.fill(&q.expr);
                let what = format!(
                    "{source}: panel \"{}\" {} for {} ({promql})",
                    q.title, q.ref_id, r.name
                );
                let got = prom.query_at(&promql, at);
                assert!(!got.is_empty(), "{what}: no series");
                verify(check, &got, r, step, &what);
                if q.range {
                    let over = prom.query_range(&promql, began, at, 1.0);
                    assert!(
                        over.iter().any(|(_, v)| !v.is_empty()),
                        "{what}: the range query answered nothing"
                    );
                }
                answered += 1;
            }
        }
    }
    answered
}

/// Holds one query's answer against the run by its check.
fn verify(check: Check, got: &[(Value, f64)], r: &Ran, step: Option<&str>, what: &str) {
    let all_steps: BTreeSet<String> = match step {
        Some(s) => BTreeSet::from([s.to_string()]),
        None => r.steps().iter().map(|s| s["step"].to_string()).collect(),
    };
    let is = |cmp: Cmp, value: f64, want: f64, which: &str| {
        assert!(
            cmp.holds(value, want),
            "{what}: {which}: Prometheus {value}, the run {want} ({cmp:?})"
        );
    };
    let labels_of = |names: &[&str]| -> BTreeSet<Vec<String>> {
        got.iter()
            .map(|(l, _)| names.iter().map(|n| label(l, n).to_string()).collect())
            .collect()
    };
    match check {
        Check::PerStep(want, cmp) => {
            assert_eq!(
                got.len(),
                all_steps.len(),
                "{what}: one series a step: {got:?}"
            );
            let seen: BTreeSet<String> = labels_of(&["step"]).into_iter().flatten().collect();
            assert_eq!(seen, all_steps, "{what}");
            for (l, v) in got {
                // A run of one target has no target label.
                assert_eq!(l["target"].as_str().unwrap_or(""), r.name, "{what}");
                is(
                    cmp,
                    *v,
                    want(r.step(l)),
                    &format!("step {}", label(l, "step")),
                );
            }
        }
        Check::PerStepClass => {
            assert_eq!(got.len(), 7 * all_steps.len(), "{what}: {got:?}");
            for (l, v) in got {
                let want = num(&r.step(l)["errors"][label(l, "class")]);
                is(
                    Cmp::Exact,
                    *v,
                    want,
                    &format!("step {} {}", label(l, "step"), label(l, "class")),
                );
            }
        }
        Check::PerClass => {
            assert_eq!(got.len(), 7, "{what}: every class: {got:?}");
            for (l, v) in got {
                let class = label(l, "class");
                let want: f64 = r.steps().iter().map(|s| num(&s["errors"][class])).sum();
                is(Cmp::Exact, *v, want, class);
            }
        }
        Check::PerName(want, cmp) => {
            let names: BTreeSet<String> = ["home", "items"].map(String::from).into();
            assert_eq!(got.len(), names.len() * all_steps.len(), "{what}: {got:?}");
            for (l, v) in got {
                let name = label(l, "request");
                let row = r.step(l)["per_request"]
                    .as_array()
                    .expect("per_request")
                    .iter()
                    .find(|n| n["name"] == name)
                    .unwrap_or_else(|| panic!("{what}: no {name} in run.json"));
                assert!(all_steps.contains(label(l, "step")), "{what}: {l}");
                is(
                    cmp,
                    *v,
                    want(row),
                    &format!("{name} step {}", label(l, "step")),
                );
            }
        }
        Check::PerAgent(want, cmp) => {
            let agents: BTreeSet<String> = r.last_step()["agents"]
                .as_array()
                .expect("agents")
                .iter()
                .map(|a| a["agent"].as_str().expect("a name").to_string())
                .collect();
            let seen: BTreeSet<String> = labels_of(&["agent"]).into_iter().flatten().collect();
            assert_eq!(seen, agents, "{what}");
            assert_eq!(got.len(), agents.len(), "{what}: {got:?}");
            for (l, v) in got {
                let agent = label(l, "agent");
                is(cmp, *v, want(r, agent), agent);
            }
        }
        Check::One(want, cmp) => {
            assert_eq!(got.len(), 1, "{what}: one series: {got:?}");
            is(cmp, got[0].1, want(r), "the value");
        }
    }
}

#[test]
fn the_variables_are_filled_in_as_grafana_fills_them_and_an_unknown_one_fails() {
    let vars = Vars {
        target: "a.b",
        step: Some("3"),
    };
    assert_eq!(
        vars.fill(r#"x{target=~"$target", step=~"${step}", job=~"$job"}[$__range:$__interval]"#),
        r#"x{target=~"a\.b", step=~"3", job=~".*"}[1h:1s]"#
    );
    let unknown = std::panic::catch_unwind(|| vars.fill("x[$__rate_interval]"));
    assert!(unknown.is_err(), "an unknown variable fails the test");
}
