//! A weighted mix of requests: which of them the step's `i`-th arrival sends. The choice is a
//! function of the arrival's index in the whole step, not of any agent's or worker's state, so a fleet
//! that deals the arrivals out (`split.rs`) still sends each request exactly its weight's share.
//!
//! `smooth` repeats one cycle of `total weight` arrivals in which every request appears exactly its
//! weight's number of times, interleaved (Sainte-Laguë's order: the next arrival goes to the request
//! whose `(sent + ½) / weight` is least, the first on a tie), so equal weights take turns in the order
//! given and any window of a cycle's length holds every request exactly its weight's number of times.
//! `random` draws each arrival's request by weight from a hash of the seed and the arrival's index.
use super::PlanError;

/// The order a mix's requests are sent in (`--urls-order`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
#[serde(rename_all = "kebab-case")]
pub enum UrlOrder {
    /// each URL in turn
    #[cfg_attr(feature = "cli", value(alias = "roundrobin", alias = "sequential"))]
    #[serde(alias = "roundrobin", alias = "sequential")]
    RoundRobin,
    /// a random URL per request (--seed)
    Random,
}

impl UrlOrder {
    pub fn name(self) -> &'static str {
        match self {
            UrlOrder::RoundRobin => "round-robin",
            UrlOrder::Random => "random",
        }
    }
}

/// The most a mix's weights may add up to: one cycle is kept as a table of this many entries at most
/// (2 bytes each), built once per run.
pub const MAX_TOTAL_WEIGHT: u64 = 1_000_000;

/// The most requests one mix may name; an index fits the cycle's table entry.
pub const MAX_REQUESTS: usize = u16::MAX as usize;

/// Which request each arrival of a step sends.
#[derive(Debug, Clone, PartialEq)]
pub struct Mix {
    order: UrlOrder,
    /// `cumulative[k]` is the sum of the weights before request `k`; its last entry the total.
    cumulative: Vec<u64>,
    /// One smooth cycle: the request of each arrival, `total` entries (empty for `random`).
    cycle: Vec<u16>,
}

impl Mix {
    /// A mix of requests with these weights, in `order`.
    pub fn try_new(weights: &[u32], order: UrlOrder) -> Result<Mix, PlanError> {
        if weights.is_empty() {
            return Err(PlanError::NoRequests);
        }
        if weights.len() > MAX_REQUESTS {
            return Err(PlanError::MixTooLarge(format!(
                "{} requests; at most {MAX_REQUESTS}",
                weights.len()
            )));
        }
        if let Some(index) = weights.iter().position(|w| *w == 0) {
            return Err(PlanError::ZeroWeight(index));
        }
        let mut cumulative = Vec::with_capacity(weights.len() + 1);
        let mut sum = 0u64;
        cumulative.push(0);
        for w in weights {
            sum += u64::from(*w);
            cumulative.push(sum);
        }
        if sum > MAX_TOTAL_WEIGHT {
            return Err(PlanError::MixTooLarge(format!(
                "weights adding up to {sum}; at most {MAX_TOTAL_WEIGHT} (divide them by a common factor)"
            )));
        }
        let cycle = match order {
            UrlOrder::RoundRobin => smooth_cycle(weights),
            UrlOrder::Random => Vec::new(),
        };
        Ok(Mix {
            order,
            cumulative,
            cycle,
        })
    }

    /// How many requests the mix holds.
    pub fn len(&self) -> usize {
        self.cumulative.len() - 1
    }

    /// Never: a mix holds one request at least.
    pub fn is_empty(&self) -> bool {
        false
    }

    pub fn total_weight(&self) -> u64 {
        self.cumulative[self.len()]
    }

    /// The request the step's `arrival`-th arrival sends (from 0); `seed` draws a `random` mix (the
    /// step's, so every agent draws alike).
    pub fn pick(&self, arrival: u64, seed: u64) -> usize {
        if self.len() == 1 {
            return 0;
        }
        match self.order {
            UrlOrder::RoundRobin => {
                usize::from(self.cycle[(arrival % self.total_weight()) as usize])
            }
            UrlOrder::Random => {
                let at = below(hash(seed, arrival), self.total_weight());
                // The request whose weight's range holds `at`: the last whose start is at or before it.
                self.cumulative.partition_point(|start| *start <= at) - 1
            }
        }
    }
}

/// One cycle in Sainte-Laguë's order, which keeps every prefix within one arrival of its request's
/// exact share for two requests and close to it for more.
fn smooth_cycle(weights: &[u32]) -> Vec<u16> {
    let total: u64 = weights.iter().map(|w| u64::from(*w)).sum();
    // The least (sent + ½) / weight first, the first request on a tie: a heap keeps it a log of the
    // requests' count per arrival, so a cycle of a million over thousands of requests is quick.
    let mut next: std::collections::BinaryHeap<Turn> = weights
        .iter()
        .enumerate()
        .map(|(k, w)| Turn {
            sent: 0,
            weight: u64::from(*w),
            index: k as u16,
        })
        .collect();
    let mut cycle = Vec::with_capacity(total as usize);
    for _ in 0..total {
        let mut turn = next.pop().expect("a mix holds one request at least");
        cycle.push(turn.index);
        turn.sent += 1;
        next.push(turn);
    }
    cycle
}

