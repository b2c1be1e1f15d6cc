//! When requests (or connections) start in an open model: the arrival offsets of one worker's slice of
//! a step. Slices partition the step's arrivals exactly (see [`crate::plan::split`]), so the workers
//! of all agents add up to the whole over the step.
use std::time::Duration;

use crate::plan::{Arrival, Slice, StepLimit};
use crate::rng::Rng;

/// An iterator of arrival offsets from the step's start, in order.
#[derive(Debug, Clone)]
pub struct Schedule {
    kind: Kind,
    horizon: Option<Duration>,
    remaining: Option<u64>,
}

#[derive(Debug, Clone)]
enum Kind {
    /// Arrival g of the step is at g / rate; this slice takes its own, the j-th at `slice.arrival(j)`.
    Uniform { rate: f64, slice: Slice, next: u64 },
    /// A Poisson process at the slice's fraction of the rate: the slices' processes are independent,
    /// so their sum is one Poisson process of the whole rate (superposition; no earlier gap needed).
    Poisson { rng: Rng, mean_gap_s: f64, t_s: f64 },
    /// A Poisson process conditioned on its count (a `num_conn` step): exactly `left` arrivals, as sorted
    /// uniform points over the step's length, so the step still ends on time.
    PoissonCount {
        rng: Rng,
        span_s: f64,
        u: f64,
        left: u64,
    },
}

impl Schedule {
    /// `rate` is the whole step's rate; `limit` the whole step's limit.
    pub fn new(
        rate: f64,
        arrival: Arrival,
        limit: StepLimit,
        slice: &Slice,
        seed: u64,
    ) -> Schedule {
        let (horizon, remaining) = match limit {
            StepLimit::Duration(d) => (Some(d), None),
            StepLimit::Connections(n) => (None, Some(slice.share_of(n.get()))),
        };
        let rng = Rng::new(seed ^ slice.key().wrapping_mul(0xA24B_AED4_963E_E407));
        let kind = match (arrival, limit) {
            (Arrival::Uniform, _) => Kind::Uniform {
                rate,
                slice: slice.clone(),
                next: 0,
            },
            (Arrival::Poisson, StepLimit::Duration(_)) => Kind::Poisson {
                rng,
                mean_gap_s: 1.0 / (rate * slice.fraction()),
                t_s: 0.0,
            },
            (Arrival::Poisson, StepLimit::Connections(n)) => Kind::PoissonCount {
                rng,
                span_s: n.get() as f64 / rate,
                u: 0.0,
                left: slice.share_of(n.get()),
            },
        };
        Schedule {
            kind,
            horizon,
            remaining,
        }
    }
}

impl Iterator for Schedule {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        if self.remaining == Some(0) {
            return None;
        }
        let offset = match &mut self.kind {
            Kind::Uniform { rate, slice, next } => {
                // Past u64 no horizon is reached: 2^64 arrivals at the highest rate are 584 years.
                let Some(g) = slice.arrival(*next) else {
                    self.remaining = Some(0);
                    return None;
                };
                *next += 1;
                g as f64 / *rate
            }
            Kind::Poisson {
                rng,
                mean_gap_s,
                t_s,
            } => {
                *t_s += rng.exponential(*mean_gap_s);
                *t_s
            }
            Kind::PoissonCount {
                rng,
                span_s,
                u,
                left,
            } => {
                // The next of `left` sorted uniform points on [u, 1): 1 - V^(1/left) of the rest.
                *u += (1.0 - *u) * (1.0 - rng.next_f64().powf(1.0 / *left as f64));
                *left -= 1;
                u.min(1.0 - f64::EPSILON) * *span_s
            }
        };
        // Compared as seconds before converting, so no rate can overflow a Duration.
        if self.horizon.is_some_and(|h| offset >= h.as_secs_f64()) || !offset.is_finite() {
            self.remaining = Some(0);
            return None;
        }
        let offset = Duration::from_secs_f64(offset);
        if let Some(r) = &mut self.remaining {
            *r -= 1;
        }
        Some(offset)
    }
}

