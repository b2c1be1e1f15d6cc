//! A run as it happens, as events (`events.ndjson`, schema `stampede.events/1`): what the live page
//! and /metrics are fed, and what rebuilds them afterwards. One event per target's run created, per
//! step started, per merged 1 s interval, per step and warmup written, per target's run ended; never
//! one per agent sample. [`Live::apply`] folds them back: a target's `run` after every event is its
//! run.json as last written (steps, summary, ending), so what the page shows of a finished step is
//! run.json's, by construction.
use serde::{Deserialize, Serialize};

use crate::run_file::{Breach, RunFile, RunStatus, Stopped};
use crate::search::Capacity;
use crate::step::{RunSummary, StepResult};

/// The schema of `events.ndjson`, said by its first event.
pub const SCHEMA: &str = "stampede.events/1";

/// One line of events.ndjson, and one message of the live page's stream: its place in the run
/// (from 1, the stream's event id) and what happened.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Line {
    pub id: u64,
    #[serde(flatten)]
    pub event: Event,
}

/// What happened. `target` is a target's index in the command line's order (0 for a run of one).
/// The file keeps its documented keys (`lane`, `lanes`; docs/reference/events.md), which readers of
/// `stampede.events/1` parse.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    /// The run began: its targets' names (one unnamed target for a run of one target), whether it is
    /// a capacity search, and its scheduled length (a search's deadline).
    Begin {
        #[cfg_attr(feature = "schema", schemars(schema_with = "crate::schema::events_id"))]
        schema: String,
        #[serde(rename = "lanes")]
        targets: Vec<String>,
        search: bool,
        total_s: f64,
        /// When it began (RFC 3339, to the millisecond).
        started_at: String,
    },
    /// A finished run drawn under this one's charts (`--baseline`), right after the begin: the page
    /// rebuilt from the file alone is the one the browsers saw.
    Baseline { run: Box<RunFile> },
    /// A target's run.json as first written: its plan and agents, no step yet.
    Run {
        #[serde(rename = "lane")]
        target: usize,
        run: Box<RunFile>,
    },
    /// A step is about to start on every agent.
    StepStart {
        #[serde(rename = "lane")]
        target: usize,
        step: StepStart,
    },
    /// One merged second of the running step.
    Interval {
        #[serde(rename = "lane")]
        target: usize,
        interval: Interval,
    },
    /// A planned run's warmup, measured and kept apart (run.json `warmup`).
    Warmup {
        #[serde(rename = "lane")]
        target: usize,
        step: Box<StepResult>,
    },
    /// A step written, with the run's answer after it (run.json's `steps[]` and `summary`).
    Step {
        #[serde(rename = "lane")]
        target: usize,
        step: Box<StepResult>,
        summary: Option<Box<RunSummary>>,
    },
    /// A target's run ended: run.json's last fields.
    End {
        #[serde(rename = "lane")]
        target: usize,
        end: Box<End>,
    },
    /// The whole run is over; `report` is the report's file name beside events.ndjson, when there
    /// is one (side by side: the comparison's).
    Finished { report: Option<String> },
}

/// A step as it starts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct StepStart {
    /// Counted from 1 (0: a warmup).
    pub step: u32,
    /// The target's planned steps, when known beforehand (a search's are not).
    pub steps: Option<usize>,
    /// A search's probe: what it is for.
    pub role: Option<String>,
    pub value: f64,
    pub demanded: Option<f64>,
    pub length_s: f64,
    /// The agents running it, by name, and each one's share of its value.
    pub agents: Vec<AgentShare>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct AgentShare {
    pub agent: String,
    pub share: f64,
}

/// One merged second of a step: what every agent reported for it, added.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Interval {
    pub step: u32,
    /// Its start and length, into the step.
    pub at_s: f64,
    pub length_s: f64,
    /// Of this second: requests sent, replies served (expected status), failed.
    pub sent: u64,
    pub ok: u64,
    pub failed: u64,
    /// Of this second's merged latency (ms); null when nothing was measured.
    pub p50_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    /// Over the step so far: requests sent, and each agent's (the step's agents' order).
    pub sent_so_far: u64,
    pub agents_sent: Vec<u64>,
    /// When the coordinator had it merged (ms since the Unix epoch, its wall clock): how late a
    /// reader on the same machine sees it.
    #[serde(default)]
    pub merged_unix_ms: u64,
}

