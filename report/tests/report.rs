//! The one-run page: same input, same bytes (a golden file), every chart of the contract there,
//! and a run's hostile strings shown as text.
mod fixture;

use std::path::Path;

use report::{RUN_CHARTS, RUN_MONITOR_CHARTS, RUN_SEARCH_CHARTS, render_run};

const PAYLOAD: &str = "</script><img src=x onerror=alert(1)>";

/// Asserts that [`PAYLOAD`] made no element of `page` (from `whose` words) and ended none of its
/// scripts; returns the payload as the page shows it.
fn assert_payload_is_text(page: &str, whose: &str) -> &'static str {
    assert!(!page.contains("<img"), "no element from {whose}");
    assert_eq!(
        page.matches("</script>").count(),
        2,
        "only the page's own scripts end"
    );
    "&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;"
}

/// `STAMPEDE_BLESS=1` rewrites the golden file instead of comparing with it.
#[test]
fn the_fixture_run_renders_the_golden_page_byte_for_byte() {
    same_as_golden(&fixture::report(), "report.html");
}

/// The search's page is guarded as the run's is.
#[test]
fn the_fixture_search_renders_its_golden_page_byte_for_byte() {
    same_as_golden(&fixture::search(false), "search.html");
}

fn same_as_golden(r: &report::RunReport, file: &str) {
    let page = render_run(r);
    let golden = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(file);
    if std::env::var_os("STAMPEDE_BLESS").is_some() {
        std::fs::write(&golden, &page).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&golden)
        .unwrap_or_else(|_| panic!("tests/golden/{file} (STAMPEDE_BLESS=1 writes it)"));
    assert!(
        page == want,
        "{file} differs from {}; STAMPEDE_BLESS=1 rewrites it after a look",
        golden.display()
    );
    assert_eq!(render_run(r), page, "rendered twice, the same bytes");
}

#[test]
fn every_chart_of_the_contract_is_drawn_for_the_fixture() {
    let page = render_run(&fixture::report());
    let mut at = 0;
    for name in RUN_CHARTS {
        let key = format!("data-chart=\"{name}\"");
        assert_eq!(page.matches(&key).count(), 1, "{name}");
        let here = page.find(&key).unwrap();
        assert!(here > at, "{name} in contract order");
        at = here;
        let figure = &page[here..here + page[here..].find("</figure>").unwrap()];
        if name == "server" {
            assert!(
                page[..here].ends_with("<figure class=\"chart empty\" "),
                "{name} is an empty place"
            );
        } else {
            assert!(figure.contains("<svg"), "{name} is drawn");
        }
    }
    let latency = &page[page.find("data-chart=\"latency\"").unwrap()..];
    let latency = &latency[..latency.find("</figure>").unwrap()];
    assert!(
        latency.contains("<path class=\"mk lb\""),
        "the censored step's lower bounds are hollow"
    );
    assert!(latency.contains("lower bounds"), "and said to be");
    assert!(
        page.contains("class=\"t-invalid\""),
        "the invalid step is shaded"
    );
    assert!(
        page.contains("ran out of file descriptors</title>"),
        "with its reasons on hover"
    );
}

#[test]
fn no_distribution_leaves_a_labelled_place() {
    let mut r = fixture::report();
    r.distributions.clear();
    let page = render_run(&r);
    assert!(page.contains("<figure class=\"chart empty\" data-chart=\"distribution\">"));
}

/// The embedded data, parsed back.
fn data(page: &str) -> serde_json::Value {
    let open = "<script type=\"application/json\" id=\"stampede-data\">";
    let start = page.find(open).unwrap() + open.len();
    let len = page[start..].find("</script>").unwrap();
    serde_json::from_str(&page[start..start + len]).unwrap()
}

