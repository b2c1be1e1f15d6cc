//! One target's side of a run: its configuration, results directory, thresholds, steps so far and
//! how its ramp ended. A run has one per target (side by side, several), driven over one fleet in
//! turn by `ramp`. A planned run's warmup runs right before the target's first step, in the same
//! turn, so no other target's load comes between them.
use results::run_file::RunStatus;
use results::search::Capacity;
use results::step::{self, StepResult};

use super::source::Ended;
use super::step::{StepCx, run_step};
use super::warned::Warned;
use super::{
    RunError, RunOutcome, StepOutcome, StepSource, StepSpec, Stop, Stopped, Watch, baseline_p50,
    blame, tell_unfinished,
};
use crate::config::RunConfig;
use crate::fleet::{Fleet, FleetError};
use crate::output::{Output, OutputError};
use crate::progress::Progress;

pub(super) struct TargetRun<'a> {
    pub cfg: &'a RunConfig,
    pub out: Output,
    pub watch: Watch<'a>,
    pub results: Vec<StepResult>,
    pub source: Box<dyn StepSource + Send + 'a>,
    pub progress: Progress,
    /// How its ramp ended; `None` while it goes on.
    pub ended: Option<super::Ramped>,
    /// A search's answer, once the target has finished.
    pub capacity: Option<Capacity>,
    /// A planned run's warmup, once run: never among `results`.
    pub warmup: Option<StepResult>,
}

/// What a target's step means for the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum After {
    /// This target goes on, or its own ramp ended (--stop-on, or its last step).
    Next,
    /// The step was aborted (an interrupt, a lost agent under `abort`): every target ends.
    AbortAll,
}

