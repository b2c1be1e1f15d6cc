//! run.json as a type: what the coordinator writes after each step and what a reader (a report, a
//! comparison) reads back, so the two cannot disagree on the schema.
use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::step::{RUN_SCHEMA, RunSummary, StepResult};
use crate::table::StepTable;
use monitor::MonitorInfo;
use shared::plan::LoadModel;

/// The key of run.json's `plan` that holds a capacity search's settings (`stampede find-max`).
pub const SEARCH_KEY: &str = "find_max";

/// The schemas this build reads: its own, and `/2`, whose `status` `/3` only typed (one of the four
/// words [`RunStatus`] has), so a `/2` file reads as it is.
pub const READS: [&str; 2] = [RUN_SCHEMA, "stampede.run/2"];

/// run.json's `plan`: the plan as the run resolved it. The fields are named as the file names them
/// (run.json is written through `serde_json::Value`, so its keys come out sorted whatever the order
/// here). A key an older file lacks reads as its default; a key this build does not know is kept in
/// [`PlanEcho::other`] and written back, so a newer file read and rewritten by an older build, or
/// shown by its report, loses none of its plan.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct PlanEcho {
    #[serde(default)]
    pub arrival: String,
    #[serde(default)]
    pub connect_timeout_s: f64,
    /// The --fail-on expressions, as written back.
    #[serde(default)]
    pub fail_on: Vec<String>,
    /// A capacity search's settings (`stampede find-max`); absent for a planned run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub find_max: Option<SearchEcho>,
    /// `--http` as resolved for the target: `1.1`, `2` or `auto`. Absent from a file written
    /// before HTTP/2, which was HTTP/1.1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http: Option<String>,
    #[serde(default)]
    pub max_connections: u64,
    #[serde(default)]
    pub max_requests: Option<u64>,
    #[serde(default)]
    pub model: String,
    #[serde(default)]
    pub num_call: u64,
    /// A step's length as a count of connections (`--num-conn`); else `step_duration_s`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_conn: Option<u64>,
    #[serde(default)]
    pub ok_status: String,
    #[serde(default)]
    pub requests: Vec<RequestEcho>,
    #[serde(default)]
    pub source_addrs: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_duration_s: Option<f64>,
    #[serde(default)]
    pub steps: Vec<f64>,
    #[serde(default)]
    pub stop_after: u32,
    #[serde(default)]
    pub stop_on: Vec<String>,
    /// `--streams`: requests one connection carries at once (1 over HTTP/1.1). Absent from a file
    /// written before HTTP/2, which carried 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub streams: Option<u64>,
    #[serde(default)]
    pub threads: u64,
    #[serde(default)]
    pub timeout_s: f64,
    /// `--tls-sessions` over TLS: `fresh` (every connection a full handshake) or `resume`. Absent
    /// over plain TCP, and from a file written before it, whose connections resumed sessions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_sessions: Option<String>,
    #[serde(default)]
    pub urls_order: String,
    /// `--warmup`: how long the load before the first step lasted (a planned run's; a search's is
    /// under `find_max`). Absent without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warmup_s: Option<f64>,
    /// `--wsesslog`: the session log each arrival ran a session of; absent without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wsesslog: Option<WsesslogEcho>,
    /// The CSV feeders the requests' `${var}` draw on; absent without any.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub feeders: Vec<FeederEcho>,
    /// The request run once per connection before its first of the mix; absent without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub setup: Option<SetupEcho>,
    /// Keys this build does not know, kept as they were.
    #[serde(flatten)]
    pub other: std::collections::BTreeMap<String, serde_json::Value>,
}

/// A CSV feeder as run.json echoes it: its name, how its rows are dealt, the variables it fills.
#[derive(Debug, Clone, PartialEq, Default, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct FeederEcho {
    pub name: String,
    pub mode: String,
    pub variables: Vec<String>,
}

/// A plan's setup as run.json echoes it: its request (headers and body as a request's are) and
/// what it extracts (`token = json:/token`).
#[derive(Debug, Clone, PartialEq, Default, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct SetupEcho {
    pub request: RequestEcho,
    pub extract: Vec<String>,
}

