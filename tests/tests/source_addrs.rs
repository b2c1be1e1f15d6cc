//! `--source-addrs`: connections really leave from the listed addresses, in turn; an address the
//! machine lacks is the generator's addr-unavailable, said before the run and never blamed on the target.
use tests::{ServeProcess, run_ok, text};

/// The target's per-client request counts, from its stats endpoint.
fn by_client(target: &ServeProcess) -> serde_json::Map<String, serde_json::Value> {
    let body = tests::http_get(target.addr, "/_stampede/stats");
    let v: serde_json::Value = serde_json::from_str(&body).expect("stats are JSON");
    v["by_client"].as_object().expect("by_client").clone()
}

#[test]
fn connections_come_from_each_listed_source_address_in_turn() {
    let target = ServeProcess::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let plan = dir.path().join("plan.toml");
    // The plan file's spelling of the flag, as a range; 127.0.0.1 (the target's own) is not in it.
    std::fs::write(
        &plan,
        format!(
            "url = \"{}\"\nsteps = [40]\nstep_duration = \"1s\"\nsource_addrs = \"127.0.0.2-127.0.0.3\"\n",
            target.url()
        ),
    )
    .unwrap();
    let ran = run_ok(&[plan.to_str().unwrap(), "--threads", "2"]);
    let step = ran.step(0);
    // Not "valid": on a busy machine a late timer may degrade it; the point here is where from.
    assert_eq!(step["errors_pct"], 0.0, "{step}");
    assert_eq!(ran.run["plan"]["source_addrs"][1], "127.0.0.3");
    let clients = by_client(&target);
    let count = |ip: &str| clients.get(ip).and_then(|v| v.as_u64()).unwrap_or(0);
    let (two, three) = (count("127.0.0.2"), count("127.0.0.3"));
    assert_eq!(
        two + three,
        step["replies"].as_u64().unwrap(),
        "{clients:?}"
    );
    assert!(two > 0 && three > 0, "{clients:?}");
    // One request per connection, dealt in turn per worker thread: within one per thread.
    assert!(two.abs_diff(three) <= 2, "{clients:?}");
    // Only the stats request itself came from 127.0.0.1, and it is not counted.
    assert_eq!(count("127.0.0.1"), 0, "{clients:?}");
}

#[test]
fn a_source_address_the_machine_lacks_is_addr_unavailable_not_the_targets_fault() {
    let target = ServeProcess::start(&[]);
    // TEST-NET-3 (RFC 5737) is assigned to no machine: binding to it fails before any packet is sent.
    let (o, out) = tests::run_quiet(&[
        &target.url(),
        "--steps",
        "20",
        "--step-duration",
        "1s",
        "--source-addrs",
        "203.0.113.77",
    ]);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(
        err.contains("cannot bind --source-addrs 203.0.113.77"),
        "{err}"
    );
    let run = tests::run_json(out.path());
    assert!(
        run["warnings"][0]
            .as_str()
            .unwrap()
            .contains("will fail as addr-unavailable"),
        "{run}"
    );
    let step = &run["steps"][0];
    assert!(
        step["errors"]["addr-unavailable"].as_u64().unwrap() > 0,
        "{step}"
    );
    assert_eq!(step["unsent"], step["errors"]["addr-unavailable"], "{step}");
    assert_eq!(step["errors"]["conn-refused"], 0);
    assert_eq!(step["trust"], "invalid");
    assert_eq!(target.requests(), 0);
}
