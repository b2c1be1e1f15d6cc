//! The run's answer from its steps (`summarize_run` → `RunSummary`): how far the target kept
//! up, what it did beyond, where its served rate plateaued, and that in one sentence.
use super::judgement::{Beyond, PLATEAU_RATIO, judged, kept_up};
use super::knee::{self, Knee};
use super::{StepResult, headline, human, human_ms, step_value};
use crate::verdict::{self, Verdict};

/// The run's answer: how far the target kept up, where its served rate plateaued, how p99 moved.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct RunSummary {
    /// The highest step value (rate, or connections) kept up with (see [`kept_up`]). Null when no
    /// step was.
    pub kept_up_to: Option<f64>,
    pub kept_up_step: Option<u32>,
    pub kept_up_p99_ms: Option<f64>,
    pub beyond: Option<Beyond>,
    /// The highest served rate of the run, and the first step value that reached 98 % of it.
    pub peak_ok_rate: f64,
    pub plateau_from: Option<f64>,
    /// Steps whose numbers cannot be trusted (the generator's verdict `invalid`).
    pub untrusted_steps: Vec<u32>,
    /// Where the server stopped coping and why ([`crate::knee`]); absent when no step shows it (and
    /// in files written before the knee was named).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub knee: Option<Knee>,
    /// What the run found of the server, as a kind: the structure the headline is rendered from
    /// (absent in files written before it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finding: Option<headline::Finding>,
    /// The answer at a glance, at most [`headline::MAX_CHARS`] characters: what stdout's `answer:`
    /// line, the ranking and the report's lead say. Empty in files written before it.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub headline: String,
    /// The answer in full: every number behind the headline, in one sentence.
    pub answer: String,
}

pub fn summarize_run(steps: &[StepResult]) -> RunSummary {
    let knee = knee::find(steps);
    // "Kept up to" is the last step before the knee, so the knee is always above it.
    let kept = steps
        .iter()
        .filter(|r| kept_up(r) && knee.as_ref().is_none_or(|k| r.step_value < k.step_value))
        .max_by(|a, b| a.step_value.total_cmp(&b.step_value));
    let beyond = match &knee {
        Some(k) => steps.iter().find(|r| r.number == k.step),
        None => kept.map_or_else(
            || steps.iter().find(|r| judged(r) && !kept_up(r)),
            |k| {
                steps
                    .iter()
                    .filter(|r| r.step_value > k.step_value && judged(r) && !kept_up(r))
                    .min_by(|a, b| a.step_value.total_cmp(&b.step_value))
            },
        ),
    };
    let peak = steps.iter().map(|r| r.ok_rate).fold(0.0, f64::max);
    let plateau_from = steps
        .iter()
        .filter(|r| peak > 0.0 && r.ok_rate >= PLATEAU_RATIO * peak)
        .map(|r| r.step_value)
        .min_by(f64::total_cmp);
    let untrusted_steps = steps
        .iter()
        .filter(|r| r.trust == Verdict::Invalid)
        .map(|r| r.number)
        .collect();
    let beyond = beyond.map(|r| Beyond {
        step: r.number,
        step_value: r.step_value,
        demanded_rate: r.demanded_rate,
        ok_rate: r.ok_rate,
        p99_ms: r.latency_ms.p99,
        p99_lower_bound: r.latency_ms.lower_bounds.contains("p99"),
        failed_pct: r.failed_pct,
        server: r.server,
        trust: r.trust,
        generator_bound: r.generator_bound,
        aborted: r.aborted,
    });
    let mut answer = answer(steps, kept, beyond.as_ref(), peak, plateau_from);
    if let Some(k) = &knee {
        // A server that served every step past its knee kept up by the served rate alone: its
        // limit of that kind is beyond the ramp, not every limit.
        if k.servers {
            answer = answer.replace(
                BEYOND_THE_RAMP,
                "so its served rate's limit lies beyond this ramp",
            );
        }
        answer = format!("{}; {answer}", knee_lead(steps, k));
    }
    let finding = headline::Finding::of(steps, kept, beyond.as_ref(), knee.as_ref());
    let headline = headline::render(steps, &finding, kept, knee.as_ref());
    RunSummary {
        kept_up_to: kept.map(|r| r.step_value),
        kept_up_step: kept.map(|r| r.number),
        kept_up_p99_ms: kept.map(|r| r.latency_ms.p99),
        beyond,
        peak_ok_rate: peak,
        plateau_from,
        untrusted_steps,
        knee,
        finding,
        headline,
        answer,
    }
}

