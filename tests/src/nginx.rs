//! A real nginx (Debian's nginx-light), a server we did not write, with its own request counter
//! (`stub_status`), so a test can check our counts against the target's.
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// One nginx, a master and its workers, in the foreground as our child, on a free loopback port;
/// stopped and its directory removed when dropped.
pub struct Nginx {
    master: Child,
    pub addr: SocketAddr,
    dir: PathBuf,
}

impl Nginx {
    /// Starts one, or says why it cannot and returns None (the test skips), except under CI=true,
    /// where .ci/run installs nginx-light and a missing one fails the test.
    pub fn start(test: &str) -> Option<Nginx> {
        let here = Command::new("sh")
            .args(["-c", "command -v nginx"])
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !here {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "{test}: CI=true requires nginx (nginx-light)"
            );
            eprintln!("SKIPPED {test}: no nginx on this machine (apt-get install nginx-light)");
            return None;
        }
        Some(Nginx::spawn(1))
    }

    /// Starts one with this many worker processes, once the caller knows nginx is installed;
    /// returns when its port accepts.
    pub fn spawn(workers: u32) -> Nginx {
        let addr = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let dir = std::env::temp_dir().join(format!(
            "stampede-tests-nginx-{}-{}",
            std::process::id(),
            addr.port()
        ));
        std::fs::create_dir_all(dir.join("logs")).unwrap();
        let d = dir.display();
        let config = format!(
            "worker_processes {workers};\ndaemon off;\npid {d}/nginx.pid;\nerror_log {d}/logs/error.log;\n\
             events {{ worker_connections 4096; }}\n\
             http {{ access_log off; client_body_temp_path {d}/body; proxy_temp_path {d}/proxy;\n\
             fastcgi_temp_path {d}/fcgi; uwsgi_temp_path {d}/uwsgi; scgi_temp_path {d}/scgi;\n\
             server {{ listen {addr};\n\
             location = /nginx_status {{ stub_status; }}\n\
             location / {{ return 200 \"hello\\n\"; }} }} }}\n"
        );
        std::fs::write(dir.join("nginx.conf"), config).unwrap();
        let master = Command::new("nginx")
            .arg("-c")
            .arg(dir.join("nginx.conf"))
            .arg("-p")
            .arg(&dir)
            .stderr(Stdio::null())
            .spawn()
            .expect("nginx starts");
        let nginx = Nginx { master, addr, dir };
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(addr).is_err() {
            assert!(
                Instant::now() < deadline,
                "nginx did not start: see {}",
                nginx.dir.display()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        nginx
    }

    /// The master's pid.
    pub fn pid(&self) -> u32 {
        self.master.id()
    }

    /// The master's children, as `pgrep -P` finds them (workers come up after the port accepts).
    pub fn workers(&self) -> Vec<u32> {
        let out = Command::new("pgrep")
            .args(["-P", &self.pid().to_string()])
            .output()
            .expect("pgrep runs");
        String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .map(|p| p.parse().unwrap())
            .collect()
    }

    /// The workers and the master.
    pub fn all(&self) -> Vec<u32> {
        let mut pids = self.workers();
        pids.push(self.pid());
        pids
    }

    /// Where its files are (its error log is in logs/).
    pub fn dir(&self) -> &std::path::Path {
        &self.dir
    }

    pub fn url(&self) -> String {
        format!("http://{}/", self.addr)
    }

    /// nginx's own count of the requests it has handled, this read included (stub_status counts
    /// the request that asks).
    pub fn requests(&self) -> u64 {
        let body = crate::http_get(self.addr, "/nginx_status");
        // "Active connections: N\nserver accepts handled requests\n A H R\n..."
        body.lines()
            .nth(2)
            .and_then(|l| l.split_whitespace().nth(2))
            .and_then(|r| r.parse().ok())
            .unwrap_or_else(|| panic!("stub_status as nginx writes it: {body:?}"))
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        // SAFETY: kill only signals the nginx master we started (SIGTERM: fast shutdown, workers too).
        unsafe { libc::kill(self.master.id() as libc::pid_t, libc::SIGTERM) };
        let _ = self.master.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
