//! The server monitor from the coordinator's side, with the real binaries on loopback: an embedded
//! monitor watching `stampede serve` by its pid puts the server's CPU in every step's row and run.json,
//! and it grows with the rate; a remote one (`stampede-agent --monitor`) dialed with --monitors does the
//! same, and named among --agents it is refused by its role.
use tests::{AgentProc, ServeProcess, run_ok, run_quiet, text};

/// CPU seconds a process has used, from /proc/PID/stat read here (fields 14 and 15, utime and
/// stime, in clock ticks; the command name in parentheses may hold spaces).
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("the target runs");
    let after_name = &stat[stat.rfind(')').expect("a comm field") + 2..];
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    // After the name: state is field 3, so utime (14) and stime (15) are at 11 and 12.
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    // SAFETY: sysconf only reads a configuration value.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    ticks as f64 / hz
}

#[test]
fn an_embedded_monitor_shows_the_targets_cpu_grow_with_the_rate() {
    let target = ServeProcess::start(&[]);
    let pid = target.pid();
    let before = cpu_seconds(pid);
    let ran = run_ok(&[
        &target.url(),
        "--model",
        "requests",
        "--steps",
        "50,2000",
        "--step-duration",
        "3s",
        "--monitor-pid",
        &pid.to_string(),
    ]);
    let used = cpu_seconds(pid) - before;
    let name = "server".to_string();
    let monitors = ran.run["monitors"]
        .as_array()
        .expect("run.json has monitors[]");
    assert_eq!(monitors.len(), 1);
    assert_eq!(monitors[0]["name"], name.as_str());
    let view = |i: usize| &ran.step(i)["server_monitors"][0];
    let cpu = |i: usize| view(i)["target"]["cpu_pct"].as_f64().expect("a CPU share");
    let (light, heavy) = (cpu(0), cpu(1));
    assert!(
        heavy > 5.0 && heavy > 3.0 * light,
        "the server's CPU at 2000 req/s ({heavy} %) is not far above its CPU at 50 ({light} %)"
    );
    for i in 0..2 {
        let v = view(i);
        assert_eq!(v["monitor"], name.as_str());
        assert_eq!(v["partial"], false, "{v}");
        let series = v["series"].as_array().expect("a 1 s series");
        assert!(series.len() >= 3, "{} seconds in a 3 s step", series.len());
        assert!(series.iter().all(|p| p["cpu_pct"].is_number()), "{v}");
        assert!(v["target"]["memory_bytes"]["max"].as_f64().unwrap() > 1e6);
    }
    // What the monitor counted inside the steps is no more than what the kernel says the process
    // used over the whole run (read here, not through the probe), less a clock tick per reading.
    let counted: f64 = (0..2)
        .map(|i| cpu(i) / 100.0 * view(i)["rated_s"].as_f64().unwrap())
        .sum();
    assert!(
        counted <= used + 0.05 && counted >= 0.4 * used,
        "monitored {counted:.3} CPU s in the steps; the process used {used:.3} s over the run"
    );
    // steps.tsv: the monitor's columns last, suffixed with its name, holding run.json's numbers.
    let tsv = std::fs::read_to_string(ran.dir.path().join("steps.tsv")).unwrap();
    let mut lines = tsv.lines();
    let header: Vec<&str> = lines.next().unwrap().split('\t').collect();
    let col = header
        .iter()
        .position(|h| *h == format!("srv_cpu_pct_{name}"))
        .expect("a srv_cpu_pct column");
    assert_eq!(
        header.last(),
        Some(&format!("ok_per_core_s_{name}").as_str())
    );
    let cells: Vec<f64> = lines
        .map(|l| l.split('\t').nth(col).unwrap().parse().unwrap())
        .collect();
    assert_eq!(cells, [light, heavy]);
}

#[test]
fn a_bad_monitor_pid_is_an_error_at_start() {
    let target = ServeProcess::start(&[]);
    let (o, _dir) = run_quiet(&[
        &target.url(),
        "--steps",
        "10",
        "--step-duration",
        "1s",
        "--monitor-pid",
        "999999999",
    ]);
    let stderr = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--monitor-pid"), "{stderr}");
    assert_eq!(target.requests(), 0, "no load before the refusal");
}

