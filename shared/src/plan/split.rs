//! How a step's arrival sequence is dealt out: to agents in proportion to their weights, then to each
//! agent's worker threads evenly, so that together they send every arrival exactly once.
//!
//! The agents sit at the leaves of a balanced binary tree. Each fork deals its parent's sequence
//! between its two subtrees by weight, Bresenham-style: of the first `n` arrivals, `ceil(n L / W)` go
//! left and the rest right (`W = L + R`). So any prefix is shared within one arrival per fork of the
//! exact proportion (spread out, not in blocks), and the `j`-th arrival of a child is found in its
//! parent's sequence by one multiplication and one division. An agent's share is the path to its leaf:
//! O(log agents) numbers to send and O(log agents) arithmetic per arrival, whatever the weights.
use super::PlanError;

/// The most forks a path may have: a balanced tree over any number of agents that fits a `u64` is
/// no deeper, and a coordinator's message with more is refused.
pub const MAX_FORKS: usize = 64;

/// Which side of a fork a path takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ForkSide {
    Left,
    Right,
}

/// One fork on the way from the whole step to an agent: its parent's arrivals are dealt `left : right`,
/// and the path continues on `side`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fork {
    left: u64,
    right: u64,
    side: ForkSide,
}

impl Fork {
    /// Both weights positive (a fork with an empty side is no fork) and their sum within 64 bits, so
    /// the arithmetic in [`Slice::arrival`] cannot overflow.
    pub fn try_new(left: u64, right: u64, side: ForkSide) -> Result<Fork, PlanError> {
        if left == 0 || right == 0 || left.checked_add(right).is_none() {
            return Err(PlanError::BadFork { left, right });
        }
        Ok(Fork { left, right, side })
    }

    pub fn left(&self) -> u64 {
        self.left
    }

    pub fn right(&self) -> u64 {
        self.right
    }

    pub fn side(&self) -> ForkSide {
        self.side
    }

    fn total(&self) -> u64 {
        self.left + self.right
    }

    /// The parent's index of this side's `j`-th arrival, or None past `u64` (no schedule gets there).
    fn up(&self, j: u64) -> Option<u64> {
        let (j, w) = (u128::from(j), u128::from(self.total()));
        let (numerator, divisor) = match self.side {
            // The j-th k with ceil((k+1) L / W) > ceil(k L / W): k = floor(j W / L).
            ForkSide::Left => (j * w, self.left),
            // The j-th k with floor((k+1) R / W) > floor(k R / W): k = ceil((j+1) W / R) - 1.
            ForkSide::Right => ((j + 1) * w - 1, self.right),
        };
        // A 64-bit division where it fits (every arrival of a real step): a 128-bit one costs more.
        match u64::try_from(numerator) {
            Ok(n) => Some(n / divisor),
            Err(_) => u64::try_from(numerator / u128::from(divisor)).ok(),
        }
    }

    /// How many of the parent's first `n` arrivals fall on this side.
    fn down(&self, n: u64) -> u64 {
        let (n, w) = (u128::from(n), u128::from(self.total()));
        let mine = match self.side {
            ForkSide::Left => (n * u128::from(self.left)).div_ceil(w),
            ForkSide::Right => n * u128::from(self.right) / w,
        };
        // At most n, so it fits.
        mine as u64
    }
}

/// A part of a step's arrival sequence (arrivals numbered 0, 1, ... in time order): the arrivals at
/// the end of `forks`, and of those every `count`-th from `index` (a worker's part of its agent's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Slice {
    forks: Vec<Fork>,
    index: u64,
    count: u64,
}

impl Slice {
    pub const WHOLE: Slice = Slice {
        forks: Vec::new(),
        index: 0,
        count: 1,
    };

    /// An agent's share as received: the path from the root, checked. The empty path is the whole.
    pub fn try_from_forks(forks: Vec<Fork>) -> Result<Slice, PlanError> {
        if forks.len() > MAX_FORKS {
            return Err(PlanError::TooManyForks {
                found: forks.len(),
                max: MAX_FORKS,
            });
        }
        Ok(Slice {
            forks,
            index: 0,
            count: 1,
        })
    }

