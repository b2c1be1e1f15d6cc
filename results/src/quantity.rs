//! The catalogue of step quantities: each number a step is judged, tabled, compared or bounded by,
//! defined once: its key (steps.tsv's column, compare's metric, the report data's column), label,
//! unit, which way is better, whether a censored percentile makes it a lower bound, the names the
//! `--stop-on`/`--fail-on`/`--slo` grammar accepts, and how it is read from a step. steps.tsv's
//! table, the stdout table, compare's metrics, the condition grammar, the search's SLOs and the
//! report's data all read their quantities from here; a key is written as a literal nowhere else
//! (the tidy test checks). Adding a quantity is one entry here plus its computation.
use monitor::step::StepServer;
use serde::Serialize;

use crate::step::StepResult;

/// Which way a quantity improves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum Better {
    Higher,
    Lower,
}

/// What kind of number a quantity is, which decides what its change is relative to and the units
/// a threshold on it may be written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scale {
    /// Per second (or per core-second): relative to the baseline's.
    Rate,
    /// A share of the requests, in %.
    Share,
    /// Milliseconds.
    Latency,
    /// Anything else (a CPU share, a count, kB/s): relative to the baseline's.
    Other,
}

/// How a quantity is read: from the step, or from one server monitor's view of it.
#[derive(Clone, Copy)]
pub enum Read {
    Step(fn(&StepResult) -> f64),
    Server(fn(&StepResult, &StepServer) -> Option<f64>),
}

/// One step quantity.
#[derive(Clone, Copy)]
pub struct Quantity {
    /// Its name in steps.tsv (before any host or monitor suffix), compare and the report's data.
    pub key: &'static str,
    pub label: &'static str,
    pub unit: &'static str,
    pub better: Better,
    pub scale: Scale,
    /// The statistic's name in [`crate::step::LowerBounds`] when a censored percentile can make
    /// it only a lower bound of the true value.
    pub bound: Option<&'static str>,
    /// The percentile a latency statistic is of (for the search's evidence rule).
    pub quantile: Option<f64>,
    /// The names the condition grammar accepts for it, the canonical one first; empty when the
    /// grammar cannot name it.
    pub grammar: &'static [&'static str],
    pub read: Read,
}

impl std::fmt::Debug for Quantity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.key)
    }
}

/// Two quantities are the same when their keys are: a key names one quantity.
impl PartialEq for Quantity {
    fn eq(&self, other: &Quantity) -> bool {
        self.key == other.key
    }
}
impl Eq for Quantity {}

impl Quantity {
    /// The step's number: a step quantity's, or a server quantity's as the step's own server
    /// ([`StepResult::own_server`]) gives it; none for a server quantity of a step without one.
    pub fn of_step(&self, r: &StepResult) -> Option<f64> {
        match self.read {
            Read::Step(f) => Some(f(r)),
            Read::Server(f) => f(r, r.own_server()?),
        }
    }

    /// The number a server monitor's view gives it in this step; none for a step quantity.
    pub fn of_server(&self, r: &StepResult, m: &StepServer) -> Option<f64> {
        match self.read {
            Read::Step(_) => None,
            Read::Server(f) => f(r, m),
        }
    }

    /// Its label with its unit, as a chart's axis or a column says it to a person: `served
    /// (req/s)`, `p99 latency (ms)`, `failed (% of requests)`, `server memory (MiB)`.
    pub fn titled(&self) -> String {
        let unit = match (self.scale, self.unit) {
            // A rate per second counts requests, but for the connections opened.
            (_, "/s") if self.key == CON_RATE.key => "conn/s",
            (_, "/s") => "req/s",
            (Scale::Share, _) => "% of requests",
            (_, unit) => unit,
        };
        let what = match self.scale {
            Scale::Latency if !self.label.contains("latency") => {
                format!("{} latency", self.label)
            }
            _ => self.label.to_string(),
        };
        match unit {
            "" => what,
            unit => format!("{what} ({unit})"),
        }
    }

    /// The canonical name the condition grammar knows it by.
    pub fn grammar_name(&self) -> &'static str {
        self.grammar.first().copied().unwrap_or(self.key)
    }
}

const fn step(
    key: &'static str,
    label: &'static str,
    unit: &'static str,
    better: Better,
    scale: Scale,
    read: fn(&StepResult) -> f64,
) -> Quantity {
    Quantity {
        key,
        label,
        unit,
        better,
        scale,
        bound: None,
        quantile: None,
        grammar: &[],
        read: Read::Step(read),
    }
}

const fn latency(
    key: &'static str,
    label: &'static str,
    bound: &'static str,
    quantile: Option<f64>,
    grammar: &'static [&'static str],
    read: fn(&StepResult) -> f64,
) -> Quantity {
    Quantity {
        key,
        label,
        unit: "ms",
        better: Better::Lower,
        scale: Scale::Latency,
        bound: Some(bound),
        quantile,
        grammar,
        read: Read::Step(read),
    }
}

