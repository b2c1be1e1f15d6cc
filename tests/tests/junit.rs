//! `--junit FILE` as CI reads it: real `run`, `find-max` and `compare` against the reference
//! target, with conditions that hold and ones that breach, each file read by junitparser (PyPI; a
//! reader we did not write, via tests/junit/read.py), its counts and each failure's words checked
//! against what stderr said.
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::Value;
use tests::{ServeProcess, bin, text};

/// The Python that has junitparser (.ci/run makes target/ci-venv), or why there is none.
fn junit_python() -> Result<PathBuf, String> {
    if let Some(py) = std::env::var_os("STAMPEDE_JUNIT_PY") {
        return Ok(PathBuf::from(py));
    }
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/ci-venv/bin/python");
    let has = venv.is_file()
        && Command::new(&venv)
            .args(["-c", "import junitparser"])
            .status()
            .is_ok_and(|s| s.success());
    has.then_some(venv).ok_or_else(|| {
        "no STAMPEDE_JUNIT_PY and no target/ci-venv with junitparser: python3 -m venv \
         target/ci-venv && target/ci-venv/bin/pip install junitparser==5.0.3"
            .into()
    })
}

/// The reader, or None (skipped, said why) outside CI; under CI=true its absence fails.
fn reader(test: &str) -> Option<PathBuf> {
    match junit_python() {
        Ok(p) => Some(p),
        Err(why) if std::env::var("CI").is_ok_and(|v| v == "true") => {
            panic!("CI=true requires the JUnit reader: {why}")
        }
        Err(why) => {
            eprintln!("SKIPPED {test}: {why}");
            None
        }
    }
}

/// What junitparser read of `file`.
fn read(python: &Path, file: &Path) -> Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("junit/read.py");
    let o = Command::new(python)
        .arg(&script)
        .arg(file)
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", python.display()));
    assert!(o.status.success(), "junitparser: {}", text(&o.stderr));
    serde_json::from_slice(&o.stdout).expect("read.py prints JSON")
}

fn stampede(args: &[&str]) -> Output {
    Command::new(bin("stampede"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("stampede runs")
}

/// (result, message) of the case `name` of the only suite, or of suite `suite`.
fn case<'a>(read: &'a Value, suite: usize, name: &str) -> &'a Value {
    read["suites"][suite]["cases"]
        .as_array()
        .expect("cases")
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no case {name}: {read}"))
}

fn counts(read: &Value) -> (u64, u64, u64) {
    let n = |k: &str| read[k].as_u64().unwrap_or_else(|| panic!("{k}: {read}"));
    (n("tests"), n("failures"), n("errors"))
}

/// stderr's lines that start `stampede: `, without it.
fn said(o: &Output) -> Vec<String> {
    text(&o.stderr)
        .lines()
        .filter_map(|l| l.strip_prefix("stampede: "))
        .map(str::to_string)
        .collect()
}

const RAMP: [&str; 6] = [
    "--steps",
    "50,100",
    "--step-duration",
    "1s",
    "--quiet",
    "--warmup",
];

fn run(url: &str, dir: &Path, out: &str, extra: &[&str]) -> Output {
    let out = dir.join(out);
    let mut args = vec!["run", url];
    args.extend(RAMP);
    args.extend(["0s", "--out", out.to_str().unwrap()]);
    args.extend(extra);
    stampede(&args)
}

