//! The monitor role end to end: a real `stampede-agent --monitor --pid N --listen 127.0.0.1:0` watching
//! a sleeping child of this test, driven by a coordinator's side of the protocol written out here. It
//! greets as a monitor, streams a sample a second, refuses load, leaks no command line or environment,
//! and serves the next coordinator after one leaves; bad flags are refused at start.
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use control::dial::Dialer;
use control::link::{self, LinkRx, LinkTx, Side};
use monitor::{MonitorInfo, Sample};
use proto::pb;
use proto::pb::agent_message::Kind as Up;
use proto::pb::coordinator_message::Kind as Down;
use tests::{AgentProc, bin, text};

/// Words the watched process carries in its command line and its environment: none may reach the
/// coordinator.
const ARGV_MARKER: &str = "argv-marker-5c1e";
const ENV_MARKER: &str = "env-marker-93ab";

/// A shell waiting on a `sleep`: a process with a child, killed (its whole group) when dropped.
struct Sleeper(Child);

impl Sleeper {
    fn start() -> Sleeper {
        let child = Command::new("sh")
            .args(["-c", &format!("sleep 60; true {ARGV_MARKER}")])
            .env("MONITOR_TEST_SECRET", ENV_MARKER)
            .process_group(0)
            .stdin(Stdio::null())
            .spawn()
            .expect("sh starts");
        Sleeper(child)
    }

    fn pid(&self) -> u32 {
        self.0.id()
    }
}

impl Drop for Sleeper {
    fn drop(&mut self) {
        // SAFETY: kill(2) on the process group of a child this test started and has not reaped.
        unsafe {
            libc::kill(-(self.0.id() as i32), libc::SIGKILL);
        }
        let _ = self.0.wait();
    }
}

/// A `stampede-agent --monitor` of `pid` listening on loopback, killed when dropped.
fn start_monitor(pid: u32) -> AgentProc {
    let pid = pid.to_string();
    let args = [
        "--monitor",
        "--name",
        "e2e-mon",
        "--pid",
        &pid,
        "--listen",
        "127.0.0.1:0",
    ];
    AgentProc::with_args(&args, &[])
}

/// One coordinator session: its link, every message read kept for the leak check, and a heartbeat.
struct Coordinator {
    tx: LinkTx<pb::CoordinatorMessage>,
    rx: LinkRx<pb::AgentMessage>,
    read: Vec<pb::AgentMessage>,
    beat: tokio::task::JoinHandle<()>,
}

const PATIENCE: Duration = Duration::from_secs(10);