/// A step value in words; the connections model's with the request rate it demanded, which the
/// tables show beside it.
fn offered_words(model: &str, value: f64, demanded: Option<f64>) -> String {
    match demanded {
        Some(d) if model == "connections" => {
            format!("{} = {} req/s", step_value(model, value), human(d))
        }
        _ => step_value(model, value),
    }
}

/// The answer's lead: the knee, then what the server still served at the highest step beyond it.
fn knee_lead(steps: &[StepResult], k: &Knee) -> String {
    let model = steps.first().map_or("", |r| r.model.as_str());
    let mut s = k.sentence(&offered_words(model, k.step_value, k.demanded_rate));
    let top = steps
        .iter()
        .filter(|r| judged(r) && !r.aborted && r.step_value > k.step_value)
        .max_by(|a, b| a.step_value.total_cmp(&b.step_value));
    if let Some(top) = top.filter(|_| k.servers) {
        s.push_str(&format!(
            "; it still served {}/s at {}",
            human(top.ok_rate),
            step_value(model, top.step_value)
        ));
    }
    s
}

/// What a run every step of which kept up says of its limit.
const BEYOND_THE_RAMP: &str = "so the limit lies beyond this ramp";

fn answer(
    steps: &[StepResult],
    kept: Option<&StepResult>,
    beyond: Option<&Beyond>,
    peak: f64,
    plateau_from: Option<f64>,
) -> String {
    let Some(first) = steps.first() else {
        return "no step ran".to_string();
    };
    let model = first.model.as_str();
    let offered = |value: f64, demanded: Option<f64>| offered_words(model, value, demanded);
    let mut s = match kept {
        Some(k) => {
            let mut doubt = String::new();
            if k.trust == Verdict::Degraded {
                doubt = format!("; trust degraded there: {}", k.reasons.join("; "));
            }
            format!(
                "kept up to {} (p99 {}{doubt})",
                offered(k.step_value, k.demanded_rate),
                human_ms(k.latency_ms.p99, k.latency_ms.lower_bounds.contains("p99"))
            )
        }
        None => "kept up with no step".to_string(),
    };
    match beyond {
        Some(b) => {
            let mut why = String::new();
            if b.failed_pct > verdict::FAILING_PCT {
                why.push_str(&format!(", {}% failed", human(b.failed_pct)));
            }
            if b.aborted {
                why.push_str(" (the step was interrupted before it finished)");
            } else if b.generator_bound {
                why.push_str(" (the generator could not be trusted there)");
            }
            if b.ok_rate > 0.0 || b.p99_ms > 0.0 {
                s.push_str(&format!(
                    "; at {} it served {}/s with p99 {}{why}",
                    offered(b.step_value, b.demanded_rate),
                    human(b.ok_rate),
                    human_ms(b.p99_ms, b.p99_lower_bound)
                ));
            } else {
                // No latency at all: nothing served and nothing given up, so no p99 to speak of.
                s.push_str(&format!(
                    "; at {} it served nothing{why}",
                    offered(b.step_value, b.demanded_rate)
                ));
            }
        }
        None if kept.is_some() && steps.iter().all(judged) => {
            s.push_str(&format!(": every step kept up, {BEYOND_THE_RAMP}"))
        }
        None if kept.is_some() => s.push_str(": every step judged kept up"),
        None => {}
    }
    for r in steps.iter().filter(|r| !judged(r)) {
        let lost: Vec<String> = r
            .lost_load
            .iter()
            .map(|l| format!("agent {}'s share ({} % of the load)", l.agent, human(l.pct)))
            .collect();
        s.push_str(&format!(
            "; step {} lost {}: not judged",
            r.number,
            lost.join(" and ")
        ));
    }
    // A plateau needs a step past where it began.
    let last = steps.iter().map(|r| r.step_value).fold(f64::MIN, f64::max);
    if let Some(from) = plateau_from.filter(|f| beyond.is_some() && peak > 0.0 && *f < last) {
        s.push_str(&format!(
            "; the served rate plateaued at {}/s from {}",
            human(peak),
            step_value(model, from)
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::step::LatencyStats;
    use crate::step::tests::ramp_step;

    #[test]
    fn the_run_says_how_far_the_target_kept_up() {
        let steps = vec![
            ramp_step(1, 100.0, 100.0, 2.0, Verdict::Valid),
            ramp_step(2, 200.0, 199.0, 2.1, Verdict::Valid),
            ramp_step(3, 400.0, 398.0, 9.3, Verdict::Valid),
            ramp_step(4, 500.0, 401.0, 3300.0, Verdict::Valid),
            ramp_step(5, 600.0, 400.0, 3300.0, Verdict::Valid),
        ];
        let s = summarize_run(&steps);
        assert_eq!(s.kept_up_to, Some(400.0));
        assert_eq!(s.kept_up_step, Some(3));
        assert_eq!(s.beyond.as_ref().unwrap().step_value, 500.0);
        assert_eq!(
            s.answer,
            "knee at 500 req/s: 19.8% failed, p99 rose 1,651x (2.0 ms → 3.3 s), the served rate flattened (401/s, from 398/s a step before); it still served 400/s at 600 req/s; kept up to 400 req/s (p99 9.3 ms); at 500 req/s it served 401/s with p99 3.3 s, 19.8% failed; the served rate plateaued at 401/s from 400 req/s"
        );
        let knee = s.knee.as_ref().unwrap();
        assert_eq!((knee.step, knee.cause), (4, knee::KneeCause::Failures));
        assert_eq!(s.finding, Some(headline::Finding::Knee));
        assert_eq!(
            s.headline,
            "kept up to 400 req/s (p99 9.3 ms); broke at 500: 19.8% failed, p99 ×1,651 (3.3 s), served 401/s"
        );
        // A step the generator could not be trusted on does not count as kept up, nor as the
        // knee: the knee is the server's, where its service degraded.
        let mut untrusted = steps.clone();
        untrusted[2].trust = Verdict::Invalid;
        untrusted[2].generator_bound = true;
        let s = summarize_run(&untrusted);
        assert_eq!(s.kept_up_to, Some(200.0));
        assert_eq!(s.untrusted_steps, [3]);
        assert_eq!(s.knee.as_ref().map(|k| k.step_value), Some(500.0));
        assert_eq!(s.beyond.as_ref().map(|b| b.step_value), Some(500.0));
        // Every step kept up: the limit is beyond the ramp; none did: null.
        let s = summarize_run(&steps[..2]);
        assert!(
            s.answer
                .ends_with("every step kept up, so the limit lies beyond this ramp")
        );
        let s = summarize_run(&steps[3..]);
        assert_eq!(s.kept_up_to, None);
        assert!(
            s.answer.starts_with("knee at 500 req/s: 19.8% failed; ")
                && s.answer.contains("; kept up with no step; at 500 req/s"),
            "{}",
            s.answer
        );
        let json = serde_json::to_value(&s).unwrap();
        assert!(json["kept_up_to"].is_null());
        // An interrupted step is said to be one, not blamed on the generator; a degraded step kept up
        // with says its doubt.
        let mut stopped = steps[..3].to_vec();
        stopped[1].trust = Verdict::Degraded;
        stopped[1].reasons = vec!["lag p99 36.6 ms: 2172 requests left more than 1 ms late".into()];
        stopped[2].trust = Verdict::Invalid;
        stopped[2].aborted = true;
        let s = summarize_run(&stopped);
        assert_eq!(
            s.answer,
            "kept up to 200 req/s (p99 2.1 ms; trust degraded there: lag p99 36.6 ms: 2172 requests left more than 1 ms late); at 400 req/s it served 398/s with p99 9.3 ms (the step was interrupted before it finished)"
        );
        // The connections model's step is in conn/s, the table's rate in req/s: both are said.
        let mut conns = steps[..2].to_vec();
        for r in &mut conns {
            r.model = "connections".into();
            r.demanded_rate = Some(r.step_value * 10.0);
        }
        let s = summarize_run(&conns);
        assert!(
            s.answer
                .starts_with("kept up to 200 conn/s = 2,000 req/s (p99 "),
            "{}",
            s.answer
        );
        // A server that answered only errors has no p99 to report, not one of 0 ms.
        let mut dead = ramp_step(1, 100.0, 0.0, 0.0, Verdict::Valid);
        dead.latency_ms = LatencyStats::default();
        // Nor a knee: nothing answered at any step (a wrong port read "knee at 100 conn/s").
        let s = summarize_run(&[dead]);
        assert_eq!(
            s.answer,
            "kept up with no step; at 100 req/s it served nothing, 100% failed"
        );
        assert_eq!(s.finding, Some(headline::Finding::NothingAnswered));
        assert_eq!(s.headline, "nothing answered: 100% failed at every step");
    }
}