#[test]
fn a_run_s_conditions_are_testcases_and_a_breach_fails_in_stderr_s_words() {
    let Some(py) = reader("a_run_s_conditions_are_testcases") else {
        return;
    };
    let _serial = tests::serial();
    let target = ServeProcess::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("junit.xml");
    // Conditions with the characters XML must escape (hostile names and words are results'
    // unit test): the reader gets them back as written.
    let label = "nightly.1";
    let o = run(
        &target.url(),
        dir.path(),
        "breached",
        &[
            "--label",
            label,
            "--fail-on",
            "p99>1us",
            "--fail-on",
            "failed>50%",
            "--fail-on",
            "requests<1",
            "--junit",
            file.to_str().unwrap(),
        ],
    );
    assert_eq!(o.status.code(), Some(3), "{}", text(&o.stderr));
    let r = read(&py, &file);
    assert_eq!(r["name"], "stampede run");
    assert_eq!(counts(&r), (4, 1, 0), "{r}");
    assert_eq!(case(&r, 0, "--fail-on requests<1")["result"], "passed");
    assert_eq!(r["suites"][0]["name"], label);
    assert!(r["suites"][0]["timestamp"].as_str().is_some(), "{r}");
    assert_eq!(case(&r, 0, "run")["result"], "passed");
    assert_eq!(case(&r, 0, "--fail-on failed>50%")["result"], "passed");
    let breached = case(&r, 0, "--fail-on p99>1us");
    assert_eq!(breached["result"], "failure");
    assert_eq!(breached["classname"], label);
    // Each step breached it: the message is stderr's first line of it, the text every line.
    let lines: Vec<String> = said(&o)
        .into_iter()
        .filter_map(|l| l.strip_prefix(&format!("{label}: ")).map(str::to_string))
        .collect();
    assert_eq!(lines.len(), 2, "{}", text(&o.stderr));
    assert_eq!(breached["message"], lines[0].as_str());
    assert_eq!(breached["text"], lines.join("\n").as_str());

    // The same run with conditions that hold: no failure, exit 0, and the file replaced in
    // place (written through, as a symlink's target).
    let link = dir.path().join("link.xml");
    std::os::unix::fs::symlink(&file, &link).unwrap();
    let o = run(
        &target.url(),
        dir.path(),
        "held",
        &[
            "--fail-on",
            "p99>10s",
            "--fail-on",
            "failed>50%",
            "--junit",
            link.to_str().unwrap(),
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(std::fs::symlink_metadata(&link).unwrap().is_symlink());
    let r = read(&py, &file);
    assert_eq!(counts(&r), (3, 0, 0), "{r}");
    assert_eq!(r["suites"][0]["name"], target.url().trim_end_matches('/'));
}

#[test]
fn targets_side_by_side_are_a_suite_each() {
    let Some(py) = reader("targets_side_by_side_are_a_suite_each") else {
        return;
    };
    let _serial = tests::serial();
    let fast = ServeProcess::start(&[]);
    let slow = ServeProcess::start(&["--delay", "100ms"]);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("side.xml");
    let (a, b) = (
        format!("fast={}", fast.url()),
        format!("slow={}", slow.url()),
    );
    let out = dir.path().join("side");
    let mut args = vec!["run", &a, &b];
    args.extend(RAMP);
    args.extend(["0s", "--out", out.to_str().unwrap()]);
    args.extend(["--fail-on", "p99>90ms", "--junit", file.to_str().unwrap()]);
    let o = stampede(&args);
    // Every reply of the slow one takes 100 ms, the fast one's far less: only the slow one
    // breached (exit 3); its suite has the failure, the fast one's none.
    assert_eq!(o.status.code(), Some(3), "{}", text(&o.stderr));
    let r = read(&py, &file);
    assert_eq!(counts(&r), (4, 1, 0), "{r}");
    assert_eq!(r["suites"][0]["name"], "fast");
    assert_eq!(r["suites"][1]["name"], "slow");
    assert_eq!(case(&r, 0, "--fail-on p99>90ms")["result"], "passed");
    let slow_case = case(&r, 1, "--fail-on p99>90ms");
    assert_eq!(slow_case["result"], "failure");
    let line = format!("slow: {}", slow_case["message"].as_str().unwrap());
    assert!(said(&o).contains(&line), "{line}\n{}", text(&o.stderr));
}

#[test]
fn a_run_that_cannot_start_is_an_error_case_and_a_directory_is_refused_before_any_load() {
    let Some(py) = reader("a_run_that_cannot_start_is_an_error_case") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("junit.xml");
    // A bad condition: exit 2, and the file says the run errored, in stderr's words.
    let o = run(
        "http://127.0.0.1:9/",
        dir.path(),
        "bad",
        &["--fail-on", "p99>", "--junit", file.to_str().unwrap()],
    );
    assert_eq!(o.status.code(), Some(2));
    let r = read(&py, &file);
    assert_eq!(counts(&r), (1, 0, 1), "{r}");
    let errored = case(&r, 0, "run");
    assert_eq!(errored["result"], "error");
    let first = said(&o).join("\n");
    assert!(
        first.starts_with(errored["message"].as_str().unwrap().lines().next().unwrap()),
        "{errored}\n{first}"
    );
    // Inside the results directory a refused run never made (`--out never --junit never/junit.xml`,
    // as a CI job writes it): the directory is made for the report, which says why.
    let inside = dir.path().join("never").join("junit.xml");
    let o = run(
        "http://127.0.0.1:9/",
        dir.path(),
        "never",
        &["--fail-on", "p99>", "--junit", inside.to_str().unwrap()],
    );
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(counts(&read(&py, &inside)), (1, 0, 1));
    // A directory is no file to write: refused, exit 2, nothing sent.
    let o = run(
        "http://127.0.0.1:9/",
        dir.path(),
        "dir",
        &["--junit", dir.path().to_str().unwrap()],
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("--junit"), "{}", text(&o.stderr));
    assert!(!dir.path().join("dir").exists());
}

#[test]
fn a_search_s_slos_and_capacity_are_testcases() {
    let Some(py) = reader("a_search_s_slos_and_capacity_are_testcases") else {
        return;
    };
    let _serial = tests::serial();
    let fast = ServeProcess::start(&[]);
    let slow = ServeProcess::start(&["--delay", "100ms"]);
    let dir = tempfile::tempdir().unwrap();
    let search = |target: &ServeProcess, out: &str, slo: &str, file: &Path| {
        let out = dir.path().join(out);
        stampede(&[
            "find-max",
            &target.url(),
            "--slo",
            slo,
            "--slo",
            "failed<50%",
            "--model",
            "requests",
            "--start",
            "100",
            "--max-rate",
            "200",
            "--probe",
            "1s",
            "--warmup",
            "0s",
            "--cooldown",
            "0s",
            "--quiet",
            "--out",
            out.to_str().unwrap(),
            "--junit",
            file.to_str().unwrap(),
        ])
    };
    // The ceiling passes: the SLOs held, and the capacity is only a lower bound (exit 4), which
    // its case fails with the answer stdout printed.
    let file = dir.path().join("held.xml");
    let o = search(&fast, "held", "p99<10s", &file);
    let stdout = text(&o.stdout);
    assert_eq!(o.status.code(), Some(4), "{stdout}{}", text(&o.stderr));
    let r = read(&py, &file);
    assert_eq!(r["name"], "stampede find-max");
    assert_eq!(counts(&r), (4, 1, 0), "{r}");
    assert_eq!(case(&r, 0, "--slo p99<10s")["result"], "passed");
    assert_eq!(case(&r, 0, "--slo failed<50%")["result"], "passed");
    let capacity = case(&r, 0, "capacity");
    assert_eq!(capacity["result"], "failure");
    assert_eq!(capacity["type"], "lower_bound_only");
    let answer = format!("capacity: {} (", capacity["message"].as_str().unwrap());
    assert!(stdout.contains(&answer), "{stdout}\n{capacity}");

    // Every reply takes 100 ms, so no rate meets p99<20ms: doomed (exit 6), that SLO fails with
    // the lowest fail's reason and the other holds.
    let file = dir.path().join("doomed.xml");
    let o = search(&slow, "doomed", "p99<20ms", &file);
    let stdout = text(&o.stdout);
    assert_eq!(o.status.code(), Some(6), "{stdout}{}", text(&o.stderr));
    let r = read(&py, &file);
    let json: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("doomed/run.json")).unwrap())
            .unwrap();
    assert_eq!(counts(&r), (4, 2, 0), "{r}");
    assert_eq!(case(&r, 0, "--slo failed<50%")["result"], "passed");
    let slo = case(&r, 0, "--slo p99<20ms");
    assert_eq!(slo["result"], "failure", "{r}");
    assert_eq!(slo["message"], json["capacity"]["lowest_fail"]["reason"]);
    assert_eq!(case(&r, 0, "capacity")["type"], "doomed");
    assert_eq!(case(&r, 0, "run")["result"], "passed");
}

