//! Two judgements of a step, kept apart so neither is read as the other: whether its numbers can be
//! trusted (`trust`: the generator judges itself — CPU, lag, achieved rate, its own resource errors)
//! and how the server fared (`server`: ok, saturated or failing), each with its reasons in words, so a
//! saturated load tool is never mistaken for a slow server, nor a trusted step for a healthy server.
use serde::{Deserialize, Serialize};

use shared::metrics::{Counters, ErrorClass, FirstErrors};
use shared::status::{StatusCodes, StatusSet};

/// A latency rise is the generator's, not the server's, when the generator's lag p99 is at least
/// this share of it: a find-max breach is then invalid, a knee the generator's.
pub const LAG_SHARE: f64 = 0.5;

/// Any generator thread busier than this may be limiting the load (Hyperfoil's watchdog uses 80 %).
pub const CPU_DEGRADED_PCT: f64 = 80.0;
/// Past this the generator is saturated.
pub const CPU_SATURATED_PCT: f64 = 95.0;
/// Lag p99 above this means requests left noticeably late.
pub const LAG_DEGRADED_MS: f64 = 5.0;
/// Achieved below this share of demanded is a shortfall worth explaining.
pub const ACHIEVED_MIN_RATIO: f64 = 0.97;
/// A failed share above this (percent of requests due) is a failing server.
pub const FAILING_PCT: f64 = 1.0;
/// A server's CPU at or above this share of what it may use is at its limit (a note, and the knee).
pub const CPU_LIMIT_PCT: f64 = 90.0;
/// A thread at or above this share of a core is at its limit: its process can go no faster however
/// many cores it has.
pub const THREAD_LIMIT_PCT: f64 = 90.0;
/// Arrivals that found every connection busy, above this share of those due, queued on the server.
pub const QUEUED_PCT: f64 = 1.0;
/// Median latency this many times the run's best (and at least `QUEUEING_MIN_MS` above it) means
/// requests queued: the server is saturated even if it still answers them all.
pub const QUEUEING_FACTOR: f64 = 4.0;
pub const QUEUEING_MIN_MS: f64 = 1.0;
/// Served at under this share of the pace it was due, the server fell behind: it queued what it did
/// not serve in time, however many it answered in the end. Not tighter: a healthy step's replies
/// arrive over its length plus its latency spread, which lowers the pace a little.
pub const QUEUEING_PACE: f64 = 0.9;
/// A backlog at the step's end of more than this many seconds of the offered rate is a queue...
pub const BACKLOG_S: f64 = 0.1;
/// ... and of at least this many replies: a handful of stragglers is never one.
pub const BACKLOG_MIN: u64 = 10;
/// A step shorter than this, or with fewer requests due, says nothing of queueing: its replies'
/// pace is its latency spread, not the server's (a 2 ms step was "saturated").
pub const MIN_JUDGED_S: f64 = 1.0;
pub const MIN_JUDGED_DUE: u64 = 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Valid,
    Degraded,
    Invalid,
}

impl Verdict {
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Valid => "valid",
            Verdict::Degraded => "degraded",
            Verdict::Invalid => "invalid",
        }
    }

    fn worsen(&mut self, to: Verdict) {
        let rank = |v: Verdict| v as u8;
        if rank(to) > rank(*self) {
            *self = to;
        }
    }
}

/// The facts about one step that the judgement rests on.
#[derive(Debug, Clone, Default)]
pub struct Facts {
    /// None for the closed model, which has no schedule to fall behind.
    pub demanded_rate: Option<f64>,
    pub achieved_rate: f64,
    /// The busiest agent's worker CPU, as a share of its worker threads.
    pub cpu_pct: f64,
    pub lag_p99_ms: f64,
    /// Arrivals dispatched more than 1 ms late.
    pub late: u64,
    pub counters: Counters,
    pub aborted: bool,
    pub lost_agents: Vec<String>,
    /// The closed model's demanded connection count (None for the open models).
    pub concurrency: Option<u64>,
    /// Each error class's first message, to say what went wrong in words.
    pub messages: FirstErrors,
}

/// The verdict, the reasons for it, and notes that explain the numbers without blaming the generator.
#[derive(Debug, Clone, PartialEq)]
pub struct Judgement {
    pub verdict: Verdict,
    pub reasons: Vec<String>,
    pub notes: Vec<String>,
    /// The generator itself was the limit (its fds or ports, or a schedule it could not keep): the
    /// step says nothing of the server. Not so for an aborted step or one without replies, which
    /// are `invalid` too.
    pub generator_bound: bool,
}

