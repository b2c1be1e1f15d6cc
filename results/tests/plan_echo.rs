//! run.json's typed `plan` (`results::run_file::PlanEcho`) reads and writes back every golden and
//! fixture run byte for byte: the /3 golden, the /2 fixture, a monitored find-max run, a search's
//! `find_max`, and keys it does not know.
use std::path::Path;

use results::run_file::RunFile;

fn round_trip(rel: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(rel);
    let text = std::fs::read_to_string(&path).unwrap();
    let run = RunFile::parse(&text, &path).expect("it reads");
    assert_eq!(
        run.to_json(),
        text.trim_end_matches('\n'),
        "{rel} written back"
    );
}

#[test]
fn the_golden_and_the_schema_2_fixture_are_written_back_byte_for_byte() {
    round_trip("tests/golden/run.json");
    round_trip("tests/fixtures/run-v2/run.json");
    round_trip("tests/golden/find-max-run/run.json");
}

#[test]
fn a_search_plan_and_unknown_keys_survive_a_round_trip() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/run.json");
    let text = std::fs::read_to_string(&path).unwrap();
    let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
    v["plan"]["find_max"] = serde_json::json!({
        "confirm_s": 30.0, "cooldown_s": 2.0, "deadline_s": 1800.0, "max_rate": null,
        "precision_pct": 5.0, "probe_s": 10.0, "repeat": 2, "slos": ["p99<50ms"],
        "start": 100.0, "warmup_s": 2.0
    });
    v["plan"]["from_a_newer_build"] = serde_json::json!({"x": [1, 2]});
    let text = serde_json::to_string_pretty(&v).unwrap();
    let run = RunFile::parse(&text, &path).unwrap();
    assert!(run.is_search());
    assert_eq!(run.plan.find_max.as_ref().unwrap().slos, ["p99<50ms"]);
    assert_eq!(run.to_json(), text);
}

#[test]
fn the_protocol_and_streams_are_typed_and_written_back_and_an_older_file_has_none() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/run.json");
    let text = std::fs::read_to_string(&path).unwrap();
    // The golden predates HTTP/2: neither key, and none is added writing it back.
    let old = RunFile::parse(&text, &path).unwrap();
    assert_eq!((old.plan.http.as_deref(), old.plan.streams), (None, None));
    assert!(!old.to_json().contains("\"streams\""));
    let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
    v["plan"]["http"] = serde_json::json!("2");
    v["plan"]["streams"] = serde_json::json!(10);
    let text = serde_json::to_string_pretty(&v).unwrap();
    let run = RunFile::parse(&text, &path).unwrap();
    assert_eq!(
        (run.plan.http.as_deref(), run.plan.streams),
        (Some("2"), Some(10))
    );
    assert!(run.plan.other.is_empty(), "known keys, not kept as unknown");
    assert_eq!(run.to_json(), text);
}
