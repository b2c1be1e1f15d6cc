//! Several agent processes and a coordinator on loopback: the merge is lossless, starts are
//! synchronised, refusals are clear, a lost agent degrades only its step, and agents stop when their
//! coordinator is gone.
use std::process::{Command, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

use tests::{
    AgentProc, ServeProcess, agents_arg, bin, closed_port, run_json, run_ok, signal,
    spawn_stampede, stampede, text,
};

/// `stampede run TARGET ARGS --quiet --out OUT` in the background.
fn in_background(
    target: &ServeProcess,
    args: &[&str],
    out: &std::path::Path,
) -> std::process::Child {
    let url = target.url();
    let mut all = vec![
        "run",
        url.as_str(),
        "--quiet",
        "--out",
        out.to_str().unwrap(),
    ];
    all.extend_from_slice(args);
    spawn_stampede(&all)
}

/// Each agent's request count in one step of run.json, in the order the agents were listed.
fn per_agent_requests(step: &serde_json::Value) -> Vec<u64> {
    step["agents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["requests"].as_u64().unwrap())
        .collect()
}

#[test]
fn three_agents_merge_losslessly_and_start_together() {
    let _serial = tests::serial();
    let target = ServeProcess::start(&[]);
    let agents: Vec<AgentProc> = (0..3).map(|_| AgentProc::start(&[], &[])).collect();
    let ran = run_ok(&[
        &target.url(),
        "--agents",
        &agents_arg(&agents),
        "--model",
        "requests",
        "--steps",
        "90,150,301",
        "--step-duration",
        "2s",
    ]);
    assert_eq!(ran.run["agents"].as_array().unwrap().len(), 3);
    let mut reported = 0;
    for s in ran.steps() {
        let per_agent = per_agent_requests(s);
        assert_eq!(per_agent.len(), 3, "{s}");
        // Lossless: the merged total is the sum of the agents' totals, and the split is exact.
        assert_eq!(
            per_agent.iter().sum::<u64>(),
            s["requests"].as_u64().unwrap(),
            "{s}"
        );
        let demanded = s["demanded_rate"].as_f64().unwrap();
        assert_eq!(
            s["requests"].as_u64().unwrap() as f64,
            demanded * 2.0,
            "every arrival sent once: {s}"
        );
        let spread = per_agent.iter().max().unwrap() - per_agent.iter().min().unwrap();
        assert!(spread <= 1, "equal cores, equal shares: {per_agent:?}");
        // Well under 1 ms on an idle machine; the bound leaves room for a 2-core CI box running this
        // file's tests in parallel (5.9 ms seen with three busy loops beside them), not for a start
        // that waits on anything but the clock.
        let skew = s["start_skew_ms"].as_f64().unwrap();
        assert!(skew < 25.0, "start skew {skew} ms");
        for a in s["agents"].as_array().unwrap() {
            assert!(a["rtt_ms"].as_f64().unwrap() > 0.0, "{a}");
            assert_eq!(a["lost"], false);
        }
        reported += s["requests"].as_u64().unwrap();
    }
    assert_eq!(
        reported,
        target.requests(),
        "the target counted exactly what the agents reported"
    );
    let tsv = std::fs::read_to_string(ran.dir.path().join("steps.tsv")).unwrap();
    assert!(tsv.lines().next().unwrap().contains("\tstart_skew_ms\t"));
}

#[test]
fn agent_weights_split_the_load() {
    let _serial = tests::serial();
    let target = ServeProcess::start(&[]);
    let agents: Vec<AgentProc> = (0..2).map(|_| AgentProc::start(&[], &[])).collect();
    let ran = run_ok(&[
        &target.url(),
        "--agents",
        &agents_arg(&agents),
        "--agent-weights",
        "1,3",
        "--model",
        "requests",
        "--steps",
        "200",
        "--step-duration",
        "1s",
    ]);
    assert_eq!(per_agent_requests(ran.step(0)), vec![50, 150]);
}

#[test]
fn weights_of_a_billion_to_one_run_promptly_in_little_memory() {
    // Regression: the split once dealt out sum(weights) positions, one slice each: 1e9 + 1 of them
    // made the coordinator allocate 8 GB (23 GB seen) and hang before the first step.
    let _serial = tests::serial();
    let target = ServeProcess::start(&[]);
    let agents: Vec<AgentProc> = (0..2).map(|_| AgentProc::start(&[], &[])).collect();
    let out = tempfile::tempdir().unwrap();
    let args = [
        "--agents",
        &agents_arg(&agents),
        "--agent-weights",
        "1000000000,1",
        "--model",
        "requests",
        "--steps",
        "200",
        "--step-duration",
        "1s",
    ];
    let mut child = in_background(&target, &args, out.path());
    let began = Instant::now();
    let mut peak_kib = 0;
    while child.try_wait().unwrap().is_none() {
        peak_kib = peak_kib.max(tests::peak_rss_kib(child.id()));
        assert!(
            began.elapsed() < Duration::from_secs(30),
            "the run must end"
        );
        sleep(Duration::from_millis(20));
    }
    assert!(child.wait().unwrap().success());
    assert!(peak_kib < 256 * 1024, "coordinator peak RSS {peak_kib} KiB");
    let step = run_json(out.path())["steps"][0].clone();
    // The light agent's first arrival is the step's 1,000,000,001st: none of it in these 200.
    assert_eq!(per_agent_requests(&step), vec![200, 0], "{step}");
    assert_eq!(step["requests"], 200, "{step}");
    assert_eq!(target.requests(), 200);
}

#[test]
fn handshake_refusals_name_the_problem() {
    let _serial = tests::serial();
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("token");
    std::fs::write(&token, "s3cret\n").unwrap();
    let agent = AgentProc::start(&["--token-file", token.to_str().unwrap()], &[]);
    // A target that answers: against nothing the accepted run would stop after its step (exit 1).
    let target = ServeProcess::start(&[]);
    let url = target.url();
    let run = |extra: &[&str], env: &[(&str, &str)]| {
        let mut cmd = Command::new(bin("stampede"));
        cmd.args([
            "run",
            &url,
            "--steps",
            "1",
            "--step-duration",
            "1s",
            "--quiet",
        ])
        .args([
            "--agents",
            &agent.addr.to_string(),
            "--out",
            dir.path().join("out").to_str().unwrap(),
        ])
        .args(extra)
        .env_remove("STAMPEDE_TOKEN")
        .envs(env.iter().copied());
        let o = cmd.output().unwrap();
        (o.status.code(), text(&o.stderr))
    };
    let (code, err) = run(&[], &[]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("refused: this agent requires a token"),
        "{err}"
    );
    let (code, err) = run(&[], &[("STAMPEDE_TOKEN", "guess")]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("refused: the token does not match this agent's"),
        "{err}"
    );
    let (code, err) = run(&["--token-file", token.to_str().unwrap()], &[]);
    assert_eq!(code, Some(0), "the right token is accepted: {err}");
    // Each refused coordinator is in the agent's log, with its address.
    let log = agent.log.text();
    for reason in [
        "this agent requires a token",
        "the token does not match this agent's",
    ] {
        assert!(
            log.contains("Refused a coordinator peer=127.0.0.1:")
                && log.contains(&format!("reason={reason}")),
            "the agent did not log '{reason}': {log}"
        );
    }
    // An agent refuses to listen beyond loopback without a token.
    let o = Command::new(bin("stampede-agent"))
        .args(["--listen", "0.0.0.0:0"])
        .env_remove("STAMPEDE_TOKEN")
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o.stderr).contains("without a token"),
        "{}",
        text(&o.stderr)
    );
    // ... or in plain text, even with a token.
    let o = Command::new(bin("stampede-agent"))
        .args([
            "--listen",
            "0.0.0.0:0",
            "--token-file",
            token.to_str().unwrap(),
        ])
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = text(&o.stderr);
    assert!(
        err.contains("in plain text") && err.contains("add --tls-cert, --tls-key and --tls-ca"),
        "{err}"
    );
}

