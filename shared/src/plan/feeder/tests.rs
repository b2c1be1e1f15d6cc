//! The feeder's data, its dealing and its row bytes.
use super::*;

#[test]
fn shard_dealing_gives_every_row_to_one_worker_of_one_agent_in_proportion() {
    // 3 agents weighted 1:2:1, each dealing its rows on to 4, 3 and 2 workers.
    let mut agents = Dealer::new(&[1, 2, 1]).unwrap();
    let mut workers: Vec<Dealer> = [4u64, 3, 2]
        .iter()
        .map(|&n| Dealer::new(&vec![1; n as usize]).unwrap())
        .collect();
    let mut owner = Vec::new();
    let mut per_agent = [0u32; 3];
    for _row in 0..10_000 {
        let a = agents.next_party();
        let w = workers[a].next_party();
        per_agent[a] += 1;
        owner.push((a, w));
    }
    assert_eq!(per_agent, [2500, 5000, 2500]);
    // Every row has exactly one (agent, worker); each worker's rows are disjoint from the others'.
    let mut count = std::collections::BTreeMap::new();
    for o in &owner {
        *count.entry(*o).or_insert(0u32) += 1;
    }
    assert_eq!(count.len(), 4 + 3 + 2);
    assert_eq!(count.values().sum::<u32>(), 10_000);
    assert_eq!(count[&(0, 0)], 625);
    assert_eq!(count[&(1, 0)], 1667);
    assert_eq!(count[&(1, 2)], 1666);
    // Smooth: over any window, the 1:2:1 split is within one row.
    let mut d = Dealer::new(&[1, 2, 1]).unwrap();
    let first: Vec<usize> = (0..8).map(|_| d.next_party()).collect();
    assert_eq!(first.iter().filter(|&&a| a == 1).count(), 4);
    assert!(Dealer::new(&[0, 0]).is_none());
    assert!(Dealer::new(&[]).is_none());
}

#[test]
fn rows_travel_as_lengths_and_bytes() {
    let mut out = Vec::new();
    encode_row(&[b"alice".to_vec(), b"".to_vec()], &mut out);
    encode_row(&[b"bob,\"x\"\n".to_vec(), b"pw".to_vec()], &mut out);
    let mut seen = Vec::new();
    let rows = decode_rows(&out, 2, |f| seen.push(f.concat())).unwrap();
    assert_eq!(rows, 2);
    assert_eq!(seen, [b"alice".to_vec(), b"bob,\"x\"\npw".to_vec()]);
    assert_eq!(
        decode_rows(&out[..out.len() - 1], 2, |_| {}).unwrap_err(),
        "row 2 has a field of 2 bytes"
    );
    assert!(decode_rows(&[1, 0], 1, |_| {}).is_err());
}

#[test]
fn a_variable_is_defined_once_across_feeders_and_the_setup() {
    let users =
        Feeder::try_new("users", FeederMode::Shard, vec!["user".into(), "pw".into()]).unwrap();
    let ids = Feeder::try_new("ids", FeederMode::Random, vec!["id".into()]).unwrap();
    let req = RequestSpec::try_new("POST", "http://127.0.0.1/login", vec![], vec![]).unwrap();
    let setup = Setup::new(
        req,
        vec![Extraction::parse("token", "json:/token").unwrap()],
    );
    let data = Data::try_new(vec![users.clone(), ids.clone()], Some(setup.clone())).unwrap();
    assert_eq!(data.variables(), ["user", "pw", "id", "token"]);
    assert_eq!(data.first_of(1), 2);
    assert_eq!(data.first_extracted(), 3);
    assert_eq!(
        (0..4).map(|v| data.feeder_of(v)).collect::<Vec<_>>(),
        [Some(0), Some(0), Some(1), None]
    );
    let twice = Feeder::try_new("more", FeederMode::Copy, vec!["token".into()]).unwrap();
    let e = Data::try_new(vec![twice], Some(setup)).unwrap_err();
    assert_eq!(
        e.to_string(),
        "variable 'token' is defined twice: by feeder more and by the setup"
    );
    assert!(Feeder::try_new("x y", FeederMode::Copy, vec!["a".into()]).is_err());
    assert!(Feeder::try_new("x", FeederMode::Copy, vec![]).is_err());
}
