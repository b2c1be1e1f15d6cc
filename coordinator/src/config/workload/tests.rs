//! The workload's tests: requests, statuses, source addresses, and each target's HTTP version and
//! streams from flags, schemes and plan files.
use super::*;
use crate::cli::{Steps, StringOrList};
use crate::config::tests::{args, command_line, runs_of, with_plan};
use crate::config::{RunConfig, Runs, resolve};

#[test]
fn ok_status_from_the_flag_or_the_plan_file() {
    let c = command_line("run http://127.0.0.1:9/ --steps 1 --ok-status 200,404").unwrap();
    assert!(c.plan.workload().ok_status().contains(404));
    assert!(!c.plan.workload().ok_status().contains(201));
    assert_eq!(c.echo.ok_status, "200,404");
    let c = command_line("run http://127.0.0.1:9/ --steps 1").unwrap();
    assert_eq!(c.echo.ok_status, "200-399");
    let e = command_line("run http://127.0.0.1:9/ --steps 1 --ok-status 200-2xx").unwrap_err();
    assert!(e.starts_with("bad --ok-status '200-2xx'"), "{e}");
}

#[test]
fn source_addrs_from_flag_or_plan_file() {
    let mut a = args("http://127.0.0.1:9/");
    a.steps = Some(Steps(vec![1.0]));
    a.source_addrs = Some(StringOrList::One("127.0.0.1-127.0.0.3".into()));
    let c = resolve(a).unwrap();
    assert_eq!(c.plan.workload().source_addrs().len(), 3);
    assert_eq!(c.echo.source_addrs[2], "127.0.0.3");

    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("plan.toml");
    for (value, expected) in [
        ("\"127.0.0.2,127.0.0.3\"", vec!["127.0.0.2", "127.0.0.3"]),
        (
            "[\"127.0.0.2\", \"127.0.0.4-127.0.0.5\"]",
            vec!["127.0.0.2", "127.0.0.4", "127.0.0.5"],
        ),
    ] {
        std::fs::write(
            &p,
            format!("url = \"http://127.0.0.1:9/\"\nsteps = [1]\nsource_addrs = {value}\n"),
        )
        .unwrap();
        let c = resolve(args(p.to_str().unwrap())).unwrap();
        let got: Vec<String> = c
            .plan
            .workload()
            .source_addrs()
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(got, expected);
    }
    // The flag overrides the file.
    let mut a = args(p.to_str().unwrap());
    a.source_addrs = Some(StringOrList::One("127.0.0.9".into()));
    assert_eq!(resolve(a).unwrap().plan.workload().source_addrs().len(), 1);

    let mut a = args("http://[::1]:9/");
    a.steps = Some(Steps(vec![1.0]));
    a.source_addrs = Some(StringOrList::One("127.0.0.2".into()));
    let e = resolve(a).unwrap_err().to_string();
    assert!(
        e.contains("--source-addrs are IPv4 but the target [::1]:9 is IPv6"),
        "{e}"
    );
}

/// Each target's label, protocol and streams, as `stampede run LINE` resolves them.
fn protocols_of(line: &str) -> Result<Vec<(Option<String>, HttpVersion, u32)>, String> {
    let each = |c: &RunConfig| {
        let w = c.plan.workload();
        (c.label.clone(), w.http(), w.streams().get())
    };
    Ok(match runs_of(line)? {
        Runs::One(c) => vec![each(&c)],
        Runs::Side(side) => side.runs.iter().map(each).collect(),
    })
}

#[test]
fn the_http_flags_and_the_h2_schemes_choose_each_targets_protocol() {
    use HttpVersion::{Auto, Http1, Http2};
    let one = |line: &str| {
        let got = protocols_of(line).unwrap();
        assert_eq!(got.len(), 1, "{line}");
        (got[0].1, got[0].2)
    };
    assert_eq!(one("run http://h:1/ --steps 1"), (Http1, 1));
    assert_eq!(one("run http://h:1/ --steps 1 --http 2"), (Http2, 1));
    assert_eq!(
        one("run http://h:1/ --steps 1 --http2 --streams 10"),
        (Http2, 10)
    );
    assert_eq!(
        one("run https://h/ --steps 1 --http auto --streams 3"),
        (Auto, 3)
    );
    assert_eq!(one("run http://h:1/ --steps 1 --http auto"), (Auto, 1));
    // h2c:// is HTTP/2 over TCP, h2:// over TLS: what the agent is sent is http(s).
    for (url, sent) in [
        ("h2c://127.0.0.1:8080/x", "http://127.0.0.1:8080/x"),
        ("h2://example.test/y", "https://example.test:443/y"),
    ] {
        for flags in ["", "--http 2", "--http auto", "--streams 100"] {
            let c = command_line(&format!("run {url} --steps 1 {flags}")).unwrap();
            let w = c.plan.workload();
            assert_eq!(w.http(), Http2, "{url} {flags}");
            assert_eq!(c.echo.requests[0].url, sent);
            assert_eq!(c.echo.http.as_deref(), Some("2"));
        }
    }
    let c = command_line("run --url h2c://h:1/ --steps 1").unwrap();
    assert_eq!(
        c.plan.workload().http(),
        Http2,
        "--url takes the schemes too"
    );
    // Side by side, each target keeps its own.
    assert_eq!(
        protocols_of("run h1=http://127.0.0.1:8080/ h2=h2c://127.0.0.1:8080/ t=h2://h/ --steps 1")
            .unwrap(),
        vec![
            (Some("h1".into()), Http1, 1),
            (Some("h2".into()), Http2, 1),
            (Some("t".into()), Http2, 1)
        ]
    );
    assert_eq!(
        protocols_of("run a=http://h:1/ b=h2c://h:1/ --steps 1 --http auto").unwrap()[0].1,
        Auto
    );
    // HTTP/1.1 beside HTTP/2 with --streams: each its own, the HTTP/1.1 one a request at a time.
    assert_eq!(
        protocols_of("run h1=http://h:1/ h2=h2c://h:1/ --steps 1 --streams 8").unwrap(),
        vec![(Some("h1".into()), Http1, 1), (Some("h2".into()), Http2, 8)]
    );
}

