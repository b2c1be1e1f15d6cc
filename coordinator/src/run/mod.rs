//! Drives a run: for each step, splits it among the live agents, prepares it, measures their clocks,
//! starts it at one instant, merges the streamed intervals, handles lost agents by policy, summarises
//! and writes. This task alone owns the run's state; agents' messages reach it through the fleet.
use std::path::PathBuf;
use std::time::Duration;

use agent::link::CoordinatorEnd;
use proto::pb;
use proto::pb::coordinator_message::Kind as Down;
use shared::condition::Observed;
use shared::report::{self, StepResult};
use shared::verdict::{Server, Verdict};
use tokio_util::sync::CancellationToken;

use crate::config::{ConfigError, RunConfig, Thresholds};
use crate::fleet::{self, Fleet, FleetError};
use crate::merge::SpillError;
use crate::output::{self, DirError, Finished, Output, OutputError};
use crate::progress::{self, Progress};

#[cfg(test)]
mod control_tests;
#[cfg(test)]
mod fake_agent;
mod source;
mod step;
mod warned;

pub use source::{Planned, StepSource, StepSpec};
pub use step::{EndCause, LOSS_SILENCE, STEP_GRACE, StepOutcome};
use step::{StepCx, run_step};
use warned::Warned;

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Fleet(#[from] FleetError),
    #[error("no agent is left to run step {step}")]
    NoAgents { step: usize },
    #[error("{0}")]
    Output(#[from] OutputError),
    #[error(transparent)]
    Dir(#[from] DirError),
    #[error("interrupted before the first step")]
    Interrupted,
    #[error(transparent)]
    Spill(#[from] SpillError),
}

impl RunError {
    /// 2 for what the user must fix before running, 1 for a run that failed.
    pub fn exit_code(&self) -> u8 {
        match self {
            RunError::Config(_) | RunError::Dir(_) => 2,
            RunError::Fleet(e) if e.is_usage() => 2,
            _ => 1,
        }
    }
}

pub struct RunOutcome {
    pub dir: PathBuf,
    pub steps: Vec<StepResult>,
    pub aborted: bool,
    /// Why --stop-on ended the ramp before its last step.
    pub stopped: Option<Stopped>,
    /// Every --fail-on expression a step breached, in step order.
    pub breaches: Vec<Breach>,
}

pub use shared::run_file::{Breach, Stopped};

/// What the run carries from step to step: the thresholds and the count of breaching steps in a
/// row, the breaches, the latency baseline, the warnings already said.
struct Watch<'a> {
    thresholds: &'a Thresholds,
    streak: u32,
    breaches: Vec<Breach>,
    /// Set by the step that ends the ramp: why.
    stop: Option<String>,
    /// The lowest median of the finished steps whose server was ok (see [`baseline_p50`]): what
    /// the next step's queueing is judged against.
    baseline_p50_ms: Option<f64>,
    /// The agents' warnings already said in this run.
    warned: Warned,
}

impl Watch<'_> {
    /// Judges a finished step before it is written, so its notes name every breach; sets `stop` once
    /// --stop-after steps in a row breached some --stop-on.
    fn judge(&mut self, r: &mut StepResult, step: usize) {
        let seen = Observed::of(r);
        let t = self.thresholds;
        let mut stop = Vec::new();
        for c in &t.stop_on {
            if let Some(because) = c.holds_because(&seen) {
                r.notes.push(format!("--stop-on {c}: {because}"));
                stop.push(because);
            }
        }
        for c in &t.fail_on {
            if let Some(because) = c.holds_because(&seen) {
                r.notes.push(format!("--fail-on {c}: {because}"));
                self.breaches.push(Breach {
                    step,
                    step_value: r.step_value,
                    expression: c.to_string(),
                    because,
                });
            }
        }
        if stop.is_empty() {
            self.streak = 0;
            return;
        }
        self.streak += 1;
        if self.streak >= t.stop_after {
            let mut because = stop.join("; ");
            if t.stop_after > 1 {
                because.push_str(&format!(" ({} steps in a row)", self.streak));
            }
            self.stop = Some(because);
        }
    }
}

/// How a run is asked to stop. `drain` (the first Ctrl-C) aborts the running step and lets its
/// requests in flight finish within the timeout; the step is still written, marked aborted. `now`
/// (the second) stops at once: the steps already written are kept, the running one is dropped.
#[derive(Debug, Clone, Default)]
pub struct Stop {
    pub drain: CancellationToken,
    pub now: CancellationToken,
}

/// Runs the plan into a directory of its own (see [`output::claim`]).
pub async fn run(cfg: RunConfig, stop: Stop) -> Result<RunOutcome, RunError> {
    run_with(cfg, stop, None).await
}

/// [`run`], over `links` when given (agents already connected: the tests' scripted agents) instead
/// of dialing the configured ones.
async fn run_with(
    mut cfg: RunConfig,
    stop: Stop,
    links: Option<Vec<(String, CoordinatorEnd)>>,
) -> Result<RunOutcome, RunError> {
    cfg.out = output::claim(&cfg.out, cfg.out_default, cfg.force)?;
    let dir = cfg.out.clone();
    let outcome = run_in(cfg, stop, links).await;
    if let Err(e) = &outcome {
        output::release(&dir);
        if let RunError::Output(_) | RunError::Spill(_) = e {
            eprintln!(
                "stampede: the steps finished before this are kept in {}",
                dir.display()
            );
        }
    }
    outcome
}

/// How the ramp ended, when no error ended it.
struct Ramped {
    aborted: bool,
    stopped: Option<Stopped>,
}

async fn run_in(
    cfg: RunConfig,
    stop: Stop,
    links: Option<Vec<(String, CoordinatorEnd)>>,
) -> Result<RunOutcome, RunError> {
    let (mut fleet, warnings, warned) = tokio::select! {
        ready = ready_fleet(&cfg, links) => ready?,
        _ = stop.now.cancelled() => return Err(RunError::Interrupted),
    };
    let mut out = Output::create(&cfg, &fleet.infos(), &warnings)?;
    let total = plan_total(&cfg);
    if !cfg.quiet {
        eprintln!("{}", progress::plan_line(&cfg.plan, total, out.dir()));
    }
    let progress = Progress::new(cfg.quiet, total);
    let mut results = Vec::new();
    let mut watch = Watch {
        thresholds: &cfg.thresholds,
        streak: 0,
        breaches: Vec::new(),
        stop: None,
        baseline_p50_ms: None,
        warned,
    };
    let cx = StepCx {
        cfg: &cfg,
        progress: &progress,
        drain: &stop.drain,
    };
    let mut source = Planned::new(cfg.plan.steps());
    let outcome = ramp(
        &mut fleet,
        &cx,
        &mut source,
        &stop,
        &mut out,
        &mut watch,
        &mut results,
    )
    .await;
    let stopped = outcome.as_ref().ok().and_then(|r| r.stopped.clone());
    out.record_end(stopped, watch.breaches.clone());
    let status = match &outcome {
        Ok(r) if r.aborted => "aborted",
        Ok(_) => "completed",
        Err(_) => "failed",
    };
    let finished = out.finish(status);
    tell_unfinished(out.dir(), status, &finished);
    // After the finish, so the page says how the run ended.
    let reported = out.write_report();
    let ramped = outcome?;
    finished?;
    reported?;
    Ok(RunOutcome {
        dir: out.dir().to_path_buf(),
        steps: results,
        aborted: ramped.aborted,
        stopped: ramped.stopped,
        breaches: watch.breaches,
    })
}

/// Runs the steps the source gives, each written before the next, until it gives none, one is
/// aborted, or --stop-on ends the ramp.
async fn ramp(
    fleet: &mut Fleet,
    cx: &StepCx<'_>,
    source: &mut dyn StepSource,
    stop: &Stop,
    out: &mut Output,
    watch: &mut Watch<'_>,
    results: &mut Vec<StepResult>,
) -> Result<Ramped, RunError> {
    let planned = cx.cfg.plan.steps().len();
    while let Some(spec) = source.next(results.last()) {
        if stop.drain.is_cancelled() || stop.now.is_cancelled() {
            return Ok(Ramped {
                aborted: true,
                stopped: None,
            });
        }
        // Dropping the step at an await leaves no half of it on disk: it is written in one
        // synchronous stretch at its end (its row and hlog, then run.json with the summary).
        watch.baseline_p50_ms = baseline_p50(results);
        let StepOutcome { result, end_run } = tokio::select! {
            step = run_step(fleet, cx, spec, out, watch) => step?,
            _ = stop.now.cancelled() => return Ok(Ramped { aborted: true, stopped: None }),
        };
        let aborted = result.aborted || end_run.is_some();
        let because = watch.stop.take();
        results.push(result);
        out.summarize(&report::summarize_run(results))?;
        if aborted {
            return Ok(Ramped {
                aborted,
                stopped: None,
            });
        }
        let not_run = source.not_run();
        if let Some(because) = because.filter(|_| !not_run.is_empty()) {
            eprintln!(
                "stampede: stopping after step {} of {planned} (--stop-on): {because}; not run: {}",
                spec.index + 1,
                not_run
                    .iter()
                    .map(f64::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            let stopped = Stopped {
                after_step: spec.index + 1,
                because,
                not_run,
            };
            return Ok(Ramped {
                aborted: false,
                stopped: Some(stopped),
            });
        }
    }
    Ok(Ramped {
        aborted: false,
        stopped: None,
    })
}

/// Reaches (or takes the `links` to), greets and configures the agents, and checks the plan against
/// what they announced.
async fn ready_fleet(
    cfg: &RunConfig,
    links: Option<Vec<(String, CoordinatorEnd)>>,
) -> Result<(Fleet, Vec<String>, Warned), RunError> {
    let mut fleet = match links {
        Some(links) => Fleet::new(links, CancellationToken::new()),
        None => fleet::connect(cfg).await?,
    };
    fleet.hello(cfg.token.as_deref()).await?;
    let all = fleet.live();
    if !cfg.plan.workload().source_addrs().is_empty() {
        fleet.check_source_addrs()?;
    }
    let configure: pb::Configure = cfg.plan.workload().into();
    let warnings = fleet
        .command_all(
            &all,
            |_| Down::Configure(configure.clone()),
            "configuring it",
            false,
        )
        .await?;
    let mut warned = Warned::default();
    let warnings = warned.announce(&fleet, &warnings);
    check_limits(&fleet, cfg)?;
    Ok((fleet, warnings, warned))
}

/// Says on stderr what run.json could not say: it is the run's record, and a status left at
/// "running" after the process has gone would be read as a run still going.
fn tell_unfinished(dir: &std::path::Path, status: &str, finished: &Result<Finished, OutputError>) {
    match finished {
        Ok(Finished::Whole) => {}
        Ok(Finished::StatusOnly(e)) => eprintln!(
            "stampede: {e}; run.json in {} was marked \"{}\" in place, without its end time",
            dir.display(),
            if status.len() <= "running".len() {
                status
            } else {
                "failed"
            }
        ),
        Err(e) => eprintln!(
            "stampede: {e}; run.json in {} still says \"running\": the run ended {status}",
            dir.display()
        ),
    }
}

/// The plan's scheduled time, step after step (without the moments between steps).
fn plan_total(cfg: &RunConfig) -> Duration {
    source::planned(cfg)
        .map(|spec| source::shares(cfg, spec, &[1])[0].scheduled_duration())
        .sum()
}

/// Refuses, before any load, a plan that some agent's announced limits would refuse at some step:
/// its policy, or its sockets (fd limit, ports). Warnings are left to the agents, which know the
/// resolved target and say them when each step is prepared.
fn check_limits(fleet: &Fleet, cfg: &RunConfig) -> Result<(), RunError> {
    let who = fleet.live();
    let weights = fleet.weights(&who, cfg.agent_weights.as_deref());
    let route = route(cfg);
    let mut used = Duration::ZERO;
    for spec in source::planned(cfg) {
        let shares = source::shares(cfg, spec, &weights);
        for (k, &i) in who.iter().enumerate() {
            fleet.check_share(i, &shares[k], used, &route)?;
        }
        used += shares[0].scheduled_duration();
    }
    Ok(())
}

/// The route as the coordinator knows it: it does not resolve the target, so a host name's
/// loopback-ness is left open (the agent checks again with the resolved address).
fn route(cfg: &RunConfig) -> agent::capacity::Route {
    let w = cfg.plan.workload();
    let host = w.origin().host();
    agent::capacity::Route {
        timeout: w.timeout(),
        connect_timeout: w.connect_timeout(),
        sources: w.source_addrs().len(),
        loopback: match host.parse::<std::net::IpAddr>() {
            Ok(ip) => Some(ip.is_loopback()),
            Err(_) if host.eq_ignore_ascii_case("localhost") => Some(true),
            Err(_) => None,
        },
        server_closes: w.server_closes_last(),
    }
}

/// The lowest median latency among the finished steps whose server was ok and whose numbers can be
/// trusted: what a later step's queueing is measured against.
fn baseline_p50(results: &[StepResult]) -> Option<f64> {
    results
        .iter()
        .filter(|r| r.server == Server::Ok && r.trust == Verdict::Valid && r.ok > 0)
        .map(|r| r.latency_ms.p50)
        .min_by(f64::total_cmp)
}

#[cfg(test)]
mod tests {
    use super::*;
    use shared::metrics::Snapshot;
    use shared::report::StepInput;

    /// A finished step of 100 requests, all answered in `latency_ms`.
    fn step(latency_ms: u64) -> StepResult {
        let mut s = Snapshot::default();
        s.counters.requests = 100;
        s.counters.replies = 100;
        s.counters.ok = 100;
        s.hist.latency.record_n(latency_ms * 1000, 100).unwrap();
        report::summarize(&StepInput {
            number: 1,
            model: shared::plan::LoadModel::Requests,
            value: 100.0,
            demanded_rate: Some(100.0),
            duration: Duration::from_secs(1),
            total: &s,
            series: &[],
            agents: vec![],
            aborted: false,
            mark_lost: true,
            start_skew: None,
            ok_status: &shared::status::StatusSet::default(),
            baseline_p50_ms: None,
        })
    }

    fn watch(t: &Thresholds) -> Watch<'_> {
        Watch {
            thresholds: t,
            streak: 0,
            breaches: Vec::new(),
            stop: None,
            baseline_p50_ms: None,
            warned: Warned::default(),
        }
    }

    #[test]
    fn stop_after_n_ended_the_ramp_at_the_first_breach() {
        let t = Thresholds {
            stop_on: vec!["p99>500ms".parse().unwrap()],
            stop_after: 2,
            fail_on: vec![],
        };
        let mut w = watch(&t);
        // A breach, a recovery, then two in a row: only the second of those ends the ramp.
        for (i, ms) in [800, 10, 800].into_iter().enumerate() {
            w.judge(&mut step(ms), i + 1);
            assert_eq!(w.stop, None, "step {}", i + 1);
        }
        let mut r = step(900);
        w.judge(&mut r, 4);
        let because = w.stop.take().unwrap();
        assert!(
            because.starts_with("p99 ") && because.ends_with("ms > 500 ms (2 steps in a row)"),
            "{because}"
        );
        assert!(
            r.notes
                .iter()
                .any(|n| n.starts_with("--stop-on p99>500ms: p99 "))
        );
    }

    #[test]
    fn fail_on_names_every_step_that_breached() {
        let t = Thresholds {
            stop_on: vec![],
            stop_after: 1,
            fail_on: vec!["p50>=20ms".parse().unwrap(), "failed>1%".parse().unwrap()],
        };
        let mut w = watch(&t);
        for (i, ms) in [5, 30, 10, 20].into_iter().enumerate() {
            w.judge(&mut step(ms), i + 1);
        }
        assert_eq!(w.stop, None, "--fail-on never ends the ramp");
        let got: Vec<(usize, &str)> = w
            .breaches
            .iter()
            .map(|b| (b.step, b.expression.as_str()))
            .collect();
        assert_eq!(got, vec![(2, "p50>=20ms"), (4, "p50>=20ms")]);
    }
}
