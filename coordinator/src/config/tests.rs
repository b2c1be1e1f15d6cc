//! The configuration as a whole: command lines and plan files resolved into runs, one or side by
//! side; and the helpers the tests beside each concern resolve theirs with.
use std::path::PathBuf;

use shared::plan::LoadModel;

use super::*;

/// A `stampede run` command line as the binary resolves it, its error as the binary prints it.
pub(super) fn command_line(line: &str) -> Result<RunConfig, String> {
    let argv = std::iter::once("stampede").chain(line.split_whitespace());
    let cli = crate::cli::parse_from(argv)
        .map_err(|e| shared::usage::one_line(&e, crate::cli::habit_hint))?;
    match cli.command {
        crate::cli::Command::Run(a) => resolve(*a).map_err(|e| e.to_string()),
        _ => unreachable!("a run command line"),
    }
}

pub(super) fn args(url: &str) -> RunArgs {
    RunArgs {
        plan_or_url: vec![url.into()],
        ..RunArgs::default()
    }
}

/// A command line as [`resolve_runs`] takes it, its error as the binary prints it.
pub(super) fn runs_of(line: &str) -> Result<Runs, String> {
    let argv = std::iter::once("stampede").chain(line.split_whitespace());
    let cli = crate::cli::parse_from(argv)
        .map_err(|e| shared::usage::one_line(&e, crate::cli::habit_hint))?;
    match cli.command {
        crate::cli::Command::Run(a) => resolve_runs(*a).map_err(|e| e.to_string()),
        _ => unreachable!("a run command line"),
    }
}

/// A `stampede find-max` command line as the binary resolves it, its error as the binary prints it.
pub(super) fn search_of(line: &str) -> Result<FindMaxConfig, String> {
    let argv = std::iter::once("stampede").chain(line.split_whitespace());
    let cli = crate::cli::parse_from(argv)
        .map_err(|e| shared::usage::one_line(&e, crate::cli::habit_hint))?;
    match cli.command {
        crate::cli::Command::FindMax(a) => resolve_find_max(*a).map_err(|e| e.to_string()),
        _ => unreachable!("a find-max command line"),
    }
}

/// A plan file `text` in a directory of its own, and the command line `flags` run with it.
pub(super) fn with_plan(
    text: &str,
    flags: &str,
) -> (tempfile::TempDir, Result<RunConfig, ConfigError>) {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("plan.toml");
    std::fs::write(&p, text).unwrap();
    let line = format!("stampede run {} {flags}", p.display());
    let cli = crate::cli::parse_from(line.split_whitespace()).unwrap();
    let crate::cli::Command::Run(a) = cli.command else {
        unreachable!("a run command line")
    };
    (dir, resolve(*a))
}

