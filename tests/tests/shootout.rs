//! The shoot-out our users come for, on real servers: nginx (Debian's), a Node `http` server that
//! spends 0.8 ms of CPU on each request (a knee below 1,250 req/s on its one thread: 0.5 ms kept up
//! with 1,800 req/s on a quiet machine, past the ramp), and the
//! reference target capped at 150 req/s, each watched by its own monitor, ramped side by side. The
//! truth is by construction (the cap, the CPU per request) and the kernel's (/proc/PID/stat).
use std::path::Path;

use tests::nginx::Nginx;
use tests::node::NodeScript;
use tests::{ServeProcess, browser, run_json, stampede, text};

/// A Node `http` server on a free loopback port spending `busy_us` µs of CPU per request; killed
/// when dropped.
struct Node {
    script: NodeScript,
    port: u16,
}

impl Node {
    /// None (the test skips) without node, except under CI=true, where .ci/run installs it.
    fn start(test: &str, busy_us: u32) -> Option<Node> {
        let script = format!(
            "const http = require('http');\n\
             const s = http.createServer((req, res) => {{\n\
               const end = process.hrtime.bigint() + {busy_us}000n;\n\
               while (process.hrtime.bigint() < end) {{}}\n\
               res.end('hello\\n');\n\
             }});\n\
             s.keepAliveTimeout = 60000;\n\
             s.listen(0, '127.0.0.1', () => console.log(s.address().port));\n\
             setTimeout(() => process.exit(0), 600000);\n"
        );
        let script = NodeScript::start(test, &script)?;
        let port = script.said.trim().parse().expect("node prints its port");
        Some(Node { script, port })
    }

    fn pid(&self) -> u32 {
        self.script.child.id()
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/", self.port)
    }
}

/// CPU seconds (user + system) a process and its reaped children have used, from /proc/PID/stat.
fn cpu_s(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<u64> = after
        .split_whitespace()
        .map(|x| x.parse().unwrap_or(0))
        .collect();
    // utime, stime, cutime, cstime are fields 14..17 (1-based), 12..15 after the command.
    let ticks = f[11] + f[12] + f[13] + f[14];
    ticks as f64 / 100.0
}

/// The server CPU-seconds a run's steps say its own monitor saw: its CPU (% of a core, rated inside
/// the step) over the step's length.
fn monitored_cpu_s(run: &serde_json::Value) -> f64 {
    let mut total = 0.0;
    for s in run["steps"].as_array().unwrap() {
        let length = s["duration_s"].as_f64().unwrap();
        for m in s["server_monitors"].as_array().cloned().unwrap_or_default() {
            if m["watches"] == "target" {
                total += m["target"]["cpu_pct"].as_f64().unwrap_or(0.0) / 100.0 * length;
            }
        }
    }
    total
}

