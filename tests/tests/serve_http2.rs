//! The reference target over HTTP/2, read by a client we did not write: nghttp2's h2load (Debian's
//! nghttp2-client). h2c with prior knowledge and h2 by ALPN over TLS on the same port as HTTP/1.1;
//! every stream is a request it counts; `--capacity` and `--delay` hold per stream as they do per
//! HTTP/1.1 request; `--max-streams` is the SETTINGS h2load sees.
use std::process::Command;
use std::time::Instant;

use tests::ServeProcess;

/// `h2load ARGS URL`: its stdout, or None (the test skips) without h2load, except under CI=true,
/// where .ci/run installs it.
fn h2load(test: &str, args: &[&str], url: &str) -> Option<String> {
    match Command::new("h2load").args(args).arg(url).output() {
        Ok(o) => {
            let out = String::from_utf8_lossy(&o.stdout).into_owned();
            assert!(
                o.status.success(),
                "h2load {args:?} {url}: {}{out}",
                String::from_utf8_lossy(&o.stderr)
            );
            Some(out)
        }
        Err(e) => {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "{test}: CI=true requires h2load (nghttp2-client): {e}"
            );
            eprintln!("SKIPPED {test}: no h2load on this machine ({e})");
            None
        }
    }
}

/// The numbers of h2load's line that starts with `what` ("requests:", "status codes:").
fn numbers(out: &str, what: &str) -> Vec<u64> {
    let line = out
        .lines()
        .find(|l| l.trim_start().starts_with(what))
        .unwrap_or_else(|| panic!("no {what} line in: {out}"));
    line.split(|c: char| !c.is_ascii_digit())
        .filter_map(|n| n.parse().ok())
        .collect()
}

/// h2load's "223.96ms", "1.2s", "27us", in ms.
fn ms(token: &str) -> f64 {
    let token = token.trim_end_matches(',');
    let (number, scale) = if let Some(n) = token.strip_suffix("us") {
        (n, 0.001)
    } else if let Some(n) = token.strip_suffix("ms") {
        (n, 1.0)
    } else {
        (token.strip_suffix('s').unwrap_or(token), 1000.0)
    };
    number
        .parse::<f64>()
        .unwrap_or_else(|e| panic!("{token}: {e}"))
        * scale
}

/// The first number of the line that starts with `what` ("time for request:", "finished in"), in ms.
fn first_ms(out: &str, what: &str) -> f64 {
    let line = out
        .lines()
        .find_map(|l| l.strip_prefix(what))
        .unwrap_or_else(|| panic!("no {what} line in: {out}"));
    ms(line.split_whitespace().next().unwrap())
}

/// "Application protocol: h2c".
fn protocol(out: &str) -> &str {
    out.lines()
        .find_map(|l| l.strip_prefix("Application protocol: "))
        .unwrap_or_else(|| panic!("no protocol line in: {out}"))
        .trim()
}

/// Requests total, started, done, succeeded, failed, errored, timeout; then 2xx..5xx.
fn assert_all_served(out: &str, n: u64) {
    let requests = numbers(out, "requests:");
    assert_eq!(&requests[..4], &[n, n, n, n], "{out}");
    assert_eq!(numbers(out, "status codes:")[0], n, "all 2xx: {out}");
}

#[test]
fn h2c_and_h2_by_alpn_are_served_beside_http1_and_every_stream_is_counted() {
    let test = "h2c_and_h2_by_alpn_are_served_beside_http1_and_every_stream_is_counted";
    let plain = ServeProcess::start(&[]);
    let Some(out) = h2load(test, &["-n", "2000", "-c", "4", "-m", "10"], &plain.url()) else {
        return;
    };
    assert_eq!(protocol(&out), "h2c", "{out}");
    assert_all_served(&out, 2000);
    // Counted by the target itself (and read over HTTP/1.1, on the same port).
    assert_eq!(plain.requests(), 2000);

    let tls = ServeProcess::start(&["--tls"]);
    let out = h2load(test, &["-n", "600", "-c", "2", "-m", "10"], &tls.url()).unwrap();
    assert_eq!(protocol(&out), "h2", "ALPN chose h2: {out}");
    assert_all_served(&out, 600);
    // HTTP/1.1 over TLS still answers, by ALPN too.
    let out = h2load(test, &["-n", "100", "-c", "1", "--h1"], &tls.url()).unwrap();
    assert_eq!(protocol(&out), "http/1.1", "{out}");
    assert_all_served(&out, 100);
}

#[test]
fn capacity_and_delay_hold_per_stream_as_per_request() {
    let test = "capacity_and_delay_hold_per_stream_as_per_request";
    // 1,000 streams, 40 at once, at 500/s: about 2 s however many are multiplexed.
    let capped = ServeProcess::start(&["--capacity", "500"]);
    let began = Instant::now();
    let Some(out) = h2load(test, &["-n", "1000", "-c", "2", "-m", "20"], &capped.url()) else {
        return;
    };
    let took = began.elapsed().as_secs_f64();
    assert_all_served(&out, 1000);
    assert!(
        (1.8..6.0).contains(&took),
        "1,000 streams at --capacity 500 took {took:.2} s: {out}"
    );
    // Every stream waits its 50 ms, in parallel on one connection: h2load's fastest is no faster.
    let slow = ServeProcess::start(&["--delay", "50ms"]);
    let out = h2load(test, &["-n", "200", "-c", "1", "-m", "50"], &slow.url()).unwrap();
    assert_all_served(&out, 200);
    let fastest = first_ms(&out, "time for request:");
    assert!(
        fastest >= 49.0,
        "a stream answered in {fastest} ms under --delay 50ms: {out}"
    );
    // 200 streams of 50 ms each, 50 at a time on one connection: about 0.2 s, not 10 s.
    let took = first_ms(&out, "finished in");
    assert!(took < 3000.0, "{out}");
}

#[test]
fn max_streams_is_the_settings_a_client_sees_and_is_enforced() {
    let test = "max_streams_is_the_settings_a_client_sees_and_is_enforced";
    let capped = ServeProcess::start(&["--max-streams", "8", "--delay", "100ms"]);
    // Kept to: 8 at a time, each 100 ms, so 80 requests take at least 10 rounds.
    let Some(out) = h2load(test, &["-n", "80", "-c", "1", "-m", "8"], &capped.url()) else {
        return;
    };
    assert_all_served(&out, 80);
    let took = first_ms(&out, "finished in");
    assert!(
        took >= 950.0,
        "80 streams of 100 ms, 8 at a time, took {took} ms: {out}"
    );
    // Overrun: h2load opens its 80 before the SETTINGS arrive; all but 8 are refused
    // (REFUSED_STREAM), none served past the limit.
    let out = h2load(test, &["-n", "80", "-c", "1", "-m", "80"], &capped.url()).unwrap();
    let requests = numbers(&out, "requests:");
    assert_eq!(&requests[..4], &[80, 80, 80, 8], "{out}");
    assert_eq!(
        capped.requests(),
        80 + 8,
        "served: the first run's and the 8 allowed"
    );
}
