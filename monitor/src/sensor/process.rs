//! The watched processes: which they are this second (a pid and its descendants, every process of a
//! name, or a cgroup's), and what they use (/proc/PID/stat, status, fd, task/*). The set is re-read
//! every sample, since workers come and go; a process or thread that exits mid-sample is skipped.
//!
//! CPU time and context switches are kept monotonic across that churn by a `Tally`: each sample adds
//! what every process (thread) used since the previous one, all of it for one new since then.
use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::SensorError;
use super::cgroup;
use super::procfs::{self, ParseError, number};

/// How the set of processes is found.
#[derive(Debug, Clone)]
pub enum Selector {
    /// The process (its pid and start time: a pid reused by another process after it exits is not
    /// it) and its descendants.
    Tree(u32, u64),
    /// Every process of this `comm`.
    Name(String),
    /// Every process of the cgroup and those below it.
    Cgroup(PathBuf),
}

/// Names are what /proc/PID/comm holds: at most 15 bytes (the kernel's TASK_COMM_LEN less its NUL).
pub const MAX_NAME: usize = 15;

impl Selector {
    /// The current pids, sorted.
    pub fn pids(&self) -> Result<Vec<u32>, SensorError> {
        match self {
            Selector::Tree(root, start) => tree(*root, *start),
            Selector::Name(name) => named(name),
            Selector::Cgroup(dir) => cgroup::pids(dir),
        }
    }
}

/// Every numeric entry of /proc.
fn all_pids() -> Result<Vec<u32>, SensorError> {
    let dir = Path::new("/proc");
    let entries = std::fs::read_dir(dir).map_err(|source| SensorError::Read {
        path: dir.to_path_buf(),
        source,
    })?;
    Ok(entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect())
}

fn named(name: &str) -> Result<Vec<u32>, SensorError> {
    let mut pids = Vec::new();
    for pid in all_pids()? {
        let path = PathBuf::from(format!("/proc/{pid}/comm"));
        if procfs::read_alive(&path)?.is_some_and(|comm| comm.trim_end_matches('\n') == name) {
            pids.push(pid);
        }
    }
    pids.sort_unstable();
    Ok(pids)
}

/// The root and every process whose parent chain reaches it. Without CONFIG_PROC_CHILDREN the only
/// way is every process's parent, from its stat.
fn tree(root: u32, start: u64) -> Result<Vec<u32>, SensorError> {
    let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
    let mut root_alive = false;
    for pid in all_pids()? {
        let path = PathBuf::from(format!("/proc/{pid}/stat"));
        let Some(text) = procfs::read_alive(&path)? else {
            continue;
        };
        let stat = procfs::parse(&path, &text, parse_stat)?;
        root_alive |= pid == root && stat.start == start;
        children.entry(stat.ppid).or_default().push(pid);
    }
    if !root_alive {
        return Ok(Vec::new());
    }
    let mut pids = vec![root];
    let mut i = 0;
    while i < pids.len() {
        pids.extend(children.get(&pids[i]).into_iter().flatten().copied());
        i += 1;
    }
    pids.sort_unstable();
    Ok(pids)
}

/// What /proc/PID/stat (or task/TID/stat) says that the sensor uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stat {
    pub comm: String,
    pub ppid: u32,
    /// Clock ticks in user and system mode (the whole process's, dead threads included).
    pub utime: u64,
    pub stime: u64,
    pub threads: u32,
    /// Ticks after boot when it started: with the pid, tells a reused pid from the old process.
    pub start: u64,
    pub rss_pages: u64,
}

/// /proc/PID/stat: `pid (comm) state ppid …`; the comm may hold spaces and parentheses, so the fields
/// are counted from the last `)`.
pub fn parse_stat(text: &str) -> Result<Stat, ParseError> {
    let open = text
        .find('(')
        .ok_or_else(|| ParseError::new(1, "no `(` before the name"))?;
    let close = text.rfind(')').filter(|c| *c > open);
    let close = close.ok_or_else(|| ParseError::new(1, "no `)` after the name"))?;
    let fields: Vec<&str> = text[close + 1..].split_whitespace().collect();
    // fields[0] is stat's field 3 (state); field n is fields[n - 3].
    let field = |n: usize, what: &str| -> Result<u64, ParseError> {
        let value = fields.get(n - 3).ok_or_else(|| {
            ParseError::new(
                1,
                format!("{} fields, no {what} (field {n})", fields.len() + 2),
            )
        })?;
        number(value, 1, what)
    };
    Ok(Stat {
        comm: text[open + 1..close].to_string(),
        ppid: u32::try_from(field(4, "ppid")?)
            .map_err(|_| ParseError::new(1, "ppid out of range"))?,
        utime: field(14, "utime")?,
        stime: field(15, "stime")?,
        threads: u32::try_from(field(20, "num_threads")?).unwrap_or(u32::MAX),
        start: field(22, "starttime")?,
        rss_pages: field(24, "rss")?,
    })
}

