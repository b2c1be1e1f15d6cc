//! Tests of the compare page (`compare_page.rs`): its bytes, charts, ranking, table colours and axes.
use super::*;
use crate::run_page::server;
use results::compare::{Labelled, Threshold, compare};
use results::run_file::RunFile;
use std::path::Path;

const GOLDEN: &str = include_str!("../../../results/tests/golden/run.json");

fn run(label: &str) -> Labelled {
    Labelled {
        label: label.into(),
        source: format!("results/{label}"),
        run: RunFile::parse(GOLDEN, Path::new("run.json")).unwrap(),
    }
}

/// nginx against a slower app (p99 doubled at 300 req/s, an untrusted step at 200 req/s and a
/// censored p99 at 600 req/s).
fn comparison() -> Comparison {
    let mut app = run("app");
    app.run.steps[2].latency_ms.p99 *= 2.0;
    app.run.steps[1].trust = Verdict::Invalid;
    app.run.steps[1].latency_ms.p99 *= 2.0;
    let s = &mut app.run.steps[5];
    s.latency_ms.censored = true;
    s.latency_ms.lower_bounds.set(3);
    app.run.steps.pop();
    compare(vec![run("nginx"), app], None, Threshold::default()).unwrap()
}

/// The `<td>` of `run`'s row at `value` for `metric`.
fn td<'a>(page: &'a str, value: &str, run: &str, metric: &str) -> &'a str {
    let row = format!("<tr data-value=\"{value}\" data-run=\"{run}\">");
    let row_at = page.find(&row).or_else(|| {
        let first = format!("<tr class=\"first\" data-value=\"{value}\" data-run=\"{run}\">");
        page.find(&first)
    });
    let row = &page[row_at.unwrap()..];
    let row = &row[..row.find("</tr>").unwrap()];
    let at = row.find(&format!("data-metric=\"{metric}\"")).unwrap();
    let start = row[..at].rfind("<td").unwrap();
    &row[start..start + row[start..].find("</td>").unwrap()]
}

#[test]
fn the_same_comparison_gives_the_same_bytes() {
    assert_eq!(render_compare(&comparison()), render_compare(&comparison()));
}

#[test]
fn every_chart_is_drawn_with_a_line_per_run_in_its_own_colour() {
    let page = render_compare(&comparison());
    let mut at = 0;
    for name in COMPARE_CHARTS {
        let key = format!("<figure class=\"chart\" data-chart=\"{name}\">");
        assert_eq!(page.matches(&key).count(), 1, "{name}");
        let here = page.find(&key).unwrap();
        assert!(here > at, "{name} in contract order");
        at = here;
        let figure = &page[here..here + page[here..].find("</figure>").unwrap()];
        assert!(figure.contains("<svg"), "{name}");
        assert!(figure.contains("data-n=\"nginx\"") && figure.contains("data-n=\"app\""));
        // Told apart by colour, every line solid: five dashed lines are unreadable.
        assert!(figure.contains("class=\"key line\"") && !figure.contains("class=\"key dash\""));
        for (i, run) in ["nginx", "app"].iter().enumerate() {
            let g = &figure[figure.find(&format!("data-n=\"{run}\"")).unwrap()..];
            let g = &g[..g.find("</g>").unwrap()];
            assert!(
                g.contains(Colour::nth(i).0),
                "{name}: {run} in its colour: {g}"
            );
        }
    }
    let p99 = &page[page.find("data-chart=\"latency-p99\"").unwrap()..];
    let p99 = &p99[..p99.find("</figure>").unwrap()];
    // app's step at 200 is drawn at its doubled p99; its last step was not run.
    let app = &p99[p99.find("data-n=\"app\"").unwrap()..];
    let app = &app[..app.find("</g>").unwrap()];
    let points: Vec<&str> = app
        .split("data-v=\"")
        .skip(1)
        .flat_map(|p| p[..p.find('"').unwrap()].split(','))
        .collect();
    assert!(points.contains(&"200 3.9"), "{p99}");
    assert!(!points.iter().any(|p| p.starts_with("600 ")), "{p99}");
    // The untrusted step of app is crossed on app's line alone, in every chart, and says whose;
    // no band covers nginx's point at that rate.
    let crossed = app
        .split("<path")
        .find(|p| p.contains("data-v=\"200 "))
        .unwrap();
    assert!(
        crossed.contains("class=\"mk x\"")
            && crossed.contains("<title>app at 200: invalid</title>"),
        "{app}"
    );
    assert!(!p99.contains("<rect class=\"t-invalid\""), "{p99}");
    assert!(p99.contains("✕: a step its run could not trust"), "{p99}");
    assert_eq!(
        page.matches("<title>app at 200: invalid</title>").count(),
        COMPARE_CHARTS.len() + COMPARE_MONITOR_CHARTS.len(),
        "on every chart, its own server's two among them"
    );
}

