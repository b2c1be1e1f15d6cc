//! The plan file: read, its unknown keys answered with the key meant, its paths taken relative to
//! it, and checked against `cli::CONSTRAINTS` as the flags are, so a file is refused as the flags
//! are and a flag replaces the file's way of giving the same setting.
use std::path::{Path, PathBuf};

use super::ConfigError;
use crate::cli::RunArgs;

pub fn read_plan_file(path: &Path) -> Result<RunArgs, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        what: "plan file",
        path: path.to_path_buf(),
        source,
    })?;
    parse_plan(&text).map_err(|message| ConfigError::PlanFile {
        path: path.to_path_buf(),
        message,
    })
}

/// A plan file's settings with its paths taken relative to the file at `path`, where its author
/// wrote them from.
pub fn relative_to(file: RunArgs, path: &Path) -> RunArgs {
    let dir = path.parent();
    let rel = |p: Option<PathBuf>| {
        p.map(|p| match (dir, p.is_relative()) {
            (Some(d), true) => d.join(p),
            _ => p,
        })
    };
    RunArgs {
        body_file: rel(file.body_file),
        urls: rel(file.urls),
        out: rel(file.out),
        tls_cert: rel(file.tls_cert),
        tls_key: rel(file.tls_key),
        tls_ca: rel(file.tls_ca),
        token_file: rel(file.token_file),
        baseline: rel(file.baseline),
        wsesslog: file.wsesslog.map(|w| crate::cli::Wsesslog {
            file: match (dir, w.file.is_relative()) {
                (Some(d), true) => d.join(&w.file),
                _ => w.file.clone(),
            },
            ..w
        }),
        feeder: file
            .feeder
            .into_iter()
            .map(|f| crate::cli::FeederArg {
                file: rel(Some(f.file)).unwrap_or_default(),
                ..f
            })
            .collect(),
        ..file
    }
}

/// Parses a plan file's text; the error names the line and column.
pub fn parse_plan(text: &str) -> Result<RunArgs, String> {
    if let Some(unknown) = unknown_key(text) {
        return Err(unknown.to_string());
    }
    toml::from_str(text).map_err(|e| describe_toml_error(text, &e))
}

/// toml's message with the line and column spelled out, so editors can jump to it.
fn describe_toml_error(text: &str, e: &toml::de::Error) -> String {
    let msg = e.message().trim().to_string();
    match e.span() {
        Some(span) => {
            let (line, col) = line_and_column(text, span.start);
            format!("line {line}, column {col}: {msg}")
        }
        None => msg,
    }
}

/// The line and column (from 1) of byte `at` of `text`.
fn line_and_column(text: &str, at: usize) -> (usize, usize) {
    let before = &text[..at.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let col = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
    (line, col)
}

/// A plan file's key that is no setting: where it is, and the key meant when one is close. serde's own
/// refusal listed all 64 keys and left the reader to find the one meant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownKey {
    pub key: String,
    pub line: usize,
    pub column: usize,
    pub meant: Option<&'static str>,
}

impl std::fmt::Display for UnknownKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let Self {
            key, line, column, ..
        } = self;
        write!(f, "line {line}, column {column}: unknown key `{key}`: ")?;
        match self.meant {
            Some(meant) => write!(f, "did you mean `{meant}`?"),
            None => f.write_str(
                "no setting is called that (a key is a `stampede run` flag's long name with _ for -, \
                 as step_duration is --step-duration; `stampede run --help` lists them)",
            ),
        }
    }
}

/// The first top-level key of the plan file `text` that no setting has, if any; None for a file
/// that does not parse as TOML, which toml's own error then describes.
fn unknown_key(text: &str) -> Option<UnknownKey> {
    let table = toml::de::DeTable::parse(text).ok()?;
    let keys = crate::cli::plan_keys();
    let (key, start) = table
        .get_ref()
        .keys()
        .filter(|k| !keys.contains(&k.get_ref().as_ref()))
        .map(|k| (k.get_ref().to_string(), k.span().start))
        .min_by_key(|(_, start)| *start)?;
    let (line, column) = line_and_column(text, start);
    Some(UnknownKey {
        meant: closest_key(&key, keys),
        key,
        line,
        column,
    })
}

