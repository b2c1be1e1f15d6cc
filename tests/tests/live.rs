//! `--live`: a real ramp watched as it happens. Chromium opens the page mid-run and again at the
//! end (screenshots kept for a person to look at), the event stream is read as a browser reads it
//! (replayed from the start, resumed from a Last-Event-ID), and what the page and events.ndjson say
//! of the finished steps is run.json's and steps.tsv's. Then what the live address must refuse.
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use results::events::{Event, Live};
use results::run_file::RunFile;
use tests::browser::{self, Loaded};
use tests::dom::{Dom, El};
use tests::{Lines, ServeProcess, bin, text};

/// Starts `stampede COMMAND --live LIVE --out OUT` (the environment's token left out unless `token`
/// gives one); returns the child, its stderr, and the live address it says.
fn live_run(
    command: &[&str],
    live: &str,
    out: &Path,
    token: Option<&str>,
) -> (Child, Lines, SocketAddr) {
    let mut cmd = Command::new(bin("stampede"));
    cmd.args(command)
        .args(["--live", live, "--out"])
        .arg(out)
        .env_remove("STAMPEDE_TOKEN")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    if let Some(t) = token {
        cmd.env("STAMPEDE_TOKEN", t);
    }
    let mut child = cmd.spawn().expect("stampede runs");
    let log = Lines::of(&mut child);
    let addr = said_addr(&log);
    (child, log, addr)
}

/// The live address a coordinator says on stderr (`watch the run at http://ADDR/`), waited for; an
/// unspecified one (0.0.0.0) is reached on loopback.
fn said_addr(log: &Lines) -> SocketAddr {
    let said = "watch the run at http://";
    assert!(
        log.wait_for(said, Duration::from_secs(60)),
        "no live address said: {}",
        log.text()
    );
    let text = log.text();
    let addr: SocketAddr = text[text.find(said).unwrap() + said.len()..]
        .split('/')
        .next()
        .unwrap()
        .parse()
        .expect("an address");
    ([127, 0, 0, 1], addr.port()).into()
}

/// One request on a fresh connection: (status code, head, body).
fn request(addr: SocketAddr, head: &str) -> (u16, String, Vec<u8>) {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).expect("reachable");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let host = if head.contains("Host: ") {
        String::new()
    } else {
        format!("Host: {addr}\r\n")
    };
    write!(s, "{head}{host}Connection: close\r\n\r\n").unwrap();
    let mut raw = Vec::new();
    let _ = s.read_to_end(&mut raw);
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a whole response head");
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let code = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .expect("a status code");
    (code, head, raw[split + 4..].to_vec())
}

fn get(addr: SocketAddr, path: &str) -> (u16, String, Vec<u8>) {
    request(addr, &format!("GET {path} HTTP/1.1\r\n"))
}

/// The stream's messages (event name, id, data) as they come, until `enough` says so or 20 s pass.
fn read_stream(
    addr: SocketAddr,
    query: &str,
    last_event_id: Option<u64>,
    enough: impl Fn(&[(String, Option<u64>, String)]) -> bool,
) -> Vec<(String, Option<u64>, String)> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).expect("reachable");
    s.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let resume = last_event_id.map_or(String::new(), |id| format!("Last-Event-ID: {id}\r\n"));
    write!(
        s,
        "GET /events{query} HTTP/1.1\r\nHost: {addr}\r\nAccept: text/event-stream\r\n{resume}\r\n"
    )
    .unwrap();
    let mut raw = Vec::new();
    let began = Instant::now();
    let mut messages = Vec::new();
    while began.elapsed() < Duration::from_secs(20) {
        let mut buf = [0u8; 65536];
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => raw.extend_from_slice(&buf[..n]),
            Err(_) => {}
        }
        messages = sse_messages(&dechunk(&raw));
        if enough(&messages) {
            break;
        }
    }
    messages
}

/// The body of a chunked response read so far (whole chunks only).
fn dechunk(raw: &[u8]) -> String {
    let text = String::from_utf8_lossy(raw);
    let Some((head, mut rest)) = text.split_once("\r\n\r\n") else {
        return String::new();
    };
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(head.contains("text/event-stream"), "{head}");
    let mut body = String::new();
    while let Some((size, after)) = rest.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if n == 0 || after.len() < n + 2 {
            break;
        }
        body.push_str(&after[..n]);
        rest = &after[n + 2..];
    }
    body
}

