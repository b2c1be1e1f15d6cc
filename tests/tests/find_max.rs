//! `stampede find-max` against targets whose limit the test knows: `stampede serve --capacity N`
//! (its knee), a closed port (doomed), an agent capped by its own --max-rate (a lower bound only), a
//! generator starved on purpose (generator-bound), a server that wedges at its first overload
//! (server_unrecovered), and a search cut short by Ctrl-C or its deadline (the bounds so far).
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::Duration;

use tests::nginx::Nginx;
use tests::{AgentProc, Lines, ServeProcess, bin, closed_port, run_json, signal, stampede, text};

/// Runs a search into a fresh directory: its exit code, stdout, stderr and run.json.
fn find_max(args: &[&str]) -> (i32, String, String, serde_json::Value, tempfile::TempDir) {
    find_max_with(args, |_| {})
}

/// [`find_max`] with the command changed first (its CPU, its fd limit).
fn find_max_with(
    args: &[&str],
    change: impl FnOnce(&mut Command),
) -> (i32, String, String, serde_json::Value, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let mut cmd = Command::new(bin("stampede"));
    cmd.arg("find-max")
        .args(args)
        .args(["--quiet", "--out"])
        .arg(&out)
        .stdin(Stdio::null());
    change(&mut cmd);
    let o = cmd.output().expect("stampede runs");
    let code = o.status.code().expect("exited");
    let json = run_json(&out);
    (code, text(&o.stdout), text(&o.stderr), json, dir)
}

fn capacity(json: &serde_json::Value) -> &serde_json::Value {
    &json["capacity"]
}

fn f(v: &serde_json::Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("{v} is a number"))
}

