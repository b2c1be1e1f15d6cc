//! Tests of the results directory (`output.rs`): hlog, hgrm, reuse of a directory, what run.json
//! says.
use super::*;
use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};
use shared::histogram;

#[test]
fn hlog_is_readable_by_the_standard_reader() {
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir_all(dir.path().join("hlog")).unwrap();
    let mut a = histogram::new();
    a.record(20_000).unwrap();
    let mut b = histogram::new();
    b.record_n(5_000, 3).unwrap();
    let enc = |h| Encoded::parse(histogram::encode(h)).unwrap();
    let intervals = vec![HlogInterval {
        offset: Duration::from_secs(0),
        length: Duration::from_secs(1),
        per_agent: vec![(1, enc(&a)), (0, enc(&b))],
    }];
    let agents = ["b".to_string(), "agent a, 1".to_string()];
    write_hlog(
        dir.path(),
        1,
        SystemTime::now(),
        intervals.into_iter().map(Ok::<_, io::Error>),
        &agents,
    )
    .unwrap();
    let text = fs::read(dir.path().join("hlog/step-001.hlog")).unwrap();
    let mut lines = Vec::new();
    for entry in IntervalLogIterator::new(&text) {
        if let LogEntry::Interval(i) = entry.unwrap() {
            let max_ms = (i.max() * 10.0).round() / 10.0;
            lines.push((i.tag().map(|t| t.as_str().to_string()), max_ms));
        }
    }
    // Merged first, then each agent under its name, in arrival order.
    assert_eq!(
        lines,
        vec![
            (None, 20.0),
            (Some("agent_a__1".to_string()), 20.0),
            (Some("b".to_string()), 5.0),
        ]
    );
}

#[test]
fn an_interval_that_cannot_be_read_fails_the_hlog_and_leaves_no_file() {
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir_all(dir.path().join("hlog")).unwrap();
    let mut a = histogram::new();
    a.record(20_000).unwrap();
    let good = HlogInterval {
        offset: Duration::from_secs(0),
        length: Duration::from_secs(1),
        per_agent: vec![(0, Encoded::parse(histogram::encode(&a)).unwrap())],
    };
    let intervals = vec![Ok(good), Err(io::Error::other("the spill is gone"))];
    let e = write_hlog(dir.path(), 2, SystemTime::now(), intervals, &["a".into()])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("step-002.hlog: the spill is gone") && !e.contains("hlog.tmp"),
        "{e}"
    );
    let left: Vec<_> = fs::read_dir(dir.path().join("hlog")).unwrap().collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn unwritable_directory_is_refused_up_front() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a-file");
    fs::write(&file, b"x").unwrap();
    let e = claim(&file.join("sub"), false, false)
        .unwrap_err()
        .to_string();
    assert!(e.contains("is not writable"), "{e}");
}

#[test]
fn runs_started_in_the_same_second_shared_the_default_directory() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("stampede-results").join("20261130T201500Z");
    let taken: Vec<PathBuf> = (0..3).map(|_| claim(&base, true, false).unwrap()).collect();
    let names: Vec<String> = taken
        .iter()
        .map(|d| d.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        names,
        [
            "20261130T201500Z",
            "20261130T201500Z-2",
            "20261130T201500Z-3"
        ]
    );
}

