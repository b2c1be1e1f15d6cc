//! One step's merge: every agent's interval reports added into the step's totals as they arrive, at a
//! cost proportional to what the agents recorded, not to the histograms' size or the number of agents
//! times it. `run_step` owns the fleet and the loss policy and feeds this; this owns the merged state.
//!
//! Memory is what the summary and the .hlog need: the fleet's five total histograms, counters per
//! agent and per interval, and each report's latency as it arrived (checked V2 bytes, a few KB). No
//! agent's histograms are kept decoded: its latency statistics are merged from its bytes at `finish`,
//! one agent at a time into one scratch histogram.
use std::collections::BTreeMap;
use std::time::Duration;

use proto::{ConvertError, pb};
use shared::histogram::{Encoded, Merger};
use shared::metrics::{Counters, EncodedInterval, HistogramSums, Snapshot};
use shared::report::{IntervalSample, LatencyStats};

use crate::output::HlogInterval;

/// What one agent contributed to the step, beyond its latency bytes.
#[derive(Debug, Clone, Copy, Default)]
struct AgentSums {
    counters: Counters,
    cpu_ns: u64,
}

/// One interval (`seq`) of the fleet.
#[derive(Default)]
struct Seq {
    offset: Duration,
    length: Duration,
    tail: bool,
    reports: usize,
    counters: Counters,
    /// Each report's latency, in arrival order: for progress, per-agent statistics and the .hlog.
    latency: Vec<(usize, Encoded)>,
}

/// The merge of one step over a fleet of `agents` (indexed as the fleet indexes them).
pub struct StepMerge {
    counters: Counters,
    cpu_ns: u64,
    hist: HistogramSums,
    agents: Vec<AgentSums>,
    seqs: BTreeMap<u32, Seq>,
    /// Reused for every latency merged only to be read (progress, per-agent statistics).
    scratch: Merger,
}

/// What one report changed: its interval, and how many reports of it have arrived so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Merged {
    pub seq: u32,
    pub reports: usize,
    pub tail: bool,
}

/// One interval of the fleet as the progress line shows it.
#[derive(Debug, Clone, Copy)]
pub struct SeqProgress {
    pub offset: Duration,
    pub length: Duration,
    pub counters: Counters,
    pub p99_us: u64,
}

/// One agent's step, as the summary takes it.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct AgentTotals {
    pub counters: Counters,
    pub cpu_ns: u64,
    pub latency_ms: LatencyStats,
}

/// A finished step's merge: what `summarize` and the .hlog writer need.
pub struct StepTotals {
    pub total: Snapshot,
    /// The full (non-tail) intervals in order, for the reply-rate series.
    pub series: Vec<IntervalSample>,
    /// Indexed like the fleet; an agent that sent nothing has zeros.
    pub agents: Vec<AgentTotals>,
    pub hlog: Vec<HlogInterval>,
}

impl StepMerge {
    pub fn new(agents: usize) -> StepMerge {
        StepMerge {
            counters: Counters::default(),
            cpu_ns: 0,
            hist: HistogramSums::default(),
            agents: vec![AgentSums::default(); agents],
            seqs: BTreeMap::new(),
            scratch: Merger::default(),
        }
    }

    /// Adds agent `agent`'s report. A report that does not convert (a malformed or out-of-range
    /// histogram, missing counters) changes nothing and is the caller's protocol error.
    pub fn interval(
        &mut self,
        agent: usize,
        report: pb::IntervalReport,
    ) -> Result<Merged, ConvertError> {
        // Everything is checked here, before anything is added, so a bad report leaves no trace.
        let i = EncodedInterval::try_from(report)?;
        self.counters.add(&i.counters);
        self.cpu_ns += i.cpu_ns;
        self.hist.add(&i.hist);
        let sums = &mut self.agents[agent];
        sums.counters.add(&i.counters);
        sums.cpu_ns += i.cpu_ns;
        let seq = self.seqs.entry(i.seq).or_default();
        seq.offset = i.offset;
        seq.length = seq.length.max(i.length);
        seq.tail |= i.tail;
        seq.reports += 1;
        seq.counters.add(&i.counters);
        seq.latency.push((agent, i.hist.latency));
        Ok(Merged {
            seq: i.seq,
            reports: seq.reports,
            tail: seq.tail,
        })
    }

