//! One rule for exit codes, per refusal kind, with the real binaries on loopback: what the user must
//! change before the run can go exits 2 (a name that does not resolve, a target that does not speak the
//! HTTP asked for, an agent's `--allow-target`, by name rule or by address rule), said once, and the fix
//! a refusal suggests is one that runs.
use std::process::Command;

use tests::{AgentProc, RecordingServer, ServeProcess, bin, run_quiet, text};

/// How many times `what` is said on stderr.
fn said(stderr: &str, what: &str) -> usize {
    stderr.matches(what).count()
}

#[test]
fn an_unresolvable_host_name_exited_1_where_every_other_refused_target_exits_2() {
    // In a network namespace of its own (only a loopback, down): the lookup fails at once, and no
    // query leaves this machine.
    let out = tempfile::tempdir().unwrap();
    let o = Command::new("unshare")
        .args(["-rn"])
        .arg(bin("stampede"))
        .args([
            "run",
            "http://no-such-host.invalid:8080/",
            "--steps",
            "10",
            "--step-duration",
            "1s",
            "--quiet",
            "--out",
        ])
        .arg(out.path().join("out"))
        .output()
        .unwrap();
    let err = text(&o.stderr);
    if err.contains("unshare:") {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "CI=true requires user namespaces: {err}"
        );
        eprintln!("skipped: no user namespaces here ({err})");
        return;
    }
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert_eq!(
        said(&err, "cannot resolve target host 'no-such-host.invalid'"),
        1,
        "{err}"
    );
}

#[test]
fn h2c_against_an_http1_port_exits_2_once_and_its_suggested_fix_runs() {
    let h1 = RecordingServer::start();
    let h2c = format!("h2c://{}/", h1.addr);
    let http = format!("http://{}/", h1.addr);
    for (target, flags) in [(&h2c, &[][..]), (&http, &["--http", "2"][..])] {
        let mut args = vec![target.as_str(), "--steps", "10", "--step-duration", "1s"];
        args.extend_from_slice(flags);
        let (o, _dir) = run_quiet(&args);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        // Said once: not also as the embedded agent's log line.
        assert_eq!(
            said(&err, "answered the HTTP/2 preface in HTTP/1"),
            1,
            "{err}"
        );
        assert_eq!(err.lines().count(), 1, "{err}");
        // Its fix once was `--http 1.1`, which an h2c:// target refuses too.
        assert!(
            err.contains("for HTTP/1.1 write the target http://, not h2c://, and without --http 2"),
            "{err}"
        );
    }
    // The probe's preface reads as requests `PRI` and `SM` to an HTTP/1.1 server; no load was sent.
    assert!(
        h1.seen().iter().all(|s| s.method != "GET"),
        "no load was sent"
    );
    // The suggestion followed: the target written http://, no --http 2.
    let (o, _dir) = run_quiet(&[&http, "--steps", "10", "--step-duration", "1s"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert_eq!(
        h1.seen().iter().filter(|s| s.method == "GET").count(),
        10,
        "the run went"
    );
}

#[test]
fn an_allow_target_name_rule_refusal_exited_1_where_an_address_rule_s_exits_2() {
    let target = ServeProcess::start(&[]);
    let url = format!("http://localhost:{}/", target.addr.port());
    let run = |agent: &AgentProc| {
        let addr = agent.addr.to_string();
        let (o, _dir) = run_quiet(&[
            &url,
            "--agents",
            &addr,
            "--steps",
            "10",
            "--step-duration",
            "1s",
        ]);
        (o.status.code(), text(&o.stderr))
    };
    // The name matches, but a name rule never admits the loopback address it resolves to.
    let by_name = AgentProc::start(&["--allow-target", "localhost"], &[]);
    let (code, err) = run(&by_name);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("a name rule does not admit such an address"),
        "{err}"
    );
    let by_address = AgentProc::start(&["--allow-target", "10.0.0.0/8"], &[]);
    let (code, err) = run(&by_address);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("outside this agent's --allow-target list"),
        "{err}"
    );
    assert_eq!(target.requests(), 0, "no load was sent");
}
