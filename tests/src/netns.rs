//! Network namespaces for the fault suite: a private switch (a bridge in a namespace of its own) and
//! one namespace per node (coordinator, agents, monitor, target, a stranger), each joined to the switch
//! by a veth pair with an address in 10.231.0.0/24 that exists only inside namespaces the test made.
//! No namespace gets a default route or a link to the host's, so no packet can leave them. Faults are
//! injected on those links (down/up, netem or its stand-in) and by signals; every namespace, process
//! and mount is removed when the `Net` is dropped, also after a panic.
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::Lines;

/// The private subnet: every address of it lives on a veth inside a test's namespaces.
pub const SUBNET: &str = "10.231.0";

/// The nodes of a fault test, by their last address octet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Node {
    Coordinator,
    Agent1,
    Agent2,
    /// The target's host: nginx and the server monitor.
    Target,
    /// Somebody else on the network.
    Stranger,
}

impl Node {
    pub const ALL: [Node; 5] = [
        Node::Coordinator,
        Node::Agent1,
        Node::Agent2,
        Node::Target,
        Node::Stranger,
    ];

    fn octet(self) -> u8 {
        match self {
            Node::Coordinator => 1,
            Node::Agent1 => 11,
            Node::Agent2 => 12,
            Node::Target => 20,
            Node::Stranger => 66,
        }
    }

    fn short(self) -> &'static str {
        match self {
            Node::Coordinator => "co",
            Node::Agent1 => "a1",
            Node::Agent2 => "a2",
            Node::Target => "tg",
            Node::Stranger => "xx",
        }
    }

    /// Its address on the test's subnet.
    pub fn ip(self) -> String {
        format!("{SUBNET}.{}", self.octet())
    }

    /// `ip:port` on it.
    pub fn at(self, port: u16) -> String {
        format!("{}:{port}", self.ip())
    }
}

/// Why a fault test cannot run here, or None when it can. Root and a working `ip netns` are needed.
fn missing_prerequisite() -> Option<String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Some("not root (network namespaces need CAP_SYS_ADMIN)".into());
    }
    match Command::new("ip").args(["netns", "list"]).output() {
        Ok(o) if o.status.success() => None,
        Ok(o) => Some(format!(
            "`ip netns list` failed: {}",
            String::from_utf8_lossy(&o.stderr).trim()
        )),
        Err(e) => Some(format!("no `ip` command ({e}); apt-get install iproute2")),
    }
}

/// Runs `ip ARGS`, panicking with its words if it fails.
pub fn ip(args: &[&str]) {
    let o = Command::new("ip").args(args).output().expect("ip runs");
    assert!(
        o.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&o.stderr)
    );
}

/// One test's namespaces; everything in them ends when it is dropped.
pub struct Net {
    prefix: String,
    created: Vec<String>,
    mounts: Vec<PathBuf>,
    /// /etc/netns/NS directories written for a namespace.
    etc: Vec<PathBuf>,
    stop: Arc<AtomicBool>,
}