/// `stampede-agent --monitor --name NAME --pid PID --listen 127.0.0.1:0`.
fn remote_monitor(name: &str, pid: u32) -> AgentProc {
    let pid = pid.to_string();
    let args = [
        "--monitor",
        "--name",
        name,
        "--pid",
        &pid,
        "--listen",
        "127.0.0.1:0",
    ];
    AgentProc::with_args(&args, &[])
}

#[test]
fn a_remote_monitor_dialed_with_monitors_fills_its_columns() {
    let target = ServeProcess::start(&[]);
    let monitor = remote_monitor("web", target.pid());
    let addr = monitor.addr.to_string();
    let ran = run_ok(&[
        &target.url(),
        "--model",
        "requests",
        "--steps",
        "2000",
        "--step-duration",
        "3s",
        "--monitors",
        &addr,
    ]);
    assert_eq!(ran.run["monitors"][0]["name"], "web");
    // The monitor's machine id is this machine's, where the embedded agent runs.
    let warnings = ran.run["warnings"].to_string();
    assert!(
        warnings.contains("generator and target share this host: the server monitor web"),
        "{warnings}"
    );
    let view = &ran.step(0)["server_monitors"][0];
    assert_eq!(view["monitor"], "web");
    let cpu = view["target"]["cpu_pct"].as_f64().unwrap();
    assert!(
        cpu > 3.0,
        "the target served 2000 req/s on {cpu} % of a core: {view}"
    );
    assert!(view["series"].as_array().unwrap().len() >= 3, "{view}");
    let tsv = std::fs::read_to_string(ran.dir.path().join("steps.tsv")).unwrap();
    assert!(
        tsv.lines()
            .next()
            .unwrap()
            .ends_with("\ttcp_listen_drops_web\ttcp_retrans_web\tok_per_core_s_web")
    );
}

#[test]
fn a_monitor_named_among_the_agents_is_refused_by_its_role() {
    let target = ServeProcess::start(&[]);
    let monitor = remote_monitor("web", target.pid());
    let addr = monitor.addr.to_string();
    let (o, _dir) = run_quiet(&[&target.url(), "--steps", "10", "--agents", &addr]);
    let stderr = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!("{addr} is a monitor")) && stderr.contains("--monitors"),
        "{stderr}"
    );
    assert_eq!(target.requests(), 0, "no load was sent");
}

/// A listener with a backlog of one that never accepts: once its queue is full, the kernel drops
/// the SYNs of every further connection, which the clients see as connect timeouts.
struct FullListener {
    fd: i32,
    port: u16,
}

impl FullListener {
    fn bind() -> FullListener {
        // SAFETY: plain socket calls on a descriptor this function owns; every result is checked.
        unsafe {
            let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0);
            assert!(fd >= 0, "socket");
            let mut addr: libc::sockaddr_in = std::mem::zeroed();
            addr.sin_family = libc::AF_INET as libc::sa_family_t;
            addr.sin_addr.s_addr = u32::from(std::net::Ipv4Addr::LOCALHOST).to_be();
            let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
            let bound = libc::bind(fd, (&raw const addr).cast(), len);
            assert_eq!(bound, 0, "bind");
            assert_eq!(libc::listen(fd, 1), 0, "listen");
            let mut got: libc::sockaddr_in = std::mem::zeroed();
            let mut got_len = len;
            libc::getsockname(fd, (&raw mut got).cast(), &mut got_len);
            FullListener {
                fd,
                port: u16::from_be(got.sin_port),
            }
        }
    }
}

impl Drop for FullListener {
    fn drop(&mut self) {
        // SAFETY: the descriptor is ours and closed once.
        unsafe { libc::close(self.fd) };
    }
}