/// A `--wsesslog` run's session log as run.json echoes it.
#[derive(Debug, Clone, PartialEq, Default, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct WsesslogEcho {
    /// The log as given (a plan file's relative to the plan).
    pub file: String,
    /// X: the think time of a burst the log gives none, in seconds.
    pub think_s: f64,
    /// N: each step ended after this many sessions; absent when its duration ended it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<u64>,
    /// The log's sessions, and their requests in all.
    pub sessions: u64,
    pub requests: u64,
    /// The most requests one session sends (run.json's `num_call`, what an arrival may bring).
    pub max_requests: u64,
}

/// One request of the plan: its method, its URL without the query, its headers, its body's size.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct RequestEcho {
    /// The request's name and weight in a named mix; absent when the requests are unnamed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<u32>,
    #[serde(default)]
    pub body_bytes: u64,
    #[serde(default)]
    pub headers: Vec<String>,
    #[serde(default)]
    pub method: String,
    #[serde(default)]
    pub url: String,
}

/// A capacity search's settings, under the plan's [`SEARCH_KEY`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct SearchEcho {
    #[serde(default)]
    pub confirm_s: f64,
    #[serde(default)]
    pub cooldown_s: f64,
    #[serde(default)]
    pub deadline_s: f64,
    /// `--max-rate` as given; none: the fleet's ceiling.
    #[serde(default)]
    pub max_rate: Option<f64>,
    #[serde(default)]
    pub precision_pct: f64,
    #[serde(default)]
    pub probe_s: f64,
    #[serde(default)]
    pub repeat: u32,
    #[serde(default)]
    pub slos: Vec<String>,
    #[serde(default)]
    pub start: f64,
    #[serde(default)]
    pub warmup_s: f64,
}

/// How the run stands: run.json's `status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// Until the run ends.
    Running,
    Completed,
    /// Ended early by Ctrl-C.
    Aborted,
    Failed,
}

impl RunStatus {
    pub fn name(self) -> &'static str {
        match self {
            RunStatus::Running => "running",
            RunStatus::Completed => "completed",
            RunStatus::Aborted => "aborted",
            RunStatus::Failed => "failed",
        }
    }
}

impl std::fmt::Display for RunStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// One run's run.json. The keys are written sorted at every level (see [`RunFile::to_json`]), as
/// run.json has always had them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct RunFile {
    /// `stampede.run/3` (or `/2`, which this build also reads).
    #[cfg_attr(feature = "schema", schemars(schema_with = "crate::schema::run_id"))]
    pub schema: String,
    pub tool: Tool,
    /// `running` until the run ends, then `completed`, `aborted` or `failed`.
    pub status: RunStatus,
    /// RFC 3339, to the millisecond.
    pub started_at: String,
    pub finished_at: Option<String>,
    /// The target's origin (`http://host:port`).
    pub target: String,
    /// What the user called this run (`--label`, or `NAME=` before its URL): how the report and
    /// `stampede compare` name it. Null: unnamed, and a reader names it by its directory.
    #[serde(default)]
    pub label: Option<String>,
    /// The revision of the code under test the run was made against (`--commit`, else
    /// `GITHUB_SHA` when set), which `stampede history` names each run by. Absent when none was
    /// given (and in older files).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
    /// The plan as the run resolved it (the command line's and the plan file's settings).
    pub plan: PlanEcho,
    pub agents: Vec<AgentInfo>,
    /// The server monitors that watched the run; absent without (and in older files).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub monitors: Vec<MonitorInfo>,
    /// Which of `monitors` is paired with this run's target (named as the target is): its
    /// steps.tsv columns carry no suffix. Absent when none is (and in older files).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paired_monitor: Option<String>,
    /// The extra columns of each Prometheus source of server metrics (`--server-prometheus`): its
    /// named queries that fill no field of a step's view. Absent without any.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub server_extras: Vec<crate::table::ServerExtras>,
    /// The agents' warnings about the whole run, each prefixed with its agent.
    pub warnings: Vec<String>,
    /// The run's answer so far; null before the first step.
    pub summary: Option<RunSummary>,
    pub steps: Vec<StepResult>,
    /// Why --stop-on ended the ramp early (null: it did not). The key is absent while the run goes
    /// on, so outer `None` is "not yet known", as the file says.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    pub stopped: Option<Option<Stopped>>,
    /// The --fail-on expressions breached; absent while the run goes on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fail_on: Option<Vec<Breach>>,
    /// A capacity search's answer (`stampede find-max`); absent for a planned run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<crate::search::Capacity>,
    /// A planned run's `--warmup`: the load before its first step, at that step's value, measured
    /// and kept here, never counted (not in `steps`, the summary or a --fail-on). Its `step` is 0.
    /// Absent without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warmup: Option<StepResult>,
}

