//! The knee of a real run: `stampede serve --capacity` is a server with a known limit, injected on
//! its side (it serves at most so many a second and queues the rest), so a ramp across it shows the
//! knee at the first step past the capacity, named for its latency, in run.json, the answer and the
//! report, with the server's requests per core-second from its monitor.
use tests::{ServeProcess, run_ok};

#[test]
fn a_ramp_across_a_servers_capacity_names_its_knee_and_the_latency_that_shows_it() {
    // 20 ms per reply raises the low-load p99 well above a loaded machine's jitter, so the knee
    // (4x that) is the queue behind the capacity (a second and more at 600/s), never noise. The
    // steps stay well away from the capacity on both sides.
    let target = ServeProcess::start(&["--capacity", "400", "--delay", "20ms"]);
    let pid = target.pid().to_string();
    let ran = run_ok(&[
        &target.url(),
        "--model",
        "requests",
        "--steps",
        "100,300,600,800",
        "--step-duration",
        "2s",
        "--monitor-pid",
        &pid,
    ]);
    let summary = &ran.run["summary"];
    let knee = &summary["knee"];
    assert_eq!(knee["step_value"], 600.0, "{summary:#}");
    assert_eq!(knee["cause"], "latency", "{summary:#}");
    assert_eq!(knee["servers"], true);
    // The served rate stood at the capacity while the offer doubled: the plateau held there too.
    assert!(
        knee["also"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c == "plateau"),
        "{knee:#}"
    );
    let (low, p99) = (
        knee["low_p99_ms"].as_f64().unwrap(),
        knee["p99_ms"].as_f64().unwrap(),
    );
    assert!(low >= 20.0 && p99 >= 4.0 * low, "{knee:#}");
    let ok_rate = knee["ok_rate"].as_f64().unwrap();
    assert!(
        ok_rate <= 440.0,
        "served {ok_rate}/s past a capacity of 400/s"
    );
    assert_eq!(knee["monitor"], "server");
    assert!(knee["ok_per_core_s"].as_f64().unwrap() > 0.0, "{knee:#}");
    let answer = summary["answer"].as_str().unwrap();
    assert!(
        answer.starts_with("knee at 600 req/s: p99 rose "),
        "{answer}"
    );
    // The headline: short, its knee the knee's step, "kept up to" the step before it, and what
    // stdout says.
    let headline = summary["headline"].as_str().unwrap();
    assert!(headline.chars().count() <= 120, "{headline}");
    assert!(
        headline.starts_with("kept up to 300 req/s (p99 ")
            && headline.contains("; broke at 600: p99 ×"),
        "{headline}"
    );
    assert_eq!(summary["kept_up_to"], 300.0, "{summary:#}");
    assert_eq!(summary["finding"], "knee");
    assert!(
        ran.stdout.contains(&format!("answer: {headline}\n")),
        "{}",
        ran.stdout
    );
    // Each step's requests per server core-second: a number above 0, or absent, never 0.
    for s in ran.steps() {
        match s.get("ok_per_core_s") {
            Some(v) => assert!(v.as_f64().unwrap() > 0.0, "{s:#}"),
            None => assert!(
                s["server_monitors"][0]["target"]["cpu_pct"].as_f64() == Some(0.0),
                "no ok_per_core_s though the server used CPU"
            ),
        }
    }
    // The report marks the knee, with its cause, on its charts against the offered load.
    let report = std::fs::read_to_string(ran.dir.path().join("report.html")).unwrap();
    assert!(
        report.contains("<g data-knee=\"latency\">") && report.contains("knee 600: latency"),
        "the report marks no knee"
    );
}