/// How a target's run ended: run.json's `status`, `finished_at`, `stopped`, `fail_on`, `capacity`
/// and its `warnings` by then.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct End {
    pub status: RunStatus,
    pub finished_at: Option<String>,
    /// As run.json's: absent while unknown, null when nothing stopped the ramp early.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::run_file::present"
    )]
    pub stopped: Option<Option<Stopped>>,
    pub fail_on: Option<Vec<Breach>>,
    pub capacity: Option<Capacity>,
    pub warnings: Vec<String>,
}

impl End {
    pub fn of(run: &RunFile) -> End {
        End {
            status: run.status,
            finished_at: run.finished_at.clone(),
            stopped: run.stopped.clone(),
            fail_on: run.fail_on.clone(),
            capacity: run.capacity.clone(),
            warnings: run.warnings.clone(),
        }
    }
}

/// A run folded from its events: what the live page draws.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Live {
    /// The id of the last event applied (0: none).
    pub last: u64,
    pub begun: Option<Begun>,
    pub targets: Vec<Target>,
    /// Whether the whole run is over, and its report's file name.
    pub finished: bool,
    pub report: Option<String>,
    /// The run drawn under this one (`--baseline`), as the begin event carried it.
    pub baseline: Option<RunFile>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Begun {
    pub search: bool,
    pub total_s: f64,
    pub started_at: String,
}

/// One target's run as its events left it.
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    pub name: String,
    /// Its run.json as last written; `None` until its `run` event.
    pub run: Option<RunFile>,
    /// The step running, or the last one that ran (until the next starts), with its seconds.
    pub current: Option<Current>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Current {
    pub start: StepStart,
    pub intervals: Vec<Interval>,
    /// Written: its result is among the run's steps (or its warmup).
    pub done: bool,
}

impl Current {
    /// The step's merged seconds so far, added: requests sent, served, failed (saturating: a file
    /// made up to overflow them is still read).
    pub fn totals(&self) -> (u64, u64, u64) {
        self.intervals.iter().fold((0, 0, 0), |(a, b, f), i| {
            (
                a.saturating_add(i.sent),
                b.saturating_add(i.ok),
                f.saturating_add(i.failed),
            )
        })
    }
}

/// Why an event cannot be folded: the stream is not one run's, in order.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FoldError {
    #[error("event {id} names lane {target}, and the run has {targets}")]
    NoTarget {
        id: u64,
        target: usize,
        targets: usize,
    },
    #[error("event {id} comes after event {last}: events are applied in order, once")]
    OutOfOrder { id: u64, last: u64 },
    #[error("event {id} comes before the run's begin")]
    NotBegun { id: u64 },
    #[error("event {id} is of schema {found}, not {SCHEMA}")]
    Schema { id: u64, found: String },
    #[error("event {id} changes lane {target}'s run before its run event")]
    NoRun { id: u64, target: usize },
    #[error("event {id} begins the run again: one file holds one run")]
    BegunTwice { id: u64 },
}

