//! The end-to-end harness: builds and finds the real binaries, starts the reference target on
//! 127.0.0.1:0, runs the coordinator, and always cleans up the processes it started.
pub mod browser;
pub mod docker;
pub mod dom;
pub mod netns;
pub mod nginx;
pub mod node;
pub mod prometheus;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

/// target/<profile>/, found from this test binary's own path (target/<profile>/deps/...).
fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    exe.parent()
        .and_then(Path::parent)
        .expect("test binary lives in target/<profile>/deps")
        .to_path_buf()
}

/// Gives a child build only the user's environment. The variables cargo sets for a running test would
/// change build-script inputs (ring's, say) and make the inner and outer builds rebuild each other.
pub fn user_env(cmd: &mut Command) {
    const KEEP: [&str; 11] = [
        "PATH",
        "HOME",
        "RUSTUP_HOME",
        "CARGO_HOME",
        "RUSTUP_TOOLCHAIN",
        "CARGO_TARGET_DIR",
        "TMPDIR",
        "DOCKER_HOST",
        "DOCKER_CONFIG",
        "DOCKER_CONTEXT",
        "CARGO",
    ];
    cmd.env_clear();
    for (k, v) in std::env::vars_os() {
        if k.to_str().is_some_and(|k| KEEP.contains(&k)) {
            cmd.env(k, v);
        }
    }
}

/// Whether `program` is on PATH; when it is not, says why `test` skips, except under CI=true, where
/// .ci/run installs `package` and a missing one fails the test.
pub fn installed(program: &str, package: &str, test: &str) -> bool {
    let here = Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !here {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "{test}: CI=true requires {program} ({package})"
        );
        eprintln!("SKIPPED {test}: no {program} on this machine (apt-get install {package})");
    }
    here
}

