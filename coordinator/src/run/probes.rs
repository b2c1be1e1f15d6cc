//! A capacity search as the run's step source: each step is a probe the search asked for, classed
//! against the SLOs before it is written (its row names its role and class), and the search's
//! answer is the run's when it ends. The search itself is `results::search`, pure; this adds the
//! clock (the deadline counts real time), the warmup, the cooldown and the files' marks.
use std::time::{Duration, Instant};

use results::condition::Condition;
use results::search::{
    self, Answer, Capacity, Ceiling, Class, Mark, Next, ProbeFacts, ProbeMark, ProbeRole, Probed,
    Search, Status,
};
use results::step::{StepResult, human, human_ms, step_value, tsv_number};
use tokio_util::sync::CancellationToken;

use super::source::{self, Ended, StepSource, StepSpec};
use crate::config::{RunConfig, SearchSetup};
use crate::fleet::Fleet;
use crate::progress::span;

pub struct Probes {
    search: Search,
    slos: Vec<Condition>,
    model: &'static str,
    ceiling: Ceiling,
    /// Whether the ceiling is the generator's (its sockets), not a limit someone set: a pass there
    /// proves no more than the generator could offer.
    generator_ceiling: bool,
    warmup: Option<Duration>,
    cooldown: Duration,
    started: Instant,
    next_index: usize,
    /// The first Ctrl-C: a step aborted by it is not counted, one aborted by its own deadline is.
    interrupted: CancellationToken,
    /// A probe was asked for and has not been judged yet: if the run ends now, it never ran.
    issued_unrun: bool,
    /// What the step just run measured, for the search's next turn.
    probed: Option<Probed>,
    answer: Option<Answer>,
    /// The warmup (at the start rate) passed: a search that then fails at its start did not
    /// find the start too high, the server went away.
    warmup_passed: bool,
    /// The last probe judged saw the target's own errors (refused, reset, timed out).
    last_target_errors: bool,
}

impl Probes {
    /// A search under `ceiling` (the lower of --max-rate and what the fleet takes): the search's
    /// own configuration was validated before the fleet was reached, so only a ceiling below the
    /// start rate can refuse it here.
    pub fn new(
        setup: SearchSetup,
        model: &'static str,
        ceiling: Ceiling,
        generator_ceiling: bool,
        interrupted: CancellationToken,
    ) -> Result<Probes, search::SearchConfigError> {
        let config = search::Config {
            max_rate: ceiling.rate,
            ..setup.search
        };
        let (config_probe_s, config_deadline_s) = (config.probe_s, config.deadline_s);
        let search = Search::new(config)?;
        Ok(Probes {
            search,
            slos: setup.slos,
            model,
            ceiling,
            generator_ceiling,
            // A warmup that leaves no time for a probe before the deadline is not run.
            warmup: Some(setup.warmup)
                .filter(|w| !w.is_zero() && w.as_secs_f64() + config_probe_s < config_deadline_s),
            cooldown: setup.cooldown,
            started: Instant::now(),
            next_index: 0,
            interrupted,
            issued_unrun: false,
            probed: None,
            answer: None,
            warmup_passed: false,
            last_target_errors: false,
        })
    }

    /// The search in one line, before any load: `find-max: p99<50ms, 100 up to 5,000 req/s
    /// (--max-rate), 10 s probes, both bounds confirmed 2 × 30 s, within 5%, deadline 30 min`.
    pub fn plan_line(&self) -> String {
        let c = self.search.config();
        let slos = if self.slos.is_empty() {
            "no SLO (throughput only)".to_string()
        } else {
            self.slo_names().join(", ")
        };
        let warmup = self
            .warmup
            .map_or(String::new(), |w| format!(", {} warmup", span(w)));
        let ceiling = if self.generator_ceiling {
            // No probe measured it: its checks' bound is an estimate, not a rate to print.
            "as high as the generator can offer (its limit not measured)".to_string()
        } else {
            format!(
                "up to {} ({})",
                step_value(self.model, self.ceiling.rate),
                self.ceiling.by
            )
        };
        let length = if c.samples > 0 && c.per_second {
            " (longer where the SLOs need more samples)"
        } else {
            ""
        };
        let confirm = match c.repeat {
            0 => "bounds not confirmed".to_string(),
            n => format!(
                "both bounds confirmed {n} × {}",
                span(Duration::from_secs_f64(c.confirm_s))
            ),
        };
        format!(
            "find-max: {slos}, from {} {ceiling}, {} probes{length}{warmup}, {confirm}, within {}%, deadline {}",
            human(c.start),
            span(Duration::from_secs_f64(c.probe_s)),
            tsv_number(c.precision * 100.0),
            if c.deadline_s.is_finite() {
                span(Duration::from_secs_f64(c.deadline_s))
            } else {
                "none".to_string()
            }
        )
    }