#[test]
fn each_run_s_own_server_is_one_cpu_line_and_one_memory_line() {
    assert!(
        !render_compare(&comparison()).contains("data-chart=\"server"),
        "no monitor, no server chart"
    );
    let mut nginx = run("nginx");
    for (i, s) in nginx.run.steps.iter_mut().enumerate() {
        s.server_monitors = vec![server::example("web1", 20.0 * i as f64)];
    }
    nginx.run.steps[1].server_monitors[0].partial = true;
    // app's one monitor watches the host alone: it is nobody's own server.
    let mut app = run("app");
    for s in &mut app.run.steps {
        let mut host = server::example("db", 50.0);
        host.target = None;
        s.server_monitors = vec![host];
    }
    let c = compare(vec![nginx, app], None, Threshold::default()).unwrap();
    let page = render_compare(&c);
    let last = page.find("data-chart=\"failures\"").unwrap();
    let cpu: fn(usize) -> f64 = |i| 20.0 * i as f64;
    let memory: fn(usize) -> f64 = |_| 3.0;
    for (name, want) in [("server", cpu), ("server-memory", memory)] {
        let key = format!("<figure class=\"chart\" data-chart=\"{name}\">");
        let here = page.find(&key).expect("a server chart");
        assert!(here > last, "after the others");
        let figure = &page[here..here + page[here..].find("</figure>").unwrap()];
        assert!(
            !figure.contains("data-n=\"app"),
            "app has no own server: {figure}"
        );
        assert_eq!(figure.matches(" data-n=").count(), 1, "one line per run");
        let g = &figure[figure.find("data-n=\"nginx\"").unwrap()..];
        let g = &g[..g.find("</g>").unwrap()];
        assert!(g.contains(Colour::nth(0).0), "nginx's colour: {g}");
        let values: Vec<&str> = g
            .split("data-v=\"")
            .skip(1)
            .map(|v| &v[..v.find('"').unwrap()])
            .collect();
        let all = values.join(",");
        for (i, row) in c.steps.iter().enumerate() {
            let want = format!("{} {}", row.value, want(i));
            assert!(all.split(',').any(|p| p == want), "{name}: {want} in {all}");
        }
        assert!(
            g.contains("class=\"mk lb\""),
            "the partial step hollow: {g}"
        );
    }
    // The ranking names nginx's CPU and memory at its kept-up step (step 4: 60 %, 3 MiB).
    let row = &page[page.find("<tr data-run=\"nginx\"").unwrap()..];
    let row = &row[..row.find("</tr>").unwrap()];
    assert!(row.contains("<td>60%</td><td>3 MiB</td>"), "{row}");
}