/// /proc/PID/status's context switch counts (voluntary, involuntary): the task's own, so a process's
/// are the sum over its threads.
pub fn parse_switches(text: &str) -> Result<(u64, u64), ParseError> {
    match procfs::colon_fields(
        text,
        ["voluntary_ctxt_switches", "nonvoluntary_ctxt_switches"],
    )? {
        [Some(v), Some(n)] => Ok((v, n)),
        _ => Err(ParseError::new(
            1,
            "no voluntary_ctxt_switches / nonvoluntary_ctxt_switches",
        )),
    }
}

/// Cumulative counters of a changing set of processes or threads, kept monotonic: each update adds
/// every member's growth since the previous one (all of its value for a member new since then), and
/// forgets members that are gone. A pid reused by another process (another start time) is new.
#[derive(Debug)]
pub struct Tally<const N: usize> {
    seen: HashMap<u32, (u64, [u64; N])>,
    pub total: [u64; N],
}

impl<const N: usize> Default for Tally<N> {
    fn default() -> Self {
        Tally {
            seen: HashMap::new(),
            total: [0; N],
        }
    }
}

impl<const N: usize> Tally<N> {
    /// One sample's members: (id, start time, values).
    pub fn update(&mut self, members: impl IntoIterator<Item = (u32, u64, [u64; N])>) {
        let mut seen = HashMap::with_capacity(self.seen.len());
        for (id, start, values) in members {
            let before = match self.seen.get(&id) {
                Some((s, before)) if *s == start => *before,
                _ => [0; N],
            };
            for k in 0..N {
                self.total[k] += values[k].saturating_sub(before[k]);
            }
            seen.insert(id, (start, values));
        }
        self.seen = seen;
    }
}

/// The process `pid` is, for `--pid`: its start time, or why it cannot be watched (no such
/// process; a thread's id, whose process is the one to give).
pub fn root(pid: u32) -> Result<u64, SensorError> {
    let base = PathBuf::from(format!("/proc/{pid}"));
    let path = base.join("status");
    let status = match procfs::read_alive(&path)? {
        Some(text) if pid != 0 => text,
        _ => return Err(SensorError::NoSuchPid(pid)),
    };
    let [tgid] = procfs::parse(&path, &status, |t| procfs::colon_fields(t, ["Tgid"]))?;
    if let Some(process) = tgid.filter(|tgid| *tgid != u64::from(pid)) {
        return Err(SensorError::ThreadNotProcess { tid: pid, process });
    }
    let path = base.join("stat");
    let text = procfs::read_alive(&path)?.ok_or(SensorError::NoSuchPid(pid))?;
    Ok(procfs::parse(&path, &text, parse_stat)?.start)
}

/// One thread as read this sample.
#[derive(Debug, Clone)]
pub struct Thread {
    pub tid: u32,
    pub start: u64,
    pub comm: String,
    pub ticks: u64,
    pub switches: (u64, u64),
}

/// One process as read this sample, `None` from `read` when it exited meanwhile.
#[derive(Debug, Clone)]
pub struct Process {
    pub pid: u32,
    pub stat: Stat,
    /// Open fds, or `None` when the fd table cannot be read (another user's process, no privilege).
    pub fds: Option<u64>,
    pub threads: Vec<Thread>,
}

impl Process {
    pub fn read(pid: u32) -> Result<Option<Process>, SensorError> {
        let base = PathBuf::from(format!("/proc/{pid}"));
        let path = base.join("stat");
        let Some(text) = procfs::read_alive(&path)? else {
            return Ok(None);
        };
        let stat = procfs::parse(&path, &text, parse_stat)?;
        let fds = std::fs::read_dir(base.join("fd"))
            .ok()
            .map(|entries| entries.count() as u64);
        let Ok(tasks) = std::fs::read_dir(base.join("task")) else {
            return Ok(None);
        };
        let mut threads = Vec::with_capacity(stat.threads as usize);
        for tid in tasks
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        {
            if let Some(thread) = read_thread(&base, tid)? {
                threads.push(thread);
            }
        }
        Ok(Some(Process {
            pid,
            stat,
            fds,
            threads,
        }))
    }
}

