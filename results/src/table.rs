//! The step table (steps.tsv/csv, compare.tsv's per-run part, the report's `steps` data): one
//! list of (name, cell) columns built from the quantity catalogue, so the header and every row come
//! from the same place and cannot drift apart.
use shared::metrics::{ErrorClass, STATUS_CLASSES};
use shared::plan::LoadModel;

use crate::quantity::{self, Quantity};
use crate::step::{StepResult, tsv_number};

/// The columns a run adds to every run's: a TLS run's, a session log's, a search's.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Extra {
    pub tls: bool,
    pub sessions: bool,
    /// The plan has a `[setup]`: its runs and failures.
    pub setup: bool,
    pub search: bool,
}

/// A Prometheus source's extra columns (run.json's `server_extras`): its named queries that fill no
/// field of a step's server view, each a column after the monitors' (`gc_pause_s_db`; unsuffixed
/// for the source paired with the run's target).
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ServerExtras {
    pub monitor: String,
    pub names: Vec<String>,
}

/// One cell of the step table, from a step.
type Cell = Box<dyn Fn(&StepResult) -> String + Send + Sync>;

/// The step table (steps.tsv/csv): one list of (name, cell) columns, so the header and every row
/// come from the same place and cannot drift apart. Autobench's columns first (with the host
/// suffix), then stampede's.
pub struct StepTable(Vec<(String, Cell)>);

impl StepTable {
    pub fn new(host: &str, model: LoadModel) -> StepTable {
        StepTable::build(host, model, false)
    }

    /// A run's steps.tsv: a TLS run's handshake columns, a session log's, a search's probe
    /// columns, then its monitors' (the one place the writer and readers of run.json choose the
    /// same columns); `paired` is the monitor paired with the run's target, if one was.
    pub fn of_run(
        host: &str,
        model: LoadModel,
        extra: Extra,
        monitors: &[String],
        paired: Option<&str>,
        server_extras: &[ServerExtras],
    ) -> StepTable {
        let t = StepTable::new(host, model);
        let t = if extra.tls { t.with_tls() } else { t };
        let t = if extra.setup { t.with_setup() } else { t };
        let t = if extra.sessions { t.with_sessions() } else { t };
        let search = extra.search;
        let t = if search { t.with_probes() } else { t };
        t.with_monitors(monitors, paired)
            .with_server_extras(server_extras, paired)
    }

    /// Each Prometheus source's extra columns, after every monitor's: a cell is empty for a step
    /// whose query gave no number.
    pub fn with_server_extras(
        mut self,
        extras: &[ServerExtras],
        paired: Option<&str>,
    ) -> StepTable {
        for e in extras {
            let suffix = match paired == Some(e.monitor.as_str()) {
                true => String::new(),
                false => format!("_{}", e.monitor.replace(['\t', ',', ' ', '\n'], "_")),
            };
            for name in &e.names {
                let (monitor, name) = (e.monitor.clone(), name.clone());
                self.0.push((
                    format!("{name}{suffix}"),
                    Box::new(move |r| {
                        r.server_monitors
                            .iter()
                            .find(|m| m.monitor == monitor)
                            .and_then(|m| m.extra.iter().find(|x| x.name == name))
                            .map_or(String::new(), |x| tsv_number(x.value))
                    }),
                ));
            }
        }
        self
    }

    /// The same columns with every one after the first suffixed `_LABEL`, as autobench names a
    /// compared host's (`req_rate_host1`, `req_rate_host2`): one run's part of compare.tsv.
    pub fn labelled(label: &str, model: LoadModel) -> StepTable {
        StepTable::build(label, model, true)
    }

