//! The plan file's feeders and setup, checked before any load.
use super::*;
use shared::plan::FeederMode;

fn arg(dir: &Path, text: &str) -> FeederArg {
    let file = dir.join("f.csv");
    std::fs::write(&file, text).unwrap();
    FeederArg {
        name: "users".into(),
        file,
        mode: FeederMode::Shard,
    }
}

fn request(url: &str, headers: &[&str], body: &str) -> RequestSpec {
    let headers = headers.iter().map(|h| parse_header(h).unwrap()).collect();
    RequestSpec::try_new("POST", url, headers, body.as_bytes().to_vec()).unwrap()
}

#[test]
fn a_feeder_file_is_read_through_and_refused_by_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let err = |text: &str| feeder(&arg(dir.path(), text)).unwrap_err().to_string();
    assert!(err("").contains("f.csv:1: it is empty"), "{}", err(""));
    assert!(err("user,pw\n").contains("f.csv:1: it has a header and no rows"));
    assert!(err("user,pw\na,b\nc\n").contains("f.csv:3: line 3 has 1 fields where line 1 names 2"));
    assert!(err("user,user\na,b\n").contains("names 'user' twice"));
    assert!(err("user,\"pw\na,b\n").contains("never closed"));
    let huge = format!("user\nok\n{}\n", "x".repeat(shared::plan::MAX_ROW));
    assert!(
        err(&huge).contains("f.csv:3: a row of more than 1 MiB"),
        "{}",
        err(&huge)
    );
    let f = feeder(&arg(dir.path(), "user,pw\na,b\n\"c,d\",e\n")).unwrap();
    assert_eq!(f.columns(), ["user", "pw"]);
    let (_, rows) = scan(&dir.path().join("f.csv")).unwrap();
    assert_eq!(rows, 2);
    let missing = FeederArg {
        file: dir.path().join("nope.csv"),
        ..arg(dir.path(), "x\n1\n")
    };
    assert!(
        feeder(&missing)
            .unwrap_err()
            .to_string()
            .contains("nope.csv")
    );
}

#[test]
fn every_variable_a_request_names_is_defined() {
    let dir = tempfile::tempdir().unwrap();
    let mut args = RunArgs {
        feeder: vec![arg(dir.path(), "user,pw\na,b\n")],
        ..Default::default()
    };
    let ok = request(
        "http://h/u/${user}",
        &["X-Pw: ${pw}"],
        "{\"n\":${counter()}}",
    );
    let (data, files) = super::data(&args, std::slice::from_ref(&ok), &[]).unwrap();
    assert_eq!(data.variables(), ["user", "pw"]);
    assert_eq!(files, [dir.path().join("f.csv")]);
    let bad = request("http://h/u/x", &["X-T: ${token}"], "");
    let e = super::data(&args, &[ok.clone(), bad], &[])
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "request 2, its header X-T: '${token}' in '${token}' names no variable; the variables are: user, pw"
    );
    // A setup's extraction defines it; its URL is joined to the target's origin.
    args.setup = Some(SetupArg {
        method: Some("POST".into()),
        url: "/login".into(),
        headers: vec![],
        body: Some("user=${user}&password=${pw}".into()),
        extract: [("token".to_string(), "json:/token".to_string())].into(),
    });
    let bad = request("http://h/u/x", &["Authorization: Bearer ${token}"], "");
    let (data, _) = super::data(&args, &[bad], &[]).unwrap();
    assert_eq!(data.variables(), ["user", "pw", "token"]);
    let url = data.setup().unwrap().request().url();
    assert_eq!(
        (url.origin().as_str(), url.path()),
        ("http://h:80", "/login")
    );
    // Another origin than the target's is refused.
    args.setup.as_mut().unwrap().url = "http://elsewhere/login".into();
    let e = super::data(&args, &[ok], &[]).unwrap_err().to_string();
    assert!(
        e.contains("is not on the target's origin http://h:80"),
        "{e}"
    );
}

#[test]
fn a_setup_over_http2_is_refused_before_any_agent_is_asked() {
    let req = RequestSpec::try_new("POST", "http://h/login", vec![], vec![]).unwrap();
    let setup = Setup::new(
        req.clone(),
        vec![Extraction::parse("token", "header:x-token").unwrap()],
    );
    let w = Workload::try_new(
        vec![req],
        shared::plan::UrlOrder::RoundRobin,
        std::time::Duration::from_secs(1),
        std::time::Duration::from_secs(1),
        false,
    )
    .unwrap()
    .with_data(Data::try_new(vec![], Some(setup)).unwrap());
    assert!(check_http(&w).is_ok());
    let h2 = w.with_http(HttpVersion::Http2, 1).unwrap();
    let e = check_http(&h2).unwrap_err().to_string();
    assert!(e.contains("[setup] runs over HTTP/1.1 only"), "{e}");
}