#[test]
fn a_metric_only_shown_is_never_marked_a_regression() {
    // app's server burns twice the CPU for the same replies: fewer requests per core-second,
    // shown worse, judged nothing.
    let mut nginx = run("nginx");
    let mut app = run("app");
    for (r, util) in [(&mut nginx, 20.0), (&mut app, 40.0)] {
        for s in &mut r.run.steps {
            s.server_monitors = vec![server::example("web", util)];
            s.ok_per_core_s = results::quantity::OK_PER_CORE_S.of_step(s);
        }
    }
    let c = compare(vec![nginx, app], None, Threshold::default()).unwrap();
    let page = render_compare(&c);
    let cell = td(&page, "300", "app", "ok_per_core_s");
    assert!(
        cell.contains("data-class=\"worse\"") && !cell.contains("regression"),
        "{cell}"
    );
    assert_eq!(
        page.matches("data-regression=\"1\"").count(),
        c.regressions.len()
    );
}

#[test]
fn the_page_opens_with_the_ranking_and_folds_the_verdicts_under_the_table() {
    let page = render_compare(&comparison());
    let ranking = page.find("<table id=\"ranking\">").expect("a ranking");
    let charts = page.find("<figure").unwrap();
    let table = page.find("<table id=\"compare\">").unwrap();
    let verdicts = page.find("<details class=\"verdicts\">").unwrap();
    assert!(ranking < charts && charts < table && table < verdicts);
    assert!(page[verdicts..].contains("<ul id=\"regressions\">"));
    // nginx kept up further than app (app's untrusted step at 200): first, in nginx's colour.
    let first = &page[ranking..];
    let first = &first[first.find("<tbody>").unwrap()..];
    assert!(
        first.starts_with("<tbody>\n<tr data-run=\"nginx\" data-rank=\"1\">"),
        "{first}"
    );
    let app = &first[first.find("data-run=\"app\"").unwrap()..];
    assert!(app.contains(&format!("--c:{}", Colour::nth(1).0)), "{app}");
}

/// Searches side by side open with their answers in one line, and rank on them.
#[test]
fn searches_open_with_the_line_of_their_answers_and_a_column_of_them() {
    const SEARCH: &str = include_str!("../../../results/tests/golden/find-max-run/run.json");
    let search = |label: &str, scale: f64| {
        let mut run = RunFile::parse(SEARCH, Path::new("run.json")).unwrap();
        for s in &mut run.steps {
            s.step_value *= scale;
            s.demanded_rate = s.demanded_rate.map(|d| d * scale);
        }
        run.capacity
            .as_mut()
            .unwrap()
            .max_rate
            .as_mut()
            .unwrap()
            .offered *= scale;
        Labelled {
            label: label.into(),
            source: format!("results/{label}"),
            run,
        }
    };
    let c = compare(
        vec![search("slow", 1.0), search("fast", 2.0)],
        None,
        Threshold::default(),
    )
    .unwrap();
    let page = render_compare(&c);
    let line = page
        .find("<p class=\"max-under-slo\">max under p99&lt;50ms: fast 1,600 req/s, slow 800</p>")
        .expect("the searches' line");
    let ranking = page.find("<table id=\"ranking\">").unwrap();
    assert!(line < ranking);
    let table = &page[ranking..];
    assert!(
        table.contains("<th>max (req/s)</th><th>search</th>"),
        "{table}"
    );
    let fast = &table[table.find("data-run=\"fast\" data-rank=\"1\"").unwrap()..];
    assert!(
        fast.contains("</th><td>1,600</td><td class=\"l\">resolved</td>"),
        "{fast}"
    );
    // Its answer is the search's bounds; that searches probed other rates is no banner.
    assert!(fast.contains("<td class=\"answer l\">sustains "), "{fast}");
    assert!(
        c.banners.is_empty() && !page.contains("has no step at"),
        "{:?}",
        c.banners
    );
    // A planned run's page has neither.
    let planned = render_compare(&comparison());
    assert!(
        !planned.contains("<p class=\"max-under-slo\">") && !planned.contains("<th>search</th>")
    );
}