impl<'a> TargetRun<'a> {
    pub fn new(
        cfg: &'a RunConfig,
        out: Output,
        warned: Warned,
        progress: Progress,
        source: Box<dyn StepSource + Send + 'a>,
    ) -> TargetRun<'a> {
        TargetRun {
            cfg,
            out,
            watch: Watch {
                thresholds: &cfg.thresholds,
                streak: 0,
                breaches: Vec::new(),
                stop: None,
                baseline_p50_ms: None,
                warned,
                repeats: Vec::new(),
            },
            results: Vec::new(),
            source,
            progress,
            ended: None,
            capacity: None,
            warmup: None,
        }
    }

    /// How a fleet's error reads in this target's run: naming the target when there are others.
    pub fn blame(&self) -> impl FnOnce(FleetError) -> RunError + '_ {
        let side = self.progress.label().is_some();
        move |e| blame(side, self.cfg, e)
    }

    /// Runs one step of this target and writes it; ends the target's ramp when --stop-on says so.
    // Dropping the step at an await leaves no half of it on disk: it is written in one synchronous
    // stretch at its end (its row and hlog, then run.json with the summary).
    /// A warmup (a spec not counted) is run first, then the step after it, in the same turn.
    pub async fn step(
        &mut self,
        fleet: &mut Fleet,
        mut spec: StepSpec,
        stop: &Stop,
    ) -> Result<After, RunError> {
        if !spec.counted {
            if self.warm_up(fleet, spec, stop).await? == After::AbortAll {
                return Ok(After::AbortAll);
            }
            let Some(next) = self.source.next(None) else {
                self.ended = Some(super::Ramped::default());
                return Ok(After::Next);
            };
            spec = next;
        }
        let Some(StepOutcome { result, end_run }) = self.run_one(fleet, spec, stop).await? else {
            return Ok(After::AbortAll);
        };
        // A step that overran its own deadline (nobody stopped it) ends a planned run; a search
        // counts it as a probe the generator could not carry, and goes on.
        let overran = result.aborted
            && end_run.is_none()
            && !stop.drain.is_cancelled()
            && !stop.now.is_cancelled();
        let aborted =
            (result.aborted && !(overran && self.source.outlasts_overruns())) || end_run.is_some();
        let because = self.watch.stop.take();
        self.results.push(result);
        self.out
            .write_summary(&step::summarize_run(&self.results))?;
        if aborted {
            return Ok(After::AbortAll);
        }
        // A search judges a refusing target itself (doomed); a planned ramp would only repeat it.
        let planned = self.cfg.echo.find_max.is_none();
        let at = self.cfg.plan.workload().origin().authority();
        if let Some(why) = self
            .results
            .last()
            .and_then(|r| nothing_connected(r, &at))
            .filter(|_| planned)
        {
            let who = self
                .progress
                .label()
                .map_or(String::new(), |l| format!("{l}: "));
            eprintln!("stampede: {who}{why}");
            self.ended = Some(super::Ramped {
                aborted: true,
                stopped: None,
            });
            return Ok(After::Next);
        }
        let not_run = self.source.not_run();
        if let Some(because) = because.filter(|_| !not_run.is_empty()) {
            self.stop_ramp(spec, because, not_run);
        }
        Ok(After::Next)
    }

    /// Runs a warmup and keeps it apart from the steps. One cut short (an interrupt, an overrun, a
    /// lost agent under `abort`) ends the run as a step cut short would.
    async fn warm_up(
        &mut self,
        fleet: &mut Fleet,
        spec: StepSpec,
        stop: &Stop,
    ) -> Result<After, RunError> {
        let Some(StepOutcome { result, end_run }) = self.run_one(fleet, spec, stop).await? else {
            return Ok(After::AbortAll);
        };
        let aborted = result.aborted || end_run.is_some();
        self.warmup = Some(result);
        if aborted || stop.drain.is_cancelled() || stop.now.is_cancelled() {
            return Ok(After::AbortAll);
        }
        Ok(After::Next)
    }

    /// Runs one step (after its pause) and writes it, or `None` when the run is stopped before it
    /// ends.
    async fn run_one(
        &mut self,
        fleet: &mut Fleet,
        spec: StepSpec,
        stop: &Stop,
    ) -> Result<Option<StepOutcome>, RunError> {
        self.watch.baseline_p50_ms = baseline_p50(&self.results);
        let (feed, target) = self.out.feed();
        let feed = feed.clone();
        let cx = StepCx {
            cfg: self.cfg,
            progress: &self.progress,
            drain: &stop.drain,
            earlier: &self.results,
            steps: self.source.planned(),
            outlasts_overruns: self.source.outlasts_overruns(),
            feed: &feed,
            target,
        };
        if !spec.pause.is_zero() {
            tokio::select! {
                () = tokio::time::sleep(spec.pause) => {}
                () = stop.drain.cancelled() => return Ok(None),
                () = stop.now.cancelled() => return Ok(None),
            }
        }
        let source = self.source.as_mut();
        tokio::select! {
            step = run_step(fleet, &cx, spec, &mut self.out, &mut self.watch, source) => step.map(Some),
            _ = stop.now.cancelled() => Ok(None),
        }
    }

    /// Ends this target's ramp after `spec` (--stop-on), saying so; other targets go on.
    fn stop_ramp(&mut self, spec: StepSpec, because: String, not_run: Vec<f64>) {
        let planned = self.cfg.plan.steps().len();
        let (who, others) = match self.progress.label() {
            Some(l) => (format!("{l}: "), "; the other targets go on"),
            None => (String::new(), ""),
        };
        eprintln!(
            "stampede: {who}stopping after step {} of {planned} (--stop-on): {because}; not run: {}{others}",
            spec.index + 1,
            not_run
                .iter()
                .map(f64::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        );
        self.ended = Some(super::Ramped {
            aborted: false,
            stopped: Some(Stopped {
                after_step: spec.index + 1,
                because,
                not_run,
            }),
        });
    }

    /// Ends the target's ramp as aborted, unless it had ended already.
    pub fn abort(&mut self) {
        if self.ended.is_none() {
            self.ended = Some(super::Ramped {
                aborted: true,
                stopped: None,
            });
        }
    }

    /// Writes how the target ended into its run.json: `failed` with the error's words (`failed`, among
    /// its warnings) when an error ended the run; a search's answer, with the bounds known so far
    /// when it was cut short.
    pub fn finish(&mut self, failed: Option<&str>) -> Result<(), OutputError> {
        if let Some(why) = failed {
            self.out.record_failure(why);
        }
        let failed = failed.is_some();
        let ramped = self.ended.clone().unwrap_or_default();
        self.out
            .record_end(ramped.stopped.clone(), self.watch.breaches.clone());
        let ended = match () {
            () if failed => Ended::Failed,
            () if ramped.aborted => Ended::Interrupted,
            () => Ended::Completed,
        };
        self.capacity = self.source.conclude(ended);
        if let Some(c) = self.capacity.as_ref().filter(|_| failed) {
            // The error is said by the caller; the bounds the search had are said here, so a failed
            // search never ends with nothing.
            eprintln!("stampede: find-max ended {}: {}", c.status.name(), c.answer);
        }
        self.out.record_capacity(self.capacity.clone());
        let status = match () {
            () if failed => RunStatus::Failed,
            () if ramped.aborted => RunStatus::Aborted,
            () => RunStatus::Completed,
        };
        let finished = self.out.finish(status);
        tell_unfinished(self.out.dir(), status, &finished);
        // After the finish, so the page says how the run ended.
        let reported = self.out.write_report();
        finished?;
        reported
    }

    pub fn outcome(self) -> RunOutcome {
        let ramped = self.ended.unwrap_or_default();
        RunOutcome {
            dir: self.out.dir().to_path_buf(),
            label: self.cfg.label.clone(),
            steps: self.results,
            aborted: ramped.aborted,
            stopped: ramped.stopped,
            breaches: self.watch.breaches,
            capacity: self.capacity,
            warmup: self.warmup,
            repeats: self.watch.repeats,
            live: None,
        }
    }
}