impl Net {
    /// The namespaces of `test`, a switch and every `Node`, linked up; or None (the test skips, saying
    /// why) when this machine cannot make them, except under CI=true, where that fails the test.
    pub fn new(test: &str) -> Option<Net> {
        if let Some(why) = missing_prerequisite() {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "{test}: CI=true requires network namespaces: {why}"
            );
            eprintln!("SKIPPED {test}: {why}");
            return None;
        }
        // Short (namespace names stay readable) and unique per test, process and Net.
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let tag: String = test
            .split('_')
            .filter_map(|w| w.chars().next())
            .take(12)
            .collect();
        let mut net = Net {
            prefix: format!(
                "stf-{tag}-{}-{}",
                std::process::id(),
                NEXT.fetch_add(1, Ordering::Relaxed)
            ),
            created: Vec::new(),
            mounts: Vec::new(),
            etc: Vec::new(),
            stop: Arc::new(AtomicBool::new(false)),
        };
        let switch = net.add_ns("sw");
        ip(&["-n", &switch, "link", "add", "br0", "type", "bridge"]);
        ip(&["-n", &switch, "link", "set", "br0", "up"]);
        for node in Node::ALL {
            let ns = net.add_ns(node.short());
            let port = format!("v{}", node.octet());
            ip(&[
                "-n", &switch, "link", "add", &port, "type", "veth", "peer", "name", "eth0",
                "netns", &ns,
            ]);
            ip(&["-n", &switch, "link", "set", &port, "master", "br0", "up"]);
            let cidr = format!("{}/24", node.ip());
            ip(&["-n", &ns, "addr", "add", &cidr, "dev", "eth0"]);
            ip(&["-n", &ns, "link", "set", "eth0", "up"]);
            ip(&["-n", &ns, "link", "set", "lo", "up"]);
        }
        Some(net)
    }

    fn add_ns(&mut self, short: &str) -> String {
        let name = format!("{}-{short}", self.prefix);
        // A namespace left by a killed run of this very pid (pids are reused) goes first.
        let _ = Command::new("ip")
            .args(["netns", "del", &name])
            .stderr(Stdio::null())
            .status();
        ip(&["netns", "add", &name]);
        self.created.push(name.clone());
        name
    }

    /// The namespace of `node`.
    pub fn ns(&self, node: Node) -> String {
        format!("{}-{}", self.prefix, node.short())
    }

    fn switch(&self) -> String {
        format!("{}-sw", self.prefix)
    }

    /// `program ARGS` run inside `node`'s namespace (stdout discarded, stderr read as it comes).
    pub fn spawn(&self, node: Node, program: &Path, args: &[&str]) -> Proc {
        let mut child = Command::new("ip")
            .args(["netns", "exec", &self.ns(node)])
            .arg(program)
            .args(args)
            .env("STAMPEDE_LOG", "warn")
            .env_remove("STAMPEDE_TOKEN")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("ip netns exec starts");
        // `ip netns exec` execs the program: the pid is the program's.
        let log = Lines::of(&mut child);
        Proc { child, log }
    }

    /// Cuts `node` off the switch (both directions) until `heal`.
    pub fn cut(&self, node: Node) {
        ip(&[
            "-n",
            &self.switch(),
            "link",
            "set",
            &format!("v{}", node.octet()),
            "down",
        ]);
    }

    pub fn heal(&self, node: Node) {
        ip(&[
            "-n",
            &self.switch(),
            "link",
            "set",
            &format!("v{}", node.octet()),
            "up",
        ]);
    }

    /// Cuts `node` off after `after`, for `for_`, from a thread of its own; join it after the run.
    pub fn cut_for(
        &self,
        node: Node,
        after: Duration,
        for_: Duration,
    ) -> std::thread::JoinHandle<()> {
        let (switch, port) = (self.switch(), format!("v{}", node.octet()));
        std::thread::spawn(move || {
            std::thread::sleep(after);
            ip(&["-n", &switch, "link", "set", &port, "down"]);
            std::thread::sleep(for_);
            ip(&["-n", &switch, "link", "set", &port, "up"]);
        })
    }

    /// `tc qdisc add dev eth0 root netem ARGS` on `node`'s egress; false when this kernel has no
    /// netem (sch_netem), with nothing changed.
    pub fn netem(&self, node: Node, args: &[&str]) -> bool {
        let mut all = vec!["-n", "", "qdisc", "add", "dev", "eth0", "root", "netem"];
        let ns = self.ns(node);
        all[1] = &ns;
        all.extend_from_slice(args);
        Command::new("tc")
            .args(&all)
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    }

    /// Drops a random `percent` of the TCP segments `node` sends (nftables' numgen), netem's loss
    /// where netem is missing.
    pub fn lose(&self, node: Node, percent: u32) {
        let rule = format!(
            "table inet stf {{\n chain out {{\n  type filter hook output priority 0; policy accept;\n  \
             meta l4proto tcp numgen random mod 100 < {percent} drop\n }}\n}}\n"
        );
        let o = Command::new("ip")
            .args(["netns", "exec", &self.ns(node), "nft", "-f", "-"])
            .stdin(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .and_then(|mut c| {
                c.stdin.take().unwrap().write_all(rule.as_bytes())?;
                c.wait_with_output()
            })
            .expect("nft runs");
        assert!(
            o.status.success(),
            "nft: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }

    /// A TCP relay in `node`'s namespace from `listen` to `to`, the bytes toward `to` held `delay`
    /// each (in order): netem's delay, in user space, where the kernel has no netem. Ends with the
    /// `Net`.
    pub fn delaying_relay(&self, node: Node, listen: &str, to: &str, delay: Duration) {
        let listen: SocketAddr = listen.parse().unwrap();
        let to: SocketAddr = to.parse().unwrap();
        let stop = self.stop.clone();
        let ns = self.ns(node);
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            enter(&ns);
            let listener = TcpListener::bind(listen).expect("the relay binds");
            listener.set_nonblocking(true).unwrap();
            ready_tx.send(()).unwrap();
            while !stop.load(Ordering::Relaxed) {
                let Ok((client, _)) = listener.accept() else {
                    std::thread::sleep(Duration::from_millis(5));
                    continue;
                };
                let ns = ns.clone();
                let stop = stop.clone();
                std::thread::spawn(move || relay(&ns, client, to, delay, &stop));
            }
        });
        ready_rx
            .recv_timeout(Duration::from_secs(10))
            .expect("the relay is listening");
    }

    /// Runs `f` on a thread inside `node`'s namespace (its sockets are the namespace's).
    pub fn within<T: Send + 'static>(
        &self,
        node: Node,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> T {
        let ns = self.ns(node);
        std::thread::spawn(move || {
            enter(&ns);
            f()
        })
        .join()
        .unwrap_or_else(|e| std::panic::resume_unwind(e))
    }

    /// Runs `f` on a thread of its own inside `node`'s namespace, beside the test; join it.
    pub fn spawn_within<T: Send + 'static>(
        &self,
        node: Node,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> std::thread::JoinHandle<T> {
        let ns = self.ns(node);
        std::thread::spawn(move || {
            enter(&ns);
            f()
        })
    }

    /// Writes `node`'s own /etc/hosts (`ip netns exec` mounts /etc/netns/NS/hosts over /etc/hosts),
    /// in place, so a process already running there reads the new one at its next lookup.
    pub fn hosts(&mut self, node: Node, text: &str) {
        let dir = PathBuf::from("/etc/netns").join(self.ns(node));
        std::fs::create_dir_all(&dir).unwrap();
        // Truncated and rewritten, never replaced: the bind mount holds the inode.
        std::fs::write(dir.join("hosts"), text).unwrap();
        if !self.etc.contains(&dir) {
            self.etc.push(dir);
        }
    }

    /// A tmpfs of `size` (as mount's `size=` takes it) at a fresh directory, unmounted with the Net.
    pub fn tiny_disk(&mut self, size: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("{}-disk-{}", self.prefix, self.mounts.len()));
        std::fs::create_dir_all(&dir).unwrap();
        let o = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(&dir)
            .output()
            .expect("mount runs");
        assert!(
            o.status.success(),
            "mount tmpfs: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        self.mounts.push(dir.clone());
        dir
    }
}