#[test]
fn the_table_greys_noise_reddens_regressions_and_marks_doubt() {
    let c = comparison();
    let page = render_compare(&c);
    let worse = td(&page, "300", "app", "p99_ms");
    assert!(
        worse.contains("data-class=\"worse\" data-regression=\"1\" class=\"regression\"")
            && worse.contains("<span class=\"d\">+100.0%</span>"),
        "{worse}"
    );
    let noise = td(&page, "300", "app", "p50_ms");
    assert!(noise.contains("data-class=\"noise\">"), "{noise}");
    let untrusted = td(&page, "200", "app", "p99_ms");
    assert!(
        untrusted.contains("data-class=\"worse\" class=\"untrusted\"")
            && !untrusted.contains("data-regression"),
        "{untrusted}"
    );
    assert!(untrusted.contains("not trusted"), "{untrusted}");
    let base = td(&page, "300", "nginx", "p99_ms");
    assert!(base.contains("data-class=\"baseline\">"), "{base}");
    assert!(page.contains("no such step"));
    assert_eq!(
        page.matches("data-regression=\"1\"").count(),
        c.regressions.len()
    );
    assert!(page.contains("<ul id=\"regressions\">"));
    assert!(page.contains("app has no step at 600 req/s."));
    // Sub-millisecond jitter is grey: p50 moved by less than 0.1 ms nowhere reads red.
    let jitter = td(&page, "400", "app", "p50_ms");
    assert!(!jitter.contains("regression"), "{jitter}");
}

/// Issue 12's budget: a comparison of 5 runs × 20 steps in under 300 KB.
#[test]
fn five_runs_of_twenty_steps_fit_in_300_kb() {
    let runs: Vec<Labelled> = (0..5)
        .map(|i| {
            let mut r = run(&format!("run-{i}"));
            let template = r.run.steps.clone();
            r.run.steps = (0..20)
                .map(|k| {
                    let mut s = template[k % template.len()].clone();
                    s.number = k as u32 + 1;
                    s.step_value = 100.0 * (k + 1) as f64;
                    s.demanded_rate = Some(s.step_value);
                    s.latency_ms.p99 *= 1.0 + 0.1 * i as f64;
                    s
                })
                .collect();
            r
        })
        .collect();
    let c = compare(runs, None, Threshold::default()).unwrap();
    assert_eq!(c.steps.len(), 20);
    let page = render_compare(&c);
    assert!(page.len() < 300 * 1024, "{} bytes", page.len());
}

#[test]
fn what_a_run_carries_is_shown_as_text() {
    const PAYLOAD: &str = "</script><img src=x onerror=alert(1)>";
    let mut a = run(PAYLOAD);
    a.run.target = PAYLOAD.into();
    let c = compare(vec![a, run("b")], None, Threshold::default()).unwrap();
    let page = render_compare(&c);
    assert!(!page.contains("<img"), "markup from a run reached the page");
    assert!(page.contains("&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;"));
    // The embedded JSON cannot end its script element, and reads back the label.
    let start = page.find("id=\"stampede-data\">").unwrap() + "id=\"stampede-data\">".len();
    let json = &page[start..start + page[start..].find("</script>").unwrap()];
    let v: serde_json::Value = serde_json::from_str(json).unwrap();
    assert_eq!(v["runs"][0]["label"], PAYLOAD);
}

/// The `<g class="plot …">` group of chart `name` whose class is `class` (`log`, `lin off`).
fn plot<'a>(page: &'a str, name: &str, class: &str) -> &'a str {
    let figure = &page[page.find(&format!("data-chart=\"{name}\"")).unwrap()..];
    let figure = &figure[..figure.find("</figure>").unwrap()];
    let g = figure
        .find(&format!("<g class=\"plot {class}\""))
        .unwrap_or_else(|| panic!("{name}: no plot {class}: {figure}"));
    let g = &figure[g..];
    // The plot group ends where the next one or the readout begins.
    let end = g[1..]
        .find("<g class=\"plot")
        .or_else(|| g.find("<text class=\"ro\""))
        .unwrap();
    &g[..end + 1]
}

