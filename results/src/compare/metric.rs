//! What is compared per step, which way is better, and how a change is classed: noise under the
//! threshold or under the measurement's resolution, better, worse, or undecided when a lower bound
//! sits on the side that would decide.
//!
//! A relative threshold alone calls 0.10 → 0.13 ms a 26 % regression, though the two differ by 30
//! microseconds of scheduler jitter: a change must also be larger than an absolute floor, what the
//! quantity can resolve ([`Compared::floor`]). Below it a change is noise whatever its percentage.
use serde::Serialize;

use crate::quantity::{self, Quantity, Scale};
use crate::step::StepResult;
use crate::verdict::FAILING_PCT;

pub use crate::quantity::Better;

/// The least change of a latency that counts, whatever the histogram resolves: below a tenth of
/// a millisecond, loopback runs differ by scheduling alone.
pub const LATENCY_FLOOR_MS: f64 = 0.1;
/// The least change of a rate that counts: one request a second.
pub const RATE_FLOOR: f64 = 1.0;
/// The least change of a share of the requests that counts, in percentage points.
pub const SHARE_FLOOR_PCT: f64 = 0.1;

/// One compared metric: a quantity of the catalogue, named as steps.tsv names its column.
#[derive(Debug, Clone, Copy)]
pub struct Compared {
    pub name: &'static str,
    pub unit: &'static str,
    pub better: Better,
    /// Whether a change beyond the threshold is a regression (`--baseline`'s exit 3), or is only
    /// shown.
    pub judged: bool,
    quantity: &'static Quantity,
}

impl Compared {
    const fn of(q: &'static Quantity) -> Compared {
        Compared {
            name: q.key,
            unit: q.unit,
            better: q.better,
            judged: true,
            quantity: q,
        }
    }

    /// Compared and shown, never a regression.
    const fn shown(q: &'static Quantity) -> Compared {
        Compared {
            judged: false,
            ..Compared::of(q)
        }
    }
}

/// The metrics compared, in the order of the page's table.
pub const METRICS: [Compared; 11] = [
    Compared::of(&quantity::OK_RATE),
    // Of the step's own server; none for a run without one, so it compares only where both have it.
    // Shown, not judged: a server's CPU is sampled once a second and shared with whatever else
    // runs, so a few % of it moves with the machine, not the build; the served rate and the
    // latency judge a change.
    Compared::shown(&quantity::OK_PER_CORE_S),
    Compared::of(&quantity::AVG_REP_RATE),
    Compared::of(&quantity::FAILED_PCT),
    Compared::of(&quantity::ERRORS),
    Compared::of(&quantity::RESP_TIME),
    Compared::of(&quantity::P50_MS),
    Compared::of(&quantity::P90_MS),
    Compared::of(&quantity::P99_MS),
    Compared::of(&quantity::P999_MS),
    Compared::of(&quantity::MAX_MS),
];

/// A metric's value in one step.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Reading {
    pub value: f64,
    /// The true value is at least this (it falls among requests given up).
    pub lower_bound: bool,
}

impl Compared {
    /// The step's value, or none when the step has no such number: a latency of a step that
    /// neither served nor gave up anything (all zeros, not a measurement).
    pub fn read(&self, r: &StepResult) -> Option<Reading> {
        let lower_bound = match self.quantity.bound {
            Some(name) => {
                if r.latency_ms.max <= 0.0 && !r.latency_ms.censored {
                    return None;
                }
                r.latency_ms.lower_bounds.contains(name)
            }
            None => false,
        };
        Some(Reading {
            value: self.quantity.of_step(r)?,
            lower_bound,
        })
    }

    /// The change from `base` to `value` in % (to three decimals), relative to what this metric's
    /// scale says; none when it has no finite size (a rate or latency rising from 0).
    pub fn delta_pct(&self, base: f64, value: f64) -> Option<f64> {
        // A share's change is relative to the baseline's share, or to [`FAILING_PCT`] when that is
        // smaller, so a rise from 0 % is measured instead of infinite.
        let against = match self.quantity.scale {
            Scale::Share => base.max(FAILING_PCT),
            Scale::Rate | Scale::Latency | Scale::Other => base,
        };
        if value == base {
            Some(0.0)
        } else if against > 0.0 {
            // To three decimals, as the tables write numbers: the class is of the change shown.
            Some(((value - base) / against * 100_000.0).round() / 1000.0)
        } else {
            None
        }
    }

