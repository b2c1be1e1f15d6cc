//! `stampede compare` end to end: two real runs against targets that differ only in their `--delay`,
//! compared; compare.tsv holds each run's steps.tsv values under its label, compare.json and
//! compare.html are written, and `--fail-on-regression` fails the slower run as the candidate only.
//! Of a named mix: a `--regression` gate of the one name a server stalled fails, another name's holds;
//! and the request that broke first at the knee is said on stdout, in report.html and the ranking.
use std::collections::BTreeMap;
use std::path::Path;

use tests::{ServeProcess, run_ok, stampede, text};

/// A TSV file as rows of (column name → cell); of compare.tsv, the steps (the ranking follows a
/// blank line, in `#` lines).
fn table(path: &Path) -> Vec<BTreeMap<String, String>> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut lines = text.lines().take_while(|l| !l.is_empty());
    let header: Vec<&str> = lines.next().expect("a header").split('\t').collect();
    lines
        .map(|l| {
            let cells: Vec<&str> = l.split('\t').collect();
            assert_eq!(cells.len(), header.len(), "{l}");
            header
                .iter()
                .zip(cells)
                .map(|(h, c)| (h.to_string(), c.to_string()))
                .collect()
        })
        .collect()
}

/// A 2-step requests-model ramp of 1 s steps against a target delaying every reply by `delay`.
fn ramp(delay: &str) -> (ServeProcess, tests::Ran) {
    let target = ServeProcess::start(&["--delay", delay]);
    let url = target.url();
    let ran = run_ok(&[
        &url,
        "--model",
        "requests",
        "--steps",
        "50,100",
        "--step-duration",
        "1s",
    ]);
    (target, ran)
}

#[test]
fn two_runs_compared_on_their_steps_and_the_slower_one_fails_as_candidate() {
    let (_fast_target, fast) = ramp("1ms");
    let (_slow_target, slow) = ramp("200ms");
    let out = tempfile::tempdir().unwrap();
    let file = |name: &str| out.path().join(name).to_str().unwrap().to_string();
    let (html, tsv, json) = (
        file("compare.html"),
        file("compare.tsv"),
        file("compare.json"),
    );
    let fast_dir = fast.dir.path().to_str().unwrap();
    let slow_dir = slow.dir.path().to_str().unwrap();
    let o = stampede(&[
        "compare", fast_dir, slow_dir, "--label", "fast", "--label", "slow", "-o", &html, "--tsv",
        &tsv, "--json", &json,
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let said = text(&o.stdout);
    assert!(said.contains("fast (baseline): kept up to"), "{said}");
    let step_1 = said
        .lines()
        .find(|l| l.trim_start().starts_with("slow at 50 req/s (step 1): "))
        .unwrap_or_else(|| panic!("{said}"));
    assert!(
        step_1.contains("p99_ms") && step_1.contains("p50_ms"),
        "{step_1}"
    );

    // compare.tsv: dem_req_rate, then each run's steps.tsv columns under its label, same values.
    let compared = table(Path::new(&tsv));
    assert_eq!(compared.len(), 2);
    for (label, ran) in [("fast", &fast), ("slow", &slow)] {
        let own = table(&ran.dir.path().join("steps.tsv"));
        assert_eq!(own.len(), 2);
        for (row, steps_row) in compared.iter().zip(&own) {
            assert_eq!(row["dem_req_rate"], steps_row["dem_req_rate"]);
            for (column, value) in steps_row.iter().filter(|(c, _)| *c != "dem_req_rate") {
                let bare = column.strip_suffix("_127.0.0.1").unwrap_or(column);
                let name = format!("{bare}_{label}");
                assert_eq!(row.get(&name), Some(value), "{name}");
            }
        }
    }
    let header: Vec<&String> = compared[0].keys().collect();
    assert!(
        header.iter().any(|h| *h == "req_rate_fast") && header.iter().any(|h| *h == "p99_ms_slow")
    );

    // After the steps, the ranking: both kept up with both steps, fast with the lower p99 there
    // first; the same in compare.json and on stdout.
    let tsv_text = std::fs::read_to_string(&tsv).unwrap();
    let ranked: Vec<&str> = tsv_text
        .lines()
        .filter_map(|l| l.strip_prefix("# "))
        .skip(2)
        .collect();
    assert_eq!(ranked.len(), 2, "{tsv_text}");
    assert!(
        ranked[0].starts_with("1\tfast\t") && ranked[1].starts_with("2\tslow\t"),
        "{tsv_text}"
    );
    let last: Vec<&str> = said.lines().rev().take(2).collect();
    assert!(
        last[1].starts_with("1  fast") && last[0].starts_with("2  slow"),
        "stdout ends with the ranking: {said}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(json["schema"], "stampede.compare/2");
    assert_eq!(json["baseline"], "fast");
    assert_eq!(json["ranking"][0]["label"], "fast");
    assert_eq!(json["ranking"][1]["rank"], 2);
    assert!(!json["regressions"].as_array().unwrap().is_empty());
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("<table id=\"compare\">") && page.contains("data-regression=\"1\""));

    // CI: the slower run as the candidate fails, naming where; the other way round it passes.
    let o = stampede(&[
        "compare",
        fast_dir,
        slow_dir,
        "--label",
        "fast",
        "--label",
        "slow",
        "-o",
        &html,
        "--fail-on-regression",
    ]);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o.stderr));
    let err = text(&o.stderr);
    assert!(
        err.contains("--fail-on-regression") && err.contains("slow at 100 req/s (step 2): "),
        "{err}"
    );
    let o = stampede(&[
        "compare",
        slow_dir,
        fast_dir,
        "--label",
        "slow",
        "--label",
        "fast",
        "-o",
        &html,
        "--fail-on-regression",
    ]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}{}",
        text(&o.stdout),
        text(&o.stderr)
    );
    assert!(text(&o.stdout).contains("no trusted step got worse than slow's"));
}

