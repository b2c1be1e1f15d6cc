//! cgroup v2: where it is mounted, a `--cgroup PATH` or `--container ID` resolved to its directory,
//! and its own accounting (cpu.stat, memory.current less inactive file pages, memory.peak, OOM kills,
//! the CPU quota and cpuset that bound how many cores its processes may use).
//!
//! Only cgroup v2 is read. A container is found under the two layouts docker writes there:
//! `system.slice/docker-<id>.scope` (systemd driver) and `docker/<id>` (cgroupfs driver).
use std::path::{Path, PathBuf};

use crate::CgroupSample;

use super::SensorError;
use super::host::parse_cpu_list;
use super::procfs::{self, ParseError, key_values, number};

/// Where cgroup v2 is mounted, from /proc/self/mountinfo (`/sys/fs/cgroup`, or
/// `/sys/fs/cgroup/unified` on a hybrid host).
pub fn mount() -> Result<PathBuf, SensorError> {
    let path = Path::new("/proc/self/mountinfo");
    let text = procfs::read(path)?;
    procfs::parse(path, &text, parse_mountinfo)?.ok_or(SensorError::NoCgroupV2)
}

/// The first cgroup2 mount point in mountinfo's text.
pub fn parse_mountinfo(text: &str) -> Result<Option<PathBuf>, ParseError> {
    for (i, line) in text.lines().enumerate() {
        // `id parent dev root mountpoint options [optional…] - fstype source superoptions`
        let Some((left, right)) = line.split_once(" - ") else {
            return Err(ParseError::new(
                i + 1,
                "no ` - ` before the filesystem type",
            ));
        };
        if right.split_whitespace().next() != Some("cgroup2") {
            continue;
        }
        let point = left
            .split_whitespace()
            .nth(4)
            .ok_or_else(|| ParseError::new(i + 1, "no mount point"))?;
        return Ok(Some(PathBuf::from(unescape(point))));
    }
    Ok(None)
}

/// mountinfo writes space, tab, newline and backslash as 3-digit octal escapes.
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        // Three octal digits, at most \377: anything else is not an escape and is kept as it is.
        let octal = bytes
            .get(i + 1..i + 4)
            .filter(|d| d.iter().all(|b| (b'0'..=b'7').contains(b)))
            .map(|d| d.iter().fold(0u16, |v, b| v * 8 + u16::from(b - b'0')))
            .and_then(|v| u8::try_from(v).ok());
        match (bytes[i], octal) {
            (b'\\', Some(byte)) => {
                out.push(byte);
                i += 4;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `--cgroup PATH`: absolute, or relative to the cgroup v2 mount; it must be a cgroup v2 directory.
pub fn resolve(path: &Path, mount: &Path) -> Result<PathBuf, SensorError> {
    let joined = if path.is_absolute() {
        path.to_path_buf()
    } else {
        mount.join(path)
    };
    let not = |why: String| SensorError::NotCgroup {
        path: path.to_path_buf(),
        why,
    };
    let dir = joined
        .canonicalize()
        .map_err(|err| not(format!("{}: {err}", joined.display())))?;
    if !dir.starts_with(mount) {
        return Err(not(format!(
            "it is not under the cgroup v2 mount {} (a cgroup v1 hierarchy is not read)",
            mount.display()
        )));
    }
    if !dir.join("cgroup.procs").is_file() {
        return Err(not(format!("{} has no cgroup.procs", dir.display())));
    }
    Ok(dir)
}

/// `--container ID`: the full id or a prefix naming exactly one container.
pub fn container(id: &str, mount: &Path) -> Result<PathBuf, SensorError> {
    let refuse = |why: String| SensorError::Container {
        id: id.to_string(),
        why,
    };
    if id.is_empty() || id.len() > 64 || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(refuse(
            "a container is named by its id (hex, as `docker ps --no-trunc` shows it) or a prefix of it; \
             names are not resolved"
                .into(),
        ));
    }
    let id = id.to_ascii_lowercase();
    let layouts: [(PathBuf, &str, &str); 2] = [
        (mount.join("system.slice"), "docker-", ".scope"),
        (mount.join("docker"), "", ""),
    ];
    let mut found = Vec::new();
    for (dir, prefix, suffix) in &layouts {
        let Ok(entries) = std::fs::read_dir(dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(full) = name
                .to_str()
                .and_then(|n| n.strip_prefix(prefix))
                .and_then(|n| n.strip_suffix(suffix))
            else {
                continue;
            };
            if full.len() == 64 && full.starts_with(&id) {
                found.push(entry.path());
            }
        }
    }
    match found.len() {
        1 => Ok(found.remove(0)),
        0 => {
            let v1 = Path::new("/sys/fs/cgroup/cpu/docker").is_dir();
            Err(refuse(format!(
                "no cgroup v2 directory for it under {} or {}{}",
                layouts[0].0.display(),
                layouts[1].0.display(),
                if v1 {
                    "; this host's docker uses cgroup v1, which the monitor does not read: \
                     watch its processes with --pid or --process instead"
                } else {
                    ""
                }
            )))
        }
        n => Err(refuse(format!(
            "the prefix names {n} containers: give more of the id"
        ))),
    }
}

/// The cgroup v2 directory a process is in (`0::/path` of /proc/PID/cgroup), if it still exists.
pub fn of_pid(pid: u32, mount: &Path) -> Option<PathBuf> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    let path = text.lines().find_map(|line| line.strip_prefix("0::"))?;
    let dir = mount.join(path.trim_start_matches('/'));
    dir.is_dir().then_some(dir)
}

