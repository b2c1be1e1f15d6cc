//! Bad input gets one clear line and exit code 2; an unreachable target is a result, not a crash.
use tests::{closed_port, run_json, stampede, text};

fn refused(args: &[&str], message: &str) {
    let o = stampede(args);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "args {args:?}: {err}");
    assert!(
        err.contains(message),
        "args {args:?}: expected '{message}' in: {err}"
    );
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn malformed_url() {
    refused(
        &["run", "http://exa mple/", "--steps", "1"],
        "bad URL 'http://exa mple/'",
    );
    refused(
        &["run", "ftp://host/", "--steps", "1"],
        "must start with http://, https://, h2c:// or h2://",
    );
    refused(
        &["run", "--url", "ftp://host/", "--steps", "1"],
        "must start with http:// or https://",
    );
    refused(
        &["run", "--url", "http://h:99999/", "--steps", "1"],
        "port is not a number",
    );
}

#[test]
fn streams_over_http1_and_http1_against_an_h2_scheme_are_usage_errors() {
    refused(
        &[
            "run",
            "http://127.0.0.1:1/",
            "--steps",
            "1",
            "--streams",
            "4",
        ],
        "--streams 4 needs HTTP/2, but the target http://127.0.0.1:1/ is HTTP/1.1",
    );
    refused(
        &[
            "run",
            "h2c://127.0.0.1:1/",
            "--steps",
            "1",
            "--streams",
            "0",
        ],
        "--streams (streams per connection, at most 1000) must be a positive number, got 0",
    );
    refused(
        &[
            "run",
            "h2=h2c://127.0.0.1:1/",
            "--steps",
            "1",
            "--http",
            "1.1",
        ],
        "target h2 (h2c://127.0.0.1:1/) is HTTP/2 by its scheme, but --http 1.1",
    );
}

#[test]
fn unreadable_files() {
    refused(
        &["run", "/nonexistent/plan.toml"],
        "cannot read plan file /nonexistent/plan.toml",
    );
    refused(
        &["run", "--urls", "/nonexistent/urls.txt", "--steps", "1"],
        "cannot read URL list /nonexistent/urls.txt",
    );
    refused(
        &[
            "run",
            "http://127.0.0.1:1/",
            "--body-file",
            "/nonexistent/body",
            "--steps",
            "1",
        ],
        "cannot read body file",
    );
}

#[test]
fn bad_url_list_names_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("urls.txt");
    std::fs::write(&p, "http://127.0.0.1:1/a\n# comment\nPOST not-a-url\n").unwrap();
    refused(
        &["run", "--urls", p.to_str().unwrap(), "--steps", "1"],
        "line 3: bad URL 'not-a-url'",
    );
}

#[test]
fn zero_negative_and_inverted_rates() {
    refused(
        &["run", "http://127.0.0.1:1/", "--steps", "0"],
        "must be a positive number, got 0",
    );
    refused(
        &["run", "http://127.0.0.1:1/", "--steps=-5"],
        "must be a positive number, got -5",
    );
    refused(
        &[
            "run",
            "http://127.0.0.1:1/",
            "--low-rate",
            "0",
            "--high-rate",
            "10",
            "--rate-step",
            "1",
        ],
        "--low-rate must be a positive number",
    );
    refused(
        &[
            "run",
            "http://127.0.0.1:1/",
            "--low_rate",
            "50",
            "--high_rate",
            "10",
            "--rate_step",
            "5",
        ],
        "--low-rate (50) is above --high-rate (10)",
    );
    refused(
        &["run", "http://127.0.0.1:1/"],
        "no steps: say what load to send, e.g. `stampede run http://127.0.0.1:1/ -c 10 -d 10s`",
    );
    // A duration flag without its value once took the next flag as it.
    refused(
        &["run", "http://127.0.0.1:1/", "-c", "1", "-d", "--out", "m4"],
        "stampede: --step-duration needs a value: '--out' is the next option\n",
    );
    refused(
        &[
            "run",
            "http://127.0.0.1:1/",
            "--low-rate",
            "100",
            "--high-rate",
            "500",
        ],
        "needs --rate-step",
    );
    // Regression: a rate this small once panicked a worker thread and hung the step.
    refused(
        &[
            "run",
            "http://127.0.0.1:1/",
            "--steps",
            "0.00000000000000000001",
        ],
        "is outside 0.001 to 1000000000 per second",
    );
    refused(
        &[
            "run",
            "http://127.0.0.1:1/",
            "--steps",
            "1",
            "--num-conn",
            "1000000",
        ],
        "at most 24 h is allowed",
    );
}