#[test]
fn a_server_of_known_capacity_is_found_within_ten_percent_and_confirmed() {
    let _serial = tests::serial();
    let target = ServeProcess::start(&["--capacity", "600"]);
    let (code, stdout, stderr, json, dir) = find_max(&[
        &target.url(),
        "--slo",
        "p99<50ms",
        "--model",
        "requests",
        "--start",
        "200",
        "--probe",
        "2s",
        "--confirm",
        "2s",
        "--warmup",
        "0s",
        "--cooldown",
        "500ms",
        "--precision",
        "5%",
    ]);
    let c = capacity(&json);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert_eq!(c["status"], "resolved", "{c}");
    let max = f(&c["max_rate"]["offered"]);
    let fail = f(&c["lowest_fail"]["offered"]);
    assert!(
        (540.0..=660.0).contains(&max),
        "max {max} of a 600/s server"
    );
    assert!(fail > max && fail / max <= 1.05 + 1e-9, "{max} .. {fail}");
    assert_eq!(c["lowest_fail"]["slo"], "p99<50ms");
    assert_eq!(c["confirmations"], 2);
    assert!(stdout.contains("capacity: sustains "), "{stdout}");
    assert!(stdout.contains("status: resolved (exit 0)"), "{stdout}");

    // Every probe is a step: its role and class in run.json and in steps.tsv, the same.
    let steps = json["steps"].as_array().unwrap();
    let probes = &c["probes"];
    let counted: u64 = ["ramp", "bisect", "confirm", "recovery"]
        .iter()
        .map(|k| probes[k].as_u64().unwrap())
        .sum();
    assert_eq!(steps.len() as u64, counted, "no warmup: one step per probe");
    let tsv = std::fs::read_to_string(dir.path().join("out/steps.tsv")).unwrap();
    let mut lines = tsv.lines();
    let head: Vec<&str> = lines.next().unwrap().split('\t').collect();
    let (role, class) = (
        head.iter()
            .position(|h| *h == "role")
            .expect("a role column"),
        head.iter()
            .position(|h| *h == "class")
            .expect("a class column"),
    );
    for (step, line) in steps.iter().zip(lines) {
        let cells: Vec<&str> = line.split('\t').collect();
        assert_eq!(cells[role], step["probe"]["role"], "{line}");
        assert_eq!(cells[class], step["probe"]["class"], "{line}");
    }
    let roles: Vec<&str> = steps
        .iter()
        .map(|s| s["probe"]["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles[0], "ramp");
    assert!(
        roles.contains(&"bisect") && roles.ends_with(&["confirm"]),
        "{roles:?}"
    );

    // The server's own count: every request the search sent was one it served, none invented.
    let served: u64 = steps.iter().map(|s| s["ok"].as_u64().unwrap()).sum();
    assert_eq!(
        served,
        target.requests(),
        "the target's count of its requests"
    );
    let page = std::fs::read_to_string(dir.path().join("out/report.html")).unwrap();
    assert!(page.contains("sustains "), "the report says the answer");
}

#[test]
fn a_target_that_refuses_every_connection_is_doomed() {
    let url = format!("http://127.0.0.1:{}/", closed_port());
    let (code, stdout, stderr, json, _dir) = find_max(&[
        &url,
        "--slo",
        "failed<1%",
        "--start",
        "200",
        "--probe",
        "1s",
        "--warmup",
        "0s",
    ]);
    let c = capacity(&json);
    assert_eq!(code, 6, "{stdout}\n{stderr}");
    assert_eq!(c["status"], "doomed");
    assert!(c["max_rate"].is_null());
    assert_eq!(f(&c["lowest_fail"]["offered"]), 200.0);
    // Refused connections are the target's doing, not a generator at its limit.
    assert_eq!(json["steps"][0]["probe"]["class"], "fail");
}

#[test]
fn a_search_against_nginx_sends_what_nginx_counts() {
    // A server we did not write: its own counter, not ours, says what the probes sent.
    let Some(nginx) = Nginx::start("a_search_against_nginx_sends_what_nginx_counts") else {
        return;
    };
    let _serial = tests::serial();
    let before = nginx.requests();
    let (code, stdout, stderr, json, _dir) = find_max(&[
        &nginx.url(),
        "--slo",
        "p99<20ms",
        "--model",
        "requests",
        "--start",
        "1000",
        "--max-rate",
        "2000",
        "--probe",
        "1s",
        "--warmup",
        "0s",
        "--cooldown",
        "200ms",
    ]);
    // This read counts itself.
    let served = nginx.requests() - before - 1;
    let c = capacity(&json);
    assert_eq!(code, 4, "{stdout}\n{stderr}");
    assert_eq!(c["status"], "lower_bound_only", "{c}");
    assert_eq!(c["ceiling"]["by"], "--max-rate", "{c}");
    assert_eq!(f(&c["max_rate"]["offered"]), 2000.0, "{c}");
    let steps = json["steps"].as_array().unwrap();
    let sum = |key: &str| -> u64 { steps.iter().map(|s| s[key].as_u64().unwrap()).sum() };
    // 1000 req/s for the 1.25 s a p99's samples need, then 2000 req/s for 1 s.
    assert!(sum("requests") >= 3000, "{}", sum("requests"));
    assert_eq!(
        sum("requests"),
        served,
        "run.json's requests against nginx's stub_status"
    );
    assert_eq!(
        sum("ok"),
        served,
        "run.json's ok against nginx's stub_status"
    );
}

#[test]
fn a_closed_loop_against_a_target_that_refuses_is_doomed_even_without_an_slo() {
    let url = format!("http://127.0.0.1:{}/", closed_port());
    let (code, stdout, stderr, json, _dir) = find_max(&[
        &url,
        "--model",
        "concurrency",
        "--start",
        "10",
        "--probe",
        "1s",
        "--warmup",
        "0s",
    ]);
    let c = capacity(&json);
    assert_eq!(code, 6, "{stdout}\n{stderr}");
    assert_eq!(c["status"], "doomed", "{c}");
    assert_eq!(c["lowest_fail"]["rule"], "nothing_served");
    assert!(
        stdout.contains("is the target up and reachable?"),
        "{stdout}"
    );
}

#[test]
fn an_agent_capped_by_its_own_max_rate_gives_a_lower_bound_not_a_maximum() {
    let _serial = tests::serial();
    let target = ServeProcess::start(&["--capacity", "5000"]);
    let agent = AgentProc::start(&["--max-rate", "300"], &[]);
    let agents = agent.addr.to_string();
    let (code, stdout, stderr, json, _dir) = find_max(&[
        &target.url(),
        "--agents",
        &agents,
        "--slo",
        "failed<1%",
        "--model",
        "requests",
        "--start",
        "100",
        "--probe",
        "1s",
        "--warmup",
        "0s",
        "--cooldown",
        "0s",
    ]);
    let c = capacity(&json);
    assert_eq!(code, 4, "{stdout}\n{stderr}");
    assert_eq!(c["status"], "lower_bound_only");
    assert_eq!(f(&c["ceiling"]["rate"]), 300.0, "{c}");
    assert_eq!(c["ceiling"]["by"], "the agents' limits");
    assert_eq!(f(&c["max_rate"]["offered"]), 300.0);
    assert!(c["lowest_fail"].is_null());
    assert!(
        stdout.contains("lower bound, not a maximum"),
        "{stdout}\n{stderr}"
    );
    let rates: Vec<f64> = json["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| f(&s["step_value"]))
        .collect();
    assert_eq!(
        rates,
        vec![100.0, 200.0, 300.0],
        "never above the agent's cap"
    );
}

#[test]
fn a_generator_out_of_file_descriptors_is_never_a_bound() {
    let _serial = tests::serial();
    // Each connection held half a second: 2,000 new ones a second want 1,000 open at once, and the
    // generator may open 400 descriptors in all (soft and hard: the agent raises soft to hard).
    let target = ServeProcess::start(&["--delay", "500ms"]);
    let args = [
        &target.url(),
        "--slo",
        "failed<1%",
        "--model",
        "connections",
        "--start",
        "2000",
        "--probe",
        "1s",
        "--timeout",
        "1s",
        "--warmup",
        "0s",
        "--cooldown",
        "1s",
    ];
    let (code, stdout, stderr, json, _dir) = find_max_with(&args, |cmd| {
        tests::with_nofile(cmd, 400);
    });
    assert_eq!(code, 5, "{stdout}\n{stderr}");
    let c = capacity(&json);
    assert_eq!(c["status"], "generator_bound", "{c}");
    assert!(c["lowest_fail"].is_null(), "no fail was the server's: {c}");
    let steps = json["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 3, "tried three times at one rate");
    for s in steps {
        assert_eq!(s["probe"]["class"], "invalid", "{}", s["probe"]);
        assert_eq!(s["generator_bound"], true);
    }
    assert!(stdout.contains("the generator is the limit"), "{stdout}");
    assert_eq!(
        json["status"], "completed",
        "the coordinator kept its files"
    );
}

/// Pins the child to one CPU (between fork and exec: only the child).
fn pinned(cmd: &mut Command, cpu: usize) -> &mut Command {
    // SAFETY: sched_setaffinity on the child itself, with a set we own.
    unsafe {
        cmd.pre_exec(move || {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(cpu, &mut set);
            if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        })
    }
}

/// A process stopped when dropped: SIGTERM, which `timeout` passes on to what it runs (a SIGKILL
/// would leave that running), then waited for.
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        signal(&self.0, libc::SIGTERM);
        let _ = self.0.wait();
    }
}

#[test]
fn a_generator_starved_of_cpu_is_never_a_bound() {
    let _serial = tests::serial();
    if std::thread::available_parallelism().map_or(1, |n| n.get()) < 2 {
        eprintln!("skipped: needs two CPUs, one for the target and one for the starved generator");
        return;
    }
    // The target alone on CPU 1; the generator's one worker thread on CPU 0 beside two busy
    // loops (each bounded: `timeout` ends it), so it gets a third of a core for 40,000 req/s.
    let ready = tempfile::tempdir().unwrap();
    let file = ready.path().join("ready.json");
    let mut serve = Command::new(bin("stampede"));
    pinned(&mut serve, 1)
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--threads",
            "1",
            "--ready-file",
        ])
        .arg(&file)
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut serve = Killed(serve.spawn().unwrap());
    let log = Lines::of(&mut serve.0);
    let addr = tests::ready_addr(&file, &mut serve.0, &log);
    let _spin: Vec<Killed> = (0..2)
        .map(|_| {
            let mut c = Command::new("timeout");
            pinned(&mut c, 0)
                .args(["60", "sh", "-c", "while :; do :; done"])
                .stdout(Stdio::null());
            Killed(c.spawn().unwrap())
        })
        .collect();
    let url = format!("http://{addr}/");
    let args = [
        &url,
        "--slo",
        "p99<100ms",
        "--model",
        "requests",
        "--threads",
        "1",
        "--start",
        "40000",
        "--max-rate",
        "40000",
        "--probe",
        "2s",
        "--timeout",
        "1s",
        "--warmup",
        "0s",
        "--cooldown",
        "1s",
    ];
    let (code, stdout, stderr, json, _dir) = find_max_with(&args, |cmd| {
        pinned(cmd, 0);
    });
    assert_eq!(code, 5, "{stdout}\n{stderr}");
    let c = capacity(&json);
    assert_eq!(c["status"], "generator_bound", "{c}");
    assert!(c["lowest_fail"].is_null(), "no fail was the server's: {c}");
    for s in json["steps"].as_array().unwrap() {
        assert_eq!(s["probe"]["class"], "invalid", "{}", s["probe"]);
        assert!(
            f(&s["generator"]["lag_p99_ms"]) > 100.0,
            "a starved generator lags"
        );
    }
}