impl Live {
    /// Folds one more event in; the events must come in order, each once.
    pub fn apply(&mut self, line: &Line) -> Result<(), FoldError> {
        let id = line.id;
        if id <= self.last {
            return Err(FoldError::OutOfOrder {
                id,
                last: self.last,
            });
        }
        if let Event::Begin { .. } = &line.event
            && self.begun.is_some()
        {
            return Err(FoldError::BegunTwice { id });
        }
        if let Event::Begin {
            schema,
            targets,
            search,
            total_s,
            started_at,
        } = &line.event
        {
            let begun = Begun {
                search: *search,
                total_s: *total_s,
                started_at: started_at.clone(),
            };
            return self.begin(id, schema, targets, begun);
        }
        if self.begun.is_none() {
            return Err(FoldError::NotBegun { id });
        }
        let targets = self.targets.len();
        let target_of = |target: usize| {
            if target < targets {
                Ok(target)
            } else {
                Err(FoldError::NoTarget {
                    id,
                    target,
                    targets,
                })
            }
        };
        match &line.event {
            Event::Begin { .. } => unreachable!("handled above"),
            Event::Baseline { run } => self.baseline = Some((**run).clone()),
            Event::Run { target, run } => {
                self.targets[target_of(*target)?].run = Some((**run).clone());
            }
            Event::StepStart { target, step } => {
                self.targets[target_of(*target)?].current = Some(Current {
                    start: step.clone(),
                    intervals: Vec::new(),
                    done: false,
                });
            }
            Event::Interval { target, interval } => {
                let l = &mut self.targets[target_of(*target)?];
                // An interval of a step whose start was not seen (a stream joined late is replayed
                // from the start, so only a damaged file) is kept out rather than misplaced.
                if let Some(c) = l
                    .current
                    .as_mut()
                    .filter(|c| c.start.step == interval.step && !c.done)
                {
                    c.intervals.push(interval.clone());
                }
            }
            Event::Warmup { target, step } => {
                let l = &mut self.targets[target_of(*target)?];
                let run = run_of(l, id, *target)?;
                run.warmup = Some((**step).clone());
                mark_done(l, 0);
            }
            Event::Step {
                target,
                step,
                summary,
            } => {
                let l = &mut self.targets[target_of(*target)?];
                let run = run_of(l, id, *target)?;
                run.steps.push((**step).clone());
                run.summary = summary.as_deref().cloned();
                mark_done(l, step.number);
            }
            Event::End { target, end } => {
                let l = &mut self.targets[target_of(*target)?];
                let run = run_of(l, id, *target)?;
                run.status = end.status;
                run.finished_at = end.finished_at.clone();
                run.stopped = end.stopped.clone();
                run.fail_on = end.fail_on.clone();
                run.capacity = end.capacity.clone();
                run.warnings = end.warnings.clone();
            }
            Event::Finished { report } => {
                self.finished = true;
                // A file name beside the events, nothing that would make a link go elsewhere.
                self.report = report.clone().filter(|r| {
                    r.ends_with(".html")
                        && r.bytes()
                            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
                });
            }
        }
        self.last = id;
        Ok(())
    }

    /// The run's begin: its schema checked, its targets named, none of them run yet.
    fn begin(
        &mut self,
        id: u64,
        schema: &str,
        targets: &[String],
        begun: Begun,
    ) -> Result<(), FoldError> {
        if schema != SCHEMA {
            return Err(FoldError::Schema {
                id,
                found: schema.to_string(),
            });
        }
        self.begun = Some(begun);
        self.targets = targets
            .iter()
            .map(|name| Target {
                name: name.clone(),
                run: None,
                current: None,
            })
            .collect();
        self.last = id;
        Ok(())
    }

    /// A whole events.ndjson folded, each line read as it stands. A line that cannot be read or
    /// folded is named by its number.
    /// A last line without its newline is a write cut short (a crash, a full disk): it is left
    /// out, the events before it stand.
    pub fn read(text: &str) -> Result<Live, ReadError> {
        let mut live = Live::default();
        let lines: Vec<&str> = text.lines().collect();
        let cut = !text.is_empty() && !text.ends_with('\n');
        for (n, raw) in lines.iter().enumerate() {
            if raw.trim().is_empty() {
                continue;
            }
            let line: Line = match serde_json::from_str(raw) {
                Ok(l) => l,
                Err(_) if cut && n + 1 == lines.len() => break,
                Err(e) => {
                    return Err(ReadError::Line {
                        line: n + 1,
                        why: e.to_string(),
                    });
                }
            };
            live.apply(&line).map_err(|e| ReadError::Line {
                line: n + 1,
                why: e.to_string(),
            })?;
        }
        Ok(live)
    }
}

/// The run.json an event of target `target` changes: its `run` event must have come first.
fn run_of(l: &mut Target, id: u64, target: usize) -> Result<&mut RunFile, FoldError> {
    l.run.as_mut().ok_or(FoldError::NoRun { id, target })
}