const fn server(
    key: &'static str,
    label: &'static str,
    unit: &'static str,
    better: Better,
    read: fn(&StepResult, &StepServer) -> Option<f64>,
) -> Quantity {
    Quantity {
        key,
        label,
        unit,
        better,
        scale: Scale::Other,
        bound: None,
        quantile: None,
        grammar: &[],
        read: Read::Server(read),
    }
}

use Better::{Higher, Lower};

// autobench's columns (steps.tsv suffixes them with the host).
pub const REQ_RATE: Quantity = step("req_rate", "sent", "/s", Higher, Scale::Rate, |r| {
    r.achieved_request_rate
});
pub const CON_RATE: Quantity = step("con_rate", "connections", "/s", Higher, Scale::Rate, |r| {
    r.connection_rate
});
pub const MIN_REP_RATE: Quantity = step(
    "min_rep_rate",
    "slowest second's replies",
    "/s",
    Higher,
    Scale::Rate,
    |r| r.reply_rate.min,
);
pub const AVG_REP_RATE: Quantity =
    step("avg_rep_rate", "replies", "/s", Higher, Scale::Rate, |r| {
        r.reply_rate.avg
    });
pub const MAX_REP_RATE: Quantity = step(
    "max_rep_rate",
    "fastest second's replies",
    "/s",
    Higher,
    Scale::Rate,
    |r| r.reply_rate.max,
);
pub const STDDEV_REP_RATE: Quantity = step(
    "stddev_rep_rate",
    "reply rate's deviation",
    "/s",
    Lower,
    Scale::Rate,
    |r| r.reply_rate.stddev,
);
pub const RESP_TIME: Quantity = latency(
    "resp_time",
    "mean latency",
    "mean",
    None,
    &["mean", "avg"],
    |r| r.latency_ms.mean,
);
pub const NET_IO: Quantity = step("net_io", "network", "kB/s", Higher, Scale::Other, |r| {
    r.net_io_kb_s
});
pub const ERRORS: Quantity = Quantity {
    grammar: &["errors", "error"],
    ..step(
        "errors",
        "transport errors",
        "%",
        Lower,
        Scale::Share,
        |r| r.errors_pct,
    )
};

// stampede's own.
pub const OK_RATE: Quantity = Quantity {
    grammar: &["ok_rate"],
    ..step("ok_rate", "served", "/s", Higher, Scale::Rate, |r| {
        r.ok_rate
    })
};
pub const FAILED_PCT: Quantity = Quantity {
    grammar: &["failed"],
    ..step("failed_pct", "failed", "%", Lower, Scale::Share, |r| {
        r.failed_pct
    })
};
pub const P50_MS: Quantity = latency("p50_ms", "p50", "p50", Some(0.5), &["p50"], |r| {
    r.latency_ms.p50
});
pub const P90_MS: Quantity = latency("p90_ms", "p90", "p90", Some(0.9), &["p90"], |r| {
    r.latency_ms.p90
});
pub const P99_MS: Quantity = latency("p99_ms", "p99", "p99", Some(0.99), &["p99"], |r| {
    r.latency_ms.p99
});
pub const P999_MS: Quantity = latency(
    "p999_ms",
    "p99.9",
    "p999",
    Some(0.999),
    &["p999", "p99.9"],
    |r| r.latency_ms.p999,
);
pub const MAX_MS: Quantity = latency("max_ms", "max", "max", None, &["max"], |r| r.latency_ms.max);
/// Requests written in the step: a count, for the condition grammar only (`requests[login]>=1000`:
/// a name sent often enough for its percentiles to mean something); steps.tsv has its rate.
pub const REQUESTS: Quantity = Quantity {
    grammar: &["requests"],
    ..step("requests", "requests", "", Higher, Scale::Other, |r| {
        r.requests as f64
    })
};
pub const GEN_CPU_PCT: Quantity = step("gen_cpu_pct", "gen cpu", "%", Lower, Scale::Other, |r| {
    r.generator.cpu_pct
});
pub const LAG_P99_MS: Quantity = step("lag_p99_ms", "lag p99", "ms", Lower, Scale::Other, |r| {
    r.generator.lag_p99_ms
});

