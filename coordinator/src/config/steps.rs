//! The load model and its steps: an explicit list or a ramp, what ends each step, and the uncounted
//! warmup before the first.
use std::num::{NonZeroU32, NonZeroU64};
use std::time::Duration;

use shared::plan::{self, Plan, PlanError, StepLimit, Workload};

use super::{ConfigError, Settings, parse_duration, parse_pause};
use crate::cli::RunArgs;

/// The refusal of a ramp without `--rate-step` (`low` below `high`): a round step that makes at most
/// eleven steps of it, and `--steps` for its two ends alone.
fn no_rate_step(low: f64, high: f64) -> String {
    // A round step, 1, 2 or 5 times a power of ten, that makes at most 10 steps past the first.
    let tenth = (high - low) / 10.0;
    let power = 10f64.powf(tenth.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| (m * power * 1e6).round() / 1e6)
        .find(|s| *s >= tenth)
        .unwrap_or(tenth);
    let steps = plan::ramp(low, high, step).map_or(0, |s| s.len());
    format!(
        "--low-rate {low} --high-rate {high} needs --rate-step, the increment between steps: e.g. \
         --rate-step {step} ({steps} steps, {low} to {high}); for the two ends alone, --steps {low},{high}"
    )
}

/// The load model and its steps: an explicit list or a ramp, and what ends each step.
pub fn plan(s: &Settings, workload: Workload) -> Result<Plan, ConfigError> {
    let args = &s.given;
    let steps = values(args)?;
    let limit = limit(s)?;
    let nz = |what: &'static str, v: u32| {
        NonZeroU32::new(v).ok_or(PlanError::NotPositive {
            what,
            value: v.to_string(),
        })
    };
    let num_call = nz("--num-call", s.num_call)?;
    let max_connections = nz("--max-connections", s.max_connections)?;
    let plan = Plan::try_new(
        s.model,
        steps,
        limit,
        num_call,
        max_connections,
        s.arrival,
        workload,
    )?;
    let plan = match args.max_requests {
        Some(n) => plan.with_max_requests(NonZeroU64::new(n).ok_or(PlanError::NotPositive {
            what: "-n/--max-requests",
            value: "0".into(),
        })?)?,
        None => plan,
    };

    Ok(plan)
}

/// The step values: `--steps`, or a ramp from `--low-rate` to `--high-rate` by `--rate-step`.
fn values(args: &RunArgs) -> Result<Vec<f64>, ConfigError> {
    let explicit = args.steps.clone().map(|s| s.0);
    let low = args.low_rate;
    let high = args.high_rate;
    let step = args.rate_step;
    Ok(match (explicit, low, high, step) {
        (Some(_), Some(_), _, _) | (Some(_), _, Some(_), _) | (Some(_), _, _, Some(_)) => {
            return Err(ConfigError::Conflict(
                "give either --steps or --low-rate/--high-rate/--rate-step, not both".into(),
            ));
        }
        (Some(s), None, None, None) => s,
        (None, Some(l), Some(h), Some(s)) => plan::ramp(l, h, s)?,
        (None, Some(l), Some(h), None) => {
            // The ends are checked first (positive, in order), as a ramp's are.
            let ends = plan::ramp(l, h, if l == h { 1.0 } else { (h - l).abs() })?;
            if l != h {
                // It once ran the two ends alone, 2 steps where an autobench user expects a ramp:
                // refused, with a ramp's step and the two-step run each written out.
                return Err(ConfigError::Value(no_rate_step(l, h)));
            }
            ends
        }
        (None, Some(l), None, None) => vec![l],
        (None, None, None, None) => {
            return Err(ConfigError::NoSteps {
                url: args.url.clone().unwrap_or_else(|| "URL".into()),
            });
        }
        _ => {
            return Err(ConfigError::Conflict(
                "a ramp needs --low-rate, --high-rate and --rate-step".into(),
            ));
        }
    })
}

