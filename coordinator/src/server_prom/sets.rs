//! The named query sets `--server-prometheus-queries` chooses from: node_exporter's (a host) and
//! cAdvisor's or the kubelet's (a container). Each query names what it gives: a name the step's
//! server view has a field for (`cpu_cores`, `memory_bytes`, `host_cpu_pct`, …) fills it, any other
//! is an extra. The docs print these sets; a test keeps the page and this file the same.
//!
//! `${selector}` is `--server-prometheus-selector` (label matchers, written inside braces after
//! other matchers and a comma: PromQL takes a trailing comma, so an empty selector is no error);
//! `${window}` the step's length (`rate(x[${window}])` is the step's rate).

use results::quantity::{HOST_CPU_PCT, HOST_SOFTIRQ_PCT, TCP_LISTEN_DROPS, TCP_RETRANS};

/// One query of a set: its name, its PromQL with placeholders, and the unit an extra is shown in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Named {
    pub name: &'static str,
    pub query: &'static str,
    pub unit: &'static str,
}

const fn q(name: &'static str, query: &'static str, unit: &'static str) -> Named {
    Named { name, query, unit }
}

/// A host watched by node_exporter (collectors cpu, meminfo, netdev, netstat, stat). The host is
/// the server: its busy cores are the server's CPU, the memory it does not have available the
/// server's memory. Its busy cores are its busy share of the CPU time counted, times its cores,
/// not busy seconds over the window's: a virtual machine's kernel can count less time than passed
/// (ticks lost while its vCPU waited, without steal said), and the share is what a stampede
/// monitor reports (on a loaded 2-core VM here the two differed by 9 points).
pub const NODE: &[Named] = &[
    q(
        "samples",
        r#"count_over_time(node_boot_time_seconds{${selector}}[${window}])"#,
        "",
    ),
    q(
        "cpu_cores",
        r#"sum(rate(node_cpu_seconds_total{mode!~"idle|iowait",${selector}}[${window}])) / sum(rate(node_cpu_seconds_total{${selector}}[${window}])) * count(count by (cpu) (node_cpu_seconds_total{${selector}}))"#,
        "",
    ),
    q(
        "usable_cores",
        r#"count(count by (cpu) (node_cpu_seconds_total{${selector}}))"#,
        "",
    ),
    q(
        "memory_bytes",
        r#"max(max_over_time(node_memory_MemTotal_bytes{${selector}}[${window}]) - min_over_time(node_memory_MemAvailable_bytes{${selector}}[${window}]))"#,
        "",
    ),
    q(
        HOST_CPU_PCT.key,
        r#"100 * sum(rate(node_cpu_seconds_total{mode!~"idle|iowait",${selector}}[${window}])) / sum(rate(node_cpu_seconds_total{${selector}}[${window}]))"#,
        "",
    ),
    q(
        HOST_SOFTIRQ_PCT.key,
        r#"100 * sum(rate(node_cpu_seconds_total{mode="softirq",${selector}}[${window}])) / sum(rate(node_cpu_seconds_total{${selector}}[${window}]))"#,
        "",
    ),
    q(
        "host_iowait_pct",
        r#"100 * sum(rate(node_cpu_seconds_total{mode="iowait",${selector}}[${window}])) / sum(rate(node_cpu_seconds_total{${selector}}[${window}]))"#,
        "",
    ),
    q(
        "host_steal_pct",
        r#"100 * sum(rate(node_cpu_seconds_total{mode="steal",${selector}}[${window}])) / sum(rate(node_cpu_seconds_total{${selector}}[${window}]))"#,
        "",
    ),
    q(
        "host_mem_available_bytes",
        r#"avg(avg_over_time(node_memory_MemAvailable_bytes{${selector}}[${window}]))"#,
        "",
    ),
    q(
        TCP_LISTEN_DROPS.key,
        r#"sum(increase(node_netstat_TcpExt_ListenDrops{${selector}}[${window}]))"#,
        "",
    ),
    q(
        TCP_RETRANS.key,
        r#"sum(increase(node_netstat_Tcp_RetransSegs{${selector}}[${window}]))"#,
        "",
    ),
    q(
        "net_rx_bytes_per_s",
        r#"sum(rate(node_network_receive_bytes_total{${selector}}[${window}]))"#,
        "B/s",
    ),
    q(
        "net_tx_bytes_per_s",
        r#"sum(rate(node_network_transmit_bytes_total{${selector}}[${window}]))"#,
        "B/s",
    ),
];

