//! A merged step as the coordinator hands it over (`StepInput`) and its one summary into a
//! `StepResult` (`summarize`): every percentile and rate a step reports is computed here.
use std::time::Duration;

use super::{
    AgentStep, Codes, Counts, Drain, Generator, Http2Step, LatencyStats, RateStats, StepResult,
    round3, sessions, tls,
};
use crate::verdict::{self, Facts, ServerFacts};
use shared::histogram::us_to_ms;
use shared::metrics::{Counters, ErrorClass, FirstErrors, STATUS_CLASSES, Snapshot};
use shared::plan::LoadModel;
use shared::status::StatusSet;

/// One full interval of the merged fleet, for the reply-rate series.
#[derive(Debug, Clone, Copy)]
pub struct IntervalSample {
    pub length: Duration,
    pub replies: u64,
}

/// One agent's totals for a step.
#[derive(Debug, Clone)]
pub struct AgentInput {
    pub name: String,
    pub threads: u32,
    /// Its machine's cores: more worker threads than cores share them, and each then gets less than
    /// a core, so the CPU share is taken of the smaller of the two.
    pub cores: u32,
    /// How long its workers ran (schedule plus drain): the CPU share's denominator.
    pub wall: Duration,
    /// Its counters and worker CPU time, summed over its intervals.
    pub counters: Counters,
    pub cpu_ns: u64,
    /// [`LatencyStats::of`] its own merged latency histogram. Given as statistics rather than the
    /// histogram so that a merge over many agents needs only one of their histograms at a time.
    pub latency_ms: LatencyStats,
    pub start_delay: Option<Duration>,
    pub lost: bool,
    pub clock_offset_ns: i64,
    pub rtt: Duration,
}

/// Everything a step produced, merged but not yet summarized.
#[derive(Debug, Clone)]
pub struct StepInput<'a> {
    /// Counted from 1, as [`StepResult::number`].
    pub number: u32,
    pub model: LoadModel,
    pub value: f64,
    pub demanded_rate: Option<f64>,
    pub duration: Duration,
    pub total: &'a Snapshot,
    pub series: &'a [IntervalSample],
    pub agents: Vec<AgentInput>,
    pub aborted: bool,
    /// Whether a lost agent degrades the step (false under `--on-agent-loss continue`).
    pub mark_lost: bool,
    /// Latest minus earliest first send over the agents, on the coordinator's clock.
    pub start_skew: Option<Duration>,
    /// The statuses that count as served.
    pub ok_status: &'a StatusSet,
    /// The lowest median latency of the run's earlier steps whose server was ok (see
    /// [`verdict::judge_server`]).
    pub baseline_p50_ms: Option<f64>,
}

fn cpu_pct(cpu_ns: u64, wall: Duration, threads: u32) -> f64 {
    let capacity = wall.as_nanos() as f64 * f64::from(threads.max(1));
    if capacity == 0.0 {
        0.0
    } else {
        round3(cpu_ns as f64 / capacity * 100.0)
    }
}

fn share_pct(part: u64, whole: u64) -> f64 {
    round3(verdict::pct(part, whole))
}

/// One note per error class that has a message: how many, and the first in words ("10 other
/// errors, the first: TLS: certificate signed by unknown issuer: use --insecure ...").
fn error_notes(c: &Counters, messages: &FirstErrors) -> Vec<String> {
    messages
        .iter()
        .filter(|(class, _)| c.error(*class) > 0)
        .map(|(class, words)| match c.error(class) {
            1 => format!("1 {} error: {words}", class.name()),
            n => format!("{n} {} errors, the first: {words}", class.name()),
        })
        .collect()
}

/// The reply rate of each full interval of the merged fleet, per second.
fn reply_rate_series(series: &[IntervalSample]) -> Vec<f64> {
    series
        .iter()
        .map(|s| round3(s.replies as f64 / s.length.as_secs_f64().max(1e-9)))
        .collect()
}

