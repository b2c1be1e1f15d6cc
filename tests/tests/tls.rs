//! HTTPS targets: rustls on the client, the reference target's self-signed certificate on the server.
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
