//! A probe's class, from its facts alone: invalid (the generator was the limit on it), fail (an SLO
//! breached with enough evidence, or throughput short of the offer or collapsing), pass (every SLO met
//! with enough evidence), or undecided (neither yet). Pure, so the search and its tests share it.
use crate::condition::{Condition, Metric, Observed, Reading, Truth, Unit};
use crate::step::{StepResult, human, human_ms, tsv_number};

/// Served below this share of the offered rate, the server did not keep up: a fail.
pub const SHORTFALL_RATIO: f64 = 0.95;
/// Served below this share of the best that a rate no higher served, throughput is collapsing as
/// the load grows: a fail.
pub const COLLAPSE_RATIO: f64 = 0.9;
pub use crate::verdict::LAG_SHARE;
/// A percentile pNN is judged only with at least this many samples beyond it, i.e. `k / (1 - q)`
/// samples in all: at k = 10 the tail the percentile sits in holds ten requests, so no one or two
/// stragglers decide it (at k = 1 a single request would set p99 from 100 samples); 1,000 for p99,
/// 10,000 for p999, the counts HdrHistogram's users quote for a stable p99.
pub const TAIL_SAMPLES: f64 = 10.0;

/// What the classification needs of a probe.
#[derive(Debug, Clone, PartialEq)]
pub struct ProbeFacts {
    /// Requests per second offered; none for the closed model.
    pub offered: Option<f64>,
    /// Served (expected-status) replies per second: the throughput the server delivered.
    pub achieved: f64,
    /// The generator itself was the limit (its fds or ports, or a schedule it could not keep): the
    /// probe says nothing of the server. Not a step's `invalid` trust as such: a step without a
    /// single reply is invalid too, and that is the server's doing (refused, timed out).
    pub generator_bound: bool,
    /// The generator's own lag behind its schedule, p99: latency is measured from the intended
    /// send, so a late generator's lag is in every latency it measured.
    pub lag_p99_ms: f64,
    /// Requests whose latency was measured (served, or given up at their age).
    pub samples: u64,
    /// Requests due: what a share (failed, errors) is a share of.
    pub due: u64,
    pub observed: Observed,
}

impl ProbeFacts {
    pub fn of(r: &StepResult) -> ProbeFacts {
        ProbeFacts {
            offered: r.demanded_rate,
            achieved: r.ok_rate,
            generator_bound: r.generator_bound,
            lag_p99_ms: r.generator.lag_p99_ms,
            samples: r.ok + r.given_up,
            due: r.due,
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
    /// Requests were due and none was served (refused, failed, timed out): in every model, with or
    /// without an SLO, the closed one included, which has no offer to fall short of.
    NothingServed,
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
            Failure::NothingServed => write!(f, "served nothing of the requests due"),
        }
    }
}

/// A breached SLO's value in words, in its metric's unit: `p99 71 ms` (`≥` for a lower bound),
/// `failed 2.5%`, `ok_rate 812/s`.
fn seen(slo: &Condition, r: Reading) -> String {
    let bound = if r.lower_bound { "≥" } else { "" };
    let name = slo.subject();
    match slo.metric {
        Metric::Latency(_) => format!("{name} {}", human_ms(r.value, r.lower_bound)),
        Metric::OkRate if slo.threshold.unit == Unit::PerSecond => {
            format!("{name} {bound}{}/s", human(r.value))
        }
        _ => format!("{name} {bound}{}%", tsv_number(r.value)),
    }
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
    let Some(q) = c.metric.quantity().quantile else {
        return 1;
    };
    (TAIL_SAMPLES / (1.0 - q)).round() as u64
}

/// The SLO furthest short of the evidence it needs, with what the probe had and what it needs.
pub fn lacking<'a>(f: &ProbeFacts, slos: &'a [Condition]) -> Option<(&'a Condition, u64, u64)> {
    slos.iter()
        .map(|c| (c, counted(f, c), samples_needed(c)))
        .filter(|(_, have, needed)| have < needed)
        .min_by(|a, b| (a.1 as f64 / a.2 as f64).total_cmp(&(b.1 as f64 / b.2 as f64)))
}

/// The share of the evidence the SLO furthest short of it has, when some SLO is short (else
/// `None`: the samples are not what is missing).
pub fn evidence(f: &ProbeFacts, slos: &[Condition]) -> Option<f64> {
    lacking(f, slos).map(|(_, have, needed)| have as f64 / needed as f64)
}

/// How many of the probe's measurements a condition is judged on: latency samples for a latency,
/// the requests due for a share (failed, errors, ok_rate), which have their own denominator.
/// A named request's are its own (none when it had nothing due).
fn counted(f: &ProbeFacts, c: &Condition) -> u64 {
    let (samples, due) = match (&c.request, c.scope(&f.observed)) {
        (None, _) => (f.samples, f.due),
        (Some(_), Some(s)) => (s.samples, s.due),
        (Some(_), None) => (0, 0),
    };
    match c.metric {
        Metric::Latency(_) => samples,
        _ => due,
    }
}