    fn slo_names(&self) -> Vec<String> {
        self.slos.iter().map(ToString::to_string).collect()
    }

    /// The cooldown before step `index`: none before the first.
    fn pause_before(&self, index: usize) -> Duration {
        if index == 0 {
            Duration::ZERO
        } else {
            self.cooldown
        }
    }

    fn spec(&mut self, value: f64, length: f64, role: ProbeRole) -> StepSpec {
        let index = self.next_index;
        self.next_index += 1;
        StepSpec {
            index,
            value,
            length: Some(Duration::from_secs_f64(length)),
            pause: self.pause_before(index),
            role: Some(role),
            counted: true,
        }
    }

    /// The search's answer with what it means for the generator: a pass at a ceiling the
    /// generator set is its limit, not the server's.
    fn settled(&self, mut answer: Answer) -> Answer {
        if answer.status == Status::LowerBoundOnly && self.generator_ceiling {
            answer.status = Status::GeneratorBound;
        }
        // A target killed mid-search read "fails already at the start" beside a warmup it had
        // served at that very rate.
        if answer.status == Status::Doomed && self.warmup_passed && self.last_target_errors {
            answer.status = Status::ServerUnrecovered;
        }
        answer
    }
}

impl StepSource for Probes {
    fn next(&mut self, _last: Option<&StepResult>) -> Option<StepSpec> {
        if let Some(length) = self.warmup.take() {
            let start = self.search.start();
            return Some(self.spec(start, length.as_secs_f64(), ProbeRole::Warmup));
        }
        // The cooldown before the next probe counts too: no probe may end past the deadline.
        let pause = self.pause_before(self.next_index);
        let elapsed = (self.started.elapsed() + pause).as_secs_f64();
        match self.search.next(self.probed.take(), elapsed) {
            Next::Probe {
                rate,
                duration_s,
                role,
            } => {
                self.issued_unrun = true;
                Some(self.spec(rate, duration_s, role))
            }
            Next::Done(answer) => {
                self.answer = Some(self.settled(answer));
                None
            }
        }
    }

    fn not_run(&self) -> Vec<f64> {
        Vec::new()
    }

    fn outlasts_overruns(&self) -> bool {
        true
    }

    fn judge(&mut self, spec: &StepSpec, result: &mut StepResult) {
        let role = spec.role.unwrap_or(ProbeRole::Ramp);
        self.issued_unrun = false;
        if result.aborted && self.interrupted.is_cancelled() {
            // Not counted, as its mark says: nor among the probes the answer counts.
            self.search.forget_pending();
            result.probe = Some(ProbeMark {
                role,
                class: Mark::Aborted,
                reason: Some("interrupted: not counted".into()),
            });
            return;
        }
        let facts = ProbeFacts::of(result);
        // Aborted with nobody asking: the step overran its schedule, its timeout and the grace
        // after them, which only a generator behind its schedule does (a slow server's requests
        // time out within the step).
        let lost = result.agents.iter().any(|a| a.lost);
        let class = if result.aborted || lost {
            Class::Invalid
        } else {
            self.search.classify(&facts, &self.slos)
        };
        // Undecided with no retry left: the search counts it a fail, and so does its mark.
        let exhausted = class == Class::Undecided
            && role != ProbeRole::Warmup
            && !self.search.would_retry_undecided();
        let mut mark = if exhausted {
            search::mark(role, &Class::Fail(search::Failure::Undecided))
        } else {
            search::mark(role, &class)
        };
        if class == Class::Invalid {
            mark.reason = Some(if lost {
                "an agent was lost during the probe: its share of the offer was not all sent"
                    .to_string()
            } else if result.aborted {
                "the step overran its time: the generator could not keep its schedule".to_string()
            } else if facts.generator_bound {
                format!("the generator was the limit: {}", result.reasons.join("; "))
            } else {
                format!(
                    "the generator's own lag (p99 {}) accounts for half the latency that breached an SLO",
                    human_ms(facts.lag_p99_ms, false)
                )
            });
        }
        if role == ProbeRole::Warmup {
            // Its class is shown, never used: no reason to say.
            mark.reason = None;
        } else if class == Class::Undecided && !exhausted {
            mark.reason = Some(match search::probe::lacking(&facts, &self.slos) {
                Some((slo, have, needed)) => format!(
                    "{have} of the {needed} samples {slo} needs to be judged: probed again, longer"
                ),
                None => "a percentile an SLO names is a lower bound (requests given up) on the side that decides: probed again, longer".into(),
            });
        }
        result.probe = Some(mark);
        if role == ProbeRole::Warmup {
            self.warmup_passed = class == Class::Pass;
            return;
        }
        let probed = Probed::of(class, &facts, result.duration_s, &self.slos);
        self.last_target_errors = probed.target_errors;
        self.probed = Some(probed);
    }

