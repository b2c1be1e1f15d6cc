//! autobench's ramp of step values.
use super::PlanError;

/// The most steps one run may have; a typo like `--rate-step 0.001` should not plan a week of load.
pub const MAX_STEPS: u64 = 10_000;

/// autobench's ramp: low, low + step, ... up to and including high (within rounding). A step that
/// does not land on high (or is larger than the range) still ends the ramp at high: the last step is
/// the one asked for, never silently dropped.
pub fn ramp(low: f64, high: f64, step: f64) -> Result<Vec<f64>, PlanError> {
    for (what, v) in [
        ("--low-rate", low),
        ("--high-rate", high),
        ("--rate-step", step),
    ] {
        if !(v.is_finite() && v > 0.0) {
            return Err(PlanError::NotPositive {
                what,
                value: v.to_string(),
            });
        }
    }
    if low > high {
        return Err(PlanError::LowAboveHigh { low, high });
    }
    let count = ((high - low) / step + 1e-9).floor() as u64 + 1;
    if count > MAX_STEPS {
        return Err(PlanError::TooManySteps {
            low,
            high,
            step,
            count,
            max: MAX_STEPS,
        });
    }
    // Computed by multiplication, not repeated addition, so 0.1 steps do not drift.
    let mut steps: Vec<f64> = (0..count).map(|i| low + step * i as f64).collect();
    if steps.last().is_some_and(|&last| high - last > step * 1e-6) {
        steps.push(high);
    }
    Ok(steps)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ramp_includes_both_ends() {
        assert_eq!(ramp(20.0, 200.0, 10.0).unwrap().len(), 19);
        assert_eq!(ramp(10.0, 30.0, 10.0).unwrap(), vec![10.0, 20.0, 30.0]);
        assert_eq!(ramp(5.0, 5.0, 1.0).unwrap(), vec![5.0]);
        assert_eq!(ramp(0.1, 0.3, 0.1).unwrap().len(), 3);
    }

    #[test]
    fn a_rate_step_past_the_high_end_dropped_it() {
        assert_eq!(ramp(10.0, 15.0, 100.0).unwrap(), vec![10.0, 15.0]);
        assert_eq!(ramp(10.0, 25.0, 10.0).unwrap(), vec![10.0, 20.0, 25.0]);
        assert_eq!(ramp(10.0, 30.0, 10.0).unwrap(), vec![10.0, 20.0, 30.0]);
        assert_eq!(
            ramp(0.1, 0.3, 0.1).unwrap().len(),
            3,
            "rounding adds no step"
        );
    }

    #[test]
    fn ramp_refuses_bad_bounds() {
        assert_eq!(
            ramp(50.0, 10.0, 5.0).unwrap_err().to_string(),
            "--low-rate (50) is above --high-rate (10)"
        );
        assert!(
            ramp(0.0, 10.0, 1.0)
                .unwrap_err()
                .to_string()
                .contains("--low-rate must be a positive")
        );
        assert!(ramp(-1.0, 10.0, 1.0).is_err());
        assert!(matches!(
            ramp(1.0, 1e9, 1.0),
            Err(PlanError::TooManySteps { .. })
        ));
    }
}