    /// One slice per agent, in proportion to `weights`, partitioning the whole sequence. A weight of 0
    /// counts as 1: every agent listed takes part. Costs O(agents log agents), nothing in the weights.
    pub fn among(weights: &[u64]) -> Vec<Slice> {
        let weights: Vec<u128> = weights.iter().map(|w| u128::from((*w).max(1))).collect();
        let mut out = vec![Slice::WHOLE; weights.len()];
        deal(&weights, &mut out, &mut Vec::new());
        out
    }

    pub fn forks(&self) -> &[Fork] {
        &self.forks
    }

    /// Part `index` of `count` parts of this slice: every `count`-th of its arrivals from its
    /// `index`-th. `index < count`; both are a worker's place among its agent's threads.
    pub fn part(&self, index: u64, count: u64) -> Slice {
        Slice {
            forks: self.forks.clone(),
            index: self.index + self.count * index,
            count: self.count * count,
        }
    }

    /// The step's index of this slice's `j`-th arrival, or None past `u64`. Increasing in `j`.
    pub fn arrival(&self, j: u64) -> Option<u64> {
        let mut k = self.count.checked_mul(j)?.checked_add(self.index)?;
        for fork in self.forks.iter().rev() {
            k = fork.up(k)?;
        }
        Some(k)
    }

    /// How many of the step's first `total` arrivals fall in this slice.
    pub fn share_of(&self, total: u64) -> u64 {
        let mine = self.forks.iter().fold(total, |n, fork| fork.down(n));
        if mine <= self.index {
            0
        } else {
            (mine - self.index).div_ceil(self.count)
        }
    }

    /// The part of the step's arrivals this slice sends, in the long run.
    pub fn fraction(&self) -> f64 {
        let path: f64 = self
            .forks
            .iter()
            .map(|f| {
                let mine = match f.side {
                    ForkSide::Left => f.left,
                    ForkSide::Right => f.right,
                };
                mine as f64 / f.total() as f64
            })
            .product();
        path / self.count as f64
    }

    /// A number telling this slice apart from every other slice of the same split, to seed its own
    /// random stream. The whole's parts keep their index, as before agents had paths.
    pub fn key(&self) -> u64 {
        let path = self.forks.iter().fold(0u64, |h, f| {
            let z = (h ^ (1 + f.side as u64)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z ^ (z >> 29)
        });
        self.index ^ path
    }
}

/// Builds the balanced tree over `weights` (the agents at `out`), pushing each fork on `path`.
fn deal(weights: &[u128], out: &mut [Slice], path: &mut Vec<Fork>) {
    if weights.len() <= 1 {
        if let Some(slice) = out.first_mut() {
            slice.forks = path.clone();
        }
        return;
    }
    let mid = weights.len() / 2;
    let (left, right) = fork_weights(weights[..mid].iter().sum(), weights[mid..].iter().sum());
    for (side, range) in [
        (ForkSide::Left, 0..mid),
        (ForkSide::Right, mid..weights.len()),
    ] {
        path.push(Fork { left, right, side });
        deal(&weights[range.clone()], &mut out[range], path);
        path.pop();
    }
}

/// A fork's weights in lowest terms (the dealing depends only on their ratio), and, for sums beyond
/// 64 bits, scaled down until they fit: the ratio is then kept to 63 bits, and the split stays exact.
fn fork_weights(left: u128, right: u128) -> (u64, u64) {
    let g = gcd(left, right);
    let (mut l, mut r) = (left / g, right / g);
    while l + r > u128::from(u64::MAX) {
        l = (l >> 1).max(1);
        r = (r >> 1).max(1);
    }
    (l as u64, r as u64)
}

fn gcd(mut a: u128, mut b: u128) -> u128 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a.max(1)
}