fn sse_messages(body: &str) -> Vec<(String, Option<u64>, String)> {
    let mut out = Vec::new();
    for block in body.split("\n\n") {
        let (mut event, mut id, mut data) = (String::from("message"), None, String::new());
        let mut any = false;
        for line in block.lines() {
            if let Some(v) = line.strip_prefix("event: ") {
                event = v.to_string();
                any = true;
            } else if let Some(v) = line.strip_prefix("id: ") {
                id = v.parse().ok();
            } else if let Some(v) = line.strip_prefix("data: ") {
                data.push_str(v);
                any = true;
            }
        }
        if any {
            out.push((event, id, data));
        }
    }
    // The last block may be cut short: only whole ones (its view's JSON parses) are kept.
    if let Some((_, _, data)) = out.last()
        && serde_json::from_str::<serde_json::Value>(data).is_err()
    {
        out.pop();
    }
    out
}

/// The `#steps` table's rows, each cell's text.
fn steps_rows(dom: &Dom) -> Vec<Vec<String>> {
    let table = dom.by_id("steps").expect("a <table id=\"steps\">");
    table
        .all("tr")
        .iter()
        .filter(|tr| !tr.all("td").is_empty())
        .map(|tr| tr.all("td").iter().map(El::text).collect())
        .collect()
}

/// A section of the live page (`<div data-section="ID">`).
fn section<'a>(dom: &'a Dom, id: &str) -> Option<El<'a>> {
    dom.elements()
        .into_iter()
        .find(|e| e.attr("data-section") == Some(id))
}

fn last_event(page: &Loaded) -> u64 {
    page.dom()
        .first("html")
        .and_then(|h| h.attr("data-last-event"))
        .and_then(|v| v.parse().ok())
        .expect("<html data-last-event>")
}

/// A run as JSON: its maps compared whatever their keys' order (run.json writes them sorted).
fn as_json(run: Option<&RunFile>) -> serde_json::Value {
    serde_json::to_value(run).unwrap()
}