#[test]
fn named_targets_run_side_by_side_each_into_its_label() {
    let Runs::Side(side) = runs_of(
        "run nginx=http://127.0.0.1:8080/a?x=1 app=http://localhost:8081/b --steps 5,10 -H X-A:1 --out res/x",
    )
    .unwrap() else {
        panic!("two targets run side by side");
    };
    assert_eq!(side.dir, PathBuf::from("res/x"));
    assert!(!side.dir_default);
    let got: Vec<_> = side
        .runs
        .iter()
        .map(|c| {
            (
                c.label.as_deref().unwrap(),
                c.out.display().to_string(),
                c.host.as_str(),
                c.echo.requests[0].url.clone(),
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            (
                "nginx",
                "res/x/nginx".into(),
                "127.0.0.1",
                "http://127.0.0.1:8080/a?x=1".into()
            ),
            (
                "app",
                "res/x/app".into(),
                "localhost",
                "http://localhost:8081/b".into()
            ),
        ]
    );
    // The same workload flags for every target: only the URL differs.
    for c in &side.runs {
        assert_eq!(c.plan.steps(), vec![5.0, 10.0]);
        assert_eq!(c.echo.requests[0].headers[0], "X-A: 1");
        assert!(!c.out_default);
    }
    let Runs::Side(side) = runs_of("run a=http://h:1/ b=http://h:2/ --steps 1").unwrap() else {
        panic!("two targets");
    };
    assert!(side.dir_default);
    assert!(side.dir.starts_with("stampede-results"));
    assert_eq!(side.runs[1].out, side.dir.join("b"), "one stamp for all");
}

#[test]
fn a_single_target_is_named_by_its_label() {
    let one = |line: &str| match runs_of(line) {
        Ok(Runs::One(c)) => Ok(c.label),
        Ok(Runs::Side(_)) => panic!("one target: {line}"),
        Err(e) => Err(e),
    };
    assert_eq!(one("run http://h:1/ --steps 1").unwrap(), None);
    assert_eq!(
        one("run http://h:1/ --steps 1 --label nginx-1.27")
            .unwrap()
            .as_deref(),
        Some("nginx-1.27")
    );
    assert_eq!(
        one("run nginx=http://h:1/ --steps 1").unwrap().as_deref(),
        Some("nginx")
    );
    assert_eq!(
        one("run nginx=http://h:1/ --steps 1 --label nginx")
            .unwrap()
            .as_deref(),
        Some("nginx"),
        "the same name twice is one name"
    );
    let e = one("run nginx=http://h:1/ --steps 1 --label app").unwrap_err();
    assert_eq!(
        e,
        "the target is named twice, nginx= and --label app: give one"
    );
    let e = one("run http://h:1/ --steps 1 --label ..").unwrap_err();
    assert!(
        e.starts_with("label '..' is not a valid directory name"),
        "{e}"
    );
    // A plan file's label, and the flag's over it.
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("plan.toml");
    std::fs::write(
        &p,
        "url = \"http://h:1/\"\nsteps = [1]\nlabel = \"from-file\"\n",
    )
    .unwrap();
    let plan = p.display();
    assert_eq!(
        one(&format!("run {plan}")).unwrap().as_deref(),
        Some("from-file")
    );
    assert_eq!(
        one(&format!("run {plan} --label flag")).unwrap().as_deref(),
        Some("flag")
    );
    std::fs::write(&p, "url = \"http://h:1/\"\nsteps = [1]\nlabel = \"a/b\"\n").unwrap();
    let e = one(&format!("run {plan}")).unwrap_err();
    assert!(
        e.starts_with("label 'a/b' is not a valid directory name"),
        "{e}"
    );
}

#[test]
fn several_targets_refuse_what_names_one() {
    let e = runs_of("run a=http://h:1/ b=http://h:2/ --steps 1 --label x")
        .err()
        .unwrap();
    assert_eq!(
        e,
        "--label names a run of one target; several are named NAME=URL each"
    );
    let e = runs_of("run a=http://h:1/ b=http://h:2/ --steps 1 --url http://h:3/")
        .err()
        .unwrap();
    assert!(
        e.starts_with("give the targets as NAME=URL arguments, without --url or --urls"),
        "{e}"
    );
    let e = runs_of("run a=http://h:1/ http://h:2/ --steps 1")
        .err()
        .unwrap();
    assert!(e.starts_with("target 2 (http://h:2/) has no label"), "{e}");
    let e = runs_of("run a=http://h:1/ a=http://h:2/ --steps 1")
        .err()
        .unwrap();
    assert_eq!(
        e,
        "label 'a' names targets 1 and 2: each target needs its own"
    );
    // Every target's own configuration is checked: a bad URL is named.
    let e = runs_of("run a=http://h:1/ b=http://h:x/ --steps 1")
        .err()
        .unwrap();
    assert!(e.contains("http://h:x/"), "{e}");
    // A plan file with several targets: its url is theirs to replace.
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("plan.toml");
    std::fs::write(
        &p,
        "url = \"http://h:1/\"\nsteps = [1]\nmodel = \"requests\"\n",
    )
    .unwrap();
    let Runs::Side(side) =
        runs_of(&format!("run {} a=http://h:7/ b=http://h:8/", p.display())).unwrap()
    else {
        panic!("two targets");
    };
    assert_eq!(side.runs[1].echo.requests[0].url, "http://h:8/");
    assert_eq!(side.runs[1].plan.model(), LoadModel::Requests);
}

#[test]
fn config_errors_were_one_kind_told_apart_only_by_words() {
    let run = |line: &str| {
        let argv = std::iter::once("stampede").chain(line.split_whitespace());
        match crate::cli::parse_from(argv).unwrap().command {
            crate::cli::Command::Run(a) => resolve(*a).unwrap_err(),
            crate::cli::Command::FindMax(a) => resolve_find_max(*a).err().unwrap(),
            _ => unreachable!(),
        }
    };
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("token");
    std::fs::write(&empty, "\n").unwrap();
    type IsKind = fn(&ConfigError) -> bool;
    let cases: Vec<(String, IsKind)> = vec![
        (
            "run http://h:1/ --steps 1 --num-conn 5 --step-duration 1s".into(),
            |e| matches!(e, ConfigError::Conflict(_)),
        ),
        ("run http://h:1/ -c 50 --model connections".into(), |e| {
            matches!(e, ConfigError::Habit(_))
        }),
        ("run http://h:1/ --steps 1 --monitor-pid 0".into(), |e| {
            matches!(e, ConfigError::Value(_))
        }),
        (
            format!("run http://h:1/ --steps 1 --token-file {}", empty.display()),
            |e| matches!(e, ConfigError::File(_)),
        ),
        (
            "run http://h:1/ --steps 1 --agents a:1,nohost".into(),
            |e| matches!(e, ConfigError::Peers(_)),
        ),
        ("find-max http://h:1/ --slo p99>50ms".into(), |e| {
            matches!(e, ConfigError::Search(_))
        }),
        ("find-max http://h:1/ --precision 0".into(), |e| {
            matches!(e, ConfigError::Search(_))
        }),
    ];
    for (line, kind) in cases {
        let e = run(&line);
        assert!(kind(&e), "{line}: {e:?}");
    }
    if std::env::var_os("STAMPEDE_TOKEN").is_none() {
        let e = run("run http://h:1/ --steps 1 --listen 0.0.0.0:7800 --expect-agents 1");
        assert!(matches!(e, ConfigError::Exposed(_)), "{e:?}");
    }
}

#[test]
fn the_commit_is_the_flag_s_else_github_sha_and_one_with_a_space_is_refused() {
    let sha = "0123456789abcdef0123456789abcdef01234567".to_string();
    assert_eq!(commit(None, None).unwrap(), None);
    assert_eq!(
        commit(None, Some(sha.clone())).unwrap().as_deref(),
        Some(sha.as_str())
    );
    assert_eq!(commit(None, Some(" ".into())).unwrap(), None);
    assert_eq!(
        commit(Some("v1.2".into()), Some(sha.clone()))
            .unwrap()
            .as_deref(),
        Some("v1.2")
    );
    assert_eq!(commit(Some(String::new()), Some(sha)).unwrap(), None);
    let e = commit(Some("a b".into()), None).unwrap_err().to_string();
    assert!(e.starts_with("--commit 'a b': it has a space"), "{e}");
    let e = commit(None, Some("x".repeat(MAX_COMMIT + 1)))
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("$GITHUB_SHA '") && e.contains("too long"),
        "{e}"
    );
    let c = command_line("run http://h:1/ --steps 1 --commit abc123").unwrap();
    assert_eq!(c.commit.as_deref(), Some("abc123"));
}

