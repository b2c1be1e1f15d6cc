//! The capacity search as a pure state machine: given the last probe's outcome and the time spent, it
//! names the next probe or the answer. No clock, no I/O: the coordinator runs the probes and passes
//! the time in, so every path (doomed, a lower bound only, a generator at its limit, a server that
//! did not come back, a deadline) is tested without a server.
pub mod capacity;
pub mod probe;

use serde::{Deserialize, Serialize};

use crate::condition::Condition;
use thiserror::Error;

pub use crate::step::{Mark, ProbeMark, ProbeRole};
pub use capacity::{Capacity, Ceiling, mark};
pub use probe::{Class, Failure, ProbeFacts, classify};

/// How a search ended. Exit codes start past `run`'s 0-3 (1 failed, 2 usage, 3 --fail-on breached)
/// so a script tells every ending apart; an interrupted search exits 1, as an aborted run does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Resolved,
    /// A pass at the highest rate allowed: the server takes at least that, maybe more.
    LowerBoundOnly,
    /// The generator could not be trusted at a rate: at least the highest pass; add agents.
    GeneratorBound,
    /// The first probe already failed.
    Doomed,
    /// After a fail with errors the last passing rate failed too: the server broke.
    ServerUnrecovered,
    /// The time (or probe budget) ran out: the bounds known so far.
    Deadline,
    /// Ctrl-C (or an aborted probe): the bounds known so far. The caller's, never `next`'s.
    Interrupted,
    /// The run failed under the search (an agent refused a probe, none was left): the bounds known
    /// so far. The caller's, never `next`'s.
    Failed,
}

impl Status {
    pub fn name(self) -> &'static str {
        match self {
            Status::Resolved => "resolved",
            Status::LowerBoundOnly => "lower_bound_only",
            Status::GeneratorBound => "generator_bound",
            Status::Doomed => "doomed",
            Status::ServerUnrecovered => "server_unrecovered",
            Status::Deadline => "deadline",
            Status::Interrupted => "interrupted",
            Status::Failed => "failed",
        }
    }

    pub fn exit_code(self) -> u8 {
        match self {
            Status::Resolved => 0,
            Status::LowerBoundOnly => 4,
            Status::GeneratorBound => 5,
            Status::Doomed => 6,
            Status::ServerUnrecovered => 7,
            Status::Deadline => 8,
            Status::Interrupted | Status::Failed => 1,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    pub start: f64,
    pub max_rate: f64,
    /// Bisection ends when highest fail / highest pass <= 1 + precision (0.05 for 5 %).
    pub precision: f64,
    /// Each ramp probe offers this many times the last.
    pub growth: f64,
    /// Seconds of a ramp or bisect probe.
    pub probe_s: f64,
    pub confirm_s: f64,
    /// Confirmations of each bound.
    pub repeat: u32,
    /// How many times an undecided probe is run again, each twice as long, before it counts as a fail.
    pub undecided_retries: u32,
    /// How many invalid probes in a row at one rate before the answer is "the generator is the limit".
    pub invalid_retries: u32,
    /// Seconds the whole search may take.
    pub deadline_s: f64,
    /// Probes the search may run, whatever the time: noise cannot make it run for ever.
    pub max_probes: u32,
    /// Samples the SLOs need to be judged (the most demanding percentile's, see
    /// [`probe::samples_needed`]): with an open model, whose rate is per second, a probe lasts at
    /// least long enough to gather them, rather than come back undecided.
    pub samples: u64,
    /// Whether the rate is per second (the open models), so `samples` sets a probe's length.
    pub per_second: bool,
    /// Whether rates are whole numbers (the closed model's connection counts): probes are at whole
    /// rates, and bisection also ends when no whole rate lies between the bounds.
    pub whole: bool,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            start: 100.0,
            max_rate: 1_000_000.0,
            precision: 0.05,
            growth: 2.0,
            probe_s: 10.0,
            confirm_s: 30.0,
            repeat: 2,
            undecided_retries: 2,
            invalid_retries: 2,
            deadline_s: 1800.0,
            max_probes: 200,
            samples: 0,
            per_second: true,
            whole: false,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Error)]