/// The run.json a user names: the file itself, or the results directory holding it (a path that is
/// not a file is taken for a directory, so a missing one is named with its run.json).
pub fn path_of(dir_or_file: &std::path::Path) -> std::path::PathBuf {
    if dir_or_file.is_file() {
        dir_or_file.to_path_buf()
    } else {
        dir_or_file.join("run.json")
    }
}

/// A key that is there, even as null, is `Some`: serde's own `Option` reads null as absent.
pub(crate) fn present<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    T::deserialize(d).map(Some)
}

/// Which program wrote the file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Tool {
    pub name: String,
    pub version: String,
}

/// What run.json says about an agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct AgentInfo {
    pub name: String,
    pub version: String,
    pub hostname: String,
    pub cores: u32,
    pub threads: u32,
    pub fd_limit: u64,
    pub port_range: [u32; 2],
}

/// Why the ramp ended early (run.json's `stopped`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Stopped {
    /// Counted from 1, as the table counts.
    pub after_step: usize,
    pub because: String,
    /// The values of the steps that were planned but not run.
    pub not_run: Vec<f64>,
}

/// A --fail-on expression that a step breached (run.json's `fail_on`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Breach {
    pub step: usize,
    pub step_value: f64,
    pub expression: String,
    pub because: String,
}

impl RunFile {
    /// Each `--fail-on` expression of the plan, with the sentences of the breaches of it in step
    /// order (none: it held): what `--junit` and `stampede summary` say of it.
    pub fn fail_on_verdicts(&self) -> Vec<(&str, Vec<String>)> {
        let breaches = self.fail_on.as_deref().unwrap_or_default();
        self.plan
            .fail_on
            .iter()
            .map(|expression| {
                let said = breaches
                    .iter()
                    .filter(|b| &b.expression == expression)
                    .map(Breach::sentence)
                    .collect();
                (expression.as_str(), said)
            })
            .collect()
    }
}

impl Breach {
    /// stderr's line of it (and a JUnit failure's message): `--fail-on p99>50ms: step 3 (300): …`.
    pub fn sentence(&self) -> String {
        format!(
            "--fail-on {}: step {} ({}): {}",
            self.expression, self.step, self.step_value, self.because
        )
    }
}

/// Why a run.json could not be read.
#[derive(Debug, thiserror::Error)]
pub enum RunFileError {
    #[error("cannot read {path}: {source}")]
    Read { path: PathBuf, source: io::Error },
    #[error("{path} is not a readable run.json: {message}")]
    Damaged { path: PathBuf, message: String },
    #[error("{path} is a run of schema `{found}`; this stampede reads `{}`", READS.join("` and `"))]
    Schema { path: PathBuf, found: String },
}

impl RunFile {
    /// A run that has just started: no step, no summary, no end.
    pub fn start(
        started_at: String,
        target: String,
        plan: PlanEcho,
        agents: Vec<AgentInfo>,
        warnings: Vec<String>,
    ) -> RunFile {
        RunFile {
            schema: RUN_SCHEMA.to_string(),
            tool: Tool {
                name: "stampede".into(),
                version: shared::VERSION.into(),
            },
            status: RunStatus::Running,
            started_at,
            finished_at: None,
            target,
            label: None,
            commit: None,
            plan,
            agents,
            monitors: Vec::new(),
            paired_monitor: None,
            server_extras: Vec::new(),
            warnings,
            summary: None,
            steps: Vec::new(),
            stopped: None,
            fail_on: None,
            capacity: None,
            warmup: None,
        }
    }

