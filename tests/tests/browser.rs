//! A run's report.html opened in a real browser (Chromium headless): its script runs without an
//! error, every chart it says it draws is drawn, the steps table shows steps.tsv's numbers, and an
//! agent's name is text wherever the page or its script writes it.
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use tests::browser::{self, Loaded};
use tests::dom::{Dom, El};
use tests::{ServeProcess, bin, run_ok, text};

/// The charts whose x is not the step value: time in the run, a percentile, a probe's number.
const X_NOT_STEP: [&str; 3] = ["timeline", "distribution", "search"];

/// The report crate's fixture search (a dozen probes and their answer), to open its page here.
#[path = "../../report/tests/fixture/mod.rs"]
#[allow(dead_code)]
mod fixture;

/// What every report must show in a browser, whatever its run: a clean page (see
/// [`browser::assert_clean`]) with the charts of [`report::RUN_CHARTS`] in order (and, when a
/// monitor's columns are in the data, [`report::RUN_MONITOR_CHARTS`] after `server`; a capacity
/// search's, with its `role` column, [`report::RUN_SEARCH_CHARTS`] first), each drawn or
/// saying why not, the points of those against the offered load at the run's step values. Returns
/// the parsed DOM and the embedded data for the caller's own questions.
fn assert_sound_page(page: &Loaded) -> (Dom, serde_json::Value) {
    let dom = browser::assert_clean(page);
    let data = browser::embedded_data(&dom);
    let steps: Vec<f64> = data["steps"]["step_value"]
        .as_array()
        .expect("the steps' step_value column")
        .iter()
        .map(|v| v.as_f64().expect("a step value"))
        .collect();
    let charts = browser::charts(&dom);
    let names: Vec<&str> = charts.iter().map(|(name, _)| *name).collect();
    let mut want = report::RUN_CHARTS.to_vec();
    if data["steps"].get("role").is_some() {
        want.splice(0..0, report::RUN_SEARCH_CHARTS);
    }
    let monitored = data["steps"]
        .as_object()
        .is_some_and(|cols| cols.keys().any(|c| c.starts_with("srv_cpu_pct_")));
    if monitored {
        let server = want.iter().position(|n| *n == "server").unwrap();
        want.splice(server + 1..server + 1, report::RUN_MONITOR_CHARTS);
    }
    // A named mix's section, right after `status`.
    if dom.by_id("requests").is_some() {
        let status = want.iter().position(|n| *n == "status").unwrap();
        want.splice(status + 1..status + 1, report::RUN_REQUEST_CHARTS);
    }
    assert_eq!(names, want, "the report's charts, in order");
    for (name, chart) in charts {
        let points = browser::assert_drawn(name, chart);
        if !X_NOT_STEP.contains(&name) {
            for (x, y) in points {
                assert!(
                    steps.contains(&x),
                    "chart {name} draws ({x}, {y}) at no step's value: {steps:?}"
                );
            }
        }
    }
    (dom, data)
}

/// The `#steps` table as (its header cells' `data-col`, rows of cells paired with the header by
/// place). A row must have a cell for each column, no more.
fn steps_table(dom: &Dom) -> (Vec<String>, Vec<Vec<(String, String)>>) {
    let table = dom.by_id("steps").expect("a <table id=\"steps\">");
    let header: Vec<String> = table
        .all("th")
        .iter()
        .map(|th| {
            let col = th.attr("data-col").expect("a <th data-col>");
            assert_eq!(th.text(), col, "a header cell shows its column's name");
            col.to_string()
        })
        .collect();
    let rows = table
        .all("tr")
        .iter()
        .filter(|tr| !tr.all("td").is_empty())
        .map(|tr| {
            let cells = tr.all("td");
            assert_eq!(cells.len(), header.len(), "a row has a cell per column");
            header
                .iter()
                .cloned()
                .zip(cells.iter().map(El::text))
                .collect()
        })
        .collect();
    (header, rows)
}

