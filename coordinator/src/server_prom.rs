//! Server metrics from a Prometheus that already watches the server (`--server-prometheus`), where
//! no stampede monitor can run (a Kubernetes pod, a managed service). Each step, a set of named
//! queries is evaluated over the step's window and its answers become one `StepServer` marked
//! `source: prometheus`, named as a monitor is: so steps.tsv's server columns, run.json's
//! `server_monitors`, the report's server charts, the knee's `server_cpu` cause and requests per
//! server core-second read it as they read a monitor's, and a source named as a target is that
//! target's own server (`config::pairing`'s one rule).
//!
//! What is never made up: a query with no series over the window (fewer than two scrapes in it for
//! a rate, a selector that matches nothing) leaves its field empty with a note; a Prometheus that
//! cannot be reached is said once on stderr and each step it misses has a note and no view; a query
//! that answers several series is refused before the first step (the run's end, exit 2), naming
//! the labels that differ, since summing servers silently would make one server of several.
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use monitor::step::{Extra, Gauge, HostStep, Source, StepServer, TargetStep, Watches, Window};
use monitor::{Cores, MonitorInfo, TcpCounters};
use results::quantity;

mod client;
pub mod sets;

pub use client::{Endpoint, QueryError, Series};

const FLAG: &str = "--server-prometheus";
/// A source not named `NAME=`: its columns' suffix, the way a monitor is named by its host.
pub const DEFAULT_NAME: &str = "prometheus";
/// After a step's end, how long the last scrape inside it is given to be ingested before asking.
const INGESTED: Duration = Duration::from_millis(500);
/// The window the queries are tried over before the run.
const PREFLIGHT_WINDOW_MS: i64 = 10_000;

/// A setting of `--server-prometheus` that cannot be.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ServerPromError {
    /// A flag or plan-file key's value (the message names it).
    #[error("{0}")]
    Value(String),
    /// A flag or key given without `--server-prometheus`.
    #[error("{0} asks a Prometheus: give --server-prometheus URL too")]
    Alone(&'static str),
    /// Before the run, a query answered several series or was refused.
    #[error("{FLAG} {name}: query {query}: {why}")]
    Query {
        name: String,
        query: String,
        why: String,
    },
    /// Before the run, not one query of the set found a series.
    #[error(
        "{FLAG} {name}: not one of the {set} queries finds a series over the last 10 s with the selector '{selector}': check --server-prometheus-selector against the labels the Prometheus has (its /api/v1/series), and that it scrapes the server"
    )]
    NothingMatched {
        name: String,
        set: String,
        selector: String,
    },
}

/// A plan file's `[[server_query]]`: a query of its own, or one replacing the set's of that name.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerQueryArg {
    pub name: String,
    pub query: String,
    #[serde(default)]
    pub unit: Option<String>,
}

/// What the settings say about Prometheus sources, before resolving.
pub struct Given<'a> {
    pub urls: &'a [String],
    pub set: Option<&'a str>,
    pub selector: Option<&'a str>,
    pub queries: &'a [ServerQueryArg],
}

/// One query, its selector and name filled in, its window left to each step.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Query {
    name: String,
    text: String,
    unit: String,
}

/// One Prometheus source of server metrics, resolved.
#[derive(Debug, Clone)]
pub struct ServerProm {
    /// Its columns' suffix, and the target it is paired with when a target has this name.
    pub name: String,
    pub url: String,
    endpoint: Endpoint,
    /// The set's name (`node`, `cadvisor`, `none`), for people.
    set: String,
    selector: String,
    queries: Vec<Query>,
    /// Said on stderr that it cannot be reached: once a run, whatever the targets.
    told: Arc<AtomicBool>,
}

