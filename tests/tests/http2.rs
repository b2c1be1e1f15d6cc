//! HTTP/2 load checked against servers we did not write: a real nginx (Debian's nginx-light, 1.22,
//! `listen ... http2`) over h2c and over TLS with ALPN, whose stub_status counts the requests it
//! handled, and nghttp2's h2load at the same load for the throughput.
use std::process::Command;

use tests::nginx::{Http2, Nginx};
use tests::node::NodeScript;
use tests::{run_ok, run_quiet, text};

/// Every step's requests, and that none failed.
fn sent_and_failed(ran: &tests::Ran) -> (u64, u64) {
    ran.steps().iter().fold((0, 0), |(r, f), s| {
        (
            r + s["requests"].as_u64().unwrap(),
            f + s["failed"].as_u64().unwrap(),
        )
    })
}

#[test]
fn over_h2c_nginx_counts_every_request_and_its_stream_limit_is_never_exceeded() {
    // nginx allows 8 streams per connection; 16 are asked: 8 wait each time, none is refused.
    let Some(nginx) = Nginx::start_http2(
        "http2_h2c",
        Http2::Cleartext,
        "http2_max_concurrent_streams 8;",
    ) else {
        return;
    };
    let before = nginx.requests();
    let url = nginx.url();
    let ran = run_ok(&[
        &url,
        "--http",
        "2",
        "--model",
        "concurrency",
        "--steps",
        "2,4",
        "--streams",
        "16",
        "--step-duration",
        "1s",
        "--threads",
        "1",
    ]);
    // stub_status counts its own read too.
    let handled = nginx.requests() - before - 1;
    let (sent, failed) = sent_and_failed(&ran);
    assert!(sent > 500, "{}", ran.run);
    assert_eq!(sent, handled, "nginx handled what stampede sent");
    assert_eq!(failed, 0, "no stream refused: {}", ran.run);
    for step in ran.steps() {
        let h2 = &step["http2"];
        assert_eq!(h2["server_max_streams"], 8, "{step}");
        assert_eq!(h2["refused_streams"], 0, "{step}");
        // nginx's reply is "hello\n": six bytes of DATA each, and a header block of its own.
        let replies = step["replies"].as_u64().unwrap();
        assert_eq!(h2["body_bytes"], 6 * replies, "{step}");
        let headers = h2["header_bytes"].as_u64().unwrap();
        assert!(headers > replies && headers < 100 * replies, "{step}");
        assert!(step["generator"]["waited"].as_u64().unwrap() > 0, "{step}");
        assert!(
            step["notes"].as_array().unwrap().iter().any(|n| n
                .as_str()
                .unwrap()
                .contains("waited for a free HTTP/2 stream")),
            "{step}"
        );
    }
    assert_eq!(ran.run["plan"]["http"], "2", "{}", ran.run["plan"]);
    assert_eq!(ran.run["plan"]["streams"], 16, "{}", ran.run["plan"]);
}

#[test]
fn request_bodies_past_nginx_s_window_wait_for_it_and_every_one_arrives() {
    // nginx's stream window for a request body is http2_body_preread_size: 16 KiB here, so a 200 KB
    // upload waits for nginx's WINDOW_UPDATEs as it reads. nginx reads the whole body only when it
    // has somewhere to send it: /upload passes it on (as a GET) to its own status server, which
    // stub_status counts as a second request.
    let Some(nginx) = Nginx::start_http2(
        "http2_window",
        Http2::Cleartext,
        "http2_body_preread_size 16k; client_max_body_size 1m; \
         location = /upload { proxy_method GET; proxy_pass http://$STATUS_ADDR/nginx_status; }",
    ) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let body = dir.path().join("body");
    std::fs::write(&body, "b".repeat(200_000)).unwrap();
    let body = body.to_str().unwrap();
    let before = nginx.requests();
    let url = format!("{}upload", nginx.url());
    let ran = run_ok(&[
        &url,
        "--http",
        "2",
        "-m",
        "POST",
        "--body-file",
        body,
        "--model",
        "concurrency",
        "--steps",
        "2",
        "--streams",
        "4",
        "--step-duration",
        "1s",
        "--threads",
        "1",
    ]);
    let handled = nginx.requests() - before - 1;
    let (sent, failed) = sent_and_failed(&ran);
    assert!(sent > 20, "{}", ran.run);
    assert_eq!(
        2 * sent,
        handled,
        "nginx handled and passed on what stampede sent"
    );
    assert_eq!(failed, 0, "{}", ran.run);
    let step = &ran.steps()[0];
    let h2 = &step["http2"];
    assert!(h2["window_stalls"].as_u64().unwrap() > 0, "{step}");
    assert!(h2["window_stall_ms"].as_f64().unwrap() > 0.0, "{step}");
    // Every body was sent whole, not cut off by an early reply.
    assert!(
        step["bytes_out"].as_u64().unwrap() >= 200_000 * sent,
        "{step}"
    );
}

