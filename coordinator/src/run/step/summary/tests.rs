//! Tests of one step's state machine (`run/step/summary.rs`): an agent whose every reply beat the network.
use super::*;
use shared::metrics::Counters;

fn totals(replies: u64, max_ms: f64) -> AgentTotals {
    let mut a = AgentTotals {
        counters: Counters {
            replies,
            ..Counters::default()
        },
        ..AgentTotals::default()
    };
    a.latency_ms.max = max_ms;
    a
}

#[test]
fn an_agent_whose_every_reply_beat_the_network_is_named() {
    // A peer with the token claimed its share's replies at 0 ms each, and the step read valid.
    let (liar, honest, few) = (totals(500, 0.0), totals(500, 0.04), totals(20, 0.0));
    let notes = below_the_network([("b", &liar), ("a", &honest), ("c", &few)].into_iter());
    assert_eq!(
        notes,
        [
            "agent b: all 500 of its replies took under 10 µs (max 0 µs), faster than any network: its latencies are not measurements"
        ]
    );
}
