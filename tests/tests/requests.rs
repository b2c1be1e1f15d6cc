//! What goes on the wire: method, headers, body, the URL list in order, and autobench's num_conn steps.
use tests::{RecordingServer, ServeProcess, run_ok};

#[test]
fn method_headers_and_body_are_sent_as_given() {
    let server = RecordingServer::start();
    let url = format!("http://{}/api/items?x=1", server.addr);
    let ran = run_ok(&[
        &url,
        "-m",
        "POST",
        "-H",
        "Content-Type: application/json",
        "-H",
        "X-Trace: abc",
        "--body",
        r#"{"a":1}"#,
        "--model",
        "requests",
        "--steps",
        "20",
        "--step-duration",
        "1s",
    ]);
    let seen = server.seen();
    assert_eq!(seen.len(), 20);
    for r in &seen {
        assert_eq!(
            (r.method.as_str(), r.path.as_str()),
            ("POST", "/api/items?x=1")
        );
        let h = |name: &str| {
            r.headers
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
        };
        assert_eq!(h("content-type").as_deref(), Some("application/json"));
        assert_eq!(h("x-trace").as_deref(), Some("abc"));
        assert_eq!(h("host"), Some(server.addr.to_string()));
        assert!(h("user-agent").unwrap().starts_with("stampede/"));
        assert_eq!(r.body, br#"{"a":1}"#);
    }
    let step = ran.step(0);
    assert_eq!(step["requests"], 20);
    assert!(step["bytes_out"].as_u64().unwrap() > 20 * 7, "{step}");
}

#[test]
fn credentials_reach_the_server_but_no_file_of_the_results() {
    let server = RecordingServer::start();
    let url = format!("http://{}/private", server.addr);
    let ran = run_ok(&[
        &url,
        "--basic-auth",
        "alice:s3cret",
        "-H",
        "Cookie: session=c00kie",
        "-c",
        "1",
        "-n",
        "3",
    ]);
    let seen = server.seen();
    assert_eq!(seen.len(), 3);
    for r in &seen {
        let h = |name: &str| {
            r.headers
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
        };
        // base64("alice:s3cret")
        assert_eq!(
            h("authorization").as_deref(),
            Some("Basic YWxpY2U6czNjcmV0")
        );
        assert_eq!(h("cookie").as_deref(), Some("session=c00kie"));
    }
    let run = tests::run_json(ran.dir.path());
    let headers = &run["plan"]["requests"][0]["headers"];
    assert_eq!(
        headers,
        &serde_json::json!(["Cookie: (redacted)", "Authorization: Basic (redacted)"]),
        "{run}"
    );
    for entry in walk(ran.dir.path()) {
        let bytes = std::fs::read(&entry).unwrap();
        let text = String::from_utf8_lossy(&bytes);
        for secret in ["YWxpY2U6czNjcmV0", "s3cret", "c00kie"] {
            assert!(!text.contains(secret), "{} holds {secret}", entry.display());
        }
    }
}

/// Every file under `dir`.
fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            files.extend(walk(&path));
        } else {
            files.push(path);
        }
    }
    files
}

#[test]
fn url_list_is_used_round_robin() {
    // Also against servers that close or silently drop every connection after 4 replies (the list's
    // length is 3, so the reconnects fall on every URL): a request resent after a stale connection is
    // the same request, so the order never skips one (regression: the resend took the next URL).
    for server in [
        RecordingServer::start(),
        RecordingServer::closing_after(4),
        RecordingServer::dropping_after(4),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let list = dir.path().join("urls.txt");
        std::fs::write(
            &list,
            format!(
                "# three URLs\nhttp://{0}/a\nPOST http://{0}/b\n\nhttp://{0}/c\n",
                server.addr
            ),
        )
        .unwrap();
        let ran = run_ok(&[
            "--urls",
            list.to_str().unwrap(),
            "--model",
            "concurrency",
            "--steps",
            "1",
            "--step-duration",
            "1s",
            "--threads",
            "1",
        ]);
        let seen = server.seen();
        assert!(seen.len() >= 9, "{}", seen.len());
        assert_eq!(ran.step(0)["requests"], seen.len() as u64);
        for (i, r) in seen.iter().enumerate() {
            let expected = [("GET", "/a"), ("POST", "/b"), ("GET", "/c")][i % 3];
            assert_eq!(
                (r.method.as_str(), r.path.as_str()),
                expected,
                "request {i}"
            );
        }
    }
}

