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
            .enumerate()
            .map(|(i, r)| results::run_file::RequestEcho {
                name: w.names().get(i).cloned(),
                weight: w.names().get(i).map(|_| w.weights()[i]),
                ..request_echo(r)
            })
            .collect(),
        feeders: w
            .data()
            .feeders()
            .iter()
            .map(|f| results::run_file::FeederEcho {
                name: f.name().to_string(),
                mode: f.mode().name().to_string(),
                variables: f.columns().to_vec(),
            })
            .collect(),
        setup: w.data().setup().map(|s| results::run_file::SetupEcho {
            request: request_echo(s.request()),
            extract: s
                .extract()
                .iter()
                .map(|e| format!("{} = {}", e.var(), e.spec()))
                .collect(),
        }),
        num_conn,
        step_duration_s,
        stop_on: thresholds.stop_on.iter().map(ToString::to_string).collect(),
        stop_after: thresholds.stop_after,
        fail_on: thresholds.fail_on.iter().map(ToString::to_string).collect(),
        warmup_s: warmup.filter(|w| !w.is_zero()).map(|w| w.as_secs_f64()),
        ..results::run_file::PlanEcho::default()
    }
}

/// A request as run.json says it: its headers with credentials redacted, its body as a length.
fn request_echo(r: &plan::RequestSpec) -> results::run_file::RequestEcho {
    results::run_file::RequestEcho {
        method: r.method().to_string(),
        url: format!("{}{}", r.url().origin(), r.url().path()),
        headers: r
            .headers()
            .iter()
            .map(|(n, v)| echoed_header(n, v))
            .collect(),
        body_bytes: r.body().len() as u64,
        ..Default::default()
    }
}

/// Headers that carry a credential: run.json is shared with whoever reads a result, so their values
/// are not written (the body is echoed as its length and the URL without its query for the same reason).
const CREDENTIALS: [&str; 3] = ["authorization", "proxy-authorization", "cookie"];

/// A header as run.json says it: a credential's value replaced by what it is, its scheme kept
/// (`Authorization: Basic (redacted)`).
fn echoed_header(name: &str, value: &str) -> String {
    if !CREDENTIALS.iter().any(|c| name.eq_ignore_ascii_case(c)) {
        return format!("{name}: {value}");
    }
    let scheme = value
        .split_once(' ')
        .map(|(scheme, _)| scheme)
        .filter(|s| name.to_ascii_lowercase().ends_with("authorization") && !s.is_empty());
    match scheme {
        Some(scheme) => format!("{name}: {scheme} (redacted)"),
        None => format!("{name}: (redacted)"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_are_not_written_to_run_json() {
        assert_eq!(
            echoed_header("Authorization", "Basic YWxpY2U6czNjcjp0"),
            "Authorization: Basic (redacted)"
        );
        assert_eq!(
            echoed_header("proxy-authorization", "Bearer abc.def"),
            "proxy-authorization: Bearer (redacted)"
        );
        assert_eq!(
            echoed_header("Cookie", "session=42; theme=dark"),
            "Cookie: (redacted)"
        );
        assert_eq!(
            echoed_header("Authorization", "token"),
            "Authorization: (redacted)"
        );
        assert_eq!(echoed_header("Accept", "text/html"), "Accept: text/html");
    }
}
