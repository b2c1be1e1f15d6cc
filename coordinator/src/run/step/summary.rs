//! What a step's collected reports become: its result (the merge summarized, the start's skew, the
//! server's view from its monitors), with the notes only the coordinator can add: a step the agents'
//! own pacing held, and agents whose every reply beat the network.
use std::time::Duration;

use monitor::step::Window;
use proto::pb;
use results::distribution::Distribution;
use results::step::{self, AgentInput, StepInput, StepResult};
use shared::plan::LoadModel;
use tokio::time::Instant;

use super::super::Watch;
use super::super::source::StepSpec;
use super::{Collected, Prepared, Started, StepCx, step_number};
use crate::config::{LossPolicy, RunConfig};
use crate::fleet::Fleet;
use crate::merge::{AgentTotals, Hlog, StepTotals};

/// The step's result from what was collected, its latency per interval for the hlog, and its merged
/// latency's percentile distribution for the .hgrm.
pub(super) fn summarize(
    fleet: &Fleet,
    cx: &StepCx<'_>,
    spec: StepSpec,
    p: Prepared,
    s: &Started,
    c: Collected,
    watch: &Watch<'_>,
) -> (StepResult, Hlog, Distribution) {
    let plan = &cx.cfg.plan;
    let delays = start_delays(fleet, s, &c.reports);
    let sent: Vec<Duration> = delays.iter().flatten().copied().collect();
    let start_skew = sent
        .iter()
        .max()
        .zip(sent.iter().min())
        .map(|(max, min)| *max - *min);
    let StepTotals {
        total,
        series,
        agents: sums,
        hlog,
    } = c.totals;
    cx.feed
        .step_latency(cx.target, step_number(spec), &total.hist.latency);
    cx.feed
        .names_latency(cx.target, step_number(spec), &total.names);
    let members = p.who.iter().chain(&p.lost_before);
    let agents = members
        .map(|&i| AgentInput {
            name: fleet.name(i).to_string(),
            threads: fleet.threads(i),
            cores: fleet.cores(i),
            wall: c.reports[i]
                .as_ref()
                .map_or(s.scheduled, |r| Duration::from_micros(r.wall_us)),
            counters: sums[i].counters,
            cpu_ns: sums[i].cpu_ns,
            latency_ms: sums[i].latency_ms,
            start_delay: delays[i],
            lost: c.lost[i],
            clock_offset_ns: fleet.offset_ns(i),
            rtt: fleet.rtt(i),
        })
        .collect::<Vec<AgentInput>>();
    let mut result = step::summarize(&StepInput {
        // Counted from 1 in everything people read; `index` stays the protocol's.
        number: step_number(spec),
        model: plan.model(),
        value: spec.value,
        demanded_rate: plan.demanded_request_rate(spec.value),
        duration: measured(cx.cfg, s, c.aborted_at, &agents),
        total: &total,
        series: &series,
        agents,
        aborted: c.aborted_at.is_some(),
        mark_lost: cx.cfg.on_agent_loss != LossPolicy::Continue,
        start_skew,
        ok_status: plan.workload().ok_status(),
        baseline_p50_ms: watch.baseline_p50_ms,
    });
    let workload = plan.workload();
    result.per_request = step::per_request::rows(
        workload.names(),
        workload.weights(),
        &total.names,
        result.duration_s,
    );
    // A share lost mid-step was not all run: the step is not judged, and says whose and how much.
    result.lost_load = p
        .who
        .iter()
        .zip(&p.shares)
        .filter(|(i, _)| c.lost[**i])
        .map(|(&i, share)| step::LostShare {
            agent: fleet.name(i).to_string(),
            pct: (share.slice().fraction() * 1000.0).round() / 10.0,
        })
        .collect();
    for lost in &result.lost_load {
        result.notes.push(format!(
            "agent {}'s share ({} % of the load) was not all sent: not judged (neither kept up with nor past the server's limit)",
            lost.agent,
            step::human(lost.pct)
        ));
    }
    if plan.model() == LoadModel::Concurrency {
        paced_by_agents(fleet, &p.who, &mut result);
    }
    let named = p.who.iter().map(|&i| (fleet.name(i), &sums[i]));
    result.notes.extend(below_the_network(named));
    result.notes.extend(p.notes);
    result.notes.extend(c.notes);
    let distribution = Distribution::of(result.number, &total.hist.latency);
    (result, hlog, distribution)
}

/// A closed loop that started at least this share of what its agents' `--max-rate` allows was
/// held by that pace, not by the server.
const PACED_SHARE: f64 = 0.95;