/// Every source the settings give, each with its queries; none without `--server-prometheus`.
pub fn resolve(g: &Given) -> Result<Vec<ServerProm>, ServerPromError> {
    if g.urls.is_empty() {
        return match (g.set, g.selector, g.queries.is_empty()) {
            (Some(_), _, _) => Err(ServerPromError::Alone("--server-prometheus-queries")),
            (_, Some(_), _) => Err(ServerPromError::Alone("--server-prometheus-selector")),
            (_, _, false) => Err(ServerPromError::Alone("a plan file's [[server_query]]")),
            _ => Ok(Vec::new()),
        };
    }
    let set_name = g.set.unwrap_or("node");
    let set: &[sets::Named] = match set_name {
        "node" => sets::NODE,
        "cadvisor" => sets::CADVISOR,
        "none" => &[],
        other => {
            return Err(ServerPromError::Value(format!(
                "--server-prometheus-queries '{other}': give node (node_exporter), cadvisor (cAdvisor, the kubelet) or none (the plan file's [[server_query]] alone)"
            )));
        }
    };
    let mut queries: Vec<(String, String, String)> = set
        .iter()
        .map(|n| (n.name.into(), n.query.into(), n.unit.into()))
        .collect();
    for (i, q) in g.queries.iter().enumerate() {
        let bad = |why: String| {
            Err(ServerPromError::Value(format!(
                "[[server_query]] {}: {why}",
                q.name
            )))
        };
        if q.name.is_empty()
            || !q
                .name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
        {
            return bad("a name is lowercase letters, digits and _ (it names a column)".into());
        }
        let fielded = sets::is_field(&q.name);
        if !fielded && quantity::all().any(|k| k.key == q.name) {
            return bad("is a steps.tsv column of stampede's own: name it otherwise".into());
        }
        if g.queries[..i].iter().any(|p| p.name == q.name) {
            return bad("named twice".into());
        }
        let entry = (
            q.name.clone(),
            q.query.clone(),
            q.unit.clone().unwrap_or_default(),
        );
        match queries.iter_mut().find(|(name, _, _)| *name == q.name) {
            Some(slot) => *slot = entry,
            None => queries.push(entry),
        }
    }
    if queries.is_empty() {
        return Err(ServerPromError::Value(
            "--server-prometheus-queries none: give the queries in the plan file ([[server_query]] name = \"…\", query = \"…\")".into(),
        ));
    }
    let selector = g.selector.unwrap_or("").to_string();
    if selector.replace("${name}", "").contains(['{', '}']) {
        return Err(ServerPromError::Value(format!(
            "--server-prometheus-selector '{selector}': give the label matchers without braces, e.g. instance=\"10.0.0.5:9100\""
        )));
    }
    let mut sources = Vec::with_capacity(g.urls.len());
    for text in g.urls {
        let (name, url) = match text.split_once('=') {
            Some((name, url)) if !name.contains("://") => (name.to_string(), url.to_string()),
            _ => (DEFAULT_NAME.to_string(), text.clone()),
        };
        if name.is_empty() {
            return Err(ServerPromError::Value(format!(
                "{FLAG} '{text}': the NAME before = is empty"
            )));
        }
        if sources.iter().any(|s: &ServerProm| s.name == name) {
            return Err(ServerPromError::Value(format!(
                "{FLAG}: two sources named {name}: name each NAME=URL (NAME a target's, to pair it with that target)"
            )));
        }
        let endpoint =
            Endpoint::parse(&url).map_err(|e| ServerPromError::Value(format!("{FLAG} {e}")))?;
        let queries = queries
            .iter()
            .map(|(q, text, unit)| {
                Ok(Query {
                    name: q.clone(),
                    text: fill(text, &selector, &name).map_err(|why| {
                        ServerPromError::Value(format!("{FLAG}: query {q}: {why}"))
                    })?,
                    unit: unit.clone(),
                })
            })
            .collect::<Result<Vec<_>, ServerPromError>>()?;
        sources.push(ServerProm {
            name,
            url,
            endpoint,
            set: set_name.to_string(),
            selector: selector.clone(),
            queries,
            told: Arc::new(AtomicBool::new(false)),
        });
    }
    Ok(sources)
}

