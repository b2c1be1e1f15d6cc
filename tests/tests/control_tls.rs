//! Mutual TLS on the control channel: certificates from `stampede certs init`, a ramp over TLS, and
//! refusals of a certificate from another CA, an expired one, and none at all.
use std::path::Path;

use tests::{AgentProc, Target, run_ok, stampede, text};

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
        "--file",
        "expired",
        "--days",
        "1",
        "--backdate-days",
        "5",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let f = |dir: &Path, name: &str| dir.join(name).to_str().unwrap().to_string();
    let target = Target::start(&[]);
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
        assert_eq!(o.status.code(), Some(1), "{tls:?}: {err}");
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
    // A client certificate from another CA.
    refused(&[
        "--tls-cert",
        &f(&other, "coordinator.crt"),
        "--tls-key",
        &f(&other, "coordinator.key"),
        "--tls-ca",
        &f(&pki, "ca.crt"),
    ]);
    // An expired one from the right CA.
    refused(&[
        "--tls-cert",
        &f(&pki, "expired.crt"),
        "--tls-key",
        &f(&pki, "expired.key"),
        "--tls-ca",
        &f(&pki, "ca.crt"),
    ]);
    // None at all.
    refused(&["--tls-ca", &f(&pki, "ca.crt")]);
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
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
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
    let target = Target::start(&[]);
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