/// The y pixels of `run`'s points in a plot group (each marker's `M x y`).
fn ys(plot: &str, run: &str) -> Vec<f64> {
    let g = &plot[plot.find(&format!("data-n=\"{run}\"")).unwrap()..];
    let g = &g[..g.find("</g>").unwrap()];
    let d = g.split("class=\"mk\" d=\"").nth(1).unwrap();
    let d = &d[..d.find('"').unwrap()];
    d.split('M')
        .skip(1)
        .map(|p| {
            p.trim_end_matches("h0")
                .split(' ')
                .nth(1)
                .unwrap()
                .parse()
                .unwrap()
        })
        .collect()
}

/// The y axis' title and tick labels of a plot group.
fn y_axis(plot: &str) -> (String, Vec<String>) {
    let title = plot
        .split("rotate(-90)\" text-anchor=\"middle\">")
        .nth(1)
        .unwrap();
    let title = title[..title.find("</text>").unwrap()].to_string();
    let ticks = plot
        .split("text-anchor=\"end\">")
        .skip(1)
        .map(|t| t[..t.find("</text>").unwrap()].to_string())
        .filter(|t| !t.is_empty())
        .collect();
    (title, ticks)
}

/// Issue 34: aiohttp's 4 s p99 flattened node's 37 ms onto a linear axis's foot, and the axes
/// were titled `p99_ms`. Values more than 100× apart are drawn on a log scale that says so,
/// ticked at 1, 2 and 5 of each decade, and both lines stand clear of the axis and each other.
#[test]
fn latencies_a_hundred_times_apart_get_a_log_scale_that_says_so() {
    let mut node = run("node");
    let mut aiohttp = run("aiohttp");
    for (i, (n, a)) in node
        .run
        .steps
        .iter_mut()
        .zip(&mut aiohttp.run.steps)
        .enumerate()
    {
        n.latency_ms.p99 = 20.0 + 3.4 * i as f64; // 20 to 37 ms
        a.latency_ms.p99 = 2000.0 + 400.0 * i as f64; // 2 to 4 s
    }
    let page = render_compare(&compare(vec![node, aiohttp], None, Threshold::default()).unwrap());
    let log = plot(&page, "latency-p99", "log");
    let (title, ticks) = y_axis(log);
    assert_eq!(title, "p99 latency (ms), log scale");
    assert_eq!(
        ticks,
        [
            "10 ms", "20 ms", "50 ms", "100 ms", "200 ms", "500 ms", "1 s", "2 s", "5 s", "10 s"
        ]
    );
    // The frame's foot is at y = 224 (260 high, 36 below); node's lowest point, 20 ms, a
    // tenth of the way up three decades.
    let (node, aiohttp) = (ys(log, "node"), ys(log, "aiohttp"));
    assert_eq!(node.len(), 6);
    assert!(
        node.iter().all(|y| *y < 224.0 - 15.0),
        "clear of the axis: {node:?}"
    );
    let mut all: Vec<f64> = node.iter().chain(&aiohttp).copied().collect();
    all.sort_by(f64::total_cmp);
    all.dedup();
    assert_eq!(
        all.len(),
        12,
        "every point its own height: {node:?} {aiohttp:?}"
    );
    // The linear scale is a switch away, and there node lay on the axis.
    let lin = plot(&page, "latency-p99", "lin off");
    assert_eq!(y_axis(lin).0, "p99 latency (ms)");
    assert!(ys(lin, "node").iter().all(|y| *y > 224.0 - 3.0));
    let figure = &page[page.find("data-chart=\"latency-p99\"").unwrap()..];
    assert!(
        figure.contains(">linear scale</button>"),
        "the switch names the other"
    );
}