#[test]
fn a_push_s_url_and_headers_are_checked_before_any_load() {
    let pushes = |line: &str| -> Result<usize, String> {
        match runs_of(line)? {
            Runs::One(c) => Ok(c.push.to.len()),
            Runs::Side(_) => unreachable!("one target"),
        }
    };
    let base = "run http://h:1/ --steps 1";
    assert_eq!(pushes(base), Ok(0));
    assert_eq!(
        pushes(&format!(
            "{base} --prometheus-remote-write https://m.example/api/v1/push --push-header X-Scope-OrgID:a"
        )),
        Ok(1)
    );
    for (flags, says) in [
        (
            "--prometheus-remote-write ftp://h/",
            "--prometheus-remote-write: \"ftp://h/\" is not a URL to push to",
        ),
        (
            "--prometheus-remote-write http://h/ --push-header NoColon",
            "--push-header: \"NoColon\" is not a header to push with",
        ),
        ("--push-header X:1", "--push-header is sent with a push"),
        (
            "--otlp ftp://h:4318",
            "--otlp: \"ftp://h:4318\" is not a URL to push to",
        ),
        (
            "--otlp http://h:4318 --push-header NoColon",
            "--push-header: \"NoColon\" is not a header to push with",
        ),
    ] {
        let e = pushes(&format!("{base} {flags}")).unwrap_err();
        assert!(e.starts_with(says), "{flags}: {e}");
    }
    let (_dir, cfg) = with_plan(
        "url = \"http://h:1/\"\nsteps = [1]\nprometheus_remote_write = \"http://127.0.0.1:9/w\"\npush_header = [\"A: b\"]\n",
        "",
    );
    assert_eq!(cfg.unwrap().push.to.len(), 1, "the plan file's keys");
    // Both at once: one sender each, OTLP's at its base URL's /v1/metrics.
    let both = runs_of(&format!(
        "{base} --prometheus-remote-write http://h/w --otlp http://c:4318/otlp"
    ));
    let Ok(Runs::One(c)) = both else {
        panic!("{both:?}")
    };
    let to: Vec<String> = c.push.to.iter().map(|t| format!("{t:?}")).collect();
    assert_eq!(
        to,
        [
            "remote write to http://h/w",
            "OTLP to http://c:4318/otlp/v1/metrics"
        ]
    );
    let (_dir, cfg) = with_plan(
        "url = \"http://h:1/\"\nsteps = [1]\notlp = \"http://127.0.0.1:9\"\n",
        "",
    );
    let to: Vec<String> = cfg
        .unwrap()
        .push
        .to
        .iter()
        .map(|t| format!("{t:?}"))
        .collect();
    assert_eq!(
        to,
        ["OTLP to http://127.0.0.1:9/v1/metrics"],
        "the plan file's key"
    );
}
