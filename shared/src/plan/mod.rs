//! The run plan as domain types that are valid by construction: what to send, which load model,
//! which steps, and one agent's share of a step. Each concern has its own file; every type is
//! re-exported here, so callers name `shared::plan::X`.
use std::num::{NonZeroU32, NonZeroU64};
use std::time::Duration;

mod csv;
mod error;
mod extract;
mod feeder;
mod mix;
mod model;
mod ramp;
mod request;
mod session;
mod share;
mod source_addrs;
pub mod split;
mod template;
mod url;
mod url_list;
mod workload;
mod wsesslog;

pub use csv::{CsvError, Records};
pub use error::PlanError;
pub use extract::{ExtractError, Extraction};
pub use feeder::{
    Data, Dealer, Feeder, FeederMode, MAX_FEEDERS, MAX_FIELD, MAX_ROW, Setup, decode_rows,
    encode_row, row_len,
};
pub use mix::{MAX_REQUESTS, MAX_TOTAL_WEIGHT, Mix, UrlOrder};
pub use model::{Arrival, LoadModel, StepLimit};
pub use ramp::{MAX_STEPS, ramp};
pub use request::{RequestSpec, parse_header};
pub use session::{
    MAX_SESSION_REQUESTS, MAX_SESSIONS, MAX_THINK, Session, SessionBurst, Sessions, SessionsError,
};
pub use share::StepShare;
pub use source_addrs::{MAX_SOURCE_ADDRS, parse_source_addrs};
pub use split::{Fork, ForkSide, Slice, split_proportional};
pub use template::{Builtin, Part, Template, TemplateError, is_variable_name};
pub use url::{Scheme, Url, http2_spelling};
pub use url_list::{UrlListError, parse_url_list};
pub use workload::{
    HttpVersion, MAX_NAME_LEN, MAX_STREAMS, TlsSessions, Workload, is_request_name,
};
pub use wsesslog::{Burst, LoggedRequest, LoggedSession, WsesslogError, parse as parse_wsesslog};

/// The whole run: a model, a list of step values, and what to send.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    model: LoadModel,
    /// Rates (conn/s or req/s) or, for concurrency, connection counts; one per step, in order.
    steps: Vec<f64>,
    limit: StepLimit,
    num_call: NonZeroU32,
    max_connections: NonZeroU32,
    arrival: Arrival,
    workload: Workload,
    /// Concurrency model: every step ends after this many requests (ab's `-n`), or at `limit`.
    max_requests: Option<NonZeroU64>,
}

/// Rates outside this range are typos, not plans (and would overflow time arithmetic).
pub const MIN_RATE: f64 = 0.001;
pub const MAX_RATE: f64 = 1e9;
/// The longest one step may last.
pub const MAX_STEP_DURATION: Duration = Duration::from_secs(24 * 3600);
/// The shortest: the control protocol carries a step's length in whole milliseconds.
pub const MIN_STEP_DURATION: Duration = Duration::from_millis(1);

impl Plan {
    pub fn try_new(
        model: LoadModel,
        steps: Vec<f64>,
        limit: StepLimit,
        num_call: NonZeroU32,
        max_connections: NonZeroU32,
        arrival: Arrival,
        workload: Workload,
    ) -> Result<Self, PlanError> {
        if steps.is_empty() {
            return Err(PlanError::NoSteps);
        }
        for (i, v) in steps.iter().enumerate() {
            if !(v.is_finite() && *v > 0.0) {
                return Err(PlanError::NotPositive {
                    what: "every step value",
                    value: v.to_string(),
                });
            }
            if model == LoadModel::Concurrency && v.fract() != 0.0 {
                return Err(PlanError::FractionalConnections {
                    index: i + 1,
                    value: *v,
                });
            }
            if model == LoadModel::Concurrency && *v > 10_000_000.0 {
                return Err(PlanError::NotPositive {
                    what: "a connection count (at most 10000000)",
                    value: v.to_string(),
                });
            }
            if model.is_open() {
                check_open_rate(*v, limit)?;
            }
        }
        if let StepLimit::Duration(d) = limit {
            check_length(limit, 1.0).map_err(|_| PlanError::StepTooLong(d))?;
            if d < MIN_STEP_DURATION {
                return Err(PlanError::StepTooShort(d));
            }
        }
        if matches!(limit, StepLimit::Connections(_)) && model != LoadModel::Connections {
            return Err(PlanError::NumConnWithoutConnections(model.name()));
        }
        if workload.sessions().is_some() && model != LoadModel::Connections {
            return Err(PlanError::SessionsWithoutConnections(model.name()));
        }
        Ok(Plan {
            model,
            steps,
            limit,
            num_call,
            max_connections,
            arrival,
            workload,
            max_requests: None,
        })
    }

