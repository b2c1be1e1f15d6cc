//! What a search leaves in the files: each probe's mark on its step (steps.tsv's `role` and `class`,
//! run.json's `steps[].probe`), and run.json's `capacity`, the answer with everything behind it.
use serde::{Deserialize, Serialize};

use super::{Answer, Class, ProbeCounts, Status};
use crate::step::{Mark, ProbeMark, ProbeRole};
use crate::step::{human, step_value};

/// A probe's mark on its step: its role, its class, and why when it was not a pass.
pub fn mark(role: ProbeRole, class: &Class) -> ProbeMark {
    let (class, reason) = match class {
        Class::Pass => (Mark::Pass, None),
        Class::Fail(f) => (Mark::Fail, Some(f.to_string())),
        Class::Invalid => (
            Mark::Invalid,
            Some("the generator could not be trusted on it".into()),
        ),
        Class::Undecided => (
            Mark::Undecided,
            Some("too few samples to judge every SLO: probed again, longer".into()),
        ),
    };
    ProbeMark {
        role,
        class,
        reason,
    }
}

/// Who set a ceiling that no probe measured: the agents' own checks of what their sockets and worker
/// threads could offer, an estimate (a dispatch floor per request), not a rate anyone saw.
pub const GENERATOR_CHECKS: &str = "the generator's own checks (not measured)";

/// The highest rate the search may offer, and who set it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Ceiling {
    pub rate: f64,
    /// Who set it, in a few words: `--max-rate`, `the agents' limits`, [`GENERATOR_CHECKS`].
    pub by: String,
    /// The refusal that set it, as the agent's check said it (absent for --max-rate).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// A step value (in the model's unit) and the served replies per second it achieved.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Sustained {
    pub offered: f64,
    pub achieved: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Failed {
    pub offered: f64,
    /// Why, in words: the SLO and the value seen, or the throughput rule.
    pub reason: String,
    /// The SLO breached and its value (the SLO's unit), when an SLO decided it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slo: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<f64>,
    /// Which rule failed it: `slo`, `shortfall`, `collapse`, or `undecided` (too little evidence
    /// after every longer probe).
    pub rule: String,
    /// Served replies per second, when a throughput rule failed it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub served: Option<f64>,
}

/// run.json's `capacity`: the search's answer. Offered rates are step values in the model's unit
/// (req/s, conn/s, or connections for the closed model); achieved rates are served replies/s.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Capacity {
    pub status: Status,
    pub exit_code: u8,
    /// The answer in one sentence, as printed.
    pub answer: String,
    pub model: String,
    pub slos: Vec<String>,
    /// The highest offered rate that passed, with its (least) achieved rate.
    pub max_rate: Option<Sustained>,
    pub lowest_fail: Option<Failed>,
    /// lowest fail / max rate - 1, in %, when both are known; and what was asked for.
    pub precision_pct: Option<f64>,
    pub target_precision_pct: f64,
    pub confirmations: u32,
    /// (highest - lowest) / lowest achieved over the max rate's passes, in %.
    pub spread_pct: Option<f64>,
    pub probes: ProbeCounts,
    /// The rate of the last probe the generator could not be trusted on.
    pub invalid_at: Option<f64>,
    pub ceiling: Ceiling,
    pub elapsed_s: f64,
}