fn wait_until(what: &str, limit: Duration, done: impl Fn() -> bool) {
    let began = Instant::now();
    while !done() {
        assert!(began.elapsed() < limit, "{what} within {limit:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn steps_written(dir: &Path) -> usize {
    std::fs::read_to_string(dir.join("run.json"))
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        .and_then(|v| v["steps"].as_array().map(Vec::len))
        .unwrap_or(0)
}

#[test]
fn a_ramp_watched_live_shows_run_json_s_numbers_and_a_late_browser_the_whole_history() {
    let Some(chromium) = browser::available(
        "a_ramp_watched_live_shows_run_json_s_numbers_and_a_late_browser_the_whole_history",
    ) else {
        return;
    };
    let serve = ServeProcess::start(&["--capacity", "300"]);
    let dir = tempfile::tempdir().unwrap();
    let shots = std::env::temp_dir().join("stampede-live-shots");
    std::fs::create_dir_all(&shots).unwrap();
    let (mut child, log, addr) = live_run(
        &[
            "run",
            &serve.url(),
            "--model",
            "requests",
            "--steps",
            "100,200,400",
            "--step-duration",
            "3s",
            "--live-keep",
            "30s",
        ],
        "127.0.0.1:0",
        dir.path(),
        None,
    );
    let url = format!("http://{addr}/");

    // Mid-run: the first step written, the second running.
    wait_until("the first step written", Duration::from_secs(60), || {
        steps_written(dir.path()) >= 1
    });
    std::thread::sleep(Duration::from_millis(1500));
    let early = browser::load_url(&chromium, &url, None).expect("the page mid-run");
    let dom = browser::assert_clean(&early);
    let rows = steps_rows(&dom);
    let (_, tsv) = browser::steps_tsv(dir.path());
    assert!(!rows.is_empty(), "a finished step is on the page mid-run");
    assert_eq!(rows, tsv[..rows.len()], "the page's steps are steps.tsv's");
    assert!(
        section(&dom, "strip").is_some() && section(&dom, "current").is_some(),
        "the run strip and the current step's chart"
    );
    browser::screenshot(&chromium, &url, &shots.join("mid-run.png"), 1280, 2200)
        .expect("a screenshot mid-run");
    // A browser that stays from here to the end: what it shows then came by its stream (Chromium
    // dumps the page once the stream is closed, which the page does when the run is over).
    let opened_at = last_event(&early);
    let follower = {
        let (chromium, url) = (chromium.clone(), url.clone());
        std::thread::spawn(move || {
            browser::load_url(&chromium, &url, Some(Duration::from_secs(5)))
                .expect("the page followed to the end")
        })
    };

    // The stream, as a browser reads it: every event from the first, each with its id in order,
    // then the view after the last.
    let messages = read_stream(addr, "", None, |m| m.iter().any(|(e, _, _)| e == "view"));
    let ids: Vec<u64> = messages.iter().filter_map(|(_, id, _)| *id).collect();
    assert!(ids.len() >= 3, "events replayed: {messages:?}");
    assert_eq!(
        ids,
        (1..=ids.len() as u64).collect::<Vec<_>>(),
        "ids 1, 2, ..."
    );
    let first: serde_json::Value = serde_json::from_str(&messages[0].2).unwrap();
    assert_eq!(first["event"], "begin");
    assert_eq!(messages.last().unwrap().0, "view");
    // A reconnect resumes after the id it last saw.
    let from = ids.len() as u64 - 1;
    let resumed = read_stream(addr, "", Some(from), |m| {
        m.iter().any(|(e, _, _)| e == "view")
    });
    let first_id = resumed.iter().find_map(|(_, id, _)| *id);
    assert_eq!(
        first_id,
        Some(from + 1),
        "resumed after {from}: {resumed:?}"
    );

    // A page opened mid-run asks only what comes after what it shows (`?after=N`); a reconnect's
    // Last-Event-ID wins over it.
    let after = read_stream(addr, &format!("?after={from}"), None, |m| {
        m.iter().any(|(e, _, _)| e == "view")
    });
    assert_eq!(after.iter().find_map(|(_, id, _)| *id), Some(from + 1));
    let both = read_stream(addr, "?after=1", Some(from), |m| {
        m.iter().any(|(e, _, _)| e == "view")
    });
    assert_eq!(both.iter().find_map(|(_, id, _)| *id), Some(from + 1));
    // On loopback the page answers only to a loopback name: a site of elsewhere whose name was
    // pointed here (DNS rebinding) is refused.
    let (code, head, _) = request(addr, "GET /events HTTP/1.1\r\nHost: evil.example:5665\r\n");
    assert_eq!(code, 403, "{head}");
    // An interval reaches a reader as it is merged: wait for one more event on an open stream.
    let seen = ids.len() as u64;
    let more = read_stream(addr, "", Some(seen), |m| {
        m.iter().any(|(_, id, _)| id.is_some())
    });
    assert!(
        more.iter().any(|(_, id, _)| id.is_some_and(|i| i > seen)),
        "a new event came: {more:?}"
    );

    // The run ends; the page stays (--live-keep).
    assert!(
        log.wait_for("the live page stays at", Duration::from_secs(60)),
        "{}",
        log.text()
    );
    let late = browser::load_url(&chromium, &url, None).expect("the page at the end");
    let dom = late.dom();
    let html = dom.first("html").expect("an <html>");
    assert_eq!(html.attr("data-errors"), None, "{:?}", late.console);
    assert_eq!(html.attr("data-ready"), Some("1"));
    // Its one link out is the report beside it.
    assert_eq!(
        dom.external_references(),
        ["<a href=\"report.html\">"],
        "nothing fetched from elsewhere"
    );
    let (_, tsv) = browser::steps_tsv(dir.path());
    assert_eq!(steps_rows(&dom), tsv, "a late browser sees every step");
    let end = section(&dom, "end").expect("the end section");
    assert!(
        end.all("a")
            .iter()
            .any(|a| a.attr("href") == Some("report.html")),
        "the end links to report.html: {}",
        end.text()
    );
    browser::screenshot(&chromium, &url, &shots.join("end.png"), 1280, 2200)
        .expect("a screenshot at the end");

    // The browser that followed the stream from mid-run drew every step, and the end.
    let followed = follower.join().unwrap();
    let fdom = followed.dom();
    let fhtml = fdom.first("html").expect("an <html>");
    assert_eq!(fhtml.attr("data-errors"), None, "{:?}", followed.console);
    assert!(
        last_event(&followed) > opened_at,
        "the stream moved the page on"
    );
    assert_eq!(
        fdom.by_id("live-state").and_then(|e| e.attr("data-stream")),
        Some("over"),
        "the stream said the run is over"
    );
    assert_eq!(steps_rows(&fdom), tsv, "the followed page drew every step");
    // events.ndjson folds into run.json, and its last id is the page's.
    let events = std::fs::read_to_string(dir.path().join("events.ndjson")).unwrap();
    let live = Live::read(&events).expect("events.ndjson folds");
    let run = RunFile::read(&dir.path().join("run.json")).unwrap();
    assert_eq!(live.targets.len(), 1);
    assert_eq!(
        as_json(live.targets[0].run.as_ref()),
        as_json(Some(&run)),
        "the fold of events.ndjson is run.json"
    );
    assert!(live.finished);
    assert_eq!(last_event(&late), live.last);
    assert_eq!(last_event(&followed), live.last);
    let intervals = events
        .lines()
        .filter(|l| l.contains("\"event\":\"interval\""))
        .count();
    // A merged second each: 2 or 3 of each 3 s step, as the agent's second boundaries fall (a
    // step's last part goes with its result; CI saw 7 in all).
    assert!(
        (3..=9).contains(&intervals),
        "about one interval a second of 9 s: {intervals}"
    );
    // The finished run's page from the file shows what the browser showed.
    let page = browser::load(&chromium, &dir.path().join("live.html")).expect("live.html");
    let file_dom = page.dom();
    assert_eq!(steps_rows(&file_dom), tsv);
    for id in ["strip", "notes", "end", "agents"] {
        assert_eq!(
            section(&file_dom, id).map(|e| e.text()),
            section(&dom, id).map(|e| e.text()),
            "section {id} of live.html and of the page served"
        );
    }
    // While it stays: the report, and nothing else.
    let (code, _, body) = get(addr, "/report.html");
    assert_eq!(code, 200);
    assert_eq!(body, std::fs::read(dir.path().join("report.html")).unwrap());
    assert_eq!(get(addr, "/etc/passwd").0, 404);
    assert_eq!(get(addr, "/events/../metrics").0, 404);
    assert_eq!(
        request(addr, "POST / HTTP/1.1\r\nContent-Length: 0\r\n").0,
        405
    );
    assert_eq!(request(addr, "DELETE /events HTTP/1.1\r\n").0, 405);

    tests::signal(&child, libc::SIGINT);
    let status = child.wait().unwrap();
    assert!(status.success(), "{status}: {}", log.text());
    eprintln!("screenshots in {}", shots.display());
}

#[test]
fn the_live_address_refuses_what_it_must_and_the_run_goes_on() {
    let serve = ServeProcess::start(&[]);
    let run = |extra: &[&str], env: &[(&str, &str)]| {
        let dir = tempfile::tempdir().unwrap();
        let mut cmd = Command::new(bin("stampede"));
        cmd.arg("run")
            .arg(serve.url())
            .args(["--steps", "50", "--step-duration", "1s", "--quiet", "--out"])
            .arg(dir.path())
            .args(extra)
            .env_remove("STAMPEDE_TOKEN")
            .stdin(Stdio::null());
        for (k, v) in env {
            cmd.env(k, v);
        }
        (cmd.output().unwrap(), dir)
    };
    // A port in use: exit 2 before any load, naming the flag and the address.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let at = taken.local_addr().unwrap().to_string();
    let before = serve.requests();
    let (o, _) = run(&["--live", &at], &[]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains(&format!("--live {at}: cannot listen there")),
        "{}",
        text(&o.stderr)
    );
    assert_eq!(serve.requests(), before, "no load sent");
    // Beyond loopback without a token: refused in one line.
    let (o, _) = run(&["--live", "0.0.0.0:0"], &[]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("without a token"),
        "{}",
        text(&o.stderr)
    );
    // --live-keep needs --live.
    let (o, _) = run(&["--live-keep", "5s"], &[]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));

    // With the token: every request must present it; a wrong one is 401 and the run goes on.
    let dir = tempfile::tempdir().unwrap();
    let url = serve.url();
    let (mut child, log, addr) = live_run(
        &[
            "run",
            &url,
            "--steps",
            "50,60",
            "--step-duration",
            "6s",
            "--live-keep",
            "20s",
        ],
        "0.0.0.0:0",
        dir.path(),
        Some("s3cret token"),
    );
    // The unspecified address is not one a browser can open: loopback's is said instead (and the
    // host's own addresses, when it has any beyond loopback).
    assert!(!log.text().contains("http://0.0.0.0:"), "{}", log.text());
    assert!(
        log.text().contains("watch the run at http://127.0.0.1:"),
        "{}",
        log.text()
    );
    // Only ever reached on loopback (said_addr's address).
    // The page's own token, said with its address: not the fleet's, which commands agents.
    let said = log.text();
    let token = said[said.find("?token=").expect("the page's token said") + 7..]
        .split_whitespace()
        .next()
        .unwrap()
        .to_string();
    assert_eq!(token.len(), 32, "{token}");
    assert!(!said.contains("s3cret"), "the fleet's token is never said");
    // A browser that never reads its stream, from the start: dropped once the run's messages
    // fill what its connection holds, and said so; the run goes on.
    let slow = slow_reader(addr, &token);
    assert_eq!(get(addr, "/").0, 401);
    assert_eq!(get(addr, "/metrics").0, 401);
    assert_eq!(get(addr, "/?token=wrong").0, 401);
    assert_eq!(
        get(addr, "/?token=s3cret%20token").0,
        401,
        "the fleet's token"
    );
    let (code, head, _) = request(
        addr,
        "GET /events HTTP/1.1\r\nAuthorization: Bearer nope\r\n",
    );
    assert_eq!(code, 401);
    assert!(
        head.to_ascii_lowercase().contains("connection: close"),
        "a refused connection keeps no seat: {head}"
    );
    let (code, _, page) = get(addr, &format!("/?token={token}"));
    assert_eq!(code, 200);
    assert!(
        !text(&page).contains(&token),
        "the page carries no token: its script asks the stream with the page's own query"
    );
    assert_eq!(
        request(
            addr,
            &format!("GET /metrics HTTP/1.1\r\nAuthorization: bearer {token}\r\n")
        )
        .0,
        200
    );
    // Connections that send nothing hold no seat: 8 from one address are let wait, the rest are
    // closed at once, and the 8 once PROVE_WITHIN (3 s) has passed.
    let held: Vec<TcpStream> = (0..200)
        .map(|_| TcpStream::connect(addr).unwrap())
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(closed(&held), 200 - 8, "all but 8 closed at once");
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(closed(&held), 200, "the 8 closed unproven");
    drop(held);
    assert_eq!(get(addr, &format!("/?token={token}")).0, 200);

    assert!(
        log.wait_for("read nothing", Duration::from_secs(30)),
        "the slow reader was dropped: {}",
        log.text()
    );
    drop(slow);
    assert!(
        log.wait_for("the live page stays at", Duration::from_secs(60)),
        "{}",
        log.text()
    );
    let run = tests::run_json(dir.path());
    assert_eq!(run["status"], "completed", "the run went on");
    assert_eq!(run["steps"].as_array().unwrap().len(), 2);
    tests::signal(&child, libc::SIGINT);
    assert!(child.wait().unwrap().success(), "{}", log.text());
}

/// How many of `held` the server has closed (EOF or reset), seen without waiting.
fn closed(held: &[TcpStream]) -> usize {
    held.iter()
        .filter(|s| {
            s.set_nonblocking(true).unwrap();
            let mut b = [0u8; 256];
            let mut s: &TcpStream = s;
            match s.read(&mut b) {
                Ok(0) => true,
                Ok(_) => false,
                Err(e) => e.kind() != std::io::ErrorKind::WouldBlock,
            }
        })
        .count()
}

/// A connection to `to` from the loopback address `from` (127.0.0.0/8 is all this host's): a crowd
/// from many addresses, on one machine.
fn connect_from(from: [u8; 4], to: SocketAddr) -> Option<TcpStream> {
    use std::os::fd::FromRawFd;
    // SAFETY: socket(2), bind(2), connect(2) on a descriptor owned here, with sockaddr_in locals
    // and their sizes; the descriptor is closed on failure and owned by the stream on success.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0);
        assert!(fd >= 0);
        let sa = |ip: [u8; 4], port: u16| libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: port.to_be(),
            sin_addr: libc::in_addr {
                s_addr: u32::from_ne_bytes(ip),
            },
            sin_zero: [0; 8],
        };
        let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
        let (src, dst) = (sa(from, 0), sa([127, 0, 0, 1], to.port()));
        if libc::bind(fd, (&src as *const libc::sockaddr_in).cast(), len) != 0
            || libc::connect(fd, (&dst as *const libc::sockaddr_in).cast(), len) != 0
        {
            libc::close(fd);
            return None;
        }
        Some(TcpStream::from_raw_fd(fd))
    }
}