#[test]
fn a_server_that_breaks_at_its_first_overload_is_not_bisected() {
    let _serial = tests::serial();
    let target = ServeProcess::start(&["--capacity", "500", "--wedge-after", "100ms"]);
    let (code, stdout, stderr, json, _dir) = find_max(&[
        &target.url(),
        "--slo",
        "failed<1%",
        "--model",
        "requests",
        "--start",
        "200",
        "--probe",
        "1s",
        "--timeout",
        "1s",
        "--warmup",
        "0s",
        "--cooldown",
        "500ms",
    ]);
    let c = capacity(&json);
    assert_eq!(code, 7, "{stdout}\n{stderr}");
    assert_eq!(c["status"], "server_unrecovered", "{c}");
    let steps = json["steps"].as_array().unwrap();
    let last = steps.last().unwrap();
    assert_eq!(last["probe"]["role"], "recovery");
    assert_eq!(last["probe"]["class"], "fail");
    assert!(
        !steps.iter().any(|s| s["probe"]["role"] == "bisect"),
        "a broken server is not bisected"
    );
    // The bounds known before it broke are kept.
    assert!(f(&c["max_rate"]["offered"]) >= 200.0, "{c}");
}

#[test]
fn a_deadline_ends_the_search_with_the_bounds_it_had() {
    let _serial = tests::serial();
    let target = ServeProcess::start(&["--capacity", "5000"]);
    let (code, stdout, stderr, json, _dir) = find_max(&[
        &target.url(),
        "--slo",
        "failed<1%",
        "--model",
        "requests",
        "--start",
        "100",
        "--probe",
        "1s",
        "--warmup",
        "0s",
        "--cooldown",
        "500ms",
        "--deadline",
        "4s",
    ]);
    let c = capacity(&json);
    assert_eq!(code, 8, "{stdout}\n{stderr}");
    assert_eq!(c["status"], "deadline");
    assert!(f(&c["max_rate"]["offered"]) >= 100.0, "{c}");
    // No probe (nor the cooldown before it) was started that would end past the deadline; the
    // slack is each step's own start-up (clocks, the start instant).
    assert!(f(&c["elapsed_s"]) < 4.0 + 2.0, "{c}");
    assert_eq!(json["status"], "completed");
}

