//! docs/reference's JSON Schemas held to the truth twice over: they are what the types derive today
//! (`results::schema`; a difference fails with the command that regenerates them), and a validator we
//! did not write (PyPI's check-jsonschema, `STAMPEDE_CHECK_JSONSCHEMA`, installed by `.ci/run`)
//! accepts every golden and fixture and a fresh output of every command that writes one of those
//! files, and refuses a file with a value of the wrong type or an unknown word, so no schema is `{}`.
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};
use tests::{ServeProcess, run_json, stampede, text};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn reference(name: &str) -> PathBuf {
    root().join("docs/reference").join(name)
}

const REGENERATE: &str =
    "cargo run -p results --example schemas --features schema -- docs/reference";

#[test]
fn the_committed_schemas_are_the_types_schemas() {
    for (name, fresh) in results::schema::files() {
        let path = reference(name);
        if std::env::var_os("STAMPEDE_BLESS").is_some() {
            std::fs::write(&path, &fresh).unwrap();
            continue;
        }
        let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            on_disk == fresh,
            "docs/reference/{name} is not the schema its types derive; regenerate it with:\n    {REGENERATE}\n(or STAMPEDE_BLESS=1 cargo test -p tests --test schemas)"
        );
    }
}

/// The check-jsonschema to run: `STAMPEDE_CHECK_JSONSCHEMA`, else the venv `.ci/run` makes. None
/// (the test skips, saying why) only outside CI.
fn validator(test: &str) -> Option<PathBuf> {
    let path = std::env::var_os("STAMPEDE_CHECK_JSONSCHEMA")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("target/jsonschema-venv/bin/check-jsonschema"));
    if path.is_file() {
        return Some(path);
    }
    let why = format!(
        "{test}: no check-jsonschema at {} (set STAMPEDE_CHECK_JSONSCHEMA, or run .ci/run's block that installs it)",
        path.display()
    );
    assert!(std::env::var("CI").as_deref() != Ok("true"), "{why}");
    eprintln!("skipped: {why}");
    None
}

/// check-jsonschema's verdict on `files` against `schema`: its output when it refused them.
fn check(validator: &Path, schema: &Path, files: &[PathBuf]) -> Result<(), String> {
    assert!(!files.is_empty(), "nothing to validate against {schema:?}");
    let o = Command::new(validator)
        .arg("--schemafile")
        .arg(schema)
        .args(files)
        .output()
        .expect("check-jsonschema runs");
    let said = format!("{}\n{}", text(&o.stdout), text(&o.stderr));
    match o.status.code() {
        Some(0) => Ok(()),
        // Its exit code for instances that do not validate; anything else is the tool failing.
        Some(1) if said.contains("Schema validation errors") => Err(said),
        _ => panic!("check-jsonschema failed to run on {schema:?}: {said}"),
    }
}

fn valid(validator: &Path, schema: &str, files: &[PathBuf]) {
    if let Err(said) = check(validator, &reference(schema), files) {
        panic!("{files:?} do not validate against {schema}: {said}");
    }
}

/// events.ndjson split into one file per line (check-jsonschema reads whole JSON documents): the
/// files, and how many lines of each event there were.
fn event_files(ndjson: &Path, into: &Path) -> (Vec<PathBuf>, Vec<String>) {
    let text = std::fs::read_to_string(ndjson).unwrap();
    let mut files = Vec::new();
    let mut kinds = Vec::new();
    std::fs::create_dir_all(into).unwrap();
    for (i, line) in text.lines().enumerate() {
        let event: Value = serde_json::from_str(line).unwrap();
        kinds.push(event["event"].as_str().unwrap_or("?").to_string());
        let path = into.join(format!("{i:05}.json"));
        std::fs::write(&path, line).unwrap();
        files.push(path);
    }
    (files, kinds)
}