/// `best` is the highest throughput achieved by an earlier probe of the search at no higher a rate
/// than this one ([`super::Search::best_achieved`]). Every SLO is judged: a breach the generator's
/// own lag explains makes the probe invalid only when no other SLO was plainly breached, so the
/// order of the `--slo` flags never decides.
pub fn classify(f: &ProbeFacts, slos: &[Condition], best: Option<f64>) -> Class {
    if f.generator_bound {
        return Class::Invalid;
    }
    let mut undecided = false;
    let mut explained = false;
    let mut failed = None;
    for slo in slos {
        if counted(f, slo) < samples_needed(slo) {
            undecided = true;
            continue;
        }
        match slo.evaluate(&f.observed) {
            Truth::True => {}
            Truth::Unknown => undecided = true,
            Truth::False => {
                let reading = slo.read(&f.observed);
                // A breach half of which the generator's own lateness could account for is not
                // the server's: it says nothing either way.
                if let (Metric::Latency(_), Some(r)) = (slo.metric, reading)
                    && f.lag_p99_ms >= LAG_SHARE * r.value
                {
                    explained = true;
                    continue;
                }
                failed.get_or_insert(Failure::Slo {
                    slo: slo.to_string(),
                    value: reading.map_or(f64::NAN, |r| r.value),
                    seen: reading.map_or_else(String::new, |r| seen(slo, r)),
                });
            }
        }
    }
    if let Some(failure) = failed {
        return Class::Fail(failure);
    }
    if f.due > 0 && f.achieved == 0.0 {
        return Class::Fail(Failure::NothingServed);
    }
    if explained {
        return Class::Invalid;
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
    use crate::condition::{Latency, parse};
    use crate::verdict::Verdict;

    fn facts(offered: f64, achieved: f64, samples: u64, p99_ms: f64) -> ProbeFacts {
        ProbeFacts {
            offered: Some(offered),
            achieved,
            generator_bound: false,
            lag_p99_ms: 0.0,
            samples,
            due: samples,
            observed: Observed {
                latency_ms: Some([1.0, 2.0, p99_ms, p99_ms, p99_ms, 1.0]),
                latency_lower_bound: [false; 6],
                failed_pct: 0.0,
                errors_pct: 0.0,
                ok_rate: achieved,
                demanded_rate: Some(offered),
                ..Default::default()
            },
        }
    }

    fn slo(s: &str) -> Vec<Condition> {
        vec![parse(s).unwrap()]
    }

    #[test]
    fn a_plain_breach_fails_whatever_the_order_of_the_slos() {
        // A 5 s late generator explains the p99, not 30 % of the requests failing.
        let late = ProbeFacts {
            lag_p99_ms: 5000.0,
            observed: Observed {
                failed_pct: 30.0,
                ..facts(1000.0, 1000.0, 10_000, 6000.0).observed
            },
            ..facts(1000.0, 1000.0, 10_000, 6000.0)
        };
        let both = |a: &str, b: &str| vec![parse(a).unwrap(), parse(b).unwrap()];
        for slos in [both("p99<50ms", "failed<1%"), both("failed<1%", "p99<50ms")] {
            assert!(
                matches!(classify(&late, &slos, None), Class::Fail(Failure::Slo { ref slo, .. }) if slo == "failed<1%"),
                "{slos:?}"
            );
        }
    }

    #[test]
    fn a_probe_that_served_nothing_fails_without_any_slo_in_the_closed_model_too() {
        let dead = ProbeFacts {
            offered: None,
            achieved: 0.0,
            samples: 0,
            due: 40,
            ..facts(1.0, 0.0, 0, 0.0)
        };
        assert_eq!(
            classify(&dead, &[], Some(0.0)),
            Class::Fail(Failure::NothingServed)
        );
    }

    #[test]
    fn a_share_is_judged_on_the_requests_due_not_on_latency_samples() {
        // A closed loop against a target that answers nothing: no latency sample, every request failed.
        let dead = ProbeFacts {
            offered: None,
            achieved: 0.0,
            samples: 0,
            due: 40,
            observed: Observed {
                latency_ms: None,
                failed_pct: 100.0,
                ..facts(1.0, 0.0, 0, 0.0).observed
            },
            ..facts(1.0, 0.0, 0, 0.0)
        };
        assert!(matches!(
            classify(&dead, &slo("failed<1%"), None),
            Class::Fail(Failure::Slo { .. })
        ));
    }

    #[test]
    fn a_latency_breach_the_generators_own_lag_accounts_for_is_invalid_not_a_fail() {
        // A generator 5 s behind its schedule measured p99 6 s: that says nothing of the server.
        let late = ProbeFacts {
            lag_p99_ms: 5000.0,
            ..facts(20_000.0, 20_000.0, 100_000, 6000.0)
        };
        assert_eq!(classify(&late, &slo("p99<50ms"), None), Class::Invalid);
        // A little lag beside a server's queueing: the server's breach.
        let queued = ProbeFacts {
            lag_p99_ms: 10.0,
            ..facts(800.0, 800.0, 10_000, 600.0)
        };
        assert!(matches!(
            classify(&queued, &slo("p99<50ms"), None),
            Class::Fail(Failure::Slo { .. })
        ));
        // A lag that does not breach anything leaves a pass a pass.
        let passing = ProbeFacts {
            lag_p99_ms: 20.0,
            ..facts(800.0, 800.0, 10_000, 30.0)
        };
        assert_eq!(classify(&passing, &slo("p99<50ms"), None), Class::Pass);
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
            Class::Fail(Failure::NothingServed)
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