impl Judgement {
    /// Worsens the verdict to at least `to`, for `reason`.
    fn flag(&mut self, to: Verdict, reason: String) {
        self.verdict.worsen(to);
        self.reasons.push(reason);
    }
}

pub fn judge(f: &Facts) -> Judgement {
    let mut j = Judgement {
        verdict: Verdict::Valid,
        reasons: Vec::new(),
        notes: Vec::new(),
        generator_bound: false,
    };
    judge_interruptions(f, &mut j);
    judge_generator_resources(&f.counters, &mut j);
    judge_no_replies(f, &mut j);
    judge_generator_load(f, &mut j);
    judge_shortfall(f, &mut j);
    judge_connections(f, &mut j);
    // Client timeouts are said by the error notes (count and first words) and the given-up note.
    j
}

/// An aborted step, and agents lost during it.
fn judge_interruptions(f: &Facts, j: &mut Judgement) {
    if f.aborted {
        j.flag(
            Verdict::Invalid,
            "step aborted before it finished".to_string(),
        );
    }
    for agent in &f.lost_agents {
        j.flag(
            Verdict::Degraded,
            format!("agent {agent} was lost during the step"),
        );
    }
}

/// The generator out of its own resources (ports, file descriptors): it was the limit.
fn judge_generator_resources(c: &Counters, j: &mut Judgement) {
    for (class, what) in [
        (
            ErrorClass::AddrUnavailable,
            "generator out of local ports, or a --source-addrs address it does not have",
        ),
        (
            ErrorClass::FdUnavailable,
            "generator out of file descriptors, or at its own --max-connections (its first error says which)",
        ),
    ] {
        let n = c.error(class);
        if n > 0 {
            j.generator_bound = true;
            j.flag(
                Verdict::Invalid,
                format!("{n} {} errors: {what}", class.name()),
            );
        }
    }
}

/// No replies at all, and the target's most frequent error in words.
fn judge_no_replies(f: &Facts, j: &mut Judgement) {
    let c = &f.counters;
    if c.replies == 0 && c.attempts() > 0 {
        let worst = ErrorClass::ALL
            .iter()
            .filter(|e| !e.is_generator_resource())
            .max_by_key(|e| c.error(**e))
            .copied()
            .unwrap_or(ErrorClass::Other);
        let reason = if c.error(worst) > 0 {
            match f.messages.get(worst) {
                Some(words) => format!(
                    "no replies: {} {} errors, the first: {words}",
                    c.error(worst),
                    worst.name()
                ),
                None => format!(
                    "no replies: {} {} errors (is the target up and reachable?)",
                    c.error(worst),
                    worst.name()
                ),
            }
        } else {
            "no replies".to_string()
        };
        j.flag(Verdict::Invalid, reason);
    }
}

fn cpu_high(f: &Facts) -> bool {
    f.cpu_pct >= CPU_DEGRADED_PCT
}

fn lag_high(f: &Facts) -> bool {
    f.lag_p99_ms > LAG_DEGRADED_MS
}

/// The generator's CPU and lag: high, it may have limited the load.
fn judge_generator_load(f: &Facts, j: &mut Judgement) {
    if f.cpu_pct >= CPU_SATURATED_PCT {
        j.flag(
            Verdict::Degraded,
            format!(
                "generator CPU {:.0}%: the load generator is saturated",
                f.cpu_pct
            ),
        );
    } else if cpu_high(f) {
        j.flag(
            Verdict::Degraded,
            format!(
                "generator CPU {:.0}%: results may be limited by the generator",
                f.cpu_pct
            ),
        );
    }
    if lag_high(f) {
        j.flag(
            Verdict::Degraded,
            format!(
                "lag p99 {:.1} ms: {} requests left more than 1 ms late",
                f.lag_p99_ms, f.late
            ),
        );
    }
}