#[test]
fn large_replies_arrive_whole_past_the_connection_s_receive_window() {
    // 300 replies of 4 MiB on one connection: 1.2 GiB, past the 1 GiB window stampede gives a
    // connection, so the run finishes only if it refills that window as it reads.
    let dir = tempfile::tempdir().unwrap();
    let big = dir.path().join("big.bin");
    std::fs::write(&big, vec![b'x'; 4 << 20]).unwrap();
    let extra = format!("location = /big {{ alias {}; }}", big.display());
    let Some(nginx) = Nginx::start_http2("http2_big", Http2::Cleartext, &extra) else {
        return;
    };
    let before = nginx.requests();
    let url = format!("{}big", nginx.url());
    let ran = run_ok(&[
        &url,
        "--http",
        "2",
        "--model",
        "concurrency",
        "--steps",
        "1",
        "--streams",
        "2",
        "-n",
        "300",
        "--step-duration",
        "60s",
        "--timeout",
        "20s",
        "--threads",
        "1",
    ]);
    let handled = nginx.requests() - before - 1;
    let (sent, failed) = sent_and_failed(&ran);
    assert_eq!((sent, failed), (300, 0), "{}", ran.run);
    assert_eq!(handled, 300, "nginx handled what stampede sent");
    let step = &ran.steps()[0];
    assert_eq!(step["http2"]["body_bytes"], 300u64 << 22, "{step}");
}

/// Node's http2 server (nghttp2 underneath, not nginx's HTTP/2 and not ours), answering each stream
/// with an informational 103 first, a 20 KB header (a header block over one frame: HEADERS and
/// CONTINUATION), a body and trailers; it counts the streams, told on a second, HTTP/1.1 port.
struct NodeH2 {
    _script: NodeScript,
    ports: (u16, u16),
}

impl NodeH2 {
    fn start(test: &str) -> Option<NodeH2> {
        let script = "const http2 = require('http2'); const http = require('http');\n\
            let n = 0;\n\
            const s = http2.createServer({ settings: { maxConcurrentStreams: 5 } });\n\
            s.on('stream', (st) => { n++;\n\
              st.additionalHeaders({ ':status': 103, link: '</a.css>; rel=preload' });\n\
              st.respond({ ':status': 200, 'x-big': 'v'.repeat(20000) }, { waitForTrailers: true });\n\
              st.on('wantTrailers', () => st.sendTrailers({ 'x-done': 'yes' }));\n\
              st.end('hi from node\\n'); });\n\
            const c = http.createServer((q, r) => r.end(String(n)));\n\
            s.listen(0, '127.0.0.1', () => c.listen(0, '127.0.0.1', () =>\n\
              console.log(s.address().port + ' ' + c.address().port)));\n\
            setTimeout(() => process.exit(0), 600000);\n";
        let script = NodeScript::start(test, script)?;
        let mut ports = script
            .said
            .split_whitespace()
            .map(|p| p.parse().expect("node prints its ports"));
        let ports = (ports.next().unwrap(), ports.next().unwrap());
        Some(NodeH2 {
            _script: script,
            ports,
        })
    }

    fn served(&self) -> u64 {
        let count = tests::http_get(([127, 0, 0, 1], self.ports.1).into(), "/");
        count.trim().parse().expect("node counts its streams")
    }
}

