//! `--otlp` as an OpenTelemetry receiver reads it: tests/otlp/receiver.py decodes every POST with
//! the official generated classes (PyPI `opentelemetry-proto`, pinned in .ci/run), refusing a body
//! with a field they do not know, and the test holds what it saw against what was sent (the
//! format's own batch) and against run.json (a real run: each step's counts exactly, its
//! histogram's count, its p99 within the grid's bound, the run as the resource). A receiver
//! answering 503 first gets the batch on a retry, and the run's end still reaches it. Skipped
//! without the receiver's venv, except under CI=true.
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use coordinator::live::metrics::QUANTILE_BOUND;
use push::otlp::{self, Otlp};
use push::{Batch, Family, Format, Kind, Resource, Series, Value};
use serde_json::Value as Json;

/// The Python that has `opentelemetry-proto` (.ci/run makes target/otlp-venv and exports
/// STAMPEDE_OTLP_PY), or `None` (the test skips) with the reason said; under CI=true its absence
/// fails the test instead.
fn otlp_python(test: &str) -> Option<PathBuf> {
    let found = std::env::var_os("STAMPEDE_OTLP_PY")
        .map(PathBuf::from)
        .or_else(|| {
            let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/otlp-venv/bin/python");
            venv.is_file().then_some(venv)
        });
    if found.is_none() {
        let why = "no STAMPEDE_OTLP_PY and no target/otlp-venv: python3 -m venv target/otlp-venv && \
                   target/otlp-venv/bin/pip install opentelemetry-proto==1.45.2 protobuf==7.36.2";
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "{test}: {why}; CI=true requires it"
        );
        eprintln!("SKIPPED {test}: {why} (set CI=true to make this a failure)");
    }
    found
}

/// tests/otlp/receiver.py on a free loopback port, killed when dropped.
struct Receiver {
    child: Child,
    addr: SocketAddr,
    dir: tempfile::TempDir,
}

impl Receiver {
    /// Started and listening; the first `fail_first` requests are answered 503.
    fn start(python: &Path, fail_first: u32) -> Receiver {
        let dir = tempfile::tempdir().expect("temp dir");
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("otlp/receiver.py");
        let mut child = Command::new(python)
            .arg(&script)
            .arg(dir.path().join("seen.jsonl"))
            .args(["--fail-first", &fail_first.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("{}: {e}", python.display()));
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("piped stdout"))
            .read_line(&mut line)
            .expect("the receiver says its port");
        let Some(port) = line.trim().strip_prefix("listening ") else {
            let _ = child.kill();
            panic!("the receiver did not start: {line:?}");
        };
        let addr = SocketAddr::from(([127, 0, 0, 1], port.parse().expect("a port")));
        Receiver { child, addr, dir }
    }