#[test]
fn ctrl_c_keeps_every_probe_and_the_bounds_so_far() {
    let _serial = tests::serial();
    let target = ServeProcess::start(&["--capacity", "5000"]);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    // Probe 2 done: the search waits out the cooldown before probe 3, which it has asked for.
    interrupted_after(&[target.url()], &out, "probe 2 (ramp)");
    let json = run_json(&out);
    let c = capacity(&json);
    assert_eq!(c["status"], "interrupted", "{c}");
    assert_eq!(json["status"], "aborted");
    assert_eq!(
        f(&c["max_rate"]["offered"]),
        200.0,
        "two probes had passed: {c}"
    );
    let steps = json["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 2, "every probe kept");
    let counted: u64 = ["ramp", "bisect", "confirm", "recovery"]
        .iter()
        .map(|k| c["probes"][k].as_u64().unwrap())
        .sum();
    assert_eq!(
        counted, 2,
        "the probe asked for in the cooldown never ran: {c}"
    );
}

#[test]
fn step_shaping_flags_are_refused_naming_the_search_s_own() {
    for (flag, instead) in [
        (vec!["--steps", "10,20"], "--start and --max-rate"),
        (vec!["--step-duration", "5s"], "--probe"),
        (vec!["--stop-on", "p99>1s"], "--slo"),
        (vec!["--slo", "p99>50ms"], "p99<50ms"),
    ] {
        let mut args = vec!["find-max", "http://127.0.0.1:9/", "--slo", "p99<1s"];
        args.extend(flag.iter().copied());
        let o = stampede(&args);
        assert_eq!(o.status.code(), Some(2), "{flag:?}");
        let err = text(&o.stderr);
        assert!(err.contains(flag[0]) && err.contains(instead), "{err}");
    }
    let o = stampede(&["find-max", "http://127.0.0.1:9/", "--precision", "0%"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o.stderr).contains("--precision"),
        "{}",
        text(&o.stderr)
    );
    // Several targets are searched side by side, each named.
    let o = stampede(&["find-max", "a=http://127.0.0.1:9/", "http://127.0.0.1:8/"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o.stderr).contains("target 2 (http://127.0.0.1:8/) has no label"),
        "{}",
        text(&o.stderr)
    );
}

/// Runs `stampede find-max` over `targets` (`NAME=URL` each) with `args`: its exit code, stdout,
/// stderr and the directory that holds each target's own.
fn find_max_side(targets: &[String], args: &[&str]) -> (i32, String, String, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let o = Command::new(bin("stampede"))
        .arg("find-max")
        .args(targets)
        .args(args)
        .args(["--quiet", "--out"])
        .arg(dir.path().join("out"))
        .stdin(Stdio::null())
        .output()
        .expect("stampede runs");
    let code = o.status.code().expect("exited");
    (code, text(&o.stdout), text(&o.stderr), dir)
}

#[test]
fn several_targets_were_each_searched_and_ranked_by_their_true_capacity() {
    let _serial = tests::serial();
    // Named so that the command line's order is not the ranking's.
    let slow = ServeProcess::start(&["--capacity", "400"]);
    let fast = ServeProcess::start(&["--capacity", "900"]);
    let targets = [
        format!("slow={}", slow.url()),
        format!("fast={}", fast.url()),
    ];
    let (code, stdout, stderr, dir) = find_max_side(
        &targets,
        &[
            "--slo",
            "p99<50ms",
            "--model",
            "requests",
            "--start",
            "200",
            "--probe",
            "2s",
            "--confirm",
            "2s",
            "--warmup",
            "0s",
            "--cooldown",
            "0s",
            "--precision",
            "25%",
            "--repeat",
            "1",
        ],
    );
    let out = dir.path().join("out");
    let max = |label: &str, truth: f64| {
        let json = run_json(&out.join(label));
        let c = capacity(&json).clone();
        assert_eq!(c["status"], "resolved", "{label}: {c}\n{stdout}\n{stderr}");
        let max = f(&c["max_rate"]["offered"]);
        // Within the search's 25% and the box's noise, below the truth's next bisection.
        assert!(
            (truth * 0.6..=truth * 1.15).contains(&max),
            "{label}: max {max} of a {truth}/s server"
        );
        (max, c)
    };
    let (slow_max, slow_c) = max("slow", 400.0);
    let (fast_max, fast_c) = max("fast", 900.0);
    assert!(fast_max > slow_max, "{fast_max} against {slow_max}");
    assert_eq!(code, 0, "both resolved: {stdout}\n{stderr}");
    // Each target's answer under its label, then the ranking, best first, on the last line.
    assert!(stdout.contains("capacity (slow): sustains "), "{stdout}");
    assert!(stdout.contains("capacity (fast): sustains "), "{stdout}");
    let last = stdout.lines().last().unwrap_or_default();
    let human = |v: f64| results::step::human(v);
    assert_eq!(
        last,
        format!(
            "max under p99<50ms: fast {} req/s, slow {}",
            human(fast_max),
            human(slow_max)
        ),
        "{stdout}"
    );
    // The comparison beside them carries each target's capacity as its run.json has it.
    let compare: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("compare.json")).unwrap()).unwrap();
    let runs = compare["runs"].as_array().unwrap();
    let labels: Vec<&str> = runs.iter().map(|r| r["label"].as_str().unwrap()).collect();
    assert_eq!(labels, ["slow", "fast"]);
    assert_eq!(runs[0]["capacity"], slow_c);
    assert_eq!(runs[1]["capacity"], fast_c);
    // The ranking in compare.json, .tsv and .html is the searches': by the rate each sustained,
    // with the same line stdout ends with.
    assert_eq!(compare["max_under_slo"], last, "{compare}");
    let ranking = compare["ranking"].as_array().unwrap();
    let ranked: Vec<(&str, f64, &str)> = ranking
        .iter()
        .map(|r| {
            let search = r["search"].as_str().unwrap();
            (r["label"].as_str().unwrap(), f(&r["max_rate"]), search)
        })
        .collect();
    assert_eq!(
        ranked,
        [
            ("fast", fast_max, "resolved"),
            ("slow", slow_max, "resolved")
        ]
    );
    let tsv = std::fs::read_to_string(out.join("compare.tsv")).unwrap();
    let block: Vec<&str> = tsv.lines().skip_while(|l| !l.starts_with('#')).collect();
    assert_eq!(block[1], format!("# {last}"), "{tsv}");
    assert!(block[2].ends_with("\tmax_rate\tsearch"), "{tsv}");
    assert!(
        block[3].starts_with("# 1\tfast\t")
            && block[3].ends_with(&format!("\t{fast_max}\tresolved")),
        "{tsv}"
    );
    let page = std::fs::read_to_string(out.join("compare.html")).unwrap();
    let line = page.find("<p class=\"max-under-slo\">max under p99&lt;50ms: fast ");
    let table = page.find("<table id=\"ranking\">");
    assert!(
        line.is_some() && line < table,
        "the answers' line opens the page"
    );
}