#[test]
fn node_s_http2_server_with_continuations_103s_and_trailers_counts_every_request() {
    let Some(node) = NodeH2::start("http2_node") else {
        return;
    };
    let url = format!("h2c://127.0.0.1:{}/", node.ports.0);
    let ran = run_ok(&[
        &url,
        "--model",
        "concurrency",
        "--steps",
        "2",
        "--streams",
        "8",
        "--step-duration",
        "1s",
        "--threads",
        "1",
    ]);
    let (sent, failed) = sent_and_failed(&ran);
    assert!(sent > 100, "{}", ran.run);
    assert_eq!((node.served(), failed), (sent, 0), "{}", ran.run);
    let step = &ran.steps()[0];
    let replies = step["replies"].as_u64().unwrap();
    assert_eq!(
        step["status_codes"]["200"], replies,
        "the 103s are not replies: {step}"
    );
    let h2 = &step["http2"];
    assert_eq!(h2["server_max_streams"], 5, "{step}");
    assert_eq!(h2["body_bytes"], 13 * replies, "{step}");
    // Each reply's header blocks hold the 20,000-byte header, Huffman-coded or not.
    assert!(
        h2["header_bytes"].as_u64().unwrap() > 12_000 * replies,
        "{step}"
    );
    assert!(step["generator"]["waited"].as_u64().unwrap() > 0, "{step}");
}

#[test]
fn over_tls_nginx_ending_sessions_with_goaway_loses_no_request_in_every_model() {
    // keepalive_requests 100: nginx ends each session with GOAWAY after 100 streams.
    let Some(nginx) = Nginx::start_http2("http2_tls_goaway", Http2::Tls, "keepalive_requests 100;")
    else {
        return;
    };
    let url = nginx.url();
    let models: [&[&str]; 3] = [
        &["--model", "concurrency", "--steps", "4", "--streams", "10"],
        &[
            "--model",
            "requests",
            "--steps",
            "1500",
            "--streams",
            "10",
            "--max-connections",
            "4",
        ],
        &[
            "--model",
            "connections",
            "--steps",
            "10",
            "--num-call",
            "150",
            "--streams",
            "10",
        ],
    ];
    for model in models {
        let before = nginx.requests();
        let mut args = vec![
            url.as_str(),
            "--http",
            "2",
            "--insecure",
            "--step-duration",
            "1s",
            "--threads",
            "1",
        ];
        args.extend_from_slice(model);
        let ran = run_ok(&args);
        let handled = nginx.requests() - before - 1;
        let (sent, failed) = sent_and_failed(&ran);
        assert_eq!(sent, handled, "{model:?}: {}", ran.run);
        assert_eq!(failed, 0, "{model:?}: {}", ran.run);
        let step = ran.step(0);
        assert!(sent > 1000, "{model:?}: {step}");
        assert!(
            step["http2"]["goaways"].as_u64().unwrap() > 0,
            "{model:?}: {step}"
        );
    }
}

