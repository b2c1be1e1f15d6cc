//! `stampede history` as a nightly job uses it: three runs against the reference target, each
//! with a latency the test injects that grows run by run and a commit of its own, then the history
//! of them. The TSV is read by Python's `csv` module (a reader we did not write): rows in time
//! order, p99 rising, every commit named. The trend page is read in Chromium after its script ran:
//! a point per run on each chart, a table row per run, no script error. And the refusals: a DIR
//! without a run.json, a run.json of an older schema, each one line and exit 2.
use std::path::Path;
use std::process::{Command, Stdio};

use tests::{ServeProcess, bin, browser, stampede, text};

/// The three runs: their commit and the delay the target adds to every reply, in the order they
/// are made. Far enough apart that a busy machine's noise cannot reorder their p99.
const RUNS: [(&str, &str, f64); 3] = [
    ("1111111111111111111111111111111111111111", "5ms", 5.0),
    ("2222222222222222222222222222222222222222", "80ms", 80.0),
    ("3333333333333333333333333333333333333333", "300ms", 300.0),
];

/// Reads the TSV with Python's csv module; prints the rows as JSON, after checking in Python that
/// they are in time order.
const READ_TSV: &str = r#"
import csv, json, sys
from datetime import datetime
with open(sys.argv[1], newline="") as f:
    rows = list(csv.DictReader(f, delimiter="\t"))
times = [datetime.fromisoformat(r["started_at"].replace("Z", "+00:00")) for r in rows]
assert times == sorted(times), times
json.dump(rows, sys.stdout)
"#;

/// One run against a target that delays every reply by `delay`, into `out`, told `commit` by
/// `$GITHUB_SHA` when `by_env`, else by `--commit`.
fn one_run(out: &Path, label: &str, commit: &str, delay: &str, by_env: bool) {
    let target = ServeProcess::start(&["--delay", delay]);
    let url = target.url();
    let mut cmd = Command::new(bin("stampede"));
    cmd.args([
        "run",
        &url,
        "--model",
        "requests",
        "--steps",
        "50,100",
        "--step-duration",
        "1s",
        "--label",
        label,
        "--quiet",
        "--out",
        out.to_str().unwrap(),
    ])
    .env_remove("GITHUB_SHA")
    .stdin(Stdio::null());
    match by_env {
        true => cmd.env("GITHUB_SHA", commit),
        false => cmd.args(["--commit", commit]),
    };
    let o = cmd.output().expect("stampede runs");
    assert!(o.status.success(), "run {label}: {}", text(&o.stderr));
}

fn python_rows(tsv: &Path) -> Option<Vec<serde_json::Value>> {
    let o = match Command::new("python3")
        .args(["-c", READ_TSV, tsv.to_str().unwrap()])
        .output()
    {
        Ok(o) => o,
        Err(e) if std::env::var("CI").as_deref() != Ok("true") => {
            eprintln!("SKIPPED the csv reader: python3 could not be run: {e}");
            return None;
        }
        Err(e) => panic!("python3: {e}"),
    };
    assert!(o.status.success(), "{}", text(&o.stderr));
    Some(serde_json::from_slice(&o.stdout).unwrap())
}