/// `text` with `${selector}` and `${name}` filled in, `${window}` kept for each step; any other
/// placeholder refused.
fn fill(text: &str, selector: &str, name: &str) -> Result<String, String> {
    let filled = text
        .replace("${selector}", selector)
        .replace("${name}", name);
    let mut rest = filled.as_str();
    while let Some(at) = rest.find("${") {
        let tail = &rest[at..];
        if !tail.starts_with("${window}") {
            let end = tail.find('}').map_or(tail.len(), |e| e + 1);
            return Err(format!(
                "{} is no placeholder: use ${{selector}}, ${{window}} or ${{name}}",
                &tail[..end]
            ));
        }
        rest = &tail["${window}".len()..];
    }
    Ok(filled)
}

/// `${window}` as PromQL writes a duration, in whole milliseconds.
fn window_text(ms: i64) -> String {
    format!("{}ms", ms.max(1))
}

fn now_s() -> f64 {
    control::session::unix_ns_now() as f64 / 1e9
}

impl ServerProm {
    /// Who it is, as run.json's `monitors` lists a monitor (its cores are each step's).
    pub fn info(&self) -> MonitorInfo {
        let selector = match self.selector.replace("${name}", &self.name) {
            s if s.is_empty() => String::new(),
            s => format!(" {{{s}}}"),
        };
        MonitorInfo {
            name: self.name.clone(),
            hostname: self.endpoint.host.clone(),
            watching: format!("Prometheus {}: {} queries{selector}", self.url, self.set),
            cores: Cores {
                online: 0,
                cpuset: None,
                quota: None,
            },
            machine_id: String::new(),
        }
    }

    /// Its queries that fill no field of a step's view: steps.tsv's extra columns; none without.
    pub fn extras(&self) -> Option<results::table::ServerExtras> {
        let names: Vec<String> = self
            .queries
            .iter()
            .filter(|q| !sets::is_field(&q.name))
            .map(|q| q.name.clone())
            .collect();
        (!names.is_empty()).then(|| results::table::ServerExtras {
            monitor: self.name.clone(),
            names,
        })
    }

    /// Its queries over the window `ms` long ending at `at_s`: each one's answer, or the
    /// Prometheus's unreachability (the rest not asked).
    async fn ask(
        &self,
        at_s: f64,
        ms: i64,
    ) -> Result<Vec<(&Query, Result<Vec<Series>, QueryError>)>, QueryError> {
        let window = window_text(ms);
        let mut answers = Vec::with_capacity(self.queries.len());
        for q in &self.queries {
            let answer = self
                .endpoint
                .query(&q.text.replace("${window}", &window), at_s)
                .await;
            if let Err(e) = &answer
                && e.unreachable()
            {
                return Err(e.clone());
            }
            answers.push((q, answer));
        }
        Ok(answers)
    }

    fn tell_unreachable(&self, e: &QueryError) {
        if !self.told.swap(true, Ordering::Relaxed) {
            eprintln!(
                "stampede: {FLAG} {} ({}): {e}; its server columns stay empty while it cannot be reached, the run goes on",
                self.name, self.url
            );
        }
    }
}

/// Before the run: every query of every source tried once, so that a query Prometheus refuses or
/// one answering several series ends the run before any load. A Prometheus that cannot be reached
/// is said once; the run goes on.
pub async fn preflight(sources: &[ServerProm]) -> Result<(), ServerPromError> {
    for s in sources {
        match s.ask(now_s(), PREFLIGHT_WINDOW_MS).await {
            Err(e) => s.tell_unreachable(&e),
            Ok(answers) => {
                let mut found = answers.is_empty();
                for (q, answer) in answers {
                    let why = match answer {
                        Err(e) => e.to_string(),
                        Ok(series) if series.len() > 1 => several(&series),
                        Ok(series) => {
                            found |= !series.is_empty();
                            continue;
                        }
                    };
                    return Err(ServerPromError::Query {
                        name: s.name.clone(),
                        query: q.name.clone(),
                        why,
                    });
                }
                // One query may lack its series (a collector not enabled); none finding any is a
                // selector that matches nothing, whose every step would be empty.
                if !found {
                    return Err(ServerPromError::NothingMatched {
                        name: s.name.clone(),
                        set: s.set.clone(),
                        selector: s.selector.clone(),
                    });
                }
            }
        }
    }
    Ok(())
}