#[test]
fn a_second_coordinator_was_refused_without_a_line_in_the_agent_log() {
    let _serial = tests::serial();
    let target = ServeProcess::start(&[]);
    let agent = AgentProc::start(&[], &[]);
    let out = tempfile::tempdir().unwrap();
    let agents = agent.addr.to_string();
    let mut first = in_background(
        &target,
        &[
            "--agents",
            &agents,
            "--steps",
            "20",
            "--step-duration",
            "20s",
        ],
        out.path(),
    );
    // Its load arriving says its session holds the agent.
    let began = Instant::now();
    while target.requests() == 0 && began.elapsed() < Duration::from_secs(30) {
        sleep(Duration::from_millis(50));
    }
    let (o, _dir) = tests::run_quiet(&[&target.url(), "--agents", &agents, "--steps", "5"]);
    let _ = first.kill();
    let _ = first.wait();
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("refused: this agent is serving another coordinator"),
        "{err}"
    );
    assert!(
        agent.log.wait_for(
            "reason=this agent is serving another coordinator",
            Duration::from_secs(5)
        ),
        "{}",
        agent.log.text()
    );
}

#[test]
fn killed_agent_degrades_its_step_and_later_steps_use_the_rest() {
    let _serial = tests::serial();
    let target = ServeProcess::start(&[]);
    let mut agents: Vec<AgentProc> = (0..3).map(|_| AgentProc::start(&[], &[])).collect();
    let out = tempfile::tempdir().unwrap();
    let coordinator = in_background(
        &target,
        &[
            "--agents",
            &agents_arg(&agents),
            "--model",
            "requests",
            "--steps",
            "60,60,60,60",
            "--step-duration",
            "2s",
        ],
        out.path(),
    );
    let began = Instant::now();
    // Mid step 2.
    sleep(Duration::from_millis(3200));
    let victim = agents[1].addr.to_string();
    agents[1].kill();
    let o = coordinator.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(
        began.elapsed() < Duration::from_secs(20),
        "the run ends on time: {:?}",
        began.elapsed()
    );
    let run = run_json(out.path());
    let steps = run["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 4);
    // The step with the kill names the lost agent and is degraded for it (a loaded box may add lag
    // reasons to any step, but never blames the lost share on the generator's schedule).
    let hit = steps
        .iter()
        .position(|s| s["reasons"].to_string().contains(&victim))
        .expect("a step names the lost agent");
    assert!(hit == 1 || hit == 2, "the step with the kill: {hit}");
    assert_eq!(steps[hit]["trust"], "degraded", "{}", steps[hit]);
    let lost: Vec<_> = steps[hit]["agents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["lost"] == true)
        .collect();
    assert_eq!(lost.len(), 1, "{}", steps[hit]);
    assert_eq!(lost[0]["agent"].as_str().unwrap(), victim);
    for s in &steps[hit + 1..] {
        let agents = s["agents"].as_array().unwrap();
        assert_eq!(agents.len(), 2, "later steps run on the survivors: {s}");
        assert!(!s["agents"].to_string().contains(&victim));
        // The survivors carry the whole demanded load.
        assert_eq!(s["requests"].as_u64().unwrap(), 120, "{s}");
    }
}

#[test]
fn agents_stop_within_two_seconds_when_the_coordinator_dies_or_freezes() {
    let _serial = tests::serial();
    for sig in [libc::SIGKILL, libc::SIGSTOP] {
        let target = ServeProcess::start(&[]);
        let agents: Vec<AgentProc> = (0..2).map(|_| AgentProc::start(&[], &[])).collect();
        let out = tempfile::tempdir().unwrap();
        let mut coordinator = in_background(
            &target,
            &[
                "--agents",
                &agents_arg(&agents),
                "--model",
                "requests",
                "--steps",
                "100",
                "--step-duration",
                "20s",
            ],
            out.path(),
        );
        sleep(Duration::from_millis(2000));
        let before = target.requests();
        assert!(before > 50, "load is flowing: {before}");
        // SIGKILL closes its sockets; SIGSTOP leaves them open and silent, like a network cut.
        signal(&coordinator, sig);
        sleep(Duration::from_millis(2000));
        let stopped = target.requests();
        sleep(Duration::from_millis(1500));
        let later = target.requests();
        assert_eq!(
            stopped, later,
            "signal {sig}: agents still sending 2 s after losing their coordinator"
        );
        let _ = coordinator.kill();
        let _ = coordinator.wait();
    }
    let _ = stampede(&["--version"]);
}

#[test]
fn agents_that_join_are_driven_like_listening_ones() {
    let _serial = tests::serial();
    let target = ServeProcess::start(&[]);
    let port = closed_port();
    let listen = format!("127.0.0.1:{port}");
    let out = tempfile::tempdir().unwrap();
    let coordinator = in_background(
        &target,
        &[
            "--listen",
            &listen,
            "--expect-agents",
            "2",
            "--wait-agents",
            "20s",
            "--model",
            "requests",
            "--steps",
            "50,100",
            "--step-duration",
            "1s",
        ],
        out.path(),
    );
    let joiners: Vec<std::process::Child> = (0..2)
        .map(|_| {
            Command::new(bin("stampede-agent"))
                .args(["--join", &listen, "--threads", "1"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    let o = coordinator.wait_with_output().unwrap();
    for mut j in joiners {
        let _ = j.kill();
        let _ = j.wait();
    }
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let run = run_json(out.path());
    assert_eq!(run["agents"].as_array().unwrap().len(), 2);
    let reported: u64 = run["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["requests"].as_u64().unwrap())
        .sum();
    assert_eq!(reported, 150);
    assert_eq!(reported, target.requests());
}

#[test]
fn sigterm_drains_an_agent_and_the_run_goes_on_without_it() {
    let _serial = tests::serial();
    let target = ServeProcess::start(&[]);
    let agents: Vec<AgentProc> = (0..2).map(|_| AgentProc::start(&[], &[])).collect();
    let out = tempfile::tempdir().unwrap();
    let coordinator = in_background(
        &target,
        &[
            "--agents",
            &agents_arg(&agents),
            "--model",
            "requests",
            "--steps",
            "50,50",
            "--step-duration",
            "3s",
        ],
        out.path(),
    );
    sleep(Duration::from_millis(1800));
    signal(&agents[0].child, libc::SIGTERM);
    let o = coordinator.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let run = run_json(out.path());
    let steps = run["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 2);
    assert_eq!(steps[0]["trust"], "degraded", "{}", steps[0]);
    assert!(
        steps[0]["reasons"]
            .to_string()
            .contains(&agents[0].addr.to_string())
    );
    // What the drained agent sent before it stopped is reported: nothing is lost.
    let drained = &steps[0]["agents"][0];
    assert!(drained["requests"].as_u64().unwrap() > 0, "{drained}");
    assert_eq!(steps[1]["agents"].as_array().unwrap().len(), 1);
    let reported: u64 = steps.iter().map(|s| s["requests"].as_u64().unwrap()).sum();
    assert_eq!(reported, target.requests());
}

#[test]
fn agent_side_policy_refuses_before_any_load_is_sent() {
    let _serial = tests::serial();
    let target = ServeProcess::start(&[]);
    let url = format!("http://localhost:{}/", target.addr.port());
    let run = |agent: &AgentProc, steps: &str| {
        let o = stampede(&[
            "run",
            &url,
            "--agents",
            &agent.addr.to_string(),
            "--model",
            "requests",
            "--steps",
            steps,
            "--step-duration",
            "1s",
            "--quiet",
            "--out",
            tempfile::tempdir().unwrap().path().to_str().unwrap(),
        ]);
        (o.status.code(), text(&o.stderr))
    };
    // A name that resolves outside the allowed networks is refused, whatever it is called.
    let fenced = AgentProc::start(&["--allow-target", "10.0.0.0/8,*.internal"], &[]);
    let (code, err) = run(&fenced, "20");
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains(
            "refused: target localhost (127.0.0.1) is outside this agent's --allow-target list"
        ),
        "{err}"
    );
    // Over a limit: refused up front, naming the agent and the limit.
    let capped = AgentProc::start(&["--max-rate", "50", "--max-step-duration", "10s"], &[]);
    let (code, err) = run(&capped, "20,100");
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains(&format!(
            "agent {} would refuse this plan: step 2 asks this agent for 100.0 requests/s; its --max-rate is 50",
            capped.addr
        )),
        "{err}"
    );
    assert_eq!(target.requests(), 0, "no request left before the refusals");
    // Within its limits and its allowed targets, it runs.
    let open = AgentProc::start(&["--allow-target", "127.0.0.0/8", "--max-rate", "50"], &[]);
    let (code, err) = run(&open, "20");
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(target.requests(), 20);
}

#[test]
fn garbage_and_silent_peers_on_the_agent_port_do_not_take_it_down() {
    let _serial = tests::serial();
    use std::io::Write;
    let target = ServeProcess::start(&[]);
    let agent = AgentProc::start(&[], &[]);
    // Garbage instead of HTTP/2.
    let mut garbage = std::net::TcpStream::connect(agent.addr).unwrap();
    let _ = garbage.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n\x00\x01\x02 not grpc at all");
    // A peer that connects and says nothing, left open.
    let _silent = std::net::TcpStream::connect(agent.addr).unwrap();
    // A coordinator that opens a session and then freezes (SIGSTOP): the agent's dead-man switch frees
    // it for the next coordinator.
    let out = tempfile::tempdir().unwrap();
    let mut frozen = in_background(
        &target,
        &[
            "--agents",
            &agent.addr.to_string(),
            "--steps",
            "10",
            "--step-duration",
            "30s",
        ],
        out.path(),
    );
    sleep(Duration::from_millis(1500));
    signal(&frozen, libc::SIGSTOP);
    sleep(Duration::from_millis(2500));
    // The daemon still serves a real coordinator.
    let ran = twenty_requests(&target, &agent.addr.to_string());
    assert_eq!(ran.step(0)["requests"], 20);
    let _ = frozen.kill();
    let _ = frozen.wait();
}

/// A run of one 1 s step of 20 requests over `agents`, which must succeed.
fn twenty_requests(target: &ServeProcess, agents: &str) -> tests::Ran {
    run_ok(&[
        &target.url(),
        "--agents",
        agents,
        "--model",
        "requests",
        "--steps",
        "20",
        "--step-duration",
        "1s",
    ])
}

/// Waits up to `limit` for a process this test started to exit.
fn exited_within(
    child: &mut std::process::Child,
    limit: Duration,
) -> Option<std::process::ExitStatus> {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status);
        }
        sleep(Duration::from_millis(100));
    }
    None
}

#[test]
fn an_agent_with_exit_after_run_exits_0_once_its_coordinator_has_run() {
    let _serial = tests::serial();
    let target = ServeProcess::start(&[]);
    let mut once = AgentProc::start(&["--exit-after-run"], &[]);
    let mut serving = AgentProc::start(&[], &[]);
    twenty_requests(&target, &format!("{},{}", once.addr, serving.addr));
    let status = exited_within(&mut once.child, Duration::from_secs(15))
        .unwrap_or_else(|| panic!("--exit-after-run still runs: {}", once.log.text()));
    assert!(status.success(), "{status}: {}", once.log.text());
    assert!(
        serving.child.try_wait().unwrap().is_none(),
        "an agent without --exit-after-run serves on after a run"
    );
}

#[test]
fn a_dialing_coordinator_with_expect_agents_waits_for_an_agent_that_starts_late() {
    let _serial = tests::serial();
    let target = ServeProcess::start(&[]);
    let port = closed_port();
    let out = tempfile::tempdir().unwrap();
    let agent_addr = format!("127.0.0.1:{port}");
    // Past the 10 s a dial is retried without --expect-agents: only the wait can carry it.
    let mut run = in_background(
        &target,
        &[
            "--agents",
            &agent_addr,
            "--expect-agents",
            "1",
            "--wait-agents",
            "60s",
            "--steps",
            "20",
            "--step-duration",
            "1s",
        ],
        out.path(),
    );
    sleep(Duration::from_secs(12));
    assert!(
        run.try_wait().unwrap().is_none(),
        "the coordinator gave up before its agent started"
    );
    let mut agent = Command::new(bin("stampede-agent"))
        .args(["--listen", &agent_addr, "--threads", "1"])
        .env("STAMPEDE_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let status = exited_within(&mut run, Duration::from_secs(60));
    let _ = agent.kill();
    let _ = agent.wait();
    let status = status.expect("the run ends once its agent answers");
    let mut stderr = String::new();
    std::io::Read::read_to_string(run.stderr.as_mut().unwrap(), &mut stderr).unwrap();
    assert!(status.success(), "{status}: {stderr}");
    assert_eq!(run_json(out.path())["agents"].as_array().unwrap().len(), 1);
}

/// A peer on 127.0.0.1:0 that accepts TCP and never says a word (it holds what it accepted).
fn mute_peer() -> std::net::SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for conn in listener.incoming().flatten() {
            held.push(conn);
        }
    });
    addr
}

/// The coordinator's stderr, once it has exited.
fn stderr_of(child: &mut std::process::Child) -> String {
    let mut text = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut text).unwrap();
    text
}

