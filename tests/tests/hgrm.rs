//! Each step's `.hgrm` beside its hlog, from real runs: it is the step's merged latency (count, p50
//! under an injected delay), and HdrHistogram's own readers (the Python `hdrhistogram` package and
//! HdrHistogram's Java, via tests/hgrm/check.py) print the same file from the hlog.
use std::path::{Path, PathBuf};
use std::process::Command;

use results::distribution::Distribution;
use tests::{AgentProc, ServeProcess, run_ok, text};

fn hgrm(dir: &Path, step: u64) -> Distribution {
    let path = dir.join(format!("hlog/step-{step:03}.hgrm"));
    let body = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    Distribution::parse_hgrm(step as u32, &body)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn each_steps_hgrm_is_its_merged_latency() {
    let _serial = tests::serial();
    let target = ServeProcess::start(&["--delay", "20ms"]);
    // autobench's ramp: 20 then 40 new connections per second, 2 requests on each.
    let ran = run_ok(&[
        &target.url(),
        "--low-rate",
        "20",
        "--high-rate",
        "40",
        "--rate-step",
        "20",
        "--num-call",
        "2",
        "--step-duration",
        "2s",
    ]);
    assert_eq!(ran.steps().len(), 2);
    for step in ran.steps() {
        let n = step["step"].as_u64().unwrap();
        let d = hgrm(ran.dir.path(), n);
        // The latency histogram holds the served replies and, at their age, the requests given up.
        let latencies = step["ok"].as_u64().unwrap() + step["given_up"].as_u64().unwrap();
        assert!(latencies > 0, "{step}");
        assert_eq!(d.total, latencies, "step {n}: {step}");
        let p50 = d
            .points
            .iter()
            .find(|p| p.quantile >= 0.5)
            .map(|p| p.value_ms)
            .unwrap();
        assert!((20.0..=25.0).contains(&p50), "step {n}: p50 {p50} ms");
        // The same merge as run.json's statistics: its max is the .hgrm's last value.
        let max = step["latency_ms"]["max"].as_f64().unwrap();
        assert!(
            (max - d.max_ms).abs() < 0.01,
            "step {n}: {max} vs {}",
            d.max_ms
        );
    }
}

/// The Python that has `hdrhistogram` (.ci/run makes target/hgrm-venv; tests/hgrm/check.py says
/// how to make one), or why there is none.
fn hgrm_python() -> Result<PathBuf, String> {
    if let Some(py) = std::env::var_os("STAMPEDE_HGRM_PY") {
        return Ok(PathBuf::from(py));
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let venvs = [
        root.join("target/hgrm-venv/bin/python"),
        PathBuf::from("/tmp/hgrm-venv/bin/python"),
    ];
    venvs.into_iter().find(|p| p.is_file()).ok_or_else(|| {
        "no STAMPEDE_HGRM_PY and no target/hgrm-venv: python3 -m venv target/hgrm-venv && \
         target/hgrm-venv/bin/pip install hdrhistogram==0.10.8"
            .into()
    })
}

#[test]
fn hdrhistograms_own_readers_print_our_hgrm_from_our_hlog() {
    let ci = std::env::var("CI").is_ok_and(|v| v == "true");
    let python = match hgrm_python() {
        Ok(p) => p,
        Err(why) if ci => panic!("CI=true requires the .hgrm check: {why}"),
        Err(why) => {
            eprintln!("SKIPPED the .hgrm check against HdrHistogram's readers: {why}");
            return;
        }
    };
    let _serial = tests::serial();
    let target = ServeProcess::start(&["--delay", "5ms"]);
    // Two agents, so the hlog has Tag= lines to add up to the fleet's.
    let agents: Vec<AgentProc> = (0..2).map(|_| AgentProc::start(&[], &[])).collect();
    let addrs: Vec<String> = agents.iter().map(|a| a.addr.to_string()).collect();
    let ran = run_ok(&[
        &target.url(),
        "--agents",
        &addrs.join(","),
        "--model",
        "requests",
        "--steps",
        "50,150",
        "--step-duration",
        "1s",
    ]);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("hgrm/check.py");
    let o = Command::new(&python)
        .arg(&script)
        .arg(ran.dir.path())
        .args(["--java", if ci { "required" } else { "optional" }])
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", python.display()));
    let said = text(&o.stdout) + &text(&o.stderr);
    eprintln!("{said}");
    assert!(o.status.success(), "{said}");
    assert_eq!(said.matches(" values, 2 agents;").count(), 2, "{said}");
}

#[test]
fn each_named_requests_hlog_holds_what_requests_tsv_counts_by_hdrhistograms_reader() {
    let ci = std::env::var("CI").is_ok_and(|v| v == "true");
    let python = match hgrm_python() {
        Ok(p) => p,
        Err(why) if ci => panic!("CI=true requires the .hgrm check: {why}"),
        Err(why) => {
            eprintln!("SKIPPED the named hlogs' check against HdrHistogram's reader: {why}");
            return;
        }
    };
    let _serial = tests::serial();
    let target = ServeProcess::start(&["--delay", "2ms"]);
    // Two agents: each name's lines are the fleet's merge, which the count checks.
    let agents: Vec<AgentProc> = (0..2).map(|_| AgentProc::start(&[], &[])).collect();
    let addrs: Vec<String> = agents.iter().map(|a| a.addr.to_string()).collect();
    let plan_dir = tempfile::tempdir().unwrap();
    let plan = plan_dir.path().join("mix.toml");
    let mix = [
        ("home", 3, "/"),
        ("items.list", 2, "/items"),
        ("login", 1, "/login"),
    ]
    .map(|(name, weight, url)| {
        format!("[[request]]\nname = \"{name}\"\nweight = {weight}\nurl = \"{url}\"\n")
    })
    .join("\n");
    std::fs::write(&plan, mix).unwrap();
    let ran = run_ok(&[
        plan.to_str().unwrap(),
        &target.url(),
        "--agents",
        &addrs.join(","),
        "--model",
        "requests",
        "--steps",
        "60,120",
        "--step-duration",
        "1s",
    ]);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("hgrm/check.py");
    let o = Command::new(&python)
        .arg(&script)
        .arg(ran.dir.path())
        .args(["--java", "optional"])
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", python.display()));
    let said = text(&o.stdout) + &text(&o.stderr);
    eprintln!("{said}");
    assert!(o.status.success(), "{said}");
    for step in [1, 2] {
        for name in ["home", "items.list", "login"] {
            let line = format!("step-{step:03}.{name}.hlog: ");
            assert!(said.contains(&line), "{line} in {said}");
        }
    }
}
