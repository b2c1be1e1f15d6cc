//! `--live`'s /metrics as a real Prometheus reads it: Debian's `prometheus`, started by the test on a
//! free port with a 1 s scrape of the live address, watches a three-step ramp; then its HTTP API's
//! answers are held against run.json and steps.tsv: the request totals exactly, each step's
//! `histogram_quantile` within the documented bound of stampede's own percentile
//! (docs/guide/live.md, "Prometheus"). Skipped without `prometheus` on PATH, except under CI=true.
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use coordinator::live::metrics::QUANTILE_BOUND;
use serde_json::Value;
use tests::prometheus::{Prometheus, now_s, number, prometheus_bin, wait_until};
use tests::{Lines, ServeProcess, bin};

#[test]
fn prometheus_watching_a_ramp_sums_to_run_json_and_reads_each_step_s_p99_within_the_bound() {
    let test = "prometheus_watching_a_ramp";
    let Some(prometheus) = prometheus_bin(test) else {
        return;
    };
    let serve = ServeProcess::start(&[]);
    // Prometheus first, scraping the address the run will serve: it watches from the first step.
    let live = SocketAddr::from(([127, 0, 0, 1], tests::closed_port()));
    let prom = Prometheus::start(&prometheus, live);
    let dir = tempfile::tempdir().expect("temp dir");
    let began = Instant::now();
    let mut run = Command::new(bin("stampede"))
        .arg("run")
        .arg(serve.url())
        .args(["--model", "requests", "--steps", "100,200,300"])
        .args(["--step-duration", "3s", "--live-keep", "60s"])
        .arg("--live")
        .arg(live.to_string())
        .arg("--out")
        .arg(dir.path())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("stampede runs");
    let log = Lines::of(&mut run);

    // Over, and scraped once over: the last scrape holds the written steps' figures.
    wait_until(
        "Prometheus seeing the run finished",
        Duration::from_secs(120),
        || {
            if let Ok(Some(status)) = run.try_wait() {
                panic!(
                    "the run exited ({status}) before Prometheus saw it end: {}",
                    log.text()
                );
            }
            prom.query("stampede_run_finished == 1").len() == 1
        },
    );
    let ran = tests::run_json(dir.path());
    assert_eq!(ran["status"], "completed", "{}", log.text());
    let steps = ran["steps"].as_array().expect("steps");
    assert_eq!(steps.len(), 3);

    // Totals: exact, the run's and each step's.
    let u = |v: &Value| v.as_u64().expect("a count") as f64;
    let requests: f64 = steps.iter().map(|s| u(&s["requests"])).sum();
    assert!(
        requests >= 1700.0,
        "a 100-200-300 req/s ramp of 3 s steps: {requests}"
    );
    assert_eq!(prom.one("sum(stampede_requests_total)"), requests);
    for s in steps {
        let n = s["step"].as_u64().unwrap();
        for (metric, key) in [
            ("stampede_requests_total", "requests"),
            ("stampede_served_total", "ok"),
            ("stampede_failed_total", "failed"),
        ] {
            let got = prom.one(&format!("{metric}{{step=\"{n}\"}}"));
            assert_eq!(got, u(&s[key]), "step {n}'s {metric} is run.json's {key}");
        }
        assert_eq!(
            prom.one(&format!("stampede_step_final{{step=\"{n}\"}}")),
            1.0
        );
    }
    // Failures by class: steps.tsv's err_* columns, summed over the steps.
    let (header, rows) = tests::browser::steps_tsv(dir.path());
    let col = |name: &str| {
        header
            .iter()
            .position(|h| h == name)
            .unwrap_or_else(|| panic!("no {name} in steps.tsv: {header:?}"))
    };
    let by_class = prom.query("sum by (class) (stampede_errors_total)");
    assert_eq!(by_class.len(), 7, "every class: {by_class:?}");
    for (labels, got) in &by_class {
        let class = labels["class"].as_str().expect("a class");
        let column = col(&format!("err_{}", class.replace('-', "_")));
        let want: f64 = rows.iter().map(|r| r[column].parse::<f64>().unwrap()).sum();
        assert_eq!(*got, want, "{class}: steps.tsv's");
    }

    // Each step's percentiles from its histogram: within the bound of run.json's and steps.tsv's.
    let (p50_col, p99_col) = (col("p50_ms"), col("p99_ms"));
    let mut off = Vec::new();
    for (i, s) in steps.iter().enumerate() {
        let n = s["step"].as_u64().unwrap();
        for (q, key, column) in [(0.5, "p50", p50_col), (0.99, "p99", p99_col)] {
            let promql =
                format!("histogram_quantile({q}, stampede_latency_seconds_bucket{{step=\"{n}\"}})");
            let got_ms = prom.one(&promql) * 1000.0;
            let ours = s["latency_ms"][key].as_f64().expect("a percentile");
            let tsv: f64 = rows[i][column].parse().unwrap();
            assert_eq!(tsv, ours, "steps.tsv's {key} is run.json's");
            let rel = (got_ms - ours).abs() / ours;
            assert!(
                rel <= QUANTILE_BOUND,
                "step {n} {key}: Prometheus {got_ms} ms, stampede {ours} ms: {:.2} % off, more \
                 than the bound's {:.2} %",
                rel * 100.0,
                QUANTILE_BOUND * 100.0
            );
            off.push(format!(
                "step {n} {key}: {got_ms:.4} ms vs {ours} ms ({:.2} %)",
                rel * 100.0
            ));
        }
    }
    eprintln!("{test}: {requests} requests; {}", off.join("; "));
    // The guide's other readings: every step's p99 at once, one series a step; a step's mean is
    // run.json's (which is rounded to the microsecond).
    let all = prom.query("histogram_quantile(0.99, stampede_latency_seconds_bucket)");
    assert_eq!(all.len(), steps.len(), "{all:?}");
    for s in steps {
        let n = s["step"].as_u64().unwrap();
        let mean_ms = 1000.0
            * prom.one(&format!(
                "stampede_latency_seconds_sum{{step=\"{n}\"}} / stampede_latency_seconds_count{{step=\"{n}\"}}"
            ));
        let ours = s["latency_ms"]["mean"].as_f64().expect("a mean");
        assert!(
            (mean_ms - ours).abs() <= 0.0005 + 1e-9,
            "step {n}'s mean: Prometheus {mean_ms} ms, run.json {ours} ms"
        );
    }

    // Watched as it happened: scrapes during the run saw it go from step to step.
    let range = prom.api(
        "query_range",
        &[
            ("query", "stampede_step"),
            (
                "start",
                &format!("{}", now_s() - began.elapsed().as_secs_f64() - 5.0),
            ),
            ("end", &format!("{}", now_s())),
            ("step", "1"),
        ],
    );
    let mut seen: Vec<f64> = range["result"][0]["values"]
        .as_array()
        .expect("the step over time")
        .iter()
        .map(|v| number(&v[1]))
        .collect();
    seen.dedup();
    assert!(
        seen.len() >= 2 && seen.last() == Some(&3.0),
        "Prometheus saw the steps change as the run went: {seen:?}"
    );

    // Ctrl-C ends the lingering page at once.
    tests::signal(&run, libc::SIGINT);
    let waited = Instant::now();
    let status = run.wait().expect("the run is waited for");
    assert!(status.success(), "{status}: {}", log.text());
    assert!(
        waited.elapsed() < Duration::from_secs(10),
        "SIGINT ends --live-keep"
    );
}