#[test]
fn an_agent_that_accepts_tcp_and_never_speaks_left_the_coordinator_silent() {
    let target = ServeProcess::start(&[]);
    let peer = mute_peer();
    let out = tempfile::tempdir().unwrap();
    let agents = peer.to_string();
    let began = Instant::now();
    let mut run = in_background(
        &target,
        &[
            "--agents",
            &agents,
            "--steps",
            "10",
            "--step-duration",
            "1s",
        ],
        out.path(),
    );
    let status = exited_within(&mut run, Duration::from_secs(30));
    let took = began.elapsed();
    let _ = run.kill();
    let stderr = stderr_of(&mut run);
    let status = status.unwrap_or_else(|| panic!("still silent after 30 s: {stderr}"));
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "agent {peer} accepted TCP but has not answered the greeting in 10 s"
        )),
        "{stderr}"
    );
    assert!(took >= Duration::from_secs(9), "gave up after {took:?}");
}

#[test]
fn a_ctrl_c_while_greeting_a_mute_agent_did_nothing() {
    let target = ServeProcess::start(&[]);
    let peer = mute_peer();
    let out = tempfile::tempdir().unwrap();
    let agents = peer.to_string();
    let mut run = in_background(
        &target,
        &[
            "--agents",
            &agents,
            "--steps",
            "10",
            "--step-duration",
            "1s",
        ],
        out.path(),
    );
    sleep(Duration::from_millis(1500));
    assert!(run.try_wait().unwrap().is_none(), "{}", stderr_of(&mut run));
    signal(&run, libc::SIGINT);
    let status = exited_within(&mut run, Duration::from_secs(2));
    let _ = run.kill();
    let stderr = stderr_of(&mut run);
    let status = status.unwrap_or_else(|| panic!("Ctrl-C did not end it within 2 s: {stderr}"));
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("interrupted before the first step: no load was sent"),
        "{stderr}"
    );
    assert_eq!(run_json(out.path())["status"], "aborted");
}