#[test]
fn a_full_listen_queue_is_noted_as_the_syns_the_server_dropped() {
    let listener = FullListener::bind();
    // The TCP counters are the network namespace's: any process here will do to watch.
    let me = std::process::id().to_string();
    let url = format!("http://127.0.0.1:{}/", listener.port);
    let (o, dir) = run_quiet(&[
        &url,
        "--model",
        "connections",
        "--steps",
        "50",
        "--step-duration",
        "2s",
        "--connect-timeout",
        "300ms",
        "--timeout",
        "500ms",
        "--monitor-pid",
        &me,
    ]);
    assert!(o.status.code().is_some(), "{}", text(&o.stderr));
    let run = tests::run_json(dir.path());
    let step = &run["steps"][0];
    let drops = step["server_monitors"][0]["tcp"]["listen_overflows"]
        .as_u64()
        .unwrap();
    assert!(drops > 0, "no listen-queue overflow counted: {step}");
    assert!(
        step["errors"]["connect-timeout"].as_u64().unwrap() > 0,
        "{step}"
    );
    let notes = step["notes"].to_string();
    assert!(
        notes.contains("listen queue overflowed")
            && notes.contains("the connect timeouts are SYNs the server dropped"),
        "{notes}"
    );
    // A step with no reply is not trusted, by the generator's own rule; the drops are no reason.
    let reasons = step["reasons"].to_string();
    assert!(!reasons.contains("listen"), "{reasons}");
}

/// A run on `--listen` that a monitor of the target joins, beside `agents` load agents that join
/// too (none: the embedded agent sends the load); returns its run.json.
fn run_joined_by_a_monitor(agents: usize) -> serde_json::Value {
    let target = ServeProcess::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let ready = dir.path().join("ready.json");
    let out = dir.path().join("out");
    let (url, expect) = (target.url(), agents.to_string());
    let mut args = vec!["run", &url, "--listen", "127.0.0.1:0"];
    if agents > 0 {
        args.extend(["--expect-agents", &expect]);
    }
    args.extend([
        "--expect-monitors",
        "1",
        "--wait-agents",
        "20s",
        "--ready-file",
        ready.to_str().unwrap(),
        "--model",
        "requests",
        "--steps",
        "500",
        "--step-duration",
        "2s",
        "--quiet",
        "--out",
        out.to_str().unwrap(),
    ]);
    let mut coordinator = tests::spawn_stampede(&args);
    let log = tests::Lines::of(&mut coordinator);
    let listen = tests::ready_addr(&ready, &mut coordinator, &log).to_string();
    let pid = target.pid().to_string();
    let spawn = |args: &[&str]| {
        std::process::Command::new(tests::bin("stampede-agent"))
            .args(args)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap()
    };
    let mut joined: Vec<_> = (0..agents)
        .map(|_| spawn(&["--join", &listen, "--threads", "1"]))
        .collect();
    joined.push(spawn(&[
        "--monitor",
        "--name",
        "web",
        "--pid",
        &pid,
        "--join",
        &listen,
    ]));
    let status = coordinator.wait().unwrap();
    for j in &mut joined {
        let _ = j.kill();
        let _ = j.wait();
    }
    assert!(status.success(), "{}", log.text());
    let run = tests::run_json(&out);
    assert_eq!(run["monitors"][0]["name"], "web");
    let view = &run["steps"][0]["server_monitors"][0];
    assert!(view["target"]["cpu_pct"].as_f64().unwrap() > 0.0, "{view}");
    run
}

#[test]
fn a_monitor_joins_beside_the_agents_and_is_counted_by_its_role() {
    let run = run_joined_by_a_monitor(1);
    assert_eq!(run["agents"].as_array().unwrap().len(), 1, "{run}");
    assert_ne!(run["agents"][0]["name"], "embedded", "{run}");
}

/// The server host's monitor dials out (it gets no listener), the load comes from here.
#[test]
fn a_monitor_joins_beside_the_embedded_agent() {
    let run = run_joined_by_a_monitor(0);
    assert_eq!(run["agents"].as_array().unwrap().len(), 1, "{run}");
    assert_eq!(run["agents"][0]["name"], "embedded", "{run}");
    assert_eq!(run["steps"][0]["ok"], 1000, "{run}");
}

/// `stampede run a=URL b=URL ... --quiet --out DIR`, whatever its outcome.
fn run_two(
    a: &ServeProcess,
    b: &ServeProcess,
    extra: &[&str],
    dir: &std::path::Path,
) -> std::process::Output {
    let (ua, ub) = (format!("a={}", a.url()), format!("b={}", b.url()));
    let mut args = vec!["run", &ua, &ub, "--quiet", "--out", dir.to_str().unwrap()];
    args.extend_from_slice(extra);
    tests::stampede(&args)
}