#[test]
fn a_run_s_markup_is_shown_as_text() {
    let mut r = fixture::report();
    let header = format!("X-Evil: {PAYLOAD}");
    r.run.label = Some(PAYLOAD.into());
    r.run.plan.requests[0].headers = vec![header.to_string()];
    r.run.agents[0].name = PAYLOAD.into();
    r.run.warnings = vec![PAYLOAD.into()];
    for s in &mut r.run.steps {
        s.notes = vec![PAYLOAD.into()];
        s.reasons = vec![PAYLOAD.into()];
        for a in &mut s.agents {
            a.agent = PAYLOAD.into();
        }
    }
    r.run.steps[0].trust = results::verdict::Verdict::Degraded;
    let page = render_run(&r);
    let escaped = assert_payload_is_text(&page, "a run's text");
    for place in [
        "<h1>stampede: ",
        "<td>",
        "<title>step 1 · 100 req/s: degraded: ",
    ] {
        assert!(page.contains(&format!("{place}{escaped}")), "{place}");
    }
    assert!(
        page.contains(&format!("X-Evil: {escaped}")),
        "the header, in the plan table"
    );
    let back = data(&page);
    assert_eq!(back["label"], PAYLOAD);
    assert_eq!(back["agents"][0], PAYLOAD);
    assert_eq!(back["agent_steps"]["agent"][0], 0, "the agent by its index");
}

#[test]
fn a_long_agents_table_is_built_by_the_page_from_its_data() {
    let mut r = fixture::large(21, 10);
    for (k, a) in r
        .run
        .steps
        .iter_mut()
        .flat_map(|s| &mut s.agents)
        .enumerate()
    {
        a.requests = k as u64;
    }
    let page = render_run(&r);
    let table = &page[page.find("<table id=\"agents\"").unwrap()..];
    let table = &table[..table.find("</table>").unwrap()];
    assert!(table.contains("data-fill=\"agent_steps\""), "{table}");
    assert!(!table.contains("<td"), "no row in the page: {table}");
    assert!(page.contains("<noscript><p>The 210 rows of this table"));
    let back = data(&page);
    let requests: Vec<u64> = back["agent_steps"]["requests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    assert_eq!(
        requests,
        (0..210).collect::<Vec<u64>>(),
        "every row, in order"
    );
    assert_eq!(back["agent_steps"]["agent"][13], 3);
    assert_eq!(back["agents"][3], "10.0.0.14:7700");
    assert_eq!(back["steps"]["step_value"][20], 2100);

    let page = render_run(&fixture::large(20, 10));
    let table = &page[page.find("<table id=\"agents\">").unwrap()..];
    let table = &table[..table.find("</table>").unwrap()];
    assert_eq!(
        table.matches("<tr><td>").count(),
        200,
        "200 rows are written"
    );
    assert!(table.contains("<tr><td>14</td><td>10.0.0.14:7700</td>"));
}

/// Issue 12's budget: a report of 100 steps of 10 agents under 300 KB (`examples/report_size.rs`
/// prints the size and the time).
#[test]
fn a_report_of_100_steps_of_10_agents_is_under_300_kb() {
    let page = render_run(&fixture::large(100, 10));
    assert!(page.len() < 300 * 1024, "{} bytes", page.len());
}

#[test]
fn a_run_without_a_step_yet_still_has_every_place() {
    let mut r = fixture::report();
    r.run.steps.clear();
    r.run.summary = None;
    r.run.stopped = None;
    r.distributions.clear();
    let page = render_run(&r);
    for name in RUN_CHARTS {
        assert!(page.contains(&format!("data-chart=\"{name}\"")), "{name}");
    }
    assert!(page.contains("No step has finished yet."));
    assert!(
        !page.contains("NaN") && !page.contains("922337203685477"),
        "no number made from nothing"
    );
}

#[test]
fn a_closed_loop_run_is_drawn_against_connections_without_an_ideal_line() {
    let mut r = fixture::report();
    r.run.plan.model = "concurrency".into();
    for s in &mut r.run.steps {
        s.demanded_rate = None;
    }
    let page = render_run(&r);
    assert!(page.contains("connections (closed loop)"));
    assert!(!page.contains("ideal: served = offered"));
}

#[test]
fn a_run_without_failures_says_so_instead_of_drawing_empty_axes() {
    let mut r = fixture::report();
    assert!(render_run(&r).contains("<figure class=\"chart\" data-chart=\"failures\">"));
    for s in &mut r.run.steps {
        s.failed = 0;
        s.replies = s.ok;
        for (_, n) in &mut s.errors.0 {
            *n = 0;
        }
    }
    let page = render_run(&r);
    assert!(
        page.contains("<figure class=\"chart empty\" data-chart=\"failures\">")
            && page.contains("No request failed in this run"),
        "the failures chart of a run without failures"
    );
}

