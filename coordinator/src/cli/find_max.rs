//! `stampede find-max`'s own flags beside `run`'s, and the settings of `run` the search chooses
//! itself (refused, and hidden from its help).
use clap::Args;

use super::{DurationText, Rate, RunArgs};

pub(super) const FIND_MAX_EXAMPLES: &str = "Examples:
  stampede find-max http://127.0.0.1:8080/ --slo 'p99<50ms' --model requests
  stampede find-max http://127.0.0.1:8080/ --slo 'p99<20ms' --slo 'failed<0.1%' --start 1000 --max-rate 50000 --probe 5s
  stampede find-max http://10.0.0.5/ --slo 'p999<200ms' --agents a1:7700,a2:7700 --tls-ca ca.crt --tls-cert c.crt --tls-key c.key
  stampede find-max nginx=http://127.0.0.1:8080/ go=http://127.0.0.1:8081/ --slo 'p99<50ms' --model requests

Exit codes: 0 resolved (both bounds found and confirmed), 1 the run failed or was interrupted (the bounds so far are in run.json), 2 usage or configuration error, 4 lower_bound_only (a pass at the ceiling: not a maximum), 5 generator_bound (the generator is the limit: add agents), 6 doomed (the start rate already fails), 7 server_unrecovered (after an overload with errors a passing rate failed too), 8 deadline (time or probe budget ran out: the bounds so far). With several NAME=URL targets, one search each, their probes interleaved: the worst target's (1, then 6, 7, 5, 8, 4; 0 when all resolved).";

/// `run`'s settings find-max chooses itself: each one's clap id (hidden from find-max's help), its
/// flag, the search's flag to use instead, and whether a command line gave it. The one list that
/// `config::resolve_find_max` refuses by and the help hides by.
pub type Refused = (
    &'static str,
    &'static str,
    &'static str,
    fn(&RunArgs) -> bool,
);

pub const FIND_MAX_REFUSED: [Refused; 12] = [
    ("steps", "--steps", "--start and --max-rate", |a| {
        a.steps.is_some()
    }),
    ("low_rate", "--low-rate", "--start", |a| {
        a.low_rate.is_some()
    }),
    ("high_rate", "--high-rate", "--max-rate", |a| {
        a.high_rate.is_some()
    }),
    ("rate_step", "--rate-step", "--precision", |a| {
        a.rate_step.is_some()
    }),
    ("rate", "-R/--rate", "--start", |a| a.rate.is_some()),
    (
        "connections",
        "-c/--connections",
        "--max-connections (the requests model's pool) or --model concurrency --start N",
        |a| a.connections.is_some(),
    ),
    ("num_conn", "--num-conn", "--probe", |a| {
        a.num_conn.is_some()
    }),
    ("max_requests", "-n/--max-requests", "--probe", |a| {
        a.max_requests.is_some()
    }),
    (
        "step_duration",
        "--step-duration",
        "--probe and --confirm",
        |a| a.step_duration.is_some(),
    ),
    ("stop_on", "--stop-on", "--slo", |a| !a.stop_on.is_empty()),
    ("stop_after", "--stop-after", "--repeat", |a| {
        a.stop_after.is_some()
    }),
    (
        "fail_on",
        "--fail-on",
        "--slo (the exit code says how the search ended)",
        |a| !a.fail_on.is_empty(),
    ),
];

/// `stampede find-max`: the search's own flags beside every setting of `run` but the steps.
#[derive(Debug, Clone, Args)]
pub struct FindMaxArgs {
    #[command(flatten)]
    pub run: RunArgs,
    #[command(flatten)]
    pub search: SearchArgs,
}

#[derive(Debug, Clone, Args)]
pub struct SearchArgs {
    /// A service level every passing probe meets, in the --stop-on grammar: p99<50ms, p999<200ms,
    /// failed<1%, ok_rate>=99%, p99[login]<200ms (one request of the plan's mix), requests>=100
    /// (repeatable: all of them). A percentile counts only with enough samples behind it
    /// (10 / (1 - q): 1,000 for p99). Without any, only throughput decides.
    #[arg(long = "slo", value_name = "EXPR", help_heading = SEARCH)]
    pub slos: Vec<String>,
    /// The first probe's rate (req/s, conn/s, or connections for --model concurrency)
    /// [default: 100, or 10 connections].
    #[arg(long, value_name = "R", help_heading = SEARCH)]
    pub start: Option<Rate>,
    /// The highest rate to offer [default: no limit but the agents' own --max-rate].
    #[arg(long, value_name = "R", help_heading = SEARCH)]
    pub max_rate: Option<Rate>,
    /// Bisect until the lowest failing rate is within this of the highest passing one.
    #[arg(long, default_value = "5%", allow_hyphen_values = true, help_heading = SEARCH)]
    pub precision: String,
    /// Length of a ramp or bisect probe.
    #[arg(long, default_value = "10s", allow_hyphen_values = true, help_heading = SEARCH)]
    pub probe: DurationText,
    /// Length of each confirmation of the two bounds.
    #[arg(long, default_value = "30s", allow_hyphen_values = true, help_heading = SEARCH)]
    pub confirm: DurationText,
    /// Confirmations of each bound; a contradiction is settled by the majority of measured seconds.
    #[arg(long, default_value_t = 2, help_heading = SEARCH)]
    pub repeat: u32,
    /// Idle time before each probe, for the server to drain what the last one queued.
    #[arg(long, default_value = "2s", allow_hyphen_values = true, help_heading = SEARCH)]
    pub cooldown: DurationText,
    /// The whole search's time limit: at it, the bounds so far are the answer (status deadline).
    #[arg(long, default_value = "30m", allow_hyphen_values = true, help_heading = SEARCH)]
    pub deadline: DurationText,
}

const SEARCH: &str = "Search";
