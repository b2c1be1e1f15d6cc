//! One reading of the server monitor's sensor, for a person to look at.
//!
//! ```sh
//! cargo run -p monitor --example sensor -- --process nginx
//! cargo run -p monitor --example sensor -- --pid 1234 --json
//! cargo run -p monitor --example sensor -- --cgroup system.slice/nginx.service
//! cargo run -p monitor --example sensor -- --container 3f2a
//! ```
//!
//! It opens the sensor, samples `--samples N` times (2 by default) one second apart and prints what
//! the last second says (the rates a step row would show) and what the sensor itself cost per sample,
//! then, with `--json`, the last two samples as they travel. Measure its cost with a release build:
//! `cargo run --release -p monitor --example sensor -- --process nginx --samples 60`.
use std::process::ExitCode;
use std::time::Duration;

use monitor::sensor::Sensor;
use monitor::{Sample, Watch};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let json = args.iter().any(|a| a == "--json");
    let mut rest: Vec<&str> = args
        .iter()
        .map(String::as_str)
        .filter(|a| *a != "--json")
        .collect();
    let mut count = 2u32;
    if let Some(at) = rest.iter().position(|a| *a == "--samples") {
        match rest
            .get(at + 1)
            .and_then(|n| n.parse().ok())
            .filter(|n| *n >= 2)
        {
            Some(n) => count = n,
            None => return usage("--samples takes a count of at least 2"),
        }
        rest.drain(at..at + 2);
    }
    let watch = match rest[..] {
        ["--pid", pid] => match pid.parse() {
            Ok(pid) => Watch::Pid(pid),
            Err(_) => return usage(&format!("--pid takes a process id, not {pid:?}")),
        },
        ["--process", name] => Watch::Process(name.to_string()),
        ["--cgroup", path] => Watch::Cgroup(path.into()),
        ["--container", id] => Watch::Container(id.to_string()),
        _ => return usage("give one of --pid N, --process NAME, --cgroup PATH, --container ID"),
    };
    let mut sensor = match Sensor::open(&watch) {
        Ok(sensor) => sensor,
        Err(err) => {
            eprintln!("sensor: {err}");
            return ExitCode::from(2);
        }
    };
    for warning in sensor.warnings() {
        eprintln!("sensor: warning: {warning}");
    }
    let info = sensor.info(None);
    let mut samples = Vec::with_capacity(count as usize);
    for i in 0..count {
        if i > 0 {
            std::thread::sleep(Duration::from_secs(1));
        }
        match sensor.sample() {
            Ok(sample) => samples.push(sample),
            Err(err) => {
                eprintln!("sensor: {err}");
                return ExitCode::from(1);
            }
        }
    }
    let (first, second) = (&samples[samples.len() - 2], &samples[samples.len() - 1]);
    println!(
        "{} on {} (machine {}), cores {:?} → {:.2} usable",
        info.watching,
        info.hostname,
        info.machine_id,
        info.cores,
        info.cores.usable()
    );
    print!("{}", summary(first, second));
    let own_ms = second.monitor_cpu_ns as f64 / 1e6 / f64::from(count);
    println!(
        "the sensor's own CPU: {own_ms:.3} ms per sample over {count} samples ({:.3} % of a core at 1 s)",
        own_ms / 10.0
    );
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&info).expect("plain data")
        );
        println!(
            "{}",
            serde_json::to_string_pretty(&[first, second]).expect("plain data")
        );
    }
    ExitCode::SUCCESS
}

fn usage(why: &str) -> ExitCode {
    eprintln!("sensor: {why} [--samples N] [--json]");
    ExitCode::from(2)
}

/// What happened between two samples, in the units a step row uses.
fn summary(a: &Sample, b: &Sample) -> String {
    let secs = (b.at_unix_ns - a.at_unix_ns) as f64 / 1e9;
    let pct = |ns: u64| 100.0 * ns as f64 / 1e9 / secs;
    let mut out = String::new();
    if let (Some(ta), Some(tb)) = (&a.target, &b.target) {
        out += &format!(
            "target: {} processes, {} threads, {} fds, memory {:.1} MB (rss {:.1} MB)\n",
            tb.processes,
            tb.threads,
            tb.open_fds,
            tb.memory_bytes() as f64 / 1e6,
            tb.rss_bytes as f64 / 1e6
        );
        out += &format!(
            "  cpu {:.1} % of a core (user {:.1}, system {:.1}); busiest thread {:.1} % ({}); switches {}/{} voluntary/involuntary\n",
            pct(tb.cpu_ns().saturating_sub(ta.cpu_ns())),
            pct(tb.cpu_user_ns.saturating_sub(ta.cpu_user_ns)),
            pct(tb.cpu_system_ns.saturating_sub(ta.cpu_system_ns)),
            tb.busiest_thread_pct.unwrap_or(0.0),
            tb.busiest_thread.as_deref().unwrap_or("-"),
            tb.voluntary_switches.saturating_sub(ta.voluntary_switches),
            tb.involuntary_switches
                .saturating_sub(ta.involuntary_switches),
        );
        if let (Some(ca), Some(cb)) = (&ta.cgroup, &tb.cgroup) {
            out += &format!(
                "  cgroup: cpu {:.1} %, throttled {:?} periods, memory.current {:?}, peak {:?}, oom kills {:?}\n",
                pct(cb.usage_ns.saturating_sub(ca.usage_ns)),
                cb.throttled_periods
                    .zip(ca.throttled_periods)
                    .map(|(b, a)| b - a),
                cb.memory_current_bytes,
                cb.memory_peak_bytes,
                cb.oom_kills
            );
        }
    }
    let host = b.host.cpu.since(&a.host.cpu);
    let total = host.total_ns().max(1) as f64;
    out += &format!(
        "host: busy {:.1} %, softirq {:.1} %, steal {:.1} %, iowait {:.1} %, busiest core {:.1} %, run queue {}, available {:.0} MB\n",
        host.busy_pct().unwrap_or(0.0),
        100.0 * host.softirq_ns as f64 / total,
        100.0 * host.steal_ns as f64 / total,
        100.0 * host.iowait_ns as f64 / total,
        b.host.busiest_core_pct.unwrap_or(0.0),
        b.host.run_queue,
        b.host.mem_available_bytes as f64 / 1e6
    );
    for (ia, ib) in a
        .net
        .iter()
        .zip(&b.net)
        .filter(|(ia, ib)| ia.name == ib.name)
    {
        out += &format!(
            "net {:?} {}: rx {} B {} pkts, tx {} B {} pkts\n",
            b.net_scope,
            ib.name,
            ib.rx_bytes - ia.rx_bytes,
            ib.rx_packets - ia.rx_packets,
            ib.tx_bytes - ia.tx_bytes,
            ib.tx_packets - ia.tx_packets
        );
    }
    let (ta, tb) = (&a.tcp, &b.tcp);
    out += &format!(
        "tcp: listen overflows {}, drops {}, syncookies {}, retrans {}, resets {}/{} estab/out, aborts {}, established {}\n",
        tb.listen_overflows - ta.listen_overflows,
        tb.listen_drops - ta.listen_drops,
        tb.syncookies_sent - ta.syncookies_sent,
        tb.retrans_segs - ta.retrans_segs,
        tb.estab_resets - ta.estab_resets,
        tb.out_rsts - ta.out_rsts,
        tb.aborts() - ta.aborts(),
        tb.curr_estab
    );
    out
}