    /// The smallest difference between `base` and `now` that is a change at all, in the metric's
    /// unit: a latency's at least 0.1 ms and the widths of the two values' histogram buckets (two
    /// values within those may be the same bucket); a rate's one request a second; a share's 0.1
    /// percentage point (one request in a thousand).
    pub fn floor(&self, base: f64, now: f64) -> f64 {
        match self.quantity.scale {
            Scale::Latency => {
                let width = |ms: f64| {
                    let us = (ms * 1000.0).max(0.0).round() as u64;
                    shared::histogram::resolution_us(us) as f64 / 1000.0
                };
                LATENCY_FLOOR_MS.max(width(base) + width(now))
            }
            Scale::Rate => RATE_FLOOR,
            Scale::Share => SHARE_FLOOR_PCT,
            Scale::Other => 0.0,
        }
    }

    /// How `now` compares with `base`, at a threshold of `threshold_pct` %.
    pub fn class(&self, base: Reading, now: Reading, threshold_pct: f64) -> Change {
        let delta = self.delta_pct(base.value, now.value);
        let beyond_floor = (now.value - base.value).abs() > self.floor(base.value, now.value);
        // Which way the number moved beyond the threshold and the floor (+1 up, -1 down, 0
        // within either).
        let moved = match delta {
            _ if !beyond_floor => 0,
            Some(d) if d > threshold_pct => 1,
            Some(d) if d < -threshold_pct => -1,
            Some(_) => 0,
            None => {
                if now.value > base.value {
                    1
                } else {
                    -1
                }
            }
        };
        // A lower bound can only grow: a move up is certain when the value that moved up is the
        // bound and the other is exact, a move down when the value that fell is exact; staying
        // within the threshold is certain only when both are exact.
        let certain = match moved {
            1 => !base.lower_bound,
            -1 => !now.lower_bound,
            _ => !base.lower_bound && !now.lower_bound,
        };
        if !certain {
            return Change::Undecided;
        }
        match (moved, self.better) {
            (0, _) => Change::Noise,
            (1, Better::Higher) | (-1, Better::Lower) => Change::Better,
            _ => Change::Worse,
        }
    }
}

/// How one run's value compares with the baseline's in the same step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "kebab-case")]
pub enum Change {
    /// The baseline's own value.
    Baseline,
    /// A change of at most the threshold.
    Noise,
    Better,
    Worse,
    /// A lower bound on the side that would decide: the true values might read either way.
    Undecided,
    /// No value to compare: the baseline has no such step, or one of the two has no such number.
    Missing,
}