/// The CPU quota in cores that binds `dir`: the smallest `cpu.max` of it and its ancestors up to the
/// mount (a parent's quota binds its children too).
pub fn quota(dir: &Path, mount: &Path) -> Result<Option<f64>, SensorError> {
    let mut least: Option<f64> = None;
    for ancestor in dir.ancestors().take_while(|a| a.starts_with(mount)) {
        let path = ancestor.join("cpu.max");
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        if let Some(q) = procfs::parse(&path, &text, parse_cpu_max)? {
            least = Some(least.map_or(q, |l| l.min(q)));
        }
    }
    Ok(least)
}

/// cpu.max: `max PERIOD` (no quota) or `QUOTA PERIOD`, both in µs; the quota in cores.
pub fn parse_cpu_max(text: &str) -> Result<Option<f64>, ParseError> {
    let mut fields = text.split_whitespace();
    let (Some(quota), Some(period)) = (fields.next(), fields.next()) else {
        return Err(ParseError::new(1, "expected `QUOTA PERIOD`"));
    };
    if quota == "max" {
        return Ok(None);
    }
    let quota: u64 = number(quota, 1, "the quota")?;
    let period: u64 = number(period, 1, "the period")?;
    if period == 0 {
        return Err(ParseError::new(1, "a period of 0"));
    }
    Ok(Some(quota as f64 / period as f64))
}

/// How many cores `cpuset.cpus.effective` gives the cgroup, when the cpuset controller is on.
pub fn cpuset(dir: &Path) -> Result<Option<u32>, SensorError> {
    let path = dir.join("cpuset.cpus.effective");
    match std::fs::read_to_string(&path) {
        Ok(text) => Ok(Some(procfs::parse(&path, &text, parse_cpu_list)?)),
        Err(_) => Ok(None),
    }
}

/// Every process in the cgroup and the cgroups below it (a service's sub-cgroups are its too).
pub fn pids(dir: &Path) -> Result<Vec<u32>, SensorError> {
    let mut pids = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    let mut watched = true;
    while let Some(dir) = dirs.pop() {
        let path = dir.join("cgroup.procs");
        // A child cgroup removed while we walk is gone, not an error; the watched one itself is.
        let text = if watched {
            Some(procfs::read(&path)?)
        } else {
            procfs::read_alive(&path)?
        };
        watched = false;
        let Some(text) = text else { continue };
        pids.extend(procfs::parse(&path, &text, parse_procs)?);
        if let Ok(entries) = std::fs::read_dir(&dir) {
            dirs.extend(
                entries
                    .flatten()
                    .filter(|e| e.path().is_dir())
                    .map(|e| e.path()),
            );
        }
    }
    pids.sort_unstable();
    Ok(pids)
}