#[test]
fn the_knee_is_marked_where_the_summary_puts_it() {
    let r = fixture::report();
    let s = r.run.summary.as_ref().unwrap();
    let kept = s.kept_up_to.expect("the fixture kept up somewhere");
    let page = render_run(&r);
    let rates = &page[page.find("data-chart=\"rates\"").unwrap()..];
    let rates = &rates[..rates.find("</figure>").unwrap()];
    assert!(
        rates.contains(&format!("kept up to {}", report::chart::short(kept))),
        "{rates}"
    );
}

#[test]
fn a_run_without_1_s_samples_leaves_the_timeline_a_labelled_place() {
    let mut r = fixture::report();
    for s in &mut r.run.steps {
        s.reply_rate_series.clear();
    }
    let page = render_run(&r);
    assert!(
        page.contains("<figure class=\"chart empty\" data-chart=\"timeline\">"),
        "the timeline of a run without 1 s samples"
    );
}

/// The figure `data-chart="NAME"` of a page.
fn figure<'a>(page: &'a str, name: &str) -> &'a str {
    let at = page
        .find(&format!("data-chart=\"{name}\""))
        .unwrap_or_else(|| panic!("no chart {name}"));
    &page[at..at + page[at..].find("</figure>").unwrap()]
}

/// The values of series `series` in a figure: every "X Y" of its paths' `data-v`, rounded to
/// three decimals, sorted by x.
fn values(figure: &str, series: &str) -> Vec<(f64, f64, bool)> {
    let g = &figure[figure
        .find(&format!("data-n=\"{series}\""))
        .unwrap_or_else(|| panic!("no series {series} in {figure}"))..];
    let g = &g[..g.find("</g>").unwrap()];
    let mut out: Vec<(f64, f64, bool)> = Vec::new();
    for path in g.split("<path").skip(1) {
        let hollow = path.contains("class=\"mk lb\"");
        let Some(v) = path.split("data-v=\"").nth(1) else {
            continue;
        };
        for xy in v[..v.find('"').unwrap()].split(',') {
            let (x, y) = xy.split_once(' ').unwrap();
            out.push((x.parse().unwrap(), y.parse().unwrap(), hollow));
        }
    }
    out.sort_by(|a, b| a.0.total_cmp(&b.0));
    out
}

#[test]
fn a_monitored_run_draws_the_server_s_cpu_beside_its_memory() {
    let r = fixture::monitored();
    let page = render_run(&r);
    let mut names: Vec<&str> = RUN_CHARTS.to_vec();
    let server = names.iter().position(|n| *n == "server").unwrap();
    names.splice(server + 1..server + 1, RUN_MONITOR_CHARTS);
    let mut at = 0;
    for name in &names {
        let key = format!("<figure class=\"chart\" data-chart=\"{name}\">");
        assert_eq!(page.matches(&key).count(), 1, "{name} drawn, once");
        let here = page.find(&key).unwrap();
        assert!(here > at, "{name} in contract order");
        at = here;
    }
    let cpu = figure(&page, "server");
    let drawn = values(cpu, "web1: CPU, % of its 1 core");
    let want: Vec<(f64, f64, bool)> = r
        .run
        .steps
        .iter()
        .map(|s| {
            let m = &s.server_monitors[0];
            (
                s.step_value,
                m.target.as_ref().unwrap().cpu_util_pct,
                m.partial,
            )
        })
        .collect();
    assert_eq!(
        drawn, want,
        "each step's srv_cpu_util_pct, the partial step hollow"
    );
    for series in [
        "web1: busiest thread, % of a core",
        "web1: host CPU",
        "web1: host softirq",
    ] {
        assert_eq!(values(cpu, series).len(), r.run.steps.len(), "{series}");
    }
    assert!(cpu.contains("only part of the step"), "hollow is explained");
    assert!(
        cpu.contains("class=\"t-invalid\""),
        "the trust shading as every chart"
    );
    let memory = values(figure(&page, "server-memory"), "web1: highest");
    let mb: Vec<f64> = r
        .run
        .steps
        .iter()
        .map(|s| {
            s.server_monitors[0]
                .target
                .as_ref()
                .unwrap()
                .memory_bytes
                .max
                / (1024.0 * 1024.0)
        })
        .collect();
    assert_eq!(memory.iter().map(|v| v.1).collect::<Vec<_>>(), mb);
    assert_eq!(render_run(&r), page, "same input, same bytes");
}

