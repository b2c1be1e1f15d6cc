//! Where the run's steps come from: a source that gives the next step's spec, knowing the result of
//! the last. Today the plan's fixed list; a capacity search will decide each value from the last result.
use shared::plan::StepShare;
use shared::report::StepResult;

use crate::config::RunConfig;

/// One step to run: its protocol index (0-based; people read `index + 1`) and its value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StepSpec {
    pub index: usize,
    pub value: f64,
}

/// Gives the run its steps, one at a time.
pub trait StepSource {
    /// The next step, given the result of the one before (`None` before the first); `None` ends the run.
    fn next(&mut self, last: Option<&StepResult>) -> Option<StepSpec>;
    /// The values still planned, if the run ends now (run.json's `stopped.not_run`).
    fn not_run(&self) -> Vec<f64>;
}

/// The plan's steps, in order, whatever their results.
pub struct Planned {
    values: Vec<f64>,
    next: usize,
}

impl Planned {
    pub fn new(values: &[f64]) -> Planned {
        Planned {
            values: values.to_vec(),
            next: 0,
        }
    }
}

impl StepSource for Planned {
    fn next(&mut self, _last: Option<&StepResult>) -> Option<StepSpec> {
        let value = *self.values.get(self.next)?;
        let spec = StepSpec {
            index: self.next,
            value,
        };
        self.next += 1;
        Some(spec)
    }

    fn not_run(&self) -> Vec<f64> {
        self.values[self.next..].to_vec()
    }
}

/// A step split among agents of these weights: the one place a step is split, so the check before
/// the run and the run itself split alike. The value is the spec's: a source may choose it.
pub fn shares(cfg: &RunConfig, spec: StepSpec, weights: &[u64]) -> Vec<StepShare> {
    cfg.plan
        .shares_of(spec.index, spec.value, cfg.seed, weights)
}

/// The plan's own steps, as specs.
pub fn planned(cfg: &RunConfig) -> impl Iterator<Item = StepSpec> + '_ {
    cfg.plan
        .steps()
        .iter()
        .enumerate()
        .map(|(index, &value)| StepSpec { index, value })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plan_gives_its_steps_in_order_then_ends() {
        let mut s = Planned::new(&[10.0, 20.0, 30.0]);
        assert_eq!(s.not_run(), vec![10.0, 20.0, 30.0]);
        let first = s.next(None).unwrap();
        assert_eq!(
            first,
            StepSpec {
                index: 0,
                value: 10.0
            }
        );
        assert_eq!(
            s.next(None).unwrap(),
            StepSpec {
                index: 1,
                value: 20.0
            }
        );
        assert_eq!(s.not_run(), vec![30.0]);
        assert_eq!(s.next(None).unwrap().index, 2);
        assert_eq!(s.next(None), None);
        assert_eq!(s.next(None), None, "stays ended");
        assert!(s.not_run().is_empty());
    }
}