/// Moves this thread into the named network namespace.
fn enter(ns: &str) {
    let f = std::fs::File::open(format!("/run/netns/{ns}")).expect("the namespace exists");
    // SAFETY: setns on an open namespace file; only this thread's network namespace changes.
    let rc = unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) };
    assert_eq!(rc, 0, "setns {ns}: {}", std::io::Error::last_os_error());
}

/// One relayed connection: toward `to` each chunk waits until `delay` after it was read.
fn relay(ns: &str, client: TcpStream, to: SocketAddr, delay: Duration, stop: &AtomicBool) {
    enter(ns);
    let _ = client.set_nonblocking(false);
    let Ok(server) = TcpStream::connect_timeout(&to, Duration::from_secs(5)) else {
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (mut c_read, mut s_write) = (client.try_clone().unwrap(), server.try_clone().unwrap());
    let (tx, rx) = std::sync::mpsc::channel::<(Instant, Vec<u8>)>();
    // Reader: stamps each chunk as it arrives.
    std::thread::spawn(move || {
        let mut buf = vec![0u8; 64 * 1024];
        while let Ok(n) = c_read.read(&mut buf) {
            if n == 0
                || tx
                    .send((Instant::now() + delay, buf[..n].to_vec()))
                    .is_err()
            {
                break;
            }
        }
    });
    // Writer: delivers in order, each at its time.
    std::thread::spawn(move || {
        while let Ok((due, bytes)) = rx.recv() {
            std::thread::sleep(due.saturating_duration_since(Instant::now()));
            if s_write.write_all(&bytes).is_err() {
                break;
            }
        }
        let _ = s_write.shutdown(std::net::Shutdown::Write);
    });
    // The other way, undelayed, on this thread.
    let (mut s_read, mut c_write) = (server, client);
    let mut buf = vec![0u8; 64 * 1024];
    while !stop.load(Ordering::Relaxed) {
        match s_read.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if c_write.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
        }
    }
    let _ = c_write.shutdown(std::net::Shutdown::Both);
}

impl Drop for Net {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for ns in &self.created {
            // Whatever still runs in it (nginx's workers, a process a test forgot), and then it.
            if let Ok(o) = Command::new("ip").args(["netns", "pids", ns]).output() {
                for pid in String::from_utf8_lossy(&o.stdout).split_whitespace() {
                    if let Ok(pid) = pid.parse::<i32>() {
                        // SAFETY: kill(2) on a process inside a namespace this test made.
                        unsafe { libc::kill(pid, libc::SIGKILL) };
                    }
                }
            }
            let _ = Command::new("ip").args(["netns", "del", ns]).status();
        }
        for d in &self.etc {
            let _ = std::fs::remove_dir_all(d);
            // /etc/netns itself, once no namespace has files there (fails harmlessly otherwise).
            let _ = std::fs::remove_dir("/etc/netns");
        }
        for m in &self.mounts {
            let _ = Command::new("umount").arg("-l").arg(m).status();
            let _ = std::fs::remove_dir(m);
        }
    }
}

