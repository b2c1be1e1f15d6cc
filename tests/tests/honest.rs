//! Answers a person reads off a run, checked against servers whose truth the test knows: failures
//! counted as failures, requests given up kept in the latency as lower bounds, short steps, Poisson
//! schedules, the server's column and the run's one-sentence answer.
use std::time::Duration;

use tests::{ServeProcess, StatusServer, run_ok};

fn f(v: &serde_json::Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// steps.tsv as (header, rows).
fn tsv(dir: &std::path::Path) -> (Vec<String>, Vec<Vec<String>>) {
    let text = std::fs::read_to_string(dir.join("steps.tsv")).unwrap();
    let mut lines = text
        .lines()
        .map(|l| l.split('\t').map(str::to_string).collect());
    let head: Vec<String> = lines.next().unwrap();
    (head, lines.collect())
}

fn cell<'a>(head: &[String], row: &'a [String], name: &str) -> &'a str {
    let i = head
        .iter()
        .position(|h| h == name)
        .unwrap_or_else(|| panic!("no column {name} in {head:?}"));
    &row[i]
}

#[test]
fn http_503_replies_read_as_success() {
    // A rate limiter's answer: every third request 503, fast.
    let server = StatusServer::every(3, 503);
    let ran = run_ok(&[
        &server.url(),
        "--model",
        "requests",
        "--steps",
        "150",
        "--step-duration",
        "2s",
    ]);
    let step = ran.step(0);
    let failed = f(&step["failed_pct"]);
    assert!((30.0..=36.0).contains(&failed), "failed {failed}%: {step}");
    let ok_rate = f(&step["ok_rate"]);
    assert!(
        (90.0..=110.0).contains(&ok_rate),
        "ok_rate {ok_rate}: {step}"
    );
    assert_eq!(step["server"], "failing", "{step}");
    assert_eq!(
        step["status_codes"]["503"],
        step["replies"].as_u64().unwrap() - step["ok"].as_u64().unwrap()
    );
    let notes = step["notes"].to_string();
    assert!(notes.contains("% were 503"), "{notes}");
    // The fast 503s are apart from the served latency.
    assert!(step["unexpected_latency_ms"]["p50"].as_f64().unwrap() > 0.0);
    // autobench's errors column keeps its meaning (transport errors), the failed share is beside it.
    let (head, rows) = tsv(ran.dir.path());
    let host = format!("errors_{}", server.addr.ip());
    assert_eq!(cell(&head, &rows[0], &host), "0");
    assert!(cell(&head, &rows[0], "failed_pct").starts_with("3"));
    assert_eq!(cell(&head, &rows[0], "server"), "failing");
    // The stdout table's failure column is the failed share.
    assert!(ran.stdout.contains("failing"), "{}", ran.stdout);
    assert!(
        ran.stdout.lines().nth(1).unwrap().contains("%"),
        "{}",
        ran.stdout
    );

    // --ok-status says which statuses are served.
    let ran = run_ok(&[
        &server.url(),
        "--model",
        "requests",
        "--steps",
        "100",
        "--step-duration",
        "1s",
        "--ok-status",
        "200-399,503",
    ]);
    assert_eq!(f(&ran.step(0)["failed_pct"]), 0.0, "{}", ran.step(0));
    assert_eq!(ran.step(0)["server"], "ok");
    assert_eq!(ran.run["plan"]["ok_status"], "200-399,503");
}

#[test]
fn bad_ok_status_is_refused_naming_the_part() {
    let target = ServeProcess::start(&[]);
    let o = tests::stampede(&["run", &target.url(), "--ok-status", "200-2xx", "--quiet"]);
    assert_eq!(o.status.code(), Some(2));
    let err = tests::text(&o.stderr);
    assert!(
        err.contains("bad --ok-status '200-2xx': '2xx' is not a status code"),
        "{err}"
    );
}

#[test]
fn requests_never_completed_vanish_from_the_latency() {
    // The target stops answering for 2 s inside a 4 s step; the timeout is 1 s.
    let target = ServeProcess::start(&[]);
    let staller = target.stall_after(Duration::from_millis(1000), 2000);
    let ran = run_ok(&[
        &target.url(),
        "--model",
        "requests",
        "--steps",
        "50",
        "--step-duration",
        "4s",
        "--timeout",
        "1s",
    ]);
    staller.join().unwrap();
    let step = ran.step(0);
    let l = &step["latency_ms"];
    assert!(f(&l["p99"]) >= 1000.0, "p99 of the survivors: {step}");
    assert_eq!(l["censored"], true, "{step}");
    let bounds = l["lower_bound"].to_string();
    assert!(bounds.contains("\"p99\""), "{bounds}");
    assert!(step["given_up"].as_u64().unwrap() > 0);
    // Timeouts are failures of the server's, not survivors left out.
    assert!(f(&step["failed_pct"]) > 10.0, "{step}");
    // The table shows the bound as one.
    assert!(ran.stdout.contains("≥1"), "{}", ran.stdout);
    let (head, rows) = tsv(ran.dir.path());
    assert!(cell(&head, &rows[0], "lower_bound").contains("p99"));
}

