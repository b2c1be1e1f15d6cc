//! The JSON Schemas of what stampede writes for other programs (run.json, compare.json, each line of
//! events.ndjson), derived from the very types that write and read those files, so a schema cannot
//! drift from them: docs/reference/*.schema.json are this module's output, and a test
//! (tests/tests/schemas.rs) fails when the committed files differ from it.
//!
//! Unknown keys are allowed everywhere (no `additionalProperties: false`): the readers accept them
//! (serde ignores them, and run.json's `plan` keeps them), so a newer stampede's file stays valid for
//! an older schema, as it stays readable by an older stampede.
use schemars::{JsonSchema, Schema, SchemaGenerator, generate::SchemaSettings};

use crate::compare::{COMPARE_SCHEMA, Comparison};
use crate::events::{self, Line};
use crate::run_file::{READS, RunFile};

/// The schema files, each with the file name it is committed under in docs/reference/. run.json and
/// events.ndjson are read back by stampede (a report, a comparison, the live page rebuilt), so their
/// schemas say what its reader accepts (a key with a default may be absent, as in an older file);
/// compare.json is only written, so its schema says what is written.
pub fn files() -> Vec<(&'static str, String)> {
    let read = SchemaSettings::draft2020_12();
    let written = SchemaSettings::draft2020_12().for_serialize();
    vec![
        ("run.schema.json", text::<RunFile>(read.clone(), RUN_TITLE)),
        (
            "compare.schema.json",
            text::<Comparison>(written, COMPARE_TITLE),
        ),
        ("event.schema.json", text::<Line>(read, EVENT_TITLE)),
    ]
}

const RUN_TITLE: &str = "run.json: one run's results (stampede run, stampede find-max)";
const COMPARE_TITLE: &str =
    "compare.json: runs compared step by step (stampede compare --json, a side-by-side run)";
const EVENT_TITLE: &str = "One line of events.ndjson: a run as it happens (--live)";

/// `T`'s schema (draft 2020-12) as the file's text, pretty, ending in a newline.
fn text<T: JsonSchema>(settings: SchemaSettings, title: &str) -> String {
    let mut schema = SchemaGenerator::new(settings).into_root_schema_for::<T>();
    schema.insert("title".into(), title.into());
    let mut text = serde_json::to_string_pretty(&schema).expect("a schema is plain JSON");
    text.push('\n');
    text
}

/// run.json's `schema`: one this build reads.
pub(crate) fn run_id(_: &mut SchemaGenerator) -> Schema {
    schemars::json_schema!({"type": "string", "enum": READS})
}

/// compare.json's `schema`.
pub(crate) fn compare_id(_: &mut SchemaGenerator) -> Schema {
    schemars::json_schema!({"type": "string", "const": COMPARE_SCHEMA})
}

/// events.ndjson's `schema`, said by its `begin` event.
pub(crate) fn events_id(_: &mut SchemaGenerator) -> Schema {
    schemars::json_schema!({"type": "string", "const": events::SCHEMA})
}
