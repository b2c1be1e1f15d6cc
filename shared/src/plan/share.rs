//! One agent's share of one step: how the coordinator splits a step among its agents, and the checks
//! an agent makes on a share it is sent.
use std::num::{NonZeroU32, NonZeroU64};
use std::time::Duration;

use super::{
    Arrival, LoadModel, Plan, PlanError, Slice, StepLimit, check_length, check_open_rate,
    split_proportional,
};

/// One agent's share of one step: everything its workers need to run it.
#[derive(Debug, Clone, PartialEq)]
pub struct StepShare {
    step: u32,
    model: LoadModel,
    rate: f64,
    slice: Slice,
    connections: u32,
    num_call: NonZeroU32,
    max_connections: NonZeroU32,
    limit: StepLimit,
    arrival: Arrival,
    seed: u64,
    max_requests: Option<NonZeroU64>,
}

/// A step's shares, one per weight. Open-model arrivals are dealt out exactly ([`Slice::among`]):
/// together the agents send every arrival of the step once, and any prefix is shared nearly in
/// proportion. Connection and request counts are split by largest remainder, so they too add up.
pub(super) fn shares_of_step(
    plan: &Plan,
    index: usize,
    value: f64,
    seed: u64,
    weights: &[u64],
) -> Vec<StepShare> {
    let closed = plan.model == LoadModel::Concurrency;
    let connections = split_proportional(value as u64, weights);
    // Every agent needs at least one pool connection to send anything at all.
    let max_connections = split_proportional(u64::from(plan.max_connections.get()), weights);
    // A request count goes with the connections that send it: an agent without any sends none.
    let max_requests = plan
        .max_requests
        .map(|n| split_proportional(n.get(), &connections));
    Slice::among(weights)
        .into_iter()
        .enumerate()
        .map(|(a, slice)| StepShare {
            step: index as u32,
            model: plan.model,
            rate: if closed { 0.0 } else { value },
            slice,
            connections: if closed { connections[a] as u32 } else { 0 },
            num_call: plan.num_call,
            max_connections: NonZeroU32::new(max_connections[a] as u32).unwrap_or(NonZeroU32::MIN),
            limit: plan.limit,
            arrival: plan.arrival,
            seed,
            max_requests: max_requests.as_ref().and_then(|m| NonZeroU64::new(m[a])),
        })
        .collect()
}

impl StepShare {
    /// Validates a share received from a coordinator (the agent trusts nothing it is sent).
    #[allow(clippy::too_many_arguments)]
    pub fn try_new(
        step: u32,
        model: LoadModel,
        rate: f64,
        slice: Slice,
        connections: u32,
        num_call: u32,
        max_connections: u32,
        limit: StepLimit,
        arrival: Arrival,
        seed: u64,
    ) -> Result<Self, PlanError> {
        let positive = |what, v: u32| {
            NonZeroU32::new(v).ok_or(PlanError::NotPositive {
                what,
                value: v.to_string(),
            })
        };
        if model == LoadModel::Concurrency && connections == 0 {
            return Err(PlanError::NotPositive {
                what: "connections",
                value: "0".into(),
            });
        }
        if matches!(limit, StepLimit::Connections(_)) && model != LoadModel::Connections {
            return Err(PlanError::NumConnWithoutConnections(model.name()));
        }
        if limit == StepLimit::Duration(Duration::ZERO) {
            return Err(PlanError::NotPositive {
                what: "step duration",
                value: "0".into(),
            });
        }
        if model.is_open() {
            check_open_rate(rate, limit)?;
        } else {
            check_length(limit, rate)?;
        }
        Ok(StepShare {
            step,
            model,
            rate,
            slice,
            connections,
            num_call: positive("num-call", num_call)?,
            max_connections: positive("max-connections", max_connections)?,
            limit,
            arrival,
            seed,
            max_requests: None,
        })
    }

    /// Adds a request count to a received share (0: none); only a closed loop takes one.
    pub fn with_max_requests(mut self, n: u64) -> Result<Self, PlanError> {
        self.max_requests = NonZeroU64::new(n);
        if self.max_requests.is_some() && self.model != LoadModel::Concurrency {
            return Err(PlanError::MaxRequestsWithoutConcurrency(self.model.name()));
        }
        Ok(self)
    }