#[test]
fn streams_and_protocols_that_cannot_hold_are_refused_naming_the_target() {
    for (line, says) in [
        (
            "run http://h:1/ --steps 1 --streams 0",
            "--streams (streams per connection, at most 1000) must be a positive number, got 0",
        ),
        (
            "run h2c://h:1/ --steps 1 --streams 1001",
            "at most 1000) must be a positive number, got 1001",
        ),
        (
            "run http://127.0.0.1:8080/ --steps 1 --streams 4",
            "--streams 4 needs HTTP/2, but the target http://127.0.0.1:8080/ is HTTP/1.1, one request at a time per connection: write it h2c://127.0.0.1:8080/, or add --http 2",
        ),
        (
            "run h1=http://127.0.0.1:8080/ b=http://127.0.0.1:8081/ --steps 1 --streams 10",
            "--streams 10 needs HTTP/2, but target h1 (http://127.0.0.1:8080/) is HTTP/1.1",
        ),
        (
            "run http://h:1/ --steps 1 --http auto --streams 2",
            "(--http auto negotiates over TLS only)",
        ),
        (
            "run h2=h2c://127.0.0.1:8080/ --steps 1 --http 1.1",
            "target h2 (h2c://127.0.0.1:8080/) is HTTP/2 by its scheme, but --http 1.1",
        ),
        ("run http://h:1/ --steps 1 --http 3", "'3'"),
        ("run http://h:1/ --steps 1 --http 2 --http2", "--http2"),
    ] {
        let e = runs_of(line)
            .err()
            .unwrap_or_else(|| panic!("{line} resolved"));
        assert!(e.contains(says), "{line}: {e}");
    }
}

#[test]
fn a_url_list_names_http2_by_every_scheme_or_none() {
    let dir = tempfile::tempdir().unwrap();
    let list = |name: &str, text: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        runs_of(&format!("run --urls {} --steps 1", p.display()))
    };
    let Runs::One(c) = list("h2.txt", "h2c://h:1/a\nPOST h2c://h:1/b\n").unwrap() else {
        panic!("one target")
    };
    assert_eq!(c.plan.workload().http(), HttpVersion::Http2);
    assert_eq!(c.echo.requests[1].url, "http://h:1/b");
    let e = list("mixed.txt", "h2c://h:1/a\nhttp://h:1/b\n")
        .err()
        .unwrap();
    assert!(e.contains("mix h2c:// or h2:// with http://"), "{e}");
}

#[test]
fn http_and_streams_from_a_plan_file_under_the_flags_and_into_run_json() {
    use HttpVersion::{Auto, Http1, Http2};
    // The protocol and streams of a plan file (whose `url` and `steps` are given) under `flags`.
    let chosen = |keys: &str, flags: &str| {
        let (_d, c) = with_plan(&format!("steps = [1]\n{keys}\n"), flags);
        c.map(|c| (c.plan.workload().http(), c.plan.workload().streams().get()))
    };
    let (_d, c) = with_plan(
        "url = \"http://h:1/\"\nsteps = [1]\nhttp = \"2\"\nstreams = 50\n",
        "",
    );
    let echo = c.unwrap().echo;
    // run.json's plan records them, and reads them back as written.
    assert_eq!((echo.http.as_deref(), echo.streams), (Some("2"), Some(50)));
    let json = serde_json::to_value(&echo).unwrap();
    assert_eq!((&json["http"], &json["streams"]), (&"2".into(), &50.into()));
    let back: results::run_file::PlanEcho = serde_json::from_value(json).unwrap();
    assert_eq!(back, echo);
    for (keys, flags, want) in [
        (
            "url = \"http://h:1/\"\nhttp = \"2\"\nstreams = 50",
            "",
            (Http2, 50),
        ),
        // The flags over the file: --http over its http, and over its http2 (one setting).
        (
            "url = \"https://h/\"\nhttp = \"2\"",
            "--http auto",
            (Auto, 1),
        ),
        (
            "url = \"https://h/\"\nhttp2 = true",
            "--http 1.1",
            (Http1, 1),
        ),
        (
            "url = \"h2c://h:1/\"\nstreams = 4",
            "--streams 8",
            (Http2, 8),
        ),
        // As TOML lets a person write it, a bare number is the version it reads as.
        ("url = \"h2c://h:1/\"\nhttp = 2", "", (Http2, 1)),
        ("url = \"http://h:1/\"\nhttp = 1.1", "", (Http1, 1)),
    ] {
        let got = chosen(keys, flags).map_err(|e| e.to_string());
        assert_eq!(got, Ok(want), "{keys} {flags}");
    }
    // Refused in the file as on the command line.
    let e = chosen("url = \"http://h:1/\"\nhttp = \"2\"\nhttp2 = true", "").unwrap_err();
    assert!(
        e.to_string().contains("give http or http2, not both"),
        "{e}"
    );
    let e = chosen("url = \"http://h:1/\"\nstreams = 4", "").unwrap_err();
    assert!(matches!(e, ConfigError::HttpVersion(_)), "{e:?}");
    for bad in ["3", "\"h3\"", "true"] {
        let e = chosen(&format!("url = \"http://h:1/\"\nhttp = {bad}"), "")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("line 3, column 8") && e.contains("use \"1.1\", \"2\" or \"auto\""),
            "{bad}: {e}"
        );
    }
}