#[test]
fn compare_s_gates_are_testcases_and_a_regression_fails_in_stderr_s_words() {
    let Some(py) = reader("compare_s_gates_are_testcases") else {
        return;
    };
    let _serial = tests::serial();
    let fast = ServeProcess::start(&[]);
    let slow = ServeProcess::start(&["--delay", "100ms"]);
    let dir = tempfile::tempdir().unwrap();
    for (url, out) in [(fast.url(), "main"), (slow.url(), "pr")] {
        let o = run(&url, dir.path(), out, &[]);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    }
    let file = dir.path().join("compare.xml");
    let d = |s: &str| dir.path().join(s).to_str().unwrap().to_string();
    let html = d("compare.html");
    let compare = |gates: &[&str], regression: bool| {
        let mut args = vec!["compare".to_string(), d("main"), d("pr"), "-o".into()];
        args.push(html.clone());
        for g in gates {
            args.extend(["--regression".to_string(), g.to_string()]);
        }
        if regression {
            args.push("--fail-on-regression".into());
        }
        args.extend(["--junit".to_string(), file.to_str().unwrap().to_string()]);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        stampede(&args)
    };
    // 100 ms more on every reply: p99 got far worse than 50%; the failed share did not move.
    let o = compare(&["p99>50%", "failed>10%"], true);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o.stderr));
    let r = read(&py, &file);
    assert_eq!(r["name"], "stampede compare");
    assert_eq!(counts(&r), (4, 2, 0), "{r}");
    assert_eq!(case(&r, 0, "compare")["result"], "passed");
    assert_eq!(case(&r, 0, "--regression failed>10%")["result"], "passed");
    let gate = case(&r, 0, "--regression p99>50%");
    assert_eq!(gate["result"], "failure");
    let lines = said(&o);
    assert!(
        lines.iter().any(|l| l == gate["message"].as_str().unwrap()),
        "{gate}\n{lines:?}"
    );
    let worse = case(&r, 0, "--fail-on-regression");
    assert_eq!(worse["result"], "failure");
    let first = format!(
        "--fail-on-regression: {}",
        worse["message"].as_str().unwrap()
    );
    assert!(lines.contains(&first), "{worse}\n{lines:?}");

    // The other way round nothing got worse: every case passes, exit 0.
    let o = Command::new(bin("stampede"))
        .args(["compare", &d("pr"), &d("main"), "-o", &html])
        .args(["--regression", "p99>50%", "--fail-on-regression", "--junit"])
        .arg(&file)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert_eq!(counts(&read(&py, &file)), (3, 0, 0));
}