impl Change {
    /// The class as compare.json and the page name it.
    pub fn name(self) -> &'static str {
        match self {
            Change::Baseline => "baseline",
            Change::Noise => "noise",
            Change::Better => "better",
            Change::Worse => "worse",
            Change::Undecided => "undecided",
            Change::Missing => "missing",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn metric(name: &str) -> Compared {
        *METRICS.iter().find(|m| m.name == name).unwrap()
    }

    fn exact(value: f64) -> Reading {
        Reading {
            value,
            lower_bound: false,
        }
    }

    fn bound(value: f64) -> Reading {
        Reading {
            value,
            lower_bound: true,
        }
    }

    #[test]
    fn a_change_within_the_threshold_is_noise_and_beyond_it_has_a_direction() {
        let p99 = metric("p99_ms");
        assert_eq!(p99.class(exact(10.0), exact(10.5), 5.0), Change::Noise);
        assert_eq!(p99.class(exact(10.0), exact(9.5), 5.0), Change::Noise);
        assert_eq!(p99.class(exact(10.0), exact(10.6), 5.0), Change::Worse);
        assert_eq!(p99.class(exact(10.0), exact(9.4), 5.0), Change::Better);
        let ok = metric("ok_rate");
        assert_eq!(ok.class(exact(400.0), exact(300.0), 5.0), Change::Worse);
        assert_eq!(ok.class(exact(400.0), exact(500.0), 5.0), Change::Better);
        // At a threshold of 0 every change beyond the floor counts, and none is still none.
        assert_eq!(ok.class(exact(400.0), exact(401.5), 0.0), Change::Better);
        assert_eq!(ok.class(exact(400.0), exact(400.1), 0.0), Change::Noise);
        assert_eq!(ok.class(exact(400.0), exact(400.0), 0.0), Change::Noise);
    }

    #[test]
    fn a_lower_bound_decides_only_where_it_cannot_be_overturned() {
        let p99 = metric("p99_ms");
        // The candidate's p99 is at least 2 s against an exact 10 ms: worse whatever it really is.
        assert_eq!(p99.class(exact(10.0), bound(2000.0), 5.0), Change::Worse);
        // An exact 10 ms against a baseline of at least 2 s: better for certain.
        assert_eq!(p99.class(bound(2000.0), exact(10.0), 5.0), Change::Better);
        // Both lower bounds, or a bound that fell, or one within the threshold: nothing is known.
        assert_eq!(
            p99.class(bound(2000.0), bound(2000.0), 5.0),
            Change::Undecided
        );
        assert_eq!(
            p99.class(exact(3000.0), bound(2000.0), 5.0),
            Change::Undecided
        );
        assert_eq!(
            p99.class(bound(2000.0), exact(3000.0), 5.0),
            Change::Undecided
        );
        assert_eq!(
            p99.class(exact(2000.0), bound(2010.0), 5.0),
            Change::Undecided
        );
    }

    #[test]
    fn a_share_rising_from_nothing_is_measured_against_one_percent() {
        let failed = metric("failed_pct");
        assert_eq!(failed.delta_pct(0.0, 3.0), Some(300.0));
        assert_eq!(failed.class(exact(0.0), exact(3.0), 5.0), Change::Worse);
        assert_eq!(failed.class(exact(0.0), exact(0.01), 5.0), Change::Noise);
        // Above 1 % the change is relative to the baseline's share.
        assert_eq!(failed.delta_pct(20.0, 21.0), Some(5.0));
        assert_eq!(failed.class(exact(20.0), exact(15.0), 5.0), Change::Better);
    }

    #[test]
    fn sub_millisecond_jitter_is_noise_however_large_its_percentage() {
        // Issue 22's page opened with "p50 0.1 ms against 0.1 ms (+26.2 %)" in red.
        let p50 = metric("p50_ms");
        assert_eq!(p50.class(exact(0.103), exact(0.130), 5.0), Change::Noise);
        assert_eq!(p50.class(exact(0.130), exact(0.103), 5.0), Change::Noise);
        assert_eq!(p50.class(exact(0.05), exact(0.149), 5.0), Change::Noise);
        // Just past the floor, and beyond the threshold, it is a change again.
        assert_eq!(p50.class(exact(0.1), exact(0.201), 5.0), Change::Worse);
        assert_eq!(p50.class(exact(1.4), exact(59.0), 5.0), Change::Worse);
        // A latency rising from 0 by less than the floor has no size and no direction.
        assert_eq!(p50.class(exact(0.0), exact(0.05), 5.0), Change::Noise);
    }

    #[test]
    fn a_change_below_the_histogram_s_resolution_is_never_worse() {
        let p99 = metric("p99_ms");
        // At 1 s a bucket of the histogram is 512 us wide: two values 0.9 ms apart may be the
        // same two buckets, a change of 0.09 % that even a threshold of 0 must not call worse.
        assert!(p99.floor(1000.0, 1000.9) > 0.9);
        assert_eq!(p99.class(exact(1000.0), exact(1000.9), 0.0), Change::Noise);
        assert_eq!(p99.class(exact(1000.0), exact(1002.0), 0.0), Change::Worse);
        // Under 2 ms the buckets are 1 us: the 0.1 ms floor is what holds.
        assert_eq!(p99.floor(1.0, 1.5), LATENCY_FLOOR_MS);
        assert_eq!(p99.class(exact(1.0), exact(1.099), 0.0), Change::Noise);
        // A rate and a share below what they resolve, at a threshold of 0.
        let ok = metric("ok_rate");
        assert_eq!(ok.class(exact(10.0), exact(9.5), 0.0), Change::Noise);
        assert_eq!(ok.class(exact(10.0), exact(8.0), 0.0), Change::Worse);
        let failed = metric("failed_pct");
        assert_eq!(failed.class(exact(0.0), exact(0.06), 0.0), Change::Noise);
        assert_eq!(failed.class(exact(0.0), exact(0.5), 0.0), Change::Worse);
    }

    #[test]
    fn a_class_is_named_as_compare_json_names_it() {
        use Change::*;
        for c in [Baseline, Noise, Better, Worse, Undecided, Missing] {
            assert_eq!(serde_json::to_value(c).unwrap(), c.name());
        }
    }

    #[test]
    fn a_rate_rising_from_zero_has_no_finite_change_but_a_direction() {
        let ok = metric("ok_rate");
        assert_eq!(ok.delta_pct(0.0, 50.0), None);
        assert_eq!(ok.delta_pct(0.0, 0.0), Some(0.0));
        assert_eq!(ok.class(exact(0.0), exact(50.0), 5.0), Change::Better);
        assert_eq!(ok.delta_pct(400.0, 200.0), Some(-50.0));
    }
}