    /// Every request it took so far, one JSON object each.
    fn seen(&self) -> Vec<Json> {
        let text = std::fs::read_to_string(self.dir.path().join("seen.jsonl")).unwrap_or_default();
        text.lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
            .collect()
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// POSTs `body` to `path` as OTLP/HTTP does; the status answered.
fn post(addr: SocketAddr, path: &str, format: &dyn Format, body: &[u8]) -> u16 {
    let mut s = TcpStream::connect(addr).expect("the receiver accepts");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut head = format!("POST {path} HTTP/1.1\r\nHost: {addr}\r\n");
    for (k, v) in format.headers() {
        head += &format!("{k}: {v}\r\n");
    }
    head += &format!(
        "Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(body).unwrap();
    let mut reply = String::new();
    let _ = s.read_to_string(&mut reply);
    reply
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no status in {reply:?}"))
}

fn pairs(p: &[(&str, &str)]) -> Vec<(String, String)> {
    p.iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn number(labels: &[(&str, &str)], v: f64) -> Series {
    Series {
        labels: pairs(labels),
        value: Value::Number(v),
    }
}

#[test]
fn the_official_classes_read_every_field_of_a_batch_as_sent() {
    let test = "the_official_classes_read_every_field_of_a_batch_as_sent";
    let Some(python) = otlp_python(test) else {
        return;
    };
    let receiver = Receiver::start(&python, 0);
    let batch = Batch {
        at_ms: 1_765_000_012_500,
        start_ms: 1_765_000_000_000,
        resource: Resource {
            attributes: pairs(&[
                ("service.name", "stampede"),
                ("stampede.run", "20261206T142600Z"),
                ("stampede.label", "nightly é"),
            ]),
        },
        families: vec![
            Family {
                name: "stampede_requests".into(),
                help: "Requests sent in the step".into(),
                unit: String::new(),
                kind: Kind::Counter,
                series: vec![
                    number(&[("target", "a"), ("step", "1")], 300.0),
                    number(&[("target", "a"), ("step", "2")], 9_007_199_254_740_993.0),
                ],
            },
            Family {
                name: "stampede_generator_lag_p99".into(),
                help: "lag".into(),
                unit: "seconds".into(),
                kind: Kind::Gauge,
                series: vec![number(&[], 0.000_25)],
            },
            Family {
                name: "stampede_latency".into(),
                help: "The step's latency".into(),
                unit: "seconds".into(),
                kind: Kind::Histogram,
                series: vec![Series {
                    labels: pairs(&[("step", "1")]),
                    value: Value::Histogram {
                        bounds: vec![0.000_5, 0.000_522, 0.001],
                        counts: vec![0, 7, 0, 2],
                        count: 9,
                        sum: 0.004_75,
                    },
                }],
            },
        ],
    };
    let otlp = Otlp;
    assert_eq!(
        post(receiver.addr, "/v1/metrics", &otlp, &otlp.encode(&batch)),
        200
    );
    let seen = receiver.seen();
    assert_eq!(seen.len(), 1, "{seen:?}");
    let r = &seen[0];
    assert_eq!(r["path"], "/v1/metrics");
    assert_eq!(r["content_type"], "application/x-protobuf");
    assert_eq!(r["status"], 200, "{r}");
    let res = &r["resources"][0];
    assert_eq!(res["attributes"]["service.name"], "stampede");
    assert_eq!(res["attributes"]["stampede.run"], "20261206T142600Z");
    assert_eq!(res["attributes"]["stampede.label"], "nightly é");
    let scope = &res["scopes"][0];
    assert_eq!(scope["name"], "stampede");
    assert_eq!(scope["version"], env!("CARGO_PKG_VERSION"));
    let m = scope["metrics"].as_array().unwrap();
    assert_eq!(m.len(), 3);

    assert_eq!(m[0]["name"], "stampede_requests");
    assert_eq!(m[0]["description"], "Requests sent in the step");
    assert_eq!(m[0]["type"], "sum");
    assert_eq!(m[0]["temporality"], "AGGREGATION_TEMPORALITY_CUMULATIVE");
    assert_eq!(m[0]["monotonic"], true);
    let p = &m[0]["points"];
    assert_eq!(p[0]["attributes"]["target"], "a");
    assert_eq!(p[0]["attributes"]["step"], "1");
    assert_eq!(p[0]["start"], 1_765_000_000_000_000_000u64);
    assert_eq!(p[0]["time"], 1_765_000_012_500_000_000u64);
    assert_eq!(p[0]["value"], 300);
    assert_eq!(p[0]["int"], true);
    // Past 2^53 a double is not every integer: the int64 holds what the f64 held, exactly.
    assert_eq!(p[1]["value"], 9_007_199_254_740_992u64);

    assert_eq!(m[1]["type"], "gauge");
    assert_eq!(m[1]["unit"], "s");
    assert_eq!(m[1]["points"][0]["value"], 0.000_25);
    assert_eq!(m[1]["points"][0]["int"], false);
    assert_eq!(m[1]["points"][0]["start"], 0);

    assert_eq!(m[2]["type"], "histogram");
    assert_eq!(m[2]["unit"], "s");
    assert_eq!(m[2]["temporality"], "AGGREGATION_TEMPORALITY_CUMULATIVE");
    let h = &m[2]["points"][0];
    assert_eq!(h["attributes"]["step"], "1");
    assert_eq!(h["count"], 9);
    assert_eq!(h["sum"], 0.004_75);
    assert_eq!(h["bounds"], serde_json::json!([0.000_5, 0.000_522, 0.001]));
    assert_eq!(h["buckets"], serde_json::json!([0, 7, 0, 2]));
}

#[test]
fn the_receiver_refuses_a_field_the_definitions_do_not_know() {
    // The check above can fail: a body whose field number is not OTLP's is refused, not skipped.
    let test = "the_receiver_refuses_a_field_the_definitions_do_not_know";
    let Some(python) = otlp_python(test) else {
        return;
    };
    let receiver = Receiver::start(&python, 0);
    let otlp = Otlp;
    let mut body = otlp.encode(&Batch::default());
    // Field 9, varint 1: nothing in ExportMetricsServiceRequest.
    body.extend_from_slice(&[0x48, 0x01]);
    assert_eq!(post(receiver.addr, "/v1/metrics", &otlp, &body), 400);
    let seen = receiver.seen();
    assert!(
        seen[0]["error"]
            .as_str()
            .is_some_and(|e| e.contains("do not know")),
        "{seen:?}"
    );
}

/// A batch pushed by push's sender to `receiver` (given as a base URL, as `--otlp` takes it), with
/// `tries` tries 20 ms apart; the sender's tally.
fn push_once(receiver: &Receiver, batch: Batch, tries: u32) -> push::Tally {
    let url = otlp::metrics_url(&format!("http://{}", receiver.addr));
    let endpoint = push::Endpoint::parse(&url, &[]).expect("a loopback URL");
    let options = push::Options {
        tries,
        backoff: Duration::from_millis(20),
        ..push::Options::default()
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let sender = push::Sender::start(endpoint, Arc::new(Otlp), options);
        sender.send(Arc::new(batch));
        sender.finish(Duration::from_secs(20)).await
    })
}

fn one_counter(v: f64) -> Batch {
    Batch {
        at_ms: 1_765_000_001_000,
        start_ms: 1_765_000_000_000,
        resource: Resource {
            attributes: pairs(&[("service.name", "stampede")]),
        },
        families: vec![Family {
            name: "stampede_requests".into(),
            help: "Requests sent in the step".into(),
            unit: String::new(),
            kind: Kind::Counter,
            series: vec![number(&[("step", "1")], v)],
        }],
    }
}

#[test]
fn a_receiver_answering_503_then_200_gets_the_batch_on_the_senders_retry() {
    let test = "a_receiver_answering_503_then_200_gets_the_batch_on_the_senders_retry";
    let Some(python) = otlp_python(test) else {
        return;
    };
    let receiver = Receiver::start(&python, 2);
    let tally = push_once(&receiver, one_counter(42.0), 3);
    assert_eq!((tally.sent, tally.dropped_total()), (1, 0), "{tally}");
    let seen = receiver.seen();
    let status: Vec<&Json> = seen.iter().map(|r| &r["status"]).collect();
    assert_eq!(status, [503, 503, 200], "{seen:?}");
    for r in &seen {
        assert_eq!(r["path"], "/v1/metrics");
    }
    let p = &seen[2]["resources"][0]["scopes"][0]["metrics"][0]["points"][0];
    assert_eq!(p["value"], 42, "{seen:?}");

    // One 503 more than the tries: the batch is dropped, said in the tally, and nothing waits on.
    let receiver = Receiver::start(&python, 3);
    let tally = push_once(&receiver, one_counter(42.0), 3);
    assert_eq!((tally.sent, tally.dropped_total()), (0, 1), "{tally}");
    assert_eq!(receiver.seen().len(), 3);
}

/// The points of metric `name` in a request the receiver read.
fn points<'a>(request: &'a Json, name: &str) -> Vec<&'a Json> {
    request["resources"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|r| r["scopes"].as_array().into_iter().flatten())
        .flat_map(|s| s["metrics"].as_array().into_iter().flatten())
        .filter(|m| m["name"] == name)
        .flat_map(|m| m["points"].as_array().into_iter().flatten())
        .collect()
}

/// The point of step `step` among `points`.
fn of_step<'a>(points: &[&'a Json], step: u64) -> &'a Json {
    let s = step.to_string();
    let found: Vec<&Json> = points
        .iter()
        .copied()
        .filter(|p| p["attributes"]["step"] == s.as_str())
        .collect();
    assert_eq!(found.len(), 1, "step {step}: {points:?}");
    found[0]
}

