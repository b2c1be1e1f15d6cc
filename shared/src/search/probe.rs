//! A probe's class, from its facts alone: invalid (the generator was the limit on it), fail (an SLO
//! breached with enough evidence, or throughput short of the offer or collapsing), pass (every SLO met
//! with enough evidence), or undecided (neither yet). Pure, so the search and its tests share it.
use crate::condition::{Condition, Latency, Metric, Observed, Reading, Truth, Unit};
use crate::report::{StepResult, human, tsv_number};

/// Served below this share of the offered rate, the server did not keep up: a fail.
pub const SHORTFALL_RATIO: f64 = 0.95;
/// Served below this share of the best that a rate no higher served, throughput is collapsing as
/// the load grows: a fail.
pub const COLLAPSE_RATIO: f64 = 0.9;
/// A percentile pNN is judged only with at least this many samples beyond it, i.e. `k / (1 - q)`
/// samples in all: at k = 10 the tail the percentile sits in holds ten requests, so no one or two
/// stragglers decide it (at k = 1 a single request would set p99 from 100 samples); 1,000 for p99,
/// 10,000 for p999, the counts HdrHistogram's users quote for a stable p99.
pub const TAIL_SAMPLES: f64 = 10.0;

/// What the classification needs of a probe.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProbeFacts {
    /// Requests per second offered; none for the closed model.
    pub offered: Option<f64>,
    /// Served (expected-status) replies per second: the throughput the server delivered.
    pub achieved: f64,
    /// The generator itself was the limit (its fds or ports, or a schedule it could not keep): the
    /// probe says nothing of the server. Not a step's `invalid` trust as such: a step without a
    /// single reply is invalid too, and that is the server's doing (refused, timed out).
    pub generator_bound: bool,
    /// Requests whose latency was measured (served, or given up at their age).
    pub samples: u64,
    pub observed: Observed,
}

impl ProbeFacts {
    pub fn of(r: &StepResult) -> ProbeFacts {
        ProbeFacts {
            offered: r.demanded_rate,
            achieved: r.ok_rate,
            generator_bound: r.generator_bound,
            samples: r.ok + r.given_up,
            observed: Observed::of(r),
        }
    }

    /// The target's transport errors (timeouts among them): after such a fail the search checks
    /// that the server came back.
    pub fn target_errors(&self) -> bool {
        self.observed.errors_pct > 0.0
    }
}

/// Why a probe failed, in numbers a person can check.
#[derive(Debug, Clone, PartialEq)]
pub enum Failure {
    /// An SLO breached, with the value seen (in the condition's canonical unit) and as words
    /// (`p99 71 ms`, `failed 2.5%`).
    Slo {
        slo: String,
        value: f64,
        seen: String,
    },
    Shortfall {
        achieved: f64,
        offered: f64,
    },
    Collapse {
        achieved: f64,
        best: f64,
    },
    /// Undecided after every longer probe allowed: counted as a fail, conservatively.
    Undecided,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Slo { slo, seen, .. } => write!(f, "{seen}, over the SLO {slo}"),
            Failure::Shortfall { achieved, offered } => write!(
                f,
                "served {}/s of {}/s offered, below {}%",
                human(*achieved),
                human(*offered),
                SHORTFALL_RATIO * 100.0
            ),
            Failure::Collapse { achieved, best } => write!(
                f,
                "served {}/s, below {}% of the {}/s served at a rate no higher: throughput collapsing",
                human(*achieved),
                COLLAPSE_RATIO * 100.0,
                human(*best)
            ),
            Failure::Undecided => write!(
                f,
                "still undecided after every longer probe: counted as a fail"
            ),
        }
    }
}

/// A breached SLO's value in words, in its metric's unit: `p99 71 ms` (`≥` for a lower bound),
/// `failed 2.5%`, `ok_rate 812/s`.
fn seen(slo: &Condition, r: Reading) -> String {
    let bound = if r.lower_bound { "≥" } else { "" };
    let unit = match slo.metric {
        Metric::Latency(_) => " ms",
        Metric::OkRate if slo.threshold.unit == Unit::PerSecond => "/s",
        _ => "%",
    };
    format!("{} {bound}{}{unit}", slo.metric.name(), tsv_number(r.value))
}

#[derive(Debug, Clone, PartialEq)]
pub enum Class {
    Invalid,
    Fail(Failure),
    Pass,
    Undecided,
}

/// Samples a condition needs before its verdict counts: `k / (1 - q)` for a percentile, one for
/// the rest (a max or a mean is exact for what was measured; a share has its own denominator).
pub fn samples_needed(c: &Condition) -> u64 {
    let q = match c.metric {
        Metric::Latency(Latency::P50) => 0.5,
        Metric::Latency(Latency::P90) => 0.9,
        Metric::Latency(Latency::P99) => 0.99,
        Metric::Latency(Latency::P999) => 0.999,
        _ => return 1,
    };
    (TAIL_SAMPLES / (1.0 - q)).round() as u64
}