/// Each agent's part of the step, as it is kept in the result.
fn agent_steps(input: &StepInput<'_>) -> Vec<AgentStep> {
    input
        .agents
        .iter()
        .map(|a| AgentStep {
            agent: a.name.clone(),
            threads: a.threads,
            requests: a.counters.requests,
            replies: a.counters.replies,
            ok: a.counters.ok,
            errors: a.counters.target_errors(),
            failed_pct: share_pct(a.counters.failed(), a.counters.due()),
            // Over the step at least: an agent whose share had no arrivals ends at once, and its
            // few microseconds of CPU over a near-zero wall read as a saturated generator.
            cpu_pct: cpu_pct(a.cpu_ns, a.wall.max(input.duration), a.threads.min(a.cores)),
            latency_ms: LatencyStats {
                censored: a.counters.given_up > 0,
                ..a.latency_ms
            },
            start_delay_ms: a.start_delay.map(|d| round3(d.as_secs_f64() * 1000.0)),
            clock_offset_ms: round3(a.clock_offset_ns as f64 / 1e6),
            rtt_ms: round3(a.rtt.as_secs_f64() * 1000.0),
            lost: a.lost,
        })
        .collect()
}

/// How the generator itself did: its busiest agent's CPU (`busiest`), its lag and its waits.
fn generator_stats(input: &StepInput<'_>, busiest: f64) -> Generator {
    let t = input.total;
    let lag = &t.hist.lag;
    Generator {
        cpu_pct: busiest,
        lag_p99_ms: if lag.is_empty() {
            0.0
        } else {
            us_to_ms(lag.value_at_quantile(0.99))
        },
        lag_max_ms: us_to_ms(lag.max()),
        late_1ms: lag.count_between(1001, shared::histogram::HIGHEST_US),
        waited: t.counters.waited,
        wait_p99_ms: if t.hist.wait.is_empty() {
            0.0
        } else {
            us_to_ms(t.hist.wait.value_at_quantile(0.99))
        },
        threads: input.agents.iter().map(|a| a.threads).sum(),
    }
}

/// Whether the step's numbers can be trusted: the facts [`verdict::judge`] rests on, gathered.
fn judge_trust(input: &StepInput<'_>, generator: &Generator, achieved: f64) -> verdict::Judgement {
    let t = input.total;
    let lost_agents = input
        .agents
        .iter()
        .filter(|a| a.lost && input.mark_lost)
        .map(|a| a.name.clone())
        .collect();
    verdict::judge(&Facts {
        demanded_rate: input.demanded_rate,
        achieved_rate: achieved,
        cpu_pct: generator.cpu_pct,
        lag_p99_ms: generator.lag_p99_ms,
        late: generator.late_1ms,
        counters: t.counters,
        aborted: input.aborted,
        lost_agents,
        concurrency: (input.model == LoadModel::Concurrency).then_some(input.value as u64),
        messages: t.messages.clone(),
    })
}

/// A drain this long is said in the step's notes (a healthy server's lasts its latency).
const DRAIN_NOTED_S: f64 = 0.1;

/// Whether the agents told the drain's replies apart: an open schedule of one request an arrival
/// (a `connections` step of several calls sends its later calls in the drain).
fn drain_counted(input: &StepInput<'_>) -> bool {
    match input.model {
        LoadModel::Requests => true,
        LoadModel::Connections => input.demanded_rate == Some(input.value),
        LoadModel::Concurrency => false,
    }
}

/// How long the agents ran past the step's length: the drain.
fn ran_past(input: &StepInput<'_>) -> Duration {
    input
        .agents
        .iter()
        .map(|a| a.wall)
        .max()
        .unwrap_or(input.duration)
        .saturating_sub(input.duration)
}

/// Served (ok) replies per second over the step's own length ([`StepResult::ok_rate`]).
fn served_rate(input: &StepInput<'_>) -> f64 {
    let c = &input.total.counters;
    let latency = &input.total.hist.latency;
    let fastest = Duration::from_micros(if latency.is_empty() { 0 } else { latency.min() });
    let (served, window) = if input.aborted || input.model == LoadModel::Concurrency {
        // A closed loop holds at most its connections in flight: what they answer after the end
        // is that last round, sent in the step. Over the step's own length, served is what was
        // sent (nginx -c 50 read "sent 63,690/s, served 63,650/s, failed 0 %": its 6 ms drain in
        // the divisor).
        (c.ok, input.duration)
    } else if drain_counted(input) {
        // The drain's replies are the backlog's, said apart; the window is the step less the
        // time before any reply could come (a 1 s endpoint answers nothing in its first second).
        // Nothing in the drain: every reply came before the end, so none waited a latency of
        // note (and the window is the step's).
        let drained_ok = c.drained.min(c.ok);
        let late_start = if drained_ok > 0 {
            fastest
        } else {
            Duration::ZERO
        };
        let window = input.duration.saturating_sub(late_start);
        (c.ok - drained_ok, window.max(input.duration / 2))
    } else {
        // Not told apart: the drain is in the window, at the server's own pace.
        let window = (input.duration + ran_past(input)).saturating_sub(fastest);
        (c.ok, window.max(input.duration))
    };
    served as f64 / window.as_secs_f64().max(1e-9)
}

