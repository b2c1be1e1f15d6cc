//! Where the run's steps come from: a source that gives the next step's spec, knowing the result of
//! the last: the plan's fixed list ([`Planned`]), or a capacity search deciding each probe from the
//! last one's result (`probes::Probes`). A planned run's `--warmup` is a step of its own before the
//! first, at the first's value, not counted: the target runs it and records it apart.
use std::time::Duration;

use results::search::{Capacity, ProbeRole};
use results::step::StepResult;
use shared::plan::StepShare;

use crate::config::RunConfig;

/// One step to run: its protocol index (0-based; people read `index + 1`) and its value; a search's
/// probe also chooses its length, an idle pause before it, and names its role.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StepSpec {
    pub index: usize,
    pub value: f64,
    /// Instead of the plan's step limit.
    pub length: Option<Duration>,
    /// Idle time before the step (a search's --cooldown), cut short by an interrupt.
    pub pause: Duration,
    pub role: Option<ProbeRole>,
    /// False for a planned run's warmup: run, shown and recorded apart, never a step of the results
    /// (not in steps.tsv, the summary, or judged by --stop-on/--fail-on). A search's warmup is one of
    /// its probes, counted as such (a row marked with its role).
    pub counted: bool,
}

impl StepSpec {
    /// A planned step: the plan's limit, no pause, no role.
    pub fn planned(index: usize, value: f64) -> StepSpec {
        StepSpec {
            index,
            value,
            length: None,
            pause: Duration::ZERO,
            role: None,
            counted: true,
        }
    }

    /// A planned run's warmup: the first step's load, for `length`, not counted. Its protocol index
    /// is the first step's (an agent prepares and starts whatever index it is given, one at a time).
    pub fn warmup(value: f64, length: Duration) -> StepSpec {
        StepSpec {
            length: Some(length),
            counted: false,
            ..StepSpec::planned(0, value)
        }
    }
}

/// Gives the run its steps, one at a time.
pub trait StepSource {
    /// The next step, given the result of the one before (`None` before the first); `None` ends the run.
    fn next(&mut self, last: Option<&StepResult>) -> Option<StepSpec>;
    /// The values still planned, if the run ends now (run.json's `stopped.not_run`).
    fn not_run(&self) -> Vec<f64>;
    /// Marks a finished step before it is written (a search's probe: its role and class).
    fn judge(&mut self, _spec: &StepSpec, _result: &mut StepResult) {}
    /// How many steps the run has, when that is known beforehand (progress shows `step 3/8`).
    fn planned(&self) -> Option<usize> {
        None
    }
    /// Whether the run goes on after a step that overran its deadline (a search: the generator
    /// could not carry that rate), rather than ending there as a planned run does.
    fn outlasts_overruns(&self) -> bool {
        false
    }
    /// The run's answer as a search found it, once the run ends, however it ended.
    fn conclude(&mut self, _ended: Ended) -> Option<Capacity> {
        None
    }
}

/// How a run ended, for its source's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// The source gave no more steps (or --stop-on ended it).
    Completed,
    /// Ctrl-C, or a step aborted for the whole run.
    Interrupted,
    /// An error ended the run (an agent's refusal, no agent left).
    Failed,
}

/// The plan's steps, in order, whatever their results; its warmup before the first.
pub struct Planned {
    values: Vec<f64>,
    next: usize,
    /// Still to run before the first step.
    warmup: Option<Duration>,
}

impl Planned {
    /// The plan's `values`, after a warmup of `warmup` (none when zero).
    pub fn new(values: &[f64], warmup: Option<Duration>) -> Planned {
        Planned {
            values: values.to_vec(),
            next: 0,
            warmup: warmup.filter(|w| !w.is_zero()),
        }
    }
}

impl StepSource for Planned {
    fn next(&mut self, _last: Option<&StepResult>) -> Option<StepSpec> {
        let value = *self.values.get(self.next)?;
        if let Some(length) = self.warmup.take() {
            return Some(StepSpec::warmup(value, length));
        }
        let spec = StepSpec::planned(self.next, value);
        self.next += 1;
        Some(spec)
    }

    fn not_run(&self) -> Vec<f64> {
        self.values[self.next..].to_vec()
    }

    fn planned(&self) -> Option<usize> {
        Some(self.values.len())
    }
}

/// A step split among agents of these weights: the one place a step is split, so the check before
/// the run and the run itself split alike. The value is the spec's: a source may choose it.
pub fn shares(cfg: &RunConfig, spec: StepSpec, weights: &[u64]) -> Vec<StepShare> {
    let shares = cfg
        .plan
        .shares_of(spec.index, spec.value, cfg.seed, weights);
    match spec.length {
        Some(length) => shares.into_iter().map(|s| s.lasting(length)).collect(),
        None => shares,
    }
}

/// The plan's own steps, as specs, after its warmup if it has one (as [`Planned`] gives them).
pub fn planned(cfg: &RunConfig) -> impl Iterator<Item = StepSpec> + '_ {
    let steps = cfg.plan.steps();
    let warmup = cfg
        .warmup
        .filter(|w| !w.is_zero())
        .zip(steps.first())
        .map(|(length, &value)| StepSpec::warmup(value, length));
    warmup.into_iter().chain(
        steps
            .iter()
            .enumerate()
            .map(|(index, &value)| StepSpec::planned(index, value)),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plan_gives_its_steps_in_order_then_ends() {
        let mut s = Planned::new(&[10.0, 20.0, 30.0], Some(Duration::ZERO));
        assert_eq!(s.not_run(), vec![10.0, 20.0, 30.0]);
        let first = s.next(None).unwrap();
        assert_eq!(first, StepSpec::planned(0, 10.0));
        assert_eq!(s.next(None).unwrap(), StepSpec::planned(1, 20.0));
        assert_eq!(s.not_run(), vec![30.0]);
        assert_eq!(s.next(None).unwrap().index, 2);
        assert_eq!(s.next(None), None);
        assert_eq!(s.next(None), None, "stays ended");
        assert!(s.not_run().is_empty());
    }

    #[test]
    fn a_warmup_came_first_at_the_first_steps_value_and_uncounted() {
        let mut s = Planned::new(&[10.0, 20.0], Some(Duration::from_secs(3)));
        let warm = s.next(None).unwrap();
        assert_eq!(warm, StepSpec::warmup(10.0, Duration::from_secs(3)));
        assert!(!warm.counted);
        assert_eq!(warm.length, Some(Duration::from_secs(3)));
        assert_eq!(
            s.not_run(),
            vec![10.0, 20.0],
            "the warmup is no step of the plan"
        );
        assert_eq!(s.planned(), Some(2));
        let first = s.next(None).unwrap();
        assert_eq!(first, StepSpec::planned(0, 10.0));
        assert!(first.counted);
        assert_eq!(s.next(None).unwrap(), StepSpec::planned(1, 20.0));
        assert_eq!(s.next(None), None);
    }
}