#[test]
fn a_monitored_run_s_data_carries_the_monitor_s_columns_as_steps_tsv_has_them() {
    let r = fixture::monitored();
    let back = data(&render_run(&r));
    let table = r.run.step_table();
    let header = table.header();
    let ours: Vec<&String> = header.iter().filter(|c| c.ends_with("_web1")).collect();
    assert_eq!(ours.len(), results::quantity::MONITOR.len(), "{header:?}");
    for (i, s) in r.run.steps.iter().enumerate() {
        let row = table.row(s);
        for col in &ours {
            let cell = &row[header.iter().position(|h| h == *col).unwrap()];
            let v = &back["steps"][col.as_str()][i];
            assert_eq!(
                v.as_f64(),
                cell.parse::<f64>().ok(),
                "step {} {col}",
                s.number
            );
        }
    }
    assert_eq!(back["steps"]["srv_cpu_util_pct_web1"][1], 30);
}

/// Issue 12's budget (300 KB for 100 steps of 10 agents) was set for a page without a monitor,
/// which already takes 274 KB of it; a monitor adds 8 columns to each of the 100 rows of `#steps`
/// and of the data (12 KB, the page contract) and two charts of 100 steps (17 KB, 5 of it the trust
/// shading every chart has). So a monitored run may take 10 KB more, and no more.
#[test]
fn a_report_of_100_steps_of_10_agents_and_a_monitor_is_under_310_kb() {
    let mut r = fixture::large(100, 10);
    fixture::monitor(&mut r.run, "web1");
    let page = render_run(&r);
    assert!(page.contains("data-chart=\"server-memory\""));
    assert!(page.len() < 310 * 1024, "{} bytes", page.len());
}

#[test]
fn a_monitor_s_name_is_shown_as_text() {
    let mut r = fixture::report();
    fixture::monitor(&mut r.run, PAYLOAD);
    let page = render_run(&r);
    let escaped = assert_payload_is_text(&page, "a monitor's name");
    assert!(page.contains(&format!("data-n=\"{escaped}: CPU, % of its 1 core\"")));
    assert!(page.contains(&format!("{escaped}: highest")));
    let back = data(&page);
    let steps = back["steps"].as_object().unwrap();
    assert!(
        steps.keys().any(|k| k.starts_with("srv_cpu_pct_</script>")),
        "the column, by its name"
    );
}

#[test]
fn a_monitor_that_saw_no_step_or_no_process_leaves_labelled_places() {
    let mut r = fixture::monitored();
    for s in &mut r.run.steps {
        for m in &mut s.server_monitors {
            m.target = None;
        }
    }
    let page = render_run(&r);
    assert!(
        page.contains("<figure class=\"chart\" data-chart=\"server\">"),
        "the host is drawn"
    );
    assert!(page.contains("<figure class=\"chart empty\" data-chart=\"server-memory\">"));
    assert!(page.contains("watches the host alone"));
    for s in &mut r.run.steps {
        s.server_monitors.clear();
    }
    let page = render_run(&r);
    assert!(page.contains("<figure class=\"chart empty\" data-chart=\"server\">"));
    assert!(page.contains("has not reported a step yet"));
    assert!(page.contains("<figure class=\"chart empty\" data-chart=\"server-memory\">"));
}

/// The probes of the fixture search whose class is `class`, as (probe number, offered rate).
fn probes_of(r: &report::RunReport, class: &str) -> Vec<(f64, f64, bool)> {
    r.run
        .steps
        .iter()
        .filter(|s| s.probe.as_ref().is_some_and(|p| p.class.name() == class))
        .map(|s| (f64::from(s.number), s.step_value, false))
        .collect()
}

