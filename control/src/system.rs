//! Facts about the machine the agent runs on (cores, fd limit, port range, the kernel's hashed id) and
//! the thread CPU clock.

/// Raises RLIMIT_NOFILE to its hard limit so connection counts are bounded by the machine, not a default
/// of 1024. Returns the soft limit now in force.
pub fn raise_fd_limit() -> u64 {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit only read and write the struct we pass.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            return 0;
        }
        if lim.rlim_cur < lim.rlim_max {
            let want = libc::rlimit {
                rlim_cur: lim.rlim_max,
                rlim_max: lim.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &want) == 0 {
                lim.rlim_cur = lim.rlim_max;
            }
        }
    }
    lim.rlim_cur
}

/// The ephemeral port range connections draw local ports from.
pub fn port_range() -> (u32, u32) {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| {
            let mut it = s.split_whitespace().map(|v| v.parse::<u32>().ok());
            Some((it.next()??, it.next()??))
        })
        .unwrap_or((32768, 60999))
}

/// net.ipv4.tcp_tw_reuse (0 off, 1 on, 2 loopback only; it covers IPv6 too), or `None` if unreadable.
pub fn tcp_tw_reuse() -> Option<u32> {
    std::fs::read_to_string("/proc/sys/net/ipv4/tcp_tw_reuse")
        .ok()
        .and_then(|s| s.trim().parse().ok())
}

pub fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".to_string())
}

/// CPU time (user + system) the calling thread has used, in nanoseconds.
pub fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes only into the timespec we pass.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return 0;
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// A stable id of the running kernel: the boot id, hashed so no host identifier leaves the machine.
/// Containers share their host's boot id, so a load agent in a container beside the target gets the
/// same id as a monitor of it, which is what "generator and target share this host" asks.
pub fn machine_id() -> String {
    let raw = std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .or_else(|_| std::fs::read_to_string("/etc/machine-id"))
        .unwrap_or_default();
    // FNV-1a: a hash every build of stampede computes alike, unlike std's hasher.
    let hash = raw.trim().bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    format!("{hash:016x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thread_cpu_clock_advances_with_work() {
        let before = thread_cpu_ns();
        let mut x = 0u64;
        for i in 0..5_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        assert!(thread_cpu_ns() > before);
    }

    #[test]
    fn limits_are_sane() {
        assert!(raise_fd_limit() >= 256);
        let (lo, hi) = port_range();
        assert!(lo < hi);
        assert!(tcp_tw_reuse().is_none_or(|v| v <= 2));
    }
}
