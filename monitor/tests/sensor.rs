//! The sensor against things stampede did not write: a real nginx (master + 2 workers) loaded by wrk,
//! `pgrep`, `ps`, the fd table as `ls` lists it, a thread's own CPU clock, the kernel's schedstat,
//! `nstat`, a cgroup v2 made here, a listener whose accept queue overflows.
//!
//! Tests that need nginx, wrk, root or a writable cgroup v2 skip with a printed reason when the
//! machine lacks them, except under CI=true, where they fail instead.
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use monitor::sensor::Sensor;
use monitor::{Sample, TargetSample, Watch};
use tests::nginx::Nginx;

/// Whether a test can run: when `ok` is false it says why and skips, unless under CI=true.
fn runnable(ok: bool, why: &str) -> bool {
    if !ok {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "CI=true: this test needs {why}"
        );
        eprintln!("skipped: this test needs {why}");
    }
    ok
}

fn has(program: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

fn output(program: &str, args: &[&str]) -> String {
    let out = Command::new(program).args(args).output().expect(program);
    String::from_utf8(out.stdout).unwrap()
}

fn target(sample: &Sample) -> &TargetSample {
    sample.target.as_ref().expect("a watched target")
}

/// CPU used between two samples, in % of one core over the wall time between them.
fn cpu_pct(a: &Sample, b: &Sample) -> f64 {
    let ns = target(b).cpu_ns().saturating_sub(target(a).cpu_ns());
    100.0 * ns as f64 / (b.at_unix_ns - a.at_unix_ns) as f64
}

/// A real nginx, master and 2 workers (the harness's, with a stub_status beside `/`), once both
/// workers are up.
fn start_nginx() -> Nginx {
    let nginx = Nginx::spawn(2);
    let deadline = Instant::now() + Duration::from_secs(10);
    while nginx.workers().len() < 2 {
        assert!(
            Instant::now() < deadline,
            "nginx's workers did not start: see {}",
            nginx.dir().display()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    nginx
}

fn nginx_here() -> bool {
    runnable(
        has("nginx") && has("pgrep"),
        "nginx (nginx-light) and pgrep",
    )
}

#[test]
fn process_nginx_finds_master_and_workers_as_pgrep_does() {
    if !nginx_here() {
        return;
    }
    let nginx = start_nginx();
    let mut tree = Sensor::open(&Watch::Pid(nginx.pid())).unwrap();
    assert_eq!(
        target(&tree.sample().unwrap()).processes,
        3,
        "master + 2 workers"
    );
    // Other nginx may come and go on this machine meanwhile: agree with pgrep at one moment.
    let mut by_name = Sensor::open(&Watch::Process("nginx".into())).unwrap();
    let agreed = (0..5).any(|_| {
        let before = output("pgrep", &["-x", "nginx"]).lines().count();
        let sensed = target(&by_name.sample().unwrap()).processes as usize;
        let after = output("pgrep", &["-x", "nginx"]).lines().count();
        before == sensed && sensed == after
    });
    assert!(agreed, "--process nginx never agreed with `pgrep -x nginx`");
    assert!(by_name.info(None).watching.starts_with("process nginx ("));
}

#[test]
fn nginx_cpu_grows_under_wrk_and_memory_and_fds_match_ps_and_ls() {
    if !nginx_here() || !runnable(has("wrk") && has("ps"), "wrk and ps") {
        return;
    }
    let nginx = start_nginx();
    let mut sensor = Sensor::open(&Watch::Pid(nginx.pid())).unwrap();
    let idle0 = sensor.sample().unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let idle1 = sensor.sample().unwrap();
    let wrk = Command::new("wrk")
        .args(["-t1", "-c10", "-d2s", &nginx.url()])
        .stdout(Stdio::piped())
        .output()
        .unwrap();
    let loaded = sensor.sample().unwrap();
    let wrk_out = String::from_utf8_lossy(&wrk.stdout);
    assert!(wrk_out.contains("requests in"), "{wrk_out}");
    let (idle, busy) = (cpu_pct(&idle0, &idle1), cpu_pct(&idle1, &loaded));
    assert!(
        busy > 5.0 && busy > 5.0 * idle,
        "nginx at {busy:.1} % under wrk, {idle:.1} % idle"
    );
    assert!(target(&loaded).busiest_thread_pct.unwrap() > 1.0);
    assert!(target(&loaded).voluntary_switches > target(&idle1).voluntary_switches);

    // After the load the numbers hold still: read ours between two reads of ps and ls.
    let pids: Vec<String> = nginx.all().iter().map(u32::to_string).collect();
    let ps_rss = || -> u64 {
        let out = output("ps", &["-o", "rss=", "-p", &pids.join(",")]);
        out.split_whitespace()
            .map(|kb| kb.parse::<u64>().unwrap() * 1024)
            .sum()
    };
    let ls_fds = || -> u64 {
        let script: String = pids
            .iter()
            .map(|p| format!("ls /proc/{p}/fd | wc -l;"))
            .collect();
        output("sh", &["-c", &script])
            .split_whitespace()
            .map(|n| n.parse::<u64>().unwrap())
            .sum()
    };
    let (rss_before, fds_before) = (ps_rss(), ls_fds());
    let sample = sensor.sample().unwrap();
    let (rss_after, fds_after) = (ps_rss(), ls_fds());
    let t = target(&sample);
    let (lo, hi) = (rss_before.min(rss_after), rss_before.max(rss_after));
    assert!(
        t.rss_bytes as f64 >= lo as f64 * 0.95 && t.rss_bytes as f64 <= hi as f64 * 1.05,
        "rss {} against ps's {lo}..{hi}",
        t.rss_bytes
    );
    // `ls /proc/PID/fd` lists the same table; ls's own descriptors are its own process's, not these.
    assert!(
        (fds_before.min(fds_after)..=fds_before.max(fds_after)).contains(&t.open_fds),
        "fds {} against ls's {fds_before}, {fds_after}",
        t.open_fds
    );
    assert_eq!((t.processes, t.threads), (3, 3));
}

#[test]
fn nginx_reloads_are_sampled_through_and_cpu_never_goes_back() {
    if !nginx_here() {
        return;
    }
    let nginx = start_nginx();
    let mut sensor = Sensor::open(&Watch::Process("nginx".into())).unwrap();
    let mut last = sensor.sample().unwrap();
    // Each reload starts 2 new workers and retires the old ones while we sample.
    for _ in 0..4 {
        // SAFETY: signals only the nginx master we started (SIGHUP: reload).
        unsafe { libc::kill(nginx.pid() as libc::pid_t, libc::SIGHUP) };
        for _ in 0..5 {
            let sample = sensor
                .sample()
                .expect("a worker exiting mid-sample is not an error");
            assert!(target(&sample).cpu_ns() >= target(&last).cpu_ns());
            assert!(target(&sample).voluntary_switches >= target(&last).voluntary_switches);
            last = sample;
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while nginx.workers().len() != 2 {
        assert!(Instant::now() < deadline, "the old workers did not exit");
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut tree = Sensor::open(&Watch::Pid(nginx.pid())).unwrap();
    assert_eq!(target(&tree.sample().unwrap()).processes, 3);
}

/// Two samples a second apart of a process busy `share` of every 50 ms by its own CPU clock, pinned
/// to `core`, and its CPU over that second by the scheduler's exact count (/proc/PID/schedstat), in %
/// of a core. A child of its own, so no other test's threads or children (`--pid` counts a process's
/// descendants: wrk, run by another test, is one of this test binary's) are in what is watched.
fn spin_and_sample(share: f64, core: usize) -> Option<(Sample, Sample, f64)> {
    if !runnable(has("python3") && has("taskset"), "python3 and taskset") {
        return None;
    }
    let script = "import sys, time\nshare = float(sys.argv[1])\nend = time.time() + 30\n\
                  while time.time() < end:\n    t0 = time.time(); c0 = time.thread_time()\n    \
                  while time.thread_time() - c0 < 0.05 * share and time.time() - t0 < 0.05: pass\n    \
                  rest = 0.05 - (time.time() - t0)\n    if rest > 0: time.sleep(rest)\n";
    let mut child = Command::new("taskset")
        .args([
            "-c",
            &core.to_string(),
            "python3",
            "-c",
            script,
            &share.to_string(),
        ])
        .spawn()
        .unwrap();
    let pid = child.id();
    std::thread::sleep(Duration::from_millis(300));
    let mut sensor = Sensor::open(&Watch::Pid(pid)).unwrap();
    let (a, sched_a) = (sensor.sample().unwrap(), schedstat_ns(pid));
    std::thread::sleep(Duration::from_secs(1));
    let (b, sched_b) = (sensor.sample().unwrap(), schedstat_ns(pid));
    let _ = child.kill();
    let _ = child.wait();
    let own = 100.0 * (sched_b - sched_a) as f64 / (b.at_unix_ns - a.at_unix_ns) as f64;
    Some((a, b, own))
}

#[test]
fn the_busiest_thread_is_the_spinner_at_the_schedulers_share() {
    // On a quiet machine the spinner holds its core (~100 %); on a shared one less, and the scheduler
    // says how much: the sensor must agree with it, within the ticks' and timing's ±5 points.
    let Some((_, b, sched)) = spin_and_sample(1.0, 0) else {
        return;
    };
    let t = target(&b);
    let seen = t.busiest_thread_pct.unwrap();
    assert_eq!(
        t.busiest_thread.as_deref(),
        Some("python3"),
        "{seen:.1} % vs {sched:.1} %"
    );
    assert!(
        (seen - sched).abs() <= 5.0,
        "busiest thread {seen:.1} %, schedstat {sched:.1} %"
    );
}

#[test]
fn a_known_share_of_a_core_is_reported_within_five_points() {
    // Another core than the other spinner's, when there is one: the tests run side by side.
    let Some((a, b, sched)) = spin_and_sample(0.4, control::system::cores().saturating_sub(1))
    else {
        return;
    };
    // Its share is known by its own clock: 40 % on a quiet machine, less where other work takes the
    // core; the sensor must agree with the scheduler's count.
    assert!(
        sched > 10.0 && sched < 50.0,
        "the spinner used {sched:.1} %, not up to 40 %"
    );
    let (process, thread) = (cpu_pct(&a, &b), target(&b).busiest_thread_pct.unwrap());
    assert!(
        (process - sched).abs() <= 5.0,
        "process {process:.1} %, schedstat {sched:.1} %"
    );
    assert!(
        (thread - sched).abs() <= 5.0,
        "busiest thread {thread:.1} %, schedstat {sched:.1} %"
    );
}

#[test]
fn memory_allocated_by_a_process_is_its_rss_within_ten_percent() {
    if !runnable(has("python3"), "python3") {
        return;
    }
    // A child that touches 64 MiB when told to, so the growth is its own and nothing else's.
    let script = "import sys\nsys.stdin.readline()\nb = b'x' * (64 << 20)\nprint('held', flush=True)\nsys.stdin.readline()\n";
    let mut child = Command::new("python3")
        .args(["-c", script])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    std::thread::sleep(Duration::from_millis(300));
    let mut sensor = Sensor::open(&Watch::Pid(child.id())).unwrap();
    let before = target(&sensor.sample().unwrap()).rss_bytes;
    writeln!(stdin).unwrap();
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "held");
    let after = target(&sensor.sample().unwrap()).rss_bytes;
    writeln!(stdin).unwrap();
    child.wait().unwrap();
    let grew = after.saturating_sub(before) as f64;
    let want = (64u64 << 20) as f64;
    assert!(
        (grew - want).abs() <= want * 0.1,
        "rss grew {grew} B for 64 MiB"
    );
}

#[test]
fn host_cpu_adds_up_to_the_wall_clock_on_every_core() {
    let mut sensor = Sensor::open(&Watch::Pid(std::process::id())).unwrap();
    let a = sensor.sample().unwrap();
    std::thread::sleep(Duration::from_secs(1));
    let b = sensor.sample().unwrap();
    let wall = (b.at_unix_ns - a.at_unix_ns) as f64;
    let cores = b.host.cores.len();
    assert_eq!(cores as u32, sensor.info(None).cores.online);
    // Every core accounts for every tick of wall time in one state or another (mpstat's arithmetic:
    // the states of an interval add up to it); USER_HZ ticks make that exact to ~2 ticks a core.
    // The clock and /proc/stat are read a moment apart, and on a loaded machine this thread can be
    // descheduled in between: 10 % and 50 ms leave room for that, and a state left out (idle is most
    // of a second) still fails.
    for (i, (ca, cb)) in a.host.cores.iter().zip(&b.host.cores).enumerate() {
        let total = cb.since(ca).total_ns() as f64;
        assert!(
            (total - wall).abs() <= 0.1 * wall + 5e7,
            "core {i}: {total} ns of states in {wall} ns"
        );
    }
    // The kernel's own all-cores line against our sum of its per-core lines.
    let summed: u64 = b.host.cores.iter().map(|c| c.total_ns()).sum();
    let line = b.host.cpu.total_ns();
    assert!(
        summed.abs_diff(line) <= 1e8 as u64 * cores as u64,
        "{summed} vs {line}"
    );
    let busiest = b.host.busiest_core_pct.unwrap();
    let average = b.host.cpu.since(&a.host.cpu).busy_pct().unwrap();
    assert!(
        busiest + 1.0 >= average && busiest <= 100.0 + 1e-9,
        "{busiest} {average}"
    );
}

/// A loopback listener with a backlog of 1 that never accepts.
fn unaccepting_listener() -> (i32, SocketAddr) {
    // SAFETY: plain socket calls on a descriptor we own; the sockaddr is sized for IPv4.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0);
        assert!(fd >= 0);
        let mut addr: libc::sockaddr_in = std::mem::zeroed();
        addr.sin_family = libc::AF_INET as libc::sa_family_t;
        addr.sin_addr.s_addr = u32::from_ne_bytes([127, 0, 0, 1]);
        let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
        assert_eq!(
            libc::bind(fd, &addr as *const _ as *const libc::sockaddr, len),
            0
        );
        assert_eq!(libc::listen(fd, 1), 0);
        let mut got = len;
        libc::getsockname(fd, &mut addr as *mut _ as *mut libc::sockaddr, &mut got);
        let port = u16::from_be(addr.sin_port);
        (fd, SocketAddr::from(([127, 0, 0, 1], port)))
    }
}

/// nstat's absolute value of one counter (it reads the same file through its own parser).
fn nstat(counter: &str) -> u64 {
    let out = output("nstat", &["-asz", counter]);
    let line = out
        .lines()
        .find(|l| l.starts_with(counter))
        .unwrap_or_else(|| panic!("{out}"));
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[test]
fn listen_queue_overflows_of_a_listener_that_never_accepts() {
    let (fd, addr) = unaccepting_listener();
    let mut sensor = Sensor::open(&Watch::Pid(std::process::id())).unwrap();
    let before = sensor.sample().unwrap().tcp;
    let with_nstat = runnable(has("nstat"), "nstat (iproute2) for the cross-check part");
    let nstat_before = with_nstat.then(|| nstat("TcpExtListenOverflows"));
    // Hammer it for at most a second: the first two connections fill its queue, later SYNs are dropped.
    let deadline = Instant::now() + Duration::from_secs(1);
    let mut held = Vec::new();
    while Instant::now() < deadline && held.len() < 200 {
        if let Ok(conn) = TcpStream::connect_timeout(&addr, Duration::from_millis(20)) {
            held.push(conn);
        }
    }
    let after = sensor.sample().unwrap().tcp;
    let nstat_after = with_nstat.then(|| nstat("TcpExtListenOverflows"));
    // SAFETY: closes the listener we opened.
    unsafe { libc::close(fd) };
    assert!(
        after.listen_overflows > before.listen_overflows,
        "{before:?} → {after:?}"
    );
    assert!(
        after.listen_drops > before.listen_drops,
        "{before:?} → {after:?}"
    );
    // nstat, read between our two samples, sits between them (the counter only grows).
    if let (Some(nb), Some(na)) = (nstat_before, nstat_after) {
        assert!(
            before.listen_overflows <= nb && nb <= na,
            "{} {nb} {na}",
            before.listen_overflows
        );
        assert!(
            after.listen_overflows <= na,
            "{} > nstat's {na}",
            after.listen_overflows
        );
    }
}

/// A cgroup v2 made for the test, removed (with its process killed) when dropped.
struct Cgroup {
    dir: PathBuf,
    child: Child,
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        // The cgroup empties once its process is reaped; rmdir removes it.
        for _ in 0..50 {
            if std::fs::remove_dir(&self.dir).is_ok() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

fn cgroup_v2_mount() -> Option<PathBuf> {
    let text = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    text.lines()
        .find(|l| {
            l.split_once(" - ")
                .is_some_and(|(_, r)| r.starts_with("cgroup2 "))
        })
        .and_then(|l| l.split_whitespace().nth(4))
        .map(PathBuf::from)
}

/// /proc/PID/schedstat's first field: the scheduler's exact runtime, in ns.
fn schedstat_ns(pid: u32) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/schedstat")).unwrap();
    text.split_whitespace().next().unwrap().parse().unwrap()
}

#[test]
fn a_cgroup_made_here_reports_its_process_cpu() {
    let mount = cgroup_v2_mount();
    let writable = mount
        .as_deref()
        .is_some_and(|m| is_root() && m.join("cgroup.procs").exists());
    if !runnable(
        writable && has("python3"),
        "root, a cgroup v2 mount to make a cgroup in, python3",
    ) {
        return;
    }
    let dir = mount
        .unwrap()
        .join(format!("stampede-probe-{}", std::process::id()));
    std::fs::create_dir(&dir).unwrap();
    // One busy process that ends itself after 30 s should the test die before killing it.
    let script = "import time\nend = time.time() + 30\nwhile time.time() < end: pass\n";
    let child = Command::new("python3")
        .args(["-c", script])
        .spawn()
        .unwrap();
    let cgroup = Cgroup { dir, child };
    let pid = cgroup.child.id();
    std::fs::write(cgroup.dir.join("cgroup.procs"), pid.to_string()).unwrap();
    let mut sensor = Sensor::open(&Watch::Cgroup(cgroup.dir.clone())).unwrap();
    let info = sensor.info(None);
    assert!(
        info.watching.contains("stampede-probe-"),
        "{}",
        info.watching
    );
    std::thread::sleep(Duration::from_millis(200));
    let (a, sched_a) = (sensor.sample().unwrap(), schedstat_ns(pid));
    std::thread::sleep(Duration::from_secs(1));
    let (b, sched_b) = (sensor.sample().unwrap(), schedstat_ns(pid));
    let wall = (b.at_unix_ns - a.at_unix_ns) as f64;
    let sched = 100.0 * (sched_b - sched_a) as f64 / wall;
    let (ca, cb) = (
        target(&a).cgroup.clone().unwrap(),
        target(&b).cgroup.clone().unwrap(),
    );
    let usage = 100.0 * (cb.usage_ns - ca.usage_ns) as f64 / wall;
    assert!(
        (usage - sched).abs() <= 5.0,
        "cgroup {usage:.1} %, schedstat {sched:.1} %"
    );
    assert!(
        (cpu_pct(&a, &b) - usage).abs() <= 2.0,
        "the target's CPU {:.1} % is the cgroup's own user + system, {usage:.1} % of usage",
        cpu_pct(&a, &b)
    );
    assert_eq!(target(&b).processes, 1);
    // The memory files are there only with the memory controller; when they are, they are read.
    let has_memory = cgroup.dir.join("memory.current").exists();
    assert_eq!(cb.memory_current_bytes.is_some(), has_memory);
    if has_memory {
        assert!(cb.working_set_bytes.unwrap() <= cb.memory_current_bytes.unwrap());
    }
}

#[test]
fn a_target_in_its_own_network_namespace_is_read_there() {
    let tools = has("unshare") && has("nsenter") && has("ip");
    if !runnable(
        is_root() && tools,
        "root, unshare, nsenter and ip (util-linux, iproute2)",
    ) {
        return;
    }
    // A process in a network namespace of its own, with only its loopback, up; it ends itself.
    let mut child = Command::new("unshare")
        .args(["-n", "sh", "-c", "ip link set lo up && exec sleep 30"])
        .spawn()
        .unwrap();
    let pid = child.id();
    let deadline = Instant::now() + Duration::from_secs(5);
    let ns = |p: u32| std::fs::read_link(format!("/proc/{p}/ns/net")).ok();
    while ns(pid) == ns(std::process::id())
        || !output("ps", &["-o", "comm=", "-p", &pid.to_string()]).contains("sleep")
    {
        assert!(
            Instant::now() < deadline,
            "unshare did not start its process"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut sensor = Sensor::open(&Watch::Pid(pid)).unwrap();
    let sample = sensor.sample().unwrap();
    // ip, asking the namespace over netlink, lists the same interfaces.
    let listed = output(
        "nsenter",
        &["-t", &pid.to_string(), "-n", "ip", "-o", "link"],
    );
    let mut names: Vec<&str> = listed
        .lines()
        .filter_map(|l| {
            l.split(':')
                .nth(1)
                .map(|n| n.trim().split('@').next().unwrap_or_default())
        })
        .collect();
    names.sort_unstable();
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(sample.net_scope, monitor::NetScope::Target);
    let ours: Vec<&str> = sample.net.iter().map(|i| i.name.as_str()).collect();
    assert_eq!(ours, names, "{listed}");
    // Its loopback is new and carried nothing: the host's has.
    assert!(
        sample
            .net
            .iter()
            .all(|i| i.rx_bytes == 0 && i.tx_bytes == 0),
        "{:?}",
        sample.net
    );
    assert_eq!(sample.tcp.curr_estab, 0);
}

/// The monitor role runs the sensor beside its session: it must be able to move to another thread.
#[test]
fn a_sensor_can_move_between_threads() {
    fn sendable<T: Send>(_: &T) {}
    let sensor = Sensor::open(&Watch::Pid(std::process::id())).unwrap();
    sendable(&sensor);
    std::thread::spawn(move || {
        let mut sensor = sensor;
        sensor.sample().unwrap();
    })
    .join()
    .unwrap();
}

#[test]
fn host_busy_share_agrees_with_vmstat_over_the_same_second() {
    if !runnable(has("vmstat"), "vmstat (procps)") {
        return;
    }
    let mut sensor = Sensor::open(&Watch::Pid(std::process::id())).unwrap();
    // vmstat's second line covers its first second; our samples bracket that second within the few
    // ms vmstat takes to start and to print.
    let a = sensor.sample().unwrap();
    let out = output("vmstat", &["-n", "1", "2"]);
    let b = sensor.sample().unwrap();
    let header: Vec<&str> = out.lines().nth(1).unwrap().split_whitespace().collect();
    let values: Vec<f64> = out
        .lines()
        .nth(3)
        .unwrap()
        .split_whitespace()
        .map(|v| v.parse().unwrap())
        .collect();
    let column = |name: &str| values[header.iter().position(|h| *h == name).unwrap()];
    let theirs = 100.0 - column("id") - column("wa");
    let ours = b.host.cpu.since(&a.host.cpu).busy_pct().unwrap();
    let wall_s = (b.at_unix_ns - a.at_unix_ns) as f64 / 1e9;
    // vmstat rounds to whole points; our window is up to a few % longer than its second.
    assert!(
        (ours - theirs).abs() <= 8.0,
        "ours {ours:.1} %, vmstat {theirs} % ({out}); {wall_s:.3} s"
    );
}