#[test]
fn a_run_that_cannot_be_read_or_a_bad_threshold_is_refused_in_words() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    std::fs::create_dir_all(&a).unwrap();
    std::fs::create_dir_all(&b).unwrap();
    std::fs::write(a.join("run.json"), "{\"schema\": \"stampede.run/3\"}").unwrap();
    let html = dir.path().join("compare.html");
    let args = |x: &Path, y: &Path| {
        vec![
            "compare".to_string(),
            x.display().to_string(),
            y.display().to_string(),
            "-o".into(),
            html.display().to_string(),
        ]
    };
    let o = stampede(&args(&a, &b).iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(o.status.code(), Some(2));
    let err = text(&o.stderr);
    assert!(
        err.contains(&a.join("run.json").display().to_string()) && err.contains("missing field"),
        "{err}"
    );
    let o = stampede(&["compare", "x", "y", "--threshold", "lots"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("--threshold lots: not a number"));
    assert!(!html.exists());
}

/// A copy of the `stampede.run/2` results directory kept from before run.json's schema became `/3`
/// (a demo run with its server monitor: run.json, steps.tsv, hlog/).
fn run_of_schema_2(into: &Path) -> std::path::PathBuf {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("../results/tests/fixtures/run-v2");
    let dir = into.join("v2");
    std::fs::create_dir_all(dir.join("hlog")).unwrap();
    for name in ["run.json", "steps.tsv"] {
        std::fs::copy(fixture.join(name), dir.join(name)).unwrap();
    }
    for e in std::fs::read_dir(fixture.join("hlog")).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), dir.join("hlog").join(e.file_name())).unwrap();
    }
    dir
}

