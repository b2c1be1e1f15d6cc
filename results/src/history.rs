//! A history of runs (`stampede history`): one row per run.json, in the order the runs started, so
//! a nightly job sees a server get slower across commits. Pure: labelled run files in, a
//! [`History`] out, from which the TSV is made here and the trend page by `report`. Each row reads
//! what the shoot-out's ranking reads (the knee and its cause, how far the run kept up, its trust:
//! [`crate::compare::ranking`]) and, at one chosen step, p99 and the requests served per server
//! core-second, so rows are set side by side at the same offered load.
//!
//! The chosen step: the step whose offered value (steps.tsv's first column: demanded requests/s,
//! or a closed loop's connections) is the rate asked for, or else the highest below it; a run with
//! no step at or below it has none. Without a rate asked for, the rate is the highest that every run
//! offered (the lowest of the runs' highest steps), so every run is read at one load.
use std::time::SystemTime;

use serde::Serialize;

use crate::compare::{Labelled, axis_of, joined_value, ranking};
use crate::knee::KneeCause;
use crate::quantity::{OK_PER_CORE_S, P99_MS};
use crate::run_file::RunStatus;
use crate::step::{StepResult, tsv_number};
use crate::verdict::Verdict;

/// How the step each row is read at was chosen.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AtRule {
    /// `--at RATE`: the step offered that rate, or the highest below it.
    Given,
    /// No rate given: the highest every run offered.
    Common,
}

/// The step rows are read at: a rate, and how it was chosen.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct At {
    /// The rate (on each run's own axis); none when no run has a step.
    pub rate: Option<f64>,
    pub rule: AtRule,
}

impl At {
    /// The rule in words, for a page's and stderr's note: `p99 at 400 (the step offered 400, or
    /// the nearest below)`.
    pub fn words(&self) -> String {
        let rate = self.rate.map_or_else(|| "-".to_string(), tsv_number);
        match self.rule {
            AtRule::Given => {
                format!("each run read at the step offered {rate} (--at), or the nearest below it")
            }
            AtRule::Common => format!(
                "each run read at the step offered {rate}, the highest rate every run offered, or the nearest below it"
            ),
        }
    }
}

/// Whether a run's numbers can be trusted: not when its generator could not keep its schedule on
/// some step (that step's verdict `invalid`), nor when the knee is the generator's own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Trust {
    Trusted,
    Untrusted,
}

impl Trust {
    pub fn name(self) -> &'static str {
        match self {
            Trust::Trusted => "trusted",
            Trust::Untrusted => "untrusted",
        }
    }
}

/// One run's row.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    /// run.json's `started_at` (RFC 3339, UTC), as written.
    pub started_at: String,
    pub label: String,
    /// The revision the run was made against; none when the run was not told one.
    pub commit: Option<String>,
    pub target: String,
    pub status: RunStatus,
    /// What the knee, kept-up and at values are in: `dem_req_rate` or `connections`.
    pub axis: &'static str,
    /// Where the server stopped coping (on the axis) and why; none when no step shows it.
    pub knee: Option<f64>,
    pub knee_cause: Option<KneeCause>,
    /// The highest value it kept up with, on the axis.
    pub kept_up_to: Option<f64>,
    /// The chosen step: its number and the value it offered (none: no step at or below the rate).
    pub at_step: Option<u32>,
    pub at_value: Option<f64>,
    pub p99_ms: Option<f64>,
    /// p99 is only a lower bound there (requests still unanswered at the step's end).
    pub p99_lower_bound: bool,
    /// Requests served per core-second of the target's own server there; none unmonitored.
    pub ok_per_core_s: Option<f64>,
    /// The chosen step's verdict on the generator.
    pub at_trust: Option<Verdict>,
    pub trust: Trust,
    /// How many of the run's steps the generator could not be trusted on.
    pub untrusted_steps: usize,
    /// Where the run was read from.
    pub source: String,
}

impl Row {
    /// The commit if given, else the label: how a chart's point is named.
    pub fn name(&self) -> String {
        match &self.commit {
            Some(c) => format!("{} {}", short_commit(c), self.label),
            None => self.label.clone(),
        }
    }
}