/// A request's place in the smooth order: its `(2 sent + 1) / weight`, the least first (the heap's
/// greatest), then the lower index.
#[derive(Debug, PartialEq, Eq)]
struct Turn {
    sent: u64,
    weight: u64,
    index: u16,
}

impl Ord for Turn {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        // (2 s_a + 1) / w_a < (2 s_b + 1) / w_b in integers; reversed so the least is the greatest.
        let a = u128::from(2 * self.sent + 1) * u128::from(o.weight);
        let b = u128::from(2 * o.sent + 1) * u128::from(self.weight);
        b.cmp(&a).then(o.index.cmp(&self.index))
    }
}

impl PartialOrd for Turn {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}

/// SplitMix64's finalizer over the seed and the arrival's index: a stateless draw per arrival.
fn hash(seed: u64, arrival: u64) -> u64 {
    let mut z = seed ^ arrival.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Uniform in [0, n) from 64 random bits (Lemire's multiply-shift).
fn below(bits: u64, n: u64) -> u64 {
    ((u128::from(bits) * u128::from(n)) >> 64) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(mix: &Mix, seed: u64, from: u64, len: u64) -> Vec<u64> {
        let mut c = vec![0; mix.len()];
        for i in from..from + len {
            c[mix.pick(i, seed)] += 1;
        }
        c
    }

    #[test]
    fn equal_weights_take_turns_in_the_order_given() {
        let mix = Mix::try_new(&[1, 1, 1, 1], UrlOrder::RoundRobin).unwrap();
        let picks: Vec<usize> = (0..8).map(|i| mix.pick(i, 0)).collect();
        assert_eq!(picks, [0, 1, 2, 3, 0, 1, 2, 3]);
    }

    #[test]
    fn every_window_of_a_cycle_s_length_holds_each_request_its_weight() {
        let weights = [5, 3, 1, 1];
        let mix = Mix::try_new(&weights, UrlOrder::RoundRobin).unwrap();
        for start in 0..25 {
            assert_eq!(
                counts(&mix, 0, start, 10),
                [5, 3, 1, 1],
                "window from {start}"
            );
        }
    }

    #[test]
    fn smooth_interleaves_rather_than_sending_in_blocks() {
        let mix = Mix::try_new(&[2, 1], UrlOrder::RoundRobin).unwrap();
        let picks: Vec<usize> = (0..6).map(|i| mix.pick(i, 0)).collect();
        assert_eq!(picks, [0, 1, 0, 0, 1, 0]);
        // Every prefix stays within one arrival of the exact share.
        let mix = Mix::try_new(&[7, 2], UrlOrder::RoundRobin).unwrap();
        let mut sent = 0.0;
        for i in 0..900u64 {
            sent += (mix.pick(i, 0) == 1) as u8 as f64;
            let exact = (i + 1) as f64 * 2.0 / 9.0;
            assert!(
                (sent - exact).abs() < 1.0,
                "after {} arrivals: {sent} vs {exact}",
                i + 1
            );
        }
    }

    #[test]
    fn random_draws_by_weight_the_same_for_the_same_seed() {
        let a = Mix::try_new(&[70, 20, 10], UrlOrder::Random).unwrap();
        let draws = |seed| (0..1000).map(|i| a.pick(i, seed)).collect::<Vec<_>>();
        assert_eq!(draws(42), draws(42));
        assert_ne!(draws(42), draws(43));
        let n = 100_000;
        let got = counts(&a, 42, 0, n);
        for (k, w) in [70.0, 20.0, 10.0].iter().enumerate() {
            let share = got[k] as f64 / n as f64 * 100.0;
            assert!(
                (share - w).abs() < 1.0,
                "request {k}: {share:.2} % for weight {w}"
            );
        }
    }

    #[test]
    fn a_large_mix_is_built_quickly_and_exactly() {
        let weights: Vec<u32> = (1..=1000).collect();
        let mix = Mix::try_new(&weights, UrlOrder::RoundRobin).unwrap();
        assert_eq!(mix.total_weight(), 500_500);
        let got = counts(&mix, 0, 77, 500_500);
        assert!(got.iter().zip(&weights).all(|(c, w)| *c == u64::from(*w)));
    }

    #[test]
    fn bad_weights_are_refused_in_words() {
        assert_eq!(
            Mix::try_new(&[1, 0], UrlOrder::RoundRobin),
            Err(PlanError::ZeroWeight(1))
        );
        let e = Mix::try_new(&[600_000, 600_000], UrlOrder::RoundRobin).unwrap_err();
        assert!(e.to_string().contains("at most 1000000"), "{e}");
        assert_eq!(
            Mix::try_new(&[], UrlOrder::Random),
            Err(PlanError::NoRequests)
        );
    }
}