/// Summarises a merged step; percentiles and rates are computed here and only here.
pub fn summarize(input: &StepInput<'_>) -> StepResult {
    let t = input.total;
    let c = &t.counters;
    let secs = input.duration.as_secs_f64().max(1e-9);
    let series = reply_rate_series(input.series);
    let agents = agent_steps(input);
    let busiest = agents.iter().map(|a| a.cpu_pct).fold(0.0, f64::max);
    let achieved = round3(c.requests as f64 / secs);
    let generator = generator_stats(input, busiest);
    let judgement = judge_trust(input, &generator, achieved);
    let latency = LatencyStats::with_censored(&t.hist.latency, &t.hist.censored);
    let unexpected_latency = LatencyStats::of(&t.hist.unexpected);
    let mut notes = judgement.notes;
    notes.extend(error_notes(c, &t.messages));
    notes.extend(failure_notes(input, &latency));
    let http2 = Http2Step::of(c);
    if let Some(h2) = &http2 {
        notes.extend(h2.notes(generator.waited, generator.wait_p99_ms));
    }
    let tls = tls::TlsStep::of(c);
    notes.extend(tls.map(|t| t.note()));
    let setup = super::setup::SetupStep::of(c);
    notes.extend(setup.and_then(|s| s.note()));
    let sessions = sessions::SessionsStep::of(c, &t.hist.session);
    notes.extend(sessions.map(|s| s.note()));
    let ok_rate = served_rate(input);
    let drain = (drain_counted(input) && !input.aborted).then(|| Drain {
        seconds: round3(ran_past(input).as_secs_f64()),
        replies: c.drained,
    });
    if let Some(d) = drain.filter(|d| d.replies > 0 && d.seconds >= DRAIN_NOTED_S) {
        notes.push(format!(
            "{} replies came in the {:.2} s after the schedule ended (the drain): served, and left out of served/s, which is over the step's own length",
            d.replies,
            d.seconds
        ));
    }
    let server = verdict::judge_server(&ServerFacts {
        counters: *c,
        codes: &t.codes,
        ok_status: input.ok_status,
        p50_ms: latency.p50,
        p10_ms: if t.hist.latency.is_empty() {
            0.0
        } else {
            us_to_ms(t.hist.latency.value_at_quantile(0.10))
        },
        baseline_p50_ms: input.baseline_p50_ms,
        served_per_s: ok_rate,
        due_per_s: c.due() as f64 / secs,
        backlog: drain.map(|d| d.replies),
        step_s: secs,
    });
    StepResult {
        number: input.number,
        model: input.model.name().to_string(),
        step_value: input.value,
        demanded_rate: input.demanded_rate,
        duration_s: round3(secs),
        requests: c.requests,
        replies: c.replies,
        ok: c.ok,
        connections: c.connections,
        unsent: c.unsent,
        due: c.due(),
        failed: c.failed(),
        failed_pct: share_pct(c.failed(), c.due()),
        ok_rate: round3(ok_rate),
        drain,
        given_up: c.given_up,
        achieved_request_rate: achieved,
        connection_rate: round3(c.connections as f64 / secs),
        reply_rate: RateStats::of(&series, c.replies, input.duration),
        bytes_in: c.bytes_in,
        bytes_out: c.bytes_out,
        net_io_kb_s: round3((c.bytes_in + c.bytes_out) as f64 / 1024.0 / secs),
        status: Counts(
            STATUS_CLASSES
                .iter()
                .map(|c| c.to_string())
                .zip(c.status)
                .collect(),
        ),
        status_codes: Codes(t.codes.nonzero().collect()),
        errors: Counts(
            ErrorClass::ALL
                .iter()
                .map(|e| (e.name().to_string(), c.error(*e)))
                .collect(),
        ),
        errors_pct: share_pct(c.target_errors(), c.due()),
        error_messages: t.messages.clone(),
        latency_ms: latency,
        unexpected_latency_ms: unexpected_latency,
        connect_ms: LatencyStats::of(&t.hist.connect),
        ttfb_ms: LatencyStats::of(&t.hist.ttfb),
        reply_rate_series: series,
        generator,
        trust: judgement.verdict,
        generator_bound: judgement.generator_bound,
        reasons: judgement.reasons,
        server: server.state,
        server_reasons: server.reasons,
        notes,
        aborted: input.aborted,
        start_skew_ms: input.start_skew.map(|d| round3(d.as_secs_f64() * 1000.0)),
        lost_load: Vec::new(),
        agents,
        server_monitors: Vec::new(),
        ok_per_core_s: None,
        probe: None,
        http2,
        tls,
        per_request: Vec::new(),
        sessions,
        setup,
    }
}