/// A commit as a point's label says it: a hex SHA cut to 12 characters, anything else whole.
pub fn short_commit(commit: &str) -> &str {
    let hex = commit.len() > 12 && commit.chars().all(|c| c.is_ascii_hexdigit());
    if hex { &commit[..12] } else { commit }
}

/// The history: the step rows are read at, and one row per run, oldest first.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct History {
    pub at: At,
    pub rows: Vec<Row>,
}

/// The TSV's columns, in order: the step quantities named as steps.tsv names them.
pub const COLUMNS: [&str; 18] = [
    "started_at",
    "label",
    "commit",
    "target",
    "status",
    "axis",
    "knee",
    "knee_cause",
    "kept_up_to",
    "at_step",
    "at_value",
    P99_MS.key,
    "p99_lower_bound",
    OK_PER_CORE_S.key,
    "at_trust",
    "trust",
    "untrusted_steps",
    "source",
];

/// The history of `runs`, read at `at` (none: the highest rate every run offered), oldest first;
/// runs that started at the same instant keep the order given.
pub fn history(runs: &[Labelled], at: Option<f64>) -> History {
    let at = match at {
        Some(rate) => At {
            rate: Some(rate),
            rule: AtRule::Given,
        },
        None => At {
            rate: runs
                .iter()
                .filter_map(|r| r.run.steps.iter().map(joined_value).max_by(f64::total_cmp))
                .min_by(f64::total_cmp),
            rule: AtRule::Common,
        },
    };
    let mut rows: Vec<(Option<SystemTime>, Row)> = runs
        .iter()
        .map(|r| {
            let when = humantime::parse_rfc3339_weak(&r.run.started_at).ok();
            (when, row(r, at.rate))
        })
        .collect();
    // A start that does not parse sorts by its text, after every one that does.
    rows.sort_by(|a, b| match (a.0, b.0) {
        (Some(x), Some(y)) => x.cmp(&y),
        (Some(_), None) => std::cmp::Ordering::Less,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        (None, None) => a.1.started_at.cmp(&b.1.started_at),
    });
    History {
        at,
        rows: rows.into_iter().map(|(_, r)| r).collect(),
    }
}

/// The step offered `rate`, or the highest below it (to the table's three decimals); the last such
/// step when several offered it (a search's confirmation after its probe).
pub fn step_at(steps: &[StepResult], rate: f64) -> Option<&StepResult> {
    let key = |v: f64| (v * 1000.0).round() as i64;
    let best = steps
        .iter()
        .map(joined_value)
        .filter(|v| key(*v) <= key(rate))
        .max_by(f64::total_cmp)?;
    steps
        .iter()
        .rev()
        .find(|s| key(joined_value(s)) == key(best))
}

fn row(r: &Labelled, rate: Option<f64>) -> Row {
    let run = &r.run;
    let ranked = ranking::rank(std::slice::from_ref(r))
        .pop()
        .expect("one run ranks as one");
    let step = rate.and_then(|rate| step_at(&run.steps, rate));
    let generator_knee = ranked.knee.as_ref().is_some_and(|k| !k.servers);
    Row {
        started_at: run.started_at.clone(),
        label: r.label.clone(),
        commit: run.commit.clone(),
        target: run.target.clone(),
        status: run.status,
        axis: axis_of(run.model()),
        knee: ranked.knee_at,
        knee_cause: ranked.knee.as_ref().map(|k| k.cause),
        kept_up_to: ranked.kept_up_to,
        at_step: step.map(|s| s.number),
        at_value: step.map(joined_value),
        p99_ms: step.map(|s| s.latency_ms.p99),
        p99_lower_bound: step.is_some_and(|s| s.latency_ms.lower_bounds.contains("p99")),
        ok_per_core_s: step.and_then(|s| OK_PER_CORE_S.of_step(s)),
        at_trust: step.map(|s| s.trust),
        trust: match ranked.untrusted_steps > 0 || generator_knee {
            true => Trust::Untrusted,
            false => Trust::Trusted,
        },
        untrusted_steps: ranked.untrusted_steps,
        source: r.source.clone(),
    }
}