/// `best` is the highest throughput achieved by an earlier probe of the search at no higher a rate
/// than this one ([`super::Search::best_achieved`]).
pub fn classify(f: &ProbeFacts, slos: &[Condition], best: Option<f64>) -> Class {
    if f.generator_bound {
        return Class::Invalid;
    }
    let mut undecided = false;
    for slo in slos {
        if f.samples < samples_needed(slo) {
            undecided = true;
            continue;
        }
        match slo.evaluate(&f.observed) {
            Truth::True => {}
            Truth::Unknown => undecided = true,
            Truth::False => {
                let reading = slo.read(&f.observed);
                return Class::Fail(Failure::Slo {
                    slo: slo.to_string(),
                    value: reading.map_or(f64::NAN, |r| r.value),
                    seen: reading.map_or_else(String::new, |r| seen(slo, r)),
                });
            }
        }
    }
    if let Some(offered) = f
        .offered
        .filter(|o| *o > 0.0 && f.achieved < SHORTFALL_RATIO * o)
    {
        return Class::Fail(Failure::Shortfall {
            achieved: f.achieved,
            offered,
        });
    }
    if let Some(best) = best.filter(|b| f.achieved < COLLAPSE_RATIO * b) {
        return Class::Fail(Failure::Collapse {
            achieved: f.achieved,
            best,
        });
    }
    if undecided {
        Class::Undecided
    } else {
        Class::Pass
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::condition::parse;
    use crate::verdict::Verdict;

    fn facts(offered: f64, achieved: f64, samples: u64, p99_ms: f64) -> ProbeFacts {
        ProbeFacts {
            offered: Some(offered),
            achieved,
            generator_bound: false,
            samples,
            observed: Observed {
                latency_ms: Some([1.0, 2.0, p99_ms, p99_ms, p99_ms, 1.0]),
                latency_lower_bound: [false; 6],
                failed_pct: 0.0,
                errors_pct: 0.0,
                ok_rate: achieved,
                demanded_rate: Some(offered),
            },
        }
    }

    fn slo(s: &str) -> Vec<Condition> {
        vec![parse(s).unwrap()]
    }

    #[test]
    fn a_percentile_needs_k_over_one_minus_q_samples() {
        assert_eq!(samples_needed(&parse("p99<50ms").unwrap()), 1000);
        assert_eq!(samples_needed(&parse("p999<50ms").unwrap()), 10000);
        assert_eq!(samples_needed(&parse("p50<50ms").unwrap()), 20);
        assert_eq!(samples_needed(&parse("failed<1%").unwrap()), 1);
    }

    #[test]
    fn a_breach_from_a_handful_of_samples_is_undecided_not_a_fail() {
        let f = facts(100.0, 100.0, 999, 80.0);
        assert_eq!(classify(&f, &slo("p99<50ms"), None), Class::Undecided);
        let f = facts(100.0, 100.0, 1000, 80.0);
        assert!(matches!(
            classify(&f, &slo("p99<50ms"), None),
            Class::Fail(Failure::Slo { value, .. }) if value == 80.0
        ));
    }

    #[test]
    fn a_met_slo_with_enough_samples_passes() {
        let f = facts(100.0, 99.0, 1000, 20.0);
        assert_eq!(classify(&f, &slo("p99<50ms"), Some(99.0)), Class::Pass);
        assert_eq!(classify(&f, &slo("p999<50ms"), None), Class::Undecided);
    }

    #[test]
    fn throughput_short_of_the_offer_or_collapsing_fails() {
        let f = facts(100.0, 94.0, 5000, 20.0);
        assert!(matches!(
            classify(&f, &slo("p99<50ms"), None),
            Class::Fail(Failure::Shortfall { .. })
        ));
        let f = facts(100.0, 96.0, 5000, 20.0);
        assert!(matches!(
            classify(&f, &slo("p99<50ms"), Some(110.0)),
            Class::Fail(Failure::Collapse { best, .. }) if best == 110.0
        ));
        assert_eq!(classify(&f, &slo("p99<50ms"), Some(106.0)), Class::Pass);
    }

    #[test]
    fn a_generator_at_its_limit_makes_the_probe_invalid_whatever_it_saw() {
        let mut f = facts(100.0, 10.0, 5000, 900.0);
        f.generator_bound = true;
        assert_eq!(classify(&f, &slo("p99<50ms"), None), Class::Invalid);
        f.generator_bound = false;
        assert!(matches!(
            classify(&f, &slo("p99<50ms"), None),
            Class::Fail(_)
        ));
    }

    /// A step of the golden run (100 req/s, served) whose target answered nothing.
    fn unanswered() -> StepResult {
        let golden = include_str!("../../tests/golden/run.json");
        let run =
            crate::run_file::RunFile::parse(golden, std::path::Path::new("run.json")).unwrap();
        let mut r = run.steps[0].clone();
        r.trust = Verdict::Invalid;
        r.generator_bound = false;
        (r.ok, r.ok_rate, r.failed_pct, r.errors_pct) = (0, 0.0, 100.0, 100.0);
        r
    }

    #[test]
    fn a_target_that_answers_nothing_fails_the_probe_and_is_not_the_generators_limit() {
        // Its step is invalid (no replies), but the generator was not the limit: a refusing target
        // is doomed at the start, a wedged one unrecovered, never "add agents".
        let f = ProbeFacts::of(&unanswered());
        assert!(!f.generator_bound && f.target_errors());
        assert!(matches!(
            classify(&f, &slo("p99<50ms"), None),
            Class::Fail(Failure::Shortfall { achieved, offered }) if achieved == 0.0 && offered == 100.0
        ));
        let mut r = unanswered();
        r.generator_bound = true;
        assert_eq!(
            classify(&ProbeFacts::of(&r), &slo("p99<50ms"), None),
            Class::Invalid
        );
    }

    #[test]
    fn a_censored_percentile_below_the_threshold_is_undecided() {
        let mut f = facts(100.0, 100.0, 5000, 20.0);
        f.observed.latency_lower_bound[Latency::P99.index()] = true;
        assert_eq!(classify(&f, &slo("p99<50ms"), None), Class::Undecided);
    }
}