/// `schema` with every object closed (`unevaluatedProperties: false`) but those that say what else
/// they take (run.json's `plan`), for what stampede writes today: a key the schema does not name
/// (a hand-written `Serialize` the schema forgot) fails, which the open schemas would let through. A
/// branch of `oneOf`/`anyOf`/`allOf` is left open: the object holding it closes over all it evaluates.
fn closed(schema: &Value) -> Value {
    fn walk(v: &mut Value, branch: bool) {
        match v {
            Value::Object(m) => {
                let object = m.contains_key("properties") || m.contains_key("oneOf");
                if object && !branch && !m.contains_key("additionalProperties") {
                    m.insert("unevaluatedProperties".into(), Value::Bool(false));
                }
                for (k, child) in m.iter_mut() {
                    let applicator = matches!(k.as_str(), "oneOf" | "anyOf" | "allOf");
                    match child {
                        Value::Array(items) if applicator => {
                            items.iter_mut().for_each(|i| walk(i, true))
                        }
                        Value::Object(defs) if k == "$defs" || k == "properties" => {
                            defs.values_mut().for_each(|d| walk(d, false))
                        }
                        _ => walk(child, false),
                    }
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|i| walk(i, false)),
            _ => {}
        }
    }
    let mut out = schema.clone();
    walk(&mut out, false);
    out
}

/// [`valid`], and valid against [`closed`]'s version of the schema too.
fn valid_closed(validator: &Path, schema: &str, files: &[PathBuf], tmp: &Path) {
    valid(validator, schema, files);
    let open: Value =
        serde_json::from_str(&std::fs::read_to_string(reference(schema)).unwrap()).unwrap();
    let path = tmp.join(format!("closed-{schema}"));
    std::fs::write(&path, closed(&open).to_string()).unwrap();
    if let Err(said) = check(validator, &path, files) {
        panic!("{files:?} hold keys {schema} does not name: {said}");
    }
}

fn golden(path: &str) -> PathBuf {
    root().join("results/tests").join(path)
}

#[test]
fn every_golden_and_fixture_validates() {
    let Some(v) = validator("every_golden_and_fixture_validates") else {
        return;
    };
    valid(
        &v,
        "run.schema.json",
        &[
            golden("golden/run.json"),
            golden("golden/find-max-run/run.json"),
            golden("fixtures/run-v2/run.json"),
        ],
    );
    valid(&v, "compare.schema.json", &[golden("golden/compare.json")]);
    // find-max.json holds run.json's `capacity` and its steps' `probe` alone: checked against those
    // parts of run.schema.json (its `$defs`, unchanged).
    let run_schema: Value =
        serde_json::from_str(&std::fs::read_to_string(reference("run.schema.json")).unwrap())
            .unwrap();
    let parts = json!({
        "$schema": run_schema["$schema"],
        "type": "object",
        "required": ["capacity", "steps"],
        "properties": {
            "capacity": {"$ref": "#/$defs/Capacity"},
            "steps": {"type": "array", "items": {
                "type": "object",
                "required": ["probe"],
                "properties": {"probe": {"$ref": "#/$defs/ProbeMark"}}
            }}
        },
        "$defs": run_schema["$defs"],
    });
    let dir = tempfile::tempdir().unwrap();
    // events.md's example lines (but the one whose run.json is elided).
    let doc = std::fs::read_to_string(reference("events.md")).unwrap();
    let examples: Vec<PathBuf> = doc
        .lines()
        .filter(|l| l.starts_with("{\"id\":"))
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .enumerate()
        .map(|(i, line)| {
            let path = dir.path().join(format!("events-md-{i}.json"));
            std::fs::write(&path, line.to_string()).unwrap();
            path
        })
        .collect();
    assert!(examples.len() >= 3, "events.md's examples: {examples:?}");
    valid(&v, "event.schema.json", &examples);
    let schema = dir.path().join("find-max-parts.schema.json");
    std::fs::write(&schema, parts.to_string()).unwrap();
    if let Err(said) = check(&v, &schema, &[golden("golden/find-max.json")]) {
        panic!("find-max.json does not validate against run.schema.json's parts: {said}");
    }
}

/// A named mix of two requests on `stampede serve`'s paths (its per_request rows).
const MIX: &str = r#"
[[request]]
name = "home"
weight = 3
url = "/a"

[[request]]
name = "items"
weight = 1
url = "/b?page=2"
"#;

/// Runs `stampede ARGS` and insists it succeeded.
fn ok(args: &[&str]) {
    let o = stampede(args);
    assert!(
        o.status.success(),
        "stampede {args:?} failed: {}",
        text(&o.stderr)
    );
}

/// One fresh output of every command that writes run.json, compare.json or events.ndjson, each
/// validated: a monitored run watched live (run.json with `monitors` and a warmup, events.ndjson),
/// a named mix drawn over that run as its baseline (`per_request`, the `baseline` event), a
/// side-by-side run (two run.json, compare.json, events of two lanes), `find-max` (`capacity`,
/// `probe`), `compare --json`, and a run.json a failed run's clean-up ended through
/// `serde_json::Value` (`output::fail_unfinished`).
#[test]
fn a_fresh_output_of_every_command_validates() {
    let Some(v) = validator("a_fresh_output_of_every_command_validates") else {
        return;
    };
    let _serial = tests::serial();
    let server = ServeProcess::start(&[]);
    let url = server.url();
    let tmp = tempfile::tempdir().unwrap();
    let at = |name: &str| tmp.path().join(name);
    let s = |p: &Path| p.to_str().unwrap().to_string();
    let short = ["--model", "requests", "--steps", "20,40", "--quiet"];

    let watched = at("watched");
    let pid = server.pid().to_string();
    let mut args = vec!["run", url.as_str()];
    args.extend_from_slice(&short);
    // Steps of 2 s: whole merged seconds (`interval` events) inside them.
    args.extend_from_slice(&[
        "--step-duration",
        "2s",
        "--warmup",
        "1s",
        "--monitor-pid",
        &pid,
    ]);
    let (live, out) = (s(&watched), "--out");
    args.extend_from_slice(&["--live", "127.0.0.1:0", out, &live]);
    ok(&args);
    let run = run_json(&watched);
    assert!(
        run["monitors"].is_array() && run["warmup"].is_object(),
        "{run}"
    );

    let mixed = at("mixed");
    let plan = at("mix.toml");
    std::fs::write(&plan, MIX).unwrap();
    let (plan, mixed_s) = (s(&plan), s(&mixed));
    let mut args = vec!["run", plan.as_str(), url.as_str()];
    args.extend_from_slice(&short);
    args.extend_from_slice(&["--step-duration", "1s", "--live", "127.0.0.1:0"]);
    args.extend_from_slice(&["--baseline", &live]);
    args.extend_from_slice(&["--out", &mixed_s]);
    ok(&args);
    let run = run_json(&mixed);
    assert!(run["steps"][0]["per_request"].is_array(), "{run}");

    let beside = at("beside");
    let (a, b, beside_s) = (format!("a={url}a"), format!("b={url}b"), s(&beside));
    let mut args = vec!["run", a.as_str(), b.as_str()];
    args.extend_from_slice(&short);
    args.extend_from_slice(&["--step-duration", "1s", "--live", "127.0.0.1:0"]);
    args.extend_from_slice(&["--out", &beside_s]);
    ok(&args);

    // Capped below the server's capacity: two probes and an answer (a lower bound, exit 4).
    let capped = ServeProcess::start(&["--capacity", "300"]);
    let searched = at("searched");
    let (capped_url, searched_s) = (capped.url(), s(&searched));
    let o = stampede(&[
        "find-max",
        &capped_url,
        "--slo",
        "p99<50ms",
        "--model",
        "requests",
        "--start",
        "100",
        "--max-rate",
        "200",
        "--probe",
        "1s",
        "--confirm",
        "1s",
        "--repeat",
        "1",
        "--warmup",
        "0s",
        "--cooldown",
        "200ms",
        "--deadline",
        "60s",
        "--quiet",
        "--out",
        &searched_s,
    ]);
    assert!(
        matches!(o.status.code(), Some(0 | 4)),
        "find-max: {:?} {}",
        o.status,
        text(&o.stderr)
    );
    let run = run_json(&searched);
    assert!(run["capacity"].is_object(), "{run}");

    let compared = at("compare.json");
    let compared_s = s(&compared);
    ok(&[
        "compare",
        &live,
        &mixed_s,
        &s(&beside.join("a")),
        "--json",
        &compared_s,
        "--output",
        &s(&at("compare.html")),
    ]);

    // A run that failed mid-way: its clean-up ends the file through serde_json::Value, not the type.
    let failed = at("failed");
    std::fs::create_dir_all(&failed).unwrap();
    let mut unfinished = results::run_file::RunFile::read(&watched.join("run.json")).unwrap();
    unfinished.status = results::run_file::RunStatus::Running;
    unfinished.finished_at = None;
    std::fs::write(failed.join("run.json"), unfinished.to_json()).unwrap();
    coordinator::output::fail_unfinished(&failed, "the test ended it");
    assert_eq!(run_json(&failed)["status"], "failed");

    valid_closed(
        &v,
        "run.schema.json",
        &[
            watched.join("run.json"),
            mixed.join("run.json"),
            beside.join("a/run.json"),
            beside.join("b/run.json"),
            searched.join("run.json"),
            failed.join("run.json"),
        ],
        tmp.path(),
    );
    valid_closed(
        &v,
        "compare.schema.json",
        &[beside.join("compare.json"), compared.clone()],
        tmp.path(),
    );
    let mut kinds = Vec::new();
    for (i, dir) in [&watched, &mixed, &beside].into_iter().enumerate() {
        let (files, seen) = event_files(&dir.join("events.ndjson"), &at(&format!("events-{i}")));
        valid_closed(&v, "event.schema.json", &files, tmp.path());
        kinds.extend(seen);
    }
    eprintln!(
        "check-jsonschema accepted 6 run.json, 2 compare.json and {} event lines",
        kinds.len()
    );
    kinds.sort();
    kinds.dedup();
    assert_eq!(
        kinds,
        [
            "baseline",
            "begin",
            "end",
            "finished",
            "interval",
            "run",
            "step",
            "step_start",
            "warmup"
        ],
        "every event was seen and validated"
    );

    refusals(&v, &watched.join("run.json"), &compared, tmp.path());
}

/// Files a reader refuses are refused by the schemas too: a value of the wrong type, a word no enum
/// has, a status code that is no number, a schema id of another file, an event no one knows.
fn refusals(v: &Path, run: &Path, compared: &Path, tmp: &Path) {
    let read =
        |p: &Path| -> Value { serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap() };
    let run = read(run);
    let compared = read(compared);
    // (schema, the object changed, its key, the new value or none to remove it): each is what a
    // reader refuses, and check-jsonschema's words name the key.
    let cases = [
        ("run.schema.json", "/steps/0", "ok", Some(json!("many"))),
        ("run.schema.json", "", "status", Some(json!("paused"))),
        ("run.schema.json", "/steps/1", "trust", Some(json!("sure"))),
        (
            "run.schema.json",
            "/steps/0/latency_ms",
            "lower_bound",
            Some(json!(["p42"])),
        ),
        (
            "run.schema.json",
            "/steps/0/status_codes",
            "2x0",
            Some(json!(1)),
        ),
        (
            "run.schema.json",
            "/steps/0/error_messages",
            "gremlins",
            Some(json!("?")),
        ),
        (
            "run.schema.json",
            "",
            "schema",
            Some(json!("stampede.run/1")),
        ),
        ("run.schema.json", "", "steps", None),
        (
            "compare.schema.json",
            "/steps/0/runs/0/cells/0",
            "class",
            Some(json!("worse-ish")),
        ),
    ];
    for (schema, at, key, value) in cases {
        let mut doc = if schema == "run.schema.json" {
            run.clone()
        } else {
            compared.clone()
        };
        let object = doc
            .pointer_mut(at)
            .and_then(Value::as_object_mut)
            .unwrap_or_else(|| panic!("{at} is an object"));
        match &value {
            Some(v) => object.insert(key.to_string(), v.clone()),
            None => object.remove(key),
        };
        let path = tmp.join(format!("refused-{}.json", key));
        std::fs::write(&path, serde_json::to_string_pretty(&doc).unwrap()).unwrap();
        match check(v, &reference(schema), std::slice::from_ref(&path)) {
            Ok(()) => panic!("{at}/{key} = {value:?} validated against {schema}"),
            Err(said) => assert!(said.contains(key), "{at}/{key}: {said}"),
        }
    }
    // A key no schema names: open schemas take it, as stampede's reader does; the closed one refuses
    // it, so the fresh files above had none.
    let mut extra = run.clone();
    extra["steps"][0]["latency_ms"]["p75"] = json!(1.5);
    let path = tmp.join("extra-key.json");
    std::fs::write(&path, extra.to_string()).unwrap();
    let files = std::slice::from_ref(&path);
    assert_eq!(check(v, &reference("run.schema.json"), files), Ok(()));
    let closed_run = tmp.join("closed-run.schema.json");
    let refused = check(v, &closed_run, files).expect_err("the closed schema refuses p75");
    assert!(refused.contains("p75"), "{refused}");
    // An event no reader knows, and a placeholder run.json (a claim, `{"status": "starting"}`), which
    // stampede's reader refuses as no run: so does the schema.
    let event = tmp.join("refused-event.json");
    std::fs::write(&event, r#"{"id": 1, "event": "teleport", "lane": 0}"#).unwrap();
    assert!(check(v, &reference("event.schema.json"), &[event]).is_err());
    let claim = tmp.join("refused-claim.json");
    std::fs::write(&claim, "{\"status\": \"starting\"}\n").unwrap();
    assert!(check(v, &reference("run.schema.json"), &[claim]).is_err());
}