pub enum SearchConfigError {
    #[error("--start {0} must be a rate above 0")]
    Start(f64),
    #[error("--max-rate {max} must be at least --start {start}")]
    MaxRate { start: f64, max: f64 },
    #[error("--precision must be a percentage above 0, e.g. 5% (got a fraction of {0})")]
    Precision(f64),
    #[error("the growth factor {0} must be above 1")]
    Growth(f64),
    #[error("--probe {probe}s and --confirm {confirm}s must be above 0 seconds")]
    Length { probe: f64, confirm: f64 },
    #[error("the search needs a budget of at least one probe")]
    Budget,
    #[error("--deadline {0}s must be above 0 seconds")]
    Deadline(f64),
    #[error(
        "--start {start} and --max-rate {max} count connections (--model concurrency): give whole numbers"
    )]
    Whole { start: f64, max: f64 },
}

impl Config {
    /// A probe's length at `rate`: `base`, or long enough for the samples the SLOs need (and a
    /// quarter more, for a rate that falls a little short of its offer).
    pub fn length(&self, rate: f64, base: f64) -> f64 {
        if !self.per_second || self.samples == 0 {
            return base;
        }
        base.max(EVIDENCE_MARGIN * self.samples as f64 / rate)
    }

    pub fn validate(&self) -> Result<(), SearchConfigError> {
        let positive = |x: f64| x.is_finite() && x > 0.0;
        if !positive(self.start) {
            return Err(SearchConfigError::Start(self.start));
        }
        if !(self.max_rate.is_finite() && self.max_rate >= self.start) {
            return Err(SearchConfigError::MaxRate {
                start: self.start,
                max: self.max_rate,
            });
        }
        if self.whole && (self.start.fract() != 0.0 || self.max_rate.fract() != 0.0) {
            return Err(SearchConfigError::Whole {
                start: self.start,
                max: self.max_rate,
            });
        }
        if !positive(self.precision) {
            return Err(SearchConfigError::Precision(self.precision));
        }
        if !(self.growth.is_finite() && self.growth > 1.0) {
            return Err(SearchConfigError::Growth(self.growth));
        }
        if !positive(self.probe_s) || !positive(self.confirm_s) {
            return Err(SearchConfigError::Length {
                probe: self.probe_s,
                confirm: self.confirm_s,
            });
        }
        if self.max_probes == 0 {
            return Err(SearchConfigError::Budget);
        }
        // Infinity is allowed: no deadline but the probe budget.
        if self.deadline_s.is_nan() || self.deadline_s <= 0.0 {
            return Err(SearchConfigError::Deadline(self.deadline_s));
        }
        Ok(())
    }
}

/// An undecided probe short of samples is run again this much longer than would just gather them.
const EVIDENCE_MARGIN: f64 = 1.25;
/// At most this many times longer each time: a probe that gathered almost nothing (a closed loop
/// against a stalled server) is not followed by one that would outlast any deadline.
const MAX_RETRY_GROWTH: f64 = 8.0;

/// What the caller measured on the probe it was told to run.
#[derive(Debug, Clone, PartialEq)]
pub struct Probed {
    pub class: Class,
    /// Served replies per second.
    pub achieved: f64,
    /// Seconds actually measured: confirmations are settled by the majority of these.
    pub measured_s: f64,
    /// The target's transport errors or timeouts were seen.
    pub target_errors: bool,
    /// The share of the samples its most demanding percentile needs that the probe gathered,
    /// when short of them: an undecided probe is run again long enough to gather them all.
    pub evidence: Option<f64>,
}