impl Capacity {
    pub fn of(
        answer: &Answer,
        model: &str,
        slos: &[String],
        target_precision: f64,
        ceiling: Ceiling,
        elapsed_s: f64,
    ) -> Capacity {
        let pct = |x: f64| x * 100.0;
        let lowest_fail = answer.lowest_fail.as_ref().map(|f| {
            use super::Failure;
            let (slo, value) = match &f.failure {
                Failure::Slo { slo, value, .. } => (Some(slo.clone()), Some(*value)),
                _ => (None, None),
            };
            let rule = match &f.failure {
                Failure::Slo { .. } => "slo",
                Failure::Shortfall { .. } => "shortfall",
                Failure::Collapse { .. } => "collapse",
                Failure::Undecided => "undecided",
                Failure::NothingServed => "nothing_served",
            };
            let served = match &f.failure {
                Failure::Shortfall { achieved, .. } | Failure::Collapse { achieved, .. } => {
                    Some(*achieved)
                }
                Failure::NothingServed => Some(0.0),
                _ => None,
            };
            Failed {
                offered: f.offered,
                reason: f.failure.to_string(),
                slo,
                value: value.filter(|v| v.is_finite()),
                rule: rule.into(),
                served,
            }
        });
        let mut c = Capacity {
            status: answer.status,
            exit_code: answer.status.exit_code(),
            answer: String::new(),
            model: model.to_string(),
            slos: slos.to_vec(),
            max_rate: answer.max_rate.map(|r| Sustained {
                offered: r.offered,
                achieved: r.achieved,
            }),
            lowest_fail,
            precision_pct: answer.precision.map(pct),
            target_precision_pct: pct(target_precision),
            confirmations: answer.confirmations,
            spread_pct: answer.spread.map(pct),
            probes: answer.probes,
            invalid_at: answer.invalid_at,
            ceiling,
            elapsed_s,
        };
        c.answer = c.sentence();
        c
    }

    /// The answer in words: the maximum with its achieved rate, the lowest fail and why, or what
    /// ended the search and the bounds known when it did.
    pub fn sentence(&self) -> String {
        let v = |x: f64| step_value(&self.model, x);
        let slos = if self.slos.is_empty() {
            "keeping up with the offer".to_string()
        } else {
            self.slos.join(", ")
        };
        let max = self
            .max_rate
            .map(|m| format!("{} (served {}/s)", v(m.offered), human(m.achieved)));
        let fail = self
            .lowest_fail
            .as_ref()
            .map(|f| format!("{}: {}", v(f.offered), f.reason));
        let bounds = match (&max, &fail) {
            (Some(m), Some(f)) => format!("passed at {m}, failed at {f}"),
            (Some(m), None) => format!("passed at {m}, no rate failed yet"),
            (None, Some(f)) => format!("no rate passed; failed at {f}"),
            (None, None) => "no probe was decided".to_string(),
        };
        match self.status {
            Status::Resolved => {
                let mut s = format!(
                    "sustains {} under {slos}; fails at {}",
                    max.unwrap_or_default(),
                    fail.unwrap_or_default()
                );
                if let Some(p) = self.precision_pct {
                    s.push_str(&format!(" (within {p:.1}%"));
                    s.push_str(&format!(", confirmed {}×", self.confirmations));
                    if let Some(spread) = self.spread_pct {
                        s.push_str(&format!(", spread {spread:.1}%"));
                    }
                    s.push(')');
                }
                s
            }
            Status::LowerBoundOnly => format!(
                "sustains at least {} under {slos}: the ceiling ({} {}) passed, so this is a lower bound, not a maximum",
                max.unwrap_or_default(),
                self.ceiling.by,
                human(self.ceiling.rate)
            ),
            Status::GeneratorBound => format!(
                "{}: the generator is the limit ({}); add agents or threads",
                max.map_or_else(|| "no rate proven".to_string(), |m| format!("at least {m}")),
                self.invalid_at.map_or_else(
                    || if self.ceiling.by == GENERATOR_CHECKS {
                        // An estimate: the number would read as a measured ceiling.
                        "as high as the generator can offer, by its own checks; no probe measured its limit".to_string()
                    } else {
                        format!(
                            "{} could offer no more than {}",
                            self.ceiling.by,
                            v(self.ceiling.rate)
                        )
                    },
                    |at| format!("untrusted at {}", v(at))
                )
            ),
            Status::Failed => format!("the run failed: {bounds}"),
            Status::Doomed => format!(
                "fails already at the start, {}; {}",
                fail.unwrap_or_default(),
                match self.lowest_fail.as_ref() {
                    Some(f) if f.rule == "undecided" =>
                        "its probes gather too few samples: a longer --probe or a higher --start",
                    Some(f) if f.served == Some(0.0) =>
                        "nothing was served: is the target up and reachable? (the steps' notes have its errors)",
                    _ => "try a lower --start",
                }
            ),
            Status::ServerUnrecovered if max.is_none() => format!(
                "the server stopped answering during the search: it served the warmup at the start rate, then failed at {}",
                fail.unwrap_or_default()
            ),
            Status::ServerUnrecovered => format!(
                "the server broke and did not come back: a rate that had passed failed after an overload with errors ({bounds})"
            ),
            Status::Deadline => format!("the deadline ended the search: {bounds}"),
            Status::Interrupted => format!("interrupted: {bounds}"),
        }
    }
}