#[test]
fn ctrl_c_concluded_every_target_s_search_with_its_bounds_so_far() {
    let _serial = tests::serial();
    let a = ServeProcess::start(&["--capacity", "5000"]);
    let b = ServeProcess::start(&["--capacity", "5000"]);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    // Both targets' probe 2 done: a's search waits out the cooldown before its probe 3.
    let stdout = interrupted_after(
        &[format!("a={}", a.url()), format!("b={}", b.url())],
        &out,
        "b: probe 2 (ramp)",
    );
    for label in ["a", "b"] {
        let json = run_json(&out.join(label));
        let c = capacity(&json);
        assert_eq!(c["status"], "interrupted", "{label}: {c}");
        assert_eq!(json["status"], "aborted", "{label}");
        assert_eq!(
            f(&c["max_rate"]["offered"]),
            200.0,
            "{label}: two probes had passed: {c}"
        );
        assert_eq!(json["steps"].as_array().unwrap().len(), 2, "{label}");
    }
    // Level at 200 req/s, the two are ordered by p99 there: either may lead, as the table says.
    let ranked: Vec<&str> = ["1  ", "2  "]
        .iter()
        .filter_map(|row| stdout.lines().find(|l| l.starts_with(row)))
        .filter_map(|l| l.split_whitespace().nth(1))
        .collect();
    assert!(ranked == ["a", "b"] || ranked == ["b", "a"], "{stdout}");
    let line = format!(
        "max under failed<1%: {} 200 req/s (interrupted), {} 200 (interrupted)",
        ranked[0], ranked[1]
    );
    assert_eq!(stdout.lines().last(), Some(line.as_str()), "{stdout}");
}