#[test]
fn a_server_that_gets_slower_across_commits_shows_in_the_history() {
    let root = tempfile::tempdir().unwrap();
    let nightly = root.path().join("nightly");
    // Named so that their paths sort against the order they ran in: the history sorts by time.
    let dirs = ["c-night", "b-night", "a-night"];
    for (i, (commit, delay, _)) in RUNS.iter().enumerate() {
        one_run(&nightly.join(dirs[i]), dirs[i], commit, delay, i == 2);
    }
    let tsv = root.path().join("history.tsv");
    let html = root.path().join("history.html");
    let o = stampede(&[
        "history",
        nightly.to_str().unwrap(),
        "--at",
        "100",
        "--tsv",
        tsv.to_str().unwrap(),
        "--html",
        html.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(text(&o.stdout), "", "the TSV went to its file");
    let said = text(&o.stderr);
    assert!(
        said.contains("3 runs;") && said.contains("offered 100"),
        "{said}"
    );

    // Without --tsv the same TSV is stdout.
    let o = stampede(&["history", nightly.to_str().unwrap(), "--at", "100"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let written = std::fs::read_to_string(&tsv).unwrap();
    assert_eq!(text(&o.stdout), written);

    let p99_col = results::quantity::P99_MS.key;
    if let Some(rows) = python_rows(&tsv) {
        assert_eq!(rows.len(), 3, "{rows:#?}");
        let commits: Vec<&str> = rows.iter().map(|r| r["commit"].as_str().unwrap()).collect();
        assert_eq!(
            commits,
            RUNS.map(|r| r.0),
            "commits in the order the runs were made"
        );
        let labels: Vec<&str> = rows.iter().map(|r| r["label"].as_str().unwrap()).collect();
        assert_eq!(labels, dirs);
        let p99: Vec<f64> = rows
            .iter()
            .map(|r| r[p99_col].as_str().unwrap().parse().unwrap())
            .collect();
        for (i, (_, _, delay_ms)) in RUNS.iter().enumerate() {
            assert!(
                p99[i] >= *delay_ms,
                "p99 {p99:?} under the delay {delay_ms} ms"
            );
        }
        assert!(p99[0] < p99[1] && p99[1] < p99[2], "p99 rises: {p99:?}");
        for r in &rows {
            assert_eq!(r["at_value"], "100", "{r:?}");
            assert_eq!(r["at_step"], "2", "{r:?}");
            // A busy machine may leave the generator behind on a step: then the row says so.
            let untrusted: u64 = r["untrusted_steps"].as_str().unwrap().parse().unwrap();
            let trust = if untrusted > 0 {
                "untrusted"
            } else {
                "trusted"
            };
            assert_eq!(r["trust"], trust, "{r:?}");
            assert!(
                r["target"]
                    .as_str()
                    .unwrap()
                    .starts_with("http://127.0.0.1:")
            );
        }
    }

    let Some(chromium) =
        browser::available("a_server_that_gets_slower_across_commits_shows_in_the_history")
    else {
        return;
    };
    let page = browser::load(&chromium, &html).unwrap_or_else(|e| panic!("{e}"));
    let dom = browser::assert_clean(&page);
    let data = browser::embedded_data(&dom);
    assert_eq!(data["schema"], "stampede.history-data/1");
    assert_eq!(data["at"]["rate"], 100.0);
    let charts = browser::charts(&dom);
    let names: Vec<&str> = charts.iter().map(|(n, _)| *n).collect();
    assert_eq!(names, ["history-knee", "history-p99", "history-per-core"]);
    let (_, p99_chart) = charts[1];
    let points = browser::assert_drawn("history-p99", p99_chart);
    assert_eq!(
        points.iter().map(|p| p.0).collect::<Vec<_>>(),
        [1.0, 2.0, 3.0]
    );
    let cells: Vec<f64> = written
        .lines()
        .skip(1)
        .map(|l| {
            let head: Vec<&str> = written.lines().next().unwrap().split('\t').collect();
            let at = head.iter().position(|c| *c == p99_col).unwrap();
            l.split('\t').nth(at).unwrap().parse().unwrap()
        })
        .collect();
    for (drawn, tsv) in points.iter().map(|p| p.1).zip(&cells) {
        assert!(
            (drawn - tsv).abs() <= tsv * 0.01,
            "{drawn} drawn, {tsv} in the TSV"
        );
    }
    // Each point is named by its run's commit.
    let titles: Vec<String> = p99_chart.all("title").iter().map(|t| t.text()).collect();
    for (i, (commit, _, _)) in RUNS.iter().enumerate() {
        assert!(
            titles
                .iter()
                .any(|t| t.starts_with(&commit[..12]) && t.contains(dirs[i])),
            "{titles:?}"
        );
    }
    // No monitor watched these runs: the per-core chart is empty and says why.
    assert!(charts[2].1.has_class("empty"));
    let table = dom.by_id("history").expect("the #history table");
    let rows: Vec<_> = table
        .all("tr")
        .into_iter()
        .filter(|r| r.attr("data-run").is_some())
        .collect();
    let commits: Vec<&str> = rows
        .iter()
        .map(|r| r.attr("data-commit").unwrap())
        .collect();
    assert_eq!(commits, RUNS.map(|r| r.0));
    for (row, tsv_line) in rows.iter().zip(written.lines().skip(1)) {
        let tds: Vec<String> = row
            .all("td")
            .iter()
            .filter(|td| td.attr("data-col").is_some())
            .map(|td| td.text())
            .collect();
        assert_eq!(tds.join("\t"), tsv_line);
    }
}

#[test]
fn a_dir_without_a_run_and_an_older_schema_are_each_one_line_and_exit_2() {
    let root = tempfile::tempdir().unwrap();
    let empty = root.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let old = root.path().join("old");
    std::fs::create_dir(&old).unwrap();
    let golden = include_str!("../../results/tests/golden/run.json");
    std::fs::write(
        old.join("run.json"),
        golden.replace(results::step::RUN_SCHEMA, "stampede.run/1"),
    )
    .unwrap();
    let good = root.path().join("good");
    std::fs::create_dir(&good).unwrap();
    std::fs::write(good.join("run.json"), golden).unwrap();

    let o = stampede(&[
        "history",
        empty.to_str().unwrap(),
        old.to_str().unwrap(),
        good.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(text(&o.stdout), "", "nothing written when a run is refused");
    let lines: Vec<String> = text(&o.stderr).lines().map(str::to_string).collect();
    assert_eq!(lines.len(), 3, "{lines:#?}");
    assert!(lines[0].contains("empty: no run.json there"), "{lines:#?}");
    assert!(lines[1].contains("stampede.run/1"), "{lines:#?}");
    assert!(
        lines[2].contains("--skip-unreadable"),
        "what to do: {lines:#?}"
    );

    // Asked to, the unreadable run is skipped with a warning and the good one is the history.
    let o = stampede(&[
        "history",
        old.to_str().unwrap(),
        good.to_str().unwrap(),
        "--skip-unreadable",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(text(&o.stderr).contains("skipped: "), "{}", text(&o.stderr));
    assert_eq!(text(&o.stdout).lines().count(), 2);

    let o = stampede(&["history", good.to_str().unwrap(), "--at", "fast"]);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(text(&o.stderr).lines().count(), 1, "{}", text(&o.stderr));
}