#[test]
fn basic_auth_without_its_colon_or_beside_an_authorization_header_is_refused_in_one_line() {
    let run = ["run", "http://127.0.0.1:1/", "--steps", "1", "--basic-auth"];
    let no_colon = [&run[..], &["alice"]].concat();
    refused(&no_colon, "stampede: --basic-auth takes USER:PASSWORD");
    let twice = [&run[..], &["alice:pw", "-H", "Authorization: Bearer t"]].concat();
    refused(
        &twice,
        "give --basic-auth or an Authorization header (-H or the plan file's headers), not both",
    );
    for args in [no_colon, twice] {
        let err = text(&stampede(&args).stderr);
        assert_eq!(err.lines().count(), 1, "{err}");
    }
}

#[test]
fn unknown_flag_and_bad_plan_file() {
    refused(
        &["run", "http://127.0.0.1:1/", "--bogus", "5"],
        "stampede: unknown option --bogus (--help lists the options)",
    );
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("plan.toml");
    std::fs::write(
        &p,
        "url = \"http://127.0.0.1:1/\"\nsteps = [1]\nnum_calls = 3\n",
    )
    .unwrap();
    refused(
        &["run", p.to_str().unwrap()],
        "line 3, column 1: unknown key `num_calls`: did you mean `num_call`?",
    );
}

#[test]
fn unwritable_output_directory_is_refused_before_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("file");
    std::fs::write(&file, "x").unwrap();
    let out = file.join("results");
    refused(
        &[
            "run",
            "http://127.0.0.1:1/",
            "--steps",
            "1",
            "--out",
            out.to_str().unwrap(),
        ],
        "is not writable",
    );
}

/// A result, not a crash; but the ramp stops after the first step in which nothing connected (it
/// ran every step and exited 0).
#[test]
fn a_target_that_refused_every_connection_ran_the_whole_ramp_and_exited_0() {
    let port = closed_port();
    let url = format!("http://127.0.0.1:{port}/");
    let out = tempfile::tempdir().unwrap();
    let o = stampede(&[
        "run",
        &url,
        "--steps",
        "20,40,60",
        "--step-duration",
        "1s",
        "--quiet",
        "--out",
        out.path().to_str().unwrap(),
    ]);
    let stderr = text(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "nothing at 127.0.0.1:{port} accepted a connection in step 1: is the server up?"
        )),
        "{stderr}"
    );
    let run = run_json(out.path());
    assert_eq!(run["steps"].as_array().unwrap().len(), 1, "{run}");
    assert_eq!(run["status"], "aborted");
    for s in run["steps"].as_array().unwrap() {
        assert!(s["errors"]["conn-refused"].as_u64().unwrap() >= 19, "{s}");
        // Every due request is accounted for: refused connections stand for requests never sent.
        assert_eq!(s["unsent"], s["errors"]["conn-refused"], "{s}");
        assert_eq!(s["trust"], "invalid");
        assert!(
            s["reasons"][0].as_str().unwrap().contains("conn-refused"),
            "{s}"
        );
    }
    assert!(text(&o.stdout).contains("invalid"));
}

/// `stampede run TARGET ARGS --quiet --out OUT` under `ulimit -n LIMIT` (a hard limit it cannot raise).
fn run_with_fd_limit(
    limit: u32,
    target: &tests::ServeProcess,
    args: &str,
    out: &std::path::Path,
) -> std::process::Output {
    let script = format!(
        "ulimit -n {limit} && exec {} run {} {args} --quiet --out {}",
        tests::bin("stampede").display(),
        target.url(),
        out.display()
    );
    std::process::Command::new("sh")
        .args(["-c", &script])
        .output()
        .unwrap()
}

/// The fd risk both tests below meet: replies take 500 ms, so 400 req/s want about 200 connections;
/// the pool may open 200, and a hard limit of 64 descriptors cannot hold them.
const FD_RISK: &str = "more than the 48 this agent can open (RLIMIT_NOFILE 64 minus 16 reserved)";