    /// Whether the run was a capacity search: its plan holds the search's settings.
    pub fn is_search(&self) -> bool {
        self.plan.find_max.is_some()
    }

    /// The file's text (without the final newline): pretty, keys sorted at every level. The sorting
    /// comes from going through `serde_json::Value`, whose map is ordered by key: that is how run.json
    /// has always been written, and readers (bench/compare.py, diffs of two runs) see the same bytes.
    pub fn to_json(&self) -> String {
        let value =
            serde_json::to_value(self).expect("a RunFile has string keys and no failing field");
        serde_json::to_string_pretty(&value).expect("a serde_json::Value always serializes")
    }

    /// The model the run's plan names (`requests` when the plan names none this build knows).
    pub fn model(&self) -> LoadModel {
        LoadModel::from_name(&self.plan.model).unwrap_or(LoadModel::Requests)
    }

    /// The target's host, as the step table's autobench columns are suffixed with it: the
    /// coordinator's own URL parser, as the run's table took it (the whole text if it is none).
    pub fn host(&self) -> String {
        shared::plan::Url::parse(&self.target)
            .map_or_else(|_| self.target.clone(), |u| u.host().to_string())
    }

    /// The run's steps as steps.tsv tabulates them.
    pub fn step_table(&self) -> StepTable {
        let monitors: Vec<String> = self.monitors.iter().map(|m| m.name.clone()).collect();
        StepTable::of_run(
            &self.host(),
            self.model(),
            crate::table::Extra {
                tls: self.plan.tls_sessions.is_some(),
                sessions: self.plan.wsesslog.is_some(),
                setup: self.plan.setup.is_some(),
                search: self.is_search(),
            },
            &monitors,
            self.paired_monitor.as_deref(),
            &self.server_extras,
        )
    }

    /// Reads `path`; the error names the file, and the field and line where it went wrong.
    pub fn read(path: &Path) -> Result<RunFile, RunFileError> {
        let text = std::fs::read_to_string(path).map_err(|source| RunFileError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        RunFile::parse(&text, path)
    }

    /// Parses run.json's `text`, read from `path` (named in the error).
    pub fn parse(text: &str, path: &Path) -> Result<RunFile, RunFileError> {
        #[derive(Deserialize)]
        struct Head {
            schema: String,
        }
        let damaged = |e: serde_json::Error| RunFileError::Damaged {
            path: path.to_path_buf(),
            message: described(&e, text),
        };
        let head: Head = serde_json::from_str(text).map_err(damaged)?;
        if !READS.contains(&head.schema.as_str()) {
            return Err(RunFileError::Schema {
                path: path.to_path_buf(),
                found: head.schema,
            });
        }
        serde_json::from_str(text).map_err(damaged)
    }
}

/// serde_json's message names a missing field but not the one whose value has the wrong type; it
/// does give the line, and run.json has one key per line, so the key on that line is named too.
fn described(e: &serde_json::Error, text: &str) -> String {
    let key = text
        .lines()
        .nth(e.line().saturating_sub(1))
        .and_then(|l| l.trim_start().strip_prefix('"'))
        .and_then(|l| l.split_once("\":"))
        .map(|(k, _)| k);
    match key {
        Some(k) if !e.to_string().contains(&format!("`{k}`")) => format!("field `{k}`: {e}"),
        _ => e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOLDEN: &str = include_str!("../tests/golden/run.json");

    fn golden_path() -> &'static Path {
        Path::new("tests/golden/run.json")
    }

    #[test]
    fn golden_run_json_reads_and_writes_back_byte_for_byte() {
        let run = RunFile::parse(GOLDEN, golden_path()).unwrap();
        assert!(!run.steps.is_empty(), "the golden run has steps");
        assert_eq!(format!("{}\n", run.to_json()), GOLDEN);
    }

    /// The golden file's text with `from` (which must occur) replaced by `to`.
    fn damaged(from: &str, to: &str) -> String {
        assert!(GOLDEN.contains(from), "{from}");
        GOLDEN.replacen(from, to, 1)
    }

    #[test]
    fn a_missing_field_is_named() {
        let text = damaged("\"ok_rate\": ", "\"ok_rate_was\": ");
        let e = RunFile::parse(&text, golden_path())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("tests/golden/run.json") && e.contains("missing field `ok_rate`"),
            "{e}"
        );
    }

