//! Data in requests (issue 38): a shard feeder's CSV rows shipped to a 3-agent fleet reach the server
//! each exactly once (the server's own record of every path), and what is left over is counted as
//! requests not sent, in words naming the feeder; a login setup per connection against the aiohttp
//! shop (`tests/app/shop.py`): no 401 with it, all 401 without, and a named mix's counts per name
//! equal to the application's own.
use std::collections::BTreeMap;

use tests::{AgentProc, RecordingServer, agents_arg, run_ok, run_quiet, text};

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
        assert_eq!(
            kind.1,
            format!("k,{}", id % 7),
            "the row's fields go together"
        );
    }
    assert_eq!(per_id.len(), rows as usize, "every row reached the server");
    assert!(per_id.values().all(|&n| n == 1), "no row twice: {per_id:?}");
    // 400 due, 300 rows: the other 100 were not sent, said as the feeder running out.
    let step = ran.step(0);
    assert_eq!(step["due"], 400);
    assert_eq!(step["ok"], rows);
    assert_eq!(step["unsent"], 100);
    assert_eq!(step["errors"]["other"], 100);
    let json = step.to_string();
    assert!(
        json.contains("feeder ids ran out of rows (shard: each row once)"),
        "{json}"
    );
    eprintln!("step: {json}");
}

#[test]
fn side_by_side_a_shard_is_dealt_once_for_the_run_not_once_per_target() {
    let (a, b) = (RecordingServer::start(), RecordingServer::start());
    let dir = tempfile::tempdir().unwrap();
    let mut csv = String::from("id\n");
    for i in 0..100 {
        csv.push_str(&format!("{i}\n"));
    }
    std::fs::write(dir.path().join("ids.csv"), csv).unwrap();
    let plan = dir.path().join("plan.toml");
    std::fs::write(
        &plan,
        "[[feeder]]\nname = \"ids\"\nfile = \"ids.csv\"\nmode = \"shard\"\n",
    )
    .unwrap();
    let out = tempfile::tempdir().unwrap();
    let o = tests::stampede(&[
        "run",
        plan.to_str().unwrap(),
        &format!("a=http://{}/item/${{id}}", a.addr),
        &format!("b=http://{}/item/${{id}}", b.addr),
        "--model",
        "requests",
        "--steps",
        "30,30",
        "--step-duration",
        "1s",
        "--quiet",
        "--out",
        out.path().to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    // Four steps of 30 (two per target, the fleet configured for each in turn): 120 due, 100 rows.
    let mut ids: Vec<String> = a
        .seen()
        .into_iter()
        .chain(b.seen())
        .map(|s| s.path)
        .collect();
    assert_eq!(ids.len(), 100, "every row once over both targets");
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 100, "no row twice");
    assert!(!a.seen().is_empty() && !b.seen().is_empty());
}

#[test]
fn over_http2_a_rendered_request_is_served_as_a_fixed_one() {
    let target = tests::ServeProcess::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let mut csv = String::from("id,q\n");
    for i in 0..60 {
        csv.push_str(&format!("{i},w{i}\n"));
    }
    std::fs::write(dir.path().join("ids.csv"), csv).unwrap();
    let plan = dir.path().join("plan.toml");
    std::fs::write(
        &plan,
        format!(
            "url = \"h2c://{}/item/${{id}}?q=${{q}}&u=${{uuid()}}\"\nmethod = \"POST\"\nheaders = [\"X-Q: ${{q}}\"]\nbody = \"{{\\\"id\\\": ${{id}}}}\"\n\n[[feeder]]\nname = \"ids\"\nfile = \"ids.csv\"\nmode = \"copy\"\n",
            target.addr
        ),
    )
    .unwrap();
    let ran = run_ok(&[
        plan.to_str().unwrap(),
        "--model",
        "concurrency",
        "--streams",
        "4",
        "--steps",
        "2",
        "--step-duration",
        "1s",
    ]);
    let step = ran.step(0);
    let ok = step["ok"].as_u64().unwrap();
    assert!(ok > 60, "{step}");
    assert_eq!(
        step["requests"].as_u64(),
        Some(ok),
        "every request served: {step}"
    );
    assert_eq!(target.requests(), ok);
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
        (
            "ragged.csv",
            "${id}",
            "line 3 has 1 fields where line 1 names 2",
        ),
        ("empty.csv", "${id}", "it is empty"),
        ("bad.csv", "${id}", "'9x' is not a variable name"),
        (
            "ok.csv",
            "${user}",
            "'${user}' in '/u/${user}' names no variable; the variables are: id",
        ),
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
        let (o, _dir) = run_quiet(&[
            plan.to_str().unwrap(),
            "--steps",
            "10",
            "--step-duration",
            "1s",
        ]);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{file}: {err}");
        assert!(err.contains(words), "{file}: {err}");
    }
    assert!(server.seen().is_empty(), "nothing was sent");
}