/// The `q` quantile of an explicit-bucket histogram as Prometheus' `histogram_quantile` reads one
/// (linear inside the bucket holding the rank; the first bucket from 0; above the last bound, the
/// last bound), so a dashboard over the pushed histogram reads what this test does.
fn bucket_quantile(bounds: &[f64], counts: &[u64], q: f64) -> f64 {
    let total: u64 = counts.iter().sum();
    let rank = q * total as f64;
    let mut below = 0u64;
    for (i, &n) in counts.iter().enumerate() {
        if (below + n) as f64 >= rank && n > 0 {
            let Some(&upper) = bounds.get(i) else {
                return *bounds.last().expect("a bound");
            };
            let lower = if i == 0 { 0.0 } else { bounds[i - 1] };
            return lower + (upper - lower) * (rank - below as f64) / n as f64;
        }
        below += n;
    }
    *bounds.last().expect("a bound")
}

#[test]
fn a_run_pushed_over_otlp_holds_run_jsons_counts_and_p99_within_the_grids_bound() {
    let test = "a_run_pushed_over_otlp_holds_run_jsons_counts_and_p99_within_the_grids_bound";
    let Some(python) = otlp_python(test) else {
        return;
    };
    let _serial = tests::serial();
    let receiver = Receiver::start(&python, 0);
    let target = tests::ServeProcess::start(&["--delay", "2ms"]);
    let base = format!("http://{}", receiver.addr);
    let ran = tests::run_ok(&[
        &target.url(),
        "--model",
        "requests",
        "--steps",
        "100,200",
        "--step-duration",
        "2s",
        "--label",
        "otlp-check",
        "--otlp",
        &base,
    ]);
    let seen = receiver.seen();
    assert!(!seen.is_empty(), "nothing pushed");
    for r in &seen {
        assert_eq!(r["status"], 200, "{r}");
        assert_eq!(r["path"], "/v1/metrics");
        assert_eq!(r["content_type"], "application/x-protobuf");
    }
    // Every second and every finished step is a batch: more than the steps.
    assert!(seen.len() > 2, "{} requests", seen.len());

    // The resource names the run, its target and its label.
    let last = seen.last().unwrap();
    let res = &last["resources"][0]["attributes"];
    assert_eq!(res["service.name"], "stampede", "{res}");
    assert_eq!(res["stampede.label"], "otlp-check", "{res}");
    // The run's id is its start, as its begin event (events.ndjson's first line) says it.
    let events = std::fs::read_to_string(ran.dir.path().join("events.ndjson")).expect("events");
    let begin: Json = serde_json::from_str(events.lines().next().unwrap()).unwrap();
    assert_eq!(res["stampede.run"], begin["started_at"], "{res} vs {begin}");
    assert_eq!(res["stampede.url"], ran.run["target"], "{res}");
    // Every cumulative point of every batch counts from the one start, the run's, before it.
    let first_time = seen[0]["resources"][0]["scopes"][0]["metrics"]
        .as_array()
        .and_then(|m| m.iter().find_map(|m| m["points"][0]["time"].as_u64()))
        .expect("a point in the first batch");
    let starts: std::collections::BTreeSet<u64> = seen
        .iter()
        .flat_map(|r| points(r, "stampede_requests"))
        .map(|p| p["start"].as_u64().unwrap())
        .collect();
    assert_eq!(starts.len(), 1, "{starts:?}");
    let start = *starts.first().unwrap();
    assert!(start > 0 && start < first_time, "{start} vs {first_time}");

    // Cumulative: the last batch holds every finished step at run.json's figures.
    assert_eq!(ran.steps().len(), 2);
    holds_each_step(last, &ran.run);
}

