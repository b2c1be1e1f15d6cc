//! Container helpers for the cluster tests: is a Docker daemon answering, build the images once per process
//! (deploy/build-images.sh), bring deploy/docker-compose.yml up under a unique project name, break things
//! (`docker kill`, `docker network disconnect`), read what the target counted and what the coordinator wrote,
//! and always remove every container, network and volume of the project when dropped.
//!
//! Self-contained (std + serde_json) so it can be compiled into a test binary on its own.
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

/// The repository root (tests/ is one level below it).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ lives in the repository")
        .to_path_buf()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).trim().to_string()
}

/// Runs a command to completion; `Err` carries a one-paragraph description of the failure.
fn run(cmd: &mut Command) -> Result<String, String> {
    let o: Output = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("{cmd:?} did not start: {e}"))?;
    if o.status.success() {
        Ok(text(&o.stdout))
    } else {
        Err(format!(
            "{cmd:?} failed ({}): {} {}",
            o.status,
            text(&o.stdout),
            text(&o.stderr)
        ))
    }
}

fn docker(args: &[&str]) -> Result<String, String> {
    run(Command::new("docker").args(args))
}

/// Why Docker cannot be used here, or `None` if a daemon answers and compose is installed.
pub fn unavailable() -> Option<String> {
    if let Err(e) = docker(&["version", "--format", "{{.Server.Version}}"]) {
        return Some(format!("no Docker daemon answers ({e})"));
    }
    if compose_program().is_none() {
        return Some("neither `docker compose` nor `docker-compose` works".into());
    }
    None
}

/// Whether a cluster test should run. Without a daemon it prints why and returns false (the test passes as
/// skipped), except under CI=true, where a missing daemon fails the test. STAMPEDE_SKIP_DOCKER=1 skips on
/// purpose, even in CI.
pub fn available(test: &str) -> bool {
    if std::env::var_os("STAMPEDE_SKIP_DOCKER").is_some_and(|v| !v.is_empty() && v != "0") {
        eprintln!("SKIPPED {test}: STAMPEDE_SKIP_DOCKER is set");
        return false;
    }
    match unavailable() {
        None => true,
        Some(why) if std::env::var("CI").is_ok_and(|v| v == "true") => {
            panic!("{test}: {why}; CI=true requires Docker for the cluster tests")
        }
        Some(why) => {
            eprintln!("SKIPPED {test}: {why} (set CI=true to make this a failure)");
            false
        }
    }
}

/// `docker compose` (v2) if it works, else `docker-compose` (v1).
fn compose_program() -> Option<&'static [&'static str]> {
    static PROGRAM: OnceLock<Option<&'static [&'static str]>> = OnceLock::new();
    *PROGRAM.get_or_init(|| {
        let candidates: [&'static [&'static str]; 2] =
            [&["docker", "compose"], &["docker-compose"]];
        candidates.into_iter().find(|c| {
            Command::new(c[0])
                .args(&c[1..])
                .arg("version")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        })
    })
}

/// Builds stampede:dev, stampede-agent:dev and stampede-probe:dev with deploy/build-images.sh, once per
/// test process (cargo and docker skip what is up to date). STAMPEDE_SKIP_CARGO=1 packs the release binaries
/// already built instead (for iterating on deploy/ only).
pub fn build_images() {
    static BUILT: OnceLock<Result<(), String>> = OnceLock::new();
    let result = BUILT.get_or_init(|| {
        let mut cmd = Command::new("bash");
        cmd.arg(repo_root().join("deploy/build-images.sh"))
            .arg("--with-probe")
            .current_dir(repo_root());
        if std::env::var_os("STAMPEDE_SKIP_CARGO").is_some_and(|v| !v.is_empty() && v != "0") {
            cmd.arg("--skip-cargo");
        }
        crate::user_env(&mut cmd);
        let started = Instant::now();
        let r = run(&mut cmd).map(|_| ());
        eprintln!("build-images.sh took {:.0?}", started.elapsed());
        r
    });
    if let Err(e) = result {
        panic!("building the images failed: {e}");
    }
}