#[test]
fn num_conn_ends_each_step_after_that_many_connections() {
    let server = RecordingServer::start();
    let url = format!("http://{}/", server.addr);
    let ran = run_ok(&[
        &url,
        "--num_conn",
        "30",
        "--num_call",
        "3",
        "--low_rate",
        "20",
        "--high_rate",
        "40",
        "--rate_step",
        "20",
    ]);
    let steps = ran.steps();
    assert_eq!(steps.len(), 2);
    for s in steps {
        assert_eq!(s["connections"], 30, "{s}");
        assert_eq!(s["requests"], 90, "{s}");
    }
    // 30 connections at 20/s is a 1.5 s step, at 40/s 0.75 s.
    assert_eq!(steps[0]["duration_s"].as_f64().unwrap(), 1.5);
    assert_eq!(steps[1]["duration_s"].as_f64().unwrap(), 0.75);
    let seen = server.seen();
    assert_eq!(seen.len(), 180);
    // The last call of each connection says so, letting the server close first (and keep the
    // TIME_WAIT): one in three here.
    let closing = seen
        .iter()
        .filter(|r| {
            r.headers
                .iter()
                .any(|(k, v)| k == "connection" && v == "close")
        })
        .count();
    assert_eq!(closing, 60);
}

#[test]
fn poisson_arrivals_average_the_demanded_rate() {
    let server = RecordingServer::start();
    let url = format!("http://{}/", server.addr);
    let ran = run_ok(&[
        &url,
        "--model",
        "requests",
        "--arrival",
        "poisson",
        "--steps",
        "400",
        "--step-duration",
        "3s",
        "--seed",
        "7",
    ]);
    let step = ran.step(0);
    let achieved = step["achieved_request_rate"].as_f64().unwrap();
    // 1200 expected arrivals: a Poisson count is within 4 standard deviations (about 139) of it.
    assert!((achieved - 400.0).abs() < 47.0, "achieved {achieved}");
    assert_eq!(
        server.seen().len() as u64,
        step["requests"].as_u64().unwrap()
    );
}

#[test]
fn connections_the_server_closes_are_reopened_not_counted_as_errors() {
    // Regression: reusing a connection the server had closed after `Connection: close` was counted as
    // conn-reset, and in the requests model the arrival was lost.
    // Regression too: a connection dropped without `Connection: close` (an idle or request limit)
    // must be reopened, whether the drop is seen while idle or only when the next request is sent.
    let servers = [
        RecordingServer::closing_after(5),
        RecordingServer::dropping_after(5),
    ];
    let models: [&[&str]; 2] = [
        &["--model", "concurrency", "--steps", "2"],
        &["--model", "requests", "--steps", "200"],
    ];
    for (server, model) in servers.iter().flat_map(|s| models.map(|m| (s, m))) {
        let url = format!("http://{}/", server.addr);
        let seen_before = server.seen().len() as u64;
        let mut args = vec![url.as_str(), "--step-duration", "1s", "--threads", "1"];
        args.extend_from_slice(model);
        let ran = run_ok(&args);
        let step = ran.step(0);
        assert_eq!(step["errors_pct"].as_f64().unwrap(), 0.0, "{step}");
        assert_eq!(step["replies"], step["requests"], "{step}");
        assert_eq!(
            step["requests"].as_u64().unwrap(),
            server.seen().len() as u64 - seen_before,
            "only requests the server took are counted: {step}"
        );
        assert_eq!(step["unsent"], 0, "{step}");
        assert!(step["connections"].as_u64().unwrap() * 5 >= step["requests"].as_u64().unwrap());
    }
}

#[test]
fn arrivals_waiting_at_the_step_end_are_dropped_not_sent_afterwards() {
    // Regression: queued arrivals were sent after the step ended, each doomed to time out.
    let target = ServeProcess::start(&["--delay", "500ms"]);
    let ran = run_ok(&[
        &target.url(),
        "--model",
        "requests",
        "--steps",
        "100",
        "--max-connections",
        "2",
        "--step-duration",
        "3s",
        "--timeout",
        "5s",
        "--threads",
        "1",
    ]);
    let step = ran.step(0);
    let requests = step["requests"].as_u64().unwrap();
    // Two connections, 500 ms per reply: about 12 requests fit in 3 s (plus those in flight at the end).
    assert!(requests <= 16, "{step}");
    assert_eq!(
        step["replies"].as_u64().unwrap(),
        requests,
        "no request was sent only to time out: {step}"
    );
    assert_eq!(
        target.requests(),
        requests,
        "nothing reached the target after the step"
    );
    assert!(step["unsent"].as_u64().unwrap() >= 280, "{step}");
    assert!(
        step["notes"]
            .to_string()
            .contains("were still waiting for a free connection"),
        "{step}"
    );
    assert_ne!(step["trust"], "invalid", "{step}");
}