// A session log's (`--wsesslog`): 0 in a step without sessions.
pub const SESSIONS_STARTED: Quantity = step(
    "sessions_started",
    "sessions begun",
    "",
    Higher,
    Scale::Other,
    |r| r.sessions.map_or(0.0, |s| s.started as f64),
);
pub const SESSIONS_COMPLETED: Quantity = step(
    "sessions_completed",
    "sessions completed",
    "",
    Higher,
    Scale::Other,
    |r| r.sessions.map_or(0.0, |s| s.completed as f64),
);
pub const SESSIONS_ABANDONED: Quantity = step(
    "sessions_abandoned",
    "sessions abandoned",
    "",
    Lower,
    Scale::Other,
    |r| r.sessions.map_or(0.0, |s| s.abandoned as f64),
);
pub const SESSION_P50_MS: Quantity = step(
    "session_p50_ms",
    "session length p50",
    "ms",
    Lower,
    Scale::Other,
    |r| r.sessions.map_or(0.0, |s| s.length_ms.p50),
);
pub const SESSION_P99_MS: Quantity = step(
    "session_p99_ms",
    "session length p99",
    "ms",
    Lower,
    Scale::Other,
    |r| r.sessions.map_or(0.0, |s| s.length_ms.p99),
);

// A server monitor's (steps.tsv suffixes them with the monitor's name).
pub const SRV_CPU_PCT: Quantity =
    server("srv_cpu_pct", "server CPU", "% of a core", Lower, |_, m| {
        m.target.as_ref().map(|t| t.cpu_pct)
    });
pub const SRV_CPU_UTIL_PCT: Quantity = server(
    "srv_cpu_util_pct",
    "server CPU of its cores",
    "%",
    Lower,
    |_, m| m.target.as_ref().map(|t| t.cpu_util_pct),
);
pub const SRV_THREAD_MAX_PCT: Quantity = server(
    "srv_thread_max_pct",
    "busiest server thread",
    "% of a core",
    Lower,
    |_, m| m.target.as_ref()?.thread_max_pct,
);
pub const SRV_MEM_MB: Quantity = server("srv_mem_mb", "server memory", "MiB", Lower, |_, m| {
    m.target
        .as_ref()
        .map(|t| t.memory_bytes.max / (1024.0 * 1024.0))
});
pub const HOST_CPU_PCT: Quantity = server("host_cpu_pct", "host CPU", "%", Lower, |_, m| {
    m.host.cpu_pct
});
pub const HOST_SOFTIRQ_PCT: Quantity =
    server("host_softirq_pct", "host softirq", "%", Lower, |_, m| {
        m.host.softirq_pct
    });
pub const TCP_LISTEN_DROPS: Quantity = server(
    "tcp_listen_drops",
    "listen queue drops",
    "",
    Lower,
    |_, m| Some(m.tcp.listen_drops as f64),
);
pub const TCP_RETRANS: Quantity = server("tcp_retrans", "retransmits", "", Lower, |_, m| {
    Some(m.tcp.retrans_segs as f64)
});
/// Requests served per core-second of the server's CPU: the served rate over the cores the
/// watched processes kept busy. None when the monitor saw no CPU used (nothing to divide by).
pub const OK_PER_CORE_S: Quantity = Quantity {
    scale: Scale::Rate,
    ..server(
        "ok_per_core_s",
        "requests per server core-second",
        "/core-s",
        Higher,
        |r, m| {
            let cores = m.target.as_ref()?.cpu_pct / 100.0;
            // To three decimals, as the step's other numbers are.
            (cores > 0.0).then(|| (r.ok_rate / cores * 1000.0).round() / 1000.0)
        },
    )
};

/// Puts the monitors' views into the step, with what they give it (its requests per server
/// core-second), together so that the two cannot disagree.
pub fn observed(r: &mut StepResult, views: Vec<StepServer>) {
    r.server_monitors = views;
    r.ok_per_core_s = OK_PER_CORE_S.of_step(r);
}

/// steps.tsv's autobench columns after the first, in order.
pub const AUTOBENCH: [&Quantity; 9] = [
    &REQ_RATE,
    &CON_RATE,
    &MIN_REP_RATE,
    &AVG_REP_RATE,
    &MAX_REP_RATE,
    &STDDEV_REP_RATE,
    &RESP_TIME,
    &NET_IO,
    &ERRORS,
];

/// steps.tsv's own numeric columns before `lower_bound`, in order.
pub const OURS: [&Quantity; 7] = [
    &OK_RATE,
    &FAILED_PCT,
    &P50_MS,
    &P90_MS,
    &P99_MS,
    &P999_MS,
    &MAX_MS,
];

/// A monitor's columns: the CPU of the watched processes (% of one core, and of the cores they may
/// use), the busiest thread's share of a core, the memory at its highest, the host's CPU and
/// softirq, the kernel's drops and retransmits over the step, and the requests served per core-second.
pub const MONITOR: [&Quantity; 9] = [
    &SRV_CPU_PCT,
    &SRV_CPU_UTIL_PCT,
    &SRV_THREAD_MAX_PCT,
    &SRV_MEM_MB,
    &HOST_CPU_PCT,
    &HOST_SOFTIRQ_PCT,
    &TCP_LISTEN_DROPS,
    &TCP_RETRANS,
    &OK_PER_CORE_S,
];