/// Each finished step of run.json in the request `last`: its requests, served and failed exactly,
/// its latency histogram's count the step's, and the p99 read from its buckets within the grid's
/// bound of run.json's.
fn holds_each_step(last: &Json, run: &Json) {
    for s in run["steps"].as_array().expect("steps") {
        let n = s["step"].as_u64().unwrap();
        for (metric, key) in [
            ("stampede_requests", "requests"),
            ("stampede_served", "ok"),
            ("stampede_failed", "failed"),
        ] {
            let p = of_step(&points(last, metric), n);
            assert_eq!(p["value"], s[key], "step {n} {metric}: {p} vs {s}");
            assert_eq!(p["int"], true);
            assert!(p["start"].as_u64().unwrap() > 0);
            assert!(p["start"].as_u64() < p["time"].as_u64(), "{p}");
        }
        let h = of_step(&points(last, "stampede_latency_seconds"), n);
        let latencies = s["ok"].as_u64().unwrap() + s["given_up"].as_u64().unwrap();
        assert!(latencies > 0, "{s}");
        assert_eq!(h["count"].as_u64(), Some(latencies), "step {n}: {h}");
        let bounds: Vec<f64> = h["bounds"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b.as_f64().unwrap())
            .collect();
        let counts: Vec<u64> = h["buckets"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b.as_u64().unwrap())
            .collect();
        assert_eq!(counts.iter().sum::<u64>(), latencies, "step {n}: {h}");
        let theirs = bucket_quantile(&bounds, &counts, 0.99) * 1000.0;
        let ours = s["latency_ms"]["p99"].as_f64().unwrap();
        let rel = (theirs - ours).abs() / ours;
        eprintln!(
            "step {n}: requests {} served {} failed {}; histogram count {latencies}; p99 {theirs:.4} ms \
             from the buckets vs run.json {ours:.4} ms ({:.2} %)",
            s["requests"],
            s["ok"],
            s["failed"],
            rel * 100.0
        );
        assert!(
            rel <= QUANTILE_BOUND,
            "step {n}: p99 {theirs} ms from the pushed buckets vs {ours} ms in run.json: {:.3} % > {:.3} %",
            rel * 100.0,
            QUANTILE_BOUND * 100.0
        );
    }
}

