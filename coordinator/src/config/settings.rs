//! The one settings value of a target: the flags over the plan file, other tools' habits mapped to
//! this plan's settings, and every default applied in one function. Resolvers take its plain values.
use std::path::{Path, PathBuf};

use shared::plan::{Arrival, LoadModel, TlsSessions, UrlOrder};

use super::{ConfigError, plan_file};
use crate::cli::{DurationText, Format, LossPolicy, Rate, RunArgs, Steps, StringOrList};

/// One target's settings: the flags over the plan file, other tools' habits mapped, and every default
/// applied (by [`Settings::of`], the one place they are). A setting with a default is a plain value
/// here; `given` keeps the rest, whose `None` means "not given" and is the resolver's to read. A
/// duration stays as written, parsed by the resolver that uses it: its refusal names the flag, in
/// the order the checks have always been made, and a setting nothing uses (`--wait-agents` without
/// agents to wait for) is refused by nothing.
#[derive(Debug, Clone)]
pub struct Settings {
    /// What the flags and the plan file gave, without the settings that have a default (those are
    /// taken out into the fields below, so no resolver reads a default as missing).
    pub given: RunArgs,
    /// Whether a step duration was given at all: its default must not collide with a --num-conn
    /// that ends the step instead.
    pub step_duration_given: bool,
    pub method: String,
    pub urls_order: UrlOrder,
    pub timeout: DurationText,
    pub ok_status: StringOrList,
    pub streams: u32,
    pub tls_sessions: TlsSessions,
    pub model: LoadModel,
    pub arrival: Arrival,
    pub step_duration: DurationText,
    pub num_call: u32,
    pub max_connections: u32,
    pub format: Format,
    pub seed: u64,
    pub wait_agents: DurationText,
    pub on_agent_loss: LossPolicy,
    pub monitor_processes: usize,
    /// The embedded agent's worker threads: one per core unless given.
    pub threads: usize,
    pub out: PathBuf,
    /// `out` is the default stamped directory: the run takes the first free name from it.
    pub out_default: bool,
}

impl Settings {
    /// Flags (and the target `url` among the positional arguments) over the `plan` file (its paths
    /// taken relative to it) over the defaults, with other tools' habits mapped.
    pub fn of(
        args: RunArgs,
        plan: Option<&Path>,
        url: Option<&str>,
    ) -> Result<Settings, ConfigError> {
        let (given, file) = given(args, plan, url)?;
        plan_file::required(&given, &file, plan)?;
        Ok(Settings::with_defaults(given))
    }

    /// Every default, applied once: clap's `default_value`s (`RunArgs::defaults`, which `--help`
    /// shows), the threads of this machine and a stamped output directory.
    fn with_defaults(mut given: RunArgs) -> Settings {
        let d = RunArgs::defaults();
        Settings {
            step_duration_given: given.step_duration.is_some(),
            method: or(given.method.take(), d.method),
            urls_order: or(given.urls_order.take(), d.urls_order),
            timeout: or(given.timeout.take(), d.timeout),
            ok_status: or(given.ok_status.take(), d.ok_status),
            streams: or(given.streams.take(), d.streams),
            tls_sessions: or(given.tls_sessions.take(), d.tls_sessions),
            model: or(given.model.take(), d.model),
            arrival: or(given.arrival.take(), d.arrival),
            step_duration: or(given.step_duration.take(), d.step_duration),
            num_call: or(given.num_call.take(), d.num_call),
            max_connections: or(given.max_connections.take(), d.max_connections),
            format: or(given.format.take(), d.format),
            seed: or(given.seed.take(), d.seed),
            wait_agents: or(given.wait_agents.take(), d.wait_agents),
            on_agent_loss: or(given.on_agent_loss.take(), d.on_agent_loss),
            monitor_processes: or(given.monitor_processes.take(), d.monitor_processes),
            threads: given.threads.unwrap_or_else(control::system::cores),
            out_default: given.out.is_none(),
            out: given.out.clone().unwrap_or_else(default_out_dir),
            given,
        }
    }
}

/// A setting as given, else its default: clap's `default_value`, which every setting read this way
/// has (the settings' unit test resolves them all from nothing).
fn or<T>(given: Option<T>, default: Option<T>) -> T {
    given
        .or(default)
        .expect("a setting with a plain value in Settings has a clap default_value")
}