/// `stampede find-max TARGETS --slo failed<1% --probe 1s --cooldown 3s` into `out`, sent SIGINT
/// once stderr says `line`; it must exit 1. Its stdout.
fn interrupted_after(targets: &[String], out: &std::path::Path, line: &str) -> String {
    let mut child = Command::new(bin("stampede"))
        .arg("find-max")
        .args(targets)
        .args([
            "--slo",
            "failed<1%",
            "--model",
            "requests",
            "--start",
            "100",
            "--probe",
            "1s",
            "--warmup",
            "0s",
            "--cooldown",
            "3s",
            "--out",
        ])
        .arg(out)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let log = Lines::of(&mut child);
    assert!(
        log.wait_for(line, Duration::from_secs(60)),
        "{}",
        log.text()
    );
    signal(&child, libc::SIGINT);
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(1), "{}", log.text());
    let mut stdout = String::new();
    std::io::Read::read_to_string(&mut child.stdout.take().unwrap(), &mut stdout).unwrap();
    stdout
}

#[test]
fn http1_and_http2_of_one_server_are_searched_side_by_side_each_in_its_protocol() {
    let _serial = tests::serial();
    // One server of known capacity that speaks both; the probes take turns, each has it alone.
    let target = ServeProcess::start(&["--capacity", "600"]);
    let before = target.requests();
    let targets = [
        format!("h1=http://{}/", target.addr),
        format!("h2=h2c://{}/", target.addr),
    ];
    let (code, stdout, stderr, dir) = find_max_side(
        &targets,
        &[
            "--slo",
            "p99<50ms",
            "--model",
            "requests",
            "--streams",
            "4",
            "--start",
            "300",
            "--probe",
            "2s",
            "--confirm",
            "2s",
            "--warmup",
            "0s",
            "--cooldown",
            "0s",
            "--precision",
            "25%",
            "--repeat",
            "1",
        ],
    );
    assert_eq!(code, 0, "both resolved: {stdout}\n{stderr}");
    let out = dir.path().join("out");
    let mut sent = 0;
    for (label, http, streams) in [("h1", "1.1", 1), ("h2", "2", 4)] {
        let json = run_json(&out.join(label));
        assert_eq!(json["plan"]["http"], http, "{label}: {}", json["plan"]);
        assert_eq!(
            json["plan"]["streams"], streams,
            "{label}: {}",
            json["plan"]
        );
        let c = capacity(&json);
        let max = f(&c["max_rate"]["offered"]);
        assert!(
            (360.0..=690.0).contains(&max),
            "{label}: max {max} of a 600/s server"
        );
        for step in json["steps"].as_array().unwrap() {
            assert_eq!(step["http2"].is_object(), label == "h2", "{label}: {step}");
            sent += step["requests"].as_u64().unwrap();
        }
    }
    assert_eq!(
        target.requests() - before,
        sent,
        "the server counted every probe's requests"
    );
}

