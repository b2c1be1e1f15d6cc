//! Everything that can be wrong with a plan, each said so a person can fix it.
use std::time::Duration;

use super::{MAX_RATE, MIN_RATE};

/// Everything that can be wrong with a plan, said so a person can fix it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PlanError {
    /// A feeder, a setup or a variable that cannot be (see `plan::feeder`).
    #[error("{0}")]
    BadData(String),
    #[error("bad URL '{url}': {why}")]
    BadUrl { url: String, why: String },
    #[error(
        "--streams {streams} needs HTTP/2: an HTTP/1.1 connection carries one request at a time (add --http 2, or --http auto over https)"
    )]
    StreamsNeedHttp2 { streams: u32 },
    #[error("{what} must be a positive number, got {value}")]
    NotPositive { what: &'static str, value: String },
    #[error("--low-rate ({low}) is above --high-rate ({high})")]
    LowAboveHigh { low: f64, high: f64 },
    #[error("the ramp from {low} to {high} by {step} has {count} steps; at most {max} are allowed")]
    TooManySteps {
        low: f64,
        high: f64,
        step: f64,
        count: u64,
        max: u64,
    },
    #[error("no steps: give --steps, or --low-rate/--high-rate/--rate-step")]
    NoSteps,
    #[error("the concurrency model takes whole connection counts; step {index} is {value}")]
    FractionalConnections { index: usize, value: f64 },
    #[error("--num-conn only fits the connections model, not {0}")]
    NumConnWithoutConnections(&'static str),
    #[error("no request to send: give a URL or --urls FILE")]
    NoRequests,
    #[error("request {0} of the mix has weight 0: give it a positive weight, or leave it out")]
    ZeroWeight(usize),
    #[error(
        "request name '{0}' is not allowed: use letters, digits, '_', '.' and '-' (at most 64), e.g. login or items.list"
    )]
    BadRequestName(String),
    #[error("request name '{0}' is given twice: every request of the mix needs its own name")]
    DuplicateRequestName(String),
    #[error("request {0} of the mix has no name: with more than one request, name each")]
    UnnamedRequest(usize),
    #[error("the mix is too large: {0}")]
    MixTooLarge(String),
    #[error("all URLs must share one origin ({first}); URL {index} is {other}")]
    MixedOrigins {
        first: String,
        index: usize,
        other: String,
    },
    #[error("bad header '{0}': write it as 'Name: value'")]
    BadHeader(String),
    #[error(
        "header 'Content-Length: {declared}' does not match the body's {actual} bytes: leave it out, stampede sets it from the body"
    )]
    ContentLength { declared: String, actual: usize },
    #[error(
        "header 'Transfer-Encoding: {0}' is not supported: stampede sends the body as given, framed by its Content-Length; leave it out"
    )]
    TransferEncoding(String),
    #[error("bad method '{0}': use a token such as GET or POST")]
    BadMethod(String),
    #[error("rate {0} is outside {MIN_RATE} to {MAX_RATE} per second")]
    RateRange(f64),
    #[error("a step would last {0:?}; at most 24 h is allowed")]
    StepTooLong(Duration),
    #[error("--step-duration {0:?} is too short: a step lasts at least 1ms")]
    StepTooShort(Duration),
    #[error(
        "a request count (-n) ends a closed loop: use --model concurrency (or -c N), not {0}; an open model's count is its rate times --step-duration"
    )]
    MaxRequestsWithoutConcurrency(&'static str),
    #[error(
        "-n {requests} is fewer requests than the {connections} connections of a step: give each connection one at least (ab refuses this too)"
    )]
    MaxRequestsBelowConnections { requests: u64, connections: u64 },
    #[error(
        "a split of the arrivals {left}:{right} is not two positive weights whose sum fits 64 bits"
    )]
    BadFork { left: u64, right: u64 },
    #[error("a share's path of {found} forks is longer than the {max} any fleet needs")]
    TooManyForks { found: usize, max: usize },
    #[error(
        "bad --source-addrs '{input}': {why} (write addresses and ranges separated by commas, e.g. 127.0.0.1,127.0.0.2 or 127.0.0.1-127.0.0.8)"
    )]
    BadSourceAddrs { input: String, why: String },
    #[error(
        "--source-addrs are {source_family} but the target {target} is {target_family}: connections leave from an address of the target's family"
    )]
    SourceFamily {
        source_family: &'static str,
        target: String,
        target_family: &'static str,
    },
    /// A session log's sessions (`SessionsError`, in its words).
    #[error("session log: {0}")]
    Sessions(String),
    #[error(
        "a session log (--wsesslog) runs in the connections model, an arrival a session, not in {0}: its sessions per second are the steps (--steps R, httperf's --rate)"
    )]
    SessionsWithoutConnections(&'static str),
}
