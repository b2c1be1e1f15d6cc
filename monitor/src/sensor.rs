//! The sensor: one reading a second of what a monitor watches and of the host, from Linux's /proc and
//! cgroup v2, synchronous and cheap (a few dozen small reads; never the per-socket tables).
//!
//! `Sensor::open` resolves the watch once (a pid that exists, a name some process has, a cgroup v2
//! directory, a container's cgroup) and says clearly why it cannot; `sample` re-reads the set of
//! processes every time, and a process that exits meanwhile is skipped, never an error.
mod cgroup;
pub mod host;
mod net;
mod process;
mod procfs;
mod tcp;

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Instant;

use crate::{
    CgroupSample, Cores, CpuStates, HostSample, InterfaceCounters, MonitorInfo, NetScope, Sample,
    TargetSample, TcpCounters, Watch,
};

use process::{Process, Selector, Tally};

/// Why a sensor cannot open or read.
#[derive(Debug, thiserror::Error)]
pub enum SensorError {
    #[error("the server monitor reads Linux's /proc and cgroup v2; this is {0}")]
    Unsupported(&'static str),
    #[error("no process has pid {0}: is it running? (`--pid` takes a running process's id)")]
    NoSuchPid(u32),
    #[error(
        "no running process is named {0:?} (the name is the one `ps -e -o comm` and /proc/PID/comm show)"
    )]
    NoSuchProcess(String),
    #[error(
        "{count} running processes are named {name:?}, more than the {most} a server has: watch its own with --pid PID (its threads and children count) or its --cgroup"
    )]
    TooManyProcesses {
        name: String,
        count: usize,
        most: usize,
    },
    #[error("{tid} is a thread of process {process}, not a process: give --pid {process}")]
    ThreadNotProcess { tid: u32, process: u64 },
    #[error("{name:?} cannot be a process name: {why}")]
    BadProcessName { name: String, why: String },
    #[error(
        "this host has no cgroup v2 mounted (no cgroup2 line in /proc/self/mountinfo); watch --pid or --process instead"
    )]
    NoCgroupV2,
    #[error("{}: not a cgroup v2 directory: {why}", path.display())]
    NotCgroup { path: PathBuf, why: String },
    #[error("container {id}: {why}")]
    Container { id: String, why: String },
    #[error("cannot read {}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}: line {line}: {what}", path.display())]
    Parse {
        path: PathBuf,
        line: usize,
        what: String,
    },
}

/// The most processes a `--process` name may match: a server's master and workers, not every
/// process of an interpreter's name on the host.
pub const MAX_NAMED: usize = 64;

/// What the sensor watches, with the state its deltas need.
struct Target {
    selector: Selector,
    /// The cgroup whose own accounting is read, when watching one.
    cgroup: Option<PathBuf>,
    cpu: Tally<2>,
    switches: Tally<2>,
    /// Each thread's start time and CPU ticks at the previous sample, for the busiest thread.
    threads_before: HashMap<u32, (u64, u64)>,
}

/// An open sensor: call `sample` once a second.
pub struct Sensor {
    target: Option<Target>,
    scope: NetScope,
    ns_per_tick: u64,
    page_size: u64,
    before: Option<(Instant, Vec<CpuStates>)>,
    /// The last network counters read, kept for a second when the target's namespace has no process
    /// left to read it through (a restart), so counters stay flat instead of dropping to nothing.
    last_net: (Vec<InterfaceCounters>, TcpCounters),
    watching: String,
    cores: Cores,
    hostname: String,
    machine_id: String,
    warnings: Vec<String>,
    own_cpu_ns: u64,
}

impl Sensor {
    /// Resolves what `watch` names, or says why it cannot be watched.
    pub fn open(watch: &Watch) -> Result<Sensor, SensorError> {
        Sensor::open_allowing(watch, MAX_NAMED)
    }