/// Marks a closed-loop step the agents' own `--max-rate` held as the generator's: every agent of
/// it paced, and together they started about what their limits allow. A server that could go
/// faster shows the agents' limit, never its own knee ("knee at 2 connections: the served rate
/// flattened" read every step of such a run).
fn paced_by_agents(fleet: &Fleet, who: &[usize], result: &mut StepResult) {
    let Some(pace) = who.iter().map(|&i| fleet.max_rate(i)).sum::<Option<f64>>() else {
        return;
    };
    if who.is_empty() || result.achieved_request_rate < PACED_SHARE * pace {
        return;
    }
    result.generator_bound = true;
    result.reasons.push(format!(
        "paced at the agents' --max-rate ({} req/s in all): their limit, not the server's",
        step::human(pace)
    ));
}

/// No HTTP reply crosses even loopback in under this (a keep-alive request there takes tens of
/// microseconds: two system calls each way and the server's own work).
const NETWORK_FLOOR_MS: f64 = 0.010;
/// Replies an agent must claim before its latencies are weighed against the floor: a handful of
/// cached or rounded values proves nothing.
const FLOOR_MIN_REPLIES: u64 = 100;

/// Names each agent whose every latency in the step is below [`NETWORK_FLOOR_MS`]: a peer holding
/// the token can claim what its share allows, but replies faster than any network are not
/// measurements. Notes only: its counts passed the share's bound, so they are merged.
fn below_the_network<'a>(agents: impl Iterator<Item = (&'a str, &'a AgentTotals)>) -> Vec<String> {
    agents
        .filter(|(_, a)| a.counters.replies >= FLOOR_MIN_REPLIES)
        .filter(|(_, a)| a.latency_ms.max < NETWORK_FLOOR_MS)
        .map(|(name, a)| {
            format!(
                "agent {name}: all {} of its replies took under {} µs (max {} µs), faster than any network: its latencies are not measurements",
                a.counters.replies,
                NETWORK_FLOOR_MS * 1000.0,
                a.latency_ms.max * 1000.0
            )
        })
        .collect()
}

/// Puts each monitor's view of the step into its result, with the notes they make (a CPU at its
/// limit, dropped SYNs, a monitor lost), once every live monitor has sent the sample closing the step
/// (a second at most after it). Notes only: the step's trust is not the server's to change.
pub(super) async fn observe_server(
    fleet: &mut Fleet,
    result: &mut StepResult,
    s: &Started,
    cx: &StepCx<'_>,
) {
    let sources = &cx.cfg.server_prometheus;
    if fleet.monitor_infos().is_empty() && sources.is_empty() {
        return;
    }
    let end_ns = s.start_ns + (result.duration_s * 1e9) as i64;
    // Only the server under load, and what is behind every target: another target's own server
    // is idle in this step, and its numbers are that target's.
    let (pairing, target) = (&cx.cfg.pairing, cx.cfg.label.as_deref());
    let window = Window {
        start_ns: s.start_ns,
        end_ns,
    };
    let carries = |name: &str| pairing.watches(target, name).is_some();
    // The monitors' closing samples and the Prometheus's last scrape are awaited together.
    let ((), (asked, unasked)) = tokio::join!(
        fleet.await_samples(end_ns),
        crate::server_prom::observe(sources, window, carries)
    );
    let (mut views, lost) = fleet.server_views(window, target, carries);
    views.extend(asked);
    result.notes.extend(unasked);
    results::quantity::observed(result, pairing.mark(target, views));
    result.notes.extend(lost);
    let explained = results::server_notes::notes(result, cx.earlier);
    result.notes.extend(explained);
}

/// When each agent began, on the coordinator's clock, from the agreed start instant.
fn start_delays(
    fleet: &Fleet,
    s: &Started,
    reports: &[Option<pb::StepReport>],
) -> Vec<Option<Duration>> {
    (0..fleet.len())
        .map(|i| {
            let r = reports[i].as_ref()?;
            (r.began_unix_nanos > 0).then(|| {
                let ns = r.began_unix_nanos - fleet.offset_ns(i) - s.start_ns;
                Duration::from_nanos(ns.max(0) as u64)
            })
        })
        .collect()
}

/// The time a step is summarized over. An aborted step: the time it ran until the abort, not the
/// drain after it; a closed loop that spent its request count (`-n`): the time its agents took, as
/// ab reports.
fn measured(
    cfg: &RunConfig,
    s: &Started,
    aborted_at: Option<Instant>,
    agents: &[AgentInput],
) -> Duration {
    match aborted_at {
        Some(at) => at.saturating_duration_since(s.began).min(s.scheduled),
        None if cfg.plan.max_requests().is_some() => agents
            .iter()
            .map(|a| a.wall)
            .max()
            .unwrap_or(s.scheduled)
            .min(s.scheduled),
        None => s.scheduled,
    }
}

#[cfg(test)]
mod tests;