    fn conclude(&mut self, ended: Ended) -> Option<Capacity> {
        if self.issued_unrun {
            // Asked for, never run (stopped in the cooldown before it, or before it started).
            self.search.forget_pending();
            self.issued_unrun = false;
        }
        let answer = match self.answer.clone() {
            Some(a) => a,
            None => {
                let status = match ended {
                    Ended::Interrupted => Status::Interrupted,
                    Ended::Failed => Status::Failed,
                    // The run ended without the search's word (its steps all ran): the bounds
                    // as they stand, never nothing.
                    Ended::Completed => Status::Deadline,
                };
                let a = self.search.stop(self.probed.take(), status);
                self.settled(a)
            }
        };
        Some(Capacity::of(
            &answer,
            self.model,
            &self.slo_names(),
            self.search.config().precision,
            self.ceiling.clone(),
            self.started.elapsed().as_secs_f64(),
        ))
    }
}

/// The highest rate the fleet takes, up to `max_rate`: the agents' policies first (someone's
/// limit: a pass there is a lower bound), then their sockets (the generator's: a pass there is
/// the generator's limit). Found by bisection over what each agent announced, before any load;
/// `start` is known to be taken (the run's check before any load passed it).
pub fn ceiling(fleet: &Fleet, cfg: &RunConfig, start: f64, max_rate: f64) -> (Ceiling, bool) {
    let who = fleet.live();
    let weights = fleet.weights(&who, cfg.agent_weights.as_deref());
    let route = super::route(cfg);
    let takes = |rate: f64, sockets: bool| -> Result<(), String> {
        let spec = StepSpec {
            length: Some(Duration::from_secs(1)),
            ..StepSpec::planned(0, rate)
        };
        let shares = source::shares(cfg, spec, &weights);
        for (k, &i) in who.iter().enumerate() {
            let taken = if sockets {
                fleet.check_share(i, &shares[k], Duration::ZERO, &route)
            } else {
                fleet.check_policy(i, &shares[k])
            };
            taken.map_err(|e| e.to_string())?;
        }
        Ok(())
    };
    let highest = |hi: f64, sockets: bool| -> Option<(f64, String)> {
        let refused = takes(hi, sockets).err()?;
        let (mut lo, mut hi, mut why) = (start, hi, refused);
        // Geometric bisection to a part in a million: a few dozen checks of arithmetic.
        while hi / lo > 1.000_001 {
            let mid = (lo * hi).sqrt();
            match takes(mid, sockets) {
                Ok(()) => lo = mid,
                Err(e) => {
                    hi = mid;
                    why = e;
                }
            }
        }
        // A round figure when the limit is one (an agent's --max-rate 300, not 299.9997).
        let round = [lo.ceil(), lo.floor()]
            .into_iter()
            .find(|r| *r >= start && takes(*r, sockets).is_ok());
        Some((round.unwrap_or(lo), why))
    };
    let mut ceiling = Ceiling {
        rate: max_rate,
        by: "--max-rate".into(),
        detail: None,
    };
    if let Some((rate, why)) = highest(max_rate, false) {
        ceiling = Ceiling {
            rate,
            by: "the agents' limits".into(),
            detail: Some(why),
        };
    }
    match highest(ceiling.rate, true) {
        Some((rate, why)) => (
            Ceiling {
                rate,
                by: results::search::capacity::GENERATOR_CHECKS.into(),
                detail: Some(why),
            },
            true,
        ),
        None => (ceiling, false),
    }
}
