//! The host: CPU time per state and per core and the run queue (/proc/stat), memory (/proc/meminfo), the
//! clock tick, the online cores, and the machine id a monitor and a load agent compare.
use std::path::Path;

use crate::CpuStates;

use super::SensorError;
use super::procfs::{self, ParseError, number};

/// What /proc/stat says, ticks already converted to ns.
#[derive(Debug, Clone, PartialEq)]
pub struct Stat {
    pub cpu: CpuStates,
    pub cores: Vec<CpuStates>,
    pub procs_running: u32,
}

/// /proc/stat: the `cpu` line, the `cpuN` lines and `procs_running`; `ns_per_tick` is 10⁹ / USER_HZ.
pub fn parse_stat(text: &str, ns_per_tick: u64) -> Result<Stat, ParseError> {
    let mut cpu = None;
    let mut cores = Vec::new();
    let mut procs_running = None;
    for (i, line) in text.lines().enumerate() {
        let mut fields = line.split_whitespace();
        let Some(key) = fields.next() else { continue };
        if key == "cpu" {
            cpu = Some(states(fields, i + 1, ns_per_tick)?);
        } else if let Some(n) = key.strip_prefix("cpu") {
            // Cores offline have no line: the index is kept by the order, which is the kernel's.
            let _: u32 = number(n, i + 1, "a core's number")?;
            cores.push(states(fields, i + 1, ns_per_tick)?);
        } else if key == "procs_running" {
            let value = fields
                .next()
                .ok_or_else(|| ParseError::new(i + 1, "procs_running has no value"))?;
            procs_running = Some(number(value, i + 1, "procs_running")?);
        }
    }
    Ok(Stat {
        cpu: cpu.ok_or_else(|| ParseError::new(1, "no `cpu` line"))?,
        cores,
        procs_running: procs_running.ok_or_else(|| ParseError::new(1, "no procs_running line"))?,
    })
}

/// One cpu line's states: user nice system idle iowait irq softirq steal (guest time is inside user
/// and nice; kernels before 2.6.11 have fewer columns, and count as zero there).
fn states<'a>(
    fields: impl Iterator<Item = &'a str>,
    line: usize,
    ns_per_tick: u64,
) -> Result<CpuStates, ParseError> {
    let mut ticks = [0u64; 8];
    let mut n = 0;
    for (slot, field) in ticks.iter_mut().zip(fields) {
        *slot = number(field, line, "a CPU time")?;
        n += 1;
    }
    if n < 4 {
        return Err(ParseError::new(
            line,
            format!("{n} CPU states, expected at least 4"),
        ));
    }
    let ns = |t: u64| t.saturating_mul(ns_per_tick);
    Ok(CpuStates {
        user_ns: ns(ticks[0]),
        nice_ns: ns(ticks[1]),
        system_ns: ns(ticks[2]),
        idle_ns: ns(ticks[3]),
        iowait_ns: ns(ticks[4]),
        irq_ns: ns(ticks[5]),
        softirq_ns: ns(ticks[6]),
        steal_ns: ns(ticks[7]),
    })
}

/// /proc/meminfo's MemTotal and MemAvailable, in bytes.
pub fn parse_meminfo(text: &str) -> Result<(u64, u64), ParseError> {
    let [total, available] = procfs::colon_fields(text, ["MemTotal", "MemAvailable"])?;
    let missing =
        |key| ParseError::new(1, format!("no {key} line (MemAvailable needs Linux 3.14)"));
    let kib = |v: u64| v.saturating_mul(1024);
    Ok((
        kib(total.ok_or_else(|| missing("MemTotal"))?),
        kib(available.ok_or_else(|| missing("MemAvailable"))?),
    ))
}

/// The CPU list format of /sys (`0-3,8,10-11`): how many cores it names.
pub fn parse_cpu_list(text: &str) -> Result<u32, ParseError> {
    let mut count = 0u32;
    for range in text.trim().split(',').filter(|r| !r.is_empty()) {
        let (lo, hi) = range.split_once('-').unwrap_or((range, range));
        let lo: u32 = number(lo, 1, "a core")?;
        let hi: u32 = number(hi, 1, "a core")?;
        if hi < lo {
            return Err(ParseError::new(
                1,
                format!("the range {range} runs backwards"),
            ));
        }
        count = count.saturating_add((hi - lo).saturating_add(1));
    }
    Ok(count)
}