#[test]
fn a_receiver_down_at_first_still_gets_the_whole_run_and_the_closing_line_says_what_it_took() {
    let test =
        "a_receiver_down_at_first_still_gets_the_whole_run_and_the_closing_line_says_what_it_took";
    let Some(python) = otlp_python(test) else {
        return;
    };
    let _serial = tests::serial();
    // Its first two answers are 503: the batches then are retried or give way to newer ones.
    let receiver = Receiver::start(&python, 2);
    let target = tests::ServeProcess::start(&["--delay", "1ms"]);
    let dir = tempfile::tempdir().expect("temp dir");
    let out = dir.path().join("out");
    let base = format!("http://{}", receiver.addr);
    let o = tests::stampede(&[
        "run",
        &target.url(),
        "--model",
        "requests",
        "--steps",
        "100,200",
        "--step-duration",
        "2s",
        "--otlp",
        &base,
        "--out",
        out.to_str().unwrap(),
    ]);
    let said = tests::text(&o.stderr);
    assert!(o.status.success(), "{said}");
    let run = tests::run_json(&out);
    assert_eq!(run["status"], "completed", "{said}");
    let seen = receiver.seen();
    let status: Vec<u64> = seen.iter().map(|r| r["status"].as_u64().unwrap()).collect();
    assert_eq!(status[..2], [503, 503], "{status:?}");
    assert_eq!(status.last(), Some(&200), "{status:?}");
    // The closing line counts as sent exactly what the receiver took.
    let took = status.iter().filter(|&&s| s == 200).count();
    let closing = format!(
        "OTLP to {base}/v1/metrics: {took} batch{} sent, ",
        if took == 1 { "" } else { "es" }
    );
    assert!(said.contains(&closing), "no {closing:?} in: {said}");
    let last = seen.last().unwrap();
    holds_each_step(last, &run);
}

#[test]
fn an_otlp_url_that_is_not_http_is_refused_before_any_load() {
    let o = tests::stampede(&[
        "run",
        "http://127.0.0.1:9/",
        "--steps",
        "10",
        "--otlp",
        "ftp://collector:4318",
    ]);
    let said = tests::text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{said}");
    assert!(said.contains("--otlp"), "{said}");
    assert!(
        said.contains("\"ftp://collector:4318\""),
        "the URL as given: {said}"
    );
    assert_eq!(said.lines().count(), 1, "one line: {said}");
}