/// Fewer requests sent than the schedule held: the generator's doing, the target's, or a lost
/// agent's share.
fn judge_shortfall(f: &Facts, j: &mut Judgement) {
    let c = &f.counters;
    let busy = cpu_high(f) || lag_high(f);
    // Judged against the arrivals the schedule itself held (every one is sent or counted unsent), not
    // the plan's rate: a Poisson schedule holds more or fewer than rate x duration, and a lost
    // agent's share was never scheduled at all.
    let shortfall = f
        .demanded_rate
        .filter(|d| *d > 0.0 && c.attempts() > 0)
        .map(|_| c.requests as f64 / c.attempts() as f64)
        .filter(|r| *r < ACHIEVED_MIN_RATIO);
    // Of what was not sent, what the target may account for: arrivals it kept waiting until the
    // end, unsent requests its own errors (refused, timed out connecting) explain, and the later
    // calls of the connections it failed.
    let target_unsent = (c.dropped + c.abandoned + c.target_errors()).min(c.unsent);
    let generator_shortfall = c.attempts() > 0
        && ((c.requests + target_unsent) as f64 / c.attempts() as f64) < ACHIEVED_MIN_RATIO;
    let lost_shortfall = f
        .demanded_rate
        .filter(|d| *d > 0.0)
        .map(|d| f.achieved_rate / d)
        .filter(|r| *r < ACHIEVED_MIN_RATIO);

    if let (Some(ratio), false) = (lost_shortfall, f.lost_agents.is_empty()) {
        // The lost agent's share was never sent; that is already the reason above.
        j.notes.push(format!(
            "achieved {:.0}% of demanded: the lost agent's share was not sent",
            ratio * 100.0
        ));
    } else if let Some(ratio) = shortfall {
        // Arrivals dropped after waiting for a connection the target held are the target's doing,
        // however busy the generator was.
        if busy && generator_shortfall {
            j.generator_bound = true;
            j.flag(
                Verdict::Invalid,
                format!(
                    "sent {:.0}% of the requests due: the generator could not keep its schedule",
                    ratio * 100.0
                ),
            );
        } else if c.replies > 0 {
            // What was not sent waited on the target, or went down with a connection it failed.
            let why = if !busy {
                "the generator kept its schedule"
            } else if c.dropped >= c.abandoned {
                "the rest waited for a connection the target held until the step ended"
            } else {
                "the rest were due on connections the target failed"
            };
            j.notes.push(format!(
                "sent {:.0}% of the requests due: the target did not keep up ({why})",
                ratio * 100.0
            ));
        }
    }
}

/// Connections: fewer than the closed model names, and arrivals that waited for one.
fn judge_connections(f: &Facts, j: &mut Judgement) {
    let c = &f.counters;
    // Every closed-loop connection connects at least once; fewer means some never got through (still
    // connecting at the end: a full accept queue, ports running out), so the step did not measure the
    // concurrency it names.
    if let Some(n) = f.concurrency.filter(|n| c.connections < *n) {
        j.flag(
            Verdict::Degraded,
            format!(
                "only {} of {n} connections were established: the step ran at less than its concurrency",
                c.connections
            ),
        );
    }
    if c.waited > 0 {
        j.notes.push(format!(
            "{} arrivals waited for a free connection (max-connections reached); their latency counts from the intended send",
            c.waited
        ));
    }
    if c.dropped > 0 {
        j.notes.push(format!(
            "{} arrivals were still waiting for a free connection when the step ended and were not sent",
            c.dropped
        ));
    }
}

/// How the server fared in a step, whatever the generator's trust.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum Server {
    /// Served what was due, without queueing.
    Ok,
    /// Served (almost) everything, but only by making requests queue: latency grew by waiting.
    Saturated,
    /// More than [`FAILING_PCT`] of the requests due failed.
    Failing,
}

impl Server {
    pub fn name(self) -> &'static str {
        match self {
            Server::Ok => "ok",
            Server::Saturated => "saturated",
            Server::Failing => "failing",
        }
    }
}

/// The facts the server's judgement rests on.
#[derive(Debug, Clone)]
pub struct ServerFacts<'a> {
    pub counters: Counters,
    pub codes: &'a StatusCodes,
    pub ok_status: &'a StatusSet,
    pub p50_ms: f64,
    /// The step's fastest tenth: what a reply takes when it does not queue.
    pub p10_ms: f64,
    /// The lowest median of the run's earlier steps whose server was ok: queueing shows against it.
    pub baseline_p50_ms: Option<f64>,
    /// Served (ok) replies per second over the step's own length, and what was due per second of
    /// the step: a server that falls behind shows here even when no earlier step gives a baseline.
    pub served_per_s: f64,
    pub due_per_s: f64,
    /// Replies that came in the drain after an open schedule (none where not told apart).
    pub backlog: Option<u64>,
    /// The step's length, in seconds.
    pub step_s: f64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ServerJudgement {
    pub state: Server,
    pub reasons: Vec<String>,
}