#[test]
fn a_real_ramps_report_runs_in_chromium_and_shows_steps_tsv() {
    let Some(chromium) =
        browser::available("a_real_ramps_report_runs_in_chromium_and_shows_steps_tsv")
    else {
        return;
    };
    // A knee at 150 req/s inside the ramp, and a timeout shorter than the queue the last step
    // builds, so every chart has something to draw: latency rising, the served rate flattening,
    // failures (client-timeout).
    let target = ServeProcess::start(&["--delay", "1ms", "--capacity", "150"]);
    let ran = run_ok(&[
        &target.url(),
        "--model",
        "requests",
        "--steps",
        "50,100,200",
        "--step-duration",
        "1s",
        "--timeout",
        "150ms",
    ]);
    let dir = ran.dir.path();
    assert!(
        ran.stdout
            .contains(&format!("report: {}", dir.join("report.html").display())),
        "{}",
        ran.stdout
    );
    let page = browser::load(&chromium, &dir.join("report.html")).unwrap();
    let (dom, data) = assert_sound_page(&page);
    assert_eq!(
        browser::assert_embeds_run(&data, dir),
        3,
        "every step embedded"
    );
    let (tsv_header, tsv_rows) = browser::steps_tsv(dir);
    let (header, rows) = steps_table(&dom);
    assert_eq!(header, tsv_header, "the table's columns are steps.tsv's");
    assert_eq!(rows.len(), 3, "one row per step");
    for (row, tsv_row) in rows.iter().zip(&tsv_rows) {
        let want: Vec<(String, String)> = tsv_header
            .iter()
            .cloned()
            .zip(tsv_row.iter().cloned())
            .collect();
        assert_eq!(row, &want, "a row of the table differs from steps.tsv's");
    }
    a_person_can_read_and_toggle_the_latency_chart(&chromium, &dir.join("report.html"));
    // `stampede report` rebuilds the same page from the directory.
    let run_page = std::fs::read(dir.join("report.html")).unwrap();
    let o = tests::stampede(&["report", dir.to_str().unwrap(), "-o", "-"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(o.stdout, run_page);
}

/// A plan file's mix of three named requests: in Chromium its report has the Requests section, a
/// line per name on both charts at the steps' values, and each step's table with a row per name
/// whose numbers are requests.tsv's.
#[test]
fn a_named_mix_s_report_shows_each_name_in_chromium() {
    let Some(chromium) = browser::available("a_named_mix_s_report_shows_each_name_in_chromium")
    else {
        return;
    };
    let target = ServeProcess::start(&[]);
    let plan_dir = tempfile::tempdir().unwrap();
    let plan = plan_dir.path().join("mix.toml");
    std::fs::write(
        &plan,
        format!(
            "url = \"{}\"\nmodel = \"requests\"\nsteps = [50, 100]\nstep_duration = \"1s\"\n\
             [[request]]\nname = \"home\"\nweight = 3\nurl = \"/\"\n\
             [[request]]\nname = \"search\"\nweight = 2\nurl = \"/search?q=1\"\n\
             [[request]]\nname = \"login\"\nmethod = \"POST\"\nurl = \"/login\"\nbody = \"u=a\"\n",
            target.url()
        ),
    )
    .unwrap();
    let ran = run_ok(&[plan.to_str().unwrap()]);
    let dir = ran.dir.path();
    let page = browser::load(&chromium, &dir.join("report.html")).unwrap();
    let (dom, _) = assert_sound_page(&page);
    let names = ["home", "search", "login"];
    for chart in report::RUN_REQUEST_CHARTS {
        let (_, c) = browser::charts(&dom)
            .into_iter()
            .find(|(n, _)| *n == chart)
            .unwrap();
        let series: Vec<&str> = c.all("g").iter().filter_map(|g| g.attr("data-n")).collect();
        for name in names {
            assert!(
                series.contains(&name),
                "{chart} has no line of {name}: {series:?}"
            );
        }
    }
    let tsv = std::fs::read_to_string(dir.join("requests.tsv")).unwrap();
    let head: Vec<&str> = tsv.lines().next().unwrap().split('\t').collect();
    let col = |row: &[&str], c: &str| row[head.iter().position(|h| *h == c).unwrap()].to_string();
    let tables = dom
        .by_id("requests")
        .expect("the Requests tables")
        .all("table");
    assert_eq!(tables.len(), 2, "a table per step");
    for line in tsv.lines().skip(1) {
        let row: Vec<&str> = line.split('\t').collect();
        let step = col(&row, "step");
        let table = tables
            .iter()
            .find(|t| t.attr("data-step") == Some(step.as_str()))
            .unwrap();
        let tr = table
            .all("tr")
            .into_iter()
            .find(|tr| tr.attr("data-name") == Some(row[2]))
            .unwrap_or_else(|| panic!("step {step} has no row of {}", row[2]));
        let cell = |c: &str| {
            tr.all("td")
                .into_iter()
                .find(|td| td.attr("data-col") == Some(c))
                .unwrap()
                .text()
        };
        for c in ["requests", "ok_rate", "failed_pct", "p99_ms"] {
            assert_eq!(cell(c), col(&row, c), "step {step} {} {c}", row[2]);
        }
        assert!(col(&row, "requests").parse::<u64>().unwrap() > 0);
    }
}

/// A run watched by an embedded monitor (`--monitor-pid` on `stampede serve`): in Chromium its
/// report draws the server's CPU beside its memory, every point at a step's value, the CPU line the
/// monitor's `cpu_util_pct` of each step in run.json.
#[test]
fn a_monitored_run_s_report_draws_the_server_in_chromium() {
    let Some(chromium) =
        browser::available("a_monitored_run_s_report_draws_the_server_in_chromium")
    else {
        return;
    };
    let target = ServeProcess::start(&[]);
    let ran = run_ok(&[
        &target.url(),
        "--model",
        "requests",
        "--steps",
        "50,1000",
        "--step-duration",
        "2s",
        "--monitor-pid",
        &target.pid().to_string(),
    ]);
    let dir = ran.dir.path();
    let page = browser::load(&chromium, &dir.join("report.html")).unwrap();
    let (dom, data) = assert_sound_page(&page);
    assert_eq!(
        browser::assert_embeds_run(&data, dir),
        2,
        "every step embedded"
    );
    let cpu = browser::charts(&dom)
        .into_iter()
        .find(|(name, _)| *name == "server")
        .map(|(_, c)| c)
        .unwrap();
    assert!(!cpu.has_class("empty"), "the server chart is drawn");
    let series = cpu
        .all("g")
        .into_iter()
        .find(|g| {
            g.attr("data-n")
                .is_some_and(|n| n.starts_with("server: CPU"))
        })
        .expect("the monitor's CPU line");
    let drawn: Vec<String> = series
        .all("path")
        .iter()
        .filter_map(|p| p.attr("data-v"))
        .flat_map(|v| v.split(',').map(str::to_string).collect::<Vec<_>>())
        .collect();
    for (i, s) in ran.run["steps"].as_array().unwrap().iter().enumerate() {
        let util = s["server_monitors"][0]["target"]["cpu_util_pct"]
            .as_f64()
            .unwrap();
        let x = s["step_value"].as_f64().unwrap();
        let at = drawn
            .iter()
            .find(|p| p.split(' ').next().unwrap().parse::<f64>().unwrap() == x)
            .unwrap_or_else(|| panic!("step {i} not drawn: {drawn:?}"));
        let y: f64 = at.split(' ').nth(1).unwrap().parse().unwrap();
        assert!(
            (y - util).abs() < 0.01,
            "step {i}: drawn {y}, run.json {util}"
        );
    }
    // The pointer on the server chart's highest marker reads it out, as on every chart.
    let script = format!(
        "var chart = 'server';{HOVER_HIGHEST}return {{series: top.parentNode.getAttribute('data-n'), \
         value: value, highest: highest, readout: readout, \
         errors: doc.documentElement.getAttribute('data-errors')}};"
    );
    let (seen, console) = browser::interact(&chromium, &dir.join("report.html"), &script).unwrap();
    assert!(console.is_empty(), "console: {console:?}");
    assert_eq!(seen["errors"], serde_json::Value::Null, "{seen}");
    let series = seen["series"].as_str().expect("a series under the pointer");
    assert!(series.starts_with("server: "), "{seen}");
    let readout = seen["readout"].as_str().unwrap();
    assert!(
        readout.starts_with(&format!("{series}: ")) && readout.contains(" at "),
        "the readout names the point under the pointer: {seen}"
    );
}

/// The pointer on the highest marker of the chart named by the script's `chart` (the readout it
/// shows in `readout`, the marker's path in `top`, its value in `value`, the highest drawn in
/// `highest`). A series' markers are one `path.mk`, a point's centre where each `M` of its `d`
/// moves to, its values the `data-v` pair of that place.
const HOVER_HIGHEST: &str = r#"
var f = doc.querySelector('figure[data-chart="' + chart + '"]');
f.scrollIntoView();
var svg = f.querySelector('svg');
var top = null, at = null, value = null, highest = null;
f.querySelectorAll('.plot:not(.off) path.mk').forEach(function (p) {
  var vs = p.getAttribute('data-v').split(',');
  p.getAttribute('d').split('M').slice(1).forEach(function (m, i) {
    var xy = m.match(/^(-?[\d.]+) (-?[\d.]+)/), y = +vs[i].split(' ')[1];
    if (!at || +xy[2] < at[1]) { top = p; at = [+xy[1], +xy[2]]; value = y; }
    if (highest === null || y > highest) highest = y;
  });
});
var c = new win.DOMPoint(at[0], at[1]).matrixTransform(svg.getScreenCTM());
svg.dispatchEvent(new win.MouseEvent('mousemove',
  {clientX: c.x, clientY: c.y, bubbles: true}));
var readout = f.querySelector('.ro').textContent;
"#;

/// What a person does with the latency chart, in the browser, after [`HOVER_HIGHEST`] (the readout
/// names the highest marker's series): a click on the first legend key (its series hidden), a click
/// on the log/linear switch (the other plot shown).
const LATENCY_TOGGLES: &str = r#"
var key = f.querySelector('.key');
key.click();
var hidden = Array.prototype.map.call(
  f.querySelectorAll('svg [data-s="' + key.getAttribute('data-s') + '"]'),
  function (g) { return g.classList.contains('off'); });
var plots = function () {
  return Array.prototype.map.call(f.querySelectorAll('.plot'),
    function (p) { return !p.classList.contains('off'); });
};
var before = plots();
f.querySelector('.scale').click();
return {series: top.parentNode.getAttribute('data-n'), value: value, highest: highest,
  readout: readout, hidden: hidden,
  before: before, after: plots(), errors: doc.documentElement.getAttribute('data-errors')};
"#;

/// A capacity search's page (the report crate's fixture, rendered here) in Chromium: sound, the
/// search chart first with a marker for each probe at (its number, its rate) on either scale, the
/// steps table's `role` and `class` those of the probes, and the pointer on the highest marker
/// (the ramp's fail) reads it out under its class, the marker's hover text naming its role.
#[test]
fn a_search_s_report_marks_its_probes_in_chromium() {
    let Some(chromium) = browser::available("a_search_s_report_marks_its_probes_in_chromium")
    else {
        return;
    };
    let r = fixture::search(false);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("report.html");
    std::fs::write(&path, report::render_run(&r)).unwrap();
    let page = browser::load(&chromium, &path).unwrap();
    let (dom, _) = assert_sound_page(&page);
    let (_, search) = browser::charts(&dom)
        .into_iter()
        .find(|(name, _)| *name == "search")
        .unwrap();
    let mut drawn = browser::assert_drawn("search", search);
    drawn.sort_by(|a, b| a.0.total_cmp(&b.0));
    let want: Vec<(f64, f64)> = r
        .run
        .steps
        .iter()
        .flat_map(|s| [(f64::from(s.number), s.step_value); 2])
        .collect();
    assert_eq!(
        drawn, want,
        "each probe once on each scale, at its number and rate"
    );
    let (header, rows) = steps_table(&dom);
    let n = header.len();
    assert_eq!(&header[n - 2..], ["role", "class"]);
    for (row, s) in rows.iter().zip(&r.run.steps) {
        let p = s.probe.as_ref().unwrap();
        assert_eq!(
            (row[n - 2].1.as_str(), row[n - 1].1.as_str()),
            (p.role.name(), p.class.name()),
            "step {}",
            s.number
        );
    }
    let script = format!(
        "var chart = 'search';{HOVER_HIGHEST}\
         var t = top.querySelector('title');\
         return {{series: top.parentNode.getAttribute('data-n'), value: value, highest: highest,\
           readout: readout, title: t && t.textContent,\
           errors: doc.documentElement.getAttribute('data-errors')}};"
    );
    let (seen, console) = browser::interact(&chromium, &path, &script).unwrap();
    assert!(console.is_empty(), "console: {console:?}");
    assert_eq!(seen["errors"], serde_json::Value::Null, "{seen}");
    assert_eq!(seen["series"], "fail", "{seen}");
    assert_eq!(seen["value"], seen["highest"], "{seen}");
    assert_eq!(seen["readout"], "fail: 1.6k at 6", "{seen}");
    assert!(
        seen["title"].as_str().is_some_and(
            |t| t.starts_with("probe 6 · ramp · 1,600 req/s · served 1,408/s · fail: ")
        ),
        "{seen}"
    );
}

fn a_person_can_read_and_toggle_the_latency_chart(chromium: &Path, report: &Path) {
    let script = format!("var chart = 'latency';{HOVER_HIGHEST}{LATENCY_TOGGLES}");
    let (seen, console) = browser::interact(chromium, report, &script).unwrap();
    assert!(console.is_empty(), "console: {console:?}");
    assert_eq!(seen["exception"], serde_json::Value::Null, "{seen}");
    assert_eq!(seen["errors"], serde_json::Value::Null, "{seen}");
    let series = seen["series"].as_str().expect("a series under the pointer");
    assert!(
        seen["value"].is_number() && seen["value"] == seen["highest"],
        "the highest marker drawn is the highest value: {seen}"
    );
    let readout = seen["readout"].as_str().unwrap();
    assert!(
        readout.starts_with(&format!("{series}: ")) && readout.contains(" at "),
        "the readout names the point under the pointer: {seen}"
    );
    let hidden = seen["hidden"].as_array().unwrap();
    assert!(
        !hidden.is_empty() && hidden.iter().all(|h| h == true),
        "the legend key hid its series: {seen}"
    );
    let flipped: Vec<bool> = seen["before"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| !b.as_bool().unwrap())
        .collect();
    assert_eq!(flipped.len(), 2, "a linear and a log plot: {seen}");
    assert_eq!(
        seen["after"],
        serde_json::json!(flipped),
        "the switch showed the other plot: {seen}"
    );
}

#[test]
fn a_killed_run_kept_a_report_of_its_finished_steps() {
    let Some(chromium) = browser::available("a_killed_run_kept_a_report_of_its_finished_steps")
    else {
        return;
    };
    // Twice what the target serves, timed out soon: every step has failures to draw.
    let target = ServeProcess::start(&["--capacity", "10"]);
    let out = tempfile::tempdir().unwrap();
    let mut child = Command::new(bin("stampede"))
        .args([
            "run",
            &target.url(),
            "--model",
            "requests",
            "--timeout",
            "300ms",
        ])
        .args(["--steps", "20,20,20,20", "--step-duration", "1s", "--quiet"])
        .arg("--out")
        .arg(out.path())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let report = out.path().join("report.html");
    let rows = |html: &str| {
        Dom::parse(html)
            .by_id("steps")
            .map_or(0, |t| t.all("tr").len())
    };
    // The header row and one step's.
    let began = Instant::now();
    while !std::fs::read_to_string(&report).is_ok_and(|h| rows(&h) >= 2) {
        assert!(
            began.elapsed() < Duration::from_secs(30),
            "no step in report.html after 30 s"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let run = tests::run_json(out.path());
    let finished = run["steps"].as_array().unwrap().len();
    assert!((1..4).contains(&finished), "{finished} steps");
    let page = browser::load(&chromium, &report).unwrap();
    let (dom, data) = assert_sound_page(&page);
    assert_eq!(data["status"], "running", "killed: nothing marked it");
    // The kill may fall between run.json's rewrite and the report's: the page is then one step
    // behind, and whole.
    let shown = browser::assert_embeds_run(&data, out.path());
    assert!(
        shown == finished || shown + 1 == finished,
        "{shown} steps shown of {finished}"
    );
    let (_, table) = steps_table(&dom);
    assert_eq!(table.len(), shown);
}

/// An agent's name a page must show as text and never read as markup: the end of a script, an
/// element with a handler, the end of an attribute, a comment, an entity. The handlers do not
/// `alert`: a dialog would hold headless Chromium until the time limit, and the failure would say
/// only that.
fn hostile_name(i: usize) -> String {
    match i % 5 {
        0 => format!("</script><img src=x onerror=window.injected={i}>"),
        1 => format!("\"><img src=x onerror=window.injected={i}>"),
        2 => format!("' onmouseover='window.injected={i}"),
        3 => format!("<!--{i}"),
        _ => format!("&lt;img src=x&gt; {i}"),
    }
}

#[test]
fn hostile_agent_names_in_the_table_the_script_fills_are_shown_as_text() {
    let Some(chromium) =
        browser::available("hostile_agent_names_in_the_table_the_script_fills_are_shown_as_text")
    else {
        return;
    };
    // Twice the target's capacity and more, timed out soon: failures to draw too.
    let target = ServeProcess::start(&["--capacity", "10"]);
    let ran = run_ok(&[
        &target.url(),
        "--model",
        "requests",
        "--steps",
        "20,40",
        "--step-duration",
        "1s",
        "--timeout",
        "100ms",
    ]);
    let dir = ran.dir.path();
    // The run's one agent made 105, in each of its 2 steps: 210 rows, past the 200 the page
    // writes itself, so its script builds the table.
    let names: Vec<String> = (0..105).map(hostile_name).collect();
    let mut run = ran.run.clone();
    let renamed = |of: &serde_json::Value, key: &str| -> serde_json::Value {
        names
            .iter()
            .map(|n| {
                let mut a = of.clone();
                a[key] = n.as_str().into();
                a
            })
            .collect()
    };
    run["agents"] = renamed(&ran.run["agents"][0], "name");
    for step in run["steps"].as_array_mut().unwrap() {
        step["agents"] = renamed(&step["agents"][0], "agent");
    }
    std::fs::write(dir.join("run.json"), run.to_string()).unwrap();
    let o = tests::stampede(&["report", dir.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o.stderr));

    let page = browser::load(&chromium, &dir.join("report.html")).unwrap();
    let (dom, data) = assert_sound_page(&page);
    assert_eq!(browser::assert_embeds_run(&data, dir), 2);
    let table = dom.by_id("agents").expect("a <table id=\"agents\">");
    assert_eq!(
        table.attr("data-fill"),
        Some("agent_steps"),
        "the script fills the table"
    );
    let cols: Vec<&str> = table
        .all("th")
        .iter()
        .map(|th| th.attr("data-col").unwrap_or(""))
        .collect();
    let at = cols
        .iter()
        .position(|c| *c == "agent")
        .expect("an agent column");
    let shown: Vec<String> = table
        .all("tr")
        .iter()
        .map(|tr| tr.all("td"))
        .filter(|tds| !tds.is_empty())
        .map(|tds| {
            assert_eq!(tds.len(), cols.len(), "a row has a cell per column");
            tds[at].text()
        })
        .collect();
    let want: Vec<String> = names.iter().chain(&names).cloned().collect();
    assert_eq!(shown, want, "each agent's name, as text, in its rows");
    let injected: Vec<String> = dom
        .elements()
        .iter()
        .filter(|e| e.name() == "img" || e.attrs().iter().any(|(k, _)| k.starts_with("on")))
        .map(|e| format!("<{} {:?}>", e.name(), e.attrs()))
        .collect();
    assert_eq!(injected, Vec::<String>::new(), "a name became markup");
}