#[test]
fn a_search_s_page_has_the_search_chart_first_then_every_chart_of_the_contract() {
    let page = render_run(&fixture::search(false));
    let mut at = 0;
    for name in RUN_SEARCH_CHARTS.iter().chain(&RUN_CHARTS) {
        let key = format!("data-chart=\"{name}\"");
        assert_eq!(page.matches(&key).count(), 1, "{name}");
        let here = page.find(&key).unwrap();
        assert!(here > at, "{name} in contract order");
        at = here;
    }
    assert!(
        figure(&page, "search").contains("<svg"),
        "the search is drawn"
    );
    let planned = render_run(&fixture::report());
    for name in RUN_SEARCH_CHARTS {
        assert!(
            !planned.contains(&format!("data-chart=\"{name}\"")),
            "{name} only for a search"
        );
    }
}

#[test]
fn the_search_chart_marks_each_probe_by_its_class_in_shape_and_colour_with_its_role_on_hover() {
    let r = fixture::search(false);
    let page = render_run(&r);
    let search = figure(&page, "search");
    let shapes = [
        ("pass", "class=\"mk\"", "m-dt"),
        ("fail", "class=\"mk x\"", "m-x"),
        ("invalid", "class=\"mk sq\"", "m-sq"),
        ("undecided", "class=\"mk dm\"", "m-dm"),
    ];
    for (class, shape, key) in shapes {
        let want = probes_of(&r, class);
        assert!(!want.is_empty(), "the fixture has a {class} probe");
        // Drawn on both scales (log, and linear behind the switch).
        let drawn = values(search, class);
        assert_eq!(drawn, want, "{class}: each probe at (its number, its rate)");
        let g = &search[search.find(&format!("data-n=\"{class}\"")).unwrap()..];
        let g = &g[..g.find("</g>").unwrap()];
        assert_eq!(
            g.matches(shape).count(),
            want.len(),
            "{class} drawn as {shape}"
        );
        assert!(
            search.contains(&format!("class=\"key {key}\"")),
            "{class}'s legend key shows its shape"
        );
    }
    assert_eq!(
        search.matches("<title>probe ").count(),
        2 * r.run.steps.len(),
        "every probe has its hover text, on either scale"
    );
    assert!(search.contains(
        "<title>probe 13 · bisect · 1,084 req/s · served 1,051/s · fail: p99 71.2 ms, over the SLO p99&lt;50ms</title>"
    ));
    assert!(search.contains("<title>probe 7 · recovery · 800 req/s · served 798/s · pass</title>"));
    assert!(search.contains("<title>probe 10 · bisect · 1,037 req/s · served 1,034/s · invalid: the generator could not be trusted on it</title>"));
    // A phase's label fits its probes (37.6 units each here): the lone warmup and recovery
    // probes, and the bisection after the recovery, shortened.
    for role in ["war.", "ramp", "rec.", "bis.", "confirm"] {
        assert!(
            search.contains(&format!(">{role}</text>")),
            "the {role} phase is labelled"
        );
    }
    assert!(search.contains(">sustained: 1,037 req/s (served 1,034/s)</text>"));
    assert!(search.contains(">fails: 1,084 req/s (p99 71.2 ms, over the SLO p99&lt;50ms)</text>"));
    assert!(
        search.contains("<g class=\"plot log\"") && search.contains("<g class=\"plot lin off\""),
        "log scale first, linear a switch away"
    );
    assert!(
        search.contains("class=\"t-invalid\""),
        "the invalid probe shaded"
    );
    assert!(
        page.contains(report::chart::MARK_STYLE),
        "the shapes' CSS is on the page"
    );
}