#[test]
fn hgrm_is_the_steps_distribution_and_leaves_no_temporary_file() {
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir_all(dir.path().join("hlog")).unwrap();
    let mut h = histogram::new();
    h.record_n(20_000, 9).unwrap();
    h.record(80_000).unwrap();
    let d = Distribution::of(7, &h);
    write_hgrm(dir.path(), &d).unwrap();
    let text = fs::read_to_string(dir.path().join("hlog/step-007.hgrm")).unwrap();
    assert_eq!(text, d.to_hgrm());
    let back = Distribution::parse_hgrm(7, &text).unwrap();
    let top_ms = h.highest_equivalent(80_000) as f64 / 1000.0;
    assert_eq!((back.step, back.total, back.max_ms), (7, 10, top_ms));
    let names: Vec<_> = fs::read_dir(dir.path().join("hlog"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["step-007.hgrm"]);
}

#[test]
fn a_reused_out_directory_holding_only_hgrm_files_was_taken_as_empty() {
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir_all(dir.path().join("hlog")).unwrap();
    fs::write(dir.path().join("hlog/step-001.hgrm"), b"old").unwrap();
    fs::write(dir.path().join("hlog/step-002.hgrm.tmp"), b"old").unwrap();
    let e = claim(dir.path(), false, false).unwrap_err().to_string();
    assert!(
        e.contains("hlog/step-001.hgrm, hlog/step-002.hgrm.tmp"),
        "{e}"
    );
    claim(dir.path(), false, true).unwrap();
    assert_eq!(fs::read_dir(dir.path().join("hlog")).unwrap().count(), 0);
}

#[test]
fn a_reused_out_directory_kept_the_earlier_runs_files() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("today");
    fs::create_dir_all(out.join("hlog")).unwrap();
    for f in [
        "run.json",
        "steps.tsv",
        "hlog/step-001.hlog",
        "hlog/step-002.hlog",
    ] {
        fs::write(out.join(f), b"old").unwrap();
    }
    fs::write(out.join("notes.txt"), b"the user's").unwrap();
    let e = claim(&out, false, false).unwrap_err().to_string();
    assert!(
        e.contains(&format!(
            "output directory {} holds another run's files",
            out.display()
        )) && e.contains("run.json, steps.tsv, hlog/step-001.hlog, hlog/step-002.hlog")
            && e.contains("--force"),
        "{e}"
    );
    assert_eq!(fs::read(out.join("hlog/step-002.hlog")).unwrap(), b"old");
    claim(&out, false, true).unwrap();
    assert!(!out.join("steps.tsv").exists());
    assert_eq!(fs::read_dir(out.join("hlog")).unwrap().count(), 0);
    assert_eq!(fs::read(out.join("notes.txt")).unwrap(), b"the user's");
    // The new run holds it now: another refuses it, a run that wrote nothing lets it go.
    assert!(claim(&out, false, false).is_err());
    release(&out);
    claim(&out, false, false).unwrap();
}

#[test]
fn a_file_that_cannot_be_written_is_named_not_its_temporary() {
    let dir = tempfile::tempdir().unwrap();
    let to = dir.path().join("no-such-dir").join("r.html");
    let e = write_file(&to, "page").unwrap_err().to_string();
    assert!(
        e.starts_with(&format!("cannot write {}: ", to.display())),
        "{e}"
    );
    let to = dir.path().join("r.html");
    write_file(&to, "page").unwrap();
    assert_eq!(fs::read_to_string(&to).unwrap(), "page");
    assert_eq!(
        fs::read_dir(dir.path()).unwrap().count(),
        1,
        "no temporary left"
    );
}

#[test]
fn an_earlier_runs_report_alone_kept_the_directory() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join(REPORT), b"old").unwrap();
    let e = claim(dir.path(), false, false).unwrap_err().to_string();
    assert!(e.contains("another run's files (report.html)"), "{e}");
    claim(dir.path(), false, true).unwrap();
    assert!(!dir.path().join(REPORT).exists());
}

fn config(out: &Path) -> RunConfig {
    crate::config::resolve(crate::cli::RunArgs {
        plan_or_url: vec!["http://127.0.0.1:1/".into()],
        steps: Some(crate::cli::Steps(vec![10.0])),
        out: Some(out.to_path_buf()),
        ..Default::default()
    })
    .unwrap()
}

#[test]
fn a_labelled_run_says_its_label_in_run_json() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(dir.path());
    claim(&cfg.out, false, false).unwrap();
    Output::create(&cfg, &[], &[], &[]).unwrap();
    let read = |d: &Path| RunFile::read(&d.join("run.json")).unwrap().label;
    assert_eq!(read(dir.path()), None);
    cfg.label = Some("nginx".into());
    Output::create(&cfg, &[], &[], &[]).unwrap();
    assert_eq!(read(dir.path()).as_deref(), Some("nginx"));
}

#[test]
fn a_side_by_side_directory_kept_another_comparison() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("x");
    assert_eq!(claim_beside(&out, false, false).unwrap(), out);
    fs::write(out.join("compare.tsv"), b"old").unwrap();
    fs::write(out.join("notes.txt"), b"the user's").unwrap();
    let e = claim_beside(&out, false, false).unwrap_err().to_string();
    assert!(
        e.contains("holds another run's files (compare.tsv)") && e.contains("--force"),
        "{e}"
    );
    claim_beside(&out, false, true).unwrap();
    assert!(!out.join("compare.tsv").exists());
    assert!(out.join("notes.txt").exists());
    // A default name is never shared: the next one is suffixed.
    let fresh = claim_beside(&out, true, false).unwrap();
    assert_eq!(fresh, dir.path().join("x-2"));
}