/// A stream asked for on a socket whose receive buffer is tiny and never read: the server's writes
/// fill it at once.
fn slow_reader(addr: SocketAddr, token: &str) -> TcpStream {
    use std::os::fd::AsRawFd;
    // SAFETY: a plain socket(2)/setsockopt(2)/connect(2) on a descriptor owned here.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0) };
    assert!(fd >= 0);
    let small: libc::c_int = 2048;
    unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            (&small as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
    let sa = libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: addr.port().to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from_ne_bytes([127, 0, 0, 1]),
        },
        sin_zero: [0; 8],
    };
    let rc = unsafe {
        libc::connect(
            fd,
            (&sa as *const libc::sockaddr_in).cast(),
            std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
        )
    };
    assert_eq!(rc, 0, "connect");
    // SAFETY: fd is a connected socket nobody else owns.
    let mut s = unsafe { <TcpStream as std::os::fd::FromRawFd>::from_raw_fd(fd) };
    assert_eq!(s.as_raw_fd(), fd);
    write!(
        s,
        "GET /events HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\n\r\n"
    )
    .unwrap();
    s
}

#[test]
fn an_event_stream_folds_like_the_file() {
    // The events of a file, told one by one, fold to what reading the file folds to: the page
    // rebuilt later from events.ndjson is the page the stream drew.
    let serve = ServeProcess::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let o = tests::stampede(&[
        "run",
        &serve.url(),
        "--steps",
        "20,40",
        "--step-duration",
        "2s",
        "--quiet",
        "--out",
        dir.path().to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    // events.ndjson is written without --live too.
    let events = std::fs::read_to_string(dir.path().join("events.ndjson")).unwrap();
    let mut live = Live::default();
    let mut kinds = Vec::new();
    for l in events.lines() {
        let line: results::events::Line = serde_json::from_str(l).unwrap();
        kinds.push(match &line.event {
            Event::Begin { .. } => "begin",
            Event::Baseline { .. } => "baseline",
            Event::Run { .. } => "run",
            Event::StepStart { .. } => "step_start",
            Event::Interval { .. } => "interval",
            Event::Warmup { .. } => "warmup",
            Event::Step { .. } => "step",
            Event::End { .. } => "end",
            Event::Finished { .. } => "finished",
        });
        live.apply(&line).unwrap();
    }
    assert_eq!(live, Live::read(&events).unwrap());
    let run = RunFile::read(&dir.path().join("run.json")).unwrap();
    assert_eq!(as_json(live.targets[0].run.as_ref()), as_json(Some(&run)));
    kinds.dedup();
    assert_eq!(
        kinds,
        [
            "begin",
            "run",
            "step_start",
            "interval",
            "step",
            "step_start",
            "interval",
            "step",
            "end",
            "finished"
        ]
    );
}

#[test]
fn a_search_watched_live_shows_its_bracket_and_live_html_is_rebuilt_by_stampede_report() {
    let Some(chromium) = browser::available(
        "a_search_watched_live_shows_its_bracket_and_live_html_is_rebuilt_by_stampede_report",
    ) else {
        return;
    };
    let target = ServeProcess::start(&["--capacity", "600"]);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let url = target.url();
    let (mut child, log, addr) = live_run(
        &[
            "find-max",
            &url,
            "--slo",
            "p99<50ms",
            "--model",
            "requests",
            "--start",
            "200",
            "--probe",
            "2s",
            "--confirm",
            "2s",
            "--warmup",
            "0s",
            "--cooldown",
            "500ms",
            "--precision",
            "10%",
            "--live-keep",
            "20s",
        ],
        "127.0.0.1:0",
        &out,
        None,
    );
    assert!(
        log.wait_for("the live page stays at", Duration::from_secs(120)),
        "{}",
        log.text()
    );
    let page = browser::load_url(&chromium, &format!("http://{addr}/"), None).unwrap();
    let dom = page.dom();
    let run = tests::run_json(&out);
    let capacity = &run["capacity"];
    let figure = |k: &str| {
        dom.elements()
            .into_iter()
            .find(|e| e.attr("data-k") == Some(k))
            .and_then(|e| e.attr("data-v").map(str::to_string))
    };
    // The page writes numbers to three decimals.
    let same = |k: &str, want: &serde_json::Value| {
        let shown: f64 = figure(k).and_then(|v| v.parse().ok()).expect(k);
        let want = want["offered"].as_f64().unwrap();
        assert!(
            (shown - want).abs() < 1e-3,
            "{k}: {shown} shown, {want} in run.json"
        );
    };
    // The bracket's ends are the search's answer.
    same("passed", &capacity["max_rate"]);
    same("failed-at", &capacity["lowest_fail"]);
    assert!(
        dom.elements()
            .iter()
            .any(|e| e.attr("data-chart") == Some("search")),
        "the search's chart"
    );
    tests::signal(&child, libc::SIGINT);
    assert!(child.wait().unwrap().success(), "{}", log.text());
    // `stampede report DIR` rebuilds live.html from events.ndjson, byte for byte.
    let written = std::fs::read(out.join("live.html")).unwrap();
    std::fs::remove_file(out.join("live.html")).unwrap();
    let o = tests::stampede(&["report", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains("live.html"), "{}", text(&o.stdout));
    assert_eq!(std::fs::read(out.join("live.html")).unwrap(), written);
    // A damaged events.ndjson is named, line and all.
    std::fs::write(out.join("events.ndjson"), "{\"id\": 1}\n").unwrap();
    let o = tests::stampede(&["report", out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o.stderr).contains("events.ndjson line 1:"),
        "{}",
        text(&o.stderr)
    );
}

#[test]
fn an_authority_form_request_while_the_page_stays_is_a_404_not_a_panic() {
    let serve = ServeProcess::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let url = serve.url();
    let (mut child, log, addr) = live_run(
        &[
            "run",
            &url,
            "--steps",
            "50",
            "--step-duration",
            "1s",
            "--live-keep",
            "20s",
        ],
        "127.0.0.1:0",
        dir.path(),
        None,
    );
    assert!(
        log.wait_for("the live page stays at", Duration::from_secs(60)),
        "{}",
        log.text()
    );
    // While it stays the report is served by its name: a target without a path ("" or "*") once
    // panicked its connection's task there, answering nothing.
    for _ in 0..3 {
        let (code, _, _) = request(addr, &format!("GET {addr} HTTP/1.1\r\n"));
        assert_eq!(code, 404);
    }
    assert_eq!(request(addr, "GET * HTTP/1.1\r\n").0, 404);
    assert_eq!(request(addr, "OPTIONS * HTTP/1.1\r\n").0, 405);
    assert_eq!(get(addr, "/report.html").0, 200);
    std::thread::sleep(Duration::from_millis(300));
    assert!(!log.text().contains("panicked"), "{}", log.text());
    tests::signal(&child, libc::SIGINT);
    assert!(child.wait().unwrap().success(), "{}", log.text());
}

/// What a crowd from `addrs` did: connections that sent nothing (`idle`, held and reopened as the
/// server closes them) and `/events` asked without the token and never read (`events`).
struct Crowd {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<(usize, Vec<u8>)>,
}

impl Crowd {
    /// `per` connections from each address of `idle` and of `events`, for at most `limit`.
    fn start(addr: SocketAddr, idle: &[u8], events: &[u8], per: usize, limit: Duration) -> Crowd {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (idle, events) = (idle.to_vec(), events.to_vec());
        let quit = stop.clone();
        let thread = std::thread::spawn(move || {
            let open = |from: u8, ask: bool| {
                let s = connect_from([127, 0, 0, from], addr)?;
                if ask {
                    let mut w: &TcpStream = &s;
                    let _ = write!(w, "GET /events HTTP/1.1\r\nHost: {addr}\r\n\r\n");
                }
                Some((from, ask, s))
            };
            let mut held: Vec<(u8, bool, TcpStream)> = Vec::new();
            for &from in &idle {
                held.extend((0..per).filter_map(|_| open(from, false)));
            }
            for &from in &events {
                held.extend((0..per).filter_map(|_| open(from, true)));
            }
            let (mut reopened, mut heard) = (0, Vec::new());
            let began = Instant::now();
            while !quit.load(std::sync::atomic::Ordering::Relaxed) && began.elapsed() < limit {
                for slot in held.iter_mut() {
                    slot.2.set_nonblocking(true).unwrap();
                    let mut b = [0u8; 4096];
                    let gone = match slot.2.read(&mut b) {
                        Ok(0) => true,
                        // Only an /events asker hears anything: what it heard is kept.
                        Ok(n) => {
                            heard.extend_from_slice(&b[..n]);
                            false
                        }
                        Err(e) => e.kind() != std::io::ErrorKind::WouldBlock,
                    };
                    if gone && let Some(again) = open(slot.0, slot.1) {
                        *slot = again;
                        reopened += 1;
                    }
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            (reopened, heard)
        });
        Crowd { stop, thread }
    }

    /// Connections reopened, and what the /events askers heard.
    fn stop(self) -> (usize, Vec<u8>) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.thread.join().unwrap()
    }
}

#[test]
fn idle_crowds_scrape_floods_and_slow_readers_leave_a_token_holder_served() {
    let serve = ServeProcess::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let url = serve.url();
    let (mut child, log, addr) = live_run(
        &[
            "run",
            &url,
            "--steps",
            "50,60",
            "--step-duration",
            "8s",
            "--live-keep",
            "20s",
        ],
        "0.0.0.0:0",
        dir.path(),
        Some("s3cret token"),
    );
    let said = log.text();
    let token = said[said.find("?token=").expect("the page's token said") + 7..]
        .split_whitespace()
        .next()
        .unwrap()
        .to_string();
    // Ten token holders' streams never read, dropped together: said in a line a second, not ten.
    let slow: Vec<TcpStream> = (0..10).map(|_| slow_reader(addr, &token)).collect();

    // 128 connections that send nothing from 16 addresses and 80 /events asked without the token
    // from 10 more, reopened as they are closed: once they held every seat (503 for everyone).
    let idle: Vec<u8> = (2..18).collect();
    let events: Vec<u8> = (20..30).collect();
    let crowd = Crowd::start(addr, &idle, &events, 8, Duration::from_secs(20));
    std::thread::sleep(Duration::from_secs(1));
    // 0: closed without an answer.
    let answer = |head: String| std::panic::catch_unwind(|| request(addr, &head).0).unwrap_or(0);
    let mut answers = Vec::new();
    for _ in 0..10 {
        answers.push(answer(format!("GET /?token={token} HTTP/1.1\r\n")));
        answers.push(answer(format!(
            "GET /metrics HTTP/1.1\r\nAuthorization: Bearer {token}\r\n"
        )));
        std::thread::sleep(Duration::from_millis(300));
    }
    // Past PROVE_WITHIN (3 s) every idle one has been closed at least once.
    std::thread::sleep(Duration::from_secs(2));
    let (reopened, heard) = crowd.stop();
    let not_ok = answers.iter().filter(|&&c| c != 200).count();
    assert_eq!(
        not_ok, 0,
        "a token holder's answers under the crowd: {answers:?}"
    );
    assert!(
        reopened >= 128,
        "idle connections closed unproven: {reopened} reopened"
    );
    let heard = String::from_utf8_lossy(&heard);
    assert!(
        !heard.contains("event:") && !heard.contains("HTTP/1.1 200"),
        "the askers without the token got nothing of the run: {heard}"
    );

    // A scrape flood from one address: refused beyond its allowance, closed at the door while
    // the allowance is spent (0: closed unanswered), served again after.
    let flood: Vec<u16> = (0..60)
        .map(|_| {
            let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            let _ = write!(
                s,
                "GET /metrics HTTP/1.1\r\nAuthorization: Bearer {token}\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
            );
            let mut raw = Vec::new();
            let _ = s.read_to_end(&mut raw);
            let head = String::from_utf8_lossy(&raw).into_owned();
            head.split_whitespace()
                .nth(1)
                .and_then(|c| c.parse().ok())
                .unwrap_or(0)
        })
        .collect();
    // (A request a connection spends the allowance at the door; a kept-alive flooder reads its
    // 429 first, as bench/scrape-flood.sh's wrk does.)
    let served = flood.iter().filter(|&&c| c == 200).count();
    assert!(served <= 20, "200s in a flood of 60: {flood:?}");
    assert!(
        flood.contains(&0),
        "closed at the door once spent: {flood:?}"
    );
    assert!(
        flood.iter().all(|&c| c == 200 || c == 429 || c == 0),
        "{flood:?}"
    );
    std::thread::sleep(Duration::from_secs(1));
    let metrics = format!("GET /metrics HTTP/1.1\r\nAuthorization: Bearer {token}\r\n");
    assert_eq!(request(addr, &metrics).0, 200);

    // Wrong tokens: a line a second at most, the next one counting those not said.
    for _ in 0..3 {
        assert_eq!(get(addr, "/?token=wrong").0, 401);
    }
    std::thread::sleep(Duration::from_millis(1100));
    assert_eq!(get(addr, "/?token=wrong").0, 401);
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        log.text()
            .lines()
            .any(|l| l.contains("without the live page's token") && l.contains("unlogged=")),
        "{}",
        log.text()
    );

    assert!(
        log.wait_for("the live page stays at", Duration::from_secs(60)),
        "{}",
        log.text()
    );
    let dropped = log
        .text()
        .lines()
        .filter(|l| l.contains("read nothing"))
        .count();
    assert!(
        (1..=3).contains(&dropped),
        "10 slow readers said in {dropped} lines: {}",
        log.text()
    );
    drop(slow);
    let run = tests::run_json(dir.path());
    assert_eq!(run["status"], "completed", "the run went on");
    tests::signal(&child, libc::SIGINT);
    assert!(child.wait().unwrap().success(), "{}", log.text());
}

#[test]
fn live_keep_held_back_the_table_and_the_answer_until_the_page_went() {
    let target = ServeProcess::start(&[]);
    let out = tempfile::tempdir().unwrap();
    let mut child = Command::new(bin("stampede"))
        .args([
            "run",
            &target.url(),
            "--steps",
            "10",
            "--step-duration",
            "500ms",
        ])
        .args(["--live", "127.0.0.1:0", "--live-keep", "60s", "--out"])
        .arg(out.path())
        .env_remove("STAMPEDE_TOKEN")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let log = Lines::of(&mut child);
    let mut stdout = child.stdout.take().unwrap();
    let said = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let into = said.clone();
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = stdout.read(&mut buf) {
            if n == 0 {
                break;
            }
            into.lock()
                .unwrap()
                .push_str(&String::from_utf8_lossy(&buf[..n]));
        }
    });
    // The answer comes while the page stays, not 60 s later.
    wait_until("the answer on stdout", Duration::from_secs(30), || {
        said.lock().unwrap().contains("answer:")
    });
    assert!(
        log.wait_for("the live page stays at", Duration::from_secs(10)),
        "{}",
        log.text()
    );
    assert!(child.try_wait().unwrap().is_none(), "the page went early");
    // Ctrl-C ends the page's stay; the run's exit code is its own.
    tests::signal(&child, libc::SIGINT);
    assert_eq!(child.wait().unwrap().code(), Some(0), "{}", log.text());
    let text = said.lock().unwrap().clone();
    assert!(text.contains("results: "), "{text}");
}