#[test]
fn three_real_servers_ramped_side_by_side_rank_by_their_true_knees_each_with_its_own_cpu() {
    let test =
        "three_real_servers_ramped_side_by_side_rank_by_their_true_knees_each_with_its_own_cpu";
    let Some(nginx) = Nginx::start(test) else {
        return;
    };
    let Some(node) = Node::start(test, 800) else {
        return;
    };
    let reference = ServeProcess::start(&["--capacity", "150"]);
    let pids = [
        ("nginx", nginx.pid()),
        ("node", node.pid()),
        ("ref", reference.pid()),
    ];
    // nginx's master and its worker: the monitor watches a process's children too.
    let processes = |name: &str| match name {
        "nginx" => nginx.all(),
        "node" => vec![node.pid()],
        _ => vec![reference.pid()],
    };
    let kernel_cpu_s = |name: &str| processes(name).into_iter().map(cpu_s).sum::<f64>();
    let before: Vec<f64> = pids.iter().map(|(name, _)| kernel_cpu_s(name)).collect();
    let nginx_before = nginx.requests();

    let out = tempfile::tempdir().unwrap();
    let dir = out.path().join("shootout");
    let mut args = vec![
        "run".to_string(),
        format!("nginx={}", nginx.url()),
        format!("node={}", node.url()),
        format!("ref={}", reference.url()),
        "--model".into(),
        "requests".into(),
        "--steps".into(),
        "100,300,600,1000,1400,1800".into(),
        "--step-duration".into(),
        "2s".into(),
        "--timeout".into(),
        "2s".into(),
        "--out".into(),
        dir.display().to_string(),
    ];
    for (name, pid) in pids {
        args.push("--monitor-target".into());
        args.push(format!("{name}=pid:{pid}"));
    }
    // And node watched once more by a monitor no target owns: on every target's steps, so the
    // steps that load the others show node idle.
    args.push("--monitor-pid".into());
    args.push(node.pid().to_string());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = stampede(&args);
    let stdout = text(&o.stdout);
    assert!(o.status.success(), "{}\n{stdout}", text(&o.stderr));

    // Each target's CPU is its own server's: what its monitor counted over its steps is what the
    // kernel counted for that process over the run (at most, and most of it: the ramp is most of
    // the run), and the cheap server used far less per request than the one burning 0.8 ms each.
    let mut per_request = Vec::new();
    for (k, (name, _)) in pids.iter().enumerate() {
        let run = run_json(&dir.join(name));
        let seen = monitored_cpu_s(&run);
        let kernel = kernel_cpu_s(name) - before[k];
        assert!(
            seen <= kernel + 0.1 && seen >= 0.3 * kernel,
            "{name}: its monitor saw {seen:.2} CPU-s, the kernel counted {kernel:.2}"
        );
        let served: f64 = run["steps"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["ok"].as_f64().unwrap())
            .sum();
        per_request.push(kernel / served.max(1.0));
        for s in run["steps"].as_array().unwrap() {
            let monitors = s["server_monitors"].as_array().unwrap();
            let whose = |watches: &str| -> Vec<&serde_json::Value> {
                monitors
                    .iter()
                    .filter(|m| m["watches"] == watches)
                    .collect()
            };
            let mine: Vec<&str> = whose("target")
                .iter()
                .map(|m| m["monitor"].as_str().unwrap())
                .collect();
            assert_eq!(
                mine,
                [*name],
                "{name}'s steps carry its own server, no other target's"
            );
            let shared = whose("shared");
            assert_eq!(
                shared.len(),
                1,
                "and the monitor no target owns: {monitors:?}"
            );
            let idle_node = shared[0]["target"]["cpu_pct"].as_f64().unwrap();
            if *name != "node" {
                assert!(
                    idle_node < 5.0,
                    "node idle while {name} is loaded: {idle_node} % of a core at {}",
                    s["step_value"]
                );
            }
        }
    }
    assert!(
        per_request[1] > 3.0 * per_request[0],
        "node's 0.8 ms a request against nginx's: {per_request:?}"
    );
    // What nginx counted is what its run says it answered.
    let nginx_run = run_json(&dir.join("nginx"));
    let answered: u64 = nginx_run["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["replies"].as_u64().unwrap())
        .sum();
    // stub_status counts its own request too.
    assert_eq!(nginx.requests() - nginx_before - 1, answered);

    // The knees, in their true order: the reference's cap (150) before node's CPU (under 1,250), and
    // nginx none within the ramp.
    let knee = |name: &str| run_json(&dir.join(name))["summary"]["knee"].clone();
    let (ref_knee, node_knee) = (knee("ref"), knee("node"));
    let value = |k: &serde_json::Value| k["step_value"].as_f64().unwrap_or(f64::INFINITY);
    assert!(
        value(&ref_knee) <= 300.0,
        "the reference's knee at its cap: {ref_knee}"
    );
    assert!(
        value(&ref_knee) < value(&node_knee) && value(&node_knee) <= 1800.0,
        "node's knee past the reference's, within the ramp: {node_knee}"
    );
    assert!(
        value(&knee("nginx")) > value(&node_knee),
        "nginx's knee, if any, past node's: {}",
        knee("nginx")
    );

    // The ranking says the same, in compare.json and at the end of stdout.
    // compare.tsv: one column of each target's own server's CPU.
    let tsv = std::fs::read_to_string(dir.join("compare.tsv")).unwrap();
    let header: Vec<&str> = tsv.lines().next().unwrap().split('\t').collect();
    for (name, _) in pids {
        let own = format!("srv_cpu_pct_{name}");
        assert_eq!(
            header.iter().filter(|c| **c == own).count(),
            1,
            "{own} in {header:?}"
        );
    }
    let compared: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("compare.json")).unwrap()).unwrap();
    let order: Vec<&str> = compared["ranking"]
        .as_array()
        .expect("compare.json's ranking")
        .iter()
        .map(|r| r["label"].as_str().unwrap())
        .collect();
    assert_eq!(order, ["nginx", "node", "ref"], "{}", compared["ranking"]);
    let table = &stdout[stdout
        .rfind("ranking, best first:")
        .expect("stdout's ranking")..];
    let ranked: Vec<&str> = table
        .lines()
        .skip(2)
        .take(3)
        .filter_map(|l| l.split_whitespace().nth(1))
        .collect();
    assert_eq!(ranked, ["nginx", "node", "ref"], "{table}");
    check_page(test, &dir.join("compare.html"), &["nginx", "node", "ref"]);
}

/// compare.html in headless Chromium: one server CPU line and one memory line per target.
fn check_page(test: &str, html: &Path, targets: &[&str]) {
    let Some(chromium) = browser::available(test) else {
        return;
    };
    let page = browser::load(&chromium, html).unwrap_or_else(|e| panic!("{e}"));
    let dom = browser::assert_clean(&page);
    let charts = browser::charts(&dom);
    for wanted in report::COMPARE_MONITOR_CHARTS {
        let (_, chart) = charts
            .iter()
            .find(|(n, _)| *n == wanted)
            .unwrap_or_else(|| {
                panic!(
                    "a {wanted} chart among {:?}",
                    charts.iter().map(|c| c.0).collect::<Vec<_>>()
                )
            });
        browser::assert_drawn(wanted, *chart);
        let mut series: Vec<&str> = chart
            .descendants()
            .into_iter()
            .filter(|e| e.name() == "g")
            .filter_map(|e| e.attr("data-n"))
            .collect();
        series.sort();
        assert_eq!(series, targets, "{wanted}: one line per target");
    }
}