/// What the flags and the `plan` file give together (the flags over the file, habits mapped), and
/// the file's settings alone (for the words of a need the file did not meet).
fn given(
    args: RunArgs,
    plan: Option<&Path>,
    url: Option<&str>,
) -> Result<(RunArgs, RunArgs), ConfigError> {
    let file = match plan {
        Some(p) => plan_file::relative_to(plan_file::read_plan_file(p)?, p),
        None => RunArgs::default(),
    };
    let file = match plan {
        Some(path) => plan_file::constrained(&args, file, path)?,
        None => {
            plan_file::constrained_flags(&args)?;
            file
        }
    };
    let url_arg = url.map(String::from);
    let url_shown = args
        .url
        .clone()
        .or(url_arg.clone())
        .or(file.url.clone())
        .unwrap_or_else(|| "URL".into());
    let args = RunArgs {
        url: args.url.clone().or(url_arg),
        ..args
    };
    // Flags over the file: the only place settings are combined.
    let given = habits(args.over(file.clone()), &url_shown)?;
    Ok((given, file))
}

/// Turns the other tools' habits (wrk/ab/oha `-c`, wrk2/vegeta `-R`/`--rate`, oha `-q`, ab `-n`) into
/// this plan's settings where they mean one thing, or refuses them naming the command that does it.
/// Runs before the defaults are filled in, so it sees only what the user set.
fn habits(mut s: RunArgs, url: &str) -> Result<RunArgs, ConfigError> {
    let ramp = s.steps.is_some() || s.low_rate.is_some() || s.high_rate.is_some();
    rate_habit(&mut s, url, ramp)?;
    connections_habit(&mut s, url, ramp)?;
    requests_habit(&mut s, url, ramp)?;
    Ok(s)
}

/// wrk2's `-R`, vegeta's `--rate`, oha's `-q`: one step of the requests model (with `-c`, its pool).
fn rate_habit(s: &mut RunArgs, url: &str, ramp: bool) -> Result<(), ConfigError> {
    let refuse = |m: String| Err(ConfigError::Habit(m));
    if let Some(Rate(rate)) = s.rate {
        let model = s.model.unwrap_or(LoadModel::Requests);
        if model != LoadModel::Requests {
            return refuse(format!(
                "--rate/-R is the requests model's rate, not the {model} model's step value: stampede run {url} --model {model} --steps {rate}"
            ));
        }
        if ramp {
            return refuse(format!(
                "--rate/-R {rate} is one step of the requests model; for several: stampede run {url} --model requests --steps {rate},{}",
                rate * 2.0
            ));
        }
        if let Some(n) = s.max_requests {
            let secs = n as f64 / rate;
            return refuse(format!(
                "-n {n} at {rate} req/s is {secs} s of the requests model: stampede run {url} --model requests --steps {rate} --step-duration {secs}s"
            ));
        }
        if let Some(c) = s.connections.take() {
            if s.max_connections.is_some() {
                return refuse(
                    "give -c or --max-connections, not both: with a rate both set the pool".into(),
                );
            }
            s.max_connections = Some(c);
        }
        s.model = Some(LoadModel::Requests);
        s.steps = Some(Steps(vec![rate]));
    }
    Ok(())
}

/// wrk's, ab's and oha's `-c` without a rate: one step of the closed loop.
fn connections_habit(s: &mut RunArgs, url: &str, ramp: bool) -> Result<(), ConfigError> {
    let refuse = |m: String| Err(ConfigError::Habit(m));
    if let Some(c) = s.connections.take() {
        let model = s.model.unwrap_or(LoadModel::Concurrency);
        if model != LoadModel::Concurrency {
            return refuse(format!(
                "-c/--connections {c} is a closed loop of {c} connections (wrk, ab), which the {model} model is not: stampede run {url} --model concurrency --steps {c} (or add --rate N for a pool of {c} in the requests model)"
            ));
        }
        if ramp {
            return refuse(format!(
                "-c/--connections {c} is one step; for several: stampede run {url} --model concurrency --steps {c},{}",
                c * 2
            ));
        }
        s.model = Some(LoadModel::Concurrency);
        s.steps = Some(Steps(vec![f64::from(c)]));
    }
    Ok(())
}

