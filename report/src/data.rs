//! The data a run's page embeds (`stampede.report-data/1`): its steps and its agents' shares in
//! columns, each value as the page's tables print it. run.json itself stays beside the report: in a
//! run of many steps and agents its per-agent objects were most of the page.
use results::quantity::{FAILED_PCT, MAX_MS, P50_MS, P99_MS};
use results::run_file::RunFile;
use serde_json::{Map, Value};

pub const SCHEMA: &str = "stampede.report-data/1";

/// The agents table's columns, in order; `agent_steps` has these and `lower_bound`.
pub const AGENT_COLS: [&str; 15] = [
    "step",
    "agent",
    "threads",
    "requests",
    "replies",
    "ok",
    // The agent's transport errors as a count (steps.tsv's `errors` is the step's share).
    "errors",
    FAILED_PCT.key,
    "cpu_pct",
    P50_MS.key,
    P99_MS.key,
    MAX_MS.key,
    "start_delay_ms",
    "clock_offset_ms",
    "lost",
];

/// Columns of equal length, in order.
pub struct Columns(Vec<(String, Vec<Value>)>);

impl Columns {
    pub fn rows(&self) -> usize {
        self.0.first().map_or(0, |(_, v)| v.len())
    }

    pub fn get(&self, name: &str) -> Option<&[Value]> {
        self.0
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_slice())
    }

    fn json(self) -> Value {
        Value::Object(self.0.into_iter().map(|(n, v)| (n, v.into())).collect())
    }
}

/// A number as the tables print it: at most three decimals, an integer without a fraction; one
/// that is not finite is null.
pub fn number(v: f64) -> Value {
    let r = (v * 1000.0).round() / 1000.0;
    if !r.is_finite() {
        Value::Null
    } else if r.fract() == 0.0 && r.abs() < 9e15 {
        Value::from(r as i64)
    } else {
        Value::from(r)
    }
}

/// A value's text in a table: a number as JSON writes it (as the page's script does), a string as
/// it is, nothing as `-`.
pub fn text(v: &Value) -> String {
    match v {
        Value::Null => "-".into(),
        Value::String(s) => s.clone(),
        v => v.to_string(),
    }
}

/// `step`, `step_value`, then steps.tsv's columns, each cell as steps.tsv writes it (a number
/// where it is one).
pub fn steps(run: &RunFile) -> Columns {
    let table = run.step_table();
    let mut cols = vec![
        (
            "step".to_string(),
            run.steps.iter().map(|s| Value::from(s.number)).collect(),
        ),
        (
            "step_value".to_string(),
            run.steps.iter().map(|s| number(s.step_value)).collect(),
        ),
    ];
    let rows: Vec<Vec<String>> = run.steps.iter().map(|s| table.row(s)).collect();
    for (i, name) in table.header().into_iter().enumerate() {
        let cells = rows.iter().map(|r| typed(&r[i])).collect();
        cols.push((name, cells));
    }
    Columns(cols)
}

/// A steps.tsv cell as JSON: a finite number as that number, anything else as its text.
fn typed(cell: &str) -> Value {
    match cell.parse::<f64>() {
        Ok(v) if v.is_finite() => number(v),
        _ => Value::from(cell),
    }
}

/// Every step's share by agent (run.json `steps[].agents[]`), one row each: [`AGENT_COLS`] (the
/// agent as its index in `run.agents`, else its name) and `lower_bound` (which of the latencies
/// are lower bounds, space-separated, as steps.tsv's column).
pub fn agent_steps(run: &RunFile) -> Columns {
    let mut cols: Vec<(String, Vec<Value>)> = AGENT_COLS
        .iter()
        .chain(&["lower_bound"])
        .map(|n| (n.to_string(), Vec::new()))
        .collect();
    for s in &run.steps {
        for a in &s.agents {
            let agent = run
                .agents
                .iter()
                .position(|i| i.name == a.agent)
                .map_or_else(|| Value::from(a.agent.as_str()), Value::from);
            let l = &a.latency_ms;
            let row = [
                Value::from(s.number),
                agent,
                Value::from(a.threads),
                Value::from(a.requests),
                Value::from(a.replies),
                Value::from(a.ok),
                Value::from(a.errors),
                number(a.failed_pct),
                number(a.cpu_pct),
                number(l.p50),
                number(l.p99),
                number(l.max),
                a.start_delay_ms.map_or(Value::Null, number),
                number(a.clock_offset_ms),
                Value::from(if a.lost { "lost" } else { "" }),
                Value::from(l.lower_bounds.names().join(" ")),
            ];
            for ((_, col), v) in cols.iter_mut().zip(row) {
                col.push(v);
            }
        }
    }
    Columns(cols)
}

/// The embedded JSON: what ran (target, label, model, status, the agents' names) and the two
/// column sets, `steps` and `agent_steps`.
pub fn embedded(run: &RunFile) -> String {
    let mut m = Map::new();
    m.insert("schema".into(), SCHEMA.into());
    m.insert("target".into(), run.target.as_str().into());
    m.insert("label".into(), run.label.clone().into());
    m.insert("model".into(), run.model().name().into());
    m.insert("status".into(), run.status.name().into());
    let names: Vec<Value> = run.agents.iter().map(|a| a.name.as_str().into()).collect();
    m.insert("agents".into(), names.into());
    m.insert("steps".into(), steps(run).json());
    m.insert("agent_steps".into(), agent_steps(run).json());
    Value::Object(m).to_string()
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    fn golden() -> RunFile {
        let text = include_str!("../../results/tests/golden/run.json");
        RunFile::parse(text, Path::new("run.json")).unwrap()
    }

    #[test]
    fn numbers_are_written_as_the_tables_print_them() {
        let texts: Vec<String> = [12.0, 1.23456, -0.0001, 0.1, f64::NAN, 1e300 * 1e10]
            .iter()
            .map(|v| number(*v).to_string())
            .collect();
        assert_eq!(texts, ["12", "1.235", "0", "0.1", "null", "null"]);
    }

    #[test]
    fn the_step_columns_are_steps_tsv_cells() {
        let run = golden();
        let cols = steps(&run);
        let table = run.step_table();
        for (i, s) in run.steps.iter().enumerate() {
            for (name, cell) in table.header().iter().zip(table.row(s)) {
                let v = &cols.get(name).unwrap()[i];
                assert_eq!(text(v), cell, "step {} {name}", s.number);
            }
        }
        assert_eq!(cols.get("step").unwrap().len(), run.steps.len());
    }

    #[test]
    fn an_agent_row_names_its_agent_by_index_and_its_lower_bounds() {
        let mut run = golden();
        run.steps[0].agents[0].latency_ms.lower_bounds.set(5);
        run.steps[0].agents[0].agent = "gone".into();
        let cols = agent_steps(&run);
        let rows: usize = run.steps.iter().map(|s| s.agents.len()).sum();
        assert_eq!(cols.rows(), rows);
        assert_eq!(cols.get("agent").unwrap()[0], "gone");
        assert_eq!(cols.get("lower_bound").unwrap()[0], "max");
        if rows > 1 {
            assert_eq!(cols.get("agent").unwrap()[1], Value::from(0));
        }
    }
}