#[test]
fn auto_negotiates_h2_over_tls_and_h2c_against_an_http1_port_stops_before_load() {
    let Some(tls) = Nginx::start_http2("http2_auto", Http2::Tls, "") else {
        return;
    };
    let ran = run_ok(&[
        &tls.url(),
        "--http",
        "auto",
        "--insecure",
        "--model",
        "concurrency",
        "--steps",
        "2",
        "--streams",
        "4",
        "--step-duration",
        "1s",
    ]);
    assert!(
        ran.step(0)["http2"].is_object(),
        "ALPN chose h2: {}",
        ran.step(0)
    );

    // A plain HTTP/1.1 nginx, spoken to in h2c: a line naming what came back, exit 2, no load.
    let h1 = Nginx::spawn(1);
    let before = h1.requests();
    let (o, _dir) = run_quiet(&[
        &h1.url(),
        "--http",
        "2",
        "--steps",
        "10",
        "--step-duration",
        "1s",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    let said = text(&o.stderr);
    assert!(
        said.contains("answered the HTTP/2 preface in HTTP/1 (\"HTTP/1.1 400 Bad Request\")"),
        "{said}"
    );
    // This read, and the probe's preface, which nginx counts as one bad HTTP/1.1 request.
    assert_eq!(h1.requests() - before, 2, "no load was sent");
}

/// h2load's "finished in 3.00s, 1999.33 req/s, ..." rate.
fn h2load_rate(out: &str) -> f64 {
    let line = out
        .lines()
        .find(|l| l.starts_with("finished in"))
        .unwrap_or_else(|| panic!("no 'finished in' line: {out}"));
    line.split(", ")
        .find_map(|p| p.strip_suffix(" req/s"))
        .and_then(|r| r.trim().parse().ok())
        .unwrap_or_else(|| panic!("no req/s in: {line}"))
}

#[test]
fn h2load_and_stampede_at_the_same_rate_against_one_nginx_agree() {
    // h2load does not reconnect after a GOAWAY: at nginx's default keepalive_requests (1,000) each
    // of its clients stops after 1,000 requests, and its rate reads a third of what it sent.
    let Some(nginx) = Nginx::start_http2(
        "http2_vs_h2load",
        Http2::Cleartext,
        "keepalive_requests 1000000;",
    ) else {
        return;
    };
    // 4 clients x 500 req/s each (h2load's --rps is per client) = 2,000 req/s for 3 s.
    let peer = match Command::new("h2load")
        .args(["-c", "4", "-m", "10", "--rps", "500", "-D", "3"])
        .arg(nginx.url())
        .output()
    {
        Ok(o) => text(&o.stdout),
        Err(e) => {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "CI=true requires h2load (nghttp2-client): {e}"
            );
            eprintln!("SKIPPED h2load_and_stampede_...: no h2load ({e})");
            return;
        }
    };
    let theirs = h2load_rate(&peer);
    let before = nginx.requests();
    let ran = run_ok(&[
        &nginx.url(),
        "--http",
        "2",
        "--model",
        "requests",
        "--steps",
        "2000",
        "--max-connections",
        "4",
        "--streams",
        "10",
        "--step-duration",
        "3s",
    ]);
    let step = ran.step(0);
    let ours = step["ok_rate"].as_f64().unwrap();
    assert_eq!(
        step["requests"].as_u64().unwrap(),
        nginx.requests() - before - 1,
        "{step}"
    );
    // Both held the demanded 2,000/s; each within 3 % of it, so of each other within a few.
    for (who, rate) in [("h2load", theirs), ("stampede", ours)] {
        assert!(
            (rate - 2000.0).abs() < 60.0,
            "{who} {rate} req/s: {peer}\n{step}"
        );
    }
}

#[test]
fn http1_and_http2_of_one_server_run_side_by_side_each_in_its_own_protocol() {
    // The reference target speaks both on one port; 5 ms per request, so a connection's 8 streams
    // carry 8 times what one HTTP/1.1 connection does.
    let serve = tests::ServeProcess::start(&["--delay", "5ms"]);
    let before = serve.requests();
    let h1 = format!("h1=http://{}/", serve.addr);
    let h2 = format!("h2=h2c://{}/", serve.addr);
    let (o, out) = run_quiet(&[
        &h1,
        &h2,
        "--model",
        "concurrency",
        "--steps",
        "2",
        "--streams",
        "8",
        "--step-duration",
        "1s",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let dir = |name: &str| tests::run_json(&out.path().join(name));
    let (one, two) = (dir("h1"), dir("h2"));
    let rate = |run: &serde_json::Value| run["steps"][0]["ok_rate"].as_f64().unwrap();
    assert!(one["steps"][0]["http2"].is_null(), "{}", one["steps"][0]);
    assert!(two["steps"][0]["http2"].is_object(), "{}", two["steps"][0]);
    assert_eq!(
        (one["plan"]["http"].as_str(), two["plan"]["http"].as_str()),
        (Some("1.1"), Some("2"))
    );
    // 2 connections at 5 ms: about 400/s over HTTP/1.1; x 8 streams over HTTP/2.
    assert!(
        rate(&two) > 3.0 * rate(&one),
        "h1 {} h2 {}",
        rate(&one),
        rate(&two)
    );
    let sent: u64 = [&one, &two]
        .iter()
        .map(|r| r["steps"][0]["requests"].as_u64().unwrap())
        .sum();
    assert_eq!(serve.requests() - before, sent, "the server counted both");
}

/// A Node http2 server (nghttp2) made with `options`, running `on_stream` for each stream (`st`)
/// with `http2` in scope and counters `n` (streams) and `resets` (streams it reset) to keep; the
/// counters are told as "n resets" on a second, HTTP/1.1 port.
struct NodeCounting {
    _script: NodeScript,
    port: u16,
    count_port: u16,
}

impl NodeCounting {
    fn start(test: &str, options: &str, on_stream: &str) -> Option<NodeCounting> {
        let script = format!(
            "const http2 = require('http2'); const http = require('http');\n\
             let n = 0, resets = 0;\n\
             const s = http2.createServer({options});\n\
             // A stream closed with an error code emits 'error': it is counted, not fatal.\n\
             s.on('sessionError', () => {{}});\n\
             s.on('stream', (st) => {{ st.on('error', () => {{}}); {on_stream} }});\n\
             const c = http.createServer((q, r) => r.end(n + ' ' + resets));\n\
             s.listen(0, '127.0.0.1', () => c.listen(0, '127.0.0.1', () =>\n\
               console.log(s.address().port + ' ' + c.address().port)));\n\
             setTimeout(() => process.exit(0), 600000);\n"
        );
        let script = NodeScript::start(test, &script)?;
        let ports: Vec<u16> = script
            .said
            .split_whitespace()
            .map(|p| p.parse().expect("node prints its ports"))
            .collect();
        Some(NodeCounting {
            _script: script,
            port: ports[0],
            count_port: ports[1],
        })
    }

    /// (streams, streams it reset), as node counted them.
    fn counts(&self) -> (u64, u64) {
        let said = tests::http_get(([127, 0, 0, 1], self.count_port).into(), "/");
        let mut n = said
            .split_whitespace()
            .map(|c| c.parse().expect("node counts"));
        (n.next().unwrap(), n.next().unwrap())
    }

    fn url(&self) -> String {
        format!("h2c://127.0.0.1:{}/", self.port)
    }
}

/// 1 connection x 4 streams for 1 s.
fn one_connection(url: &str) -> tests::Ran {
    run_ok(&[
        url,
        "--model",
        "concurrency",
        "--steps",
        "1",
        "--streams",
        "4",
        "--step-duration",
        "1s",
        "--threads",
        "1",
    ])
}

#[test]
fn window_stall_time_is_the_pause_node_s_flow_control_imposed() {
    // Node announces a 1,024-byte stream window and, for each request, reads nothing of its body
    // for 300 ms (a paused stream sends no WINDOW_UPDATE), then reads it all and answers: each
    // 8 KB upload stalls on the window for the 300 ms the test put there, and a little more while
    // the rest goes through the window 1 KB at a time.
    let Some(node) = NodeCounting::start(
        "http2_node_window",
        "{ settings: { initialWindowSize: 1024 } }",
        "n++; st.pause();\n\
         st.on('data', () => {});\n\
         st.on('end', () => { st.respond({ ':status': 200 }); st.end('ok'); });\n\
         setTimeout(() => st.resume(), 300);",
    ) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let body = dir.path().join("body");
    std::fs::write(&body, "b".repeat(8_192)).unwrap();
    let ran = run_ok(&[
        &node.url(),
        "-m",
        "POST",
        "--body-file",
        body.to_str().unwrap(),
        "--model",
        "concurrency",
        "--steps",
        "1",
        "--streams",
        "1",
        "--step-duration",
        "1500ms",
        "--threads",
        "1",
    ]);
    let step = ran.step(0);
    let (sent, failed) = sent_and_failed(&ran);
    let (streams, _) = node.counts();
    let h2 = &step["http2"];
    eprintln!("node: {streams} streams; stampede: {sent} sent, {h2}");
    assert_eq!((streams, failed), (sent, 0), "{step}");
    assert!((3..=6).contains(&sent), "about 1.5 s / 300 ms: {step}");
    let stalls = h2["window_stalls"].as_u64().unwrap();
    let stall_ms = h2["window_stall_ms"].as_f64().unwrap();
    assert!(stalls >= sent, "every upload stalled: {step}");
    // Per request: the 300 ms pause, give or take the timer's slack, and what the rest of the
    // body's window round trips add on loopback.
    let per = stall_ms / sent as f64;
    assert!((290.0..550.0).contains(&per), "{per} ms a request: {step}");
}

#[test]
fn a_server_whose_header_table_is_below_4096_takes_every_request() {
    // nghttp2 with SETTINGS_HEADER_TABLE_SIZE 0 refuses (COMPRESSION_ERROR) a header block that
    // does not open with a table size update once its SETTINGS are acknowledged (RFC 7541 4.2).
    let Some(node) = NodeCounting::start(
        "http2_node_table_0",
        "{ settings: { headerTableSize: 0 } }",
        "n++; st.respond({ ':status': 200 }); st.end('ok');",
    ) else {
        return;
    };
    let ran = one_connection(&node.url());
    let (sent, failed) = sent_and_failed(&ran);
    assert!(sent > 100, "{}", ran.run);
    assert_eq!((node.counts().0, failed), (sent, 0), "{}", ran.run);
}

#[test]
fn stream_resets_are_the_ones_node_sent_before_and_after_its_headers() {
    // Node resets every 7th stream before answering (CANCEL) and every 11th after its HEADERS
    // (INTERNAL_ERROR: destroyed; `close` after `respond` would end the stream whole and reset it
    // NO_ERROR after, as nghttp -nv shows); the rest are answered.
    let Some(node) = NodeCounting::start(
        "http2_node_resets",
        "{}",
        "n++;\n\
         if (n % 7 == 0) { resets++; st.close(http2.constants.NGHTTP2_CANCEL); return; }\n\
         if (n % 11 == 0) { resets++; st.respond({ ':status': 200 });\n\
           st.destroy(new Error('reset after the headers')); return; }\n\
         st.respond({ ':status': 200 }); st.end('ok');",
    ) else {
        return;
    };
    let ran = one_connection(&node.url());
    let step = ran.step(0);
    let (sent, failed) = sent_and_failed(&ran);
    let (streams, resets) = node.counts();
    eprintln!(
        "node: {streams} streams, {resets} reset; stampede: {sent} sent, stream_resets {}",
        step["http2"]["stream_resets"]
    );
    assert!(resets > 20, "{step}");
    assert_eq!(streams, sent, "{step}");
    assert_eq!(step["http2"]["stream_resets"], resets, "{step}");
    assert_eq!(failed, resets, "{step}");
    assert_eq!(step["replies"], sent - resets, "{step}");
    let notes = step["error_messages"].to_string();
    assert!(notes.contains(" reset the stream ("), "{notes}");
}

/// The length of each HEADERS frame nghttp received, in order, asking `paths` of `base` over one
/// connection; `None` without nghttp (nghttp2-client).
fn nghttp_header_lengths(base: &str, paths: &[&str]) -> Option<Vec<u64>> {
    let urls: Vec<String> = paths.iter().map(|p| format!("{base}{p}")).collect();
    let out = match Command::new("nghttp").arg("-nv").args(&urls).output() {
        Ok(o) => text(&o.stdout),
        Err(e) => {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "CI=true requires nghttp (nghttp2-client): {e}"
            );
            eprintln!("SKIPPED: no nghttp ({e})");
            return None;
        }
    };
    Some(
        out.lines()
            .filter_map(|l| l.split_once("recv HEADERS frame <length=").map(|(_, r)| r))
            .map(|r| r.split(',').next().unwrap().parse().expect("a length"))
            .collect(),
    )
}

#[test]
fn header_bytes_are_what_nghttp_receives_from_the_same_server() {
    // Fixed reply headers (the date too): the first block on a connection indexes them into the
    // server's table, every later one is a few indexed bytes. nghttp's frame lengths give both.
    let Some(node) = NodeCounting::start(
        "http2_node_header_bytes",
        "{}",
        "n++; st.respond({ ':status': 200, date: 'Sat, 05 Dec 2026 00:00:00 GMT',\n\
           'x-load': 'stampede-check' }); st.end('ok');",
    ) else {
        return;
    };
    let base = format!("http://127.0.0.1:{}", node.port);
    let Some(lengths) = nghttp_header_lengths(&base, &["/a", "/b", "/c"]) else {
        return;
    };
    assert_eq!(lengths.len(), 3, "{lengths:?}");
    let (first, later) = (lengths[0], lengths[1]);
    assert_eq!(lengths[2], later, "{lengths:?}");
    assert!(first > later, "{lengths:?}");
    let ran = one_connection(&node.url());
    let step = ran.step(0);
    let replies = step["replies"].as_u64().unwrap();
    eprintln!(
        "nghttp: {lengths:?}; stampede: {replies} replies, header_bytes {}",
        step["http2"]["header_bytes"]
    );
    assert!(replies > 100, "{step}");
    assert_eq!(
        step["http2"]["header_bytes"],
        first + (replies - 1) * later,
        "nghttp's {first} then {later} per reply: {step}"
    );
}