/// A step in which every request failed at connect (refused, or no answer to the SYN) and none
/// connected: nothing listens at `at`, so the rest of the ramp would only say it again. The words
/// that end the run.
pub(super) fn nothing_connected(r: &StepResult, at: &str) -> Option<String> {
    let at_connect = r.errors.get("conn-refused") + r.errors.get("connect-timeout");
    (r.connections == 0 && r.replies == 0 && r.due > 0 && at_connect > 0 && at_connect >= r.failed)
        .then(|| {
            format!(
                "nothing at {at} accepted a connection in step {}: is the server up? (the run stops here; the step is in the results)",
                r.number
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use results::step::StepInput;
    use shared::metrics::{ErrorClass, Snapshot};

    /// A step of 20 requests due: `refused` of them refused at connect, `timed_out` timed out after
    /// connecting, `connections` established.
    fn step(refused: u64, timed_out: u64, connections: u64) -> StepResult {
        let mut s = Snapshot::default();
        s.counters.requests = timed_out;
        s.counters.unsent = refused;
        s.counters.connections = connections;
        s.counters.errors[ErrorClass::ConnRefused.index()] = refused;
        s.counters.errors[ErrorClass::ClientTimeout.index()] = timed_out;
        step::summarize(&StepInput {
            number: 1,
            model: shared::plan::LoadModel::Connections,
            value: 20.0,
            demanded_rate: Some(20.0),
            duration: std::time::Duration::from_secs(1),
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

    #[test]
    fn a_target_that_refused_every_connection_ran_the_whole_ramp() {
        assert_eq!(
            nothing_connected(&step(20, 0, 0), "127.0.0.1:9").as_deref(),
            Some(
                "nothing at 127.0.0.1:9 accepted a connection in step 1: is the server up? (the run stops here; the step is in the results)"
            )
        );
        // One connection, or one failure of another kind, and the target was there.
        assert_eq!(nothing_connected(&step(20, 0, 1), "127.0.0.1:9"), None);
        assert_eq!(nothing_connected(&step(10, 10, 0), "127.0.0.1:9"), None);
    }
}