/// A venv with aiohttp for the shop application, made once in the workspace's target directory;
/// `None` (said) where pip cannot reach PyPI, a failure under CI.
fn shop_python() -> Option<std::path::PathBuf> {
    let venv = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/shop-venv");
    let python = venv.join("bin/python");
    let have = |p: &std::path::Path| {
        std::process::Command::new(p)
            .args([
                "-c",
                "import aiohttp; assert aiohttp.__version__ == '3.12.15'",
            ])
            .status()
            .is_ok_and(|s| s.success())
    };
    if have(&python) {
        return Some(python);
    }
    let made = std::process::Command::new("python3")
        .args(["-m", "venv"])
        .arg(&venv)
        .status()
        .is_ok_and(|s| s.success());
    let pip = std::process::Command::new(venv.join("bin/pip"))
        .args(["install", "--quiet", "aiohttp==3.12.15"])
        .output();
    match pip {
        Ok(o) if made && o.status.success() && have(&python) => Some(python),
        other => {
            let why = match other {
                Ok(o) => text(&o.stderr),
                Err(e) => e.to_string(),
            };
            eprintln!(
                "SKIPPED the shop application test: pip cannot install aiohttp==3.12.15: {why}"
            );
            assert!(std::env::var("CI").is_err(), "CI must reach PyPI");
            None
        }
    }
}

/// `tests/app/shop.py` on a free loopback port, with these users; killed when dropped.
struct Shop {
    child: std::process::Child,
    addr: std::net::SocketAddr,
}

impl Shop {
    fn start(python: &std::path::Path, users: &std::path::Path) -> Shop {
        let port = tests::closed_port();
        let app = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("app/shop.py");
        let child = std::process::Command::new(python)
            .arg(app)
            .args(["--port", &port.to_string(), "--users"])
            .arg(users)
            .spawn()
            .expect("shop.py starts");
        let addr: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        let until = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while std::net::TcpStream::connect(addr).is_err() {
            assert!(std::time::Instant::now() < until, "shop.py never listened");
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        Shop { child, addr }
    }

    /// The application's own count of replies by route and status.
    fn counts(&self) -> serde_json::Value {
        serde_json::from_str(&tests::http_get(self.addr, "/__counts")).unwrap()
    }
}

impl Drop for Shop {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn a_login_setup_carries_each_connections_token_and_without_it_every_request_is_refused() {
    let Some(python) = shop_python() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let users = dir.path().join("users.csv");
    let mut csv = String::from("user,password\n");
    for i in 0..20 {
        csv.push_str(&format!("user{i},pw-{i}\n"));
    }
    std::fs::write(&users, csv).unwrap();
    let run = |shop: &Shop, setup: bool| {
        let (auth, setup) = if setup {
            (
                "headers = [\"Authorization: Bearer ${token}\"]\n",
                "[setup]\nmethod = \"POST\"\nurl = \"/login\"\nheaders = [\"Content-Type: application/json\"]\nbody = '{\"user\": \"${user}\", \"password\": \"${password}\"}'\nextract = { token = \"json:/token\" }\n",
            )
        } else {
            ("", "")
        };
        let plan = dir.path().join("plan.toml");
        std::fs::write(
            &plan,
            format!(
                "url = \"http://{}/items?page=${{counter()}}\"\n{auth}\n[[feeder]]\nname = \"users\"\nfile = \"users.csv\"\nmode = \"circular\"\n\n{setup}",
                shop.addr
            ),
        )
        .unwrap();
        let (o, out) = run_quiet(&[
            plan.to_str().unwrap(),
            "--model",
            "concurrency",
            "--steps",
            "4",
            "--step-duration",
            "1s",
        ]);
        (o, tests::run_json(out.path()))
    };

    let shop = Shop::start(&python, &users);
    let (o, ran) = run(&shop, true);
    let counts = shop.counts();
    eprintln!("with a setup: {counts}");
    let items_ok = counts["items"]["200"].as_u64().unwrap_or(0);
    let logins = counts["login"]["200"].as_u64().unwrap_or(0);
    assert!(items_ok > 20, "{counts}");
    assert_eq!(
        counts["items"].get("401"),
        None,
        "no 401 with a setup: {counts}"
    );
    assert_eq!(
        counts["login"].get("401"),
        None,
        "every login right: {counts}"
    );
    // Once per connection (4, and any reopened), never once per request.
    assert!((4..=items_ok / 4).contains(&logins), "{counts}");
    let step = &ran["steps"][0];
    assert_eq!(step["ok"].as_u64(), Some(items_ok), "{}", text(&o.stderr));
    // Every login the shop answered was a setup run stampede counted, none failed.
    assert_eq!(step["setup"]["runs"].as_u64(), Some(logins), "{step}");
    assert_eq!(step["setup"]["failed"], 0, "{step}");
    assert_eq!(ran["plan"]["setup"]["extract"][0], "token = json:/token");
    assert_eq!(ran["plan"]["feeders"][0]["mode"], "circular");
    drop(shop);