#[test]
fn two_targets_each_carry_their_own_server_s_cpu_from_its_paired_monitor() {
    let (a, b) = (ServeProcess::start(&[]), ServeProcess::start(&[]));
    let pids = [a.pid(), b.pid()];
    let before = pids.map(cpu_seconds);
    let out = tempfile::tempdir().unwrap();
    let dir = out.path().join("x");
    let (pa, pb) = (format!("a=pid:{}", pids[0]), format!("b=pid:{}", pids[1]));
    // Beside the two paired monitors, one of b's process paired with no target: every target's
    // steps carry it, so a's steps see b idle while a is loaded.
    let o = run_two(
        &a,
        &b,
        &[
            "--model",
            "requests",
            "--steps",
            "50,2000",
            "--step-duration",
            "3s",
            "--monitor-target",
            &pa,
            "--monitor-target",
            &pb,
            "--monitor-pid",
            &pids[1].to_string(),
        ],
        &dir,
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    let used = [0, 1].map(|i| cpu_seconds(pids[i]) - before[i]);
    for (i, (own, other)) in [("a", "b"), ("b", "a")].into_iter().enumerate() {
        let run = tests::run_json(&dir.join(own));
        assert_eq!(run["paired_monitor"], own, "{run}");
        let names: Vec<&str> = run["monitors"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["name"].as_str().unwrap())
            .collect();
        assert!(
            names.len() == 2 && names.contains(&own) && names.contains(&"server"),
            "{own}'s monitors: {names:?}"
        );
        let steps = run["steps"].as_array().unwrap();
        let view = |s: usize, name: &str| {
            let views = steps[s]["server_monitors"].as_array().unwrap();
            assert!(views.iter().all(|v| v["monitor"] != other), "{views:?}");
            views
                .iter()
                .find(|v| v["monitor"] == name)
                .unwrap_or_else(|| panic!("{own} step {s}: no view of {name}: {views:?}"))
                .clone()
        };
        let cpu = |v: &serde_json::Value| v["target"]["cpu_pct"].as_f64().unwrap();
        for s in 0..2 {
            assert_eq!(view(s, own)["watches"], "target");
            assert_eq!(view(s, "server")["watches"], "shared");
        }
        let loaded = cpu(&view(1, own));
        let b_process = cpu(&view(1, "server"));
        assert!(
            loaded > 5.0,
            "{own} served 2000 req/s on {loaded} % of a core"
        );
        if own == "a" {
            // b's process, watched by the unpaired monitor, idled while a was loaded.
            assert!(
                b_process < 3.0 && b_process < loaded / 3.0,
                "b's process read {b_process} % while a served 2000 req/s on {loaded} %"
            );
        } else {
            // The same process, two monitors: both saw it loaded.
            assert!(
                b_process > loaded / 3.0,
                "b {loaded} %, the other monitor of it {b_process} %"
            );
        }
        // What the paired monitor counted in this target's steps is its own process's CPU, as
        // the kernel tells it (not through the probe): no more than it used over the run, and
        // most of it (the rest fell between steps and in the other target's).
        let counted: f64 = (0..2)
            .map(|s| {
                let v = view(s, own);
                cpu(&v) / 100.0 * v["rated_s"].as_f64().unwrap()
            })
            .sum();
        assert!(
            counted <= used[i] + 0.05 && counted >= 0.4 * used[i],
            "{own}: monitored {counted:.3} CPU s in its steps; its process used {:.3} s over the run",
            used[i]
        );
        let tsv = std::fs::read_to_string(dir.join(own).join("steps.tsv")).unwrap();
        let header: Vec<&str> = tsv.lines().next().unwrap().split('\t').collect();
        let col = header.iter().position(|h| *h == "srv_cpu_pct").unwrap();
        assert!(header.contains(&"srv_cpu_pct_server"), "{header:?}");
        assert!(!header.iter().any(|h| h.ends_with(&format!("_{other}"))));
        let row: Vec<&str> = tsv.lines().nth(2).unwrap().split('\t').collect();
        assert_eq!(row[col].parse::<f64>().unwrap(), loaded);
    }
    // compare.tsv: one srv_cpu_pct per target, then the unpaired monitor's under each.
    let compare = std::fs::read_to_string(dir.join("compare.tsv")).unwrap();
    let header: Vec<&str> = compare.lines().next().unwrap().split('\t').collect();
    let cpu: Vec<&str> = header
        .iter()
        .copied()
        .filter(|h| h.starts_with("srv_cpu_pct_"))
        .collect();
    assert_eq!(
        cpu,
        [
            "srv_cpu_pct_a",
            "srv_cpu_pct_server_a",
            "srv_cpu_pct_b",
            "srv_cpu_pct_server_b"
        ]
    );
}

#[test]
fn a_pairing_of_no_target_two_for_one_or_no_such_process_is_refused_before_any_load() {
    let (a, b) = (ServeProcess::start(&[]), ServeProcess::start(&[]));
    let pid = a.pid().to_string();
    let (pa, pc) = (format!("a=pid:{pid}"), format!("c=pid:{pid}"));
    let cases: [(&[&str], &str); 4] = [
        (
            &["--monitor-target", &pc],
            "--monitor-target c=…: names no target (the targets are a, b)",
        ),
        (
            &[
                "--monitor-target",
                &pa,
                "--monitor-target",
                "a=process:nginx",
            ],
            "two monitors for target a",
        ),
        (
            &["--monitor-target", "a=process:no-such-server"],
            "--monitor-target a=process:no-such-server: no running process is named \"no-such-server\"",
        ),
        (
            &["--monitor-target", "a=pid:zero"],
            "pid 'zero' is not a process id",
        ),
    ];
    for (extra, said) in cases {
        let out = tempfile::tempdir().unwrap();
        let mut args = vec!["--steps", "10", "--step-duration", "1s"];
        args.extend_from_slice(extra);
        let o = run_two(&a, &b, &args, out.path());
        let stderr = text(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{extra:?}: {stderr}");
        assert!(stderr.contains(said), "{extra:?}: {stderr}");
    }
    // A remote monitor named as a target, and an in-process one paired with it: two for one.
    let monitor = remote_monitor("web", a.pid());
    let out = tempfile::tempdir().unwrap();
    let (ua, web) = (format!("web={}", a.url()), format!("web=pid:{pid}"));
    let o = tests::stampede(&[
        "run",
        &ua,
        "--steps",
        "10",
        "--monitors",
        &monitor.addr.to_string(),
        "--monitor-target",
        &web,
        "--quiet",
        "--out",
        out.path().to_str().unwrap(),
    ]);
    let stderr = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("is a monitor named web") && stderr.contains("one per target"),
        "{stderr}"
    );
    assert_eq!(a.requests() + b.requests(), 0, "no load before any refusal");
}

#[test]
fn a_paired_remote_monitor_killed_mid_run_empties_its_target_s_later_server_cells_alone() {
    let (a, b) = (ServeProcess::start(&[]), ServeProcess::start(&[]));
    let mut monitor_a = remote_monitor("a", a.pid());
    let monitor_b = remote_monitor("b", b.pid());
    let monitors = format!("{},{}", monitor_a.addr, monitor_b.addr);
    let out = tempfile::tempdir().unwrap();
    let dir = out.path().join("x");
    let (ua, ub) = (format!("a={}", a.url()), format!("b={}", b.url()));
    // Side by side the steps interleave, 2 s each: a1 b1 a2 b2 a3 b3.
    let run = tests::spawn_stampede(&[
        "run",
        &ua,
        &ub,
        "--model",
        "requests",
        "--steps",
        "300,300,300",
        "--step-duration",
        "2s",
        "--monitors",
        &monitors,
        "--quiet",
        "--out",
        dir.to_str().unwrap(),
    ]);
    // In a2, after a1 had its server's numbers.
    std::thread::sleep(std::time::Duration::from_millis(5000));
    monitor_a.child.kill().expect("the monitor runs");
    let o = run.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let cells = |target: &str| -> (Vec<String>, Vec<String>) {
        let tsv = std::fs::read_to_string(dir.join(target).join("steps.tsv")).unwrap();
        let header: Vec<&str> = tsv.lines().next().unwrap().split('\t').collect();
        let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
        let (cpu, per_core) = (col("srv_cpu_pct"), col("ok_per_core_s"));
        let rows: Vec<Vec<&str>> = tsv
            .lines()
            .filter(|l| !l.starts_with('#'))
            .skip(1)
            .map(|l| l.split('\t').collect())
            .collect();
        assert_eq!(rows.len(), 3, "{target}: every step ran: {tsv}");
        (
            rows.iter().map(|r| r[cpu].to_string()).collect(),
            rows.iter().map(|r| r[per_core].to_string()).collect(),
        )
    };
    let (a_cpu, a_per_core) = cells("a");
    assert!(
        a_cpu[0].parse::<f64>().is_ok() && !a_per_core[0].is_empty(),
        "a's first step had its monitor: {a_cpu:?}"
    );
    assert_eq!(a_cpu[2], "", "a's last step, its monitor gone: {a_cpu:?}");
    assert_eq!(a_per_core[2], "", "{a_per_core:?}");
    let (b_cpu, _) = cells("b");
    assert!(
        b_cpu.iter().all(|c| c.parse::<f64>().is_ok()),
        "b's monitor watched all of b's steps: {b_cpu:?}"
    );
    let notes = |target: &str| -> Vec<String> {
        let run = tests::run_json(&dir.join(target));
        let steps = run["steps"].as_array().unwrap().clone();
        let notes = steps
            .iter()
            .flat_map(|s| s["notes"].as_array().unwrap().clone());
        notes.map(|n| n.as_str().unwrap().to_string()).collect()
    };
    let (a_notes, b_notes) = (notes("a"), notes("b"));
    let lost = a_notes
        .iter()
        .filter(|n| n.starts_with("server monitor a ("));
    assert_eq!(lost.count(), 1, "said once, in a's steps: {a_notes:?}");
    assert!(b_notes.iter().all(|n| !n.contains("lost")), "{b_notes:?}");
}

#[test]
fn a_monitored_step_waited_2_5_s_for_its_closing_sample_before_the_next() {
    let target = ServeProcess::start(&[]);
    let pid = target.pid().to_string();
    // Built before the clock starts.
    tests::bin("stampede");
    let began = std::time::Instant::now();
    let ran = run_ok(&[
        &target.url(),
        "--steps",
        "10,20,30",
        "--step-duration",
        "1s",
        "--monitor-pid",
        &pid,
    ]);
    let took = began.elapsed();
    // Generous: a correctness bound, not a benchmark (bench/monitored.sh measures). It took ~10 s
    // when each step waited out the sample's 2.5 s deadline.
    assert!(
        took < std::time::Duration::from_secs(6),
        "3 steps of 1 s with a monitor took {took:?}"
    );
    // Not sooner by losing the closing sample: every step has the server's view, whole.
    for i in 0..3 {
        let v = &ran.step(i)["server_monitors"][0];
        assert_eq!(v["partial"], false, "step {}: {v}", i + 1);
        assert!(v["target"]["cpu_pct"].is_number(), "step {}: {v}", i + 1);
    }
}

#[test]
fn a_process_name_that_matches_a_process_not_serving_the_target_is_said() {
    // `--monitor-target web=process:python3` matched every python3 on the host, the one serving
    // the target and any other, in silence.
    let dir = tempfile::tempdir().unwrap();
    let port = tests::closed_port();
    let mut server = std::process::Command::new("python3")
        .args([
            "-m",
            "http.server",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
        ])
        .current_dir(dir.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut idle = std::process::Command::new("python3")
        .args(["-c", "import time; time.sleep(60)"])
        .spawn()
        .unwrap();
    let up = (0..100).any(|_| {
        std::thread::sleep(std::time::Duration::from_millis(100));
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    let url = format!("web=http://127.0.0.1:{port}/");
    let o = tests::stampede(&[
        "run",
        &url,
        "--model",
        "requests",
        "--steps",
        "10",
        "--step-duration",
        "1s",
        "--monitor-target",
        "web=process:python3",
        "--monitor-processes",
        "64",
        "--quiet",
        "--out",
        dir.path().join("out").to_str().unwrap(),
    ]);
    for child in [&mut server, &mut idle] {
        let _ = child.kill();
        let _ = child.wait();
    }
    assert!(up, "python3 -m http.server did not start");
    let err = tests::text(&o.stderr);
    let says = format!("named python3 do not listen on port {port}, the target's (pids ");
    let note = err
        .lines()
        .find(|l| l.contains(&says))
        .unwrap_or_else(|| panic!("{err}"));
    let named = note.split("(pids ").nth(1).unwrap_or_default();
    let named = named.split(')').next().unwrap_or_default();
    let pids: Vec<&str> = named.split(", ").collect();
    assert!(pids.contains(&idle.id().to_string().as_str()), "{note}");
    assert!(!pids.contains(&server.id().to_string().as_str()), "{note}");
}