/// The key `key` was meant to be: the key of a flag written as the flag is (`step-duration`,
/// `--step-duration`), else the closest key by edit distance if it is near enough to be a typo (a
/// third of its letters, at least one), else none: a far guess misleads more than no guess.
fn closest_key(key: &str, keys: &[&'static str]) -> Option<&'static str> {
    let spelled = key.trim_start_matches('-').replace('-', "_").to_lowercase();
    if let Some(k) = keys.iter().find(|k| **k == spelled) {
        return Some(k);
    }
    let near = (spelled.chars().count() / 3).max(1);
    keys.iter()
        .map(|k| (edit_distance(&spelled, k), *k))
        .filter(|(d, _)| *d <= near)
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k)
}

/// Levenshtein's distance: the fewest one-character insertions, deletions and replacements from `a`
/// to `b`.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = if ca == *cb {
                diagonal
            } else {
                1 + diagonal.min(above).min(row[j])
            };
            diagonal = above;
        }
    }
    row[b.len()]
}

/// The plan file's settings checked against [`crate::cli::CONSTRAINTS`] as the flags are by clap
/// (and `args` as well, which tests build without clap), with each setting the flags give the file's
/// other way of giving it removed: the flag overrides the file.
pub fn constrained(args: &RunArgs, mut file: RunArgs, path: &Path) -> Result<RunArgs, ConfigError> {
    use crate::cli::{CONSTRAINTS, Constraint};
    constrained_flags(args)?;
    for rule in CONSTRAINTS {
        let Constraint::OneOf(a, b) = rule else {
            continue;
        };
        if file.given(a) && file.given(b) {
            return Err(ConfigError::Conflict(format!(
                "plan file {}: give {a} or {b}, not both (they are one setting)",
                path.display()
            )));
        }
        for (flag, other) in [(a, b), (b, a)] {
            if args.given(flag) {
                file.unset(other);
            }
        }
    }
    Ok(file)
}

/// The command line's settings against [`crate::cli::CONSTRAINTS`]' conflicts.
pub fn constrained_flags(args: &RunArgs) -> Result<(), ConfigError> {
    use crate::cli::{CONSTRAINTS, Constraint, flag_of};
    for rule in CONSTRAINTS {
        if let Constraint::OneOf(a, b) = rule
            && args.given(a)
            && args.given(b)
        {
            return Err(ConfigError::Conflict(format!(
                "give {} or {}, not both",
                flag_of(a),
                flag_of(b)
            )));
        }
    }
    Ok(())
}

