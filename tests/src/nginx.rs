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
    /// Where stub_status answers over HTTP/1.1 (the load port may speak HTTP/2 only).
    status: SocketAddr,
    scheme: &'static str,
}

/// How nginx serves HTTP/2 on its load port (nginx 1.22's `listen ... http2`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Http2 {
    /// h2c with prior knowledge only (a plain `listen ... http2` takes no HTTP/1.1).
    Cleartext,
    /// h2 by ALPN over TLS (self-signed for localhost), and http/1.1 for a client that asks.
    Tls,
}

impl Nginx {
    /// Starts one, or says why it cannot and returns None (the test skips), except under CI=true,
    /// where .ci/run installs nginx-light and a missing one fails the test.
    pub fn start(test: &str) -> Option<Nginx> {
        crate::installed("nginx", "nginx-light", test).then(|| Nginx::spawn(1))
    }

    /// Starts one with this many worker processes, once the caller knows nginx is installed;
    /// returns when its port accepts.
    pub fn spawn(workers: u32) -> Nginx {
        Nginx::spawn_with(workers, None, "")
    }

    /// Starts one whose load port speaks HTTP/2 as `http2` says, with `extra` in its server block
    /// (`http2_max_concurrent_streams 8;`, `keepalive_requests 100;`; `$DIR` is its directory, and
    /// `access_log $DIR/logs/tls.log tls;` logs each request's connection and whether its TLS
    /// session was reused); stub_status on a port of its own over HTTP/1.1. Skips (None) as
    /// [`Nginx::start`] does.
    pub fn start_http2(test: &str, http2: Http2, extra: &str) -> Option<Nginx> {
        Nginx::start(test)?;
        Some(Nginx::spawn_with(1, Some(http2), extra))
    }

    /// Starts one with `extra` in its server block (as [`Nginx::start_http2`] takes it) over
    /// HTTP/1.1: `access_log $DIR/logs/requests.log requests;` logs each request's connection,
    /// method, URI and status. Skips (None) as [`Nginx::start`] does.
    pub fn start_with(test: &str, extra: &str) -> Option<Nginx> {
        Nginx::start(test)?;
        Some(Nginx::spawn_with(1, None, extra))
    }

    fn spawn_with(workers: u32, http2: Option<Http2>, extra: &str) -> Nginx {
        let free = || {
            TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
        };
        let addr = free();
        let status = if http2.is_some() { free() } else { addr };
        let dir = std::env::temp_dir().join(format!(
            "stampede-tests-nginx-{}-{}",
            std::process::id(),
            addr.port()
        ));
        std::fs::create_dir_all(dir.join("logs")).unwrap();
        let d = dir.display();
        // A server block may pass requests on to the status server, named before it is known.
        let extra = extra
            .replace("$STATUS_ADDR", &status.to_string())
            .replace("$DIR", &dir.display().to_string());
        let listen = match http2 {
            None => format!("listen {addr};"),
            Some(Http2::Cleartext) => format!("listen {addr} http2;"),
            Some(Http2::Tls) => {
                self_signed(&dir);
                format!(
                    "listen {addr} ssl http2; ssl_certificate {d}/cert.pem; ssl_certificate_key {d}/key.pem;"
                )
            }
        };
        let status_server = if http2.is_some() {
            format!("server {{ listen {status}; location = /nginx_status {{ stub_status; }} }}\n")
        } else {
            String::new()
        };
        let config = format!(
            "worker_processes {workers};\ndaemon off;\npid {d}/nginx.pid;\nerror_log {d}/logs/error.log;\n\
             events {{ worker_connections 4096; }}\n\
             http {{ access_log off; client_body_temp_path {d}/body; proxy_temp_path {d}/proxy;\n\
             log_format tls '$connection $ssl_session_reused';\n\
             log_format names '$uri $status';\n\
             log_format requests '$connection $request_method $request_uri $status';\n\
             fastcgi_temp_path {d}/fcgi; uwsgi_temp_path {d}/uwsgi; scgi_temp_path {d}/scgi;\n\
             {status_server}\
             server {{ {listen} {extra}\n\
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
        let scheme = match http2 {
            Some(Http2::Tls) => "https",
            _ => "http",
        };
        let nginx = Nginx {
            master,
            addr,
            dir,
            status,
            scheme,
        };
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

    /// Starts one that logs every request's path and status (`$uri $status`) to logs/names.log,
    /// over HTTP/1.1 or as `http2` says: each path's count is then the server's own
    /// ([`Nginx::logged`]). Skips (None) as [`Nginx::start`] does.
    pub fn start_logged(test: &str, http2: Option<Http2>) -> Option<Nginx> {
        Nginx::start(test)?;
        Some(Nginx::spawn_with(
            1,
            http2,
            "access_log $DIR/logs/names.log names;",
        ))
    }

    /// How many requests of each path (query left out) and status nginx logged so far
    /// ([`Nginx::start_logged`]), keyed "PATH STATUS".
    pub fn logged(&self) -> std::collections::BTreeMap<String, u64> {
        let text = std::fs::read_to_string(self.dir.join("logs/names.log")).unwrap_or_default();
        let mut counts = std::collections::BTreeMap::new();
        for line in text.lines() {
            *counts.entry(line.to_string()).or_insert(0) += 1;
        }
        counts
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

    /// The load port's URL (https://localhost:PORT/ over TLS, the name its certificate has).
    pub fn url(&self) -> String {
        match self.scheme {
            "https" => format!("https://localhost:{}/", self.addr.port()),
            _ => format!("http://{}/", self.addr),
        }
    }

    /// nginx's own count of the requests it has handled, this read included (stub_status counts
    /// the request that asks).
    pub fn requests(&self) -> u64 {
        let body = crate::http_get(self.status, "/nginx_status");
        // "Active connections: N\nserver accepts handled requests\n A H R\n..."
        body.lines()
            .nth(2)
            .and_then(|l| l.split_whitespace().nth(2))
            .and_then(|r| r.parse().ok())
            .unwrap_or_else(|| panic!("stub_status as nginx writes it: {body:?}"))
    }
}

/// A self-signed certificate for localhost, cert.pem and key.pem in `dir`, made by openssl (which
/// Debian's nginx links).
fn self_signed(dir: &std::path::Path) {
    let made = Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
        ])
        .args([
            "-days",
            "2",
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=DNS:localhost",
        ])
        .arg("-keyout")
        .arg(dir.join("key.pem"))
        .arg("-out")
        .arg(dir.join("cert.pem"))
        .stderr(Stdio::null())
        .status()
        .expect("openssl runs");
    assert!(made.success(), "openssl made no certificate");
}

impl Drop for Nginx {
    fn drop(&mut self) {
        // SAFETY: kill only signals the nginx master we started (SIGTERM: fast shutdown, workers too).
        unsafe { libc::kill(self.master.id() as libc::pid_t, libc::SIGTERM) };
        let _ = self.master.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