    /// [`Sensor::open`], a process name allowed to match up to `most` processes (the coordinator's
    /// `--monitor-processes N`: told that many are meant).
    pub fn open_allowing(watch: &Watch, most: usize) -> Result<Sensor, SensorError> {
        if !cfg!(target_os = "linux") {
            return Err(SensorError::Unsupported(std::env::consts::OS));
        }
        let mount = || cgroup::mount();
        let (selector, cgroup_dir) = match watch {
            Watch::Pid(pid) => (Selector::Tree(*pid, process::root(*pid)?), None),
            Watch::Process(name) => {
                check_name(name)?;
                (Selector::Name(name.clone()), None)
            }
            Watch::Cgroup(path) => {
                let dir = cgroup::resolve(path, &mount()?)?;
                (Selector::Cgroup(dir.clone()), Some(dir))
            }
            Watch::Container(id) => {
                let dir = cgroup::container(id, &mount()?)?;
                (Selector::Cgroup(dir.clone()), Some(dir))
            }
        };
        let pids = selector.pids()?;
        if let (Watch::Process(name), true) = (watch, pids.is_empty()) {
            return Err(SensorError::NoSuchProcess(name.clone()));
        }
        // A name like python3 may match every script on the host, not the one server.
        if let (Watch::Process(name), true) = (watch, pids.len() > most) {
            return Err(SensorError::TooManyProcesses {
                name: name.clone(),
                count: pids.len(),
                most,
            });
        }
        let cores = cores_of(cgroup_dir.as_deref(), pids.first().copied())?;
        let scope = match pids.first().and_then(|pid| net::own_namespace(*pid)) {
            Some(_) => NetScope::Target,
            None => NetScope::Host,
        };
        let warnings = warnings_about(pids.first().copied())?;
        let count = match (pids.len(), watch) {
            // Which processes a name matched, said at the start (stderr, run.json's monitors).
            (n, Watch::Process(_)) => format!(
                "{n} pid{}: {}",
                if n == 1 { "" } else { "s" },
                pids.iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            (1, _) => "1 pid".to_string(),
            (n, _) => format!("{n} pids"),
        };
        let watching = match (&cgroup_dir, watch) {
            (Some(dir), Watch::Cgroup(path)) if dir == path => format!("{watch} ({count})"),
            (Some(dir), _) => format!("{watch} (cgroup {}, {count})", dir.display()),
            (None, _) => format!("{watch} ({count})"),
        };
        Ok(Sensor {
            target: Some(Target {
                selector,
                cgroup: cgroup_dir,
                cpu: Tally::default(),
                switches: Tally::default(),
                threads_before: HashMap::new(),
            }),
            scope,
            ns_per_tick: host::ns_per_tick(),
            page_size: host::page_size(),
            before: None,
            last_net: (Vec::new(), TcpCounters::default()),
            watching,
            cores,
            hostname: control::system::hostname(),
            machine_id: host::machine_id(),
            warnings,
            own_cpu_ns: 0,
        })
    }

    /// Who this monitor is; `name` defaults to the hostname.
    pub fn info(&self, name: Option<String>) -> MonitorInfo {
        MonitorInfo {
            name: name.unwrap_or_else(|| self.hostname.clone()),
            hostname: self.hostname.clone(),
            watching: self.watching.clone(),
            cores: self.cores,
            machine_id: self.machine_id.clone(),
        }
    }

    /// What the sensor could not read as asked, said once (a counter this kernel lacks).
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// One reading. Counters are cumulative; the interval gauges (busiest thread and core) cover the
    /// time since the previous call, and are `None` on the first.
    pub fn sample(&mut self) -> Result<Sample, SensorError> {
        let cpu_before = control::system::thread_cpu_ns();
        let at_unix_ns = control::session::unix_ns_now();
        let now = Instant::now();
        let elapsed_ns = self
            .before
            .as_ref()
            .map(|(at, _)| (now - *at).as_nanos() as u64);
        let host = self.host()?;
        let (ns_per_tick, page_size) = (self.ns_per_tick, self.page_size);
        let mut net_pid = None;
        let target = match &mut self.target {
            Some(target) => {
                Some(target.sample(ns_per_tick, page_size, elapsed_ns, &mut net_pid)?)
            }
            None => None,
        };
        let (net, tcp) = self.network(net_pid)?;
        self.before = Some((now, host.cores.clone()));
        self.own_cpu_ns += control::system::thread_cpu_ns().saturating_sub(cpu_before);
        Ok(Sample {
            at_unix_ns,
            target,
            host,
            net_scope: self.scope,
            net,
            tcp,
            monitor_cpu_ns: self.own_cpu_ns,
        })
    }

    fn host(&self) -> Result<HostSample, SensorError> {
        let path = PathBuf::from("/proc/stat");
        let text = procfs::read(&path)?;
        let stat = procfs::parse(&path, &text, |t| host::parse_stat(t, self.ns_per_tick))?;
        let path = PathBuf::from("/proc/meminfo");
        let text = procfs::read(&path)?;
        let (mem_total_bytes, mem_available_bytes) =
            procfs::parse(&path, &text, host::parse_meminfo)?;
        let busiest_core_pct = self.before.as_ref().and_then(|(_, before)| {
            let shares = stat
                .cores
                .iter()
                .zip(before)
                .filter_map(|(now, b)| now.since(b).busy_pct());
            shares.fold(None, |max: Option<f64>, s| {
                Some(max.map_or(s, |m| m.max(s)))
            })
        });
        Ok(HostSample {
            cpu: stat.cpu,
            cores: stat.cores,
            busiest_core_pct,
            run_queue: stat.procs_running,
            mem_available_bytes,
            mem_total_bytes,
        })
    }

    /// Interfaces and TCP counters of the scope's namespace: the monitor's own, or the target's
    /// through one of its processes (`pid`, none when it has none left this second).
    fn network(
        &mut self,
        pid: Option<u32>,
    ) -> Result<(Vec<InterfaceCounters>, TcpCounters), SensorError> {
        let dir = match self.scope {
            NetScope::Host => Some(net::ours().to_path_buf()),
            NetScope::Target => pid.and_then(net::own_namespace),
        };
        let Some(dir) = dir else {
            return Ok(self.last_net.clone());
        };
        let path = dir.join("dev");
        let read = match procfs::read_alive(&path)? {
            Some(text) => {
                let net = procfs::parse(&path, &text, net::parse_dev)?;
                read_tcp(&dir).map(|(tcp, _)| (net, tcp))
            }
            None => return Ok(self.last_net.clone()),
        };
        match read {
            Ok(pair) => {
                self.last_net = pair.clone();
                Ok(pair)
            }
            // The process we read the namespace through exited between the two reads.
            Err(SensorError::Read { source, .. }) if procfs::is_gone(&source) => {
                Ok(self.last_net.clone())
            }
            Err(err) => Err(err),
        }
    }
}

impl Target {
    fn sample(
        &mut self,
        ns_per_tick: u64,
        page_size: u64,
        elapsed_ns: Option<u64>,
        net_pid: &mut Option<u32>,
    ) -> Result<TargetSample, SensorError> {
        let mut processes = Vec::new();
        for pid in self.selector.pids()? {
            if let Some(p) = Process::read(pid)? {
                processes.push(p);
            }
        }
        *net_pid = processes.first().map(|p| p.pid);
        self.cpu.update(
            processes
                .iter()
                .map(|p| (p.pid, p.stat.start, [p.stat.utime, p.stat.stime])),
        );
        let threads = processes.iter().flat_map(|p| &p.threads);
        self.switches.update(
            threads
                .clone()
                .map(|t| (t.tid, t.start, [t.switches.0, t.switches.1])),
        );
        let mut busiest: Option<(u64, &str)> = None;
        for t in threads.clone() {
            if let Some((start, ticks)) = self.threads_before.get(&t.tid) {
                let grew = if *start == t.start {
                    t.ticks.saturating_sub(*ticks)
                } else {
                    t.ticks
                };
                if busiest.is_none_or(|(b, _)| grew > b) {
                    busiest = Some((grew, &t.comm));
                }
            }
        }
        let busiest_thread_pct = elapsed_ns
            .filter(|ns| *ns > 0)
            .zip(busiest)
            .map(|(ns, (ticks, _))| 100.0 * (ticks * ns_per_tick) as f64 / ns as f64);
        let busiest_thread = busiest_thread_pct
            .and(busiest)
            .map(|(_, comm)| comm.to_string());
        self.threads_before = threads.map(|t| (t.tid, (t.start, t.ticks))).collect();
        let cgroup = self.cgroup.as_deref().map(cgroup::sample).transpose()?;
        let (cpu_user_ns, cpu_system_ns) = match &cgroup {
            // The cgroup's own clock: exact, in µs, and it keeps the time of processes gone.
            Some(CgroupSample {
                user_ns, system_ns, ..
            }) => (*user_ns, *system_ns),
            None => (
                self.cpu.total[0] * ns_per_tick,
                self.cpu.total[1] * ns_per_tick,
            ),
        };
        Ok(TargetSample {
            processes: processes.len() as u32,
            threads: processes.iter().map(|p| p.stat.threads).sum(),
            open_fds: processes.iter().filter_map(|p| p.fds).sum(),
            rss_bytes: processes.iter().map(|p| p.stat.rss_pages * page_size).sum(),
            cpu_user_ns,
            cpu_system_ns,
            voluntary_switches: self.switches.total[0],
            involuntary_switches: self.switches.total[1],
            busiest_thread_pct,
            busiest_thread,
            cgroup,
        })
    }
}

/// What the sensor will not read as asked, said once when it opens: a TCP counter this kernel lacks,
/// an fd table it may not read.
fn warnings_about(first: Option<u32>) -> Result<Vec<String>, SensorError> {
    let mut warnings = Vec::new();
    let (_, missing) = read_tcp(net::ours())?;
    if !missing.0.is_empty() {
        warnings.push(format!(
            "this kernel has no TCP counter {}: reported as 0",
            missing.0.join(", ")
        ));
    }
    // Another user's fd table needs privilege; say so once rather than report 0 fds as a fact.
    if let Some(pid) = first {
        let fd = PathBuf::from(format!("/proc/{pid}/fd"));
        if let Err(err) = std::fs::read_dir(&fd)
            && err.kind() == std::io::ErrorKind::PermissionDenied
        {
            warnings.push(format!(
                "cannot read {} ({err}): open fds are counted only for the processes whose table \
                 can be read; run the monitor as the target's user or as root",
                fd.display()
            ));
        }
    }
    Ok(warnings)
}

/// A `--process` name must be one /proc/PID/comm can hold.
fn check_name(name: &str) -> Result<(), SensorError> {
    let why = if name.is_empty() {
        Some("it is empty".to_string())
    } else if name.len() > process::MAX_NAME {
        let cut: String = name
            .char_indices()
            .take_while(|(i, c)| i + c.len_utf8() <= process::MAX_NAME)
            .map(|(_, c)| c)
            .collect();
        Some(format!(
            "the kernel keeps {} bytes of a process's name (/proc/PID/comm): try {cut:?}",
            process::MAX_NAME
        ))
    } else if name.contains(['/', '\n']) {
        Some("a name has no `/` or newline (give the program's name, not its path)".to_string())
    } else {
        None
    };
    match why {
        Some(why) => Err(SensorError::BadProcessName {
            name: name.to_string(),
            why,
        }),
        None => Ok(()),
    }
}

/// The cores the target may use: online, narrowed by its cpuset (the cgroup's, or the first
/// process's affinity) and by the CPU quota of its cgroup and the cgroups above it.
fn cores_of(cgroup_dir: Option<&std::path::Path>, pid: Option<u32>) -> Result<Cores, SensorError> {
    let online = host::online_cores()?;
    let mount = cgroup::mount().ok();
    let dir = cgroup_dir
        .map(|d| d.to_path_buf())
        .or_else(|| Some(cgroup::of_pid(pid?, mount.as_deref()?)).flatten());
    let (cpuset, quota) = match (&dir, &mount) {
        (Some(dir), Some(mount)) => (cgroup::cpuset(dir)?, cgroup::quota(dir, mount)?),
        _ => (None, None),
    };
    let cpuset = cpuset
        .or_else(|| pid.and_then(affinity))
        .filter(|n| *n < online);
    Ok(Cores {
        online,
        cpuset,
        quota,
    })
}

/// How many cores a process may run on.
fn affinity(pid: u32) -> Option<u32> {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: a zeroed cpu_set_t is a valid empty set; sched_getaffinity writes at most its size.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        let rc = unsafe {
            libc::sched_getaffinity(
                pid as libc::pid_t,
                std::mem::size_of::<libc::cpu_set_t>(),
                &mut set,
            )
        };
        // SAFETY: CPU_COUNT only reads the set.
        (rc == 0).then(|| unsafe { libc::CPU_COUNT(&set) } as u32)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = pid;
        None
    }
}