#[test]
fn a_second_agent_3_s_late_disconnected_the_first_while_greeting_it() {
    let _serial = tests::serial();
    let target = ServeProcess::start(&[]);
    let first = AgentProc::start(&[], &[]);
    let late = format!("127.0.0.1:{}", closed_port());
    let out = tempfile::tempdir().unwrap();
    let agents = format!("{},{late}", first.addr);
    let mut run = in_background(
        &target,
        &[
            "--agents",
            &agents,
            "--expect-agents",
            "2",
            "--wait-agents",
            "30s",
            "--steps",
            "20",
            "--step-duration",
            "1s",
        ],
        out.path(),
    );
    // Twice the first agent's dead-man switch: only the coordinator's heartbeat keeps it.
    sleep(Duration::from_secs(3));
    let mut second = Command::new(bin("stampede-agent"))
        .args(["--listen", &late, "--threads", "1"])
        .env("STAMPEDE_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let status = exited_within(&mut run, Duration::from_secs(60));
    let _ = second.kill();
    let _ = second.wait();
    let _ = run.kill();
    let stderr = stderr_of(&mut run);
    let status = status.unwrap_or_else(|| panic!("the run did not end: {stderr}"));
    assert!(status.success(), "{status}: {stderr}");
    assert_eq!(run_json(out.path())["agents"].as_array().unwrap().len(), 2);
}

#[test]
fn a_joined_agent_whose_partner_joined_3_s_later_was_counted_twice() {
    let _serial = tests::serial();
    let target = ServeProcess::start(&[]);
    let listen = format!("127.0.0.1:{}", closed_port());
    let out = tempfile::tempdir().unwrap();
    let coordinator = in_background(
        &target,
        &[
            "--listen",
            &listen,
            "--expect-agents",
            "2",
            "--wait-agents",
            "30s",
            "--model",
            "requests",
            "--steps",
            "50",
            "--step-duration",
            "1s",
        ],
        out.path(),
    );
    let join = || {
        Command::new(bin("stampede-agent"))
            .args(["--join", &listen, "--threads", "1"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap()
    };
    let mut first = join();
    // Twice the first one's dead-man switch: without a heartbeat it would drop its link and dial
    // again, and its second link would be counted as the second agent.
    sleep(Duration::from_secs(3));
    let mut second = join();
    let o = coordinator.wait_with_output().unwrap();
    for j in [&mut first, &mut second] {
        let _ = j.kill();
        let _ = j.wait();
    }
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let run = run_json(out.path());
    let agents = run["agents"].as_array().unwrap();
    assert_eq!(agents.len(), 2, "{run}");
    let steps = run["steps"].as_array().unwrap();
    let per_agent = per_agent_requests(&steps[0]);
    assert!(
        per_agent.iter().all(|&n| n > 0),
        "both loaded: {per_agent:?}"
    );
    assert_eq!(steps[0]["requests"].as_u64(), Some(target.requests()));
}

/// A TCP relay on 127.0.0.1:0 to `upstream` that holds every byte `delay` in each direction (a slow
/// link without netem); its threads end with the connections.
fn slow_relay(upstream: std::net::SocketAddr, delay: Duration) -> std::net::SocketAddr {
    use std::io::{Read, Write};
    use std::net::{Shutdown, TcpListener, TcpStream};
    fn pump(mut from: TcpStream, mut to: TcpStream, delay: Duration) {
        let (tx, rx) = std::sync::mpsc::channel::<(Instant, Vec<u8>)>();
        std::thread::spawn(move || {
            let mut buf = vec![0u8; 64 * 1024];
            while let Ok(n @ 1..) = from.read(&mut buf) {
                if tx
                    .send((Instant::now() + delay, buf[..n].to_vec()))
                    .is_err()
                {
                    return;
                }
            }
        });
        std::thread::spawn(move || {
            for (due, bytes) in rx {
                sleep(due.saturating_duration_since(Instant::now()));
                if to.write_all(&bytes).is_err() {
                    return;
                }
            }
            let _ = to.shutdown(Shutdown::Write);
        });
    }
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for down in listener.incoming().flatten() {
            let Ok(up) = TcpStream::connect(upstream) else {
                continue;
            };
            let _ = (down.set_nodelay(true), up.set_nodelay(true));
            pump(down.try_clone().unwrap(), up.try_clone().unwrap(), delay);
            pump(up, down, delay);
        }
    });
    addr
}

#[test]
fn a_fleet_behind_control_links_of_450_ms_each_way_could_not_start() {
    let _serial = tests::serial();
    let target = ServeProcess::start(&[]);
    // Three agents, dialed one after another: reaching all takes several times the first one's
    // 1.5 s dead-man switch.
    let fleet: Vec<AgentProc> = (0..3).map(|_| AgentProc::start(&[], &[])).collect();
    let slow: Vec<String> = fleet
        .iter()
        .map(|a| slow_relay(a.addr, Duration::from_millis(450)).to_string())
        .collect();
    let out = tempfile::tempdir().unwrap();
    let agents = slow.join(",");
    let mut run = in_background(
        &target,
        &[
            "--agents",
            &agents,
            "--steps",
            "30",
            "--step-duration",
            "2s",
        ],
        out.path(),
    );
    let status = exited_within(&mut run, Duration::from_secs(90));
    let _ = run.kill();
    let stderr = stderr_of(&mut run);
    let status = status.unwrap_or_else(|| panic!("the run did not end: {stderr}"));
    assert!(status.success(), "{status}: {stderr}");
    let steps = run_json(out.path())["steps"].as_array().unwrap().clone();
    assert_eq!(steps.len(), 1);
    assert_eq!(per_agent_requests(&steps[0]).len(), 3);
    assert_eq!(steps[0]["requests"].as_u64(), Some(target.requests()));
}