    /// Ends every step after `n` requests (split exactly among agents and their workers); only a
    /// closed loop counts its requests this way, the open models are counted by their schedule.
    pub fn with_max_requests(mut self, n: NonZeroU64) -> Result<Self, PlanError> {
        if self.model != LoadModel::Concurrency {
            return Err(PlanError::MaxRequestsWithoutConcurrency(self.model.name()));
        }
        // As ab refuses a concurrency above its request count: a connection without a request of
        // its own would have no count to stop it.
        if let Some(&c) = self.steps.iter().find(|c| **c > n.get() as f64) {
            return Err(PlanError::MaxRequestsBelowConnections {
                requests: n.get(),
                connections: c as u64,
            });
        }
        self.max_requests = Some(n);
        Ok(self)
    }

    /// The request rate the plan demands at a step value, or None for the closed model.
    pub fn demanded_request_rate(&self, value: f64) -> Option<f64> {
        match self.model {
            LoadModel::Connections => Some(match self.workload.sessions() {
                // Sessions in turn: in the long run, the log's mean requests a session.
                Some(s) => value * s.mean_requests(),
                None => value * f64::from(self.num_call.get()),
            }),
            LoadModel::Requests => Some(value),
            LoadModel::Concurrency => None,
        }
    }

    /// Splits step `index` among agents in proportion to `weights` (e.g. their cores): the one
    /// computation of a step's shares, for the check before the run and for the run alike. Each
    /// step's seed is the run's `seed` plus its index. See [`StepShare`] for how the parts add up.
    pub fn shares_of_step(&self, index: usize, seed: u64, weights: &[u64]) -> Vec<StepShare> {
        self.shares_of(index, self.steps[index], seed, weights)
    }

    /// As [`Plan::shares_of_step`], for step `index` at `value`, which a step source (a capacity
    /// search) may have chosen rather than the plan's list.
    pub fn shares_of(
        &self,
        index: usize,
        value: f64,
        seed: u64,
        weights: &[u64],
    ) -> Vec<StepShare> {
        share::shares_of_step(self, index, value, seed.wrapping_add(index as u64), weights)
    }

    pub fn model(&self) -> LoadModel {
        self.model
    }

    /// The step values: rates (conn/s or req/s) or, for concurrency, connection counts; in order.
    pub fn steps(&self) -> &[f64] {
        &self.steps
    }

    pub fn limit(&self) -> StepLimit {
        self.limit
    }

    pub fn num_call(&self) -> NonZeroU32 {
        self.num_call
    }

    pub fn max_connections(&self) -> NonZeroU32 {
        self.max_connections
    }

    pub fn arrival(&self) -> Arrival {
        self.arrival
    }

    pub fn workload(&self) -> &Workload {
        &self.workload
    }

    /// Concurrency model: every step ends after this many requests (ab's `-n`), or at its limit.
    pub fn max_requests(&self) -> Option<NonZeroU64> {
        self.max_requests
    }
}

/// The one check of an open model's rate, for a plan's steps and a received share alike: within
/// [`MIN_RATE`]..=[`MAX_RATE`] (so positive and finite), and a step no longer than allowed.
fn check_open_rate(rate: f64, limit: StepLimit) -> Result<(), PlanError> {
    if !(MIN_RATE..=MAX_RATE).contains(&rate) {
        return Err(PlanError::RateRange(rate));
    }
    check_length(limit, rate)
}

/// Refuses steps longer than [`MAX_STEP_DURATION`], e.g. a `num_conn` of a million at 1 conn/s.
fn check_length(limit: StepLimit, rate: f64) -> Result<(), PlanError> {
    let secs = match limit {
        StepLimit::Duration(d) => d.as_secs_f64(),
        StepLimit::Connections(n) => n.get() as f64 / rate,
    };
    if secs > MAX_STEP_DURATION.as_secs_f64() || !secs.is_finite() {
        return Err(PlanError::StepTooLong(Duration::from_secs_f64(
            secs.min(MAX_STEP_DURATION.as_secs_f64() * 1000.0),
        )));
    }
    Ok(())
}
