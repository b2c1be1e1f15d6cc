//! The first hour of a wrk / ab / oha / vegeta user: their flags run the model they mean, or are
//! refused in one line naming the stampede command; bad values are refused at the command line.
use tests::{AgentProc, ServeProcess, closed_port, run_ok, stampede, text};

/// Refused with exit 2 and one line; never clap's tips.
fn refused(args: &[&str]) -> String {
    let o = stampede(args);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
    assert_eq!(
        err.trim_end().lines().count(),
        1,
        "{args:?}: one line: {err}"
    );
    for tip in ["tip:", "-- -", "Usage:", "rate_step", "panicked"] {
        assert!(!err.contains(tip), "{args:?}: {err}");
    }
    err
}

#[test]
fn wrk_c_d_t_was_an_unexpected_argument() {
    let target = ServeProcess::start(&[]);
    let ran = run_ok(&[&target.url(), "-c", "3", "-d", "1s", "-t", "1"]);
    let plan = &ran.run["plan"];
    assert_eq!(plan["model"], "concurrency", "{plan}");
    assert_eq!(plan["steps"], serde_json::json!([3.0]));
    assert_eq!(plan["step_duration_s"], 1.0);
    assert_eq!(plan["threads"], 1);
}

#[test]
fn wrk2_rate_and_oha_z_q_were_unexpected_arguments() {
    let target = ServeProcess::start(&[]);
    for args in [
        vec!["-R", "40", "-c", "7", "-d", "1s"],
        vec!["--rate", "40/1s", "-c", "7", "--duration", "1s"],
        vec!["-q", "40", "-c", "7", "-z", "1s"],
    ] {
        let mut all = vec![target.url()];
        all.extend(args.iter().map(|a| a.to_string()));
        let all: Vec<&str> = all.iter().map(String::as_str).collect();
        let ran = run_ok(&all);
        let plan = &ran.run["plan"];
        assert_eq!(plan["model"], "requests", "{args:?}: {plan}");
        assert_eq!(plan["steps"], serde_json::json!([40.0]), "{args:?}");
        assert_eq!(plan["max_connections"], 7, "{args:?}");
        assert_eq!(ran.step(0)["requests"], 40, "{args:?}");
    }
}

#[test]
fn ab_n_could_not_end_a_closed_loop_after_n_requests() {
    let target = ServeProcess::start(&[]);
    // 3 connections over 2 worker threads and a 1001-request count: the split must still be exact,
    // and the step ends on the count long before its 30 s.
    let ran = run_ok(&[
        &target.url(),
        "-n",
        "1001",
        "-c",
        "3",
        "-t",
        "2",
        "-d",
        "30s",
    ]);
    assert_eq!(ran.step(0)["requests"], 1001, "{}", ran.step(0));
    assert_eq!(target.requests(), 1001);
    assert_eq!(ran.run["plan"]["max_requests"], 1001);
}

#[test]
fn ab_n_was_split_exactly_across_agents() {
    let target = ServeProcess::start(&[]);
    let a = AgentProc::start(&[], &[]);
    let b = AgentProc::start(&[], &[]);
    let agents = format!("{},{}", a.addr, b.addr);
    let ran = run_ok(&[
        &target.url(),
        "-n",
        "777",
        "-c",
        "5",
        "-d",
        "30s",
        "--agents",
        &agents,
    ]);
    assert_eq!(ran.step(0)["requests"], 777, "{}", ran.step(0));
    assert_eq!(target.requests(), 777);
}

#[test]
fn habits_without_one_meaning_were_answered_with_clap_tips() {
    let url = "http://127.0.0.1:1/";
    let cases: [(&[&str], &str); 5] = [
        (
            &["run", url, "-n", "1000", "-R", "100"],
            "stampede run http://127.0.0.1:1/ --model requests --steps 100 --step-duration 10s",
        ),
        (
            &["run", url, "-c", "50", "--model", "connections"],
            "stampede run http://127.0.0.1:1/ --model concurrency --steps 50",
        ),
        (
            &["run", url, "-c", "50", "--steps", "10,20"],
            "--model concurrency --steps 50,100",
        ),
        (
            &[
                "run",
                url,
                "-n",
                "1000",
                "--model",
                "connections",
                "--steps",
                "5",
            ],
            "stampede run http://127.0.0.1:1/ --num-conn 1000",
        ),
        (&["run", url, "--rate", "fast"], "'fast' is not a rate"),
    ];
    for (args, message) in cases {
        let err = refused(args);
        assert!(err.contains(message), "{args:?}: {err}");
    }
}

#[test]
fn small_mistakes_got_confusing_or_late_answers() {
    let url = "http://127.0.0.1:1/";
    assert_eq!(
        refused(&["run", url, "--steps", "10,,20"]).trim(),
        "stampede: --steps '10,,20': empty step value (value 2 of 3)"
    );
    // Refused by the coordinator before any agent is asked (it used to fail inside the agent, exit 1).
    assert_eq!(
        refused(&["run", url, "--steps", "1", "--step-duration", "1ns"]).trim(),
        "stampede: --step-duration 1ns is too short: a step lasts at least 1ms"
    );
    let spaced = refused(&["run", url, "--steps", "1", "--step-duration", "-1s"]);
    let joined = refused(&["run", url, "--steps", "1", "--step-duration=-1s"]);
    assert_eq!(spaced, joined);
    assert!(spaced.contains("--step-duration must be a positive number, got -1s"));
    assert!(
        refused(&["run", "127.0.0.1:8080", "--steps", "1"])
            .contains("did you mean http://127.0.0.1:8080?")
    );
    assert!(
        refused(&["run", url, "--model", "closed", "--steps", "1"])
            .contains("--model: unknown value 'closed': use connections, requests or concurrency")
    );
}

#[test]
fn unreachable_agent_was_a_rust_debug_print() {
    let port = closed_port();
    let agents = format!("127.0.0.1:{port}");
    let o = stampede(&[
        "run",
        "http://127.0.0.1:1/",
        "--steps",
        "1",
        "--agents",
        &agents,
    ]);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!(
            "agent 127.0.0.1:{port} is unreachable: connection refused"
        )),
        "{err}"
    );
    for debug in ["Some(", "ConnectError", "Os {", "kind:"] {
        assert!(!err.contains(debug), "{err}");
    }
}

#[test]
fn agent_logs_were_coloured_off_a_terminal() {
    let target = ServeProcess::start(&[]);
    let ready = tempfile::tempdir().unwrap();
    let file = ready.path().join("ready.json");
    let mut agent = std::process::Command::new(tests::bin("stampede-agent"))
        .args(["--listen", "127.0.0.1:0", "--threads", "1"])
        .arg("--ready-file")
        .arg(&file)
        .env("STAMPEDE_LOG", "info")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let log = tests::Lines::of(&mut agent);
    let addr = tests::ready_addr(&file, &mut agent, &log).to_string();
    let ran = run_ok(&[
        &target.url(),
        "--steps",
        "5",
        "--step-duration",
        "1s",
        "--agents",
        &addr,
    ]);
    assert_eq!(ran.steps().len(), 1);
    std::thread::sleep(std::time::Duration::from_millis(500));
    let _ = agent.kill();
    let _ = agent.wait();
    let rest = log.text();
    // stderr is a pipe: the session's log lines are there, without escape codes, none a warning.
    assert!(rest.contains("Coordinator session ended"), "{rest}");
    assert!(!rest.contains('\u{1b}'), "ANSI escapes in: {rest}");
    assert!(
        !rest.contains("WARN"),
        "a normal session end warned: {rest}"
    );
}
