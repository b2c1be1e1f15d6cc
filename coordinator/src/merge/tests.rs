//! Tests of a step's merge (`merge.rs`): the sum of agents, what an honest share may claim, bad
//! histograms, and spills that read back or fail.
use super::*;
use shared::histogram::{self, Histogram};
use shared::metrics::{ErrorClass, Interval};

/// A report of `requests` sent, `replies` answered and `ok` served.
fn claim(requests: u64, replies: u64, ok: u64) -> pb::IntervalReport {
    pb::IntervalReport {
        counters: Some(pb::Counters {
            requests,
            replies,
            ok,
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[test]
fn an_honest_share_passes_and_a_report_past_it_or_past_its_own_requests_does_not() {
    let bound = ShareBound {
        per_sec: 100_000.0,
        total: None,
        per_arrival: 1,
    };
    // 1 s in, with the second over: 100k/s x 2 s x 1.1 + 64.
    let allowed = bound.allows(Duration::from_secs(2));
    assert_eq!(allowed, 220_064);
    let mut so_far = Counters::default();
    assert_eq!(
        check_claim(&so_far, &claim(100_000, 99_000, 98_000), allowed),
        Ok(())
    );
    so_far.requests = 200_000;
    let e = check_claim(&so_far, &claim(30_000, 0, 0), allowed).unwrap_err();
    assert!(e.contains("it claims 230000 requests"), "{e}");
    let e = check_claim(&Counters::default(), &claim(10, 11, 11), allowed).unwrap_err();
    assert!(e.contains("11 served of 11 replies to 10 requests"), "{e}");
    let mut bytes = claim(10, 10, 10);
    bytes.counters.as_mut().unwrap().bytes_in = u64::MAX;
    assert!(check_claim(&Counters::default(), &bytes, allowed).is_err());
    // A share's own request count caps it, whatever its rate.
    let counted = ShareBound {
        per_sec: 1e9,
        total: Some(50),
        per_arrival: 1,
    };
    assert_eq!(counted.allows(Duration::from_secs(10)), 114);
}

#[test]
fn a_slow_share_cannot_claim_a_fixed_thousand_more() {
    // A peer holding the token, due 10 req/s, claimed 262/s over a 10 s step and stayed
    // `valid` under the old bound (1.1x + 1,000 requests). Its slack is its own rate's now.
    let bound = ShareBound {
        per_sec: 10.0,
        total: None,
        per_arrival: 1,
    };
    // 10 s in, with the second over: 10/s x 11 s x 1.1 + 64 arrivals.
    assert_eq!(bound.allows(Duration::from_secs(11)), 185);
    let e = check_claim(&Counters::default(), &claim(2_620, 2_620, 2_620), 185).unwrap_err();
    assert!(e.contains("it claims 2620 requests"), "{e}");
    assert_eq!(
        check_claim(&Counters::default(), &claim(100, 100, 100), 185),
        Ok(())
    );
    // A `connections` arrival brings its num_call requests: the floor is in arrivals.
    let calls = ShareBound {
        per_sec: 10.0 * 50.0,
        total: None,
        per_arrival: 50,
    };
    assert_eq!(calls.allows(Duration::from_secs(1)), 550 + 64 * 50);
}

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
fn first_error_message_is_the_earliest_intervals_then_the_first_agents() {
    let mut merge = StepMerge::new(3, &std::env::temp_dir()).unwrap();
    let said = |agent: u64, seq: u32, class: ErrorClass| {
        let mut i = interval(agent, seq, false);
        i.snapshot
            .messages
            .keep(class, || format!("agent {agent} in {seq}").into());
        pb::IntervalReport::from(&i)
    };
    // Arrival order is not the order kept: agent 2's second interval arrives first.
    for (agent, seq, class) in [
        (2, 1, ErrorClass::Other),
        (1, 1, ErrorClass::Other),
        (2, 0, ErrorClass::ConnRefused),
        (1, 0, ErrorClass::ConnRefused),
        (0, 2, ErrorClass::ConnRefused),
    ] {
        merge
            .interval(agent as usize, said(agent, seq, class))
            .unwrap();
    }
    let m = merge.finish().unwrap().total.messages;
    assert_eq!(m.get(ErrorClass::Other), Some("agent 1 in 1"));
    assert_eq!(m.get(ErrorClass::ConnRefused), Some("agent 1 in 0"));
    assert_eq!(m.get(ErrorClass::ClientTimeout), None);
}

#[test]
fn three_agents_merge_to_the_sum() {
    let mut merge = StepMerge::new(3, &std::env::temp_dir()).unwrap();
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
    let p = merge.progress(1, |_| {}).unwrap().unwrap();
    assert_eq!(p.counters.requests, 10 + 11 + 12);
    assert_eq!(p.length, Duration::from_secs(1));
    assert!(merge.progress(7, |_| {}).unwrap().is_none());

    let done = merge.finish().unwrap();
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
    let hlog = read_hlog(&done.hlog);
    assert_eq!(hlog.len(), 3);
    let order: Vec<usize> = hlog[0].per_agent.iter().map(|(a, _)| *a).collect();
    assert_eq!(order, [2, 0, 1]);
    assert_eq!(hlog[2].length, Duration::from_millis(300));
}

#[test]
fn progress_is_the_merged_intervals_p99() {
    let mut merge = StepMerge::new(2, &std::env::temp_dir()).unwrap();
    let mut merged = histogram::new();
    for agent in 0..2 {
        let i = interval(agent, 0, false);
        histogram::add(&mut merged, &i.snapshot.hist.latency);
        merge.interval(agent as usize, (&i).into()).unwrap();
    }
    assert_eq!(
        merge.progress(0, |_| {}).unwrap().unwrap().p99_us,
        merged.value_at_quantile(0.99)
    );
}

#[test]
fn an_agent_that_sent_nothing_has_zeros() {
    let mut merge = StepMerge::new(2, &std::env::temp_dir()).unwrap();
    merge.interval(1, (&interval(1, 0, false)).into()).unwrap();
    let done = merge.finish().unwrap();
    assert_eq!(done.agents[0], AgentTotals::default());
    assert_eq!(done.agents[1].counters.requests, 11);
}

#[test]
fn a_bad_histogram_is_a_protocol_error_that_changes_nothing() {
    let mut merge = StepMerge::new(2, &std::env::temp_dir()).unwrap();
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
            let mut h = Histogram::<u64>::new_with_bounds(1, histogram::HIGHEST_US * 4, 3).unwrap();
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
    let done = merge.finish().unwrap();
    assert_eq!(done.agents[1], AgentTotals::default());
    assert_eq!(read_hlog(&done.hlog)[0].per_agent.len(), 1);
}

#[test]
fn a_foreign_shape_is_merged_like_the_canonical_one() {
    // An agent built elsewhere may send another shape; it is re-homed, as decoding did.
    let mut foreign = Histogram::<u64>::new_with_bounds(10, 100_000_000, 2).unwrap();
    foreign.record_n(12_345, 7).unwrap();
    let mut report: pb::IntervalReport = (&interval(0, 0, false)).into();
    report.latency = histogram::encode(&foreign);
    let want = histogram::decode(&report.latency).unwrap();
    let mut merge = StepMerge::new(1, &std::env::temp_dir()).unwrap();
    merge.interval(0, report).unwrap();
    assert_eq!(merge.finish().unwrap().total.hist.latency, want);
}

fn read_hlog(hlog: &Hlog) -> Vec<HlogInterval> {
    hlog.intervals().collect::<Result<_, _>>().unwrap()
}

#[test]
fn many_spilled_intervals_read_back_as_merged_in_memory() {
    // Every report written at once, a few at a time, and all in the buffer.
    for buffer in [0, 600, SPILL_BUFFER] {
        spilled_intervals_read_back_as_merged_in_memory(spilling(4, buffer));
    }
}

/// A merge whose spill writes out whatever its buffer holds beyond `buffer` bytes.
fn spilling(agents: usize, buffer: usize) -> StepMerge {
    let file = tempfile::tempfile().unwrap();
    StepMerge::with_spill(agents, Spill::in_file(file, std::env::temp_dir(), buffer))
}

fn spilled_intervals_read_back_as_merged_in_memory(mut merge: StepMerge) {
    // Reports of neighbouring intervals interleave in the spill (a slow agent's report of one
    // second arrives after a fast one's of the next), and the tail comes last.
    const AGENTS: usize = 4;
    const SEQS: u32 = 40;
    let mut arrivals = Vec::new();
    for seq in 0..=SEQS {
        for agent in 0..AGENTS {
            let late = u32::from(agent % 2 == 1 && seq < SEQS);
            arrivals.push((seq + late, agent, seq));
        }
    }
    arrivals.sort_by_key(|&(at, agent, _)| (at, AGENTS - agent));

    // The reference: every report's latency kept in memory, merged with `Merger` directly.
    let mut kept: BTreeMap<u32, Vec<(usize, Encoded)>> = BTreeMap::new();
    let mut total = Snapshot::default();
    for &(_, agent, seq) in &arrivals {
        let i = interval(agent as u64, seq, seq == SEQS);
        total.add(&i.snapshot);
        let report: pb::IntervalReport = (&i).into();
        let latency = Encoded::parse(report.latency.clone()).unwrap();
        kept.entry(seq).or_default().push((agent, latency));
        merge.interval(agent, report).unwrap();
    }
    let mut reference = Merger::default();
    for (seq, reports) in &kept {
        let want = reference.merge(reports.iter().map(|(_, h)| h));
        let got = merge.progress(*seq, |_| {}).unwrap().unwrap();
        assert_eq!(got.p99_us, want.value_at_quantile(0.99), "seq {seq}");
    }

    let done = merge.finish().unwrap();
    assert_eq!(done.total.counters, total.counters);
    assert_eq!(done.total.hist.latency, total.hist.latency);
    assert_eq!(done.series.len(), SEQS as usize);
    for (agent, got) in done.agents.iter().enumerate() {
        let mine = kept.values().flatten().filter(|(a, _)| *a == agent);
        let want = LatencyStats::of(reference.merge(mine.map(|(_, h)| h)));
        assert_eq!(got.latency_ms, want, "agent {agent}");
    }
    let hlog = read_hlog(&done.hlog);
    assert_eq!(hlog.len(), kept.len());
    for (got, (seq, want)) in hlog.iter().zip(&kept) {
        assert_eq!(got.offset, Duration::from_secs(u64::from(*seq)));
        let bytes = |v: &[(usize, Encoded)]| -> Vec<(usize, Vec<u8>)> {
            v.iter().map(|(a, h)| (*a, h.as_bytes().to_vec())).collect()
        };
        assert_eq!(bytes(&got.per_agent), bytes(want), "seq {seq}");
    }
}

#[test]
fn a_spill_that_does_not_read_back_is_an_error() {
    // With no buffer, each report is written out when the next arrives.
    let mut merge = spilling(2, 0);
    for agent in 0..2 {
        merge
            .interval(agent, (&interval(agent as u64, 0, false)).into())
            .unwrap();
    }
    // Cut short, as a full disk that lost a write-back would.
    merge.spill.file.set_len(10).unwrap();
    let e = merge.progress(0, |_| {}).unwrap_err();
    assert!(matches!(e, SpillError::Read { .. }), "{e:?}");
    assert!(
        e.to_string().contains("cannot read the step's latency"),
        "{e}"
    );
    assert!(merge.finish().is_err());

    // Overwritten: parsed again on the way back, so an error rather than a wrong merge.
    let mut merge = spilling(1, 0);
    merge.interval(0, (&interval(0, 0, false)).into()).unwrap();
    merge.interval(0, (&interval(0, 1, false)).into()).unwrap();
    let done = merge.finish().unwrap();
    done.hlog.spill.file.write_all_at(b"garbage!", 0).unwrap();
    let e = done.hlog.intervals().next().unwrap().unwrap_err();
    assert!(matches!(e, SpillError::Damaged { .. }), "{e:?}");
    // The .hlog writer fails with it, naming its file.
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("hlog")).unwrap();
    let names = ["a".to_string()];
    let started = std::time::SystemTime::now();
    let e = crate::output::write_hlog(dir.path(), 4, started, done.hlog.intervals(), &names)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("step-004.hlog") && e.contains("is damaged"),
        "{e}"
    );
}

#[test]
fn a_report_that_cannot_be_spilled_is_an_error_that_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("spill");
    std::fs::write(&path, b"").unwrap();
    let read_only = File::open(&path).unwrap();
    let mut merge = StepMerge::with_spill(1, Spill::in_file(read_only, dir.path().into(), 0));
    // The first report waits in the buffer; the second one's arrival writes it out, and fails.
    merge.interval(0, (&interval(0, 0, false)).into()).unwrap();
    let before = *merge.counters();
    let e = merge
        .interval(0, (&interval(0, 1, false)).into())
        .unwrap_err();
    assert!(
        matches!(e, IntervalError::Spill(SpillError::Write { .. })),
        "{e:?}"
    );
    assert!(e.to_string().contains("free space there"), "{e}");
    assert_eq!(*merge.counters(), before);
    assert!(merge.progress(1, |_| {}).unwrap().is_none());
    assert!(merge.progress(0, |_| {}).unwrap().is_some());
    // A later write fails the same way, and still adds nothing.
    assert!(merge.interval(0, (&interval(0, 2, false)).into()).is_err());
    let done = merge.finish().unwrap();
    assert_eq!(done.agents[0].counters, before);
    assert_eq!(done.hlog.len(), 1);
}

/// Agent `agent`'s report of interval `seq` with a mix of `names` requests: name k has k + 1 + agent
/// latencies around (k + 1) ms; the agent's own name (`agent % names`) it never sent.
fn named(agent: u64, seq: u32, names: u16) -> pb::IntervalReport {
    let mut i = interval(agent, seq, false);
    i.snapshot.names = (0..names)
        .map(|k| {
            let mut n = shared::metrics::NameStats::default();
            if u64::from(k) != agent % u64::from(names) {
                for x in 0..u64::from(k) + 1 + agent {
                    n.latency
                        .record(1_000 * (u64::from(k) + 1) + 7 * x + u64::from(seq))
                        .unwrap();
                }
                n.failed.record(90_000).unwrap();
                n.counters.requests = u64::from(k) + 1 + agent;
            }
            n
        })
        .collect();
    (&i).into()
}

#[test]
fn named_latencies_read_back_per_interval_and_name_as_merged_in_memory() {
    const NAMES: u16 = 5;
    const AGENTS: usize = 3;
    for buffer in [0, 600, SPILL_BUFFER] {
        let mut merge = spilling(AGENTS, buffer).with_names(usize::from(NAMES));
        // The reference: (seq, name) -> every report's latency of that name, in memory.
        let mut kept: BTreeMap<(u32, usize), Vec<Encoded>> = BTreeMap::new();
        for seq in 0..4 {
            for agent in 0..AGENTS {
                let report = named(agent as u64, seq, NAMES);
                for n in &report.names {
                    let e = Encoded::parse(n.latency.clone()).unwrap();
                    kept.entry((seq, n.index as usize)).or_default().push(e);
                }
                merge.interval(agent, report).unwrap();
            }
        }
        let done = merge.finish().unwrap();
        assert_eq!(done.hlog.names(), usize::from(NAMES));
        let mut reference = Merger::default();
        let mut got_merger = Merger::default();
        // All names at once, a batch in the middle, and a range past the names (clamped).
        for range in [0..5, 2..4, 4..9] {
            let read: Vec<_> = done
                .hlog
                .name_intervals(range.clone())
                .collect::<Result<_, _>>()
                .unwrap();
            assert_eq!(read.len(), 4);
            for (seq, i) in read.iter().enumerate() {
                assert_eq!(i.offset, Duration::from_secs(seq as u64));
                assert_eq!(i.per_name.len(), range.end.min(5) - range.start);
                for (k, reports) in i.per_name.iter().enumerate() {
                    let name = range.start + k;
                    let want = kept.get(&(seq as u32, name)).map_or(&[][..], |v| &v[..]);
                    // Agent `name % 3` never sent name `name`... when it is one of the three.
                    assert_eq!(reports.len(), want.len(), "seq {seq} name {name}");
                    let want = reference.merge(want).clone();
                    assert_eq!(*got_merger.merge(reports), want, "seq {seq} name {name}");
                }
            }
        }
        // The step's per-name totals are the sum of the per-interval ones.
        for name in 0..usize::from(NAMES) {
            let all = kept
                .iter()
                .filter(|((_, n), _)| *n == name)
                .flat_map(|(_, v)| v);
            let want = reference.merge(all);
            assert_eq!(done.total.names[name].latency, *want, "name {name}");
        }
    }
}

#[test]
fn an_unnamed_step_spills_no_name_frames_and_has_no_named_hlog() {
    let mut merge = spilling(1, 0);
    merge.interval(0, (&interval(0, 0, false)).into()).unwrap();
    let done = merge.finish().unwrap();
    assert_eq!(done.hlog.names(), 0);
    assert!(done.hlog.intervals[0].names.is_empty());
    let read: Vec<_> = done.hlog.name_intervals(0..16).collect();
    assert!(read[0].as_ref().unwrap().per_name.is_empty());
}

#[test]
fn a_damaged_name_frame_is_an_error_naming_its_file() {
    for garbage in [
        &b"\x01\x00\xff\xff\xff\x7f"[..],
        &b"\x00\x00\x08\x00\x00\x00garbage!"[..],
    ] {
        let mut merge = spilling(1, 0).with_names(2);
        merge.interval(0, named(0, 0, 2)).unwrap();
        merge.interval(0, named(0, 1, 2)).unwrap();
        let done = merge.finish().unwrap();
        let frame = done.hlog.intervals[0].names[0];
        done.hlog
            .spill
            .file
            .write_all_at(garbage, frame.at)
            .unwrap();
        let e = done.hlog.name_intervals(0..2).next().unwrap().unwrap_err();
        assert!(matches!(e, SpillError::Damaged { .. }), "{e:?}");
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("hlog")).unwrap();
        let names = ["a".to_string(), "b".to_string()];
        let started = std::time::SystemTime::now();
        let e = crate::output::write_name_hlogs(dir.path(), 2, started, &names, |r| {
            done.hlog.name_intervals(r)
        })
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("step-002.a.hlog") && e.contains("is damaged"),
            "{e}"
        );
        assert_eq!(
            std::fs::read_dir(dir.path().join("hlog")).unwrap().count(),
            0
        );
    }
}