/// What ends each step: `--num-conn` connections, else `--step-duration` (given or its default).
fn limit(s: &Settings) -> Result<StepLimit, ConfigError> {
    let duration = parse_duration("--step-duration", &s.step_duration.0)?;
    Ok(match (s.given.num_conn, s.step_duration_given) {
        (Some(_), true) => {
            return Err(ConfigError::Conflict(
                "give --num-conn or --step-duration, not both: a step ends on one of them".into(),
            ));
        }
        (Some(n), false) => {
            StepLimit::Connections(NonZeroU64::new(n).ok_or(PlanError::NotPositive {
                what: "--num-conn",
                value: "0".into(),
            })?)
        }
        (None, _) => StepLimit::Duration(duration),
    })
}

/// `--warmup` as given (zero: none), at most a step's length: the warmup runs as a step of its own.
pub fn warmup(s: &Settings) -> Result<Option<Duration>, ConfigError> {
    let warmup = s
        .given
        .warmup
        .as_ref()
        .map(|w| parse_pause("--warmup", &w.0))
        .transpose()?;
    if let Some(w) = warmup.filter(|w| *w > plan::MAX_STEP_DURATION) {
        // Said here, not as the agent's "invalid step 1".
        return Err(ConfigError::Value(format!(
            "--warmup {}: a warmup is a step, and a step lasts at most {}",
            humantime::format_duration(w),
            humantime::format_duration(plan::MAX_STEP_DURATION)
        )));
    }
    Ok(warmup)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{DurationText, Steps};
    use crate::config::resolve;
    use crate::config::tests::{args, command_line, with_plan};

    #[test]
    fn ramp_from_flags() {
        let mut a = args("http://127.0.0.1:1/");
        a.low_rate = Some(10.0);
        a.high_rate = Some(30.0);
        a.rate_step = Some(10.0);
        a.num_call = Some(10);
        let c = resolve(a).unwrap();
        assert_eq!(c.plan.steps(), vec![10.0, 20.0, 30.0]);
        assert_eq!(c.plan.demanded_request_rate(20.0), Some(200.0));
        assert_eq!(c.host, "127.0.0.1");
    }

    #[test]
    fn bad_inputs_say_what_is_wrong() {
        let mut a = args("http://h/");
        a.low_rate = Some(50.0);
        a.high_rate = Some(10.0);
        assert_eq!(
            resolve(a).unwrap_err().to_string(),
            "--low-rate (50) is above --high-rate (10)"
        );
        let mut a = args("http://h/");
        a.steps = Some(Steps(vec![10.0, 0.0]));
        assert!(
            resolve(a)
                .unwrap_err()
                .to_string()
                .contains("must be a positive number, got 0")
        );
        let mut a = args("http://h/");
        a.steps = Some(Steps(vec![1.0]));
        a.step_duration = Some(DurationText("soon".into()));
        assert!(
            resolve(a)
                .unwrap_err()
                .to_string()
                .contains("'soon' is not a duration")
        );
        assert_eq!(
            command_line("run --steps 1 --model closed http://h/").unwrap_err(),
            "--model: unknown value 'closed': use connections, requests or concurrency"
        );
        assert!(
            resolve(args("http://h/"))
                .unwrap_err()
                .to_string()
                .contains("no steps")
        );
    }

    #[test]
    fn a_ramp_without_rate_step_ran_its_two_ends() {
        // Regression: `--low-rate 100 --high-rate 500` alone silently ran 2 steps of 10 s.
        let e = command_line("run http://h:1/ --low-rate 100 --high-rate 500").unwrap_err();
        assert_eq!(
            e,
            "--low-rate 100 --high-rate 500 needs --rate-step, the increment between steps: e.g. \
             --rate-step 50 (9 steps, 100 to 500); for the two ends alone, --steps 100,500"
        );
        let said = command_line("run http://h:1/ --low-rate 0.1 --high-rate 0.3").unwrap_err();
        assert!(said.contains("--rate-step 0.02 (11 steps"), "{said}");
        // The ends are checked before the step is asked for; equal ends are one step.
        assert_eq!(
            command_line("run http://h:1/ --low-rate 50 --high-rate 10").unwrap_err(),
            "--low-rate (50) is above --high-rate (10)"
        );
        let one = command_line("run http://h:1/ --low-rate 40 --high-rate 40").unwrap();
        assert_eq!(one.plan.steps(), vec![40.0]);
        let e = command_line("run http://h:1/ --high-rate 40 --rate-step 5").unwrap_err();
        assert_eq!(e, "a ramp needs --low-rate, --high-rate and --rate-step");
    }

    #[test]
    fn run_url_alone_was_refused_without_the_one_liner() {
        let e = command_line("run http://127.0.0.1:8080/").unwrap_err();
        assert!(
            e.starts_with(
                "no steps: say what load to send, e.g. `stampede run http://127.0.0.1:8080/ -c 10 -d 10s`"
            ),
            "{e}"
        );
        // The one-liner it offers runs.
        let c = command_line("run http://127.0.0.1:8080/ -c 10 -d 10s").unwrap();
        assert_eq!(c.plan.steps(), vec![10.0]);
        assert!(command_line("run http://127.0.0.1:8080/ -R 1000 -d 10s").is_ok());
        assert!(
            command_line("run http://h:1/ --low-rate 100 --high-rate 1000 --rate-step 100").is_ok()
        );
    }

    #[test]
    fn warmup_from_the_flag_or_the_plan_file_zero_being_none() {
        let c = command_line("run http://h:1/ --steps 10,20 --warmup 5s").unwrap();
        assert_eq!(c.warmup, Some(Duration::from_secs(5)));
        assert_eq!(c.echo.warmup_s, Some(5.0));
        let c = command_line("run http://h:1/ --steps 10").unwrap();
        assert_eq!((c.warmup, c.echo.warmup_s), (None, None));
        // 0 is no warmup: nothing in run.json's plan.
        let c = command_line("run http://h:1/ --steps 10 --warmup 0s").unwrap();
        assert_eq!(c.echo.warmup_s, None);
        let plan = "url = \"http://h:1/\"\nsteps = [1]\nwarmup = \"1500ms\"\n";
        let (_dir, got) = with_plan(plan, "");
        assert_eq!(got.unwrap().warmup, Some(Duration::from_millis(1500)));
        // The flag over the file, as every setting.
        let (_dir, got) = with_plan(plan, "--warmup 3s");
        assert_eq!(got.unwrap().echo.warmup_s, Some(3.0));
        let (_dir, got) = with_plan("url = \"http://h:1/\"\nsteps = [1]\nwarmup = 2\n", "");
        assert_eq!(got.unwrap().warmup, Some(Duration::from_secs(2)));
    }

    #[test]
    fn a_negative_or_unreadable_warmup_was_refused_as_usage() {
        for (line, words) in [
            ("run http://h:1/ --steps 1 --warmup -1s", "--warmup"),
            ("run http://h:1/ --steps 1 --warmup=-2s", "--warmup"),
            ("run http://h:1/ --steps 1 --warmup soon", "--warmup"),
            ("run http://h:1/ --steps 1 --warmup 5parsecs", "--warmup"),
        ] {
            let argv = std::iter::once("stampede").chain(line.split_whitespace());
            let crate::cli::Command::Run(a) = crate::cli::parse_from(argv).unwrap().command else {
                unreachable!("a run command line")
            };
            let e = resolve(*a).unwrap_err();
            assert!(e.to_string().contains(words), "{line}: {e}");
            assert_eq!(crate::run::RunError::from(e).exit_code(), 2, "{line}");
        }
        let (_dir, got) = with_plan("url = \"http://h:1/\"\nsteps = [1]\nwarmup = \"-1s\"\n", "");
        assert!(got.unwrap_err().to_string().contains("--warmup"));
    }
}