/// Several series, by the labels in which they differ.
fn several(series: &[Series]) -> String {
    let mut keys: Vec<&str> = series
        .iter()
        .flat_map(|s| s.labels.iter().map(|(k, _)| k.as_str()))
        .collect();
    keys.sort_unstable();
    keys.dedup();
    let value = |s: &Series, k: &str| {
        s.labels
            .iter()
            .find(|(key, _)| key == k)
            .map_or(String::new(), |(_, v)| v.clone())
    };
    let differ: Vec<String> = keys
        .into_iter()
        .filter_map(|k| {
            let mut values: Vec<String> = series.iter().map(|s| value(s, k)).collect();
            values.sort();
            values.dedup();
            (values.len() > 1).then(|| format!("{k} ({})", values.join(", ")))
        })
        .collect();
    format!(
        "{} series, differing in {}: narrow --server-prometheus-selector to one server, or aggregate the query (sum(…))",
        series.len(),
        match differ.as_slice() {
            [] => "nothing but their order".to_string(),
            _ => differ.join("; "),
        }
    )
}

/// Each source the step's target `carries` asked over the step `window` (coordinator's clock): the
/// views they give, and the notes of what they could not.
pub async fn observe(
    sources: &[ServerProm],
    window: Window,
    carries: impl Fn(&str) -> bool,
) -> (Vec<StepServer>, Vec<String>) {
    let (mut views, mut notes) = (Vec::new(), Vec::new());
    let carried: Vec<&ServerProm> = sources.iter().filter(|s| carries(&s.name)).collect();
    if carried.is_empty() {
        return (views, notes);
    }
    let ingested = window.end_ns as f64 / 1e9 + INGESTED.as_secs_f64() - now_s();
    if ingested > 0.0 {
        tokio::time::sleep(Duration::from_secs_f64(
            ingested.min(INGESTED.as_secs_f64()),
        ))
        .await;
    }
    let ms = (window.end_ns - window.start_ns) / 1_000_000;
    for s in carried {
        match s.ask(window.end_ns as f64 / 1e9, ms).await {
            Err(e) => {
                s.tell_unreachable(&e);
                notes.push(format!(
                    "Prometheus {} ({}): {e}: its columns are empty",
                    s.name, s.url
                ));
            }
            Ok(answers) => {
                let (view, said) = view(&s.name, ms, answers);
                views.extend(view);
                notes.extend(said);
            }
        }
    }
    (views, notes)
}

/// A source's view of a step `ms` long from its queries' answers, and the notes of those that gave
/// no number; no view when none did.
fn view(
    name: &str,
    ms: i64,
    answers: Vec<(&Query, Result<Vec<Series>, QueryError>)>,
) -> (Option<StepServer>, Vec<String>) {
    let secs = ms as f64 / 1000.0;
    let mut notes = Vec::new();
    let mut empty = Vec::new();
    let mut values: Vec<(&Query, f64)> = Vec::new();
    for (q, answer) in answers {
        match answer {
            Ok(series) => match series.as_slice() {
                [] => empty.push(q.name.as_str()),
                [one] if one.value.is_finite() => values.push((q, one.value)),
                [one] => notes.push(format!(
                    "Prometheus {name}: query {} gave {} over the step: left empty",
                    q.name, one.value
                )),
                many => notes.push(format!(
                    "Prometheus {name}: query {} gave {}: left empty",
                    q.name,
                    several(many)
                )),
            },
            Err(e) => notes.push(format!(
                "Prometheus {name}: query {}: {e}: left empty",
                q.name
            )),
        }
    }
    if !empty.is_empty() {
        notes.push(format!(
            "Prometheus {name}: no series for {} over the step's {} s window (under two scrapes in it for a rate, or nothing the selector matches): left empty",
            empty.join(", "),
            results::step::human(secs)
        ));
    }
    let get = |key: &str| values.iter().find(|(q, _)| q.name == key).map(|(_, v)| *v);
    if let Some(n) = get("samples").filter(|n| *n < 2.0) {
        notes.push(format!(
            "Prometheus {name} scraped {n} time(s) in the step's {} s: a rate needs two; scrape more often than every {} s, or lengthen the steps",
            results::step::human(secs),
            results::step::human(secs / 2.0)
        ));
    }
    if values.is_empty() {
        return (None, notes);
    }
    let view = assemble(name, secs, &values, &mut notes);
    (Some(view), notes)
}