impl History {
    /// The TSV: a head of [`COLUMNS`], then a row per run, oldest first; numbers as steps.tsv
    /// writes them, empty where there is none. A tab or newline in a label, commit or path (which
    /// would break the row) is written as a space.
    pub fn tsv(&self) -> String {
        let mut out = COLUMNS.join("\t") + "\n";
        for r in &self.rows {
            out.push_str(&r.tsv_cells().join("\t"));
            out.push('\n');
        }
        out
    }
}

impl Row {
    pub fn tsv_cells(&self) -> Vec<String> {
        let n = |v: Option<f64>| v.map_or(String::new(), tsv_number);
        let text = |s: &str| s.replace(['\t', '\n', '\r'], " ");
        vec![
            text(&self.started_at),
            text(&self.label),
            text(self.commit.as_deref().unwrap_or_default()),
            text(&self.target),
            self.status.name().to_string(),
            self.axis.to_string(),
            n(self.knee),
            self.knee_cause
                .map_or(String::new(), |c| c.name().to_string()),
            n(self.kept_up_to),
            self.at_step.map_or(String::new(), |s| s.to_string()),
            n(self.at_value),
            n(self.p99_ms),
            self.p99_lower_bound.to_string(),
            n(self.ok_per_core_s),
            self.at_trust
                .map_or(String::new(), |v| v.name().to_string()),
            self.trust.name().to_string(),
            self.untrusted_steps.to_string(),
            text(&self.source),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run_file::RunFile;
    use std::path::Path;

    const GOLDEN: &str = include_str!("../tests/golden/run.json");

    /// The golden run (steps offered 100 to 600 req/s), started at `start`, each step's p99 plus
    /// `slower_ms`, told `commit`.
    fn run(label: &str, start: &str, commit: Option<&str>, slower_ms: f64) -> Labelled {
        let mut run = RunFile::parse(GOLDEN, Path::new("run.json")).unwrap();
        run.started_at = start.to_string();
        run.commit = commit.map(str::to_string);
        for s in &mut run.steps {
            s.latency_ms.p99 += slower_ms;
        }
        Labelled {
            label: label.to_string(),
            source: format!("results/{label}"),
            run,
        }
    }

    fn values(run: &Labelled) -> Vec<f64> {
        run.run.steps.iter().map(joined_value).collect()
    }

    #[test]
    fn rows_come_oldest_first_whatever_order_they_were_given() {
        let runs = [
            run("c", "2026-12-03T01:00:00.000Z", Some("ccc"), 2.0),
            run("a", "2026-12-01T01:00:00.000Z", Some("aaa"), 0.0),
            run("b", "2026-12-02T23:59:59.999Z", None, 1.0),
        ];
        let h = history(&runs, None);
        let labels: Vec<&str> = h.rows.iter().map(|r| r.label.as_str()).collect();
        assert_eq!(labels, ["a", "b", "c"]);
        assert_eq!(h.rows[0].commit.as_deref(), Some("aaa"));
        assert_eq!(h.rows[1].commit, None);
        let p99: Vec<f64> = h.rows.iter().map(|r| r.p99_ms.unwrap()).collect();
        assert!(p99[0] < p99[1] && p99[1] < p99[2], "{p99:?}");
    }

    #[test]
    fn the_step_read_is_the_one_offered_or_the_nearest_below() {
        let r = run("a", "2026-12-01T01:00:00.000Z", None, 0.0);
        let v = values(&r);
        assert!(v.len() >= 3, "{v:?}");
        let exact = step_at(&r.run.steps, v[1]).unwrap();
        assert_eq!(joined_value(exact), v[1]);
        let between = step_at(&r.run.steps, (v[1] + v[2]) / 2.0).unwrap();
        assert_eq!(joined_value(between), v[1]);
        assert!(step_at(&r.run.steps, v[0] - 1.0).is_none());
        let above = step_at(&r.run.steps, v.iter().cloned().fold(0.0, f64::max) * 10.0).unwrap();
        assert_eq!(above.number, r.run.steps.last().unwrap().number);

        let h = history(std::slice::from_ref(&r), Some(v[0] - 1.0));
        assert_eq!(h.at.rule, AtRule::Given);
        let row = &h.rows[0];
        assert_eq!((row.at_step, row.p99_ms), (None, None));
        assert!(h.tsv().lines().nth(1).unwrap().contains("\t\t\t"));
    }

    #[test]
    fn without_a_rate_every_run_is_read_at_the_highest_all_offered() {
        let long = run("long", "2026-12-01T01:00:00.000Z", None, 0.0);
        let mut short = run("short", "2026-12-02T01:00:00.000Z", None, 0.0);
        short.run.steps.truncate(2);
        let common = values(&short)[1];
        let h = history(&[long, short], None);
        assert_eq!(h.at.rule, AtRule::Common);
        assert_eq!(h.at.rate, Some(common));
        assert!(h.rows.iter().all(|r| r.at_value == Some(common)));
        assert!(h.at.words().contains(&tsv_number(common)));
    }

    #[test]
    fn a_run_with_an_untrusted_step_says_so() {
        let mut bad = run("bad", "2026-12-01T01:00:00.000Z", None, 0.0);
        bad.run.steps[0].trust = Verdict::Invalid;
        bad.run.summary = Some(crate::step::summarize_run(&bad.run.steps));
        let good = run("good", "2026-12-02T01:00:00.000Z", None, 0.0);
        let h = history(&[bad, good], None);
        assert_eq!(h.rows[0].trust, Trust::Untrusted);
        assert_eq!(h.rows[0].untrusted_steps, 1);
        assert_eq!(h.rows[1].trust, Trust::Trusted);
    }

    #[test]
    fn the_chosen_step_s_own_verdict_is_its_column_a_degraded_step_in_a_trusted_run() {
        let mut late = run("late", "2026-12-01T01:00:00.000Z", None, 0.0);
        let last = late.run.steps.len() - 1;
        late.run.steps[last].trust = Verdict::Degraded;
        let top = late.run.steps[last].number;
        let h = history(&[late], None);
        assert_eq!(h.rows[0].at_step, Some(top), "read at the top step");
        let col = COLUMNS.iter().position(|c| *c == "at_trust").unwrap();
        let tsv = h.tsv();
        let cells: Vec<&str> = tsv.lines().nth(1).unwrap().split('\t').collect();
        assert_eq!(cells[col], "degraded");
        assert_eq!(
            h.rows[0].trust,
            Trust::Trusted,
            "degraded is no untrusted step"
        );
    }

    #[test]
    fn the_tsv_has_one_cell_per_column_and_no_tab_from_a_label() {
        let r = run(
            "a\tb",
            "2026-12-01T01:00:00.000Z",
            Some("0123456789abcdef0123"),
            0.0,
        );
        let h = history(&[r], None);
        let tsv = h.tsv();
        let lines: Vec<&str> = tsv.lines().collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0].split('\t').count(), COLUMNS.len());
        let cells: Vec<&str> = lines[1].split('\t').collect();
        assert_eq!(cells.len(), COLUMNS.len());
        assert_eq!(cells[1], "a b");
        assert_eq!(cells[2], "0123456789abcdef0123");
        assert_eq!(h.rows[0].name(), "0123456789ab a\tb");
        let p99 = COLUMNS.iter().position(|c| *c == P99_MS.key).unwrap();
        assert_eq!(cells[p99], tsv_number(h.rows[0].p99_ms.unwrap()));
    }

    #[test]
    fn an_unparsable_start_sorts_last_by_its_text() {
        let runs = [
            run("late", "yesterday", None, 0.0),
            run("early", "2026-12-01T01:00:00.000Z", None, 0.0),
        ];
        let h = history(&runs, None);
        assert_eq!(h.rows[0].label, "early");
    }
}