    #[test]
    fn a_value_of_the_wrong_type_names_its_field() {
        let text = damaged("\"p99\": ", "\"p99\": \"fast\", \"was\": ");
        let e = RunFile::parse(&text, golden_path())
            .unwrap_err()
            .to_string();
        assert!(e.contains("field `p99`") && e.contains("line"), "{e}");
    }

    #[test]
    fn an_unknown_lower_bound_or_status_code_is_refused() {
        let text = damaged("\"lower_bound\": []", "\"lower_bound\": [\"p42\"]");
        let e = RunFile::parse(&text, golden_path())
            .unwrap_err()
            .to_string();
        assert!(e.contains("p42"), "{e}");
        let text = damaged("\"status_codes\": {", "\"status_codes\": {\"2x0\": 1,");
        let e = RunFile::parse(&text, golden_path())
            .unwrap_err()
            .to_string();
        assert!(e.contains("2x0") && e.contains("status code"), "{e}");
    }

    #[test]
    fn a_foreign_schema_is_refused_by_its_id() {
        let text = damaged(RUN_SCHEMA, "stampede.run/1");
        let e = RunFile::parse(&text, golden_path())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("schema `stampede.run/1`") && e.contains(RUN_SCHEMA),
            "{e}"
        );
        let e = RunFile::parse("{\"status\": \"starting\"}\n", golden_path())
            .unwrap_err()
            .to_string();
        assert!(e.contains("missing field `schema`"), "{e}");
        let e = RunFile::parse("[1, 2", golden_path())
            .unwrap_err()
            .to_string();
        assert!(e.contains("tests/golden/run.json"), "{e}");
    }

    /// steps.tsv of the same run as the golden run.json: the table made from the steps read back is
    /// the one written while the run went on (the counts come back keyed, whatever their order).
    #[test]
    fn golden_steps_give_back_the_golden_table() {
        let run = RunFile::parse(GOLDEN, golden_path()).unwrap();
        let table = run.step_table();
        assert_eq!(
            (run.host().as_str(), run.model()),
            ("127.0.0.1", LoadModel::Requests)
        );
        let mut tsv = table.header().join("\t") + "\n";
        for r in &run.steps {
            tsv += &(table.row(r).join("\t") + "\n");
        }
        assert_eq!(tsv, include_str!("../tests/golden/steps.tsv"));
    }

    /// A real find-max run with a server monitor (`stampede find-max --model requests --slo
    /// 'p99<50ms' --monitor-pid` against `stampede serve --capacity 800`): the table made from its
    /// steps is its steps.tsv, probe and monitor columns included, and its answer reads back typed.
    #[test]
    fn the_monitored_find_max_golden_gives_back_its_table_and_its_answer() {
        let path = Path::new("tests/golden/find-max-run/run.json");
        let run =
            RunFile::parse(include_str!("../tests/golden/find-max-run/run.json"), path).unwrap();
        let table = run.step_table();
        let mut tsv = table.header().join("\t") + "\n";
        for r in &run.steps {
            tsv += &(table.row(r).join("\t") + "\n");
        }
        assert_eq!(tsv, include_str!("../tests/golden/find-max-run/steps.tsv"));
        assert!(tsv.starts_with("dem_req_rate\t"), "{tsv}");
        assert!(table.header().iter().any(|c| c == "role"));
        assert!(
            run.steps
                .iter()
                .all(|s| s.probe.is_some() && !s.server_monitors.is_empty())
        );
        let capacity = run.capacity.as_ref().expect("a search's answer");
        assert_eq!(capacity.status, crate::search::Status::Resolved);
        assert_eq!(capacity.max_rate.as_ref().map(|m| m.offered), Some(800.0));
    }

    /// With a monitor, run.json says who it is and each step its view, steps.tsv gains the
    /// monitor's columns after every other (empty for a step it did not see), and it all reads back.
    #[test]
    fn a_monitored_run_gains_its_columns_and_reads_back() {
        let mut run = RunFile::parse(GOLDEN, golden_path()).unwrap();
        let plain = run.step_table().header();
        run.monitors = vec![MonitorInfo {
            name: "web1".into(),
            hostname: "web1.example".into(),
            watching: "process nginx (3 pids)".into(),
            cores: monitor::Cores {
                online: 4,
                cpuset: None,
                quota: Some(1.0),
            },
            machine_id: "ab12".into(),
        }];
        let mut seen = crate::example_server("web1", 98.0, 1.0);
        seen.tcp.listen_drops = 12;
        run.steps[1].server_monitors = vec![seen];
        let table = run.step_table();
        let header = table.header();
        assert_eq!(
            header[..plain.len()],
            plain[..],
            "the columns before stay where they were"
        );
        assert_eq!(
            header[plain.len()..],
            [
                "srv_cpu_pct_web1",
                "srv_cpu_util_pct_web1",
                "srv_thread_max_pct_web1",
                "srv_mem_mb_web1",
                "host_cpu_pct_web1",
                "host_softirq_pct_web1",
                "tcp_listen_drops_web1",
                "tcp_retrans_web1",
                "ok_per_core_s_web1",
            ]
        );
        let row = |i: usize| table.row(&run.steps[i])[plain.len()..].to_vec();
        assert!(row(0).iter().all(String::is_empty), "{:?}", row(0));
        // Served per core-second: the step's served rate over the 0.98 cores the server kept busy.
        let per_core = crate::step::tsv_number(run.steps[1].ok_rate / 0.98);
        assert_eq!(
            row(1),
            ["98", "98", "", "0", "10", "1", "12", "0", &per_core]
        );
        let text = run.to_json();
        assert!(text.contains("\"monitors\": [") && text.contains("\"server_monitors\": ["));
        assert_eq!(RunFile::parse(&text, golden_path()).unwrap(), run);
    }

    #[test]
    fn censored_latency_and_sparse_codes_survive_the_round_trip() {
        let mut run = RunFile::parse(GOLDEN, golden_path()).unwrap();
        let step = &mut run.steps[0];
        step.latency_ms = crate::step::LatencyStats {
            censored: true,
            ..step.latency_ms
        };
        step.latency_ms.lower_bounds.set(0);
        step.latency_ms.lower_bounds.set(3);
        step.status_codes = crate::step::Codes(vec![(200, 5), (404, 1), (503, 2)]);
        run.stopped = Some(None);
        let back = RunFile::parse(&run.to_json(), golden_path()).unwrap();
        assert_eq!(back, run);
        assert_eq!(
            back.steps[0].latency_ms.lower_bounds.names(),
            ["mean", "p99"]
        );
    }

    #[test]
    fn a_run_json_of_schema_2_reads_as_it_is() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/run-v2/run.json");
        let run = RunFile::read(&path).unwrap();
        assert_eq!(run.schema, "stampede.run/2");
        assert_eq!(run.status, RunStatus::Completed);
        assert_eq!(run.monitors.len(), 1);
        assert!(!run.steps.is_empty());
        // Its steps tabulate as its own steps.tsv has them.
        let table = run.step_table();
        let tsv = std::fs::read_to_string(path.with_file_name("steps.tsv")).unwrap();
        let mut lines = tsv.lines();
        assert_eq!(
            lines.next().unwrap(),
            table
                .header()
                .join("\t")
                .replace("\tok_per_core_s_server", "")
        );
    }

    #[test]
    fn a_status_no_run_has_is_refused() {
        let text = damaged("\"status\": \"completed\"", "\"status\": \"paused\"");
        let e = RunFile::parse(&text, golden_path())
            .unwrap_err()
            .to_string();
        assert!(e.contains("paused"), "{e}");
    }
}