#[test]
fn a_search_s_answer_and_status_are_on_top() {
    let r = fixture::search(false);
    let page = render_run(&r);
    let c = r.run.capacity.as_ref().unwrap();
    let answer = c.answer.replace('<', "&lt;");
    assert!(
        answer.starts_with(
            "sustains 1,037 req/s (served 1,034/s) under p99&lt;50ms; fails at 1,084 req/s"
        ),
        "{answer}"
    );
    let top = format!(
        "<h1>stampede: reference</h1>\n<p class=\"answer\" data-status=\"resolved\"><b>resolved</b>: {answer}</p>"
    );
    assert!(page.contains(&top), "the capacity's answer, first");
    assert!(
        !page.contains(&r.run.summary.as_ref().unwrap().answer),
        "not the knee's"
    );
    assert!(page.contains("<dd data-key=\"search\">resolved, exit code 0</dd>"));
    assert!(page.contains(
        "<p id=\"stopped\">The search ended resolved (exit code 0) after 312 s and 16 probes (the other steps: the warmup, or cut short).</p>"
    ));
    let table = &page[page.find("<table id=\"capacity\">").unwrap()..];
    let table = &table[..table.find("</table>").unwrap()];
    for row in [
        "<td data-key=\"max_rate\">1,037 req/s offered, 1,034/s served</td>",
        "<td data-key=\"lowest_fail\">1,084 req/s: p99 71.2 ms, over the SLO p99&lt;50ms</td>",
        "<td data-key=\"precision\">4.5% (asked for 5.0%)</td>",
        "<td data-key=\"probes\">5 ramp, 6 bisect, 4 confirm, 1 recovery; 1 invalid, 1 undecided</td>",
    ] {
        assert!(table.contains(row), "{row} in {table}");
    }
}

#[test]
fn a_running_search_says_its_probes_so_far_and_draws_no_bound_yet() {
    let r = fixture::search(true);
    let page = render_run(&r);
    assert!(page.contains(
        "<p class=\"answer\" data-status=\"running\">Searching: 17 probes so far (10 pass, 5 fail, 1 invalid, 1 undecided); the last, probe 17, confirm at 1,084 req/s: fail.</p>"
    ));
    let search = figure(&page, "search");
    assert!(!search.contains("class=\"lvl\""), "no bound before the end");
    assert!(search.contains("The bounds are drawn once the search ends."));
    assert!(page.contains("<p id=\"capacity\">The search has not ended"));
    assert!(page.contains("<p id=\"stopped\">Not ended yet (the run is running).</p>"));
    assert!(
        !figure(&page, "rates").contains("kept up to"),
        "no knee for a search"
    );
    let mut r = r;
    r.run.steps.clear();
    r.distributions.clear();
    let page = render_run(&r);
    assert!(page.contains("Searching: no probe has finished yet."));
    assert!(page.contains("<figure class=\"chart empty\" data-chart=\"search\">"));
}

#[test]
fn a_search_s_charts_against_the_offered_load_draw_points_not_a_zigzag_and_mark_the_bounds() {
    let r = fixture::search(false);
    let page = render_run(&r);
    for (chart, series) in [
        ("rates", "served (ok_rate)"),
        ("latency", "p99"),
        ("trust-cpu", "Generator CPU (busiest agent)"),
    ] {
        let f = figure(&page, chart);
        let g = &f[f.find(&format!("data-n=\"{series}\"")).unwrap()..];
        let g = &g[..g.find("</g>").unwrap()];
        assert!(
            !g.contains("<path d="),
            "{chart}: {series} has no line through its points: {g}"
        );
        assert_eq!(
            values(f, series).len(),
            r.run.steps.len(),
            "{chart}: a point a probe"
        );
        assert!(
            f.contains("class=\"key m-dt\""),
            "{chart}: its key is a point"
        );
    }
    for chart in ["rates", "latency"] {
        let f = figure(&page, chart);
        assert!(f.contains(">sustained 1037 · fails 1084</text>"), "{chart}");
    }
    // The one invalid probe at 1,037 req/s, among four valid ones, leaves the rate unshaded
    // where the rate is the x; the search chart shades the probe.
    assert!(!figure(&page, "rates").contains("class=\"t-invalid\""));
    assert!(!figure(&page, "latency").contains("class=\"t-invalid\""));
    // Five probes at 1,037 req/s: one bar, its rate theirs over all their seconds, not stacked.
    let status = figure(&page, "status");
    let bars = values(status, "2xx");
    let at = |v: f64| {
        bars.iter()
            .filter(|b| b.0 == v)
            .map(|b| b.1)
            .collect::<Vec<_>>()
    };
    let probes: Vec<_> = r
        .run
        .steps
        .iter()
        .filter(|s| s.step_value == 1037.0)
        .collect();
    assert_eq!(probes.len(), 5);
    let ok: u64 = probes.iter().map(|s| s.ok).sum();
    let window: f64 = probes.iter().map(|s| s.ok as f64 / s.ok_rate).sum();
    let want = report::chart::short(ok as f64 / window)
        .parse::<f64>()
        .unwrap();
    assert_eq!(at(1037.0), [want], "one bar at 1,037 req/s");
    let distinct = {
        let mut v: Vec<f64> = r.run.steps.iter().map(|s| s.step_value).collect();
        v.sort_by(f64::total_cmp);
        v.dedup();
        v
    };
    assert_eq!(
        bars.iter().map(|b| b.0).collect::<Vec<_>>(),
        distinct,
        "a bar a rate"
    );
}