/// cgroup.procs: one pid a line.
pub fn parse_procs(text: &str) -> Result<Vec<u32>, ParseError> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| number(l.trim(), i + 1, "a pid"))
        .collect()
}

/// The cgroup's own accounting. cpu.stat is always there in v2; the memory files only with the
/// memory controller, the throttling fields only with the cpu controller.
pub fn sample(dir: &Path) -> Result<CgroupSample, SensorError> {
    let path = dir.join("cpu.stat");
    let text = procfs::read(&path)?;
    let mut sample = procfs::parse(&path, &text, parse_cpu_stat)?;
    let optional = |name: &str| -> Result<Option<(PathBuf, String)>, SensorError> {
        let path = dir.join(name);
        Ok(std::fs::read_to_string(&path).ok().map(|text| (path, text)))
    };
    if let Some((path, text)) = optional("memory.current")? {
        let current = procfs::parse(&path, &text, |t| {
            number::<u64>(t.trim(), 1, "memory.current")
        })?;
        sample.memory_current_bytes = Some(current);
        if let Some((path, text)) = optional("memory.stat")? {
            let inactive = procfs::parse(&path, &text, |t| field(t, "inactive_file"))?;
            sample.working_set_bytes = Some(current.saturating_sub(inactive.unwrap_or(0)));
        }
    }
    if let Some((path, text)) = optional("memory.peak")? {
        sample.memory_peak_bytes = Some(procfs::parse(&path, &text, |t| {
            number(t.trim(), 1, "memory.peak")
        })?);
    }
    if let Some((path, text)) = optional("memory.events")? {
        sample.oom_kills = procfs::parse(&path, &text, |t| field(t, "oom_kill"))?;
    }
    Ok(sample)
}

/// cpu.stat: usage, user and system (µs, required), and throttling (µs and periods, optional).
pub fn parse_cpu_stat(text: &str) -> Result<CgroupSample, ParseError> {
    let mut sample = CgroupSample::default();
    let mut required = 0;
    for pair in key_values(text) {
        let (key, value) = pair?;
        let us = value.saturating_mul(1000);
        match key {
            "usage_usec" => (sample.usage_ns, required) = (us, required + 1),
            "user_usec" => (sample.user_ns, required) = (us, required + 1),
            "system_usec" => (sample.system_ns, required) = (us, required + 1),
            "nr_periods" => sample.periods = Some(value),
            "nr_throttled" => sample.throttled_periods = Some(value),
            "throttled_usec" => sample.throttled_ns = Some(us),
            _ => {}
        }
    }
    if required < 3 {
        return Err(ParseError::new(
            1,
            "usage_usec, user_usec and system_usec are not all there",
        ));
    }
    Ok(sample)
}