/// The online cores (/sys/devices/system/cpu/online), or the scheduler's count when it is unreadable.
pub fn online_cores() -> Result<u32, SensorError> {
    let path = Path::new("/sys/devices/system/cpu/online");
    match std::fs::read_to_string(path) {
        Ok(text) => procfs::parse(path, &text, parse_cpu_list),
        // SAFETY: sysconf only reads a configuration value.
        Err(_) => Ok(unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) }.max(1) as u32),
    }
}

/// ns per clock tick of /proc's CPU times (USER_HZ, 100 on every common kernel).
pub fn ns_per_tick() -> u64 {
    // SAFETY: sysconf only reads a configuration value.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    1_000_000_000 / u64::try_from(hz).ok().filter(|hz| *hz > 0).unwrap_or(100)
}

/// Bytes per page of /proc's RSS counts.
pub fn page_size() -> u64 {
    // SAFETY: sysconf only reads a configuration value.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    u64::try_from(size).ok().filter(|s| *s > 0).unwrap_or(4096)
}

/// The running kernel's id, hashed: in `system` beside the machine's other facts, since a load agent's
/// hello reports it too.
pub use control::system::machine_id;

#[cfg(test)]
mod tests {
    use super::*;

    // Captured from a 2-core Linux 6.18 guest.
    const STAT: &str = "cpu  1013 7 2213 362110 104 0 73 11 0 0
cpu0 505 3 1100 181100 50 0 40 6 0 0
cpu1 508 4 1113 181010 54 0 33 5 0 0
intr 2233445 0 9 0 0
ctxt 4455667
btime 1764590000
processes 12345
procs_running 3
procs_blocked 0
softirq 556677 1 2 3 4 5 6 7 8 9 10
";

    #[test]
    fn stat_states_are_ns() {
        let stat = parse_stat(STAT, 10_000_000).unwrap();
        assert_eq!(stat.cpu.user_ns, 10_130_000_000);
        assert_eq!(stat.cpu.softirq_ns, 730_000_000);
        assert_eq!(stat.cpu.steal_ns, 110_000_000);
        assert_eq!(stat.cores.len(), 2);
        assert_eq!(stat.cores[1].idle_ns, 1_810_100_000_000);
        assert_eq!(stat.procs_running, 3);
    }

    #[test]
    fn stat_errors_name_the_line() {
        let err = parse_stat("cpu 1 2 3 4\ncpu0 1 x 3 4\nprocs_running 1\n", 1).unwrap_err();
        assert_eq!(err.line, 2, "{err}");
        let err = parse_stat("cpu 1 2\nprocs_running 1\n", 1).unwrap_err();
        assert_eq!(err.line, 1);
        assert!(
            parse_stat("cpu 1 2 3 4\n", 1)
                .unwrap_err()
                .what
                .contains("procs_running")
        );
        assert!(parse_stat("cpu 1 2 3 4\ncpuX 1 2 3 4\nprocs_running 1\n", 1).is_err());
    }

    #[test]
    fn meminfo_in_bytes() {
        let text =
            "MemTotal:        4028440 kB\nMemFree:          123 kB\nMemAvailable:    3000000 kB\n";
        assert_eq!(
            parse_meminfo(text).unwrap(),
            (4028440 * 1024, 3000000 * 1024)
        );
        let err = parse_meminfo("MemTotal: 1 kB\n").unwrap_err();
        assert!(err.what.contains("MemAvailable"), "{err}");
        assert_eq!(
            parse_meminfo("MemTotal: x kB\nMemAvailable: 1 kB")
                .unwrap_err()
                .line,
            1
        );
    }

    #[test]
    fn cpu_lists_count_cores() {
        assert_eq!(parse_cpu_list("0-1\n").unwrap(), 2);
        assert_eq!(parse_cpu_list("0-3,8,10-11").unwrap(), 7);
        assert_eq!(parse_cpu_list("\n").unwrap(), 0);
        assert!(parse_cpu_list("3-1").is_err());
        assert_eq!(parse_cpu_list("0-4294967295").unwrap(), u32::MAX);
        assert!(parse_cpu_list("a").is_err());
    }

    #[test]
    fn the_machine_is_one_machine() {
        assert_eq!(machine_id(), machine_id());
        assert_eq!(machine_id().len(), 16);
        assert!(online_cores().unwrap() >= 1);
    }
}