    /// The step's counters so far, summed over every report.
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// Interval `seq` as it stands: its counters and its merged latency's p99. Merges that interval's
    /// reports again, so call it once, when the interval is complete and someone is watching.
    pub fn progress(&mut self, seq: u32) -> Option<SeqProgress> {
        let s = self.seqs.get(&seq)?;
        let merged = self.scratch.merge(s.latency.iter().map(|(_, h)| h));
        Some(SeqProgress {
            offset: s.offset,
            length: s.length,
            counters: s.counters,
            p99_us: merged.value_at_quantile(0.99),
        })
    }

    pub fn finish(self) -> StepTotals {
        let StepMerge {
            counters,
            cpu_ns,
            hist,
            agents,
            seqs,
            mut scratch,
        } = self;
        let total = Snapshot {
            counters,
            hist: hist.to_histograms(),
            cpu_ns,
        };
        let mut latency: Vec<Vec<&Encoded>> = vec![Vec::new(); agents.len()];
        for s in seqs.values() {
            for (agent, h) in &s.latency {
                latency[*agent].push(h);
            }
        }
        let agents = agents
            .iter()
            .zip(&latency)
            .map(|(sums, latency)| AgentTotals {
                counters: sums.counters,
                cpu_ns: sums.cpu_ns,
                latency_ms: LatencyStats::of(scratch.merge(latency.iter().copied())),
            })
            .collect();
        drop(latency);
        let series = seqs
            .values()
            .filter(|s| !s.tail)
            .map(|s| IntervalSample {
                length: s.length,
                replies: s.counters.replies,
            })
            .collect();
        let hlog = seqs
            .into_values()
            .map(|s| HlogInterval {
                offset: s.offset,
                length: s.length,
                per_agent: s.latency,
            })
            .collect();
        StepTotals {
            total,
            series,
            agents,
            hlog,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shared::histogram::{self, Histogram};
    use shared::metrics::{ErrorClass, Interval};

    /// Agent `agent`'s report of interval `seq`: a few latencies and counters that differ per agent.
    fn interval(agent: u64, seq: u32, tail: bool) -> Interval {
        let mut s = Snapshot::default();
        s.counters.requests = 10 + agent;
        s.counters.replies = 9 + agent;
        s.counters.record_status(200);
        s.counters.record_error(ErrorClass::ConnReset);
        s.cpu_ns = 1_000 * (agent + 1);
        for k in 0..50 {
            s.hist
                .latency
                .record(1_000 * (agent + 1) + k * 37 + u64::from(seq))
                .unwrap();
            s.hist.ttfb.record(500 + k).unwrap();
            s.hist.lag.record(10 * agent + k).unwrap();
        }
        s.hist.connect.record(300 + agent).unwrap();
        s.hist.wait.record(2_000 * agent).unwrap();
        Interval {
            step: 0,
            seq,
            offset: Duration::from_secs(u64::from(seq)),
            length: if tail {
                Duration::from_millis(300)
            } else {
                Duration::from_secs(1)
            },
            tail,
            snapshot: s,
        }
    }

    #[test]
    fn three_agents_merge_to_the_sum() {
        let mut merge = StepMerge::new(3);
        let mut total = Snapshot::default();
        let mut per_agent = vec![Snapshot::default(); 3];
        let mut last = None;
        for seq in 0..3 {
            for agent in [2usize, 0, 1] {
                let i = interval(agent as u64, seq, seq == 2);
                total.add(&i.snapshot);
                per_agent[agent].add(&i.snapshot);
                last = Some(merge.interval(agent, (&i).into()).unwrap());
            }
        }
        assert_eq!(
            last,
            Some(Merged {
                seq: 2,
                reports: 3,
                tail: true
            })
        );
        let p = merge.progress(1).unwrap();
        assert_eq!(p.counters.requests, 10 + 11 + 12);
        assert_eq!(p.length, Duration::from_secs(1));
        assert!(merge.progress(7).is_none());

        let done = merge.finish();
        assert_eq!(done.total.counters, total.counters);
        assert_eq!(done.total.cpu_ns, total.cpu_ns);
        let h = &done.total.hist;
        assert_eq!(h.latency, total.hist.latency);
        assert_eq!(h.connect, total.hist.connect);
        assert_eq!(h.ttfb, total.hist.ttfb);
        assert_eq!(h.lag, total.hist.lag);
        assert_eq!(h.wait, total.hist.wait);
        for (a, want) in done.agents.iter().zip(&per_agent) {
            assert_eq!(a.counters, want.counters);
            assert_eq!(a.cpu_ns, want.cpu_ns);
            assert_eq!(a.latency_ms, LatencyStats::of(&want.hist.latency));
        }
        // The tail counts in the totals but not in the rate series.
        assert_eq!(done.series.len(), 2);
        assert_eq!(done.series[0].replies, 9 + 10 + 11);
        assert_eq!(done.hlog.len(), 3);
        let order: Vec<usize> = done.hlog[0].per_agent.iter().map(|(a, _)| *a).collect();
        assert_eq!(order, [2, 0, 1]);
        assert_eq!(done.hlog[2].length, Duration::from_millis(300));
    }

    #[test]
    fn progress_is_the_merged_intervals_p99() {
        let mut merge = StepMerge::new(2);
        let mut merged = histogram::new();
        for agent in 0..2 {
            let i = interval(agent, 0, false);
            histogram::add(&mut merged, &i.snapshot.hist.latency);
            merge.interval(agent as usize, (&i).into()).unwrap();
        }
        assert_eq!(
            merge.progress(0).unwrap().p99_us,
            merged.value_at_quantile(0.99)
        );
    }

    #[test]
    fn an_agent_that_sent_nothing_has_zeros() {
        let mut merge = StepMerge::new(2);
        merge.interval(1, (&interval(1, 0, false)).into()).unwrap();
        let done = merge.finish();
        assert_eq!(done.agents[0], AgentTotals::default());
        assert_eq!(done.agents[1].counters.requests, 11);
    }

    #[test]
    fn a_bad_histogram_is_a_protocol_error_that_changes_nothing() {
        let mut merge = StepMerge::new(2);
        merge.interval(0, (&interval(0, 0, false)).into()).unwrap();
        let before = *merge.counters();
        for (what, corrupt) in [
            ("garbage", b"not a histogram".to_vec()),
            ("truncated", {
                let mut b = histogram::encode(&interval(1, 0, false).snapshot.hist.lag);
                b.truncate(b.len() - 1);
                b
            }),
            ("out of range", {
                let mut h =
                    Histogram::<u64>::new_with_bounds(1, histogram::HIGHEST_US * 4, 3).unwrap();
                h.record(5).unwrap();
                histogram::encode(&h)
            }),
        ] {
            let mut report: pb::IntervalReport = (&interval(1, 0, false)).into();
            report.lag = corrupt;
            let e = merge.interval(1, report).unwrap_err();
            assert!(e.to_string().starts_with("lag histogram:"), "{what}: {e}");
        }
        assert_eq!(*merge.counters(), before);
        let done = merge.finish();
        assert_eq!(done.agents[1], AgentTotals::default());
        assert_eq!(done.hlog[0].per_agent.len(), 1);
    }

    #[test]
    fn a_foreign_shape_is_merged_like_the_canonical_one() {
        // An agent built elsewhere may send another shape; it is re-homed, as decoding did.
        let mut foreign = Histogram::<u64>::new_with_bounds(10, 100_000_000, 2).unwrap();
        foreign.record_n(12_345, 7).unwrap();
        let mut report: pb::IntervalReport = (&interval(0, 0, false)).into();
        report.latency = histogram::encode(&foreign);
        let want = histogram::decode(&report.latency).unwrap();
        let mut merge = StepMerge::new(1);
        merge.interval(0, report).unwrap();
        assert_eq!(merge.finish().total.hist.latency, want);
    }
}