/// `part` as a percent of `whole` (0 of nothing).
pub fn pct(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 * 100.0 / whole as f64
    }
}

/// Replies with an unexpected status, most frequent first.
pub fn unexpected_codes(codes: &StatusCodes, ok: &StatusSet) -> Vec<(u16, u64)> {
    let mut v: Vec<(u16, u64)> = codes.nonzero().filter(|(c, _)| !ok.contains(*c)).collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    v
}

/// What the failed requests were, largest part first: "3000 replies 503, 120 client-timeout".
fn failure_parts(f: &ServerFacts<'_>) -> Vec<String> {
    let c = &f.counters;
    let mut parts: Vec<(u64, String)> = Vec::new();
    let mut named = 0;
    for (code, n) in unexpected_codes(f.codes, f.ok_status) {
        named += n;
        parts.push((n, format!("{n} replies {code}")));
    }
    for e in ErrorClass::ALL
        .iter()
        .filter(|e| !e.is_generator_resource())
    {
        let n = c.error(*e);
        if n > 0 {
            named += n;
            parts.push((n, format!("{n} {}", e.name())));
        }
    }
    let rest = c.failed().saturating_sub(named);
    if rest > 0 {
        parts.push((rest, format!("{rest} never sent")));
    }
    parts.sort_by_key(|p| std::cmp::Reverse(p.0));
    parts.into_iter().map(|(_, s)| s).collect()
}