/// Within 100× a linear scale reads best: the golden run's p50 at 300 req/s and below.
#[test]
fn latencies_within_a_hundred_times_stay_linear() {
    let short = |label: &str| {
        let mut r = run(label);
        r.run.steps.truncate(4);
        r
    };
    let page =
        render_compare(&compare(vec![short("a"), short("b")], None, Threshold::default()).unwrap());
    let lin = plot(&page, "latency-p99", "lin");
    assert_eq!(y_axis(lin).0, "p99 latency (ms)");
    assert_eq!(
        y_axis(plot(&page, "latency-p99", "log off")).0,
        "p99 latency (ms), log scale"
    );
}

/// Issue 34: the y axes were titled by column key (`ok_rate`, `p99_ms`): words with units.
#[test]
fn every_y_axis_is_titled_in_words_with_its_unit() {
    let page = render_compare(&comparison());
    for (name, want) in [
        ("rates", "served (req/s)"),
        // 1.3 to 253 ms: more than 100× apart.
        ("latency-p50", "p50 latency (ms), log scale"),
        ("failures", "failed (% of requests)"),
    ] {
        let figure = &page[page.find(&format!("data-chart=\"{name}\"")).unwrap()..];
        let g = &figure[figure.find("<g class=\"plot").unwrap()..];
        assert_eq!(y_axis(g).0, want, "{name}");
    }
    for key in ["ok_rate", "p99_ms", "p50_ms", "failed_pct"] {
        assert!(
            !page.contains(&format!("rotate(-90)\" text-anchor=\"middle\">{key}<")),
            "{key}"
        );
    }
}

/// Issue 34: the ranking's answer cell held the whole answer in small grey type. It holds
/// the headline at the table's size, the whole answer on hover, and its knee and kept-up
/// numbers are the ones the headline says.
#[test]
fn the_ranking_shows_each_run_s_headline_at_full_size_agreeing_with_its_numbers() {
    let mut nginx = run("nginx");
    nginx.run.summary = Some(results::step::summarize_run(&nginx.run.steps));
    let summary = nginx.run.summary.clone().unwrap();
    assert!(!summary.headline.is_empty() && summary.headline != summary.answer);
    let c = compare(vec![nginx, run("app")], None, Threshold::default()).unwrap();
    let page = render_compare(&c);
    let row = &page[page.find("<tr data-run=\"nginx\"").unwrap()..];
    let row = &row[..row.find("</tr>").unwrap()];
    let cell = &row[row.find("<td class=\"answer l\"").unwrap()..];
    let text = &cell[cell.find('>').unwrap() + 1..cell.find("</td>").unwrap()];
    assert_eq!(text, html(&summary.headline));
    assert!(
        cell.contains(&format!("title=\"{}\"", html(&summary.answer))),
        "{cell}"
    );
    let css = &page[page.find("#ranking .answer{").unwrap()..];
    let css = &css[..css.find('}').unwrap()];
    // The table's size: neither the old 85 % nor the run page's lead (`.answer`, 1.2em).
    assert!(css.contains("font-size:100%"), "at the table's size: {css}");
    // The knee and kept-up cells say the headline's numbers.
    let r = &c.ranking.iter().find(|r| r.label == "nginx").unwrap();
    let kept = human(r.kept_up_to.unwrap());
    let knee = human(r.knee_at.unwrap());
    assert!(
        summary
            .headline
            .starts_with(&format!("kept up to {kept} req/s")),
        "{}",
        summary.headline
    );
    assert!(
        summary.headline.contains(&format!("broke at {knee}")),
        "{}",
        summary.headline
    );
    assert!(
        row.contains(&format!("<td>{knee} <span class=\"cause\">")),
        "{row}"
    );
    assert!(row.contains(&format!("<td>{kept}</td>")), "{row}");
}

