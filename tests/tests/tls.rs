//! HTTPS targets: rustls on the client, the reference target's self-signed certificate on the server.
use tests::nginx::{Http2, Nginx};
use tests::{ServeProcess, run_ok};

fn step(target: &ServeProcess, extra: &[&str]) -> serde_json::Value {
    let url = target.url();
    let mut args = vec![
        url.as_str(),
        "--model",
        "requests",
        "--steps",
        "50",
        "--step-duration",
        "1s",
    ];
    args.extend_from_slice(extra);
    run_ok(&args).step(0).clone()
}

#[test]
fn https_target_with_insecure_gets_replies() {
    let target = ServeProcess::start(&["--tls"]);
    assert!(target.url().starts_with("https://"));
    let step = step(&target, &["--insecure"]);
    assert_eq!(step["requests"].as_u64().unwrap(), 50, "{step}");
    assert_eq!(step["replies"], step["requests"]);
    assert_eq!(step["status"]["2xx"], step["requests"]);
    assert_eq!(step["errors_pct"].as_f64().unwrap(), 0.0);
    assert!(step["connect_ms"]["p50"].as_f64().unwrap() > 0.0);
}

#[test]
fn https_target_with_an_untrusted_certificate_fails_as_errors() {
    let target = ServeProcess::start(&["--tls"]);
    let step = step(&target, &[]);
    assert_eq!(step["replies"], 0, "{step}");
    assert!(step["errors"]["other"].as_u64().unwrap() >= 50, "{step}");
    assert_eq!(step["unsent"], step["errors"]["other"]);
    assert_eq!(step["trust"], "invalid");
}

/// nginx's word on each connection of a run: (not reused, reused) TLS sessions, from the access
/// log's `$connection $ssl_session_reused` lines, one count per connection however many requests
/// it carried.
fn nginx_sessions(nginx: &Nginx) -> (u64, u64) {
    let log = std::fs::read_to_string(nginx.dir().join("logs/tls.log")).unwrap_or_default();
    let mut seen = std::collections::BTreeMap::new();
    for line in log.lines() {
        let (conn, reused) = line.split_once(' ').expect("connection and reused");
        seen.insert(conn.to_string(), reused == "r");
    }
    let reused = seen.values().filter(|&&r| r).count() as u64;
    (seen.len() as u64 - reused, reused)
}

/// A connections-model run of 200 connections on 2 agent threads against a fresh nginx that caches
/// sessions and gives tickets: (stampede's step, nginx's (full, reused)).
fn sessions_run(test: &str, http: &str, sessions: &str) -> Option<(serde_json::Value, (u64, u64))> {
    let nginx = Nginx::start_http2(
        test,
        Http2::Tls,
        "ssl_session_cache shared:SSL:1m; access_log $DIR/logs/tls.log tls;",
    )?;
    let url = nginx.url();
    let ran = run_ok(&[
        url.as_str(),
        "--insecure",
        "--http",
        http,
        "--tls-sessions",
        sessions,
        "--model",
        "connections",
        "--steps",
        "200",
        "--num-conn",
        "200",
        "--threads",
        "2",
    ]);
    let tsv = std::fs::read_to_string(ran.dir.path().join("steps.tsv")).unwrap();
    let header: Vec<&str> = tsv.lines().next().unwrap().split('\t').collect();
    let row: Vec<&str> = tsv.lines().nth(1).unwrap().split('\t').collect();
    let cell = |name: &str| row[header.iter().position(|h| *h == name).unwrap()].to_string();
    let step = ran.step(0).clone();
    assert_eq!(cell("tls_full"), step["tls"]["full"].to_string(), "{tsv}");
    assert_eq!(
        cell("tls_resumed"),
        step["tls"]["resumed"].to_string(),
        "{tsv}"
    );
    assert_eq!(
        ran.run["plan"]["tls_sessions"], sessions,
        "{}",
        ran.run["plan"]
    );
    Some((step, nginx_sessions(&nginx)))
}

/// Both ways, each checked against nginx's `$ssl_session_reused`: fresh makes every connection a
/// full handshake (before, nginx saw 198 of 200 resumed over HTTP/1.1 and all 200 over HTTP/2, the
/// HTTP/2 probe's session shared with them, and nothing said so), resume resumes all but about a
/// worker thread's first, and stampede's counts are nginx's.
fn sessions_are_what_nginx_saw(test: &str, http: &str) {
    let Some((fresh, (nginx_full, nginx_reused))) = sessions_run(test, http, "fresh") else {
        return;
    };
    let n = fresh["connections"].as_u64().unwrap();
    eprintln!(
        "{test} fresh: {n} connections; nginx {nginx_full} '.', {nginx_reused} 'r'; stampede {}",
        fresh["tls"]
    );
    assert_eq!(n, 200, "{fresh}");
    assert_eq!((nginx_full, nginx_reused), (n, 0), "{fresh}");
    assert_eq!(fresh["tls"]["full"], n, "{fresh}");
    assert_eq!(fresh["tls"]["resumed"], 0, "{fresh}");
    let notes = fresh["notes"].to_string();
    assert!(
        notes.contains("TLS: all 200 handshakes in full (--tls-sessions fresh)"),
        "{notes}"
    );

    let (resume, (nginx_full, nginx_reused)) = sessions_run(test, http, "resume").unwrap();
    let n = resume["connections"].as_u64().unwrap();
    eprintln!(
        "{test} resume: {n} connections; nginx {nginx_full} '.', {nginx_reused} 'r'; stampede {}",
        resume["tls"]
    );
    assert_eq!(nginx_full + nginx_reused, n, "{resume}");
    assert_eq!(resume["tls"]["full"], nginx_full, "{resume}");
    assert_eq!(resume["tls"]["resumed"], nginx_reused, "{resume}");
    // Each of the 2 threads' first connection is full; a few more may start before a ticket came.
    assert!(nginx_reused >= n - 10, "{resume}");
    let notes = resume["notes"].to_string();
    assert!(
        notes.contains(&format!("TLS: {nginx_reused} of {n} handshakes resumed")),
        "{notes}"
    );
}

#[test]
fn https_connections_resume_tls_sessions_only_when_asked() {
    sessions_are_what_nginx_saw(
        "https_connections_resume_tls_sessions_only_when_asked",
        "1.1",
    );
}

#[test]
fn h2_connections_resume_tls_sessions_only_when_asked() {
    sessions_are_what_nginx_saw("h2_connections_resume_tls_sessions_only_when_asked", "2");
}