impl Coordinator {
    async fn connect(addr: std::net::SocketAddr) -> Coordinator {
        let dialer = Dialer::new(Side::Agent, &addr.to_string(), "127.0.0.1", None).unwrap();
        let mut client = dialer.agent().await.expect("the monitor's port answers");
        let (tx, down) = link::channel();
        let response = client
            .control(link::request_stream(down))
            .await
            .expect("a control session");
        let rx = link::read_stream(response.into_inner());
        // Pings every 500 ms, as a coordinator does, or the monitor's dead-man switch ends the session.
        let pinger = tx.clone();
        let beat = tokio::spawn(async move {
            for id in 0.. {
                let ping = proto::to_agent(Down::Ping(pb::Ping { id }));
                if pinger.send(ping).await.is_err() {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        });
        Coordinator {
            tx,
            rx,
            read: Vec::new(),
            beat,
        }
    }

    async fn send(&self, kind: Down) {
        self.tx.send(proto::to_agent(kind)).await.unwrap();
    }

    /// The next message that is not a heartbeat's answer.
    async fn next(&mut self) -> Up {
        loop {
            let msg = tokio::time::timeout(PATIENCE, self.rx.recv())
                .await
                .expect("the monitor answers within 10 s")
                .expect("the session is open");
            self.read.push(msg.clone());
            match msg.kind.expect("a message kind") {
                Up::Pong(_) => continue,
                other => return other,
            }
        }
    }

    async fn greet(&mut self) -> pb::HelloReply {
        self.send(Down::Hello(pb::Hello {
            protocol_version: proto::PROTOCOL_VERSION,
            coordinator_version: "e2e".into(),
            token: String::new(),
            ..Default::default()
        }))
        .await;
        loop {
            match self.next().await {
                Up::HelloReply(r) => return r,
                Up::MonitorSample(_) => continue,
                other => panic!("expected the hello reply, read {other:?}"),
            }
        }
    }

    async fn sample(&mut self) -> Sample {
        match self.next().await {
            Up::MonitorSample(s) => Sample::try_from(&s).expect("a valid sample"),
            other => panic!("expected a sample, read {other:?}"),
        }
    }

    async fn refused(&mut self) -> String {
        loop {
            match self.next().await {
                Up::Refusal(r) => return r.message,
                Up::MonitorSample(_) => continue,
                other => panic!("expected a refusal, read {other:?}"),
            }
        }
    }

    /// Everything read, as its wire bytes.
    fn wire(&self) -> Vec<u8> {
        use prost::Message;
        self.read.iter().flat_map(|m| m.encode_to_vec()).collect()
    }
}

impl Drop for Coordinator {
    fn drop(&mut self) {
        self.beat.abort();
    }
}

/// The processes `pgrep` finds in the tree rooted at `pid` (it and its children; the sleeper has no
/// grandchildren).
fn tree_size(pid: u32) -> u32 {
    let o = Command::new("pgrep")
        .args(["-P", &pid.to_string()])
        .output()
        .expect("pgrep runs");
    1 + text(&o.stdout).lines().count() as u32
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_monitor_greets_as_one_streams_a_sample_a_second_refuses_load_and_leaks_no_argv_or_env() {
    let sleeper = Sleeper::start();
    // The shell has started its sleep before it is watched, so the tree is whole from the first sample.
    std::thread::sleep(Duration::from_millis(300));
    let monitor = start_monitor(sleeper.pid());
    let mut c = Coordinator::connect(monitor.addr).await;

    let reply = c.greet().await;
    assert_eq!(reply.role, pb::Role::Monitor as i32, "{reply:?}");
    let info = MonitorInfo::try_from(reply.monitor.as_ref().expect("the monitor's info")).unwrap();
    assert_eq!(info.name, "e2e-mon");
    assert!(
        info.watching.contains(&sleeper.pid().to_string()),
        "{info:?}"
    );
    let hostname = Command::new("hostname").output().expect("hostname runs");
    assert_eq!(info.hostname, text(&hostname.stdout).trim());

    let mut samples = Vec::new();
    for _ in 0..3 {
        samples.push(c.sample().await);
    }
    for pair in samples.windows(2) {
        let gap = Duration::from_nanos((pair[1].at_unix_ns - pair[0].at_unix_ns) as u64);
        assert!(
            gap > Duration::from_millis(800) && gap < Duration::from_millis(1200),
            "samples {gap:?} apart"
        );
    }
    let last = samples.last().unwrap();
    let target = last.target.as_ref().expect("the watched process");
    assert_eq!(target.processes, tree_size(sleeper.pid()), "{target:?}");

    for command in [
        Down::Configure(pb::Configure::default()),
        Down::PrepareStep(pb::PrepareStep::default()),
        Down::StartStep(pb::StartStep::default()),
    ] {
        c.send(command).await;
        assert_eq!(c.refused().await, "this is a monitor: it runs no load");
    }
    // It kept sampling through the refusals.
    let after = c.sample().await;
    assert!(after.at_unix_ns > last.at_unix_ns);

    let wire = c.wire();
    for marker in [ARGV_MARKER, ENV_MARKER] {
        assert!(
            !wire.windows(marker.len()).any(|w| w == marker.as_bytes()),
            "{marker} reached the coordinator"
        );
    }
    // The check can fail: the marker is where the monitor could have read it.
    let cmdline = std::fs::read(format!("/proc/{}/cmdline", sleeper.pid())).unwrap();
    assert!(
        cmdline
            .windows(ARGV_MARKER.len())
            .any(|w| w == ARGV_MARKER.as_bytes())
    );

    // This coordinator leaves; the monitor serves the next one.
    drop(c);
    let mut next = None;
    for _ in 0..50 {
        let mut c = Coordinator::connect(monitor.addr).await;
        c.send(Down::Hello(pb::Hello {
            protocol_version: proto::PROTOCOL_VERSION,
            coordinator_version: "e2e".into(),
            token: String::new(),
            ..Default::default()
        }))
        .await;
        match tokio::time::timeout(PATIENCE, c.rx.recv()).await {
            Ok(Ok(m)) if matches!(m.kind, Some(Up::HelloReply(_))) => {
                next = Some(c);
                break;
            }
            // Still busy with the first session's end: try again shortly.
            _ => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
    let mut c = next.expect("the next coordinator was served within 5 s");
    c.sample().await;
    assert!(
        !monitor.log.text().contains("panicked"),
        "{}",
        monitor.log.text()
    );
}

fn agent_fails(args: &[&str]) -> String {
    let o: Output = Command::new(bin("stampede-agent"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("stampede-agent runs");
    assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o.stderr));
    let err = text(&o.stderr);
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    err
}

#[test]
fn bad_monitor_flags_are_refused_at_start_in_one_line() {
    // A pid that was running a moment ago and is not now.
    let mut gone = Command::new("true").spawn().unwrap();
    gone.wait().unwrap();
    let pid = gone.id().to_string();
    let err = agent_fails(&["--monitor", "--pid", &pid, "--join", "127.0.0.1:1"]);
    assert!(err.contains(&format!("no process has pid {pid}")), "{err}");
    let err = agent_fails(&[
        "--monitor",
        "--process",
        "no-such-proc",
        "--join",
        "127.0.0.1:1",
    ]);
    assert!(err.contains("no running process is named"), "{err}");
    let err = agent_fails(&["--monitor", "--cgroup", "/tmp", "--join", "127.0.0.1:1"]);
    assert!(err.contains("not a cgroup v2 directory"), "{err}");

    let me = std::process::id().to_string();
    let err = agent_fails(&[
        "--monitor",
        "--pid",
        &me,
        "--join",
        "127.0.0.1:1",
        "--max-rate",
        "5",
        "--threads",
        "2",
    ]);
    assert!(
        err.contains(
            "--max-rate, --threads are for a load agent; a monitor (--monitor) runs no load"
        ),
        "{err}"
    );
    let err = agent_fails(&["--monitor", "--pid", &me]);
    assert!(
        err.contains("a monitor joins its coordinator: add --join"),
        "{err}"
    );
    let err = agent_fails(&["--monitor", "--pid", &me, "--listen", "0.0.0.0:0"]);
    assert!(
        err.contains("without a token: anyone who can reach it could read what this host"),
        "{err}"
    );
    let err = agent_fails(&["--pid", &me]);
    assert!(err.contains("add --monitor"), "{err}");
}

/// CPU time (user + system) a process has used, from /proc/PID/stat, in clock ticks.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // The fields after the command's closing parenthesis; utime and stime are the 12th and 13th.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = rest.split(' ').collect();
    f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
}

/// The whole monitor process, not only its probe: its runtime, its gRPC, its answers to two pings a
/// second. A debug build used 0.53 % of a core here and a release build 0.27 % (docs/benchmarks.md); the
/// bound leaves a busy machine room and still catches a monitor that samples too often or reads per-socket
/// tables.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_monitor_process_costs_little_cpu_at_one_sample_a_second() {
    const SAMPLES: u32 = 20;
    let sleeper = Sleeper::start();
    std::thread::sleep(Duration::from_millis(300));
    let monitor = start_monitor(sleeper.pid());
    let pid = monitor.child.id();
    let mut c = Coordinator::connect(monitor.addr).await;
    c.greet().await;
    c.sample().await;
    let before = cpu_ticks(pid);
    let began = std::time::Instant::now();
    for _ in 0..SAMPLES {
        c.sample().await;
        c.read.clear();
    }
    let ticks = cpu_ticks(pid) - before;
    let elapsed = began.elapsed();
    // SAFETY: sysconf reads a constant of the system.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    let pct = 100.0 * ticks as f64 / hz / elapsed.as_secs_f64();
    println!("the monitor used {ticks} ticks over {elapsed:?}: {pct:.2} % of a core");
    assert!(
        elapsed > Duration::from_secs(u64::from(SAMPLES - 1)),
        "{SAMPLES} samples in {elapsed:?}: more than one a second"
    );
    assert!(pct < 2.0, "the monitor used {pct:.2} % of a core");
}