    let shop = Shop::start(&python, &users);
    let (_, ran) = run(&shop, false);
    let counts = shop.counts();
    eprintln!("without: {counts}");
    let refused = counts["items"]["401"].as_u64().unwrap_or(0);
    assert!(refused > 20, "{counts}");
    assert_eq!(
        counts["items"].get("200"),
        None,
        "100 % 401 without: {counts}"
    );
    assert_eq!(counts.get("login"), None);
    assert_eq!(ran["steps"][0]["ok"], 0);
    assert_eq!(
        ran["steps"][0]["status_codes"]["401"].as_u64(),
        Some(refused)
    );
    drop(shop);

    // A setup that fails (the shop knows none of these passwords) is counted, never skipped: no
    // request of the mix goes without its token.
    let wrong = dir.path().join("wrong.csv");
    std::fs::write(&wrong, "user,password\nuser1,nope\n").unwrap();
    let shop = Shop::start(&python, &wrong);
    let (_, ran) = run(&shop, true);
    let counts = shop.counts();
    eprintln!("failing setups: {counts}");
    assert_eq!(counts.get("items"), None, "{counts}");
    assert!(
        counts["login"]["401"].as_u64().unwrap_or(0) >= 4,
        "{counts}"
    );
    let step = &ran["steps"][0];
    assert_eq!(step["ok"], 0);
    assert_eq!(step["requests"], 0, "{step}");
    assert!(step["errors"]["other"].as_u64().unwrap_or(0) >= 4, "{step}");
    assert_eq!(
        step["error_messages"]["other"], "the setup request was answered 401",
        "{step}"
    );
    // Counted as such: each failed run is one the shop refused, and the step says so in words.
    let refused = counts["login"]["401"].as_u64().unwrap();
    assert_eq!(step["setup"]["runs"].as_u64(), Some(refused), "{step}");
    assert_eq!(step["setup"]["failed"].as_u64(), Some(refused), "{step}");
    assert!(
        step["notes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n.as_str().unwrap().starts_with("setup: ")),
        "{step}"
    );
}

#[test]
fn a_named_mix_with_a_feeder_and_a_login_counts_each_name_as_the_application_does() {
    let Some(python) = shop_python() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let users = dir.path().join("users.csv");
    let mut csv = String::from("user,password\n");
    for i in 0..10 {
        csv.push_str(&format!("user{i},pw-{i}\n"));
    }
    std::fs::write(&users, csv).unwrap();
    std::fs::write(
        dir.path().join("terms.csv"),
        "q\nshoes\n\"red hats\"\nsocks\n",
    )
    .unwrap();
    let shop = Shop::start(&python, &users);
    let plan = dir.path().join("plan.toml");
    std::fs::write(
        &plan,
        format!(
            r#"url = "http://{}/"
headers = ["Authorization: Bearer ${{token}}"]

[[request]]
name = "items"
weight = 5
url = "/items?page=${{random(1,9)}}"

[[request]]
name = "search"
weight = 3
url = "/search?q=${{q}}"

[[request]]
name = "cart"
weight = 2
method = "POST"
url = "/cart"
headers = ["Content-Type: application/json"]
body = '{{"item": ${{counter()}}, "id": "${{uuid()}}"}}'

[[feeder]]
name = "users"
file = "users.csv"
mode = "circular"

[[feeder]]
name = "terms"
file = "terms.csv"
mode = "random"

[setup]
method = "POST"
url = "/login"
headers = ["Content-Type: application/json"]
body = '{{"user": "${{user}}", "password": "${{password}}"}}'
extract = {{ token = "json:/token" }}
"#,
            shop.addr
        ),
    )
    .unwrap();
    let ran = run_ok(&[
        plan.to_str().unwrap(),
        "--model",
        "requests",
        "--steps",
        "100",
        "--step-duration",
        "2s",
    ]);
    let counts = shop.counts();
    eprintln!("the shop counted: {counts}");
    let step = ran.step(0);
    let per_name = step["per_request"].as_array().expect("a row per name");
    // Each name's served count is the application's own, and no request went without its token.
    for row in per_name {
        let name = row["name"].as_str().unwrap();
        let served = counts[name]["200"]
            .as_u64()
            .or_else(|| counts[name]["201"].as_u64())
            .unwrap_or(0);
        assert_eq!(
            row["ok"].as_u64(),
            Some(served),
            "{name}: {row} against {counts}"
        );
        assert!(served > 0, "{name}");
        assert_eq!(counts[name].get("401"), None, "{name}: {counts}");
    }
    assert_eq!(counts["login"].get("401"), None, "{counts}");
    // A term with a space ("red hats") would break the request line: never sent, counted unsent
    // under its name as `other`, in words naming the variable.
    let search = per_name.iter().find(|r| r["name"] == "search").unwrap();
    assert!(search["unsent"].as_u64().unwrap() > 0, "{search}");
    assert!(
        step["error_messages"]["other"]
            .as_str()
            .unwrap()
            .contains("variable 'q' gives a value with a space"),
        "{step}"
    );
}

/// The application's plan: a 3-request mix, users from a CSV feeder, a login per connection.
fn shop_plan(dir: &std::path::Path, target: Option<std::net::SocketAddr>) -> std::path::PathBuf {
    let mut csv = String::from("user,password\n");
    for i in 0..10 {
        csv.push_str(&format!("user{i},pw-{i}\n"));
    }
    std::fs::write(dir.join("users.csv"), csv).unwrap();
    let url = target.map_or(String::new(), |a| format!("url = \"http://{a}/\"\n"));
    let plan = dir.join("shop.toml");
    std::fs::write(
        &plan,
        url + r#"headers = ["Authorization: Bearer ${token}"]

[[request]]
name = "items"
weight = 5
url = "/items?page=${random(1,9)}"

[[request]]
name = "search"
weight = 3
url = "/search?q=shoes"

[[request]]
name = "cart"
weight = 2
method = "POST"
url = "/cart"
body = '{"item": ${counter()}}'

[[feeder]]
name = "users"
file = "users.csv"
mode = "circular"

[setup]
method = "POST"
url = "/login"
headers = ["Content-Type: application/json"]
body = '{"user": "${user}", "password": "${password}"}'
extract = { token = "json:/token" }
"#,
    )
    .unwrap();
    plan
}

/// Each name's served count in `run` (all steps) is the shop's own count of its 2xx, and the shop
/// refused nothing.
fn served_as_the_shop_counts(run: &serde_json::Value, shop: &Shop, what: &str) {
    let counts = shop.counts();
    for name in ["items", "search", "cart"] {
        let ours: u64 = run["steps"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|s| s["per_request"].as_array().unwrap())
            .filter(|r| r["name"] == name)
            .map(|r| r["ok"].as_u64().unwrap())
            .sum();
        let theirs: u64 = ["200", "201"]
            .iter()
            .filter_map(|s| counts[name][*s].as_u64())
            .sum();
        assert!(ours > 0, "{what} {name}: {counts}");
        assert_eq!(ours, theirs, "{what} {name}: the shop counted {counts}");
        assert_eq!(counts[name].get("401"), None, "{what} {name}: {counts}");
    }
    assert_eq!(counts["login"].get("401"), None, "{what}: {counts}");
}

#[test]
fn the_application_s_plan_runs_in_every_load_model_and_side_by_side() {
    let Some(python) = shop_python() else {
        return;
    };
    let _serial = tests::serial();
    let dir = tempfile::tempdir().unwrap();
    let users = {
        shop_plan(dir.path(), None);
        dir.path().join("users.csv")
    };
    for model in [
        &["--model", "requests", "--steps", "60"][..],
        &["--model", "connections", "--num-call", "3", "--steps", "20"],
        &["--model", "concurrency", "--steps", "2"],
    ] {
        let shop = Shop::start(&python, &users);
        let plan = shop_plan(dir.path(), Some(shop.addr));
        let mut args = vec![plan.to_str().unwrap(), "--step-duration", "2s"];
        args.extend_from_slice(model);
        let ran = run_ok(&args);
        served_as_the_shop_counts(&ran.run, &shop, &format!("{model:?}"));
    }
    // Side by side: one plan, two shops, each its own rows and each counted as it counted.
    let (one, two) = (Shop::start(&python, &users), Shop::start(&python, &users));
    let plan = shop_plan(dir.path(), None);
    let out = tempfile::tempdir().unwrap();
    let (a, b) = (
        format!("one=http://{}/", one.addr),
        format!("two=http://{}/", two.addr),
    );
    let o = tests::stampede(&[
        "run",
        plan.to_str().unwrap(),
        &a,
        &b,
        "--model",
        "requests",
        "--steps",
        "60",
        "--step-duration",
        "2s",
        "--quiet",
        "--out",
        out.path().to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    for (label, shop) in [("one", &one), ("two", &two)] {
        let run = tests::run_json(&out.path().join(label));
        served_as_the_shop_counts(&run, shop, label);
    }
}
