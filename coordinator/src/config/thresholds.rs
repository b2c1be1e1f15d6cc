//! `--stop-on`, `--stop-after` and `--fail-on`: the one threshold grammar's expressions, checked
//! against the load model and the plan's request names.
use shared::plan::{LoadModel, Plan, PlanError};

use super::ConfigError;

/// `--stop-on`, `--stop-after` and `--fail-on`, resolved.
#[derive(Debug, Clone)]
pub struct Thresholds {
    pub stop_on: Vec<results::condition::Condition>,
    /// Steps in a row that must breach some `stop_on` condition (at least 1).
    pub stop_after: u32,
    pub fail_on: Vec<results::condition::Condition>,
}

/// --stop-on, --stop-after and --fail-on (the plan file's and the flags'), parsed and checked against
/// the plan: a share of the demanded rate needs a model that demands one, a request's name one the
/// plan has.
pub fn thresholds(
    stop_on: &[String],
    stop_after: Option<u32>,
    fail_on: &[String],
    plan: &Plan,
) -> Result<Thresholds, ConfigError> {
    let stop_on = conditions("--stop-on", stop_on, plan)?;
    let fail_on = conditions("--fail-on", fail_on, plan)?;
    let stop_after = match stop_after {
        None => 1,
        Some(0) => {
            return Err(PlanError::NotPositive {
                what: "--stop-after",
                value: "0".into(),
            }
            .into());
        }
        Some(_) if stop_on.is_empty() => {
            return Err(ConfigError::Conflict(
                "--stop-after counts steps that breach a --stop-on: give --stop-on EXPR too".into(),
            ));
        }
        Some(n) => n,
    };
    Ok(Thresholds {
        stop_on,
        stop_after,
        fail_on,
    })
}

/// Expressions of the one threshold grammar, each checked against the model (the closed model
/// demands no rate, so a share of the demanded rate means nothing there) and the plan's names (a
/// name it does not send would never be judged: refused before any load, not silently passed).
pub fn conditions(
    flag: &'static str,
    list: &[String],
    plan: &Plan,
) -> Result<Vec<results::condition::Condition>, ConfigError> {
    list.iter()
        .map(|text| {
            let c = results::condition::parse(text)
                .map_err(|source| ConfigError::Condition { flag, source })?;
            if c.needs_demanded_rate() && plan.model() == LoadModel::Concurrency {
                return Err(ConfigError::Value(format!(
                    "{flag} '{text}': the concurrency model demands no rate; write ok_rate in /s (e.g. {}<{}/s)",
                    c.subject(),
                    c.threshold.value
                )));
            }
            if let Some(name) = &c.request {
                check_name(flag, text, name, plan.workload().names())?;
            }
            Ok(c)
        })
        .collect()
}

/// A condition's request name is one of the plan's.
fn check_name(flag: &str, text: &str, name: &str, names: &[String]) -> Result<(), ConfigError> {
    if names.iter().any(|n| n == name) {
        return Ok(());
    }
    Err(ConfigError::Value(if names.is_empty() {
        format!(
            "{flag} '{text}': the requests are unnamed (one URL or --urls): name them in a plan file's [[request]] tables, or drop [{name}]"
        )
    } else {
        format!(
            "{flag} '{text}': the plan has no request named '{name}' (its names: {})",
            names.join(", ")
        )
    }))
}

#[cfg(test)]
mod tests {
    use crate::config::tests::command_line;

    #[test]
    fn thresholds_from_a_plan_file_and_the_flags() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("plan.toml");
        std::fs::write(
            &p,
            "url = \"http://127.0.0.1:9/\"\nsteps = [1]\nstop_on = [\"p99 > 1s\"]\nstop_after = 2\nfail_on = [\"failed>1%\"]\n",
        )
        .unwrap();
        let plan = p.to_str().unwrap();
        let c = command_line(&format!("run {plan}")).unwrap();
        assert_eq!(c.thresholds.stop_on[0].to_string(), "p99>1s");
        assert_eq!(c.thresholds.stop_after, 2);
        assert_eq!(c.echo.fail_on[0], "failed>1%");
        // Lists add up, the file's first, as every list setting does.
        let c = command_line(&format!("run {plan} --stop-on mean>=2ms")).unwrap();
        assert_eq!(c.echo.stop_on, ["p99>1s", "mean>=2ms"]);
        std::fs::write(
            &p,
            "url = \"http://127.0.0.1:9/\"\nsteps = [1]\nfail_on = [\"p99>\"]\n",
        )
        .unwrap();
        let e = command_line(&format!("run {plan}")).unwrap_err();
        assert!(
            e.starts_with(
                "--fail-on 'p99>': expected a number after '>', found the end at column 5\n"
            ),
            "{e}"
        );
        let e = command_line("run http://127.0.0.1:9/ --steps 1 --stop-after 2").unwrap_err();
        assert!(e.contains("give --stop-on EXPR too"), "{e}");
    }

    /// A plan of three named requests.
    const THREE: &str = "url = \"http://127.0.0.1:9/\"\nsteps = [1]\n[[request]]\nname = \"login\"\nurl = \"/login\"\n[[request]]\nname = \"search\"\nurl = \"/search\"\n[[request]]\nname = \"items\"\nurl = \"/items\"\n";

    #[test]
    fn a_condition_names_a_request_of_the_plan_or_is_refused_naming_them() {
        let (_dir, c) = crate::config::tests::with_plan(
            THREE,
            "--fail-on p99[search]>1s --stop-on failed[login]>1%",
        );
        let c = c.unwrap();
        assert_eq!(c.thresholds.fail_on[0].request.as_deref(), Some("search"));
        assert_eq!(c.echo.stop_on, ["failed[login]>1%"]);
        let (_dir, e) = crate::config::tests::with_plan(THREE, "--stop-on p99[serch]>1s");
        assert_eq!(
            e.unwrap_err().to_string(),
            "--stop-on 'p99[serch]>1s': the plan has no request named 'serch' (its names: login, search, items)"
        );
        let e =
            command_line("run http://127.0.0.1:9/ --steps 1 --fail-on p99[login]>1s").unwrap_err();
        assert_eq!(
            e,
            "--fail-on 'p99[login]>1s': the requests are unnamed (one URL or --urls): name them in a plan file's [[request]] tables, or drop [login]"
        );
    }
}