/// The view of a step `secs` long from the queries that gave a number, each into its field or,
/// with none, an extra; what is missing for the server's CPU said in `notes`.
fn assemble(
    name: &str,
    secs: f64,
    values: &[(&Query, f64)],
    notes: &mut Vec<String>,
) -> StepServer {
    let get = |key: &str| values.iter().find(|(q, _)| q.name == key).map(|(_, v)| *v);
    let round = |v: f64| (v * 1000.0).round() / 1000.0;
    let count = |key: &str| get(key).map_or(0, |v| v.max(0.0).round() as u64);
    let gauge = |v: f64| Gauge {
        min: round(v),
        avg: round(v),
        max: round(v),
    };
    let target = match (get("cpu_cores"), get("usable_cores").filter(|c| *c > 0.0)) {
        (Some(cores), Some(usable)) => Some(TargetStep {
            cpu_pct: round(cores * 100.0),
            cpu_user_pct: 0.0,
            cpu_system_pct: 0.0,
            cpu_util_pct: round(cores * 100.0 / usable),
            usable_cores: round(usable),
            thread_max_pct: None,
            busiest_thread: None,
            memory_bytes: get("memory_bytes").map(gauge).unwrap_or_default(),
            threads: Gauge::default(),
            open_fds: Gauge::default(),
            processes: Gauge::default(),
            voluntary_switches: 0,
            involuntary_switches: 0,
            throttled_pct: get("throttled_pct").map(round),
            memory_peak_bytes: None,
            oom_kills: None,
        }),
        (Some(_), None) => {
            notes.push(format!(
                "Prometheus {name}: usable_cores gave no number, so the server's CPU is not in its columns (its busy cores are in run.json's extra)"
            ));
            None
        }
        _ => None,
    };
    let fielded = sets::is_field;
    let extra = values
        .iter()
        .filter(|(q, _)| !fielded(&q.name) || (q.name == "cpu_cores" && target.is_none()))
        .map(|(q, v)| Extra {
            name: q.name.clone(),
            // As Prometheus said it: an extra's scale is the query's (a pause of 0.4 ms a second).
            value: *v,
            unit: q.unit.clone(),
        })
        .collect();
    StepServer {
        monitor: name.to_string(),
        watches: Watches::Unsaid,
        counted_s: round(secs),
        rated_s: round(secs),
        partial: false,
        samples: get("samples").map_or(0, |n| n.max(0.0).round() as u32),
        target,
        host: HostStep {
            cpu_pct: get(quantity::HOST_CPU_PCT.key).map(round),
            softirq_pct: get(quantity::HOST_SOFTIRQ_PCT.key).map(round),
            steal_pct: get("host_steal_pct").map(round),
            iowait_pct: get("host_iowait_pct").map(round),
            busiest_core: None,
            busiest_core_pct: None,
            run_queue: None,
            mem_available_bytes: get("host_mem_available_bytes").map(gauge),
        },
        net: Vec::new(),
        tcp: TcpCounters {
            listen_drops: count(quantity::TCP_LISTEN_DROPS.key),
            retrans_segs: count(quantity::TCP_RETRANS.key),
            ..TcpCounters::default()
        },
        monitor_cpu_pct: 0.0,
        series: Vec::new(),
        source: Source::Prometheus,
        extra,
    }
}

#[cfg(test)]
mod tests;