/// What a setting needs ([`crate::cli::Constraint::Requires`]), in the settings combined: a flag's
/// need may be met by the plan file and the other way round. The message names the plan file when
/// the setting came from it.
pub fn required(given: &RunArgs, file: &RunArgs, plan: Option<&Path>) -> Result<(), ConfigError> {
    use crate::cli::{CONSTRAINTS, Constraint, flag_of};
    for rule in CONSTRAINTS {
        let Constraint::Requires(a, b) = rule else {
            continue;
        };
        if !given.given(a) || given.given(b) {
            continue;
        }
        return Err(ConfigError::Conflict(
            match plan.filter(|_| file.given(a)) {
                Some(path) => format!(
                    "plan file {}: {a} needs {b} (the key {b}, or the flag {})",
                    path.display(),
                    flag_of(b)
                ),
                None => format!("{} needs {}", flag_of(a), flag_of(b)),
            },
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use shared::plan::{LoadModel, StepLimit};

    use super::*;
    use crate::cli::Steps;
    use crate::config::tests::{args, with_plan};
    use crate::config::{AgentSpec, resolve};

    #[test]
    fn plan_file_with_flags_overriding() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("plan.toml");
        std::fs::write(
            &p,
            "url = \"http://127.0.0.1:9/x\"\nmodel = \"requests\"\nsteps = [5, 10]\nconst_test_time = 3\n",
        )
        .unwrap();
        let mut a = args(p.to_str().unwrap());
        a.steps = Some(Steps(vec![7.0]));
        let c = resolve(a).unwrap();
        assert_eq!(c.plan.model(), LoadModel::Requests);
        assert_eq!(c.plan.steps(), vec![7.0]);
        assert_eq!(c.plan.limit(), StepLimit::Duration(Duration::from_secs(3)));
    }

    #[test]
    fn plan_file_errors_name_line_and_column() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("plan.toml");
        std::fs::write(&p, "url = \"http://h/\"\nrat = 5\n").unwrap();
        let e = resolve(args(p.to_str().unwrap())).unwrap_err().to_string();
        assert!(e.contains("line 2, column 1"), "{e}");
        assert!(e.contains("unknown key `rat`: did you mean `rate`?"), "{e}");
    }

    #[test]
    fn a_plan_file_key_typo_dumped_every_key() {
        // Regression: `step_duraton` was answered with serde's list of all 64 keys.
        let unknown = |text: &str| unknown_key(text).expect("an unknown key");
        let typo = unknown("url = \"http://h/\"\nsteps = [1]\nstep_duraton = \"5s\"\n");
        assert_eq!(
            typo,
            UnknownKey {
                key: "step_duraton".into(),
                line: 3,
                column: 1,
                meant: Some("step_duration"),
            }
        );
        assert_eq!(
            typo.to_string(),
            "line 3, column 1: unknown key `step_duraton`: did you mean `step_duration`?"
        );
        // The flag's spelling is its key.
        for flag in ["step-duration", "--step-duration"] {
            assert_eq!(
                unknown(&format!("{flag} = \"5s\"\n")).meant,
                Some("step_duration")
            );
        }
        assert_eq!(
            unknown("max-connections = 5\n").meant,
            Some("max_connections")
        );
        assert_eq!(unknown("header = [\"A: b\"]\n").meant, Some("headers"));
        // The first in the file, not in the alphabet.
        assert_eq!(unknown("zzz = 1\naaa = 2\n").key, "zzz");
        // Far from every key: no guess, and no list of them all.
        let far = unknown("colour = \"blue\"\n");
        assert_eq!(far.meant, None);
        let said = far.to_string();
        assert!(said.contains("no setting is called that"), "{said}");
        assert!(!said.contains("expected one of"), "{said}");
        // Known keys and aliases, a nested table, and a file that is no TOML at all pass to serde.
        assert_eq!(
            unknown_key("const_test_time = 3\nduration = \"1s\"\n[agent_weights]\n\"a:1\" = 2\n"),
            None
        );
        assert_eq!(unknown_key("url = "), None);
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("plan.toml");
        std::fs::write(&p, "url = \"http://h/\"\nstep_duraton = 5\n").unwrap();
        let e = resolve(args(p.to_str().unwrap())).unwrap_err().to_string();
        assert!(
            e.ends_with(
                "line 2, column 1: unknown key `step_duraton`: did you mean `step_duration`?"
            ),
            "{e}"
        );
    }

    #[test]
    fn the_plan_keys_are_serde_s_fields_and_aliases() {
        let keys = crate::cli::plan_keys();
        for key in [
            "url",
            "step_duration",
            "const_test_time",
            "duration",
            "monitor_target",
        ] {
            assert!(keys.contains(&key), "{key}: {keys:?}");
        }
        // What serde skips is no key: the positionals and the habits with no meaning in a file.
        for skipped in ["plan_or_url", "wrk_latency", "ab_keep_alive"] {
            assert!(!keys.contains(&skipped), "{skipped}");
        }
        assert!(keys.len() > 60, "{}", keys.len());
    }

    #[test]
    fn a_plan_file_with_agents_listen_and_weights_panicked() {
        let plan = "url = \"http://127.0.0.1:9/\"\nsteps = [1]\nagents = \"127.0.0.1:7700,127.0.0.1:7701\"\n\
                    listen = \"127.0.0.1:7800\"\nexpect_agents = 1\nagent_weights = [1, 2]\n";
        let (dir, got) = with_plan(plan, "");
        let e = got.unwrap_err();
        assert!(matches!(e, ConfigError::Conflict(_)), "{e:?}");
        let words = e.to_string();
        assert!(
            words.contains("listen or agents, not both")
                && words.contains(&dir.path().join("plan.toml").display().to_string()),
            "{words}"
        );
    }

    #[test]
    fn a_plan_file_bypassed_the_flags_conflicts() {
        for (keys, both) in [
            ("body = \"a\"\nbody_file = \"b\"\n", "body or body_file"),
            (
                "monitor_pid = 1\nmonitor_process = \"nginx\"\n",
                "monitor_pid or monitor_process",
            ),
            (
                "monitor_process = \"nginx\"\nmonitor_cgroup = \"/sys/fs/cgroup/x\"\n",
                "monitor_process or monitor_cgroup",
            ),
        ] {
            let (_dir, got) = with_plan(&format!("url = \"http://h:1/\"\nsteps = [1]\n{keys}"), "");
            let e = got.unwrap_err();
            assert!(matches!(e, ConfigError::Conflict(_)), "{e:?}");
            assert!(e.to_string().contains(both), "{e}");
            assert!(e.to_string().starts_with("plan file "), "{e}");
        }
        // What a setting needs, from the file: expect_monitors was ignored without listen.
        let (_dir, got) = with_plan(
            "url = \"http://h:1/\"\nsteps = [1]\nexpect_monitors = 1\n",
            "",
        );
        let e = got.unwrap_err();
        assert!(matches!(e, ConfigError::Conflict(_)), "{e:?}");
        assert!(
            e.to_string().contains("expect_monitors needs listen"),
            "{e}"
        );
        // The need met the other way round: the flag, its listen in the file (clap refused it).
        let (_dir, got) = with_plan(
            "url = \"http://h:1/\"\nsteps = [1]\nlisten = \"127.0.0.1:0\"\n",
            "--expect-monitors 1",
        );
        assert_eq!(got.unwrap().join.unwrap().monitors, 1);
        // The flags alone, as clap refuses them (tests build RunArgs without clap).
        let mut a = args("http://h:1/");
        a.steps = Some(Steps(vec![1.0]));
        a.body = Some("x".into());
        a.body_file = Some("y".into());
        let e = resolve(a).unwrap_err();
        assert!(matches!(e, ConfigError::Conflict(_)), "{e:?}");
        assert_eq!(e.to_string(), "give --body or --body-file, not both");
    }

    #[test]
    fn a_plans_body_beat_the_flag_body_file() {
        let (dir, _) = with_plan("", "");
        let f = dir.path().join("body.txt");
        std::fs::write(&f, "from the file").unwrap();
        let plan = "url = \"http://h:1/\"\nsteps = [1]\nbody = \"from the plan\"\n";
        let (_d, got) = with_plan(plan, &format!("--body-file {}", f.display()));
        let cfg = got.unwrap();
        assert_eq!(cfg.plan.workload().requests()[0].body(), b"from the file");
        // And the other way round: a flag --body over the plan's body_file.
        let plan = format!(
            "url = \"http://h:1/\"\nsteps = [1]\nbody_file = \"{}\"\n",
            f.display()
        );
        let (_d, got) = with_plan(&plan, "--body flag");
        assert_eq!(got.unwrap().plan.workload().requests()[0].body(), b"flag");
        // A flag --agents over a plan's listen: where the agents are is one setting.
        let plan =
            "url = \"http://h:1/\"\nsteps = [1]\nlisten = \"127.0.0.1:0\"\nexpect_agents = 1\n";
        let (_d, got) = with_plan(plan, "--agents 127.0.0.1:7700");
        let cfg = got.unwrap();
        assert_eq!(cfg.join, None);
        assert_eq!(cfg.agents, vec![AgentSpec::Addr("127.0.0.1:7700".into())]);
    }
}