/// Several searches under the same SLOs in one line, the highest sustained rate first:
/// `max under p99<50ms: nginx 31,200 req/s, go 14,900, node 11,800`. A search that did not resolve
/// says how it ended beside its rate (`go 14,900 (lower_bound_only)`); one with no rate passed comes
/// last. Targets of equal rates keep the order given.
pub fn ranking(runs: &[(&str, &Capacity)]) -> String {
    let Some((_, first)) = runs.first() else {
        return String::new();
    };
    let slos = if first.slos.is_empty() {
        "keeping up with the offer".to_string()
    } else {
        format!("under {}", first.slos.join(", "))
    };
    let mut ranked: Vec<&(&str, &Capacity)> = runs.iter().collect();
    let rate = |c: &Capacity| c.max_rate.map_or(f64::NEG_INFINITY, |m| m.offered);
    ranked.sort_by(|a, b| rate(b.1).total_cmp(&rate(a.1)));
    let mut unit_said = false;
    let entries: Vec<String> = ranked
        .iter()
        .map(|(label, c)| {
            let value = match c.max_rate {
                Some(m) if !unit_said => {
                    unit_said = true;
                    step_value(&c.model, m.offered)
                }
                Some(m) => human(m.offered),
                None => "no rate passed".to_string(),
            };
            match c.status {
                Status::Resolved => format!("{label} {value}"),
                s => format!("{label} {value} ({})", s.name()),
            }
        })
        .collect();
    format!("max {slos}: {}", entries.join(", "))
}

#[cfg(test)]
mod tests {
    use super::super::{FailedAt, Failure, RateAchieved};
    use super::*;

    #[test]
    fn searches_were_ranked_by_the_rate_each_sustained_saying_which_did_not_resolve() {
        let at = |status: Status, offered: Option<f64>| {
            let mut c = Capacity::of(
                &Answer {
                    max_rate: offered.map(|offered| RateAchieved {
                        offered,
                        achieved: offered,
                    }),
                    ..answer(status)
                },
                "requests",
                &["p99<50ms".to_string()],
                0.05,
                ceiling(),
                1.0,
            );
            c.status = status;
            c
        };
        let node = at(Status::Resolved, Some(11_800.0));
        let nginx = at(Status::Resolved, Some(31_200.0));
        let go = at(Status::LowerBoundOnly, Some(14_900.0));
        let gone = at(Status::Doomed, None);
        let line = ranking(&[
            ("node", &node),
            ("gone", &gone),
            ("nginx", &nginx),
            ("go", &go),
        ]);
        assert_eq!(
            line,
            "max under p99<50ms: nginx 31,200 req/s, go 14,900 (lower_bound_only), node 11,800, gone no rate passed (doomed)"
        );
        assert_eq!(ranking(&[]), "");
    }

    fn answer(status: Status) -> Answer {
        Answer {
            status,
            max_rate: Some(RateAchieved {
                offered: 1000.0,
                achieved: 998.4,
            }),
            lowest_fail: Some(FailedAt {
                offered: 1040.0,
                failure: Failure::Slo {
                    slo: "p99<50ms".into(),
                    value: 71.2,
                    seen: "p99 71.2 ms".into(),
                },
            }),
            precision: Some(0.04),
            confirmations: 2,
            spread: Some(0.01),
            probes: ProbeCounts {
                ramp: 5,
                bisect: 3,
                confirm: 4,
                ..ProbeCounts::default()
            },
            invalid_at: None,
        }
    }

    fn ceiling() -> Ceiling {
        Ceiling {
            rate: 1e6,
            by: "--max-rate".into(),
            detail: None,
        }
    }