/// `--steps STEPS` of that risk, under `ulimit -n 64`; the output and the results directory.
fn fd_starved_run(steps: &str) -> (std::process::Output, tempfile::TempDir) {
    let target = tests::ServeProcess::start(&["--delay", "500ms"]);
    let out = tempfile::tempdir().unwrap();
    let o = run_with_fd_limit(
        64,
        &target,
        &format!(
            "--model requests --steps {steps} --max-connections 200 --timeout 3s --step-duration 1s --threads 1"
        ),
        out.path(),
    );
    (o, out)
}

#[test]
fn generator_out_of_file_descriptors_is_named_and_not_blamed_on_the_target() {
    // That is only a risk when the step is prepared (a faster target would need few connections), so
    // the step runs, warned, and its failures are the generator's.
    let (o, out) = fd_starved_run("400");
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    let warning = FD_RISK;
    assert!(err.contains(warning), "{err}");
    let step = &run_json(out.path())["steps"][0];
    assert!(
        step["notes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n.as_str().unwrap().contains(warning)),
        "{step}"
    );
    let fd = step["errors"]["fd-unavailable"].as_u64().unwrap();
    assert!(fd > 0, "{step}");
    assert_eq!(step["trust"], "invalid");
    assert!(
        step["reasons"].as_array().unwrap().iter().any(|r| r
            .as_str()
            .unwrap()
            .contains("fd-unavailable errors: generator out of file descriptors, or at its own --max-connections")),
        "{step}"
    );
    // The target's own errors are not charged with the generator's failures.
    assert_eq!(step["errors"]["conn-refused"], 0);
    assert_eq!(step["errors"]["conn-reset"], 0);
}

#[test]
fn a_step_over_the_fd_limit_is_refused_before_any_load_with_the_numbers() {
    let target = tests::ServeProcess::start(&[]);
    let out = tempfile::tempdir().unwrap();
    // 1000 connections held open cannot fit in 256 descriptors: certain, so refused up front.
    let o = run_with_fd_limit(
        256,
        &target,
        "--model concurrency --steps 10,1000 --step-duration 1s",
        out.path(),
    );
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains(
            "agent embedded would refuse this plan: step 2 needs 1000 concurrent connections but this agent \
             can open 192 (RLIMIT_NOFILE 256 minus 64 reserved); raise ulimit -n or add agents"
        ),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    // Not even the first step, which would fit, was sent.
    assert_eq!(target.requests(), 0);
}

#[test]
fn bad_source_addrs_are_refused_with_the_reason() {
    refused(
        &[
            "run",
            "http://127.0.0.1:1/",
            "--steps",
            "1",
            "--source-addrs",
            "127.0.0.8-127.0.0.1",
        ],
        "bad --source-addrs '127.0.0.8-127.0.0.1': range 127.0.0.8-127.0.0.1 runs backwards",
    );
    refused(
        &[
            "run",
            "http://127.0.0.1:1/",
            "--steps",
            "1",
            "--source-addrs",
            "127.0.0.1,localhost",
        ],
        "'localhost' is not an IP address",
    );
    refused(
        &[
            "run",
            "http://127.0.0.1:1/",
            "--steps",
            "1",
            "--source-addrs",
            "::1",
        ],
        "--source-addrs are IPv6 but the target 127.0.0.1:1 is IPv4",
    );
    refused(
        &[
            "run",
            "http://127.0.0.1:1/",
            "--steps",
            "1",
            "--source-addrs",
            "",
        ],
        "it lists no address",
    );
}

#[test]
fn a_capacity_risk_was_warned_again_on_every_step() {
    // The fd risk on each of three steps: stderr says it once, every step's notes keep it.
    let (o, out) = fd_starved_run("400,400,400");
    let err = text(&o.stderr);
    let warning = FD_RISK;
    assert_eq!(err.matches(warning).count(), 1, "{err}");
    let run = run_json(out.path());
    for step in run["steps"].as_array().unwrap() {
        assert!(
            step["notes"]
                .as_array()
                .unwrap()
                .iter()
                .any(|n| n.as_str().unwrap().contains(warning)),
            "{step}"
        );
    }
}

/// `stampede ARGS` with RLIMIT_NOFILE at `limit` (see [`tests::with_nofile`]).
fn stampede_with_nofile(limit: u64, args: &[&str]) -> std::process::Output {
    let mut cmd = std::process::Command::new(tests::bin("stampede"));
    tests::with_nofile(cmd.args(args), limit).output().unwrap()
}

#[test]
fn the_embedded_agents_connections_leave_the_coordinator_descriptors_for_its_own_files() {
    // A new connection per request, 2000/s, each held 500 ms by the target: about 1000 open at once,
    // over a limit of 400. The agent's two threads may take 290 (400 minus 110 reserved) and no more:
    // the rest fail as fd-unavailable, and the coordinator in the same process still opens what it
    // needs, during the step (its monitor reads /proc every second) and after it (run.json, the hlog,
    // the report).
    let target = tests::ServeProcess::start(&["--delay", "500ms"]);
    let out = tempfile::tempdir().unwrap();
    let pid = target.pid().to_string();
    let url = target.url();
    let o = stampede_with_nofile(
        400,
        &[
            "run",
            &url,
            "--model",
            "connections",
            "--steps",
            "2000",
            "--step-duration",
            "3s",
            "--timeout",
            "1s",
            "--threads",
            "2",
            "--monitor-pid",
            &pid,
            "--quiet",
            "--out",
            out.path().to_str().unwrap(),
        ],
    );
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(!err.contains("Too many open files"), "{err}");
    let run = run_json(out.path());
    assert_eq!(run["status"], "completed", "{err}");
    let (_, rows) = tests::browser::steps_tsv(out.path());
    let steps = run["steps"].as_array().unwrap();
    assert_eq!(steps.len(), rows.len(), "{err}");
    assert_eq!(steps.len(), 1, "{err}");
    assert!(out.path().join("report.html").is_file(), "{err}");
    assert!(out.path().join("hlog/step-001.hlog").is_file(), "{err}");
    let step = &steps[0];
    assert!(
        step["errors"]["fd-unavailable"].as_u64().unwrap() > 0,
        "{step}"
    );
    assert_eq!(step["trust"], "invalid", "{step}");
    assert_eq!(step["generator_bound"], true, "{step}");
    assert!(
        step["reasons"].as_array().unwrap().iter().any(|r| r
            .as_str()
            .unwrap()
            .contains("fd-unavailable errors: generator out of file descriptors, or at its own --max-connections")),
        "{step}"
    );
    // The agent kept to its 290: each connection is held 500 ms, so 290 open at once serve at most
    // 580/s (the whole limit, 377 or so once the coordinator's own are open, served about 750/s).
    let served = step["ok_rate"].as_f64().unwrap();
    assert!((100.0..620.0).contains(&served), "{step}");
    // The monitor sampled through the step: no reading was lost to a missing descriptor.
    let monitor = &step["server_monitors"][0];
    assert!(monitor["samples"].as_u64().unwrap() >= 2, "{monitor}");
}

#[test]
fn a_duration_past_any_clock_is_refused_in_one_line_not_a_panic() {
    // 1e20 s overflowed Duration::from_secs_f64 (exit 101, a backtrace); 500000y reached the
    // embedded agent as "invalid step 1".
    let url = format!("http://127.0.0.1:{}/", closed_port());
    let long = "is longer than any duration stampede takes (366 days at most)";
    for flag in [
        "--timeout",
        "--warmup",
        "--step-duration",
        "--connect-timeout",
    ] {
        for value in ["1e20", "1.8e19", "500000y"] {
            refused(
                &["run", &url, "--steps", "1", flag, value],
                &format!("{flag}: '{value}' {long}"),
            );
        }
    }
    refused(
        &[
            "run",
            &url,
            "--steps",
            "1",
            "--live",
            "127.0.0.1:0",
            "--live-keep",
            "1e20",
        ],
        &format!("--live-keep: '1e20' {long}"),
    );
    for flag in ["--probe", "--deadline", "--confirm", "--cooldown"] {
        refused(
            &["find-max", &url, flag, "1e20"],
            &format!("{flag}: '1e20' {long}"),
        );
    }
    refused(
        &["serve", "--listen", "127.0.0.1:0", "--delay", "1e20"],
        &format!("--delay: '1e20' {long}"),
    );
    // A warmup is a step: past a step's 24 h it is said so, by the flag's name.
    refused(
        &["run", &url, "--steps", "1", "--warmup", "2days"],
        "--warmup 2days: a warmup is a step, and a step lasts at most 1day",
    );
    let dir = tempfile::tempdir().unwrap();
    let plan = dir.path().join("plan.toml");
    std::fs::write(
        &plan,
        format!("url = \"{url}\"\nsteps = [1]\ntimeout = \"1e20\"\n"),
    )
    .unwrap();
    refused(
        &["run", plan.to_str().unwrap()],
        &format!("--timeout: '1e20' {long}"),
    );
}