#[test]
fn tls_sessions_from_a_plan_file_under_the_flag_and_into_run_json_over_tls_only() {
    use shared::plan::TlsSessions::{Fresh, Resume};
    let chosen = |keys: &str, flags: &str| {
        let (_d, c) = with_plan(&format!("steps = [1]\n{keys}\n"), flags);
        let c = c.unwrap();
        (c.plan.workload().tls_sessions(), c.echo.tls_sessions)
    };
    let said = |s: &str| Some(s.to_string());
    assert_eq!(chosen("url = \"https://h/\"", ""), (Fresh, said("fresh")));
    assert_eq!(
        chosen("url = \"h2://h/\"\ntls_sessions = \"resume\"", ""),
        (Resume, said("resume"))
    );
    assert_eq!(
        chosen(
            "url = \"https://h/\"\ntls_sessions = \"resume\"",
            "--tls-sessions fresh"
        ),
        (Fresh, said("fresh"))
    );
    // Plain TCP has no handshake to say anything of.
    assert_eq!(
        chosen("url = \"http://h:1/\"", "--tls-sessions resume").1,
        None
    );
    let (_d, c) = with_plan(
        "url = \"https://h/\"\nsteps = [1]\ntls_sessions = \"reuse\"\n",
        "",
    );
    let e = c.unwrap_err().to_string();
    assert!(e.contains("fresh") && e.contains("resume"), "{e}");
}

#[test]
fn basic_auth_is_the_authorization_header_of_every_request() {
    // RFC 7617's example, and the padding of each length.
    assert_eq!(
        base64(b"Aladdin:open sesame"),
        "QWxhZGRpbjpvcGVuIHNlc2FtZQ=="
    );
    for (plain, encoded) in [("", ""), ("f", "Zg=="), ("fo", "Zm8="), ("foo", "Zm9v")] {
        assert_eq!(base64(plain.as_bytes()), encoded);
    }
    let c = command_line("run http://h:1/ --steps 1 --basic-auth Aladdin:open:sesame").unwrap();
    assert_eq!(
        c.plan.workload().requests()[0].headers(),
        [(
            "Authorization".into(),
            "Basic QWxhZGRpbjpvcGVuOnNlc2FtZQ==".into()
        )]
    );
    // run.json names the header, never the credentials.
    assert_eq!(
        c.echo.requests[0].headers,
        ["Authorization: Basic (redacted)"]
    );
    // A plan file's key, for every request of a URL list too.
    let dir = tempfile::tempdir().unwrap();
    let urls = dir.path().join("urls.txt");
    std::fs::write(&urls, "http://h:1/a\nPOST http://h:1/b\n").unwrap();
    let plan = format!(
        "urls = \"{}\"\nsteps = [1]\nbasic_auth = \"u:\"\n",
        urls.display()
    );
    let (_d, c) = with_plan(&plan, "");
    for r in c.unwrap().plan.workload().requests() {
        assert_eq!(r.headers(), [("Authorization".into(), "Basic dTo=".into())]);
    }
    // Refused without its colon (the value unsaid), and beside an Authorization header.
    let e = command_line("run http://h:1/ --steps 1 --basic-auth secret").unwrap_err();
    assert!(
        e.starts_with("--basic-auth takes USER:PASSWORD") && !e.contains("secret"),
        "{e}"
    );
    let e =
        command_line("run http://h:1/ --steps 1 --basic-auth u:p -H Authorization:x").unwrap_err();
    assert!(e.contains("--basic-auth or an Authorization header"), "{e}");
    let (_d, c) = with_plan(
        "url = \"http://h:1/\"\nsteps = [1]\nheaders = [\"authorization: Bearer t\"]\n",
        "--basic-auth u:p",
    );
    assert!(matches!(c.unwrap_err(), ConfigError::Conflict(_)));
}