#[test]
fn short_num_conn_step_reports_zero_reply_rate() {
    // autobench's habit: 100 connections at 200 conn/s is a half-second step.
    let target = ServeProcess::start(&[]);
    let ran = run_ok(&[
        &target.url(),
        "--low_rate",
        "200",
        "--high_rate",
        "200",
        "--rate_step",
        "10",
        "--num_conn",
        "100",
        "--num_call",
        "2",
    ]);
    let step = ran.step(0);
    for k in ["min", "avg", "max"] {
        let v = f(&step["reply_rate"][k]);
        assert!(v > 200.0, "{k}_rep_rate {v}: {step}");
    }
    let (head, rows) = tsv(ran.dir.path());
    let host = format!("avg_rep_rate_{}", target.addr.ip());
    assert_ne!(cell(&head, &rows[0], &host), "0");
}

#[test]
fn poisson_arrivals_blame_the_target_wrongly() {
    // Seed 3's Poisson schedule holds 18 arrivals in 2 s at 10/s: every one sent and answered.
    let target = ServeProcess::start(&[]);
    let ran = run_ok(&[
        &target.url(),
        "--model",
        "requests",
        "--arrival",
        "poisson",
        "--steps",
        "10",
        "--step-duration",
        "2s",
        "--seed",
        "3",
    ]);
    let step = ran.step(0);
    assert_eq!(step["requests"], step["replies"]);
    let said = format!("{} {}", step["notes"], step["reasons"]);
    assert!(!said.contains("did not keep up"), "{said}");
    assert!(!said.contains("of demanded"), "{said}");
    assert_eq!(step["server"], "ok", "{step}");
}

#[test]
fn the_run_ends_with_where_the_server_broke() {
    // A target that serves 300 req/s: the ramp crosses it.
    let target = ServeProcess::start(&["--capacity", "300"]);
    let ran = run_ok(&[
        &target.url(),
        "--model",
        "requests",
        "--steps",
        "100,200,600",
        "--step-duration",
        "2s",
        "--timeout",
        "1s",
    ]);
    let summary = &ran.run["summary"];
    assert_eq!(f(&summary["kept_up_to"]), 200.0, "{summary}");
    assert_eq!(f(&summary["beyond"]["step_value"]), 600.0, "{summary}");
    let answer = summary["answer"].as_str().unwrap();
    // It leads with the knee, past the capacity; what was kept up with follows, as before.
    assert!(answer.starts_with("knee at 600 req/s: "), "{answer}");
    assert_eq!(summary["knee"]["step_value"], 600.0, "{summary}");
    assert!(answer.contains("; kept up to 200 req/s (p99 "), "{answer}");
    assert!(answer.contains("; at 600 req/s it served "), "{answer}");
    // stdout's answer is the headline: the knee's step above the one kept up with.
    let headline = summary["headline"].as_str().unwrap();
    assert!(
        headline.starts_with("kept up to 200 req/s (p99 ") && headline.contains("; broke at 600: "),
        "{headline}"
    );
    assert!(
        ran.stdout.contains(&format!("answer: {headline}\n")),
        "{}",
        ran.stdout
    );
    // Past its capacity the server is not ok, whatever the generator's trust.
    assert_ne!(ran.step(2)["server"], "ok", "{}", ran.step(2));
    assert_eq!(ran.step(0)["server"], "ok", "{}", ran.step(0));
}

#[test]
fn demo_did_not_say_where_its_target_broke() {
    // The demo's target serves at most 400 req/s; the ramp runs 100 to 600.
    let out = tempfile::tempdir().unwrap();
    let o = tests::stampede(&[
        "demo",
        "--step-duration",
        "2s",
        "--quiet",
        "--out",
        out.path().to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", tests::text(&o.stderr));
    let run = tests::run_json(out.path());
    let stdout = tests::text(&o.stdout);
    // At 400 req/s the target runs at exactly its capacity: any jitter queues there and never
    // drains, so the knee is that step or the first past it, never before, never later; and
    // "kept up to" is the step before the knee (it read "knee at 400 … kept up to 400").
    let knee = f(&run["summary"]["knee"]["step_value"]);
    assert!(knee == 400.0 || knee == 500.0, "{}", run["summary"]);
    let kept = f(&run["summary"]["kept_up_to"]);
    assert_eq!(kept, knee - 100.0, "{}", run["summary"]);
    let headline = run["summary"]["headline"].as_str().unwrap();
    assert!(
        headline.starts_with(&format!("kept up to {kept} req/s (p99 "))
            && headline.contains(&format!("; broke at {knee}: ")),
        "{headline}"
    );
    assert!(headline.chars().count() <= 120, "{headline}");
    assert!(
        stdout.contains(&format!("answer: {headline}\n")),
        "{stdout}"
    );
    // Past the knee the served rate is the capacity, not the demand.
    let last = &run["steps"][5];
    assert!(f(&last["ok_rate"]) < 450.0, "{last}");
    assert_ne!(last["server"], "ok", "{last}");
}

#[test]
fn ab_n_rates_were_divided_by_the_nominal_step_length() {
    // ab -n 300 -c 3 against a 2 ms target: done in a fraction of the 10 s default step.
    let target = ServeProcess::start(&["--delay", "2ms"]);
    let ran = run_ok(&["-n", "300", "-c", "3", &target.url()]);
    let step = ran.step(0);
    assert_eq!(step["requests"], 300, "{step}");
    let secs = f(&step["duration_s"]);
    assert!(secs < 5.0, "the step took {secs} s of its 10: {step}");
    let rate = f(&step["achieved_request_rate"]);
    assert!(
        (rate * secs / 300.0 - 1.0).abs() < 0.01 && rate > 60.0,
        "{rate} req/s over {secs} s: {step}"
    );
}
