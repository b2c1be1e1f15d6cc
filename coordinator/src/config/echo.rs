//! run.json's echo of the plan: the resolved plan as a person reads it back, with the thresholds
//! and the warmup it ran with.
use std::num::NonZeroU64;
use std::time::Duration;

use shared::plan::{self, Plan, StepLimit};

use super::Thresholds;

/// The resolved plan as run.json records it, with the thresholds and the planned warmup (none when
/// zero) it runs with.
pub fn echo(
    plan: &Plan,
    threads: usize,
    thresholds: &Thresholds,
    warmup: Option<Duration>,
) -> results::run_file::PlanEcho {
    let w = plan.workload();
    let (num_conn, step_duration_s) = match plan.limit() {
        StepLimit::Duration(d) => (None, Some(d.as_secs_f64())),
        StepLimit::Connections(n) => (Some(n.get()), None),
    };
    results::run_file::PlanEcho {
        max_requests: plan.max_requests().map(NonZeroU64::get),
        model: plan.model().name().to_string(),
        arrival: plan.arrival().name().to_string(),
        steps: plan.steps().to_vec(),
        num_call: u64::from(plan.num_call().get()),
        max_connections: u64::from(plan.max_connections().get()),
        timeout_s: w.timeout().as_secs_f64(),
        connect_timeout_s: w.connect_timeout().as_secs_f64(),
        urls_order: w.url_order().name().to_string(),
        http: Some(w.http().name().to_string()),
        streams: Some(u64::from(w.streams().get())),
        tls_sessions: (w.origin().scheme() == plan::Scheme::Https)
            .then(|| w.tls_sessions().name().to_string()),
        source_addrs: w.source_addrs().iter().map(ToString::to_string).collect(),
        ok_status: w.ok_status().to_string(),
        threads: threads as u64,
        requests: w
            .requests()
            .iter()
            .map(|r| results::run_file::RequestEcho {
                method: r.method().to_string(),
                url: format!("{}{}", r.url().origin(), r.url().path()),
                headers: r
                    .headers()
                    .iter()
                    .map(|(n, v)| format!("{n}: {v}"))
                    .collect(),
                body_bytes: r.body().len() as u64,
            })
            .collect(),
        num_conn,
        step_duration_s,
        stop_on: thresholds.stop_on.iter().map(ToString::to_string).collect(),
        stop_after: thresholds.stop_after,
        fail_on: thresholds.fail_on.iter().map(ToString::to_string).collect(),
        warmup_s: warmup.filter(|w| !w.is_zero()).map(|w| w.as_secs_f64()),
        ..results::run_file::PlanEcho::default()
    }
}
