//! Data in requests (issue 38): a shard feeder's CSV rows shipped to a 3-agent fleet reach the server
//! each exactly once (the server's own record of every path), and what is left over is counted as
//! requests not sent, in words naming the feeder.
use std::collections::BTreeMap;

use tests::{AgentProc, RecordingServer, run_ok, run_quiet, text};

fn agents_arg(agents: &[AgentProc]) -> String {
    agents
        .iter()
        .map(|a| a.addr.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

#[test]
fn a_shard_feeder_over_three_agents_sends_every_row_exactly_once() {
    let server = RecordingServer::start();
    let dir = tempfile::tempdir().unwrap();
    let rows = 300;
    let mut csv = String::from("id,kind\n");
    for i in 0..rows {
        csv.push_str(&format!("{i},\"k,{}\"\n", i % 7));
    }
    std::fs::write(dir.path().join("ids.csv"), csv).unwrap();
    let plan = dir.path().join("plan.toml");
    std::fs::write(
        &plan,
        format!(
            "url = \"http://{}/item/${{id}}?n=${{counter()}}\"\nheaders = [\"X-Kind: ${{kind}}\"]\n\n[[feeder]]\nname = \"ids\"\nfile = \"ids.csv\"\nmode = \"shard\"\n",
            server.addr
        ),
    )
    .unwrap();
    // Two worker threads per agent: the rows are dealt to agents, then to their workers.
    let agents: Vec<AgentProc> = (0..3)
        .map(|_| AgentProc::with_args(&["--listen", "127.0.0.1:0", "--threads", "2"], &[]))
        .collect();
    let ran = run_ok(&[
        plan.to_str().unwrap(),
        "--agents",
        &agents_arg(&agents),
        "--model",
        "requests",
        "--steps",
        "400",
        "--step-duration",
        "1s",
    ]);
    let seen = server.seen();
    let mut per_id: BTreeMap<u32, u32> = BTreeMap::new();
    for s in &seen {
        let id = s
            .path
            .strip_prefix("/item/")
            .and_then(|p| p.split_once('?'))
            .map(|(id, _)| id.parse::<u32>().unwrap())
            .unwrap_or_else(|| panic!("path {} is not a rendered /item/ID?n=N", s.path));
        *per_id.entry(id).or_default() += 1;
        let kind = s.headers.iter().find(|(k, _)| k == "x-kind").unwrap();
        assert_eq!(kind.1, format!("k,{}", id % 7), "the row's fields go together");
    }
    assert_eq!(per_id.len(), rows as usize, "every row reached the server");
    assert!(per_id.values().all(|&n| n == 1), "no row twice: {per_id:?}");
    // 400 due, 300 rows: the other 100 were not sent, said as the feeder running out.
    let step = ran.step(0);
    let json = step.to_string();
    assert!(
        json.contains("feeder ids ran out of rows (shard: each row once)"),
        "{json}"
    );
    eprintln!("step: {json}");
}

#[test]
fn a_bad_feeder_or_an_unknown_variable_is_refused_before_any_load() {
    let server = RecordingServer::start();
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| std::fs::write(dir.path().join(name), text).unwrap();
    write("ragged.csv", "id,name\n1,a\n2\n");
    write("empty.csv", "");
    write("bad.csv", "id,9x\n1,2\n");
    write("ok.csv", "id\n1\n");
    let cases = [
        ("missing.csv", "${id}", "missing.csv"),
        ("ragged.csv", "${id}", "line 3 has 1 fields where line 1 names 2"),
        ("empty.csv", "${id}", "it is empty"),
        ("bad.csv", "${id}", "'9x' is not a variable name"),
        ("ok.csv", "${user}", "'${user}' in '/u/${user}' names no variable; the variables are: id"),
    ];
    for (file, var, words) in cases {
        let plan = dir.path().join("plan.toml");
        std::fs::write(
            &plan,
            format!(
                "url = \"http://{}/u/{var}\"\n[[feeder]]\nname = \"f\"\nfile = \"{file}\"\nmode = \"copy\"\n",
                server.addr
            ),
        )
        .unwrap();
        let (o, _dir) = run_quiet(&[plan.to_str().unwrap(), "--steps", "10", "--step-duration", "1s"]);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{file}: {err}");
        assert!(err.contains(words), "{file}: {err}");
    }
    assert!(server.seen().is_empty(), "nothing was sent");
}