/// Notes that say what the failure share and the censored percentiles are made of, in words.
fn failure_notes(input: &StepInput<'_>, latency: &LatencyStats) -> Vec<String> {
    let t = input.total;
    let c = &t.counters;
    let mut notes = Vec::new();
    let unexpected = verdict::unexpected_codes(&t.codes, input.ok_status);
    if c.replies > 0 && !unexpected.is_empty() {
        let parts: Vec<String> = unexpected
            .iter()
            .take(4)
            .map(|(code, n)| format!("{:.0}% were {code}", *n as f64 * 100.0 / c.replies as f64))
            .collect();
        let others = unexpected.len().saturating_sub(4);
        notes.push(format!(
            "{} of {} replies had a status outside --ok-status {}: {}{}; they are failures, not served, and their latency is reported apart (unexpected_latency_ms)",
            c.unexpected(),
            c.replies,
            input.ok_status,
            parts.join(", "),
            if others > 0 {
                format!(" and {others} other codes")
            } else {
                String::new()
            }
        ));
    }
    if latency.censored {
        let bounds: Vec<&str> = latency
            .lower_bounds
            .names()
            .into_iter()
            .filter(|n| *n != "mean")
            .collect();
        notes.push(format!(
            "{} requests were given up (no reply within the timeout, or never sent) and count in the latency at their age then; {}",
            c.given_up,
            if bounds.is_empty() {
                "the percentiles are exact, the mean a lower bound".to_string()
            } else {
                format!("{} are lower bounds", bounds.join(", "))
            }
        ));
    }
    notes
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::step::kept_up;
    use crate::step::tests::{agent_input, one_agent, snapshot};
    use crate::table::StepTable;
    use crate::verdict::{Server, Verdict};

    #[test]
    fn a_step_whose_every_request_was_served_with_one_straggler_kept_up() {
        // python3 -m http.server at 1,500 req/s for 3 s: 4,500 due, 4,500 served, p99 5.5 ms, one
        // reply at 1,032 ms (a SYN retransmit). Divided by the step plus its drain, it read
        // "served 1284/s of the 1500/s due: requests queued", saturated, and not kept up.
        let mut lat = vec![1_400; 4_450];
        lat.extend([5_500; 49]);
        lat.push(1_032_000);
        let mut t = snapshot(4_500, &lat);
        t.counters.drained = 3;
        let duration = Duration::from_secs(3);
        let r = summarize(&StepInput {
            number: 3,
            model: LoadModel::Requests,
            value: 1_500.0,
            demanded_rate: Some(1_500.0),
            duration,
            total: &t,
            series: &[],
            agents: vec![agent_input(&t, 1, 2, Duration::from_millis(4_032))],
            aborted: false,
            mark_lost: true,
            start_skew: None,
            ok_status: &StatusSet::default(),
            baseline_p50_ms: Some(1.4),
        });
        assert!((1_498.0..=1_500.0).contains(&r.ok_rate), "{}", r.ok_rate);
        assert_eq!(r.server, Server::Ok, "{:?}", r.server_reasons);
        assert_eq!(
            r.drain,
            Some(Drain {
                seconds: 1.032,
                replies: 3
            })
        );
        assert!(kept_up(&r));
        assert!(
            r.notes.contains(&"3 replies came in the 1.03 s after the schedule ended (the drain): served, and left out of served/s, which is over the step's own length".to_string()),
            "{:?}",
            r.notes
        );
    }

    #[test]
    fn a_closed_loop_served_what_it_sent_over_the_step_s_own_length() {
        // nginx -c 50 for 10 s: every request served, the last round 6 ms after the end.
        let t = snapshot(636_900, &[700; 100]);
        let duration = Duration::from_secs(10);
        let r = summarize(&StepInput {
            number: 1,
            model: LoadModel::Concurrency,
            value: 50.0,
            demanded_rate: None,
            duration,
            total: &t,
            series: &[],
            agents: vec![agent_input(&t, 1, 2, Duration::from_millis(10_006))],
            aborted: false,
            mark_lost: true,
            start_skew: None,
            ok_status: &StatusSet::default(),
            baseline_p50_ms: None,
        });
        assert_eq!((r.achieved_request_rate, r.ok_rate), (63_690.0, 63_690.0));
        assert_eq!(r.drain, None);
    }

    #[test]
    fn http_failures_read_as_failures_not_success() {
        // A rate-limited server: a third of its replies are 503, fast.
        let mut t = snapshot(200, &[1_000; 200]);
        t.counters.requests = 300;
        t.counters.replies = 300;
        t.counters.status[4] = 100;
        t.codes.add_count(503, 100);
        for _ in 0..100 {
            t.hist.unexpected.record(200).unwrap();
        }
        one_agent(&t, 3.0, 100.0, |r| {
            assert_eq!(r.ok, 200);
            assert_eq!(r.ok_rate, 66.667);
            assert_eq!(r.failed, 100);
            assert_eq!(r.failed_pct, 33.333);
            // autobench's errors: transport errors only.
            assert_eq!(r.errors_pct, 0.0);
            assert_eq!(r.server, Server::Failing);
            assert!(
                r.server_reasons[0]
                    .starts_with("33.3% of the requests due failed: 100 replies 503"),
                "{:?}",
                r.server_reasons
            );
            assert!(
                r.notes.iter().any(|n| n.contains("33% were 503")),
                "{:?}",
                r.notes
            );
            // The fast 503s are not mixed into the served latency.
            assert_eq!(r.latency_ms.p50, 1.0);
            assert_eq!(r.unexpected_latency_ms.p50, 0.2);
            let table = StepTable::new("h", LoadModel::Requests);
            let (row, head) = (table.row(r), table.header());
            let col = |name: &str| &row[head.iter().position(|h| h == name).unwrap()];
            assert_eq!(col("failed_pct"), "33.333");
            assert_eq!(col("ok_rate"), "66.667");
            assert_eq!(col("errors_h"), "0");
            assert_eq!(col("server"), "failing");
        });
    }

    #[test]
    fn requests_never_completed_count_in_the_latency_as_lower_bounds() {
        // 86 replies at 5 ms; 14 timed out after 1 s: the p50 is exact, p90 and up are not.
        let mut t = snapshot(86, &[5_000; 86]);
        t.counters.requests = 100;
        t.counters.given_up = 14;
        t.counters.record_error(ErrorClass::ClientTimeout);
        t.counters.errors[ErrorClass::ClientTimeout.index()] = 14;
        for _ in 0..14 {
            t.hist.latency.record(1_000_000).unwrap();
            t.hist.censored.record(1_000_000).unwrap();
        }
        one_agent(&t, 1.0, 100.0, |r| {
            let l = &r.latency_ms;
            assert!(l.censored);
            assert!((l.p50 - 5.0).abs() < 0.01, "{l:?}");
            assert!(l.p99 >= 1000.0, "{l:?}");
            assert_eq!(
                l.lower_bounds.names(),
                ["mean", "p90", "p99", "p999", "max"]
            );
            assert_eq!(r.failed, 14);
            let json = serde_json::to_value(r).unwrap();
            assert_eq!(json["latency_ms"]["censored"], true);
            assert_eq!(
                json["latency_ms"]["lower_bound"],
                serde_json::json!(["mean", "p90", "p99", "p999", "max"])
            );
            let table = StepTable::new("h", LoadModel::Requests);
            let (row, head) = (table.row(r), table.header());
            let at = head.iter().position(|h| h == "lower_bound").unwrap();
            assert_eq!(row[at], "mean p90 p99 p999 max");
        });
        // A given-up request younger than every reply leaves the percentiles below the top exact:
        // enough real latencies lie at or under them, whatever its true value.
        let mut t = snapshot(99, &[50_000; 99]);
        t.counters.given_up = 1;
        t.hist.latency.record(1_000).unwrap();
        t.hist.censored.record(1_000).unwrap();
        one_agent(&t, 1.0, 100.0, |r| {
            assert_eq!(r.latency_ms.lower_bounds.names(), ["mean", "p999", "max"]);
        });
    }

    #[test]
    fn short_step_reports_its_reply_rate_not_zero() {
        // 100 replies in 0.5 s: no full 1 s sample.
        let t = snapshot(100, &[1_000; 100]);
        one_agent(&t, 0.5, 200.0, |r| {
            assert_eq!(r.reply_rate.min, 200.0);
            assert_eq!(r.reply_rate.avg, 200.0);
            assert_eq!(r.reply_rate.max, 200.0);
        });
    }

    #[test]
    fn generator_failures_are_not_the_targets() {
        let mut t = snapshot(100, &[1_000; 100]);
        t.counters.unsent = 900;
        t.counters.errors[ErrorClass::FdUnavailable.index()] = 900;
        one_agent(&t, 1.0, 1000.0, |r| {
            assert_eq!(r.errors_pct, 0.0);
            assert_eq!(r.failed_pct, 0.0);
            assert_eq!(r.due, 100);
            assert_eq!(r.trust, Verdict::Invalid);
            assert_eq!(r.server, Server::Ok);
        });
    }

    #[test]
    fn summary_is_computed_from_the_merge() {
        let a = snapshot(100, &[1_000; 100]);
        let b = snapshot(100, &[3_000; 100]);
        let mut total = a.clone();
        total.add(&b);
        let series = [IntervalSample {
            length: Duration::from_secs(1),
            replies: 100,
        }; 2];
        let agent = |name: &str, s: &Snapshot| AgentInput {
            name: name.to_string(),
            ..agent_input(s, 1, 2, Duration::from_secs(2))
        };
        let ok = StatusSet::default();
        let input = StepInput {
            number: 1,
            model: LoadModel::Requests,
            value: 100.0,
            demanded_rate: Some(100.0),
            duration: Duration::from_secs(2),
            total: &total,
            series: &series,
            agents: vec![agent("a", &a), agent("b", &b)],
            aborted: false,
            mark_lost: true,
            start_skew: Some(Duration::from_micros(1500)),
            ok_status: &ok,
            baseline_p50_ms: None,
        };
        let r = summarize(&input);
        assert_eq!(r.start_skew_ms, Some(1.5));
        assert_eq!(r.requests, 200);
        assert_eq!(r.achieved_request_rate, 100.0);
        assert!(
            (r.latency_ms.mean - 2.0).abs() < 0.002,
            "{}",
            r.latency_ms.mean
        );
        assert_eq!(r.net_io_kb_s, 100.0);
        assert_eq!(r.reply_rate.avg, 100.0);
        assert_eq!(r.trust, Verdict::Valid);
        assert_eq!(r.agents.len(), 2);
        assert_eq!(r.agents[1].requests, 100);
        assert!(r.agents[1].latency_ms.p50 > r.agents[0].latency_ms.p50);
        assert_eq!(r.status.get("2xx"), 200);
        let table = StepTable::new("h", LoadModel::Requests);
        let (row, head) = (table.row(&r), table.header());
        assert_eq!(row.len(), head.len());
        assert_eq!(row[0], "100");
        let trust = head.iter().position(|h| h == "trust").unwrap();
        assert_eq!(row[trust], "valid");
        assert_eq!(row[trust + 1], "ok");

        // The closed model's step value is a connection count: fewer established is named.
        let mut short = total.clone();
        short.counters.connections = 30;
        let r = summarize(&StepInput {
            model: LoadModel::Concurrency,
            value: 50.0,
            demanded_rate: None,
            total: &short,
            agents: vec![agent("a", &a)],
            ..input
        });
        assert_eq!(r.trust, Verdict::Degraded, "{:?}", r.reasons);
        assert!(
            r.reasons[0].starts_with("only 30 of 50 connections"),
            "{:?}",
            r.reasons
        );
    }

    #[test]
    fn cpu_share_is_of_the_cores_the_threads_can_use() {
        // 2 CPU-seconds a second: all of 2 threads, or of 4 threads on 2 cores (saturated either
        // way); half of 4 threads on 8 cores.
        let second = Duration::from_secs(1);
        let used = 2_000_000_000;
        let s = snapshot(10, &[1_000; 10]);
        let mut total = s.clone();
        total.cpu_ns = used;
        let series = [IntervalSample {
            length: second,
            replies: 10,
        }];
        for (threads, cores, pct) in [(2, 2, 100.0), (4, 2, 100.0), (4, 8, 50.0)] {
            let r = summarize(&StepInput {
                number: 1,
                model: LoadModel::Concurrency,
                value: 4.0,
                demanded_rate: None,
                duration: second,
                total: &total,
                series: &series,
                agents: vec![AgentInput {
                    cpu_ns: used,
                    ..agent_input(&s, threads, cores, second)
                }],
                aborted: false,
                mark_lost: true,
                start_skew: None,
                ok_status: &StatusSet::default(),
                baseline_p50_ms: None,
            });
            assert_eq!(r.generator.cpu_pct, pct, "{threads} threads, {cores} cores");
            assert_eq!(r.agents[0].cpu_pct, pct);
        }
    }

    #[test]
    fn an_agent_without_arrivals_read_as_a_saturated_generator() {
        // 50 µs of CPU over the 40 µs its idle workers took: 125% of one thread, "degraded" though
        // the agent sent nothing. Over the 1 s step it is what it is: next to nothing.
        let second = Duration::from_secs(1);
        let s = snapshot(10, &[1_000; 10]);
        let idle = Snapshot::default();
        let r = summarize(&StepInput {
            number: 1,
            model: LoadModel::Requests,
            value: 10.0,
            demanded_rate: Some(10.0),
            duration: second,
            total: &s,
            series: &[],
            agents: vec![
                agent_input(&s, 1, 1, second),
                AgentInput {
                    cpu_ns: 50_000,
                    ..agent_input(&idle, 1, 1, Duration::from_micros(40))
                },
            ],
            aborted: false,
            mark_lost: true,
            start_skew: None,
            ok_status: &StatusSet::default(),
            baseline_p50_ms: None,
        });
        assert!(r.agents[1].cpu_pct < 1.0, "{}", r.agents[1].cpu_pct);
        assert!(
            !r.reasons.iter().any(|w| w.contains("CPU")),
            "{:?}",
            r.reasons
        );
    }

    #[test]
    fn errors_are_noted_with_their_first_message_not_only_counted() {
        let mut total = Snapshot::default();
        total.counters.requests = 10;
        for _ in 0..10 {
            total.counters.record_error(ErrorClass::Other);
        }
        total.messages.keep(ErrorClass::Other, || {
            "TLS: certificate signed by unknown issuer: use --insecure for a self-signed target"
                .into()
        });
        // A message whose class counted nothing (it cannot happen, but never a note of 0).
        total
            .messages
            .keep(ErrorClass::ConnReset, || "connection reset by peer".into());
        let r = summarize(&StepInput {
            number: 1,
            model: LoadModel::Connections,
            value: 10.0,
            demanded_rate: Some(10.0),
            duration: Duration::from_secs(1),
            total: &total,
            series: &[],
            agents: vec![],
            aborted: false,
            mark_lost: true,
            start_skew: None,
            ok_status: &StatusSet::default(),
            baseline_p50_ms: None,
        });
        assert!(
            r.notes.contains(&"10 other errors, the first: TLS: certificate signed by unknown issuer: use --insecure for a self-signed target".to_string()),
            "{:?}",
            r.notes
        );
        assert!(
            !r.notes.iter().any(|n| n.contains("conn-reset")),
            "{:?}",
            r.notes
        );
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(
            json["error_messages"]["other"],
            "TLS: certificate signed by unknown issuer: use --insecure for a self-signed target"
        );
    }
}
