//! `--live`'s /metrics as a real Prometheus reads it: Debian's `prometheus`, started by the test on a
//! free port with a 1 s scrape of the live address, watches a three-step ramp; then its HTTP API's
//! answers are held against run.json and steps.tsv: the request totals exactly, each step's
//! `histogram_quantile` within the documented bound of stampede's own percentile
//! (docs/guide/live.md, "Prometheus"). Skipped without `prometheus` on PATH, except under CI=true.
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use coordinator::live::metrics::QUANTILE_BOUND;
use serde_json::Value;
use tests::{Lines, ServeProcess, bin};

/// The `prometheus` binary on PATH, or `None` (the test skips) with the reason said; under CI=true
/// its absence fails the test instead (`.ci/run` installs it).
fn prometheus_bin(test: &str) -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|d| d.join("prometheus"))
            .find(|p| p.is_file())
    });
    if found.is_none() {
        let why = "no prometheus on PATH (Debian: apt-get install prometheus)";
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "{test}: {why}; CI=true requires it"
        );
        eprintln!("SKIPPED {test}: {why} (set CI=true to make this a failure)");
    }
    found
}

/// A Prometheus of the test's own (never the package's service on 9090): its config and storage in
/// a temporary directory, its API on a free loopback port; killed when dropped.
struct Prometheus {
    child: Child,
    addr: SocketAddr,
    log: Lines,
    _dir: tempfile::TempDir,
}

impl Prometheus {
    /// Started scraping `target`'s /metrics every second, and ready to answer.
    fn start(bin: &Path, target: SocketAddr) -> Prometheus {
        let dir = tempfile::tempdir().expect("temp dir");
        let config = dir.path().join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n  - \
                 job_name: stampede\n    static_configs:\n      - targets: ['{target}']\n"
            ),
        )
        .expect("the config is written");
        let addr = SocketAddr::from(([127, 0, 0, 1], tests::closed_port()));
        let mut child = Command::new(bin)
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address={addr}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("prometheus starts");
        let log = Lines::of(&mut child);
        let mut p = Prometheus {
            child,
            addr,
            log,
            _dir: dir,
        };
        let began = Instant::now();
        loop {
            if let Some(status) = p.child.try_wait().expect("prometheus can be waited for") {
                std::thread::sleep(Duration::from_millis(100));
                panic!("prometheus exited ({status}): {}", p.log.text());
            }
            if get(addr, "/-/ready").is_some_and(|(code, _)| code == 200) {
                return p;
            }
            assert!(
                began.elapsed() < Duration::from_secs(60),
                "prometheus not ready within 60 s: {}",
                p.log.text()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// `GET /api/v1/PATH?ARGS`'s data, the status asserted a success.
    fn api(&self, path: &str, args: &[(&str, &str)]) -> Value {
        let query: Vec<String> = args
            .iter()
            .map(|(k, v)| format!("{k}={}", encode(v)))
            .collect();
        let target = format!("/api/v1/{path}?{}", query.join("&"));
        let (code, body) = get(self.addr, &target).expect("prometheus answers");
        let v: Value = serde_json::from_str(&body)
            .unwrap_or_else(|e| panic!("{target}: not JSON ({e}): {body}"));
        assert_eq!(
            (code, &v["status"]),
            (200, &Value::from("success")),
            "{target}: {body}"
        );
        v["data"].clone()
    }

    /// An instant query's series: each one's labels and value.
    fn query(&self, promql: &str) -> Vec<(Value, f64)> {
        let data = self.api("query", &[("query", promql)]);
        data["result"]
            .as_array()
            .expect("a vector")
            .iter()
            .map(|s| (s["metric"].clone(), number(&s["value"][1])))
            .collect()
    }

    /// An instant query that must answer one series.
    fn one(&self, promql: &str) -> f64 {
        let r = self.query(promql);
        assert_eq!(r.len(), 1, "{promql}: {r:?}");
        r[0].1
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A sample's value as the API writes it: a string.
fn number(v: &Value) -> f64 {
    v.as_str()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("not a sample value: {v}"))
}

/// A query string's value, percent-encoded (all but the unreserved characters).
fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// A GET on a fresh connection: (status, body), a chunked body put together; `None` when nothing
/// listens or answers yet.
fn get(addr: SocketAddr, target: &str) -> Option<(u16, String)> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    write!(
        s,
        "GET {target} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).ok()?;
    let raw = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = raw.split_once("\r\n\r\n")?;
    let code = head.split_whitespace().nth(1)?.parse().ok()?;
    let chunked = head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked");
    if !chunked {
        return Some((code, body.to_string()));
    }
    let mut out = String::new();
    let mut rest = body;
    loop {
        let (size, after) = rest.split_once("\r\n")?;
        let size = usize::from_str_radix(size.trim(), 16).ok()?;
        if size == 0 {
            return Some((code, out));
        }
        out.push_str(after.get(..size)?);
        rest = after.get(size + 2..)?;
    }
}

fn wait_until(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let began = Instant::now();
    while !done() {
        assert!(began.elapsed() < limit, "{what} within {limit:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

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

fn now_s() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .as_secs_f64()
}