/// Holds the machine for one cluster at a time: the tests assert 2 s deadlines, which two clusters
/// competing for two cores would make flaky.
pub fn exclusive() -> MutexGuard<'static, ()> {
    static ONE: Mutex<()> = Mutex::new(());
    ONE.lock().unwrap_or_else(|e| e.into_inner())
}

/// The Compose lines of docs/guide/deploying.md's cluster block, each as the words after its
/// `docker compose -f deploy/docker-compose.yml -p stampede` (comments dropped): what a test runs, so
/// the guide's commands are the tested ones.
pub fn guide_lines() -> Vec<Vec<String>> {
    let prefix = "docker compose -f deploy/docker-compose.yml -p stampede ";
    let guide = std::fs::read_to_string(repo_root().join("docs/guide/deploying.md"))
        .expect("docs/guide/deploying.md");
    guide
        .lines()
        .filter_map(|l| l.strip_prefix(prefix))
        .map(|rest| {
            let words = rest.split('#').next().unwrap_or_default();
            words.split_whitespace().map(str::to_string).collect()
        })
        .collect()
}

/// What the coordinator is asked to run (the compose file's variables).
#[derive(Debug, Clone)]
pub struct Plan {
    pub agents: usize,
    /// Requests per second per step, e.g. "150,300,450,600".
    pub steps: String,
    pub step_duration: String,
    pub on_agent_loss: String,
}

impl Plan {
    pub fn new(agents: usize, steps: &str, step_duration: &str) -> Plan {
        Plan {
            agents,
            steps: steps.into(),
            step_duration: step_duration.into(),
            on_agent_loss: "degrade".into(),
        }
    }
}

/// One `docker compose` project made from deploy/docker-compose.yml (plus the file named by
/// STAMPEDE_COMPOSE_EXTRA, if set, for local experiments); everything it created is removed when it is
/// dropped.
pub struct Cluster {
    pub project: String,
    plan: Plan,
    token: String,
    override_dir: PathBuf,
}

impl Cluster {
    /// Starts the target and `plan.agents` agents (not the coordinator) and waits until the target answers
    /// and the agents are running.
    pub fn up(plan: Plan) -> Cluster {
        let cluster = Cluster::prepared(plan);
        let started = Instant::now();
        let scale = format!("agent={}", cluster.plan.agents);
        cluster
            .compose(&["up", "-d", "--scale", &scale, "target", "agent"])
            .unwrap_or_else(|e| panic!("starting the cluster failed: {e}"));
        cluster.wait_up();
        eprintln!(
            "cluster {} up in {:.1?}",
            cluster.project,
            started.elapsed()
        );
        cluster
    }

    /// A project ready to be brought up (images built, certificates made), nothing started yet.
    pub fn prepared(plan: Plan) -> Cluster {
        build_images();
        static N: AtomicU32 = AtomicU32::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        // Lower-case letters and digits only: valid for compose v1 and v2 alike.
        let project = format!("stampedetest{}x{n}", std::process::id());
        let override_dir = std::env::temp_dir().join(format!("{project}-compose"));
        std::fs::create_dir_all(&override_dir).expect("temp dir");
        // The test reads the target's stats from the host: publish it on an ephemeral loopback port.
        std::fs::write(
            override_dir.join("test.yml"),
            "services:\n  target:\n    ports: [\"127.0.0.1::8080\"]\n",
        )
        .expect("override file");
        // Mutual TLS for the control channel: one certificate for every agent replica (dialed as `agent`),
        // readable by the containers' uid.
        let pki = override_dir.join("pki");
        let made = Command::new(crate::bin("stampede"))
            .args(["certs", "init"])
            .arg(&pki)
            .args(["--agent", "agent"])
            .output()
            .expect("stampede certs init runs");
        assert!(
            made.status.success(),
            "certs init: {}",
            String::from_utf8_lossy(&made.stderr)
        );
        for entry in std::fs::read_dir(&pki).expect("pki dir") {
            let path = entry.expect("pki entry").path();
            std::os::unix::fs::chown(&path, Some(65534), Some(65534)).expect("chown a pki file");
        }
        Cluster {
            project,
            plan,
            token: format!("test-token-{}-{n}", std::process::id()),
            override_dir,
        }
    }

