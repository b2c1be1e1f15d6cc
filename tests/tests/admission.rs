//! Strangers at a TLS agent's door: plain-text connections held open by the hundred, another
//! agent's certificate used as a coordinator's (and a coordinator's as a joining agent's), a
//! certificate without a role; the real coordinator with the right certificates still gets in.
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use tests::{AgentProc, Lines, ServeProcess, stampede, text};

/// A fresh CA with certificates for an agent and a coordinator both named 127.0.0.1.
fn pki() -> tempfile::TempDir {
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
    root
}

/// `--tls-cert DIR/NAME.crt --tls-key DIR/NAME.key --tls-ca DIR/ca.crt`.
fn tls(dir: &Path, name: &str) -> Vec<String> {
    let f = |file: &str| dir.join(file).to_str().unwrap().to_string();
    vec![
        "--tls-cert".into(),
        f(&format!("{name}.crt")),
        "--tls-key".into(),
        f(&format!("{name}.key")),
        "--tls-ca".into(),
        f("ca.crt"),
    ]
}

fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// `stampede run` of two 1 s steps against `target` through `agent` with `tls`, given at most
/// `limit`: its exit code (None when it had to be killed) and stderr.
fn run_within(
    target: &ServeProcess,
    agent: &str,
    tls: &[&str],
    limit: Duration,
) -> (Option<i32>, String) {
    let out = tempfile::tempdir().unwrap();
    let url = target.url();
    let mut args = vec![
        "run",
        &url,
        "--agents",
        agent,
        "--model",
        "requests",
        "--steps",
        "10,20",
        "--step-duration",
        "1s",
        "--quiet",
        "--out",
        out.path().to_str().unwrap(),
    ];
    args.extend_from_slice(tls);
    let mut child = tests::spawn_stampede(&args);
    let log = Lines::of(&mut child);
    let began = Instant::now();
    while began.elapsed() < limit {
        if let Some(status) = child.try_wait().unwrap() {
            std::thread::sleep(Duration::from_millis(100));
            return (status.code(), log.text());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    (None, log.text())
}

/// An HTTP/2 client's preface and an empty SETTINGS frame: what a plain-text gRPC client sends
/// first, and after which the server waits for requests.
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00";

#[test]
fn plain_text_connections_held_a_tls_agents_descriptors_and_the_coordinator_hung() {
    let _serial = tests::serial();
    let pki = pki();
    let target = ServeProcess::start(&[]);
    // The agent, as a real one with few descriptors.
    let ready = tempfile::tempdir().unwrap();
    let file = ready.path().join("ready.json");
    let agent_tls = tls(pki.path(), "agent-127.0.0.1");
    let mut cmd = Command::new(tests::bin("stampede-agent"));
    cmd.args(["--listen", "127.0.0.1:0", "--threads", "1"])
        .args(&agent_tls)
        .arg("--ready-file")
        .arg(&file)
        .env("STAMPEDE_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut child = tests::with_nofile(&mut cmd, 300).spawn().unwrap();
    let log = Lines::of(&mut child);
    let addr = tests::ready_addr(&file, &mut child, &log);
    let agent = AgentProc {
        child,
        addr,
        log: log.clone(),
    };
    // 400 strangers, each speaking plain-text HTTP/2 and then nothing, held open by this test.
    let strangers: Vec<TcpStream> = (0..400)
        .filter_map(|_| {
            let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
            s.write_all(H2_PREFACE).ok()?;
            Some(s)
        })
        .collect();
    assert!(strangers.len() >= 300, "{} connected", strangers.len());
    // The real coordinator gets in, and its run ends well, within a bound.
    let coordinator_tls = tls(pki.path(), "coordinator");
    let (code, err) = run_within(
        &target,
        &addr.to_string(),
        &strs(&coordinator_tls),
        Duration::from_secs(60),
    );
    assert_eq!(code, Some(0), "{err}\nthe agent said: {}", log.text());
    assert_eq!(target.requests(), 30);
    // The strangers' connections are closed by the agent (their reads end), not held.
    all_closed_within(strangers, Duration::from_secs(30));
    // Refusals are logged, but not one line per connection, nor accept errors ten times a second.
    let said = log.text();
    let lines = said
        .lines()
        .filter(|l| l.contains("Refused a coordinator") || l.contains("Cannot accept"))
        .count();
    assert!(
        (1..=40).contains(&lines),
        "{lines} refusal lines for 400 strangers:\n{said}"
    );
    assert!(!said.contains("Too many open files"), "{said}");
    drop(agent);
}

#[test]
fn an_agents_certificate_was_taken_as_a_coordinators() {
    let _serial = tests::serial();
    let pki = pki();
    let target = ServeProcess::start(&[]);
    let agent = AgentProc::start(&strs(&tls(pki.path(), "agent-127.0.0.1")), &[]);
    let agents = agent.addr.to_string();
    // Another agent's certificate, from the same CA, as the coordinator's.
    let o = stampede(&[
        "certs",
        "issue",
        pki.path().to_str().unwrap(),
        "127.0.0.1",
        "--file",
        "other-agent",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let (code, err) = run_within(
        &target,
        &agents,
        &strs(&tls(pki.path(), "other-agent")),
        Duration::from_secs(60),
    );
    // A certificate of the wrong role is the fleet's setup to fix: 2 (docs/reference/exit-codes.md).
    assert_eq!(code, Some(2), "{err}");
    let says = "refused: this agent takes only a coordinator's certificate and it is an agent's: \
                re-issue it with `stampede certs issue DIR NAME --role coordinator`";
    assert!(err.contains(says), "{err}");
    assert!(
        agent.log.wait_for(
            "reason=this agent takes only a coordinator's certificate and it is an agent's",
            Duration::from_secs(5)
        ),
        "{}",
        agent.log.text()
    );
    // A certificate from the right CA without any role (as `stampede certs` made them before).
    no_role_certificate(pki.path(), "old-coordinator");
    let (code, err) = run_within(
        &target,
        &agents,
        &strs(&tls(pki.path(), "old-coordinator")),
        Duration::from_secs(60),
    );
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("and it says no role (no SAN URI stampede:role:…): re-issue it with `stampede certs issue DIR NAME --role coordinator`"),
        "{err}"
    );
    assert_eq!(target.requests(), 0, "no refused coordinator sent any load");
    // The coordinator's own certificate runs.
    let (code, err) = run_within(
        &target,
        &agents,
        &strs(&tls(pki.path(), "coordinator")),
        Duration::from_secs(60),
    );
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(target.requests(), 30);
}

/// DIR/NAME.crt and .key: a leaf for 127.0.0.1 from DIR's CA, both client and server, with no role.
fn no_role_certificate(dir: &Path, name: &str) {
    let read = |f: &str| std::fs::read_to_string(dir.join(f)).unwrap();
    let ca_key = rcgen::KeyPair::from_pem(&read("ca.key")).unwrap();
    let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.distinguished_name
        .push(rcgen::DnType::CommonName, read("ca.name").trim());
    ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let issuer = rcgen::Issuer::new(ca, ca_key);
    let mut p = rcgen::CertificateParams::new(vec!["127.0.0.1".to_string()]).unwrap();
    p.extended_key_usages = vec![
        rcgen::ExtendedKeyUsagePurpose::ServerAuth,
        rcgen::ExtendedKeyUsagePurpose::ClientAuth,
    ];
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = p.signed_by(&key, &issuer).unwrap();
    std::fs::write(dir.join(format!("{name}.crt")), cert.pem()).unwrap();
    std::fs::write(dir.join(format!("{name}.key")), key.serialize_pem()).unwrap();
}

#[test]
fn a_coordinators_certificate_joined_as_an_agent() {
    let _serial = tests::serial();
    let pki = pki();
    let ready = tempfile::tempdir().unwrap();
    let file = ready.path().join("ready.json");
    let out = tempfile::tempdir().unwrap();
    let coordinator_tls = tls(pki.path(), "coordinator");
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
    args.extend(strs(&coordinator_tls));
    let mut coordinator = tests::spawn_stampede(&args);
    let coordinator_log = Lines::of(&mut coordinator);
    let listen = tests::ready_addr(&file, &mut coordinator, &coordinator_log).to_string();
    // The coordinator's certificate (it names 127.0.0.1 too) on a joining agent.
    let mut joiner = Command::new(tests::bin("stampede-agent"))
        .args(["--join", &listen, "--threads", "1"])
        .args(&coordinator_tls)
        .env("STAMPEDE_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let agent_log = Lines::of(&mut joiner);
    let told = agent_log.wait_for(
        "reason=this coordinator takes only an agent's or a monitor's certificate and it is a \
         coordinator's",
        Duration::from_secs(20),
    );
    let logged =
        coordinator_log.wait_for("Refused an agent peer=127.0.0.1:", Duration::from_secs(5));
    for child in [&mut joiner, &mut coordinator] {
        let _ = child.kill();
        let _ = child.wait();
    }
    assert!(told, "the agent said: {}", agent_log.text());
    assert!(logged, "the coordinator said: {}", coordinator_log.text());
}

/// Reads each of `held` until the far end closes it; fails if one is still open after `limit`.
fn all_closed_within(held: Vec<TcpStream>, limit: Duration) {
    let began = Instant::now();
    for mut s in held {
        let left = limit.saturating_sub(began.elapsed());
        s.set_read_timeout(Some(left.max(Duration::from_millis(1))))
            .unwrap();
        let mut buf = [0u8; 512];
        loop {
            match s.read(&mut buf) {
                Ok(n) if n > 0 => continue,
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    panic!("a stranger's connection was still open after {limit:?}")
                }
                _ => break,
            }
        }
    }
}

#[test]
fn plain_text_connections_to_a_tls_coordinators_listen_port_were_never_closed() {
    let _serial = tests::serial();
    let pki = pki();
    let o = stampede(&[
        "certs",
        "issue",
        pki.path().to_str().unwrap(),
        "127.0.0.1",
        "--file",
        "joiner",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let target = ServeProcess::start(&[]);
    let ready = tempfile::tempdir().unwrap();
    let file = ready.path().join("ready.json");
    let out = tempfile::tempdir().unwrap();
    let coordinator_tls = tls(pki.path(), "coordinator");
    let url = target.url();
    let mut args = vec![
        "run",
        &url,
        "--listen",
        "127.0.0.1:0",
        "--ready-file",
        file.to_str().unwrap(),
        "--expect-agents",
        "1",
        "--wait-agents",
        "60s",
        "--model",
        "requests",
        "--steps",
        "10",
        "--step-duration",
        "1s",
        "--quiet",
        "--out",
        out.path().to_str().unwrap(),
    ];
    args.extend(strs(&coordinator_tls));
    let mut coordinator = tests::spawn_stampede(&args);
    let coordinator_log = Lines::of(&mut coordinator);
    let listen = tests::ready_addr(&file, &mut coordinator, &coordinator_log);
    let strangers: Vec<TcpStream> = (0..200)
        .filter_map(|_| {
            let mut s = TcpStream::connect_timeout(&listen, Duration::from_secs(2)).ok()?;
            s.write_all(H2_PREFACE).ok()?;
            Some(s)
        })
        .collect();
    assert_eq!(strangers.len(), 200);
    // Closed by the coordinator while it still waits for its agent.
    all_closed_within(strangers, Duration::from_secs(30));
    assert!(
        coordinator.try_wait().unwrap().is_none(),
        "{}",
        coordinator_log.text()
    );
    let mut joiner = Command::new(tests::bin("stampede-agent"))
        .args(["--join", &listen.to_string(), "--threads", "1"])
        .args(tls(pki.path(), "joiner"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let began = Instant::now();
    let status = loop {
        if let Some(status) = coordinator.try_wait().unwrap() {
            break Some(status);
        }
        if began.elapsed() > Duration::from_secs(60) {
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let _ = joiner.kill();
    let _ = joiner.wait();
    let _ = coordinator.kill();
    let _ = coordinator.wait();
    std::thread::sleep(Duration::from_millis(100));
    let said = coordinator_log.text();
    assert_eq!(status.and_then(|s| s.code()), Some(0), "{said}");
    assert_eq!(target.requests(), 10);
    let lines = said
        .lines()
        .filter(|l| l.contains("Refused an agent"))
        .count();
    assert!(
        lines <= 40,
        "{lines} refusal lines for 200 strangers:\n{said}"
    );
}