impl Probed {
    /// What a probe measured, as the search takes it: `measured_s` of `facts`, classed `class`.
    pub fn of(class: Class, facts: &ProbeFacts, measured_s: f64, slos: &[Condition]) -> Probed {
        Probed {
            class,
            achieved: facts.achieved,
            measured_s,
            target_errors: facts.target_errors(),
            evidence: probe::evidence(facts, slos),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum Next {
    Probe {
        rate: f64,
        duration_s: f64,
        role: ProbeRole,
    },
    Done(Answer),
}

/// A rate and what it achieved.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateAchieved {
    pub offered: f64,
    pub achieved: f64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct FailedAt {
    pub offered: f64,
    pub failure: Failure,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ProbeCounts {
    pub ramp: u32,
    pub bisect: u32,
    pub confirm: u32,
    pub recovery: u32,
    pub invalid: u32,
    pub undecided: u32,
}

impl ProbeCounts {
    pub fn total(&self) -> u32 {
        self.ramp + self.bisect + self.confirm + self.recovery
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    pub status: Status,
    /// The highest offered rate that passed (after confirmation when resolved), with its achieved.
    pub max_rate: Option<RateAchieved>,
    pub lowest_fail: Option<FailedAt>,
    /// lowest fail / max rate - 1, when both are known.
    pub precision: Option<f64>,
    /// Confirmation probes of the maximum that passed, and the spread of their achieved rates
    /// ((highest - lowest) / lowest).
    pub confirmations: u32,
    pub spread: Option<f64>,
    pub probes: ProbeCounts,
    /// The rate of the last probe the generator could not be trusted on, if any.
    pub invalid_at: Option<f64>,
}

/// One probe's outcome at a rate, kept to settle confirmations and to step back after one.
#[derive(Debug, Clone, PartialEq)]
struct Record {
    offered: f64,
    achieved: f64,
    measured_s: f64,
    failure: Option<Failure>,
    role: ProbeRole,
}

pub struct Search {
    config: Config,
    /// The probe the caller was last told to run.
    pending: Option<(f64, f64, ProbeRole)>,
    records: Vec<Record>,
    invalid_in_row: u32,
    undecided_in_row: u32,
    probes: ProbeCounts,
    invalid_at: Option<f64>,
    done: Option<Answer>,
}

/// The bounds as the records stand: a rate passes or fails by the majority of its measured seconds
/// (a tie fails: conservative); the high bound is the lowest failing rate, the low bound the highest
/// passing rate below it (a pass above a fail is noise, never a maximum). A recovery probe checks
/// the server's health after a break, not its capacity: it moves no bound.
fn bounds(records: &[Record]) -> (Option<f64>, Option<f64>) {
    let marks: Vec<(f64, bool, f64)> = records
        .iter()
        .filter(|r| r.role != ProbeRole::Recovery)
        .map(|r| (r.offered, r.failure.is_none(), r.measured_s))
        .collect();
    bracket(&marks)
}

/// The bounds of probes marked (offered rate, passed, seconds measured), recovery probes already
/// left out: a rate passes when its passing probes measured longer than its failing ones; the high
/// bound is the lowest failing rate, the low bound the highest passing rate below it. The search's
/// own rule, and the live page's bracket while a search runs.
pub fn bracket(marks: &[(f64, bool, f64)]) -> (Option<f64>, Option<f64>) {
    let mut rates: Vec<f64> = marks.iter().map(|m| m.0).collect();
    rates.sort_by(f64::total_cmp);
    rates.dedup();
    let passes = |rate: f64| {
        let (mut pass, mut fail) = (0.0, 0.0);
        for (_, passed, seconds) in marks.iter().filter(|m| m.0 == rate) {
            if *passed {
                pass += seconds;
            } else {
                fail += seconds;
            }
        }
        pass > fail
    };
    let hi = rates.iter().copied().find(|r| !passes(*r));
    let lo = rates
        .iter()
        .copied()
        .rfind(|r| hi.is_none_or(|h| *r < h) && passes(*r));
    (lo, hi)
}

impl Search {
    pub fn new(mut config: Config) -> Result<Search, SearchConfigError> {
        if config.whole && config.max_rate.is_finite() {
            // A ceiling from the fleet may fall between two counts: the lower is the one allowed.
            config.max_rate = config.max_rate.floor();
        }
        config.validate()?;
        Ok(Search {
            config,
            pending: None,
            records: Vec::new(),
            invalid_in_row: 0,
            undecided_in_row: 0,
            probes: ProbeCounts::default(),
            invalid_at: None,
            done: None,
        })
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Whether an undecided probe now would be run again (else it counts as a fail), so its mark
    /// can say which before the search is told.
    pub fn would_retry_undecided(&self) -> bool {
        self.undecided_in_row < self.config.undecided_retries
    }

    /// Forgets the probe last asked for, which never ran (the search was stopped before it): it is
    /// not counted.
    pub fn forget_pending(&mut self) {
        if let Some((_, _, role)) = self.pending.take() {
            let count = match role {
                ProbeRole::Ramp => &mut self.probes.ramp,
                ProbeRole::Bisect => &mut self.probes.bisect,
                ProbeRole::Confirm => &mut self.probes.confirm,
                ProbeRole::Recovery => &mut self.probes.recovery,
                ProbeRole::Warmup => return,
            };
            *count = count.saturating_sub(1);
        }
    }

    /// The rate the search starts from.
    pub fn start(&self) -> f64 {
        self.config.start
    }

    /// The highest throughput achieved by a probe at no higher a rate than `rate`: the collapse
    /// rule's reference. A higher rate's is not one: after a latency fail at 1,600 req/s that
    /// served 1,600/s, a probe at 1,131 serves 1,131/s because that is what it was offered, and
    /// measured against 1,600 every rate below it would "collapse" down to a doomed search.
    pub fn best_achieved(&self, rate: f64) -> Option<f64> {
        self.records
            .iter()
            .filter(|r| r.offered <= rate)
            .map(|r| r.achieved)
            .reduce(f64::max)
    }

    /// The class of the probe this search last asked for, against the SLOs and the best
    /// throughput of the rates up to its own.
    pub fn classify(&self, facts: &ProbeFacts, slos: &[crate::condition::Condition]) -> Class {
        let best = self.pending.and_then(|(rate, ..)| self.best_achieved(rate));
        classify(facts, slos, best)
    }

    /// The next probe, given the outcome of the last one (none at the start) and the seconds the
    /// search has taken so far. Once it is `Done`, it stays done.
    pub fn next(&mut self, last: Option<Probed>, elapsed_s: f64) -> Next {
        if let Some(answer) = &self.done {
            return Next::Done(answer.clone());
        }
        let next = match (self.pending, last) {
            (Some(pending), Some(probed)) => self.take(pending, probed),
            _ => None,
        }
        .unwrap_or_else(|| self.plan());
        let next = next.and_then(|probe| self.within_budget(probe, elapsed_s));
        match next {
            Ok((rate, duration_s, role)) => {
                self.pending = Some((rate, duration_s, role));
                match role {
                    ProbeRole::Ramp => self.probes.ramp += 1,
                    ProbeRole::Bisect => self.probes.bisect += 1,
                    ProbeRole::Confirm => self.probes.confirm += 1,
                    ProbeRole::Recovery => self.probes.recovery += 1,
                    ProbeRole::Warmup => {}
                }
                Next::Probe {
                    rate,
                    duration_s,
                    role,
                }
            }
            Err(status) => {
                let answer = self.answer(status);
                self.pending = None;
                self.done = Some(answer.clone());
                Next::Done(answer)
            }
        }
    }

    fn within_budget(
        &self,
        probe: (f64, f64, ProbeRole),
        elapsed_s: f64,
    ) -> Result<(f64, f64, ProbeRole), Status> {
        if self.probes.total() >= self.config.max_probes
            || elapsed_s + probe.1 > self.config.deadline_s
        {
            return Err(Status::Deadline);
        }
        Ok(probe)
    }

    /// Records the last probe's outcome; a probe to run again (invalid, undecided, a recovery
    /// check), or an ending, when the outcome calls for one before the bounds do.
    fn take(
        &mut self,
        (rate, duration_s, role): (f64, f64, ProbeRole),
        probed: Probed,
    ) -> Option<Result<(f64, f64, ProbeRole), Status>> {
        let failure = match probed.class {
            Class::Invalid => {
                self.probes.invalid += 1;
                self.invalid_at = Some(rate);
                self.invalid_in_row += 1;
                if self.invalid_in_row > self.config.invalid_retries {
                    return Some(Err(Status::GeneratorBound));
                }
                return Some(Ok((rate, duration_s, role)));
            }
            Class::Undecided => {
                self.probes.undecided += 1;
                self.undecided_in_row += 1;
                if self.undecided_in_row <= self.config.undecided_retries {
                    // Twice as long, or long enough for the samples still missing (and a quarter
                    // more, for a rate that falls a little short of its offer).
                    let grow = probed
                        .evidence
                        .filter(|e| *e > 0.0)
                        .map_or(2.0, |e| (EVIDENCE_MARGIN / e).clamp(2.0, MAX_RETRY_GROWTH));
                    return Some(Ok((rate, duration_s * grow, role)));
                }
                Some(Failure::Undecided)
            }
            Class::Fail(f) => Some(f),
            Class::Pass => None,
        };
        self.invalid_in_row = 0;
        self.undecided_in_row = 0;
        let failed = failure.is_some();
        self.records.push(Record {
            offered: rate,
            achieved: probed.achieved,
            measured_s: probed.measured_s,
            failure,
            role,
        });
        match (role, failed, bounds(&self.records).0) {
            (ProbeRole::Recovery, true, _) => Some(Err(Status::ServerUnrecovered)),
            (_, true, Some(lo)) if probed.target_errors => Some(Ok((
                lo,
                self.config.length(lo, self.config.probe_s),
                ProbeRole::Recovery,
            ))),
            _ => None,
        }
    }

    /// The next probe as the bounds stand, or the ending they make.
    fn plan(&self) -> Result<(f64, f64, ProbeRole), Status> {
        let c = &self.config;
        match bounds(&self.records) {
            (None, None) => Ok((c.start, c.length(c.start, c.probe_s), ProbeRole::Ramp)),
            (Some(lo), None) if lo >= c.max_rate => Err(Status::LowerBoundOnly),
            (Some(lo), None) => {
                let grown = (lo * c.growth).min(c.max_rate);
                let rate = if c.whole {
                    grown.floor().max(lo + 1.0).min(c.max_rate)
                } else {
                    grown
                };
                Ok((rate, c.length(rate, c.probe_s), ProbeRole::Ramp))
            }
            (None, Some(_)) => Err(Status::Doomed),
            (Some(lo), Some(hi)) if hi / lo > 1.0 + c.precision && !(c.whole && hi - lo <= 1.0) => {
                let mid = (lo * hi).sqrt();
                let rate = if c.whole {
                    mid.round().clamp(lo + 1.0, hi - 1.0)
                } else {
                    mid
                };
                Ok((rate, c.length(rate, c.probe_s), ProbeRole::Bisect))
            }
            (Some(lo), Some(hi)) => {
                let confirmed = |rate: f64| {
                    self.records
                        .iter()
                        .filter(|r| r.role == ProbeRole::Confirm && r.offered == rate)
                        .count() as u32
                };
                if confirmed(lo) < c.repeat {
                    Ok((lo, c.length(lo, c.confirm_s), ProbeRole::Confirm))
                } else if confirmed(hi) < c.repeat {
                    Ok((hi, c.length(hi, c.confirm_s), ProbeRole::Confirm))
                } else {
                    Err(Status::Resolved)
                }
            }
        }
    }

    fn answer(&self, status: Status) -> Answer {
        let (lo, hi) = bounds(&self.records);
        let passed_at = |rate: f64| {
            self.records.iter().filter(move |r| {
                r.offered == rate && r.failure.is_none() && r.role != ProbeRole::Recovery
            })
        };
        let max_rate = lo.map(|lo| RateAchieved {
            offered: lo,
            // The least it achieved when it passed: the claim it surely sustains.
            achieved: passed_at(lo)
                .map(|r| r.achieved)
                .fold(f64::INFINITY, f64::min),
        });
        let lowest_fail = hi.and_then(|hi| {
            self.records
                .iter()
                .filter(|r| r.offered == hi && r.role != ProbeRole::Recovery)
                .find_map(|r| r.failure.clone())
                .map(|failure| FailedAt {
                    offered: hi,
                    failure,
                })
        });
        let achieved: Vec<f64> = lo
            .map(|lo| passed_at(lo).map(|r| r.achieved).collect())
            .unwrap_or_default();
        let spread = (achieved.len() > 1).then(|| {
            let min = achieved.iter().copied().fold(f64::INFINITY, f64::min);
            let max = achieved.iter().copied().fold(0.0, f64::max);
            (max - min) / min
        });
        Answer {
            status,
            max_rate,
            lowest_fail,
            precision: lo.zip(hi).map(|(lo, hi)| hi / lo - 1.0),
            confirmations: lo.map_or(0, |lo| {
                passed_at(lo)
                    .filter(|r| r.role == ProbeRole::Confirm)
                    .count() as u32
            }),
            spread,
            probes: self.probes,
            invalid_at: self.invalid_at,
        }
    }

    /// The answer as the records stand, for a search ended from outside (Ctrl-C, an aborted
    /// probe): the bounds known so far, never nothing.
    ///
    /// `last` is the result of the probe run last, if the search has not yet taken it: a run
    /// stopped between a probe's end and the search's next word keeps what that probe showed.
    pub fn stop(&mut self, last: Option<Probed>, status: Status) -> Answer {
        if let Some(answer) = &self.done {
            return answer.clone();
        }
        if let (Some(pending), Some(probed)) = (self.pending, last) {
            // What it would ask next does not matter: the search ends here.
            let _ = self.take(pending, probed);
        }
        let answer = self.answer(status);
        self.pending = None;
        self.done = Some(answer.clone());
        answer
    }
}

#[cfg(test)]
mod tests;