/// A session log's columns (steps.tsv's, after the columns every run has).
pub const SESSIONS: [&Quantity; 5] = [
    &SESSIONS_STARTED,
    &SESSIONS_COMPLETED,
    &SESSIONS_ABANDONED,
    &SESSION_P50_MS,
    &SESSION_P99_MS,
];

/// The latency statistics in [`crate::step::LowerBounds`]' order (mean, p50, p90, p99, p999, max).
pub const LATENCIES: [&Quantity; 6] = [&RESP_TIME, &P50_MS, &P90_MS, &P99_MS, &P999_MS, &MAX_MS];

/// What the condition grammar can name, in the order its help lists them.
pub const CONDITIONS: [&Quantity; 10] = [
    &P50_MS,
    &P90_MS,
    &P99_MS,
    &P999_MS,
    &MAX_MS,
    &RESP_TIME,
    &FAILED_PCT,
    &ERRORS,
    &OK_RATE,
    &REQUESTS,
];

/// Every quantity, once.
pub fn all() -> impl Iterator<Item = &'static Quantity> {
    AUTOBENCH
        .into_iter()
        .chain(OURS)
        .chain([&GEN_CPU_PCT, &LAG_P99_MS])
        .chain(SESSIONS)
        .chain(MONITOR)
}

/// The quantity with this key.
pub fn by_key(key: &str) -> Option<&'static Quantity> {
    all().find(|q| q.key == key)
}

/// The quantity the condition grammar knows by `word` (any case).
pub fn by_grammar_name(word: &str) -> Option<&'static Quantity> {
    let word = word.to_ascii_lowercase();
    CONDITIONS
        .into_iter()
        .find(|q| q.grammar.iter().any(|n| *n == word))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_title_says_the_label_in_words_with_its_unit() {
        let titles: Vec<String> = [
            OK_RATE,
            P99_MS,
            RESP_TIME,
            FAILED_PCT,
            CON_RATE,
            SRV_MEM_MB,
            TCP_RETRANS,
        ]
        .iter()
        .map(Quantity::titled)
        .collect();
        assert_eq!(
            titles,
            [
                "served (req/s)",
                "p99 latency (ms)",
                "mean latency (ms)",
                "failed (% of requests)",
                "connections (conn/s)",
                "server memory (MiB)",
                "retransmits",
            ]
        );
    }

    #[test]
    fn every_key_names_one_quantity() {
        let keys: Vec<_> = all().map(|q| q.key).collect();
        let mut unique = keys.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(keys.len(), unique.len(), "{keys:?}");
    }

    #[test]
    fn every_latency_is_a_lower_bound_candidate_in_the_bounds_order() {
        let names: Vec<_> = LATENCIES.iter().map(|q| q.bound.unwrap()).collect();
        assert_eq!(names, crate::step::LowerBounds::NAMES);
    }

    #[test]
    fn ok_per_core_s_is_the_served_rate_over_the_cores_the_server_kept_busy() {
        let golden = include_str!("../tests/golden/run.json");
        let run =
            crate::run_file::RunFile::parse(golden, std::path::Path::new("run.json")).unwrap();
        let mut r = run.steps[0].clone();
        r.ok_rate = 900.0;
        // 75 % of each of 2 cores: 1.5 cores busy.
        let busy = crate::example_server("web", 75.0, 2.0);
        assert_eq!(OK_PER_CORE_S.of_server(&r, &busy), Some(600.0));
        let idle = crate::example_server("web", 0.0, 2.0);
        assert_eq!(
            OK_PER_CORE_S.of_server(&r, &idle),
            None,
            "no CPU used: nothing to divide by"
        );
    }

    #[test]
    fn a_step_s_requests_per_server_core_second_come_with_its_own_monitor_and_are_never_0() {
        let golden = include_str!("../tests/golden/run.json");
        let run =
            crate::run_file::RunFile::parse(golden, std::path::Path::new("run.json")).unwrap();
        let mut r = run.steps[0].clone();
        r.ok_rate = 900.0;
        observed(&mut r, vec![crate::example_server("web", 75.0, 2.0)]);
        // 900/s on 1.5 cores.
        assert_eq!(r.ok_per_core_s, Some(600.0));
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["ok_per_core_s"], 600.0);
        // A host-only monitor, one that saw no CPU, none at all: none, and absent from run.json.
        let mut host = crate::example_server("web", 75.0, 2.0);
        host.target = None;
        for views in [
            vec![host],
            vec![crate::example_server("web", 0.0, 2.0)],
            vec![],
        ] {
            observed(&mut r, views);
            assert_eq!(r.ok_per_core_s, None);
            assert!(
                serde_json::to_value(&r)
                    .unwrap()
                    .get("ok_per_core_s")
                    .is_none()
            );
        }
    }
}