#[test]
fn a_search_s_steps_table_has_the_role_and_class_columns_of_its_steps_tsv() {
    let r = fixture::search(false);
    let page = render_run(&r);
    let header = r.run.step_table().header();
    let n = header.len();
    assert_eq!(&header[n - 2..], ["role", "class"], "{header:?}");
    let table = &page[page.find("<table id=\"steps\">").unwrap()..];
    let table = &table[..table.find("</table>").unwrap()];
    assert!(
        table.contains("<th data-col=\"role\">role</th><th data-col=\"class\">class</th></tr>")
    );
    assert!(table.contains("<td>confirm</td><td>fail</td></tr>"));
    assert!(table.contains("<td>warmup</td><td>pass</td></tr>"));
    let back = data(&page);
    assert_eq!(back["steps"]["role"][9], "bisect");
    assert_eq!(back["steps"]["class"][10], "undecided");
}

#[test]
fn a_search_s_words_are_shown_as_text() {
    let mut r = fixture::search(false);
    r.run.steps[7].probe.as_mut().unwrap().reason = Some(PAYLOAD.into());
    let c = r.run.capacity.as_mut().unwrap();
    c.answer = PAYLOAD.into();
    c.lowest_fail.as_mut().unwrap().reason = PAYLOAD.into();
    let page = render_run(&r);
    let escaped = assert_payload_is_text(&page, "a search's text");
    assert!(page.contains(&format!("<b>resolved</b>: {escaped}</p>")));
    assert!(page.contains(&format!("· fail: {escaped}</title>")));
    assert!(page.contains(&format!("fails: 1,084 req/s ({escaped})</text>")));
}

/// Issue 12's budget holds for a search as long as the run it was set for: 100 probes of 10
/// agents, the fixture search's probes over and over (their rates repeating, as a long
/// confirmation's do), each marker with its hover text on both scales.
#[test]
fn a_search_of_100_probes_of_10_agents_is_under_300_kb() {
    let search = fixture::search(false).run;
    let mut r = fixture::large(100, 10);
    r.run.plan = search.plan.clone();
    r.run.capacity = search.capacity.clone();
    for (s, probe) in r.run.steps.iter_mut().zip(search.steps.iter().cycle()) {
        s.step_value = probe.step_value;
        s.demanded_rate = Some(probe.step_value);
        s.probe = probe.probe.clone();
    }
    let page = render_run(&r);
    assert_eq!(
        figure(&page, "search").matches("<title>probe ").count(),
        200
    );
    assert!(page.len() < 300 * 1024, "{} bytes", page.len());
}

/// A real monitored find-max run (results/tests/golden/find-max-run, read from its directory as
/// `stampede report` reads one): its page is guarded byte for byte, and draws the search's charts
/// and the server's, none an empty place.
#[test]
fn the_monitored_find_max_golden_renders_its_page_with_every_chart_drawn() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../results/tests/golden/find-max-run");
    let r = report::RunReport::read(&dir).expect("the golden directory reads");
    assert_eq!(
        r.distributions.len(),
        r.run.steps.len(),
        "every step's .hgrm"
    );
    same_as_golden(&r, "find-max-run.html");
    let page = render_run(&r);
    for name in RUN_SEARCH_CHARTS.iter().chain(RUN_MONITOR_CHARTS.iter()) {
        let key = format!("data-chart=\"{name}\"");
        let here = page
            .find(&key)
            .unwrap_or_else(|| panic!("{name} has its place"));
        assert!(
            !page[..here].ends_with("<figure class=\"chart empty\" "),
            "{name} is drawn, not an empty place"
        );
    }
}