/// A process in a namespace; SIGKILLed (SIGCONT first, should it be stopped) when dropped.
pub struct Proc {
    pub child: Child,
    pub log: Lines,
}

impl Proc {
    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// Sends `sig` to it.
    pub fn signal(&self, sig: i32) {
        crate::signal(&self.child, sig);
    }

    /// Its exit code once it exits within `limit`, or None (still running; it is then killed).
    pub fn exit_within(&mut self, limit: Duration) -> Option<i32> {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait().expect("waitable") {
                // The reader thread takes the last words.
                std::thread::sleep(Duration::from_millis(100));
                return Some(status.code().unwrap_or(-1));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        self.kill();
        None
    }

    pub fn is_running(&mut self) -> bool {
        self.child.try_wait().expect("waitable").is_none()
    }

    pub fn kill(&mut self) {
        // SAFETY: kill(2) on our own child, not yet reaped.
        unsafe { libc::kill(self.pid(), libc::SIGCONT) };
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A one-shot HTTP/1.1 GET from inside `node` to `addr`; the body.
pub fn get_within(net: &Net, node: Node, addr: &str, path: &str) -> String {
    let addr: SocketAddr = addr.parse().unwrap();
    let path = path.to_string();
    net.within(node, move || crate::http_get(addr, &path))
}

/// nginx in the target's namespace on `Node::Target:80`, with stub_status at /nginx_status; its
/// master is killed with the Net (and its files removed when dropped).
pub struct NsNginx {
    pub master: Proc,
    dir: PathBuf,
    /// The stub_status reads this test made (each counts itself).
    reads: std::cell::Cell<u64>,
}

impl NsNginx {
    pub const PORT: u16 = 80;

    /// Whether nginx is installed; says why the test skips when it is not, except under CI=true,
    /// where .ci/run installs nginx-light and a missing one fails the test.
    pub fn available(test: &str) -> bool {
        crate::installed("nginx", "nginx-light", test)
    }

    pub fn start(net: &Net) -> NsNginx {
        let dir = std::env::temp_dir().join(format!("{}-nginx", net.prefix));
        std::fs::create_dir_all(dir.join("logs")).unwrap();
        let d = dir.display();
        let addr = Node::Target.at(Self::PORT);
        let config = format!(
            "worker_processes 1;\ndaemon off;\npid {d}/nginx.pid;\nerror_log {d}/logs/error.log;\n\
             events {{ worker_connections 4096; }}\n\
             http {{ access_log off; client_body_temp_path {d}/body; proxy_temp_path {d}/proxy;\n\
             fastcgi_temp_path {d}/fcgi; uwsgi_temp_path {d}/uwsgi; scgi_temp_path {d}/scgi;\n\
             keepalive_requests 1000000;\n\
             server {{ listen {addr};\n\
             location = /nginx_status {{ stub_status; }}\n\
             location / {{ return 200 \"hello\\n\"; }} }} }}\n"
        );
        std::fs::write(dir.join("nginx.conf"), config).unwrap();
        let conf = dir.join("nginx.conf");
        let master = net.spawn(
            Node::Target,
            Path::new("nginx"),
            &["-c", conf.to_str().unwrap(), "-p", dir.to_str().unwrap()],
        );
        let target: SocketAddr = addr.parse().unwrap();
        let up = net.within(Node::Target, move || {
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline {
                if TcpStream::connect_timeout(&target, Duration::from_secs(1)).is_ok() {
                    return true;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            false
        });
        assert!(up, "nginx did not start: see {d}");
        NsNginx {
            master,
            dir,
            reads: std::cell::Cell::new(0),
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}/", Node::Target.at(Self::PORT))
    }

    /// Requests nginx handled that were not this test's own stub_status reads (read from inside the
    /// target's namespace, so it works while the target's link is cut).
    pub fn served(&self, net: &Net) -> u64 {
        let body = get_within(
            net,
            Node::Target,
            &Node::Target.at(Self::PORT),
            "/nginx_status",
        );
        self.reads.set(self.reads.get() + 1);
        let total: u64 = body
            .lines()
            .nth(2)
            .and_then(|l| l.split_whitespace().nth(2))
            .and_then(|r| r.parse().ok())
            .unwrap_or_else(|| panic!("stub_status as nginx writes it: {body:?}"));
        total - self.reads.get()
    }
}

impl Drop for NsNginx {
    fn drop(&mut self) {
        // SIGTERM: a fast shutdown of the master and its workers.
        // SAFETY: kill(2) on the nginx master this test started.
        unsafe { libc::kill(self.master.pid(), libc::SIGTERM) };
        let _ = self.master.exit_within(Duration::from_secs(5));
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