fn mark_done(l: &mut Target, step: u32) {
    if let Some(c) = l.current.as_mut().filter(|c| c.start.step == step) {
        c.done = true;
    }
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ReadError {
    #[error("events.ndjson line {line}: {why}")]
    Line { line: usize, why: String },
}

impl Line {
    /// The line as events.ndjson holds it (one line of JSON, no newline).
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("an event is always serializable")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn begin() -> Line {
        Line {
            id: 1,
            event: Event::Begin {
                schema: SCHEMA.into(),
                targets: vec![String::new()],
                search: false,
                total_s: 30.0,
                started_at: "2026-12-05T08:00:00.000Z".into(),
            },
        }
    }

    fn start(id: u64, step: u32) -> Line {
        Line {
            id,
            event: Event::StepStart {
                target: 0,
                step: StepStart {
                    step,
                    steps: Some(3),
                    role: None,
                    value: 100.0,
                    demanded: Some(100.0),
                    length_s: 10.0,
                    agents: vec![AgentShare {
                        agent: "embedded".into(),
                        share: 100.0,
                    }],
                },
            },
        }
    }

    fn tick(id: u64, step: u32) -> Line {
        Line {
            id,
            event: Event::Interval {
                target: 0,
                interval: Interval {
                    step,
                    at_s: 0.0,
                    length_s: 1.0,
                    sent: 100,
                    ok: 99,
                    failed: 1,
                    p50_ms: Some(1.5),
                    p99_ms: Some(9.0),
                    sent_so_far: 100,
                    agents_sent: vec![100],
                    merged_unix_ms: 1_796_457_600_000,
                },
            },
        }
    }

    #[test]
    fn a_line_reads_back_as_it_was_written() {
        for line in [begin(), start(2, 1), tick(3, 1)] {
            let text = line.to_json();
            assert!(!text.contains('\n'));
            assert_eq!(serde_json::from_str::<Line>(&text).unwrap(), line);
        }
        assert!(
            begin()
                .to_json()
                .starts_with("{\"id\":1,\"event\":\"begin\"")
        );
    }

    #[test]
    fn events_out_of_order_or_before_the_begin_or_of_another_target_are_refused() {
        let mut live = Live::default();
        assert_eq!(live.apply(&start(2, 1)), Err(FoldError::NotBegun { id: 2 }));
        live.apply(&begin()).unwrap();
        live.apply(&start(2, 1)).unwrap();
        assert_eq!(
            live.apply(&start(2, 1)),
            Err(FoldError::OutOfOrder { id: 2, last: 2 })
        );
        let mut other = start(3, 1);
        if let Event::StepStart { target, .. } = &mut other.event {
            *target = 1;
        }
        assert_eq!(
            live.apply(&other),
            Err(FoldError::NoTarget {
                id: 3,
                target: 1,
                targets: 1
            })
        );
        let mut old = begin();
        if let Event::Begin { schema, .. } = &mut old.event {
            *schema = "stampede.events/0".into();
        }
        assert!(matches!(
            Live::default().apply(&old),
            Err(FoldError::Schema { .. })
        ));
    }

    #[test]
    fn a_step_s_seconds_are_kept_until_the_next_step_starts_and_strays_are_left_out() {
        let mut live = Live::default();
        for l in [begin(), start(2, 1), tick(3, 1), tick(4, 1), tick(5, 2)] {
            live.apply(&l).unwrap();
        }
        let c = live.targets[0].current.as_ref().unwrap();
        assert_eq!((c.start.step, c.intervals.len()), (1, 2));
        live.apply(&start(6, 2)).unwrap();
        assert!(
            live.targets[0]
                .current
                .as_ref()
                .unwrap()
                .intervals
                .is_empty()
        );
    }

    #[test]
    fn a_file_is_read_line_by_line_and_a_bad_line_is_named() {
        let text = format!("{}\n{}\n", begin().to_json(), start(2, 1).to_json());
        assert_eq!(Live::read(&text).unwrap().last, 2);
        // A last line cut short by a crash is left out; the same line whole but bad is named.
        let cut = format!("{}\n{{\"id\":2,\"ev", begin().to_json());
        assert_eq!(Live::read(&cut).unwrap().last, 1);
        assert!(Live::read(&format!("{cut}\n")).is_err());
        // One file, one run.
        let mut again = begin();
        again.id = 3;
        let twice = format!("{}\n{}\n", text.trim_end(), again.to_json());
        assert!(
            Live::read(&twice)
                .unwrap_err()
                .to_string()
                .contains("begins the run again")
        );
        // A report named as a link elsewhere is not one.
        let end = Line {
            id: 3,
            event: Event::Finished {
                report: Some("javascript:alert(1)//.html".into()),
            },
        };
        let finished = format!("{}{}\n", text, end.to_json());
        assert_eq!(Live::read(&finished).unwrap().report, None);
        let bad = format!("{}\n{{\"id\": 2}}\n", begin().to_json());
        let e = Live::read(&bad).unwrap_err().to_string();
        assert!(e.starts_with("events.ndjson line 2:"), "{e}");
    }
}