    #[test]
    fn a_resolved_answer_names_both_bounds_and_why_the_higher_failed() {
        let c = Capacity::of(
            &answer(Status::Resolved),
            "requests",
            &["p99<50ms".into()],
            0.05,
            ceiling(),
            83.0,
        );
        assert_eq!(
            c.answer,
            "sustains 1,000 req/s (served 998/s) under p99<50ms; fails at 1,040 req/s: p99 71.2 ms, over the SLO p99<50ms (within 4.0%, confirmed 2×, spread 1.0%)"
        );
        let f = c.lowest_fail.as_ref().unwrap();
        assert_eq!((f.slo.as_deref(), f.value), (Some("p99<50ms"), Some(71.2)));
        let json = serde_json::to_value(&c).unwrap();
        assert_eq!(json["status"], "resolved");
        assert_eq!(json["exit_code"], 0);
        assert_eq!(json["max_rate"]["offered"], 1000.0);
        let back: Capacity = serde_json::from_value(json).unwrap();
        assert_eq!(back, c);
    }

    #[test]
    fn every_other_ending_says_so_and_keeps_the_bounds() {
        let said =
            |status| Capacity::of(&answer(status), "connections", &[], 0.05, ceiling(), 1.0).answer;
        assert!(said(Status::Deadline).starts_with(
            "the deadline ended the search: passed at 1,000 conn/s (served 998/s), failed at 1,040 conn/s"
        ));
        assert!(said(Status::Interrupted).starts_with("interrupted: passed at 1,000 conn/s"));
        assert!(said(Status::LowerBoundOnly).contains("lower bound, not a maximum"));
        assert!(said(Status::ServerUnrecovered).contains("did not come back"));
    }

    #[test]
    fn a_generator_ceiling_nobody_measured_was_given_as_a_number() {
        let estimated = Ceiling {
            rate: 4_999_999.0,
            by: GENERATOR_CHECKS.into(),
            detail: Some("step 1 needs 5000000 requests/s ...".into()),
        };
        let c = Capacity::of(
            &answer(Status::GeneratorBound),
            "requests",
            &[],
            0.05,
            estimated,
            1.0,
        );
        assert!(!c.answer.contains("4,999,999"), "{}", c.answer);
        assert!(
            c.answer.contains(
                "as high as the generator can offer, by its own checks; no probe measured its limit"
            ),
            "{}",
            c.answer
        );
        // A ceiling someone set is said with its number.
        let set = Capacity::of(
            &answer(Status::GeneratorBound),
            "requests",
            &[],
            0.05,
            ceiling(),
            1.0,
        );
        assert!(
            set.answer
                .contains("--max-rate could offer no more than 1,000,000"),
            "{}",
            set.answer
        );
    }

    #[test]
    fn a_probe_mark_carries_the_failure_in_words() {
        let m = mark(
            ProbeRole::Bisect,
            &Class::Fail(Failure::Shortfall {
                achieved: 812.0,
                offered: 1000.0,
            }),
        );
        assert_eq!(m.class, Mark::Fail);
        assert_eq!(
            m.reason.as_deref(),
            Some("served 812/s of 1,000/s offered, below 95%")
        );
        let json = serde_json::to_string(&m).unwrap();
        assert_eq!(
            json,
            r#"{"role":"bisect","class":"fail","reason":"served 812/s of 1,000/s offered, below 95%"}"#
        );
    }

    #[test]
    fn a_doomed_search_that_served_nothing_asks_whether_the_target_is_up() {
        let refused = Answer {
            max_rate: None,
            lowest_fail: Some(FailedAt {
                offered: 200.0,
                failure: Failure::Shortfall {
                    achieved: 0.0,
                    offered: 200.0,
                },
            }),
            precision: None,
            confirmations: 0,
            spread: None,
            ..answer(Status::Doomed)
        };
        let c = Capacity::of(&refused, "connections", &[], 0.05, ceiling(), 1.0);
        assert_eq!(
            c.answer,
            "fails already at the start, 200 conn/s: served 0/s of 200/s offered, below 95%; nothing was served: is the target up and reachable? (the steps' notes have its errors)"
        );
    }
}
