//! Every error class keeps its first message, in words, with a hint where one helps: in run.json's
//! `error_messages` and in the step's notes (the stdout table), not only a count.
use tests::{Hostile, HostileServer, Ran, ServeProcess, closed_port, run_ok};

/// One short step at 20 new connections/s against `url`.
fn run(url: &str, timeout: &str) -> Ran {
    run_ok(&[
        url,
        "--steps",
        "20",
        "--step-duration",
        "1s",
        "--timeout",
        timeout,
    ])
}

/// The step's first message for `class`, and that the notes under the table say it with the count.
fn words(ran: &Ran, class: &str) -> String {
    let step = ran.step(0);
    let words = step["error_messages"][class]
        .as_str()
        .unwrap_or_else(|| panic!("no {class} message in {step}"))
        .to_string();
    let count = step["errors"][class].as_u64().unwrap();
    assert!(count > 0, "{step}");
    let note = format!("step 1: note: {count} {class} errors, the first: {words}");
    assert!(
        ran.stdout.contains(&note),
        "no '{note}' in:\n{}",
        ran.stdout
    );
    words
}

#[test]
fn untrusted_certificate_error_says_use_insecure_not_just_other() {
    let target = ServeProcess::start(&["--tls"]);
    let ran = run(&target.url(), "2s");
    assert_eq!(
        words(&ran, "other"),
        "TLS: certificate signed by unknown issuer: use --insecure for a self-signed target"
    );
}

/// The first message of `class` from a server that misbehaves `how`.
fn hostile_words(how: Hostile, timeout: &str, class: &str) -> String {
    let server = HostileServer::start(how);
    words(&run(&server.url(), timeout), class)
}

#[test]
fn garbage_reply_error_says_not_an_http_reply() {
    assert_eq!(
        hostile_words(Hostile::Garbage, "2s", "other"),
        "not an HTTP reply (it began \"SSH-2.0-OpenSSH_9.2 noth\")"
    );
}

#[test]
fn refused_connection_error_names_the_address() {
    let port = closed_port();
    // Nothing connected: the run stops after its step, exit 1, the step's words kept.
    let (o, dir) = tests::run_quiet(&[
        &format!("http://127.0.0.1:{port}/"),
        "--steps",
        "20",
        "--step-duration",
        "1s",
        "--timeout",
        "2s",
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", tests::text(&o.stderr));
    let ran = Ran {
        run: tests::run_json(dir.path()),
        stdout: tests::text(&o.stdout),
        dir,
    };
    assert_eq!(
        words(&ran, "conn-refused"),
        format!("connection refused by 127.0.0.1:{port}: is the target up?")
    );
}

#[test]
fn plain_http_to_a_tls_target_error_says_use_https() {
    let target = ServeProcess::start(&["--tls"]);
    let url = target.url().replace("https://", "http://");
    let ran = run(&url, "2s");
    let step = ran.step(0);
    // Whichever class the server's answer falls in, its words name the scheme to use.
    let messages = step["error_messages"].as_object().unwrap();
    assert!(
        messages
            .values()
            .any(|m| m.as_str().unwrap().contains("use https://")),
        "{step}"
    );
}

#[test]
fn client_timeout_error_names_the_timeout() {
    assert_eq!(
        hostile_words(Hostile::Silent, "300ms", "client-timeout"),
        "no complete reply within 300ms (--timeout)"
    );
}