/// Splits `total` items over `parts` as evenly as possible; part `i` gets the returned count.
pub fn even_share(total: u64, parts: u64, i: u64) -> u64 {
    total / parts + u64::from(i < total % parts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::num::NonZeroU64;

    fn secs(s: u64) -> StepLimit {
        StepLimit::Duration(Duration::from_secs(s))
    }

    #[test]
    fn uniform_is_evenly_spaced_and_exact() {
        let offs: Vec<_> =
            Schedule::new(4.0, Arrival::Uniform, secs(1), &Slice::WHOLE, 0).collect();
        assert_eq!(
            offs,
            vec![0, 250, 500, 750]
                .into_iter()
                .map(Duration::from_millis)
                .collect::<Vec<_>>()
        );
    }

    #[test]
    fn num_conn_limit_counts_arrivals() {
        let n = NonZeroU64::new(10).unwrap();
        let offs: Vec<_> = Schedule::new(
            100.0,
            Arrival::Uniform,
            StepLimit::Connections(n),
            &Slice::WHOLE,
            0,
        )
        .collect();
        assert_eq!(offs.len(), 10);
        let p: usize = (0..3)
            .map(|i| {
                Schedule::new(
                    100.0,
                    Arrival::Poisson,
                    StepLimit::Connections(n),
                    &Slice::WHOLE.part(i, 3),
                    9,
                )
                .count()
            })
            .sum();
        assert_eq!(p, 10);
    }

    #[test]
    fn poisson_with_a_count_ends_within_the_step() {
        // Regression: a Poisson process with num_conn once ran seconds past n / rate.
        let n = NonZeroU64::new(5000).unwrap();
        for seed in 0..50 {
            let offs: Vec<_> = (0..4)
                .flat_map(|i| {
                    Schedule::new(
                        20.0,
                        Arrival::Poisson,
                        StepLimit::Connections(n),
                        &Slice::WHOLE.part(i, 4),
                        seed,
                    )
                })
                .collect();
            assert_eq!(offs.len(), 5000);
            assert!(
                offs.iter().all(|o| *o < Duration::from_secs(250)),
                "seed {seed}"
            );
        }
        let one: Vec<_> = Schedule::new(
            20.0,
            Arrival::Poisson,
            StepLimit::Connections(n),
            &Slice::WHOLE,
            3,
        )
        .collect();
        assert!(one.windows(2).all(|w| w[0] <= w[1]), "sorted");
        // Spread over the whole step, not bunched at its start.
        assert!(
            one[2500] > Duration::from_secs(100) && one[2500] < Duration::from_secs(150),
            "{:?}",
            one[2500]
        );
    }

    #[test]
    fn tiny_rates_end_the_schedule_instead_of_panicking() {
        let offs: Vec<_> = Schedule::new(
            1e-20,
            Arrival::Uniform,
            secs(10),
            &Slice::WHOLE.part(1, 2),
            0,
        )
        .collect();
        assert!(offs.is_empty());
    }

    #[test]
    fn poisson_rate_is_close_to_requested() {
        let n: usize = (0..2)
            .map(|i| {
                Schedule::new(
                    1000.0,
                    Arrival::Poisson,
                    secs(20),
                    &Slice::WHOLE.part(i, 2),
                    42,
                )
                .count()
            })
            .sum();
        assert!((19_000..21_000).contains(&n), "{n}");
    }

    #[test]
    fn poisson_shares_keep_their_weights() {
        // Each agent's workers are Poisson processes at its share of the rate: weights 3:1 send 3:1.
        let sent: Vec<usize> = Slice::among(&[3, 1])
            .iter()
            .map(|agent| {
                (0..2)
                    .map(|w| {
                        let p = agent.part(w, 2);
                        Schedule::new(1000.0, Arrival::Poisson, secs(20), &p, 5).count()
                    })
                    .sum()
            })
            .collect();
        assert!((14_400..15_600).contains(&sent[0]), "{sent:?}");
        assert!((4_700..5_300).contains(&sent[1]), "{sent:?}");
    }

    proptest! {
        // Slices partition the arrivals: the parts together are exactly the whole schedule.
        #[test]
        fn slices_partition_the_whole(rate in 0.5f64..5000.0, ms in 1u64..3000, outer in 1u64..5, inner in 1u64..9) {
            let limit = StepLimit::Duration(Duration::from_millis(ms));
            let whole: Vec<_> = Schedule::new(rate, Arrival::Uniform, limit, &Slice::WHOLE, 0).collect();
            let mut parts = Vec::new();
            for a in 0..outer {
                for w in 0..inner {
                    let s = &Slice::WHOLE.part(a, outer).part(w, inner);
                    parts.extend(Schedule::new(rate, Arrival::Uniform, limit, s, 0));
                }
            }
            parts.sort();
            prop_assert_eq!(parts, whole);
        }

        // Weighted agents and their workers, uniform or Poisson, by time or by count: the agents'
        // workers together send exactly the whole schedule's arrivals (uniform: the very same offsets).
        #[test]
        fn weighted_agents_partition_the_whole(rate in 0.5f64..3000.0, ms in 1u64..2000,
                                               weights in proptest::collection::vec(prop_oneof![1u64..4, Just(1_000_000_000)], 1..5),
                                               workers in 1u64..4, n in 1u64..3000) {
            let parts = |limit| -> Vec<Vec<Duration>> {
                Slice::among(&weights)
                    .iter()
                    .flat_map(|agent| (0..workers).map(move |t| agent.part(t, workers)))
                    .map(|p| Schedule::new(rate, Arrival::Uniform, limit, &p, 0).collect())
                    .collect()
            };
            let limit = StepLimit::Duration(Duration::from_millis(ms));
            let whole: Vec<_> = Schedule::new(rate, Arrival::Uniform, limit, &Slice::WHOLE, 0).collect();
            let mut got: Vec<Duration> = parts(limit).into_iter().flatten().collect();
            got.sort();
            prop_assert_eq!(got, whole);
            let count = StepLimit::Connections(NonZeroU64::new(n).unwrap());
            for arrival in [Arrival::Uniform, Arrival::Poisson] {
                let sent: usize = Slice::among(&weights)
                    .iter()
                    .flat_map(|agent| (0..workers).map(move |t| agent.part(t, workers)))
                    .map(|p| Schedule::new(rate, arrival, count, &p, 7).count())
                    .sum();
                prop_assert_eq!(sent as u64, n);
            }
        }

        #[test]
        fn even_share_sums_to_total(total in 0u64..100_000, parts in 1u64..64) {
            let sum: u64 = (0..parts).map(|i| even_share(total, parts, i)).sum();
            prop_assert_eq!(sum, total);
        }

        #[test]
        fn share_of_matches_counting(total in 0u64..10_000, index in 0u64..7, count in 1u64..7) {
            prop_assume!(index < count);
            let s = Slice::WHOLE.part(index, count);
            let counted = (0..total).filter(|g| g % count == index).count() as u64;
            prop_assert_eq!(s.share_of(total), counted);
        }
    }
}