/// Starts `stampede ARGS` in the background (stdout discarded, stderr kept for assertions).
pub fn spawn_stampede(args: &[&str]) -> Child {
    Command::new(bin("stampede"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("stampede starts")
}

/// Path to a workspace binary, built (once per test process) so it is never stale.
pub fn bin(name: &str) -> PathBuf {
    // Another build's binaries (say, the last release's), to see a regression test fail without its
    // fix.
    if let Some(dir) = std::env::var_os("STAMPEDE_TEST_BIN_DIR") {
        return PathBuf::from(dir).join(name);
    }
    static BUILT: OnceLock<()> = OnceLock::new();
    BUILT.get_or_init(|| {
        let dir = profile_dir();
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut cmd = Command::new(cargo);
        user_env(&mut cmd);
        cmd.args([
            "build",
            "--quiet",
            "--bins",
            "-p",
            "coordinator",
            "-p",
            "agent",
        ]);
        if dir.file_name().is_some_and(|n| n == "release") {
            cmd.arg("--release");
        }
        let status = cmd.status().expect("cargo runs");
        assert!(status.success(), "building the binaries failed");
    });
    profile_dir().join(name)
}

/// A `stampede serve` process, killed when dropped.
pub struct ServeProcess {
    child: Child,
    pub addr: SocketAddr,
    tls: bool,
}

impl ServeProcess {
    pub fn start(extra: &[&str]) -> ServeProcess {
        let ready = tempfile::tempdir().expect("temp dir");
        let file = ready.path().join("ready.json");
        let mut child = Command::new(bin("stampede"))
            .args(["serve", "--listen", "127.0.0.1:0", "--threads", "1"])
            .arg("--ready-file")
            .arg(&file)
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("stampede serve starts");
        // Keep draining stderr so the server never blocks on a full pipe.
        let log = Lines::of(&mut child);
        let addr = ready_addr(&file, &mut child, &log);
        let tls = extra.contains(&"--tls");
        ServeProcess { child, addr, tls }
    }

    pub fn url(&self) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        format!("{scheme}://{}/", self.addr)
    }

    /// Its process id (a server monitor's `--pid`).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The target's own count of requests served (its stats endpoint is not counted).
    pub fn requests(&self) -> u64 {
        let body = http_get(self.addr, "/_stampede/stats");
        let v: serde_json::Value = serde_json::from_str(&body).expect("stats are JSON");
        v["requests"].as_u64().expect("requests is a number")
    }
}

impl Drop for ServeProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl ServeProcess {
    /// Stalls the target for `for_ms` once `after` has passed, from a thread of its own (join it
    /// after the run): the test's own injected latency.
    pub fn stall_after(&self, after: Duration, for_ms: u64) -> std::thread::JoinHandle<()> {
        let addr = self.addr;
        std::thread::spawn(move || {
            std::thread::sleep(after);
            http_get(addr, &format!("/_stampede/stall?ms={for_ms}"));
        })
    }
}

/// A one-shot HTTP/1.1 GET on a fresh connection; returns the body.
pub fn http_get(addr: SocketAddr, path: &str) -> String {
    let mut s =
        TcpStream::connect_timeout(&addr, Duration::from_secs(5)).expect("target reachable");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut resp = String::new();
    s.read_to_string(&mut resp).expect("reply");
    resp.split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default()
}

/// Runs `stampede` to completion (bounded by the caller's plan) and returns its output.
pub fn stampede(args: &[&str]) -> Output {
    Command::new(bin("stampede"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("stampede runs")
}

/// Reads run.json from an output directory.
pub fn run_json(dir: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(dir.join("run.json")).expect("run.json exists");
    serde_json::from_str(&text).expect("run.json is JSON")
}

pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A loopback port nobody listens on (bound, then released).
pub fn closed_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

/// One request as the recording server saw it.
#[derive(Debug, Clone)]
pub struct Seen {
    pub method: String,
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

/// A tiny HTTP/1.1 keep-alive server that records every request it answers, for asserting on exactly
/// what stampede sent. Stops accepting when dropped.
pub struct RecordingServer {
    pub addr: SocketAddr,
    seen: std::sync::Arc<std::sync::Mutex<Vec<Seen>>>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl RecordingServer {
    pub fn start() -> RecordingServer {
        RecordingServer::closing_after(0)
    }

    /// Like `start`, but each connection is closed (with `Connection: close`) after `n` replies, as
    /// nginx does after `keepalive_requests`; 0 keeps connections open.
    pub fn closing_after(n: usize) -> RecordingServer {
        RecordingServer::start_with(n, true)
    }

    /// Like `closing_after`, but the connection is dropped silently, as a server's idle or request
    /// limit does without announcing it.
    pub fn dropping_after(n: usize) -> RecordingServer {
        RecordingServer::start_with(n, false)
    }

    fn start_with(n: usize, announce: bool) -> RecordingServer {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (s2, stop2) = (seen.clone(), stop.clone());
        std::thread::spawn(move || {
            while !stop2.load(std::sync::atomic::Ordering::Relaxed) {
                match listener.accept() {
                    Ok((conn, _)) => {
                        let seen = s2.clone();
                        std::thread::spawn(move || serve_recorded(conn, &seen, n, announce));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(2)),
                }
            }
        });
        RecordingServer { addr, seen, stop }
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

impl Drop for RecordingServer {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

fn serve_recorded(
    conn: TcpStream,
    seen: &std::sync::Mutex<Vec<Seen>>,
    close_after: usize,
    announce: bool,
) {
    conn.set_nonblocking(false).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut reader = BufReader::new(conn.try_clone().unwrap());
    let mut writer = conn;
    let mut served = 0;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let mut parts = line.split_whitespace();
        let (method, path) = (
            parts.next().unwrap_or("").to_string(),
            parts.next().unwrap_or("").to_string(),
        );
        let mut headers = Vec::new();
        loop {
            let mut h = String::new();
            if reader.read_line(&mut h).unwrap_or(0) == 0 {
                return;
            }
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            if let Some((k, v)) = h.split_once(':') {
                headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
            }
        }
        let len = headers
            .iter()
            .find(|(k, _)| k == "content-length")
            .and_then(|(_, v)| v.parse::<usize>().ok())
            .unwrap_or(0);
        let mut body = vec![0; len];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        seen.lock().unwrap().push(Seen {
            method,
            path,
            headers,
            body,
        });
        served += 1;
        let last = close_after > 0 && served == close_after;
        let reply: &[u8] = if last && announce {
            b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok"
        } else {
            b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok"
        };
        if writer.write_all(reply).is_err() || last {
            return;
        }
    }
}

/// A finished `stampede run`: its run.json, its stdout, and the directory holding its files.
pub struct Ran {
    pub run: serde_json::Value,
    pub stdout: String,
    pub dir: tempfile::TempDir,
}

impl Ran {
    pub fn step(&self, i: usize) -> &serde_json::Value {
        &self.run["steps"][i]
    }

    pub fn steps(&self) -> &Vec<serde_json::Value> {
        self.run["steps"].as_array().expect("steps is an array")
    }
}

/// Runs `stampede run ARGS --quiet --out <fresh dir>`, whatever its outcome.
pub fn run_quiet(args: &[&str]) -> (Output, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut all = vec!["run"];
    all.extend_from_slice(args);
    all.extend_from_slice(&[
        "--quiet",
        "--out",
        dir.path().to_str().expect("UTF-8 temp path"),
    ]);
    (stampede(&all), dir)
}

/// Runs `stampede run ARGS --quiet --out <fresh dir>`, asserts it succeeded, and reads what it wrote.
pub fn run_ok(args: &[&str]) -> Ran {
    let (o, dir) = run_quiet(args);
    assert!(
        o.status.success(),
        "stampede run {args:?} failed: {}",
        text(&o.stderr)
    );
    Ran {
        run: run_json(dir.path()),
        stdout: text(&o.stdout),
        dir,
    }
}

/// The address a process wrote to its `--ready-file` once its port was bound. Waits up to 60 s (a
/// cold debug binary on a busy machine), and fails at once, with what the process said, if it exits
/// first.
pub fn ready_addr(file: &Path, child: &mut Child, log: &Lines) -> SocketAddr {
    let began = std::time::Instant::now();
    while began.elapsed() < Duration::from_secs(60) {
        // Written atomically (renamed into place): whatever is there is whole.
        if let Ok(line) = std::fs::read_to_string(file) {
            let v: serde_json::Value = serde_json::from_str(&line)
                .unwrap_or_else(|e| panic!("the ready file is not JSON ({e}): {line:?}"));
            assert_eq!(v["pid"].as_u64(), Some(u64::from(child.id())), "{line}");
            return v["listen"]
                .as_str()
                .and_then(|a| a.parse().ok())
                .unwrap_or_else(|| panic!("no address in the ready file: {line}"));
        }
        if let Some(status) = child.try_wait().expect("the child can be waited for") {
            // Give the reader thread a moment to take the last words.
            std::thread::sleep(Duration::from_millis(100));
            panic!("exited ({status}) before it was ready: {}", log.text());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("not ready within 60 s: {}", log.text());
}

/// A child's stderr, read on a thread as it comes, so a test can wait for a line while the child
/// runs (and the child never blocks on a full pipe).
#[derive(Clone)]
pub struct Lines(std::sync::Arc<std::sync::Mutex<String>>);

impl Lines {
    pub fn of(child: &mut Child) -> Lines {
        let seen = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let mut err = child.stderr.take().expect("piped stderr");
        let into = seen.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = err.read(&mut buf) {
                if n == 0 {
                    break;
                }
                into.lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        Lines(seen)
    }

    pub fn text(&self) -> String {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Waits up to `limit` for `what` on stderr; whether it came.
    pub fn wait_for(&self, what: &str, limit: Duration) -> bool {
        let began = std::time::Instant::now();
        while began.elapsed() < limit {
            if self.text().contains(what) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        false
    }
}

/// A `stampede-agent --listen 127.0.0.1:0` process, killed when dropped; its stderr (log level
/// warn) in `log`.
pub struct AgentProc {
    pub child: Child,
    pub addr: SocketAddr,
    pub log: Lines,
}

impl AgentProc {
    pub fn start(extra: &[&str], env: &[(&str, &str)]) -> AgentProc {
        let mut args = vec!["--listen", "127.0.0.1:0", "--threads", "1"];
        args.extend_from_slice(extra);
        AgentProc::with_args(&args, env)
    }

    /// `stampede-agent ARGS --ready-file F`: ARGS say where it listens (a monitor takes no --threads).
    pub fn with_args(args: &[&str], env: &[(&str, &str)]) -> AgentProc {
        let ready = tempfile::tempdir().expect("temp dir");
        let file = ready.path().join("ready.json");
        let mut child = Command::new(bin("stampede-agent"))
            .args(args)
            .arg("--ready-file")
            .arg(&file)
            .envs(env.iter().copied())
            .env("STAMPEDE_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("stampede-agent starts");
        let log = Lines::of(&mut child);
        let addr = ready_addr(&file, &mut child, &log);
        AgentProc { child, addr, log }
    }

    /// SIGKILL: the process dies at once, its sockets closed by the kernel.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The `--agents` value naming these agents, in order.
pub fn agents_arg(agents: &[AgentProc]) -> String {
    agents
        .iter()
        .map(|a| a.addr.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

impl Drop for AgentProc {
    fn drop(&mut self) {
        self.kill();
    }
}

/// `cmd` with RLIMIT_NOFILE at `limit`, soft and hard (the agent raises soft to hard, so both must
/// be set for the limit to hold).
pub fn with_nofile(cmd: &mut Command, limit: u64) -> &mut Command {
    use std::os::unix::process::CommandExt;
    // SAFETY: between fork and exec only setrlimit runs, which is async-signal-safe and allocates
    // nothing.
    unsafe {
        cmd.pre_exec(move || {
            let lim = libc::rlimit {
                rlim_cur: limit,
                rlim_max: limit,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        })
    }
}

/// Sends a signal to a process this test started.
pub fn signal(child: &Child, sig: i32) {
    // SAFETY: kill(2) on a pid we spawned and have not yet waited for.
    let rc = unsafe { libc::kill(child.id() as i32, sig) };
    assert_eq!(rc, 0, "kill({sig})");
}

/// How a hostile test server answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hostile {
    /// Bytes that are not HTTP.
    Garbage,
    /// Reads the request, never answers.
    Silent,
    /// Promises 100 body bytes, sends 10, closes.
    ClosesMidResponse,
    /// A chunked body that never ends.
    EndlessBody,
    /// A 64 MiB body.
    HugeBody,
    /// One byte of the reply every 100 ms.
    Trickle,
}

/// A server on 127.0.0.1:0 that misbehaves in one way, a thread per connection; stops when dropped.
pub struct HostileServer {
    pub addr: SocketAddr,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

/// Listens on 127.0.0.1:0 and runs `serve` on a thread of its own for every connection, until the
/// returned flag is set.
fn accept_each(
    serve: impl Fn(TcpStream, &std::sync::atomic::AtomicBool) + Send + Sync + 'static,
) -> (SocketAddr, std::sync::Arc<std::sync::atomic::AtomicBool>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let addr = listener.local_addr().unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stop2 = stop.clone();
    let serve = std::sync::Arc::new(serve);
    std::thread::spawn(move || {
        while !stop2.load(std::sync::atomic::Ordering::Relaxed) {
            match listener.accept() {
                Ok((conn, _)) => {
                    let (stop, serve) = (stop2.clone(), serve.clone());
                    std::thread::spawn(move || serve(conn, &stop));
                }
                Err(_) => std::thread::sleep(Duration::from_millis(2)),
            }
        }
    });
    (addr, stop)
}

impl HostileServer {
    pub fn start(how: Hostile) -> HostileServer {
        let (addr, stop) = accept_each(move |conn, stop| misbehave(conn, how, stop));
        HostileServer { addr, stop }
    }

    pub fn url(&self) -> String {
        format!("http://{}/", self.addr)
    }
}

impl Drop for HostileServer {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

fn misbehave(mut conn: TcpStream, how: Hostile, stop: &std::sync::atomic::AtomicBool) {
    let _ = conn.set_nonblocking(false);
    let _ = conn.set_read_timeout(Some(Duration::from_secs(30)));
    let mut buf = [0u8; 4096];
    // Every behaviour waits for a request first (its head ends the first read on loopback).
    if conn.read(&mut buf).unwrap_or(0) == 0 {
        return;
    }
    let running = || !stop.load(std::sync::atomic::Ordering::Relaxed);
    match how {
        Hostile::Garbage => {
            let _ = conn.write_all(b"SSH-2.0-OpenSSH_9.2 nothing like HTTP\r\n\r\n");
        }
        Hostile::Silent => while running() && conn.read(&mut buf).unwrap_or(0) > 0 {},
        Hostile::ClosesMidResponse => {
            let _ = conn.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\n0123456789");
        }
        Hostile::EndlessBody => {
            let _ = conn.write_all(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n");
            let chunk = [b'x'; 16 * 1024];
            let mut framed = format!("{:x}\r\n", chunk.len()).into_bytes();
            framed.extend_from_slice(&chunk);
            framed.extend_from_slice(b"\r\n");
            while running() && conn.write_all(&framed).is_ok() {}
        }
        Hostile::HugeBody => {
            let size = 64 * 1024 * 1024;
            let _ = conn
                .write_all(format!("HTTP/1.1 200 OK\r\ncontent-length: {size}\r\n\r\n").as_bytes());
            let chunk = [b'y'; 64 * 1024];
            for _ in 0..size / chunk.len() {
                if !running() || conn.write_all(&chunk).is_err() {
                    return;
                }
            }
        }
        Hostile::Trickle => {
            for b in b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok" {
                if !running() || conn.write_all(&[*b]).is_err() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
}

/// An h2c server on 127.0.0.1:0 that, once it has said its SETTINGS and acknowledged the client's
/// set-up PING (stampede's, whose payload it knows without reading it), sends PINGs and SETTINGS as
/// fast as it can and never reads (CVE-2019-9512 and -9515): every one asks for an ACK that a client
/// without a bound queues for good. A thread per connection; stops when dropped.
pub struct H2ControlFlood {
    pub addr: SocketAddr,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    open: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    accepted: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl H2ControlFlood {
    pub fn start() -> H2ControlFlood {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let open = std::sync::Arc::new(AtomicUsize::new(0));
        let accepted = std::sync::Arc::new(AtomicUsize::new(0));
        let (open2, accepted2) = (open.clone(), accepted.clone());
        let (addr, stop) = accept_each(move |conn, stop| {
            accepted2.fetch_add(1, Ordering::Relaxed);
            open2.fetch_add(1, Ordering::Relaxed);
            flood_controls(conn, stop);
            open2.fetch_sub(1, Ordering::Relaxed);
        });
        H2ControlFlood {
            addr,
            stop,
            open,
            accepted,
        }
    }

    pub fn url(&self) -> String {
        format!("h2c://{}/", self.addr)
    }

    /// Connections the client has not closed yet (a write to one fails once it has).
    pub fn open(&self) -> usize {
        self.open.load(std::sync::atomic::Ordering::Relaxed)
    }

    pub fn accepted(&self) -> usize {
        self.accepted.load(std::sync::atomic::Ordering::Relaxed)
    }
}

impl Drop for H2ControlFlood {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

/// An HTTP/2 frame: its nine-byte head, then `payload`.
fn h2_frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = payload.len() as u32;
    let mut f = len.to_be_bytes()[1..].to_vec();
    f.extend_from_slice(&[kind, flags]);
    f.extend_from_slice(&stream.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

fn flood_controls(mut conn: TcpStream, stop: &std::sync::atomic::AtomicBool) {
    const PING: u8 = 0x6;
    const SETTINGS: u8 = 0x4;
    let _ = conn.set_nonblocking(false);
    // A write blocked on a client that stopped reading wakes now and then to see `stop`.
    let _ = conn.set_write_timeout(Some(Duration::from_millis(200)));
    let mut hello = h2_frame(SETTINGS, 0, 0, &[]);
    hello.extend(h2_frame(PING, 0x1, 0, b"stampede"));
    // 64 KiB of PINGs and SETTINGS, each asking for an ACK.
    let mut flood = Vec::new();
    while flood.len() < 64 * 1024 {
        flood.extend(h2_frame(PING, 0, 0, b"floodfld"));
        flood.extend(h2_frame(SETTINGS, 0, 0, &[]));
    }
    let mut out: &[u8] = &hello;
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        if out.is_empty() {
            out = &flood;
        }
        match conn.write(out) {
            Ok(0) => return,
            Ok(n) => out = &out[n..],
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock
                        | std::io::ErrorKind::TimedOut
                        | std::io::ErrorKind::Interrupted
                ) => {}
            // The client closed the connection.
            Err(_) => return,
        }
    }
}

/// Resident memory of a running process now, in KiB (VmRSS), or 0 if it has exited.
pub fn rss_kib(pid: u32) -> u64 {
    proc_status_kib(pid, "VmRSS:")
}

/// Peak resident memory of a running process, in KiB (VmHWM), or 0 if it has exited.
pub fn peak_rss_kib(pid: u32) -> u64 {
    proc_status_kib(pid, "VmHWM:")
}

fn proc_status_kib(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        })
        .unwrap_or(0)
}

/// Serialises the tests of one binary that measure time across processes (start skew, 2 s stop
/// deadlines): on a 2-core machine, parallel clusters of agents would measure each other.
pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    // A failed test poisons the lock; the next one may still run.
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// A keep-alive HTTP/1.1 server on 127.0.0.1:0 that answers every `nth` request (counted over all
/// connections) with `code` and the others with 200, as a rate-limiting proxy does; a thread per
/// connection, stops when dropped.
pub struct StatusServer {
    pub addr: SocketAddr,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl StatusServer {
    pub fn every(nth: u64, code: u16) -> StatusServer {
        use std::sync::atomic::{AtomicU64, Ordering};
        let count = AtomicU64::new(0);
        let (addr, stop) = accept_each(move |conn, _| {
            let _ = conn.set_nonblocking(false);
            let _ = conn.set_read_timeout(Some(Duration::from_secs(30)));
            let mut writer = conn.try_clone().unwrap();
            let mut reader = BufReader::new(conn);
            loop {
                // A bodiless request: its head ends with an empty line.
                let mut line = String::new();
                loop {
                    line.clear();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 {
                        return;
                    }
                    if line.trim_end().is_empty() {
                        break;
                    }
                }
                let n = count.fetch_add(1, Ordering::Relaxed) + 1;
                let status = if n.is_multiple_of(nth) { code } else { 200 };
                let reply = format!("HTTP/1.1 {status} X\r\ncontent-length: 2\r\n\r\nok");
                if writer.write_all(reply.as_bytes()).is_err() {
                    return;
                }
            }
        });
        StatusServer { addr, stop }
    }

    pub fn url(&self) -> String {
        format!("http://{}/", self.addr)
    }
}

impl Drop for StatusServer {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}