    /// Waits until the target answers and `plan.agents` agents are running (30 s at most).
    pub fn wait_up(&self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let target_ok = self.try_stats().is_ok();
            let agents = self.ids("agent");
            let running = agents.iter().filter(|id| self.running(id)).count();
            if target_ok && running == self.plan.agents {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the cluster did not come up in 30 s: target answers {target_ok}, {running}/{} agents running\n{}",
                self.plan.agents,
                self.logs_of("agent")
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    fn compose(&self, args: &[&str]) -> Result<String, String> {
        run(&mut self.compose_command(args).ok_or("no docker compose")?)
    }

    /// A line of the deploying guide (the words after `docker compose -f deploy/docker-compose.yml -p
    /// stampede`), run in this project with whichever Compose is installed; the child, for its caller to
    /// bound.
    pub fn spawn_as_written(&self, words: &[String]) -> std::process::Child {
        let words: Vec<&str> = words.iter().map(String::as_str).collect();
        self.compose_command(&words)
            .expect("docker compose")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("compose starts")
    }

    fn compose_command(&self, args: &[&str]) -> Option<Command> {
        let program = compose_program()?;
        let file = repo_root().join("deploy/docker-compose.yml");
        let over = self.override_dir.join("test.yml");
        let mut cmd = Command::new(program[0]);
        cmd.args(&program[1..])
            .arg("-p")
            .arg(&self.project)
            .arg("-f")
            .arg(file)
            .arg("-f")
            .arg(over);
        if let Some(extra) = std::env::var_os("STAMPEDE_COMPOSE_EXTRA") {
            cmd.arg("-f").arg(extra);
        }
        cmd.args(args)
            .env("STAMPEDE_TOKEN", &self.token)
            .env("STAMPEDE_PKI", self.override_dir.join("pki"))
            .env("STAMPEDE_STEPS", &self.plan.steps)
            .env("STAMPEDE_STEP_DURATION", &self.plan.step_duration)
            .env("STAMPEDE_ON_AGENT_LOSS", &self.plan.on_agent_loss)
            .env("STAMPEDE_AGENTS", self.plan.agents.to_string())
            .env("STAMPEDE_AGENT_THREADS", "1");
        Some(cmd)
    }

    /// Starts the coordinator (its run begins at once) and returns its container id.
    pub fn start_coordinator(&self) -> String {
        self.compose(&["up", "-d", "--no-deps", "coordinator"])
            .unwrap_or_else(|e| panic!("starting the coordinator failed: {e}"));
        self.ids("coordinator")
            .pop()
            .expect("the coordinator container exists")
    }

    /// Container ids of a service, in a stable order (compose's container number).
    pub fn ids(&self, service: &str) -> Vec<String> {
        let filter_p = format!("label=com.docker.compose.project={}", self.project);
        let filter_s = format!("label=com.docker.compose.service={service}");
        let out = docker(&[
            "ps",
            "-a",
            "--no-trunc",
            "--filter",
            &filter_p,
            "--filter",
            &filter_s,
            "--format",
            "{{.Label \"com.docker.compose.container-number\"}} {{.ID}}",
        ])
        .unwrap_or_default();
        let mut rows: Vec<(u32, String)> = out
            .lines()
            .filter_map(|l| l.split_once(' '))
            .map(|(n, id)| (n.parse().unwrap_or(0), id.to_string()))
            .collect();
        rows.sort();
        rows.into_iter().map(|(_, id)| id).collect()
    }

    fn inspect(&self, id: &str, format: &str) -> String {
        docker(&["inspect", "--format", format, id]).unwrap_or_default()
    }

    pub fn running(&self, id: &str) -> bool {
        self.inspect(id, "{{.State.Running}}") == "true"
    }

    /// Waits for a container to exit; its exit code, or `None` if it still runs after `limit`.
    pub fn wait_exit(&self, id: &str, limit: Duration) -> Option<i64> {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if !self.running(id) {
                return self.inspect(id, "{{.State.ExitCode}}").parse().ok();
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        None
    }

    /// The compose network's full name (`<project>_control` or similar).
    pub fn network(&self, name: &str) -> String {
        let filter_p = format!("label=com.docker.compose.project={}", self.project);
        let filter_n = format!("label=com.docker.compose.network={name}");
        let found = docker(&[
            "network",
            "ls",
            "--filter",
            &filter_p,
            "--filter",
            &filter_n,
            "--format",
            "{{.Name}}",
        ])
        .unwrap_or_default();
        found
            .lines()
            .next()
            .map(str::to_string)
            .unwrap_or_else(|| format!("{}_{name}", self.project))
    }

    /// A container's address on one of the project's networks ("control" or "load").
    pub fn ip(&self, id: &str, network: &str) -> IpAddr {
        let net = self.network(network);
        let ip = self.inspect(
            id,
            &format!("{{{{with index .NetworkSettings.Networks \"{net}\"}}}}{{{{.IPAddress}}}}{{{{end}}}}"),
        );
        ip.parse()
            .unwrap_or_else(|_| panic!("container {id} has no address on {net}: {ip:?}"))
    }

    /// Resolves `name` inside a network with getaddrinfo (the probe image's getent), as the binaries would.
    pub fn resolve(&self, network: &str, name: &str) -> Vec<IpAddr> {
        let net = self.network(network);
        let out = docker(&[
            "run",
            "--rm",
            "--network",
            &net,
            "stampede-probe:dev",
            "ahostsv4",
            name,
        ])
        .unwrap_or_default();
        let mut ips: Vec<IpAddr> = out
            .lines()
            .filter_map(|l| l.split_whitespace().next()?.parse().ok())
            .collect();
        ips.sort();
        ips.dedup();
        ips
    }

    /// `docker kill` (SIGKILL: no goodbye on the control stream).
    pub fn kill(&self, id: &str) {
        docker(&["kill", id]).unwrap_or_else(|e| panic!("docker kill failed: {e}"));
    }

    /// Cuts a container off one of the project's networks (its other networks keep working).
    pub fn disconnect(&self, network: &str, id: &str) {
        let net = self.network(network);
        docker(&["network", "disconnect", "--force", &net, id])
            .unwrap_or_else(|e| panic!("docker network disconnect failed: {e}"));
    }

    /// The target's address as published on the host's loopback.
    pub fn target_addr(&self) -> Result<SocketAddr, String> {
        let id = self.ids("target").pop().ok_or("no target container")?;
        let port = docker(&["port", &id, "8080/tcp"])?;
        port.lines()
            .find_map(|l| {
                l.trim()
                    .parse::<SocketAddr>()
                    .ok()
                    .filter(SocketAddr::is_ipv4)
            })
            .ok_or_else(|| format!("target port not published: {port:?}"))
    }

    fn try_stats(&self) -> Result<serde_json::Value, String> {
        use std::io::{Read, Write};
        let addr = self.target_addr()?;
        let mut s = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(2))
            .map_err(|e| e.to_string())?;
        s.set_read_timeout(Some(Duration::from_secs(5)))
            .map_err(|e| e.to_string())?;
        write!(
            s,
            "GET /_stampede/stats HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
        )
        .map_err(|e| e.to_string())?;
        let mut resp = String::new();
        s.read_to_string(&mut resp).map_err(|e| e.to_string())?;
        let body = resp.split_once("\r\n\r\n").ok_or("no HTTP reply")?.1;
        serde_json::from_str(body).map_err(|e| format!("stats are not JSON ({e}): {body}"))
    }

    /// The target's /_stampede/stats.
    pub fn stats(&self) -> serde_json::Value {
        self.try_stats()
            .unwrap_or_else(|e| panic!("the target's stats: {e}"))
    }

    /// Requests the target counted per client IP.
    pub fn by_client(&self) -> HashMap<IpAddr, u64> {
        let stats = self.stats();
        let map = stats["by_client"]
            .as_object()
            .unwrap_or_else(|| panic!("stats have no by_client: {stats}"));
        map.iter()
            .filter_map(|(ip, n)| Some((ip.parse().ok()?, n.as_u64()?)))
            .collect()
    }

    /// A file from a container's filesystem or volumes (running or not), or `None` if it is not there.
    pub fn read_file(&self, id: &str, path: &str) -> Option<String> {
        let o = Command::new("docker")
            .args(["cp", &format!("{id}:{path}"), "-"])
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output()
            .ok()?;
        if !o.status.success() {
            return None;
        }
        untar_first(&o.stdout).map(|b| String::from_utf8_lossy(&b).into_owned())
    }

    /// The coordinator's run.json so far (it is rewritten after every step).
    pub fn run_json(&self, coordinator: &str) -> Option<serde_json::Value> {
        let text = self.read_file(coordinator, "/results/run.json")?;
        serde_json::from_str(&text).ok()
    }

    /// Waits until run.json holds at least `n` finished steps; panics after `limit`.
    pub fn wait_steps(&self, coordinator: &str, n: usize, limit: Duration) -> serde_json::Value {
        let deadline = Instant::now() + limit;
        loop {
            let exited = !self.running(coordinator);
            if let Some(run) = self.run_json(coordinator)
                && run["steps"].as_array().is_some_and(|s| s.len() >= n)
            {
                return run;
            }
            assert!(
                !exited,
                "the coordinator exited before run.json had {n} steps\n{}\n{}",
                self.logs(coordinator),
                self.logs_of("agent")
            );
            assert!(
                Instant::now() < deadline,
                "run.json did not reach {n} steps in {limit:?}\n{}",
                self.logs(coordinator)
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    pub fn logs(&self, id: &str) -> String {
        let o = Command::new("docker")
            .args(["logs", "--tail", "60", id])
            .output();
        o.map(|o| format!("{}{}", text(&o.stdout), text(&o.stderr)))
            .unwrap_or_default()
    }

    /// The last lines of every container of a service, for failure messages.
    pub fn logs_of(&self, service: &str) -> String {
        self.ids(service)
            .iter()
            .map(|id| format!("--- {service} {}:\n{}", &id[..12], self.logs(id)))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let started = Instant::now();
        let _ = self.compose(&["down", "-v", "--remove-orphans", "-t", "1"]);
        // Whatever `down` missed (a failed `up`, a container created by hand): remove by label.
        let filter = format!("label=com.docker.compose.project={}", self.project);
        for kind in [["ps", "-aq"], ["network", "ls"], ["volume", "ls"]] {
            let mut args: Vec<&str> = kind.to_vec();
            if kind[0] != "ps" {
                args.push("-q");
            }
            args.extend(["--filter", &filter]);
            let ids = docker(&args).unwrap_or_default();
            for id in ids.lines().filter(|l| !l.is_empty()) {
                let _ = match kind[0] {
                    "ps" => docker(&["rm", "-f", "-v", id]),
                    "network" => docker(&["network", "rm", id]),
                    _ => docker(&["volume", "rm", "-f", id]),
                };
            }
        }
        let _ = std::fs::remove_dir_all(&self.override_dir);
        eprintln!(
            "cluster {} removed in {:.1?}",
            self.project,
            started.elapsed()
        );
    }
}

/// The first regular file of a tar stream (what `docker cp CONTAINER:FILE -` writes).
fn untar_first(tar: &[u8]) -> Option<Vec<u8>> {
    let mut at = 0;
    while at + 512 <= tar.len() {
        let header = &tar[at..at + 512];
        if header.iter().all(|&b| b == 0) {
            return None;
        }
        let size_field = text(&header[124..136]);
        let size =
            u64::from_str_radix(size_field.trim_matches(char::from(0)).trim(), 8).ok()? as usize;
        let kind = header[156];
        let start = at + 512;
        if kind == b'0' || kind == 0 {
            return tar.get(start..start + size).map(<[u8]>::to_vec);
        }
        at = start + size.div_ceil(512) * 512;
    }
    None
}
