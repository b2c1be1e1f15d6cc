//! Spooling a feeder's rows and reading them back per worker.
use super::*;
use shared::plan::{Feeder, encode_row};

fn data(mode: FeederMode) -> Data {
    let f = Feeder::try_new("users", mode, vec!["user".into(), "n".into()]).unwrap();
    Data::try_new(vec![f], None).unwrap()
}

fn chunk(rows: std::ops::Range<u32>) -> Vec<u8> {
    let mut out = Vec::new();
    for i in rows {
        encode_row(
            &[format!("u{i}").into_bytes(), i.to_string().into_bytes()],
            &mut out,
        );
    }
    out
}

fn drain(c: &mut Cursor, rng: &mut Rng) -> Vec<String> {
    let mut seen = Vec::new();
    while let Ok(row) = c.next(rng) {
        assert_eq!(
            row.field(0),
            format!("u{}", String::from_utf8_lossy(row.field(1))).as_bytes()
        );
        seen.push(String::from_utf8(row.field(0).to_vec()).unwrap());
    }
    seen
}

#[test]
fn shard_rows_are_spooled_per_worker_and_each_read_once_across_steps() {
    let mut feeds = Feeds::new(&data(FeederMode::Shard), 3).unwrap();
    feeds.rows(0, &chunk(0..100)).unwrap();
    assert!(matches!(feeds.ready(), Err(FeedError::Unfinished(_))));
    feeds.rows(0, &chunk(100..1000)).unwrap();
    feeds.end(0, 1000).unwrap();
    let spools = feeds.ready().unwrap();
    let paths = spools[0].paths.clone();
    assert_eq!(paths.len(), 3);
    // Unlinked as made: nothing is left behind, however the process ends.
    assert!(paths.iter().all(|p| !p.exists()));
    let mut rng = Rng::new(1);
    let mut all = Vec::new();
    for w in 0..3 {
        // Two steps: the second goes on where the first stopped.
        let mut first = Cursor::new(&spools[0], w);
        for _ in 0..10 {
            all.push(String::from_utf8(first.next(&mut rng).unwrap().field(0).to_vec()).unwrap());
        }
        drop(first);
        let mut second = Cursor::new(&spools[0], w);
        all.extend(drain(&mut second, &mut rng));
        assert_eq!(second.next(&mut rng).unwrap_err(), NoRow::RanOut);
    }
    all.sort();
    let mut want: Vec<String> = (0..1000).map(|i| format!("u{i}")).collect();
    want.sort();
    assert_eq!(all, want, "every row once");
}

#[test]
fn wrapping_modes_start_again_and_random_draws_any_row() {
    let mut feeds = Feeds::new(&data(FeederMode::Circular), 4).unwrap();
    // Fewer rows than workers: every worker still has rows to wrap over.
    feeds.rows(0, &chunk(0..2)).unwrap();
    feeds.end(0, 2).unwrap();
    let spools = feeds.ready().unwrap();
    let mut rng = Rng::new(1);
    for w in 0..4 {
        let mut c = Cursor::new(&spools[0], w);
        let a: Vec<_> = (0..3)
            .map(|_| c.next(&mut rng).unwrap().field(0).to_vec())
            .collect();
        assert_eq!(a[0], a[1]);
        assert_eq!(a[0], a[2]);
    }
    let mut feeds = Feeds::new(&data(FeederMode::Random), 2).unwrap();
    feeds.rows(0, &chunk(0..5)).unwrap();
    feeds.end(0, 5).unwrap();
    let spools = feeds.ready().unwrap();
    let mut c = Cursor::new(&spools[0], 1);
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..200 {
        seen.insert(c.next(&mut rng).unwrap().field(1).to_vec());
    }
    assert_eq!(seen.len(), 5);
}

#[test]
fn a_bad_chunk_or_count_is_refused() {
    let mut feeds = Feeds::new(&data(FeederMode::Copy), 1).unwrap();
    assert!(matches!(
        feeds.rows(3, &[]),
        Err(FeedError::NoSuchFeeder(3))
    ));
    let c = chunk(0..3);
    assert!(feeds.rows(0, &c[..c.len() - 1]).is_err());
    let mut feeds = Feeds::new(&data(FeederMode::Copy), 1).unwrap();
    feeds.rows(0, &chunk(0..3)).unwrap();
    let e = feeds.end(0, 4).unwrap_err();
    assert_eq!(
        e.to_string(),
        "feeder users: 3 rows arrived where 4 were sent"
    );
}

#[test]
fn a_configure_of_the_same_feeders_keeps_the_rows_and_where_each_worker_was() {
    let shard = data(FeederMode::Shard);
    let mut feeds = Feeds::new(&shard, 2).unwrap();
    feeds.rows(0, &chunk(0..10)).unwrap();
    feeds.end(0, 10).unwrap();
    let spools = feeds.ready().unwrap();
    let mut rng = Rng::new(1);
    let first = Cursor::new(&spools[0], 0).next(&mut rng).unwrap();
    assert_eq!(first.field(0), b"u0");
    drop(spools);
    // Side by side: the next target's configure is the same plan's.
    let feeds = feeds.reconfigured(&shard, 2).unwrap();
    assert!(feeds.kept());
    let spools = feeds.ready().unwrap();
    let next = Cursor::new(&spools[0], 0).next(&mut rng).unwrap();
    assert_eq!(next.field(0), b"u2", "worker 0 goes on after its first row");
    drop(spools);
    // Rows sent anyway replace them; other feeders start empty.
    let mut renewed = feeds.renewed(2).unwrap();
    assert!(!renewed.kept());
    assert!(renewed.ready().is_err());
    renewed.rows(0, &chunk(0..1)).unwrap();
    renewed.end(0, 1).unwrap();
    let other = renewed.reconfigured(&data(FeederMode::Copy), 2).unwrap();
    assert!(!other.kept());
    assert!(matches!(other.ready(), Err(FeedError::Unfinished(_))));
}