pub fn judge_server(f: &ServerFacts<'_>) -> ServerJudgement {
    let c = &f.counters;
    let failed_pct = pct(c.failed(), c.due());
    if failed_pct > FAILING_PCT {
        return ServerJudgement {
            state: Server::Failing,
            reasons: vec![format!(
                "{failed_pct:.1}% of the requests due failed: {}",
                failure_parts(f).join(", ")
            )],
        };
    }
    if f.step_s < MIN_JUDGED_S || c.due() < MIN_JUDGED_DUE {
        return ServerJudgement {
            state: Server::Ok,
            reasons: vec![format!(
                "too short to judge queueing: {} ms and {} requests due (it takes {MIN_JUDGED_S} s and {MIN_JUDGED_DUE})",
                (f.step_s * 1000.0).round(),
                c.due()
            )],
        };
    }
    let mut reasons = Vec::new();
    let waited_pct = pct(c.waited, c.due());
    if waited_pct > QUEUED_PCT {
        reasons.push(format!(
            "{waited_pct:.1}% of arrivals found every connection busy and queued: the server held them all"
        ));
    }
    if let Some(best) = f
        .baseline_p50_ms
        .filter(|b| *b > 0.0 && f.p50_ms >= b * QUEUEING_FACTOR && f.p50_ms >= b + QUEUEING_MIN_MS)
    {
        reasons.push(format!(
            "median latency {:.1} ms is {:.0}x the run's best {:.2} ms: requests queued",
            f.p50_ms,
            f.p50_ms / best,
            best
        ));
    }
    if f.due_per_s > 0.0 && f.served_per_s < QUEUEING_PACE * f.due_per_s {
        reasons.push(format!(
            "served {:.0}/s of the {:.0}/s due: requests queued",
            f.served_per_s, f.due_per_s
        ));
    }
    // The backlog at the step's end against what was in flight by Little's law at the step's
    // fast latency (twice over): a queue grows past it, a straggler (one SYN retransmit's second)
    // is one reply and never does.
    if let Some(backlog) = f.backlog {
        let in_flight = f.due_per_s * f.p10_ms / 1000.0 * 2.0;
        let floor = in_flight.max(BACKLOG_S * f.due_per_s);
        if backlog >= BACKLOG_MIN && backlog as f64 > floor {
            reasons.push(format!(
                "{backlog} replies were still owed when the schedule ended ({:.2} s of the {:.0}/s due): requests queued",
                backlog as f64 / f.due_per_s.max(1e-9),
                f.due_per_s
            ));
        }
    }
    ServerJudgement {
        state: if reasons.is_empty() {
            Server::Ok
        } else {
            Server::Saturated
        },
        reasons,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn healthy() -> Facts {
        let counters = Counters {
            requests: 1000,
            replies: 1000,
            ..Counters::default()
        };
        Facts {
            demanded_rate: Some(100.0),
            achieved_rate: 100.0,
            cpu_pct: 10.0,
            lag_p99_ms: 0.5,
            counters,
            ..Facts::default()
        }
    }

    #[test]
    fn healthy_step_is_valid() {
        let j = judge(&healthy());
        assert_eq!(j.verdict, Verdict::Valid);
        assert!(j.reasons.is_empty());
    }

    #[test]
    fn closed_loop_short_of_its_connections_is_degraded() {
        let mut f = healthy();
        f.demanded_rate = None;
        f.concurrency = Some(30_000);
        f.counters.connections = 27_661;
        let j = judge(&f);
        assert_eq!(j.verdict, Verdict::Degraded);
        assert_eq!(
            j.reasons,
            vec![
                "only 27661 of 30000 connections were established: the step ran at less than its concurrency"
            ]
        );
        // Reconnections count too: at or above the demand nothing is said.
        f.counters.connections = 30_000;
        assert_eq!(judge(&f).verdict, Verdict::Valid);
    }

    #[test]
    fn port_exhaustion_is_invalid_and_named() {
        let mut f = healthy();
        f.counters.errors[ErrorClass::AddrUnavailable.index()] = 412;
        let j = judge(&f);
        assert_eq!(j.verdict, Verdict::Invalid);
        assert_eq!(
            j.reasons,
            vec![
                "412 addr-unavailable errors: generator out of local ports, or a --source-addrs address it does not have"
            ]
        );
        assert!(j.generator_bound);
    }

    #[test]
    fn saturated_generator_falling_behind_is_invalid() {
        let mut f = healthy();
        f.cpu_pct = 97.0;
        f.achieved_rate = 91.0;
        f.counters.unsent = 99;
        let j = judge(&f);
        assert_eq!(j.verdict, Verdict::Invalid);
        assert!(
            j.reasons[0].starts_with("generator CPU 97%"),
            "{:?}",
            j.reasons
        );
        assert!(
            j.reasons[1].starts_with("sent 91% of the requests due"),
            "{:?}",
            j.reasons
        );
    }

    #[test]
    fn slow_target_is_not_blamed_on_the_generator() {
        let mut f = healthy();
        f.achieved_rate = 60.0;
        f.counters.waited = 50;
        f.counters.unsent = 667;
        let j = judge(&f);
        assert_eq!(j.verdict, Verdict::Valid);
        assert!(
            j.notes[0].contains("the target did not keep up"),
            "{:?}",
            j.notes
        );
    }

    #[test]
    fn unreachable_target_is_invalid_with_the_error_named() {
        let mut f = healthy();
        f.counters = Counters::default();
        f.counters.errors[ErrorClass::ConnRefused.index()] = 30;
        f.counters.unsent = 30;
        f.achieved_rate = 0.0;
        let j = judge(&f);
        assert_eq!(j.verdict, Verdict::Invalid);
        // No reply at all is the target's state, not the generator's limit.
        assert!(!j.generator_bound);
        assert!(
            j.reasons[0].starts_with("no replies: 30 conn-refused"),
            "{:?}",
            j.reasons
        );
        // With the first error's words, the reason says them rather than guess.
        f.messages.keep(ErrorClass::ConnRefused, || {
            "connection refused by 127.0.0.1:1: is the target up?".into()
        });
        assert_eq!(
            judge(&f).reasons[0],
            "no replies: 30 conn-refused errors, the first: connection refused by 127.0.0.1:1: is the target up?"
        );
    }

    #[test]
    fn failed_handshakes_with_nothing_sent_are_invalid() {
        // Regression: TLS failures are `other` errors before any request; with no request sent the
        // step once counted zero attempts and was judged valid.
        let mut f = healthy();
        f.counters = Counters::default();
        f.counters.errors[ErrorClass::Other.index()] = 50;
        f.counters.unsent = 50;
        let j = judge(&f);
        assert_eq!(j.verdict, Verdict::Invalid);
        assert!(
            j.reasons[0].starts_with("no replies: 50 other errors"),
            "{:?}",
            j.reasons
        );
    }

    #[test]
    fn a_lost_agent_degrades_without_blaming_the_schedule() {
        let mut f = healthy();
        f.lost_agents = vec!["10.0.0.2:7700".into()];
        f.achieved_rate = 67.0;
        f.lag_p99_ms = 8.0;
        let j = judge(&f);
        assert_eq!(j.verdict, Verdict::Degraded);
        assert_eq!(j.reasons[0], "agent 10.0.0.2:7700 was lost during the step");
        assert!(
            j.notes[0].contains("the lost agent's share was not sent"),
            "{:?}",
            j.notes
        );
    }

    #[test]
    fn poisson_schedule_that_held_fewer_arrivals_is_not_blamed_on_the_target() {
        // 10 req/s for 2 s, Poisson: the schedule held 16 arrivals, all sent and answered.
        let mut f = healthy();
        f.demanded_rate = Some(10.0);
        f.achieved_rate = 8.0;
        f.counters.requests = 16;
        f.counters.replies = 16;
        let j = judge(&f);
        assert_eq!(j.verdict, Verdict::Valid);
        assert!(j.notes.is_empty(), "{:?}", j.notes);
    }

    fn server(c: Counters, codes: &StatusCodes, p50: f64, best: Option<f64>) -> ServerJudgement {
        judge_server(&ServerFacts {
            counters: c,
            codes,
            ok_status: &StatusSet::default(),
            p50_ms: p50,
            p10_ms: p50,
            baseline_p50_ms: best,
            served_per_s: 0.0,
            due_per_s: 0.0,
            backlog: None,
            step_s: 10.0,
        })
    }

    #[test]
    fn a_2ms_step_was_judged_saturated() {
        // 1 request due in 2 ms, its reply 1 ms later: "served 333/s of the 500/s due".
        let c = Counters {
            requests: 1,
            replies: 1,
            ok: 1,
            ..Counters::default()
        };
        let codes = StatusCodes::default();
        let judged = |step_s: f64, c: Counters| {
            judge_server(&ServerFacts {
                counters: c,
                codes: &codes,
                ok_status: &StatusSet::default(),
                p50_ms: 1.0,
                p10_ms: 1.0,
                baseline_p50_ms: Some(0.1),
                served_per_s: 333.0,
                due_per_s: 500.0,
                backlog: None,
                step_s,
            })
        };
        let short = judged(0.002, c);
        assert_eq!(short.state, Server::Ok);
        assert_eq!(
            short.reasons,
            ["too short to judge queueing: 2 ms and 1 requests due (it takes 1 s and 20)"]
        );
        // Long enough but with too few requests due: still not judged.
        assert_eq!(judged(5.0, c).state, Server::Ok);
        let many = Counters {
            requests: 1000,
            replies: 1000,
            ok: 1000,
            ..Counters::default()
        };
        assert_eq!(judged(2.0, many).state, Server::Saturated);
        // Failures are failures however short the step.
        let failed = Counters {
            requests: 1,
            replies: 0,
            ..Counters::default()
        };
        assert_eq!(judged(0.002, failed).state, Server::Failing);
    }

    #[test]
    fn a_server_that_fell_behind_its_pace_is_saturated_without_a_baseline() {
        let c = Counters {
            requests: 1000,
            replies: 1000,
            ok: 1000,
            ..Counters::default()
        };
        let codes = StatusCodes::default();
        let judged = |served: f64| {
            judge_server(&ServerFacts {
                counters: c,
                codes: &codes,
                ok_status: &StatusSet::default(),
                p50_ms: 300.0,
                p10_ms: 30.0,
                baseline_p50_ms: None,
                served_per_s: served,
                due_per_s: 500.0,
                backlog: None,
                step_s: 2.0,
            })
        };
        let behind = judged(300.0);
        assert_eq!(behind.state, Server::Saturated);
        assert_eq!(
            behind.reasons,
            ["served 300/s of the 500/s due: requests queued"]
        );
        assert_eq!(judged(470.0).state, Server::Ok);
    }

    #[test]
    fn a_backlog_at_the_step_s_end_is_queueing_and_one_straggler_is_not() {
        // python's http.server at 1,500 req/s for 3 s: every request served, p10 1.4 ms, one
        // reply 1,032 ms late (a SYN retransmit). It read "saturated: served 1284/s of 1500/s".
        let c = Counters {
            requests: 4500,
            replies: 4500,
            ok: 4500,
            drained: 3,
            ..Counters::default()
        };
        let codes = StatusCodes::default();
        let judged = |backlog: u64, p10_ms: f64| {
            judge_server(&ServerFacts {
                counters: c,
                codes: &codes,
                ok_status: &StatusSet::default(),
                p50_ms: 1.5,
                p10_ms,
                baseline_p50_ms: Some(1.4),
                served_per_s: 1499.0,
                due_per_s: 1500.0,
                backlog: Some(backlog),
                step_s: 3.0,
            })
        };
        assert_eq!(judged(3, 1.4).state, Server::Ok);
        // A queue: 600 owed at the end (0.4 s of the offer) where 4 were in flight.
        let queued = judged(600, 1.4);
        assert_eq!(queued.state, Server::Saturated);
        assert_eq!(
            queued.reasons,
            [
                "600 replies were still owed when the schedule ended (0.40 s of the 1500/s due): requests queued"
            ]
        );
        // A slow endpoint (every reply 1 s, no queue): 1,500 in flight is Little's law, not a queue.
        assert_eq!(judged(1500, 1000.0).state, Server::Ok);
    }

    #[test]
    fn server_is_failing_past_one_percent_and_saturated_when_requests_queue() {
        let served = Counters {
            requests: 1000,
            replies: 1000,
            ok: 1000,
            ..Counters::default()
        };
        let none = StatusCodes::default();
        assert_eq!(server(served, &none, 2.0, Some(1.9)).state, Server::Ok);
        // 1 % failing is still ok; more is failing, with what failed in words.
        let mut c = served;
        c.ok = 990;
        let mut codes = StatusCodes::default();
        codes.add_count(500, 10);
        assert_eq!(server(c, &codes, 2.0, None).state, Server::Ok);
        c.ok = 900;
        c.unsent = 20;
        c.errors[ErrorClass::ClientTimeout.index()] = 20;
        codes.add_count(500, 90);
        let j = server(c, &codes, 2.0, None);
        assert_eq!(j.state, Server::Failing);
        assert_eq!(
            j.reasons,
            ["11.8% of the requests due failed: 100 replies 500, 20 client-timeout"]
        );
        // Everything served, but the median is 10x the run's best: queueing.
        let j = server(served, &none, 20.0, Some(2.0));
        assert_eq!(j.state, Server::Saturated);
        assert!(
            j.reasons[0].starts_with("median latency 20.0 ms is 10x"),
            "{j:?}"
        );
        // Arrivals that found every connection busy.
        let mut c = served;
        c.waited = 50;
        assert_eq!(server(c, &none, 2.0, None).state, Server::Saturated);
    }

    #[test]
    fn arrivals_dropped_for_a_full_pool_are_not_blamed_on_a_lagging_generator() {
        let mut f = healthy();
        f.lag_p99_ms = 9.9;
        f.counters.unsent = 300;
        f.counters.dropped = 300;
        let j = judge(&f);
        assert_eq!(j.verdict, Verdict::Degraded, "{:?}", j.reasons);
        assert!(
            j.notes
                .iter()
                .any(|n| n.contains("the target did not keep up"))
        );
    }

    #[test]
    fn calls_abandoned_with_the_connections_the_target_failed_are_not_blamed_on_a_lagging_generator()
     {
        // aiohttp at 2,100 conn/s x 10 calls: 3,381 connects timed out (SYNs it dropped), their
        // 30,429 later calls never sent; the generator 5.5 ms late at p99 meanwhile.
        let mut f = healthy();
        f.lag_p99_ms = 5.5;
        f.late = 507;
        f.counters.requests = 40_386;
        f.counters.replies = 28_900;
        f.counters.errors[ErrorClass::ConnectTimeout.index()] = 3_381;
        f.counters.unsent = 33_810;
        f.counters.abandoned = 30_429;
        let j = judge(&f);
        assert_eq!(j.verdict, Verdict::Degraded, "{:?}", j.reasons);
        assert!(!j.generator_bound);
        assert!(
            j.notes.contains(
                &"sent 54% of the requests due: the target did not keep up (the rest were due on connections the target failed)"
                    .to_string()
            ),
            "{:?}",
            j.notes
        );
        // Without the count of what went down with them, the first calls alone cannot explain it.
        f.counters.abandoned = 0;
        let j = judge(&f);
        assert_eq!(j.verdict, Verdict::Invalid, "{:?}", j.reasons);
        assert!(j.generator_bound);
    }

    #[test]
    fn high_lag_degrades() {
        let mut f = healthy();
        f.lag_p99_ms = 12.0;
        f.late = 40;
        let j = judge(&f);
        assert_eq!(j.verdict, Verdict::Degraded);
        assert!(j.reasons[0].starts_with("lag p99 12.0 ms"));
    }
}