/// /proc/net/netstat and snmp of one namespace's net directory.
fn read_tcp(dir: &std::path::Path) -> Result<(TcpCounters, tcp::Missing), SensorError> {
    let netstat_path = dir.join("netstat");
    let netstat = procfs::read(&netstat_path)?;
    let snmp_path = dir.join("snmp");
    let snmp = procfs::read(&snmp_path)?;
    // A section missing from either file is the file's error; say which one.
    tcp::parse_section(&netstat, "TcpExt").map_err(|e| parse_error(&netstat_path, e))?;
    procfs::parse(&snmp_path, &snmp, |s| tcp::counters(&netstat, s))
}

fn parse_error(path: &std::path::Path, err: procfs::ParseError) -> SensorError {
    SensorError::Parse {
        path: path.to_path_buf(),
        line: err.line,
        what: err.what,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Every parser of outside text, run on one input: each may refuse it, none may panic.
    fn parse_everything(text: &str) {
        let _ = process::parse_stat(text);
        let _ = process::parse_switches(text);
        let _ = host::parse_stat(text, 10_000_000);
        let _ = host::parse_meminfo(text);
        let _ = host::parse_cpu_list(text);
        let _ = net::parse_dev(text);
        let _ = tcp::counters(text, text);
        let _ = cgroup::parse_mountinfo(text);
        let _ = cgroup::parse_cpu_max(text);
        let _ = cgroup::parse_cpu_stat(text);
        let _ = cgroup::parse_procs(text);
        let _ = procfs::colon_fields(text, ["MemTotal", "Name"]);
    }

    /// This machine's own files, as the seeds the mutations start from.
    fn seeds() -> Vec<String> {
        [
            "/proc/self/stat",
            "/proc/self/status",
            "/proc/stat",
            "/proc/meminfo",
            "/proc/net/dev",
            "/proc/net/netstat",
            "/proc/net/snmp",
            "/proc/self/mountinfo",
            "/sys/devices/system/cpu/online",
        ]
        .iter()
        .filter_map(|p| std::fs::read_to_string(p).ok())
        .collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn no_parser_panics_on_any_text(text in "\\PC{0,200}") {
            parse_everything(&text);
        }

        #[test]
        fn no_parser_panics_on_a_real_file_damaged(
            seed in any::<prop::sample::Index>(),
            edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>(), 0u8..3), 1..8),
        ) {
            let seeds = seeds();
            let mut bytes = seeds[seed.index(seeds.len())].clone().into_bytes();
            for (at, byte, kind) in edits {
                let i = at.index(bytes.len() + 1);
                match kind {
                    0 => bytes.insert(i, byte),
                    1 if i < bytes.len() => { bytes.remove(i); }
                    _ if i < bytes.len() => bytes[i] = byte,
                    _ => {}
                }
            }
            parse_everything(&String::from_utf8_lossy(&bytes));
        }
    }

    #[test]
    fn bad_watches_are_refused_in_words() {
        let err = |watch: Watch| Sensor::open(&watch).err().expect("refused").to_string();
        assert!(err(Watch::Pid(0)).contains("no process has pid 0"));
        assert!(err(Watch::Pid(u32::MAX)).contains("is it running"));
        let thread = std::thread::spawn(|| {
            // SAFETY: gettid has no preconditions.
            let tid = unsafe { libc::gettid() } as u32;
            Sensor::open(&Watch::Pid(tid))
                .err()
                .expect("refused")
                .to_string()
        });
        let words = thread.join().unwrap();
        let me = std::process::id();
        assert!(
            words.contains(&format!(
                "a thread of process {me}, not a process: give --pid {me}"
            )),
            "{words}"
        );
        assert!(err(Watch::Process(String::new())).contains("empty"));
        let long = err(Watch::Process("gunicorn: worker [app]".into()));
        assert!(long.contains("try \"gunicorn: worke\""), "{long}");
        assert!(err(Watch::Process("/usr/sbin/nginx".into())).contains("not its path"));
        assert!(err(Watch::Process("no-such-prog-x".into())).contains("no running process"));
        assert!(err(Watch::Container("web".into())).contains("docker ps --no-trunc"));
        let cg = err(Watch::Cgroup("/proc".into()));
        assert!(cg.contains("cgroup"), "{cg}");
    }

    #[test]
    fn monitor_process_silently_watched_every_process_of_its_name() {
        // A name of our own: a copy of sleep, so no other process on the host shares it.
        let name = format!("stsl{}", std::process::id() % 100_000);
        let bin = std::env::temp_dir().join(&name);
        std::fs::copy("/bin/sleep", &bin).unwrap();
        let spawn = || std::process::Command::new(&bin).arg("30").spawn().unwrap();
        let mut children: Vec<_> = (0..2).map(|_| spawn()).collect();
        // /proc/PID/comm is the new name once exec is done.
        let named = |n: usize| {
            for _ in 0..200 {
                if Selector::Name(name.clone()).pids().map_or(0, |p| p.len()) >= n {
                    return;
                }
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
        };
        named(2);
        let watching = Sensor::open(&Watch::Process(name.clone()))
            .unwrap()
            .info(None)
            .watching;
        for c in &children {
            assert!(watching.contains(&c.id().to_string()), "{watching}");
        }
        assert!(watching.contains("2 pids: "), "{watching}");
        children.extend((0..MAX_NAMED - 1).map(|_| spawn()));
        named(MAX_NAMED + 1);
        let refused = Sensor::open(&Watch::Process(name.clone()))
            .err()
            .map(|e| e.to_string());
        // Told that many are meant, it watches them all.
        let told = Sensor::open_allowing(&Watch::Process(name.clone()), MAX_NAMED + 1)
            .map(|p| p.info(None).watching);
        for mut c in children {
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = std::fs::remove_file(&bin);
        let refused = refused.expect("refused");
        let told = told.unwrap();
        assert!(
            told.contains(&format!("{} pids: ", MAX_NAMED + 1)),
            "{told}"
        );
        assert!(
            refused.starts_with(&format!(
                "{} running processes are named {name:?}, more than the 64",
                MAX_NAMED + 1
            )),
            "{refused}"
        );
    }

    #[test]
    fn a_process_of_our_own_is_sampled() {
        let mut sensor = Sensor::open(&Watch::Pid(std::process::id())).unwrap();
        let info = sensor.info(None);
        assert!(
            info.watching
                .starts_with(&format!("pid {} (", std::process::id())),
            "{}",
            info.watching
        );
        assert!(info.cores.usable() >= 1.0);
        let first = sensor.sample().unwrap();
        let mut x = 0u64;
        let spin = Instant::now();
        while spin.elapsed() < std::time::Duration::from_millis(150) {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(1));
        }
        let second = sensor.sample().unwrap();
        let (a, b) = (first.target.unwrap(), second.target.unwrap());
        assert!(b.cpu_ns() > a.cpu_ns(), "{a:?} {b:?}");
        assert!(a.busiest_thread_pct.is_none() && b.busiest_thread_pct.is_some());
        assert!(b.rss_bytes > 0 && b.open_fds >= 3 && b.threads >= 1);
        assert!(second.host.cpu.total_ns() > first.host.cpu.total_ns());
        assert!(second.host.busiest_core_pct.is_some());
        assert!(second.net.iter().any(|i| i.name == "lo"));
        assert_eq!(second.net_scope, NetScope::Host);
        assert!(second.monitor_cpu_ns >= first.monitor_cpu_ns);
    }
}