    /// The same share lasting `length` instead of the plan's step limit: a capacity search's
    /// probes, confirmations and longer re-probes each choose their own.
    pub fn lasting(self, length: Duration) -> StepShare {
        StepShare {
            limit: StepLimit::Duration(length),
            ..self
        }
    }

    /// The step's scheduled length: its duration, or the time for the whole fleet to open `num_conn`
    /// connections (the same for every agent).
    pub fn scheduled_duration(&self) -> Duration {
        match self.limit {
            StepLimit::Duration(d) => d,
            StepLimit::Connections(n) => Duration::from_secs_f64(n.get() as f64 / self.rate),
        }
    }

    pub fn step(&self) -> u32 {
        self.step
    }

    pub fn model(&self) -> LoadModel {
        self.model
    }

    /// The whole step's connections/s (connections model) or requests/s (requests model); 0 for
    /// concurrency. The agent sends only the arrivals of its [`slice`](Self::slice).
    pub fn rate(&self) -> f64 {
        self.rate
    }

    /// This agent's part of the step's arrival sequence; together the agents' slices partition it.
    pub fn slice(&self) -> &Slice {
        &self.slice
    }

    /// Connections held open (concurrency model).
    pub fn connections(&self) -> u32 {
        self.connections
    }

    pub fn num_call(&self) -> NonZeroU32 {
        self.num_call
    }

    pub fn max_connections(&self) -> NonZeroU32 {
        self.max_connections
    }

    pub fn limit(&self) -> StepLimit {
        self.limit
    }

    pub fn arrival(&self) -> Arrival {
        self.arrival
    }

    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// Concurrency model: this agent's part of the step's request count (ab's `-n`); the step ends
    /// once it is sent, or at its limit, whichever comes first.
    pub fn max_requests(&self) -> Option<NonZeroU64> {
        self.max_requests
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{RequestSpec, UrlOrder, Workload};

    fn plan(model: LoadModel, steps: Vec<f64>) -> Plan {
        let request = RequestSpec::try_new("GET", "http://127.0.0.1:9/", vec![], vec![]).unwrap();
        let second = Duration::from_secs(1);
        let workload =
            Workload::try_new(vec![request], UrlOrder::RoundRobin, second, second, false).unwrap();
        let limit = StepLimit::Duration(second);
        let max = NonZeroU32::new(10).unwrap();
        Plan::try_new(
            model,
            steps,
            limit,
            NonZeroU32::MIN,
            max,
            Arrival::Uniform,
            workload,
        )
        .unwrap()
    }

    #[test]
    fn a_billion_to_one_step_splits_into_small_shares_that_add_up() {
        let p = plan(LoadModel::Requests, vec![200.0]);
        let shares = p.shares_of_step(0, 9, &[1_000_000_000, 1]);
        assert_eq!(shares.len(), 2);
        assert!(shares.iter().all(|s| s.slice().forks().len() == 1));
        assert_eq!(shares[1].slice().arrival(0), Some(1_000_000_000));
        // Each agent's pool has a connection at least; the step's seed is the run's plus its index.
        let pools: Vec<u32> = shares.iter().map(|s| s.max_connections().get()).collect();
        assert_eq!(pools, [10, 1]);
        assert!(shares.iter().all(|s| s.seed() == 9 && s.rate() == 200.0));
        let closed = plan(LoadModel::Concurrency, vec![5.0, 7.0]);
        let shares = closed.shares_of_step(1, 9, &[3, 1, 1_000_000_000]);
        let connections: u32 = shares.iter().map(StepShare::connections).sum();
        assert_eq!(connections, 7);
        assert!(shares.iter().all(|s| s.seed() == 10 && s.rate() == 0.0));
    }

    #[test]
    fn a_step_chosen_by_its_source_is_split_at_its_own_value_not_the_plans() {
        // A capacity search decides the next value itself: the split must not read the plan's list.
        let p = plan(LoadModel::Requests, vec![200.0]);
        let shares = p.shares_of(3, 350.0, 9, &[1, 1]);
        assert!(
            shares
                .iter()
                .all(|s| s.rate() == 350.0 && s.step() == 3 && s.seed() == 12)
        );
        let closed = plan(LoadModel::Concurrency, vec![5.0]);
        let held: u32 = closed
            .shares_of(1, 12.0, 9, &[1, 2])
            .iter()
            .map(StepShare::connections)
            .sum();
        assert_eq!(held, 12);
    }
}
