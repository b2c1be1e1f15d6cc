//! A real Prometheus for the tests that hold stampede's metrics against one (Debian's `prometheus`):
//! started on a free loopback port with its own config and storage, scraping what the test serves,
//! asked through its HTTP API, killed when dropped. One harness, so the tests that read /metrics
//! through Prometheus (the live page's, the Grafana dashboard's) start and ask it the same way.
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::Lines;

/// The `prometheus` binary on PATH, or `None` (the test skips) with the reason said; under CI=true
/// its absence fails the test instead (`.ci/run` installs it).
pub fn prometheus_bin(test: &str) -> Option<PathBuf> {
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
pub struct Prometheus {
    child: Child,
    pub addr: SocketAddr,
    log: Lines,
    _dir: tempfile::TempDir,
}

impl Prometheus {
    /// Started scraping `target`'s /metrics every second (job `stampede`), and ready to answer.
    pub fn start(bin: &Path, target: SocketAddr) -> Prometheus {
        let dir = tempfile::tempdir().expect("temp dir");
        let config = dir.path().join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n  - \
                 job_name: {JOB}\n    static_configs:\n      - targets: ['{target}']\n"
            ),
        )
        .expect("the config is written");
        let addr = SocketAddr::from(([127, 0, 0, 1], crate::closed_port()));
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
    pub fn api(&self, path: &str, args: &[(&str, &str)]) -> Value {
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
    pub fn query(&self, promql: &str) -> Vec<(Value, f64)> {
        series(&self.api("query", &[("query", promql)]))
    }

    /// An instant query at a given time (Unix seconds).
    pub fn query_at(&self, promql: &str, at: f64) -> Vec<(Value, f64)> {
        series(&self.api("query", &[("query", promql), ("time", &at.to_string())]))
    }

    /// A range query's series over [start, end] every `step_s` seconds: each one's labels and values.
    pub fn query_range(
        &self,
        promql: &str,
        start: f64,
        end: f64,
        step_s: f64,
    ) -> Vec<(Value, Vec<f64>)> {
        let data = self.api(
            "query_range",
            &[
                ("query", promql),
                ("start", &start.to_string()),
                ("end", &end.to_string()),
                ("step", &step_s.to_string()),
            ],
        );
        data["result"]
            .as_array()
            .expect("a matrix")
            .iter()
            .map(|s| {
                let values = s["values"]
                    .as_array()
                    .expect("values")
                    .iter()
                    .map(|v| number(&v[1]))
                    .collect();
                (s["metric"].clone(), values)
            })
            .collect()
    }

    /// A label's values on the series `selector` matches over [start, end], sorted
    /// (`/api/v1/label/LABEL/values?match[]=SELECTOR`).
    pub fn label_values(&self, selector: &str, label: &str, start: f64, end: f64) -> Vec<String> {
        let data = self.api(
            &format!("label/{label}/values"),
            &[
                ("match[]", selector),
                ("start", &start.to_string()),
                ("end", &end.to_string()),
            ],
        );
        let mut values: Vec<String> = data
            .as_array()
            .expect("a list of values")
            .iter()
            .map(|v| v.as_str().expect("a label value").to_string())
            .collect();
        values.sort();
        values
    }

    /// An instant query that must answer one series.
    pub fn one(&self, promql: &str) -> f64 {
        let r = self.query(promql);
        assert_eq!(r.len(), 1, "{promql}: {r:?}");
        r[0].1
    }
}

/// The job name [`Prometheus::start`] scrapes under.
pub const JOB: &str = "stampede";

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An instant vector's series from the API's `data`.
fn series(data: &Value) -> Vec<(Value, f64)> {
    data["result"]
        .as_array()
        .expect("a vector")
        .iter()
        .map(|s| (s["metric"].clone(), number(&s["value"][1])))
        .collect()
}

/// A sample's value as the API writes it: a string.
pub fn number(v: &Value) -> f64 {
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

/// Waits until `done`, failing the test past `limit`.
pub fn wait_until(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let began = Instant::now();
    while !done() {
        assert!(began.elapsed() < limit, "{what} within {limit:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Now, in Unix seconds (Prometheus's API's time).
pub fn now_s() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .as_secs_f64()
}