/// One key of a `key value` file, if it is there.
fn field(text: &str, name: &str) -> Result<Option<u64>, ParseError> {
    for pair in key_values(text) {
        let (key, value) = pair?;
        if key == name {
            return Ok(Some(value));
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_finds_cgroup2() {
        let text = "35 24 0:30 / /sys/fs/cgroup/cpu rw,relatime shared:10 - cgroup cgroup rw,cpu
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";
        assert_eq!(
            parse_mountinfo(text).unwrap(),
            Some("/sys/fs/cgroup/unified".into())
        );
        let escaped = "41 31 0:38 / /mnt/a\\040b rw - cgroup2 none rw\n";
        assert_eq!(parse_mountinfo(escaped).unwrap(), Some("/mnt/a b".into()));
        // Not an escape: a byte's value is at most \\377.
        let big = "41 31 0:38 / /mnt/a\\777 rw - cgroup2 none rw\n";
        assert_eq!(parse_mountinfo(big).unwrap(), Some("/mnt/a\\777".into()));
        assert_eq!(
            parse_mountinfo("1 2 3 / /proc rw - proc proc rw\n").unwrap(),
            None
        );
        assert_eq!(parse_mountinfo("garbage\n").unwrap_err().line, 1);
    }

    #[test]
    fn cpu_stat_with_and_without_the_cpu_controller() {
        let basic = "usage_usec 1500\nuser_usec 1000\nsystem_usec 500\nnr_periods 0\n";
        let s = parse_cpu_stat(basic).unwrap();
        assert_eq!(
            (s.usage_ns, s.user_ns, s.system_ns),
            (1_500_000, 1_000_000, 500_000)
        );
        assert_eq!((s.periods, s.throttled_ns), (Some(0), None));
        let throttled = format!("{basic}nr_throttled 3\nthrottled_usec 250\nnr_bursts 0\n");
        let s = parse_cpu_stat(&throttled).unwrap();
        assert_eq!(
            (s.throttled_periods, s.throttled_ns),
            (Some(3), Some(250_000))
        );
        assert!(parse_cpu_stat("usage_usec 1\n").is_err());
        assert_eq!(
            parse_cpu_stat("usage_usec 1\nuser_usec -\n")
                .unwrap_err()
                .line,
            2
        );
    }

    #[test]
    fn cpu_max_in_cores() {
        assert_eq!(parse_cpu_max("max 100000\n").unwrap(), None);
        assert_eq!(parse_cpu_max("150000 100000\n").unwrap(), Some(1.5));
        assert!(parse_cpu_max("1 0").is_err());
        assert!(parse_cpu_max("").is_err());
    }

    #[test]
    fn container_ids_are_checked_before_any_lookup() {
        let mount = Path::new("/nonexistent");
        for bad in ["", "web", "abc/../x", &"a".repeat(65)] {
            let err = container(bad, mount).unwrap_err().to_string();
            assert!(err.contains("docker ps --no-trunc"), "{bad}: {err}");
        }
        let err = container("abc123", mount).unwrap_err().to_string();
        assert!(err.contains("no cgroup v2 directory"), "{err}");
    }

    #[test]
    fn a_container_prefix_is_resolved_uniquely_or_refused() {
        let mount = std::env::temp_dir().join(format!("stampede-cg-{}", std::process::id()));
        let scope = mount.join("system.slice");
        std::fs::create_dir_all(&scope).unwrap();
        let a = format!("abcd{}", "0".repeat(60));
        let b = format!("abce{}", "1".repeat(60));
        for id in [&a, &b] {
            std::fs::create_dir_all(scope.join(format!("docker-{id}.scope"))).unwrap();
        }
        std::fs::create_dir_all(mount.join("docker").join(format!("ff{}", "2".repeat(62))))
            .unwrap();
        assert_eq!(
            container("abcd", &mount).unwrap(),
            scope.join(format!("docker-{a}.scope"))
        );
        assert_eq!(
            container("FF", &mount).unwrap(),
            mount.join("docker").join(format!("ff{}", "2".repeat(62)))
        );
        let err = container("abc", &mount).unwrap_err().to_string();
        assert!(err.contains("names 2 containers"), "{err}");
        std::fs::remove_dir_all(&mount).unwrap();
    }

    #[test]
    fn a_cgroup_path_must_be_a_v2_directory() {
        let mount = std::env::temp_dir();
        let err = resolve(Path::new("/proc"), &mount).unwrap_err().to_string();
        assert!(err.contains("not under the cgroup v2 mount"), "{err}");
        let err = resolve(Path::new("no-such-cgroup"), &mount)
            .unwrap_err()
            .to_string();
        assert!(err.contains("no-such-cgroup"), "{err}");
        let err = resolve(&mount, &mount).unwrap_err().to_string();
        assert!(err.contains("no cgroup.procs"), "{err}");
    }

    #[test]
    fn procs_one_a_line() {
        assert_eq!(parse_procs("1\n22\n\n").unwrap(), vec![1, 22]);
        assert_eq!(parse_procs("1\nx\n").unwrap_err().line, 2);
    }
}