fn read_thread(base: &Path, tid: u32) -> Result<Option<Thread>, SensorError> {
    let dir = base.join("task").join(tid.to_string());
    let path = dir.join("stat");
    let Some(text) = procfs::read_alive(&path)? else {
        return Ok(None);
    };
    let stat = procfs::parse(&path, &text, parse_stat)?;
    let path = dir.join("status");
    let Some(text) = procfs::read_alive(&path)? else {
        return Ok(None);
    };
    let switches = procfs::parse(&path, &text, parse_switches)?;
    Ok(Some(Thread {
        tid,
        start: stat.start,
        comm: stat.comm,
        ticks: stat.utime + stat.stime,
        switches,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    // Captured from nginx's worker on Linux 6.18 (52 fields).
    const STAT: &str = "4242 (nginx) S 4241 4241 4241 0 -1 4194624 160 0 0 0 25 13 0 0 20 0 1 0 1234567 \
11931648 932 18446744073709551615 1 1 0 0 0 0 0 16781312 402738688 0 0 0 17 1 0 0 0 0 0 0 0 0 0 0 0 0 0\n";

    #[test]
    fn stat_fields() {
        let s = parse_stat(STAT).unwrap();
        assert_eq!(s.comm, "nginx");
        assert_eq!(
            (s.ppid, s.utime, s.stime, s.threads, s.start, s.rss_pages),
            (4241, 25, 13, 1, 1234567, 932)
        );
    }

    #[test]
    fn a_name_with_spaces_and_parentheses() {
        let text = STAT.replace("(nginx)", "(a) b (c)");
        assert_eq!(parse_stat(&text).unwrap().comm, "a) b (c");
    }

    #[test]
    fn stat_errors_say_what_is_missing() {
        let err = parse_stat("1 (x) S 0 1 2").unwrap_err();
        assert!(err.what.contains("utime"), "{err}");
        assert!(parse_stat("1 x S").unwrap_err().what.contains("("));
        assert!(
            parse_stat(&STAT.replace(" 25 13 ", " 25 x "))
                .unwrap_err()
                .what
                .contains("stime")
        );
    }

    #[test]
    fn switches_from_status() {
        let text = "Name:\tnginx\nvoluntary_ctxt_switches:\t120\nnonvoluntary_ctxt_switches:\t7\n";
        assert_eq!(parse_switches(text).unwrap(), (120, 7));
        assert!(parse_switches("Name:\tx\n").is_err());
        assert_eq!(
            parse_switches("voluntary_ctxt_switches:\tx\n")
                .unwrap_err()
                .line,
            1
        );
    }

    #[test]
    fn a_tally_never_goes_back() {
        let mut tally = Tally::<1>::default();
        tally.update([(1, 10, [100]), (2, 10, [50])]);
        assert_eq!(tally.total, [150]);
        // 2 exited (its last 10 ticks are lost, not taken back); 3 is new: all of its time counts.
        tally.update([(1, 10, [130]), (3, 20, [5])]);
        assert_eq!(tally.total, [185]);
        // Pid 1 reused by a new process: its time is new, not a negative delta.
        tally.update([(1, 99, [4]), (3, 20, [5])]);
        assert_eq!(tally.total, [189]);
    }

    #[test]
    fn this_process_reads_itself() {
        let me = Process::read(std::process::id()).unwrap().unwrap();
        assert!(me.stat.rss_pages > 0);
        assert!(me.fds.unwrap() >= 3);
        assert!(!me.threads.is_empty());
        assert_eq!(Process::read(u32::MAX).unwrap().map(|p| p.pid), None);
        assert!(
            Selector::Tree(std::process::id(), me.stat.start)
                .pids()
                .unwrap()
                .contains(&std::process::id())
        );
        assert_eq!(
            Selector::Tree(u32::MAX, 0).pids().unwrap(),
            Vec::<u32>::new()
        );
        // Our pid with another start time is another process, one that is not running.
        let reused = Selector::Tree(std::process::id(), me.stat.start + 1);
        assert_eq!(reused.pids().unwrap(), Vec::<u32>::new());
    }
}
