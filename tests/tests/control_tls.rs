//! Mutual TLS on the control channel: certificates from `stampede certs init`, a ramp over TLS, and
//! refusals of a certificate from another CA, an expired one, and none at all, each in the agent's
//! log; TLS on one side only, either way and in both directions, said in words naming the flags.
use std::path::Path;
use std::time::Duration;

use tests::{AgentProc, Lines, ServeProcess, run_ok, stampede, text};

fn certs(dir: &Path) {
    let o = stampede(&[
        "certs",
        "init",
        dir.to_str().unwrap(),
        "--agent",
        "127.0.0.1",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
}

#[test]
fn mutual_tls_runs_a_ramp_and_refuses_bad_client_certificates() {
    let _serial = tests::serial();
    let root = tempfile::tempdir().unwrap();
    let (pki, other) = (root.path().join("pki"), root.path().join("other"));
    certs(&pki);
    certs(&other);
    let o = stampede(&[
        "certs",
        "issue",
        pki.to_str().unwrap(),
        "coordinator",
        "--role",
        "coordinator",
        "--file",
        "expired",
        "--days",
        "1",
        "--backdate-days",
        "5",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let f = |dir: &Path, name: &str| dir.join(name).to_str().unwrap().to_string();
    let target = ServeProcess::start(&[]);
    let agent = AgentProc::start(
        &[
            "--tls-cert",
            &f(&pki, "agent-127.0.0.1.crt"),
            "--tls-key",
            &f(&pki, "agent-127.0.0.1.key"),
            "--tls-ca",
            &f(&pki, "ca.crt"),
        ],
        &[],
    );
    let agents = agent.addr.to_string();
    let url = target.url();
    let ran = run_ok(&[
        &target.url(),
        "--agents",
        &agents,
        "--tls-cert",
        &f(&pki, "coordinator.crt"),
        "--tls-key",
        &f(&pki, "coordinator.key"),
        "--tls-ca",
        &f(&pki, "ca.crt"),
        "--model",
        "requests",
        "--steps",
        "20,40",
        "--step-duration",
        "1s",
    ]);
    assert_eq!(ran.steps().len(), 2);
    let sent = target.requests();
    assert_eq!(sent, 60);

    let refused = |tls: &[&str]| {
        let out = tempfile::tempdir().unwrap();
        let mut args = vec![
            "run",
            &url,
            "--agents",
            &agents,
            "--steps",
            "20",
            "--step-duration",
            "1s",
            "--quiet",
            "--out",
            out.path().to_str().unwrap(),
        ];
        args.extend_from_slice(tls);
        let o = stampede(&args);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{tls:?}: {err}");
        assert!(
            err.contains(&format!("agent {agents} refused:")),
            "{tls:?}: {err}"
        );
        assert!(
            err.contains("mutual TLS: the agent takes a certificate signed by its --tls-ca"),
            "{err}"
        );
        err
    };
    let logged = |reason: &str| {
        assert!(
            agent.log.wait_for(
                &format!("reason={reason}"),
                std::time::Duration::from_secs(5)
            ),
            "the agent did not log '{reason}': {}",
            agent.log.text()
        );
    };
    // A client certificate from another CA.
    refused(&[
        "--tls-cert",
        &f(&other, "coordinator.crt"),
        "--tls-key",
        &f(&other, "coordinator.key"),
        "--tls-ca",
        &f(&pki, "ca.crt"),
    ]);
    logged("its certificate is not signed by this agent's --tls-ca");
    // An expired one from the right CA.
    refused(&[
        "--tls-cert",
        &f(&pki, "expired.crt"),
        "--tls-key",
        &f(&pki, "expired.key"),
        "--tls-ca",
        &f(&pki, "ca.crt"),
    ]);
    logged("its certificate has expired");
    // None at all.
    refused(&["--tls-ca", &f(&pki, "ca.crt")]);
    logged(
        "it presented no certificate (mutual TLS: give the coordinator --tls-cert and --tls-key)",
    );
    // And plain text to a TLS agent.
    let out = tempfile::tempdir().unwrap();
    let o = stampede(&[
        "run",
        &target.url(),
        "--agents",
        &agents,
        "--steps",
        "20",
        "--step-duration",
        "1s",
        "--quiet",
        "--out",
        out.path().to_str().unwrap(),
    ]);
    // The fleet's setup to fix, as every refusal of it: exit 2.
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    assert_eq!(
        target.requests(),
        sent,
        "no refused coordinator sent any load"
    );
}

#[test]
fn mutual_tls_also_covers_agents_that_join() {
    let _serial = tests::serial();
    let root = tempfile::tempdir().unwrap();
    let pki = root.path().join("pki");
    let o = stampede(&[
        "certs",
        "init",
        pki.to_str().unwrap(),
        "--agent",
        "joiner",
        "--coordinator",
        "127.0.0.1",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let f = |name: &str| pki.join(name).to_str().unwrap().to_string();
    let target = ServeProcess::start(&[]);
    let listen = format!("127.0.0.1:{}", tests::closed_port());
    let out = tempfile::tempdir().unwrap();
    let coordinator = tests::spawn_stampede(&[
        "run",
        &target.url(),
        "--listen",
        &listen,
        "--expect-agents",
        "1",
        "--wait-agents",
        "20s",
        "--tls-cert",
        &f("coordinator.crt"),
        "--tls-key",
        &f("coordinator.key"),
        "--tls-ca",
        &f("ca.crt"),
        "--model",
        "requests",
        "--steps",
        "30",
        "--step-duration",
        "1s",
        "--quiet",
        "--out",
        out.path().to_str().unwrap(),
    ]);
    let mut joiner = std::process::Command::new(tests::bin("stampede-agent"))
        .args([
            "--join",
            &listen,
            "--threads",
            "1",
            "--tls-cert",
            &f("agent-joiner.crt"),
            "--tls-key",
        ])
        .args([&f("agent-joiner.key"), "--tls-ca", &f("ca.crt")])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let o = coordinator.wait_with_output().unwrap();
    let _ = joiner.kill();
    let _ = joiner.wait();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert_eq!(target.requests(), 30);
}

/// A fresh CA with certificates for an agent and a coordinator both named 127.0.0.1, and the flags
/// that give them: (the directory, the agent's flags, the coordinator's flags).
fn pki() -> (tempfile::TempDir, Vec<String>, Vec<String>) {
    let root = tempfile::tempdir().unwrap();
    let o = stampede(&[
        "certs",
        "init",
        root.path().to_str().unwrap(),
        "--agent",
        "127.0.0.1",
        "--coordinator",
        "127.0.0.1",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let flags = |name: &str| -> Vec<String> {
        let f = |file: &str| root.path().join(file).to_str().unwrap().to_string();
        vec![
            "--tls-cert".into(),
            f(&format!("{name}.crt")),
            "--tls-key".into(),
            f(&format!("{name}.key")),
            "--tls-ca".into(),
            f("ca.crt"),
        ]
    };
    let (agent, coordinator) = (flags("agent-127.0.0.1"), flags("coordinator"));
    (root, agent, coordinator)
}

fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// `stampede run` against a listening agent with `tls` flags: its exit code and stderr.
fn dial(agent: &AgentProc, tls: &[&str]) -> (Option<i32>, String) {
    let out = tempfile::tempdir().unwrap();
    let agents = agent.addr.to_string();
    let mut args = vec![
        "run",
        "http://127.0.0.1:9/",
        "--agents",
        &agents,
        "--steps",
        "5",
        "--step-duration",
        "1s",
        "--quiet",
        "--out",
        out.path().to_str().unwrap(),
    ];
    args.extend_from_slice(tls);
    let o = stampede(&args);
    (o.status.code(), text(&o.stderr))
}

/// Dials `agent` with the coordinator's `tls` flags and checks the refusal: exit 2 (the fleet's setup
/// to fix), the coordinator
/// says `says` after "agent ADDR refused: " and not the transport's `not_said`, and the agent logs
/// why it refused the peer (`reason`).
fn refused_in_words(agent: &AgentProc, tls: &[&str], says: &str, not_said: &str, reason: &str) {
    let (code, err) = dial(agent, tls);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains(&format!("agent {} refused: {says}", agent.addr)),
        "{err}"
    );
    assert!(!err.contains(not_said), "{err}");
    assert!(
        agent
            .log
            .wait_for(&format!("reason={reason}"), Duration::from_secs(5)),
        "{}",
        agent.log.text()
    );
}

#[test]
fn plain_text_to_a_tls_agent_read_as_frame_with_invalid_size() {
    let (_pki, agent_tls, _) = pki();
    let agent = AgentProc::start(&strs(&agent_tls), &[]);
    refused_in_words(
        &agent,
        &[],
        "this agent takes mutual TLS only: give the coordinator --tls-cert, --tls-key and --tls-ca",
        "frame with invalid size",
        "it speaks plain text; this agent takes TLS only",
    );
    assert!(
        agent
            .log
            .text()
            .contains("Refused a coordinator peer=127.0.0.1:")
    );
}

#[test]
fn tls_to_a_plain_agent_read_as_invalid_data() {
    let (_pki, _, coordinator_tls) = pki();
    let agent = AgentProc::start(&[], &[]);
    refused_in_words(
        &agent,
        &strs(&coordinator_tls),
        "it answers in plain text, not TLS: the agent listens without TLS; give it --tls-cert, \
         --tls-key and --tls-ca too, or this coordinator none of them",
        "invalid data",
        "it speaks TLS; this agent listens in plain text",
    );
}

/// A coordinator (its `tls` flags) waiting on 127.0.0.1:0 for one agent to join: the process,
/// its log, the address it listens on, and the directories it uses (kept while it runs).
fn awaiting_one_agent(
    tls: &[&str],
) -> (
    std::process::Child,
    Lines,
    std::net::SocketAddr,
    [tempfile::TempDir; 2],
) {
    let ready = tempfile::tempdir().unwrap();
    let file = ready.path().join("ready.json");
    let out = tempfile::tempdir().unwrap();
    let mut args = vec![
        "run",
        "http://127.0.0.1:9/",
        "--listen",
        "127.0.0.1:0",
        "--ready-file",
        file.to_str().unwrap(),
        "--expect-agents",
        "1",
        "--wait-agents",
        "30s",
        "--steps",
        "5",
        "--quiet",
        "--out",
        out.path().to_str().unwrap(),
    ];
    args.extend_from_slice(tls);
    let mut coordinator = tests::spawn_stampede(&args);
    let log = Lines::of(&mut coordinator);
    let listen = tests::ready_addr(&file, &mut coordinator, &log);
    (coordinator, log, listen, [ready, out])
}

/// A coordinator waiting on 127.0.0.1:0 for one agent to join, and an agent dialing it, each with
/// its own TLS flags; waits for `agent_says` in the agent's log and `coordinator_says` in the
/// coordinator's, then stops both.
fn join_mismatch(
    coordinator_tls: &[&str],
    agent_tls: &[&str],
    agent_says: &str,
    coordinator_says: &str,
) {
    let (mut coordinator, coordinator_log, listen, _dirs) = awaiting_one_agent(coordinator_tls);
    let listen = listen.to_string();
    let mut joiner = std::process::Command::new(tests::bin("stampede-agent"))
        .args(["--join", &listen, "--threads", "1"])
        .args(agent_tls)
        .env("STAMPEDE_LOG", "warn")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let agent_log = Lines::of(&mut joiner);
    let told = agent_log.wait_for(agent_says, Duration::from_secs(20));
    let logged = coordinator_log.wait_for(coordinator_says, Duration::from_secs(5));
    for child in [&mut joiner, &mut coordinator] {
        let _ = child.kill();
        let _ = child.wait();
    }
    assert!(told, "the agent said: {}", agent_log.text());
    assert!(logged, "the coordinator said: {}", coordinator_log.text());
    assert!(
        agent_log
            .text()
            .contains("The coordinator refused this agent coordinator=127.0.0.1:")
    );
    assert!(
        coordinator_log
            .text()
            .contains("Refused an agent peer=127.0.0.1:")
    );
}

#[test]
fn a_plain_agent_joining_a_tls_coordinator_read_frame_with_invalid_size() {
    let (_pki, _, coordinator_tls) = pki();
    join_mismatch(
        &strs(&coordinator_tls),
        &[],
        "reason=this coordinator takes mutual TLS only: give the agent --tls-cert, --tls-key and \
         --tls-ca",
        "reason=it speaks plain text; this coordinator takes TLS only",
    );
}

#[test]
fn a_tls_agent_joining_a_plain_coordinator_read_transport_error() {
    let (_pki, agent_tls, _) = pki();
    join_mismatch(
        &[],
        &strs(&agent_tls),
        "reason=it answers in plain text, not TLS: the coordinator listens without TLS; give it \
         --tls-cert, --tls-key and --tls-ca too, or this agent none of them",
        "reason=it speaks TLS; this coordinator listens in plain text",
    );
}

#[test]
fn an_agent_that_refuses_the_coordinator_s_certificate_says_so_once_and_backs_off() {
    // The coordinator's certificate names 127.0.0.1; the agent dials it as localhost. That is the
    // agent's own refusal: it read "The coordinator refused this agent", once a second.
    let (_pki, agent_tls, coordinator_tls) = pki();
    let (mut coordinator, _log, listen, _dirs) = awaiting_one_agent(&strs(&coordinator_tls));
    let port = listen.port();
    let mut joiner = std::process::Command::new(tests::bin("stampede-agent"))
        .args(["--join", &format!("localhost:{port}"), "--threads", "1"])
        .args(strs(&agent_tls))
        .env("STAMPEDE_LOG", "info")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let agent_log = Lines::of(&mut joiner);
    let said = "This agent refused the coordinator";
    let told = agent_log.wait_for(said, Duration::from_secs(20));
    // Tries at 0, 1, 3 and 7 s: the old loop said it 8 times in these 7 s.
    std::thread::sleep(Duration::from_secs(7));
    for child in [&mut joiner, &mut coordinator] {
        let _ = child.kill();
        let _ = child.wait();
    }
    let log = agent_log.text();
    assert!(told, "the agent said: {log}");
    assert_eq!(log.matches(said).count(), 1, "{log}");
    assert!(
        log.contains("its certificate does not name localhost"),
        "{log}"
    );
    assert!(!log.contains("The coordinator refused this agent"), "{log}");
}