#[test]
fn after_a_full_disk_steps_tsv_held_one_step_more_than_run_json() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(&dir.path().join("r"));
    claim(&cfg.out, false, false).unwrap();
    let mut out = Output::create(&cfg, &[], &[], &[]).unwrap();
    let mut snap = shared::metrics::Snapshot::default();
    snap.counters.requests = 10;
    snap.counters.replies = 10;
    snap.counters.ok = 10;
    snap.hist.latency.record_n(1000, 10).unwrap();
    let step = |number: u32| {
        results::step::summarize(&results::step::StepInput {
            number,
            model: shared::plan::LoadModel::Requests,
            value: 10.0,
            demanded_rate: Some(10.0),
            duration: Duration::from_secs(1),
            total: &snap,
            series: &[],
            agents: vec![],
            aborted: false,
            mark_lost: true,
            start_skew: None,
            ok_status: &shared::status::StatusSet::default(),
            baseline_p50_ms: None,
        })
    };
    let merged = histogram::new();
    let write = |out: &mut Output, n: u32| {
        let none: Vec<Result<HlogInterval, std::io::Error>> = Vec::new();
        let d = Distribution::of(n, &merged);
        out.write_step(&step(n), SystemTime::now(), none, &[], &d)
            .unwrap();
    };
    write(&mut out, 1);
    out.write_summary(&results::step::summarize_run(&[step(1)]))
        .unwrap();
    write(&mut out, 2);
    // run.json cannot be replaced (its temporary's name is taken by a directory), as on a
    // full disk.
    fs::create_dir(out.dir().join("run.json.tmp")).unwrap();
    assert!(
        out.write_summary(&results::step::summarize_run(&[step(1), step(2)]))
            .is_err()
    );
    let run: serde_json::Value =
        serde_json::from_slice(&fs::read(out.dir().join("run.json")).unwrap()).unwrap();
    let tsv = fs::read_to_string(out.dir().join("steps.tsv")).unwrap();
    assert_eq!(run["steps"].as_array().unwrap().len(), 1);
    assert_eq!(tsv.lines().count(), 2, "the header and step 1 only: {tsv}");
    // The run goes on to its finish with what run.json holds.
    fs::remove_dir(out.dir().join("run.json.tmp")).unwrap();
    out.finish(RunStatus::Failed).unwrap();
    let run: serde_json::Value =
        serde_json::from_slice(&fs::read(out.dir().join("run.json")).unwrap()).unwrap();
    assert_eq!(run["steps"].as_array().unwrap().len(), 1);
}

#[test]
fn a_run_that_never_started_left_its_directory_with_an_empty_hlog() {
    let dir = tempfile::tempdir().unwrap();
    // Made by the run (a stamped name, or a given one that did not exist): gone with its claim.
    for (given, fresh) in [("stamped", true), ("new", false)] {
        let claimed = claim(&dir.path().join(given), fresh, false).unwrap();
        release(&claimed);
        assert!(!claimed.exists(), "{given}: {claimed:?} is left");
    }
    // The user's own directory stays, as it was, whatever else it holds.
    let own = dir.path().join("own");
    fs::create_dir(&own).unwrap();
    release(&claim(&own, false, false).unwrap());
    assert!(own.is_dir() && fs::read_dir(&own).unwrap().count() == 0);
    fs::write(own.join("notes.txt"), b"the user's").unwrap();
    let gone = dir.path().join("gone");
    let claimed = claim(&gone, false, false).unwrap();
    fs::write(claimed.join("notes.txt"), b"the user's").unwrap();
    release(&claimed);
    assert!(claimed.join("notes.txt").is_file() && !claimed.join("hlog").exists());
}

#[test]
fn run_json_stayed_starting_or_running_after_the_process_ended() {
    let dir = tempfile::tempdir().unwrap();
    let claimed = claim(&dir.path().join("a"), false, false).unwrap();
    fail_unfinished(&claimed, "boom");
    assert!(
        !claimed.join("run.json").exists(),
        "a claim alone is removed"
    );
    let cfg = config(&dir.path().join("b"));
    claim(&cfg.out, false, false).unwrap();
    let out = Output::create(&cfg, &[], &[], &[]).unwrap();
    fail_unfinished(out.dir(), "agent a:1 refused: no");
    let read = |d: &Path| -> serde_json::Value {
        serde_json::from_slice(&fs::read(d.join("run.json")).unwrap()).unwrap()
    };
    let run = read(out.dir());
    assert_eq!(run["status"], "failed");
    assert!(run["finished_at"].is_string());
    assert_eq!(run["warnings"][0], "the run failed: agent a:1 refused: no");
    // A finished run is left as it ended.
    let mut out = Output::create(&cfg, &[], &[], &[]).unwrap();
    out.finish(RunStatus::Completed).unwrap();
    fail_unfinished(out.dir(), "late");
    assert_eq!(read(out.dir())["status"], "completed");
}

