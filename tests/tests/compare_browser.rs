//! compare.html opened in a real browser (Chromium headless): its script runs without an error,
//! every chart of the page contract is drawn with a line per run at the joined step values, and the
//! delta table reads as compare.json says, cell for cell.
use std::path::Path;

use tests::browser;
use tests::dom::El;
use tests::{stampede, text};

const GOLDEN: &str = include_str!("../../results/tests/golden/run.json");

/// A results directory under `root` holding the golden run (6 steps, 100..600 req/s), changed by
/// `change`.
fn results(root: &Path, name: &str, change: impl FnOnce(&mut serde_json::Value)) -> String {
    let dir = root.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    let mut run: serde_json::Value = serde_json::from_str(GOLDEN).unwrap();
    change(&mut run);
    std::fs::write(dir.join("run.json"), run.to_string()).unwrap();
    dir.display().to_string()
}

#[test]
fn a_comparison_runs_in_chromium_and_its_table_reads_as_compare_json() {
    let Some(chromium) =
        browser::available("a_comparison_runs_in_chromium_and_its_table_reads_as_compare_json")
    else {
        return;
    };
    let root = tempfile::tempdir().unwrap();
    let nginx = results(root.path(), "nginx", |_| {});
    // app: p99 doubled at 300 req/s, an untrusted step at 200, a censored p99 at 500, no 600.
    let app = results(root.path(), "app", |run| {
        let steps = run["steps"].as_array_mut().unwrap();
        steps[2]["latency_ms"]["p99"] = serde_json::json!(3.598);
        steps[1]["trust"] = serde_json::json!("invalid");
        steps[4]["latency_ms"]["p99"] = serde_json::json!(2000.0);
        steps[4]["latency_ms"]["censored"] = serde_json::json!(true);
        steps[4]["latency_ms"]["lower_bound"] = serde_json::json!(["mean", "p99", "p999", "max"]);
        steps.pop();
    });
    let html = root.path().join("compare.html");
    let json = root.path().join("compare.json");
    let o = stampede(&[
        "compare",
        &nginx,
        &app,
        "-o",
        html.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let compared: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();

    let page = browser::load(&chromium, &html).unwrap_or_else(|e| panic!("{e}"));
    let dom = browser::assert_clean(&page);
    assert_eq!(
        browser::embedded_data(&dom),
        compared,
        "the page embeds compare.json"
    );

    let values: Vec<f64> = compared["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["value"].as_f64().unwrap())
        .collect();
    assert_eq!(values, [100.0, 200.0, 300.0, 400.0, 500.0, 600.0]);
    let charts = browser::charts(&dom);
    let names: Vec<&str> = charts.iter().map(|(n, _)| *n).collect();
    assert_eq!(
        names,
        report::COMPARE_CHARTS,
        "the comparison's charts, in order"
    );
    for (name, chart) in charts {
        for (x, y) in browser::assert_drawn(name, chart) {
            assert!(
                values.contains(&x),
                "{name} draws ({x}, {y}) at no step value"
            );
        }
        let series: Vec<&str> = chart
            .descendants()
            .into_iter()
            .filter(|e| e.name() == "g" && e.attr("data-n").is_some())
            .filter_map(|e| e.attr("data-n"))
            .collect();
        assert!(
            series.contains(&"nginx") && series.contains(&"app"),
            "{name}: {series:?}"
        );
    }

    // The ranking first: a row per run in compare.json's order (nginx kept up further than app).
    let ranking = dom.by_id("ranking").expect("<table id=\"ranking\">");
    let ranked: Vec<(Option<&str>, Option<&str>)> = ranking
        .all("tr")
        .into_iter()
        .filter(|tr| tr.attr("data-run").is_some())
        .map(|tr| (tr.attr("data-rank"), tr.attr("data-run")))
        .collect();
    let want: Vec<Option<&str>> = compared["ranking"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["label"].as_str())
        .collect();
    assert_eq!(ranked.iter().map(|r| r.1).collect::<Vec<_>>(), want);
    assert_eq!(ranked[0], (Some("1"), Some("nginx")), "{ranked:?}");

    // The table: a row per step value and run, each cell's class the one compare.json gives it.
    let table = dom.by_id("compare").expect("<table id=\"compare\">");
    let rows: Vec<El> = table
        .all("tr")
        .into_iter()
        .filter(|tr| tr.attr("data-run").is_some())
        .collect();
    assert_eq!(rows.len(), 2 * values.len());
    let metrics: Vec<&str> = compared["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap())
        .collect();
    let mut checked = 0;
    for (r, row) in compared["steps"].as_array().unwrap().iter().enumerate() {
        for (i, label) in ["nginx", "app"].iter().enumerate() {
            let tr = rows[2 * r + i];
            assert_eq!(tr.attr("data-run"), Some(*label));
            let Some(cells) = row["runs"][i]["cells"].as_array() else {
                assert!(tr.text().contains("no such step"), "{}", tr.text());
                continue;
            };
            let tds: Vec<El> = tr
                .all("td")
                .into_iter()
                .filter(|td| td.attr("data-metric").is_some())
                .collect();
            for ((metric, cell), td) in metrics.iter().zip(cells).zip(tds) {
                assert_eq!(td.attr("data-metric"), Some(*metric));
                assert_eq!(
                    td.attr("data-class"),
                    cell["class"].as_str(),
                    "{label} {metric}"
                );
                checked += 1;
            }
        }
    }
    assert_eq!(checked, 11 * metrics.len());
    let cell = |value: &str, run: &str, metric: &str| -> (String, Option<String>) {
        let tr = rows
            .iter()
            .find(|tr| tr.attr("data-value") == Some(value) && tr.attr("data-run") == Some(run))
            .unwrap();
        let td = tr
            .all("td")
            .into_iter()
            .find(|td| td.attr("data-metric") == Some(metric))
            .unwrap();
        (td.text(), td.attr("data-regression").map(str::to_string))
    };
    assert_eq!(
        cell("300", "app", "p99_ms"),
        ("3.6 ms+100.0%".into(), Some("1".into()))
    );
    // Worse, but not trusted: marked, never a regression.
    let (said, regression) = cell("200", "app", "p50_ms");
    assert!(said.starts_with("1.4 ms") && regression.is_none(), "{said}");
    // A censored p99 reads as a lower bound, worse than an exact one for certain.
    assert_eq!(
        cell("500", "app", "p99_ms"),
        ("≥2.0 s+698.8%".into(), Some("1".into()))
    );
}