/// ab's `-n`: a closed loop's requests per step (one connection unless `-c` says more).
fn requests_habit(s: &mut RunArgs, url: &str, ramp: bool) -> Result<(), ConfigError> {
    let refuse = |m: String| Err(ConfigError::Habit(m));
    if let Some(n) = s.max_requests {
        match s.model {
            // ab's concurrency is 1 unless -c says otherwise.
            None if !ramp => {
                s.model = Some(LoadModel::Concurrency);
                s.steps = Some(Steps(vec![1.0]));
            }
            Some(LoadModel::Concurrency) => {}
            Some(LoadModel::Connections) | None => {
                return refuse(format!(
                    "-n {n} ends a closed loop after {n} requests (ab): stampede run {url} -c 10 -n {n}; the connections model ends a step after N connections: stampede run {url} --num-conn {n}"
                ));
            }
            Some(model) => {
                return refuse(format!(
                    "-n {n} ends a closed loop after {n} requests (ab), not the {model} model: stampede run {url} --model concurrency --steps 10 -n {n}"
                ));
            }
        }
    }
    Ok(())
}

fn utc_stamp() -> String {
    // 2026-11-30T20:15:00Z -> 20261130T201500Z: sortable and free of ':' for every file system.
    humantime::format_rfc3339_seconds(std::time::SystemTime::now())
        .to_string()
        .replace(['-', ':'], "")
}

pub fn default_out_dir() -> PathBuf {
    PathBuf::from("stampede-results").join(utc_stamp())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::tests::command_line;

    #[test]
    fn every_default_is_applied_once_and_left_out_of_what_was_given() {
        let s = Settings::of(RunArgs::default(), None, Some("http://h:1/")).unwrap();
        assert_eq!(
            (s.method.as_str(), s.streams, s.num_call, s.max_connections),
            ("GET", 1, 1, 1000)
        );
        assert_eq!(
            (s.timeout.0.as_str(), s.step_duration.0.as_str()),
            ("5s", "10s")
        );
        assert_eq!(
            (s.model, s.format, s.seed),
            (LoadModel::Connections, Format::Tsv, 1)
        );
        assert!(!s.step_duration_given && s.out_default && s.threads > 0);
        // What has a default is read from the settings alone, never from `given`.
        assert_eq!((s.given.method, s.given.step_duration), (None, None));
        let s = Settings::of(
            RunArgs {
                step_duration: Some(DurationText("2s".into())),
                ..RunArgs::default()
            },
            None,
            Some("http://h:1/"),
        )
        .unwrap();
        assert!(s.step_duration_given);
        assert_eq!(s.step_duration.0, "2s");
    }

    #[test]
    fn ab_n_below_its_connections_left_connections_without_a_count() {
        let e = command_line("run http://127.0.0.1:9/ -n 1 -c 2").unwrap_err();
        assert!(
            e.starts_with("-n 1 is fewer requests than the 2 connections of a step"),
            "{e}"
        );
        assert!(command_line("run http://127.0.0.1:9/ -n 2 -c 2").is_ok());
    }

    #[test]
    fn wrk_latency_and_ab_k_were_refused() {
        let c = command_line("run http://h:1/ --steps 1 --latency -k").unwrap();
        assert_eq!(c.notes.len(), 2, "{:?}", c.notes);
        assert!(
            c.notes[0]
                .starts_with("--latency: stampede always records the full latency distribution"),
            "{:?}",
            c.notes
        );
        assert!(c.notes[1].starts_with("-k: "), "{:?}", c.notes);
        let c = command_line("run http://h:1/ -c 10 -L").unwrap();
        assert_eq!(c.notes.len(), 1);
        assert!(
            command_line("run http://h:1/ --steps 1")
                .unwrap()
                .notes
                .is_empty()
        );
    }

    #[test]
    fn monitor_process_could_not_be_told_that_many_are_meant() {
        let c = command_line("run http://h:1/ --steps 1 --monitor-process nginx").unwrap();
        assert_eq!(c.monitor_processes, 64);
        let c = command_line(
            "run http://h:1/ --steps 1 --monitor-process python3 --monitor-processes 300",
        )
        .unwrap();
        assert_eq!(c.monitor_processes, 300);
    }
}