#[test]
fn run_json_stayed_running_when_it_could_not_be_rewritten() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path());
    claim(&cfg.out, false, false).unwrap();
    let mut out = Output::create(&cfg, &[], &[], &[]).unwrap();
    // No room for the copy beside it (as on a full disk): the rewrite fails.
    fs::create_dir(dir.path().join("run.json.tmp")).unwrap();
    let done = out.finish(RunStatus::Aborted).unwrap();
    assert!(matches!(done, Finished::StatusOnly(_)), "{done:?}");
    let run: serde_json::Value =
        serde_json::from_slice(&fs::read(dir.path().join("run.json")).unwrap()).unwrap();
    assert_eq!(run["status"], "aborted");
    // A status longer than the room left for it still does not say running.
    out.finish(RunStatus::Completed).unwrap();
    let run: serde_json::Value =
        serde_json::from_slice(&fs::read(dir.path().join("run.json")).unwrap()).unwrap();
    assert_eq!(run["status"], "failed");
}

/// Each line's max in ms of an .hlog, read by hdrhistogram's own reader (the counts are checked by
/// HdrHistogram's Python reader, tests/hgrm/check.py).
fn hlog_maxes(path: &Path) -> Vec<f64> {
    let text = fs::read(path).unwrap();
    let mut lines = Vec::new();
    for entry in IntervalLogIterator::new(&text) {
        if let LogEntry::Interval(i) = entry.unwrap() {
            assert!(i.tag().is_none(), "{path:?}: a tagged line");
            lines.push((i.max() * 10.0).round() / 10.0);
        }
    }
    lines
}

#[test]
fn each_named_request_has_its_hlog_of_the_fleets_merge_per_interval() {
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir_all(dir.path().join("hlog")).unwrap();
    let enc = |values: &[u64]| {
        let mut h = histogram::new();
        for &v in values {
            h.record(v).unwrap();
        }
        Encoded::parse(histogram::encode(&h)).unwrap()
    };
    // More names than one pass writes, so the batches are seen: name k's interval s holds two
    // agents' reports, of k + 1 and s + 1 latencies; the last name saw nothing in interval 1.
    let names: Vec<String> = (0..NAMES_PER_PASS + 3)
        .map(|k| format!("r-{k}.x"))
        .collect();
    let mut asked = Vec::new();
    let read = |range: std::ops::Range<usize>| {
        asked.push(range.clone());
        (0..2u64)
            .map(move |s| {
                let per_name = range
                    .clone()
                    .map(|k| match (k, s) {
                        (k, 1) if k == NAMES_PER_PASS + 2 => Vec::new(),
                        _ => vec![
                            enc(&vec![1_000 * (k as u64 + 1); k + 1]),
                            enc(&vec![500; s as usize + 1]),
                        ],
                    })
                    .collect();
                Ok::<_, io::Error>(NamesInterval {
                    offset: Duration::from_secs(s),
                    length: Duration::from_secs(1),
                    per_name,
                })
            })
            .collect::<Vec<_>>()
    };
    write_name_hlogs(dir.path(), 3, SystemTime::now(), &names, read).unwrap();
    assert_eq!(
        asked,
        [0..NAMES_PER_PASS, NAMES_PER_PASS..NAMES_PER_PASS + 3]
    );
    for (k, name) in names.iter().enumerate() {
        let path = dir.path().join(format!("hlog/step-003.{name}.hlog"));
        assert_eq!(path, name_hlog_path(dir.path(), 3, name));
        let max = k as f64 + 1.0;
        let second = if k == NAMES_PER_PASS + 2 { 0.0 } else { max };
        assert_eq!(hlog_maxes(&path), [max, second], "{name}");
    }
    let left = fs::read_dir(dir.path().join("hlog")).unwrap().count();
    assert_eq!(left, names.len());
}

#[test]
fn a_named_hlog_that_cannot_be_read_leaves_no_file_of_its_batch() {
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir_all(dir.path().join("hlog")).unwrap();
    let names = ["login".to_string(), "search".to_string()];
    let read = |_| {
        [Err::<NamesInterval, _>(io::Error::other(
            "the spill is gone",
        ))]
    };
    let e = write_name_hlogs(dir.path(), 1, SystemTime::now(), &names, read)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("step-001.login.hlog: the spill is gone") && !e.contains("hlog.tmp"),
        "{e}"
    );
    let left: Vec<_> = fs::read_dir(dir.path().join("hlog")).unwrap().collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn a_reused_directory_counts_the_named_requests_hlogs_as_the_runs() {
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir_all(dir.path().join("hlog")).unwrap();
    for f in [
        "hlog/step-001.login.hlog",
        "hlog/step-002.items.list.hlog.tmp",
    ] {
        fs::write(dir.path().join(f), b"old").unwrap();
    }
    let found = run_files(dir.path()).unwrap();
    assert_eq!(
        found,
        [
            dir.path().join("hlog/step-001.login.hlog"),
            dir.path().join("hlog/step-002.items.list.hlog.tmp"),
        ]
    );
}