/// Issue 34: a closed loop beside a requests run was ranked under "knee (req/s)" and "kept up
/// to (req/s)" holding its connection counts. Runs on different axes are ranked on the rate
/// served, its column in req/s, each run's step values in its own unit.
#[test]
fn runs_on_different_axes_are_ranked_on_served_requests_with_their_own_units() {
    let mut nginx = run("nginx");
    nginx.run.plan.model = "concurrency".into();
    for (s, n) in nginx
        .run
        .steps
        .iter_mut()
        .zip([1.0, 2.0, 4.0, 8.0, 16.0, 32.0])
    {
        s.model = "concurrency".into();
        (s.step_value, s.demanded_rate, s.ok_rate) = (n, None, 250.0 * n);
    }
    nginx.run.summary.as_mut().unwrap().kept_up_to = Some(8.0);
    let page =
        render_compare(&compare(vec![run("node"), nginx], None, Threshold::default()).unwrap());
    let table = &page[page.find("<table id=\"ranking\">").unwrap()..];
    let head = &table[..table.find("</thead>").unwrap()];
    assert!(head.contains("served there (req/s)</th>"), "{head}");
    assert!(
        !head.contains("(connections)") && !head.contains("knee (req/s)"),
        "{head}"
    );
    let first = &table[table.find("<tbody>").unwrap()..];
    assert!(
        first.starts_with("<tbody>\n<tr data-run=\"nginx\" data-rank=\"1\">"),
        "{first}"
    );
    let nginx = &first[..first.find("</tr>").unwrap()];
    assert!(
        nginx.contains("<td>2,000</td>") && nginx.contains("<td>8 connections</td>"),
        "{nginx}"
    );
    let node = &first[first.find("data-run=\"node\"").unwrap()..];
    assert!(node.contains("<td>400 req/s</td>"), "{node}");
}

/// `label`'s golden run with the mix of `names`, each of `(name, served, µs each)` at every step.
fn named(label: &str, names: &[(&str, u64, u64)]) -> Labelled {
    let mut r = run(label);
    let list: Vec<String> = names.iter().map(|n| n.0.to_string()).collect();
    let stats: Vec<shared::metrics::NameStats> = names
        .iter()
        .map(|n| {
            let mut s = shared::metrics::NameStats::default();
            s.counters.requests = n.1;
            s.counters.replies = n.1;
            s.counters.ok = n.1;
            s.latency.record_n(n.2, n.1).unwrap();
            s
        })
        .collect();
    for step in &mut r.run.steps {
        step.per_request =
            results::step::per_request::rows(&list, &vec![1; list.len()], &stats, 1.0);
    }
    r
}

#[test]
fn a_named_mix_has_a_table_of_names_and_the_names_one_side_lacks() {
    let c = compare(
        vec![
            named("nginx", &[("home", 100, 2_000), ("slow", 50, 5_000)]),
            named(
                "app",
                &[
                    ("home", 100, 2_000),
                    ("slow", 50, 50_000),
                    ("new", 1, 1_000),
                ],
            ),
        ],
        None,
        Threshold::default(),
    )
    .unwrap();
    let page = render_compare(&c);
    assert!(page.contains("<table id=\"compare-requests\">"));
    assert!(
        page.contains("<li>only app has, not nginx (not compared): new</li>"),
        "names only one side has"
    );
    let row = "<tr data-value=\"100\" data-run=\"app\" data-name=\"slow\">";
    let at = page.find(row).expect("a row per value, run and name");
    let row = &page[at..at + page[at..].find("</tr>").unwrap()];
    assert!(
        row.contains("data-metric=\"p99_ms\" data-class=\"worse\""),
        "{row}"
    );
    assert!(
        !row.contains("data-regression"),
        "shown, never a regression: {row}"
    );
    let home = "<tr data-value=\"100\" data-run=\"app\" data-name=\"home\">";
    let at = page.find(home).unwrap();
    let home = &page[at..at + page[at..].find("</tr>").unwrap()];
    assert!(
        home.contains("data-metric=\"p99_ms\" data-class=\"noise\""),
        "{home}"
    );
    let plain = render_compare(&comparison());
    assert!(!plain.contains("compare-requests"));
    assert!(!plain.contains("Request by request"));
}