/// Splits `total` in proportion to `weights` so that the parts sum to `total` exactly (largest remainder).
pub fn split_proportional(total: u64, weights: &[u64]) -> Vec<u64> {
    let sum: u128 = weights.iter().map(|w| u128::from(*w)).sum();
    if sum == 0 {
        return vec![0; weights.len()];
    }
    let exact = |w: u64| u128::from(total) * u128::from(w);
    // Each part is at most `total`, so it fits.
    let mut parts: Vec<u64> = weights.iter().map(|w| (exact(*w) / sum) as u64).collect();
    let mut rest = total - parts.iter().sum::<u64>();
    let mut order: Vec<usize> = (0..weights.len()).collect();
    // Largest remainder first; ties go to the earlier agent.
    order.sort_by_key(|&i| std::cmp::Reverse(exact(weights[i]) % sum));
    for i in order {
        if rest == 0 {
            break;
        }
        parts[i] += 1;
        rest -= 1;
    }
    parts
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Every slice's first arrivals, up to index `n` of the step, by counting up from `arrival(0)`.
    fn arrivals_below(s: &Slice, n: u64) -> Vec<u64> {
        (0..)
            .map_while(|j| s.arrival(j).filter(|g| *g < n))
            .collect()
    }

    #[test]
    fn weights_of_a_billion_to_one_split_in_constant_memory() {
        // Regression: the old split dealt out sum(weights) positions one by one, and each agent
        // carried one slice per position: 23 GB and a hang for two agents weighted 1e9 and 1.
        let at = std::time::Instant::now();
        let shares = Slice::among(&[1_000_000_000, 1]);
        assert!(at.elapsed() < std::time::Duration::from_millis(100));
        assert_eq!(shares.len(), 2);
        assert!(shares.iter().all(|s| s.forks().len() == 1));
        let (big, small) = (&shares[0], &shares[1]);
        // The small agent sends one in every 1e9 + 1 arrivals, the last of each block.
        assert_eq!(small.arrival(0), Some(1_000_000_000));
        assert_eq!(small.arrival(1), Some(2_000_000_001));
        assert_eq!(small.arrival(2), Some(3_000_000_002));
        assert_eq!(big.arrival(0), Some(0));
        assert_eq!(big.arrival(999_999_999), Some(999_999_999));
        assert_eq!(big.arrival(1_000_000_000), Some(1_000_000_001));
        assert_eq!(big.share_of(1_000_000_001), 1_000_000_000);
        assert_eq!(small.share_of(1_000_000_001), 1);
        assert_eq!(small.share_of(1_000_000_000), 0);
        // A worker's part of the big agent's share costs the same.
        assert_eq!(big.part(1, 2).arrival(500_000_000), Some(1_000_000_002));
        assert!((small.fraction() - 1e-9).abs() < 1e-15);
    }

    #[test]
    fn weights_are_taken_in_lowest_terms_and_far_past_a_u64_sum() {
        assert_eq!(Slice::among(&[6, 9]), Slice::among(&[2, 3]));
        let f = Slice::among(&[6, 9])[0].forks()[0];
        assert_eq!((f.left(), f.right()), (2, 3));
        let huge = Slice::among(&[u64::MAX, u64::MAX, 1]);
        let counts: Vec<u64> = huge.iter().map(|s| s.share_of(1_000_000)).collect();
        assert_eq!(counts.iter().sum::<u64>(), 1_000_000);
        assert!(
            counts[0].abs_diff(500_000) <= 1 && counts[2] <= 1,
            "{counts:?}"
        );
    }

    #[test]
    fn small_splits_are_dealt_as_expected() {
        let deal = |w: &[u64], n| -> Vec<usize> {
            let s = Slice::among(w);
            (0..n)
                .map(|g| {
                    s.iter()
                        .position(|s| arrivals_below(s, n).contains(&g))
                        .unwrap()
                })
                .collect()
        };
        assert_eq!(deal(&[1, 1], 4), vec![0, 1, 0, 1]);
        assert_eq!(deal(&[1, 3], 8), vec![0, 1, 1, 1, 0, 1, 1, 1]);
        assert_eq!(deal(&[1], 3), vec![0, 0, 0]);
        assert_eq!(deal(&[1, 1, 1], 6), vec![0, 1, 2, 0, 1, 2]);
    }

    #[test]
    fn bad_forks_are_refused() {
        assert!(Fork::try_new(0, 1, ForkSide::Left).is_err());
        assert!(Fork::try_new(1, 0, ForkSide::Right).is_err());
        assert!(Fork::try_new(u64::MAX, 1, ForkSide::Right).is_err());
        assert!(Fork::try_new(u64::MAX - 1, 1, ForkSide::Right).is_ok());
        let fork = Fork::try_new(1, 1, ForkSide::Left).unwrap();
        assert!(Slice::try_from_forks(vec![fork; MAX_FORKS]).is_ok());
        assert!(Slice::try_from_forks(vec![fork; MAX_FORKS + 1]).is_err());
        // Deep paths of extreme forks end the sequence instead of overflowing.
        let thin = Fork::try_new(1, u64::MAX - 1, ForkSide::Left).unwrap();
        let deep = Slice::try_from_forks(vec![thin; 3]).unwrap();
        assert_eq!(deep.arrival(0), Some(0));
        assert_eq!(deep.arrival(1), None);
        assert_eq!(deep.share_of(u64::MAX), 1);
    }

    #[test]
    fn keys_tell_every_worker_of_every_agent_apart() {
        let mut keys: Vec<u64> = Slice::among(&[1; 100])
            .iter()
            .flat_map(|s| (0..16).map(|w| s.part(w, 16).key()))
            .collect();
        keys.sort_unstable();
        keys.dedup();
        assert_eq!(keys.len(), 1600);
        assert_eq!(Slice::WHOLE.part(3, 4).key(), 3);
    }

    #[test]
    fn proportional_split_sums_exactly() {
        assert_eq!(split_proportional(10, &[1, 1, 1]), vec![4, 3, 3]);
        assert_eq!(split_proportional(7, &[2, 4, 2]), vec![2, 3, 2]);
        assert_eq!(split_proportional(0, &[3, 1]), vec![0, 0]);
        assert_eq!(split_proportional(5, &[0, 0]), vec![0, 0]);
        assert_eq!(
            split_proportional(u64::MAX, &[u64::MAX, 1]),
            vec![u64::MAX - 1, 1]
        );
        for total in 0..50 {
            assert_eq!(
                split_proportional(total, &[3, 5, 1, 7]).iter().sum::<u64>(),
                total
            );
        }
    }

    fn weights() -> impl Strategy<Value = Vec<u64>> {
        let one = prop_oneof![
            1u64..5,
            1u64..1000,
            Just(1_000_000_000),
            1u64..=u64::MAX / 4
        ];
        proptest::collection::vec(one, 1..9)
    }

    proptest! {
        // The agents' slices, and their workers' parts, together hold every arrival exactly once.
        #[test]
        fn agents_and_workers_partition_the_whole(weights in weights(), workers in 1u64..5, n in 0u64..400) {
            let mut all: Vec<u64> = Slice::among(&weights)
                .iter()
                .flat_map(|s| (0..workers).map(move |w| s.part(w, workers)))
                .flat_map(|p| {
                    let got = arrivals_below(&p, n);
                    assert_eq!(got.len() as u64, p.share_of(n), "counted as listed");
                    got
                })
                .collect();
            all.sort_unstable();
            prop_assert_eq!(all, (0..n).collect::<Vec<_>>());
        }

        // Any prefix is shared within one arrival per fork of the exact proportion.
        #[test]
        fn prefixes_are_shared_nearly_in_proportion(weights in weights(), n in 0u64..u64::MAX / 2) {
            let slices = Slice::among(&weights);
            let sum: f64 = weights.iter().map(|w| *w as f64).sum();
            let mut counted = 0u64;
            for (s, w) in slices.iter().zip(&weights) {
                let exact = n as f64 * *w as f64 / sum;
                let mine = s.share_of(n);
                counted += mine;
                let slack = s.forks().len() as f64 + exact * 1e-12 + 1e-6;
                prop_assert!((mine as f64 - exact).abs() <= slack, "{mine} vs {exact} of {n}");
            }
            prop_assert_eq!(counted, n);
        }

        // Counting a slice's arrivals below n agrees with listing them (the schedule relies on both).
        #[test]
        fn arrival_and_share_of_agree(weights in weights(), agent in 0usize..8, j in 0u64..1_000_000) {
            let slices = Slice::among(&weights);
            let s = &slices[agent % slices.len()];
            if let Some(g) = s.arrival(j) {
                prop_assert_eq!(s.share_of(g), j);
                prop_assert_eq!(s.share_of(g + 1), j + 1);
            }
        }
    }
}