/// A container watched by cAdvisor (the kubelet's `/metrics/cadvisor`): its CPU, working set and
/// CFS throttling; its usable cores are its quota, else the machine's cores.
pub const CADVISOR: &[Named] = &[
    q(
        "samples",
        r#"count_over_time(container_cpu_usage_seconds_total{${selector}}[${window}])"#,
        "",
    ),
    q(
        "cpu_cores",
        r#"sum(rate(container_cpu_usage_seconds_total{${selector}}[${window}]))"#,
        "",
    ),
    q(
        "usable_cores",
        r#"(sum(container_spec_cpu_quota{${selector}}) / sum(container_spec_cpu_period{${selector}})) or max(machine_cpu_cores)"#,
        "",
    ),
    q(
        "memory_bytes",
        r#"sum(max_over_time(container_memory_working_set_bytes{${selector}}[${window}]))"#,
        "",
    ),
    q(
        "throttled_pct",
        r#"100 * sum(increase(container_cpu_cfs_throttled_periods_total{${selector}}[${window}])) / sum(increase(container_cpu_cfs_periods_total{${selector}}[${window}]))"#,
        "",
    ),
    q(
        "net_rx_bytes_per_s",
        r#"sum(rate(container_network_receive_bytes_total{${selector}}[${window}]))"#,
        "B/s",
    ),
    q(
        "net_tx_bytes_per_s",
        r#"sum(rate(container_network_transmit_bytes_total{${selector}}[${window}]))"#,
        "B/s",
    ),
];

/// The names a view has a field for, and what each fills (for the docs and a refusal's words).
pub const FIELDS: &[(&str, &str)] = &[
    (
        "samples",
        "scrapes in the window (run.json `samples`); under 2 is said in a note",
    ),
    ("cpu_cores", "the server's busy cores (srv_cpu_pct = 100 ×)"),
    (
        "usable_cores",
        "the cores it may use (srv_cpu_util_pct divides by it)",
    ),
    ("memory_bytes", "the server's memory (srv_mem_mb)"),
    ("throttled_pct", "CFS periods throttled, % (a note at 1 %)"),
    (HOST_CPU_PCT.key, "the host's busy share, % (host_cpu_pct)"),
    (HOST_SOFTIRQ_PCT.key, "the host's softirq share, %"),
    ("host_iowait_pct", "run.json host.iowait_pct"),
    ("host_steal_pct", "run.json host.steal_pct"),
    (
        "host_mem_available_bytes",
        "run.json host.mem_available_bytes",
    ),
    (
        TCP_LISTEN_DROPS.key,
        "SYNs listeners dropped (increase(), rounded)",
    ),
    (
        TCP_RETRANS.key,
        "segments retransmitted (increase(), rounded)",
    ),
];

/// Whether a view has a field for the query named `name` (else its value is an extra column).
pub fn is_field(name: &str) -> bool {
    FIELDS.iter().any(|(f, _)| *f == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The guide prints every default query as it is here.
    #[test]
    fn the_guide_prints_the_sets() {
        let guide = include_str!("../../../docs/guide/server-prometheus.md");
        for (set, queries) in [("node", NODE), ("cadvisor", CADVISOR)] {
            for n in queries {
                let line = format!("{} = {}", n.name, n.query);
                assert!(
                    guide.contains(&line),
                    "docs/guide/server-prometheus.md lacks {set}'s `{line}`"
                );
            }
        }
        for (name, _) in FIELDS {
            assert!(guide.contains(&format!("`{name}`")), "{name}");
        }
    }
}