#[test]
fn a_results_directory_of_schema_2_is_still_reported_and_compared() {
    let tmp = tempfile::tempdir().unwrap();
    let old = run_of_schema_2(tmp.path());
    let old_text = std::fs::read_to_string(old.join("run.json")).unwrap();
    assert!(old_text.contains("\"schema\": \"stampede.run/2\""));
    let dir = old.to_str().unwrap();

    let page = tmp.path().join("report.html");
    let o = stampede(&["report", dir, "-o", page.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(
        html.contains("stampede.report-data/1"),
        "the page and its data"
    );

    let tsv = tmp.path().join("compare.tsv");
    let o = stampede(&[
        "compare",
        dir,
        dir,
        "--label",
        "before",
        "--label",
        "again",
        "-o",
        tmp.path().join("compare.html").to_str().unwrap(),
        "--tsv",
        tsv.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let rows = table(&tsv);
    let steps = table(&old.join("steps.tsv"));
    assert_eq!(rows.len(), steps.len(), "every step of the old run, joined");
    for (row, step) in rows.iter().zip(&steps) {
        assert_eq!(row["ok_rate_before"], step["ok_rate"]);
        assert_eq!(row["ok_rate_again"], step["ok_rate"]);
    }
}

#[test]
fn the_paths_named_are_written_through_never_replaced() {
    // `-o` and `--tsv` were written to PATH.tmp and renamed over PATH: a symlink became a file, a
    // FIFO's reader got nothing, and as root `-o /dev/full` replaced the device with a page.
    let (_target, ran) = ramp("1ms");
    let run_dir = ran.dir.path().to_str().unwrap();
    let out = tempfile::tempdir().unwrap();
    let at = |name: &str| out.path().join(name);
    std::fs::write(at("page.html"), "old").unwrap();
    std::os::unix::fs::symlink(at("page.html"), at("link.html")).unwrap();
    let made = std::process::Command::new("mkfifo")
        .arg(at("pipe.tsv"))
        .status()
        .unwrap();
    assert!(made.success());
    let reader = {
        let fifo = at("pipe.tsv");
        std::thread::spawn(move || std::fs::read_to_string(fifo).unwrap())
    };
    let (link, fifo) = (at("link.html"), at("pipe.tsv"));
    // The run twice, as two labels: what is compared does not matter here, where it goes does.
    let compare = |more: &[&str]| {
        let mut args = vec!["compare", run_dir, run_dir, "--label", "a", "--label", "b"];
        args.extend_from_slice(more);
        stampede(&args)
    };
    let o = compare(&[
        "-o",
        link.to_str().unwrap(),
        "--tsv",
        fifo.to_str().unwrap(),
        "--json",
        "-",
    ]);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    let json: serde_json::Value = serde_json::from_slice(&o.stdout).expect("stdout is the JSON");
    assert_eq!(json["schema"], "stampede.compare/2");
    assert!(
        err.contains("ranking, best first:"),
        "the summary on stderr: {err}"
    );
    let tsv = reader.join().unwrap();
    assert!(tsv.starts_with("dem_req_rate\t"), "{tsv}");
    let kind = |p: &Path| std::fs::symlink_metadata(p).unwrap().file_type();
    assert!(kind(&link).is_symlink() && kind(&fifo).is_fifo());
    let page = std::fs::read_to_string(at("page.html")).unwrap();
    assert!(page.starts_with("<!DOCTYPE html>"), "{}", &page[..40]);
    assert_eq!(
        std::fs::read_dir(out.path()).unwrap().count(),
        3,
        "nothing left beside"
    );

    // `report -o` alike; /dev/full is a write error (exit 1) and stays a device.
    std::fs::write(at("page.html"), "old").unwrap();
    let o = stampede(&["report", run_dir, "-o", link.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(kind(&link).is_symlink());
    assert!(
        std::fs::read_to_string(at("page.html"))
            .unwrap()
            .starts_with("<!DOCTYPE html>")
    );
    let o = stampede(&["report", run_dir, "-o", "/dev/full"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    assert!(text(&o.stderr).contains("cannot write /dev/full: "));
    use std::os::unix::fs::FileTypeExt;
    assert!(kind(Path::new("/dev/full")).is_char_device());

    // A directory, or two files on stdout, is refused in one line before anything is written.
    let o = compare(&["-o", out.path().to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o.stderr).contains("a directory, not a file"),
        "{}",
        text(&o.stderr)
    );
    let o = stampede(&[
        "compare",
        run_dir,
        run_dir,
        "--label",
        "a",
        "--label",
        "b",
        "-o",
        "-",
        "--tsv",
        "/dev/stdout",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(o.stdout.is_empty());
    assert!(
        text(&o.stderr).contains("-o and --tsv are both - (stdout)"),
        "{}",
        text(&o.stderr)
    );
}

/// An HTTP/1.1 keep-alive server (a thread per connection) that answers `ok` to every GET, after
/// `stall` to those of `/slow`. Stops accepting when dropped.
struct PathStalling {
    addr: std::net::SocketAddr,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl PathStalling {
    fn start(stall: std::time::Duration) -> PathStalling {
        use std::sync::atomic::Ordering;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let s = stop.clone();
        std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((conn, _)) => {
                        std::thread::spawn(move || serve_stalling(conn, stall));
                    }
                    Err(_) => std::thread::sleep(std::time::Duration::from_millis(2)),
                }
            }
        });
        PathStalling { addr, stop }
    }
}

impl Drop for PathStalling {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

/// One connection's GETs, each answered `ok` (after `stall` for `/slow`), until the client closes.
fn serve_stalling(conn: std::net::TcpStream, stall: std::time::Duration) {
    use std::io::{BufRead, Write};
    conn.set_nonblocking(false).unwrap();
    conn.set_nodelay(true).unwrap();
    conn.set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    let mut reader = std::io::BufReader::new(conn.try_clone().unwrap());
    let mut writer = conn;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let slow = line.split_whitespace().nth(1) == Some("/slow");
        loop {
            let mut h = String::new();
            if reader.read_line(&mut h).unwrap_or(0) == 0 {
                return;
            }
            if h == "\r\n" {
                break;
            }
        }
        if slow {
            std::thread::sleep(stall);
        }
        if writer
            .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
            .is_err()
        {
            return;
        }
    }
}

/// A run of two equally weighted names, `fast` and `slow`, at 60 req/s for 2 s, into `out`; each
/// name's p99 (ms) from its run.json.
fn named_run(server: &PathStalling, dir: &Path, out: &str) -> BTreeMap<String, f64> {
    let plan = dir.join("plan.toml");
    let mut toml = format!(
        "url = \"http://{}/\"\nmodel = \"requests\"\nsteps = [60]\nstep_duration = \"2s\"\ntimeout = \"5s\"\n",
        server.addr
    );
    for name in ["fast", "slow"] {
        toml.push_str(&format!(
            "\n[[request]]\nname = \"{name}\"\nurl = \"/{name}\"\n"
        ));
    }
    std::fs::write(&plan, toml).unwrap();
    let out = dir.join(out);
    let o = stampede(&[
        "run",
        plan.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--quiet",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    tests::run_json(&out)["steps"][0]["per_request"]
        .as_array()
        .expect("per_request rows")
        .iter()
        .map(|r| {
            (
                r["name"].as_str().unwrap().to_string(),
                r["latency_ms"]["p99"].as_f64().unwrap(),
            )
        })
        .collect()
}

#[test]
fn a_regression_gate_of_the_name_that_got_slower_fails_and_one_of_another_name_does_not() {
    let dir = tempfile::tempdir().unwrap();
    let calm = PathStalling::start(std::time::Duration::ZERO);
    let before = named_run(&calm, dir.path(), "before");
    // A stall far above a loaded machine's p99, so 1000 % is a margin, not a coin toss.
    let stalling = PathStalling::start(std::time::Duration::from_secs(1));
    let after = named_run(&stalling, dir.path(), "after");
    eprintln!("p99 per name (ms): before {before:?}, after {after:?}");
    assert!(after["slow"] >= 1000.0, "{after:?}");
    let compare = |gate: &str| {
        let html = dir.path().join("compare.html");
        let _ = std::fs::remove_file(&html);
        let o = stampede(&[
            "compare",
            dir.path().join("before").to_str().unwrap(),
            dir.path().join("after").to_str().unwrap(),
            "-o",
            html.to_str().unwrap(),
            "--regression",
            gate,
        ]);
        (o, html.exists())
    };
    // The same gate of each name: only the stalled one breaches.
    let (o, written) = compare("p99[slow]>1000%");
    let (out, err) = (text(&o.stdout), text(&o.stderr));
    eprintln!("{out}");
    assert_eq!(o.status.code(), Some(3), "{out}\n{err}");
    assert!(written, "every file is written before exit 3");
    assert!(
        out.contains(
            "--regression p99[slow]>1000%: breached at after at 60 req/s (step 1): p99[slow] "
        ),
        "{out}"
    );
    assert!(
        err.contains("stampede: --regression p99[slow]>1000%: breached at"),
        "{err}"
    );
    let (o, _) = compare("p99[fast]>1000%");
    let out = text(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{out}\n{}", text(&o.stderr));
    assert!(
        out.contains("--regression p99[fast]>1000%: held on 1 step"),
        "{out}"
    );
    // A name neither run has is refused, and nothing is written.
    let (o, written) = compare("p99[slwo]>5%");
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert_eq!(
        err.trim_end(),
        "stampede: --regression 'p99[slwo]>5%': no run compared has a request named 'slwo' (their names: fast, slow)"
    );
    assert!(!written);
    // A gate spelt wrong: exit 2, the bad part pointed at.
    let (o, written) = compare("p99[slow]>5ms");
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert_eq!(
        err.trim_end(),
        "stampede: --regression 'p99[slow]>5ms': a regression is a relative change: write it in % (e.g. 5%) at column 12\n    p99[slow]>5ms\n               ^^"
    );
    assert!(!written);
}

#[test]
fn the_request_that_broke_first_is_said_on_stdout_in_the_report_and_in_the_ranking() {
    // A server of 300 req/s capacity under a mix of two names ramped past it: both queue, and the
    // knee names the one whose p99 rose most.
    let target = ServeProcess::start(&["--capacity", "300"]);
    let dir = tempfile::tempdir().unwrap();
    let plan = dir.path().join("plan.toml");
    std::fs::write(
        &plan,
        format!(
            "url = \"{}\"\nmodel = \"requests\"\nsteps = [100, 200, 400]\nstep_duration = \"2s\"\ntimeout = \"5s\"\n\
             \n[[request]]\nname = \"home\"\nurl = \"/home\"\n\
             \n[[request]]\nname = \"search\"\nweight = 3\nurl = \"/search\"\n",
            target.url()
        ),
    )
    .unwrap();
    let out = dir.path().join("run");
    let o = stampede(&[
        "run",
        plan.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    let said = text(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let run = tests::run_json(&out);
    let knee = &run["summary"]["knee"];
    let name = knee["request"]["name"]
        .as_str()
        .unwrap_or_else(|| panic!("a request named at the knee: {knee:#}"));
    assert!(["home", "search"].contains(&name), "{knee:#}");
    let ratio = knee["request"]["p99_ratio"].as_f64().unwrap();
    let named = if ratio >= 10.0 {
        // Whole, its thousands grouped: "×1,330".
        let digits = (ratio.round() as u64).to_string();
        let mut grouped = String::new();
        for (i, d) in digits.chars().enumerate() {
            if i > 0 && (digits.len() - i).is_multiple_of(3) {
                grouped.push(',');
            }
            grouped.push(d);
        }
        format!("{name} p99 ×{grouped}")
    } else {
        format!("{name} p99 ×{ratio:.1}")
    };
    // stdout's answer is the headline, which leads with it.
    let answer = said
        .lines()
        .find(|l| l.starts_with("answer: "))
        .unwrap_or_else(|| panic!("{said}"));
    assert!(
        answer.contains(&format!("broke at 400: {named}")),
        "{answer}"
    );
    // report.html: the knee's label on the charts, and the Requests section's lead.
    let report = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(
        report.contains(&format!(">knee 400: latency, {named}</text>")),
        "the knee's label names {named}"
    );
    assert!(
        report.contains(&format!(
            "<p class=\"knee-request\" data-request=\"{name}\">Broke first at the knee (400 req/s): {name}&#39;s p99 rose "
        )),
        "the section's lead names {name}"
    );
    // compare's ranking: its sentence in compare.json, its cause on stdout.
    let json = dir.path().join("compare.json");
    let o = stampede(&[
        "compare",
        out.to_str().unwrap(),
        out.to_str().unwrap(),
        "--label",
        "a",
        "--label",
        "b",
        "-o",
        dir.path().join("compare.html").to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ]);
    let said = text(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let compared: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let sentence = compared["ranking"][0]["sentence"].as_str().unwrap();
    assert!(
        sentence.starts_with(&format!("knee at 400 req/s (latency; {named})")),
        "{sentence}"
    );
    // The cause column: the causes that held (latency, perhaps a plateau too), then the request.
    assert!(said.contains(&format!("; {named}  ")), "{said}");
}
