//! What differs between the runs compared, said as sentences above the comparison rather than as a
//! refusal: two servers are often run with plans that differ a little, and the reader decides.
use crate::run_file::{RunFile, RunStatus};
use crate::step::human;
use shared::plan::LoadModel;

use super::{Labelled, StepRow};

/// One thing a plan says, and how to show it.
type Aspect = (&'static str, fn(&RunFile) -> String);

/// What the plans are compared on, in the order the banner names them.
const ASPECTS: [Aspect; 10] = [
    ("load model", |r| r.model().name().to_string()),
    ("arrival", |r| r.plan.arrival.clone()),
    ("step length", step_length),
    ("requests per connection (--num-call)", |r| {
        human(r.plan.num_call as f64)
    }),
    ("connection pool (--max-connections)", |r| {
        human(r.plan.max_connections as f64)
    }),
    ("timeout", |r| format!("{} s", human(r.plan.timeout_s))),
    ("served statuses (--ok-status)", |r| {
        r.plan.ok_status.clone()
    }),
    ("requests (method and path)", requests),
    ("agent count", |r| r.agents.len().to_string()),
    ("stampede version", |r| r.tool.version.clone()),
];

/// A sentence for every aspect in which the runs' plans differ, and for every run that did not
/// complete.
pub(super) fn plan_differences(runs: &[Labelled]) -> Vec<String> {
    let mut out = Vec::new();
    for (what, show) in ASPECTS {
        let groups = grouped(runs, show);
        if groups.len() > 1 {
            let said: Vec<String> = groups
                .iter()
                .map(|(value, labels)| format!("{} {value}", labels.join(", ")))
                .collect();
            out.push(format!("The plans differ in {what}: {}.", said.join("; ")));
        }
    }
    let closed = |r: &&Labelled| r.run.model() == LoadModel::Concurrency;
    let (counts, rates): (Vec<&Labelled>, Vec<&Labelled>) = runs.iter().partition(closed);
    if !counts.is_empty() && !rates.is_empty() {
        out.push(format!(
            "The step values are different quantities: {} count connections (a closed loop), {} \
             demanded requests/s; rows join equal numbers, not equal loads.",
            labels(&counts),
            labels(&rates)
        ));
    }
    for r in runs.iter().filter(|r| r.run.status != RunStatus::Completed) {
        out.push(format!(
            "{}'s run did not complete (status {}): the steps it did not reach are missing.",
            r.label, r.run.status
        ));
    }
    out
}

/// A sentence for every run that lacks some of the rows' step values.
pub(super) fn missing_steps(runs: &[Labelled], rows: &[StepRow], model: &str) -> Vec<String> {
    const SHOWN: usize = 8;
    let unit = if model == LoadModel::Concurrency.name() {
        "connections"
    } else {
        "req/s"
    };
    let mut out = Vec::new();
    for (i, r) in runs.iter().enumerate() {
        let mut lacking: Vec<String> = rows
            .iter()
            .filter(|row| row.runs[i].is_none())
            .map(|row| human(row.value))
            .collect();
        // Rows of one value (a run that ran it twice) are one value lacking.
        lacking.dedup();
        if lacking.is_empty() {
            continue;
        }
        let mut list = lacking[..lacking.len().min(SHOWN)].join(", ");
        if lacking.len() > SHOWN {
            list.push_str(&format!(" and {} more", lacking.len() - SHOWN));
        }
        out.push(format!("{} has no step at {list} {unit}.", r.label));
    }
    out
}

/// The runs' values of one aspect, with the labels of the runs that have each, in first-seen order.
fn grouped(runs: &[Labelled], show: fn(&RunFile) -> String) -> Vec<(String, Vec<&str>)> {
    let mut groups: Vec<(String, Vec<&str>)> = Vec::new();
    for r in runs {
        let value = show(&r.run);
        match groups.iter_mut().find(|(v, _)| *v == value) {
            Some((_, labels)) => labels.push(&r.label),
            None => groups.push((value, vec![&r.label])),
        }
    }
    groups
}

fn labels(runs: &[&Labelled]) -> String {
    runs.iter()
        .map(|r| r.label.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// A step's length: seconds, or a count of connections (`--num-conn`).
fn step_length(r: &RunFile) -> String {
    match (r.plan.num_conn, r.plan.step_duration_s) {
        (Some(n), _) => format!("{} connections", human(n as f64)),
        (None, Some(s)) => format!("{} s", human(s)),
        (None, None) => "unknown".to_string(),
    }
}

/// The requests sent, as method and path (the origins are what is compared, and differ).
fn requests(r: &RunFile) -> String {
    if r.plan.requests.is_empty() {
        return "unknown".to_string();
    }
    let shown: Vec<String> = r
        .plan
        .requests
        .iter()
        .map(|q| {
            let method = &q.method;
            let url = q.url.as_str();
            let after_scheme = url.split_once("://").map_or(url, |(_, rest)| rest);
            let path = after_scheme.find('/').map_or("/", |i| &after_scheme[i..]);
            format!("{method} {path}")
        })
        .collect();
    shown.join(", ")
}