#[test]
fn a_target_killed_after_the_warmup_stopped_answering_it_was_not_doomed_from_the_start() {
    // It read "fails already at the start, 100 conn/s ... try a lower --start" though the warmup
    // had just served 100 conn/s there.
    let target = ServeProcess::start(&[]);
    let url = target.url();
    let pid = target.pid();
    let killer = {
        let target_addr = target.addr;
        std::thread::spawn(move || {
            // The warmup's 100 requests served, then gone before the first probe (2 s of
            // cooldown after the warmup).
            let deadline = std::time::Instant::now() + Duration::from_secs(60);
            while std::time::Instant::now() < deadline {
                let body = tests::http_get(target_addr, "/_stampede/stats");
                let served: serde_json::Value = serde_json::from_str(&body).unwrap();
                if served["requests"].as_u64().unwrap_or(0) >= 95 {
                    break;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            Command::new("kill")
                .args(["-9", &pid.to_string()])
                .status()
                .unwrap();
        })
    };
    let (code, stdout, stderr, json, _dir) =
        find_max(&[&url, "--start", "100", "--warmup", "1s", "--probe", "1s"]);
    killer.join().unwrap();
    let c = capacity(&json);
    assert_eq!(c["status"], "server_unrecovered", "{stdout}\n{stderr}");
    let answer = c["answer"].as_str().unwrap();
    assert!(
        answer.starts_with(
            "the server stopped answering during the search: it served the warmup at the start rate, then failed at 100 conn/s"
        ),
        "{answer}"
    );
    assert!(!stdout.contains("fails already at the start"), "{stdout}");
    assert_ne!(code, 6, "not doomed's exit code");
}