    fn build(host: &str, model: LoadModel, suffix_all: bool) -> StepTable {
        // stampede's own columns carry no host in steps.tsv (one host per file).
        let ours = |name: &str| {
            if suffix_all {
                format!("{name}_{host}")
            } else {
                name.to_string()
            }
        };
        let mut t: Vec<(String, Cell)> = Vec::new();
        let num = |q: &'static Quantity| -> Cell {
            Box::new(move |r| q.of_step(r).map_or(String::new(), tsv_number))
        };
        // The closed model has no demanded rate; its x axis is the connection count.
        let first = if model == LoadModel::Concurrency {
            "connections"
        } else {
            "dem_req_rate"
        };
        t.push((
            first.into(),
            Box::new(|r| tsv_number(r.demanded_rate.unwrap_or(r.step_value))),
        ));
        for q in quantity::AUTOBENCH {
            t.push((format!("{}_{host}", q.key), num(q)));
        }
        for q in quantity::OURS {
            t.push((ours(q.key), num(q)));
        }
        // Statistics that are lower bounds (the mean is resp_time), by name; the numbers stay
        // numbers for plotting. Space-separated: a comma would split the cell in steps.csv.
        t.push((
            ours("lower_bound"),
            Box::new(|r| r.latency_ms.lower_bounds.names().join(" ")),
        ));
        for class in STATUS_CLASSES {
            t.push((
                ours(&format!("status_{class}")),
                Box::new(move |r| r.status.get(class).to_string()),
            ));
        }
        for e in ErrorClass::ALL {
            t.push((
                ours(&e.column()),
                Box::new(move |r| r.errors.get(e.name()).to_string()),
            ));
        }
        for q in [&quantity::GEN_CPU_PCT, &quantity::LAG_P99_MS] {
            t.push((ours(q.key), num(q)));
        }
        t.push((
            ours("start_skew_ms"),
            Box::new(|r| r.start_skew_ms.map_or(String::new(), tsv_number)),
        ));
        t.push((ours("trust"), Box::new(|r| r.trust.name().to_string())));
        t.push((ours("server"), Box::new(|r| r.server.name().to_string())));
        // A free-text column (the last but for a TLS run's, a search's and monitors'): no
        // separators in it.
        t.push((
            ours("server_reason"),
            Box::new(|r| r.server_reasons.join("; ").replace(['\t', ','], " ")),
        ));
        StepTable(t)
    }

    /// The same table with each monitor's columns after stampede's, suffixed with its name as
    /// autobench suffixes hosts (`srv_cpu_pct_web1`): after every other column, so that a script
    /// reading steps.tsv by position reads the same columns whether a monitor watched or not. The
    /// monitor `paired` with the run's target comes first and unsuffixed (`srv_cpu_pct`): every
    /// target's own server has the same columns, whatever its monitor is called. A cell is empty
    /// for a step the monitor did not see (it was lost, or joined late).
    pub fn with_monitors(self, names: &[String], paired: Option<&str>) -> StepTable {
        self.monitor_columns(names, paired, "")
    }

    /// [`StepTable::with_monitors`] for a comparison's run: each column suffixed with the monitor,
    /// then the run's label (`srv_cpu_pct_server_nginx`), as `labelled` suffixes the others; the
    /// paired monitor's with the label alone (`srv_cpu_pct_nginx`), one set per target.
    pub fn with_labelled_monitors(
        self,
        names: &[String],
        paired: Option<&str>,
        label: &str,
    ) -> StepTable {
        self.monitor_columns(names, paired, &format!("_{label}"))
    }

    fn monitor_columns(mut self, names: &[String], paired: Option<&str>, tail: &str) -> StepTable {
        let paired = paired.filter(|p| names.iter().any(|n| n == p));
        let suffixes = paired
            .map(|p| (p.to_string(), tail.to_string()))
            .into_iter()
            .chain(
                names
                    .iter()
                    .filter(|n| Some(n.as_str()) != paired)
                    .map(|name| {
                        let suffix = name.replace(['\t', ',', ' ', '\n'], "_") + tail;
                        (name.clone(), format!("_{suffix}"))
                    }),
            );
        for (name, suffix) in suffixes.collect::<Vec<_>>() {
            for q in quantity::MONITOR {
                let name = name.clone();
                self.0.push((
                    format!("{}{suffix}", q.key),
                    Box::new(move |r| {
                        r.server_monitors
                            .iter()
                            .find(|m| m.monitor == name)
                            .and_then(|m| q.of_server(r, m))
                            .map_or(String::new(), tsv_number)
                    }),
                ));
            }
        }
        self
    }

    /// The same table with a capacity search's `role` and `class` columns (a step without a probe
    /// mark leaves them empty): before the monitors' columns, which always come last.
    /// A plan's setup: its runs and the runs that failed, per step.
    pub fn with_setup(mut self) -> StepTable {
        self.0.push((
            "setups".into(),
            Box::new(|r| r.setup.map_or(String::new(), |s| s.runs.to_string())),
        ));
        self.0.push((
            "setup_failed".into(),
            Box::new(|r| r.setup.map_or(String::new(), |s| s.failed.to_string())),
        ));
        self
    }

    /// The TLS handshakes of a run over TLS (`--tls-sessions`), after the columns every run has,
    /// so that a plain run's file reads as it always did, by name and by position.
    pub fn with_tls(mut self) -> StepTable {
        self.0.push((
            "tls_full".into(),
            Box::new(|r| r.tls.map_or(String::new(), |t| t.full.to_string())),
        ));
        self.0.push((
            "tls_resumed".into(),
            Box::new(|r| r.tls.map_or(String::new(), |t| t.resumed.to_string())),
        ));
        self
    }

    /// A session log's columns (`--wsesslog`): sessions begun, completed and abandoned, and the
    /// completed ones' length p50 and p99.
    pub fn with_sessions(mut self) -> StepTable {
        for q in quantity::SESSIONS {
            self.0.push((
                q.key.to_string(),
                Box::new(move |r| q.of_step(r).map_or(String::new(), tsv_number)),
            ));
        }
        self
    }

    pub fn with_probes(mut self) -> StepTable {
        self.0.push((
            "role".into(),
            Box::new(|r| r.probe.as_ref().map_or("", |p| p.role.name()).to_string()),
        ));
        self.0.push((
            "class".into(),
            Box::new(|r| r.probe.as_ref().map_or("", |p| p.class.name()).to_string()),
        ));
        self
    }

    pub fn header(&self) -> Vec<String> {
        self.0.iter().map(|(name, _)| name.clone()).collect()
    }

    /// One step as a row, in the header's order.
    pub fn row(&self, r: &StepResult) -> Vec<String> {
        self.0.iter().map(|(_, cell)| cell(r)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prometheus_source_s_extras_are_columns_after_the_monitors_empty_where_not_given() {
        let golden = include_str!("../tests/golden/run.json");
        let mut run =
            crate::run_file::RunFile::parse(golden, std::path::Path::new("run.json")).unwrap();
        let mut web = crate::example_server("web", 50.0, 2.0);
        web.extra = vec![monitor::step::Extra {
            name: "gc_pause_s".into(),
            value: 0.0125,
            unit: "s/s".into(),
        }];
        run.steps[0].server_monitors = vec![web];
        let extras = [ServerExtras {
            monitor: "web".into(),
            names: vec!["gc_pause_s".into(), "queue".into()],
        }];
        let names = ["web".to_string()];
        let t = StepTable::new("h", LoadModel::Requests).with_monitors(&names, None);
        let t = t.with_server_extras(&extras, None);
        let h = t.header();
        assert_eq!(
            h[h.len() - 3..],
            ["ok_per_core_s_web", "gc_pause_s_web", "queue_web"]
        );
        let row = t.row(&run.steps[0]);
        assert_eq!(row[row.len() - 2..], ["0.013", ""]);
        assert_eq!(t.row(&run.steps[1])[row.len() - 2..], ["", ""]);
        let paired =
            StepTable::new("h", LoadModel::Requests).with_server_extras(&extras, Some("web"));
        assert!(
            paired
                .header()
                .ends_with(&["gc_pause_s".to_string(), "queue".to_string()])
        );
    }

    #[test]
    fn header_keeps_autobench_names_in_order() {
        let h = StepTable::new("web1", LoadModel::Connections).header();
        assert_eq!(
            &h[..10],
            &[
                "dem_req_rate",
                "req_rate_web1",
                "con_rate_web1",
                "min_rep_rate_web1",
                "avg_rep_rate_web1",
                "max_rep_rate_web1",
                "stddev_rep_rate_web1",
                "resp_time_web1",
                "net_io_web1",
                "errors_web1"
            ]
        );
        assert!(h.contains(&"err_addr_unavailable".to_string()));
        assert_eq!(h[10..12], ["ok_rate", "failed_pct"]);
        assert_eq!(h.last().unwrap(), "server_reason");
    }
}
