//! The coordinator's own disk: a full disk mid-run fails loudly (exit 1, the OS error named) and keeps
//! every step already written, with run.json still valid.
use std::process::Command;

use tests::{ServeProcess, stampede, text};

/// A tiny tmpfs, unmounted when dropped.
struct Tiny(std::path::PathBuf);

impl Drop for Tiny {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

/// A run whose output directory fills up after a few steps: its output, its directory, and the
/// mount (kept until the caller is done), or `None` where a tmpfs cannot be mounted.
fn fill_the_disk_mid_run() -> Option<(
    std::process::Output,
    std::path::PathBuf,
    Tiny,
    tempfile::TempDir,
)> {
    let dir = tempfile::tempdir().unwrap();
    let mnt = dir.path().join("tiny");
    std::fs::create_dir(&mnt).unwrap();
    let mounted = Command::new("mount")
        // Room for a step or two: run.json, report.html and the copy of each made to replace it
        // grow by some KB a step.
        .args(["-t", "tmpfs", "-o", "size=150k", "tmpfs"])
        .arg(&mnt)
        .output()
        .unwrap();
    if !mounted.status.success() {
        // Mounting needs root (CI runs as root); say why instead of passing silently.
        eprintln!(
            "SKIPPED: cannot mount a tmpfs here: {}",
            text(&mounted.stderr)
        );
        assert!(
            std::env::var("CI").is_err(),
            "CI must be able to mount a tmpfs"
        );
        return None;
    }
    let tiny = Tiny(mnt.clone());
    let target = ServeProcess::start(&[]);
    let out = mnt.join("results");
    let o = stampede(&[
        "run",
        &target.url(),
        "--model",
        "requests",
        "--steps",
        "5,5,5,5,5,5,5,5,5,5,5,5",
        "--step-duration",
        "200ms",
        "--quiet",
        "--out",
        out.to_str().unwrap(),
    ]);
    Some((o, out, tiny, dir))
}

#[test]
fn a_full_disk_mid_run_fails_loudly_and_keeps_finished_steps() {
    let Some((o, out, _tiny, _dir)) = fill_the_disk_mid_run() else {
        return;
    };
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("No space left on device"), "{err}");
    for tmp in ["run.json.tmp", "report.html.tmp"] {
        assert!(!out.join(tmp).exists(), "no half-written {tmp} is left");
    }
    let run: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("run.json")).unwrap())
            .expect("run.json stays valid");
    let kept = run["steps"].as_array().unwrap().len();
    assert!((1..12).contains(&kept), "{kept} steps kept");
    // Said by number: the progress line of the step that failed was shown, and it is in no file.
    let said = match kept {
        1 => "step 1 is kept in".to_string(),
        n => format!("steps 1-{n} are kept in"),
    };
    assert!(
        err.contains(&format!(
            "{said} {}; a step shown after that is in no file",
            out.display()
        )),
        "{err}"
    );
    let tsv = std::fs::read_to_string(out.join("steps.tsv")).unwrap();
    assert!(
        tsv.lines().count() > kept,
        "every kept step has its row: {tsv}"
    );
}

#[test]
fn a_full_disk_keeps_steps_tsv_and_run_json_in_step_and_says_its_error_once() {
    let Some((o, out, _tiny, _dir)) = fill_the_disk_mid_run() else {
        return;
    };
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    let run = tests::run_json(&out);
    let kept = run["steps"].as_array().unwrap().len();
    let tsv = std::fs::read_to_string(out.join("steps.tsv")).unwrap();
    assert_eq!(
        tsv.lines().count(),
        kept + 1,
        "the header and one row per run.json step: {tsv}"
    );
    assert_eq!(
        err.matches("No space left on device").count(),
        1,
        "the error is said once: {err}"
    );
}

#[test]
fn a_full_disk_left_run_json_running() {
    let Some((o, out, _tiny, _dir)) = fill_the_disk_mid_run() else {
        return;
    };
    let err = text(&o.stderr);
    let run = tests::run_json(&out);
    assert_eq!(run["status"], "failed", "{err}");
    // What run.json could not say in full is said on stderr.
    assert!(
        err.contains("was marked \"failed\" in place") || run["finished_at"].is_string(),
        "{err}"
    );
}

/// `stampede run` over a short plan, in `cwd`, with `extra` flags.
fn run_in(cwd: &std::path::Path, url: &str, steps: &str, extra: &[&str]) -> std::process::Output {
    Command::new(tests::bin("stampede"))
        .current_dir(cwd)
        .args(["run", url, "--model", "requests", "--steps", steps])
        .args(["--step-duration", "300ms", "--quiet"])
        .args(extra)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap()
}

#[test]
fn two_runs_started_in_the_same_second_mixed_their_files() {
    let target = ServeProcess::start(&[]);
    let cwd = tempfile::tempdir().unwrap();
    let runs: Vec<_> = ["20,20", "20"]
        .into_iter()
        .map(|steps| {
            let (cwd, url) = (cwd.path().to_path_buf(), target.url());
            std::thread::spawn(move || run_in(&cwd, &url, steps, &[]))
        })
        .collect();
    for r in runs {
        let o = r.join().unwrap();
        assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    }
    let mut dirs: Vec<_> = std::fs::read_dir(cwd.path().join("stampede-results"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    dirs.sort();
    assert_eq!(dirs.len(), 2, "one directory per run: {dirs:?}");
    let mut steps: Vec<usize> = dirs
        .iter()
        .map(|d| {
            let run = tests::run_json(d);
            assert_eq!(run["status"], "completed", "{run}");
            let n = run["steps"].as_array().unwrap().len();
            let tsv = std::fs::read_to_string(d.join("steps.tsv")).unwrap();
            assert_eq!(
                tsv.lines().count(),
                n + 1,
                "steps.tsv and run.json of one run"
            );
            // An hlog and its .hgrm per step.
            assert_eq!(std::fs::read_dir(d.join("hlog")).unwrap().count(), 2 * n);
            n
        })
        .collect();
    steps.sort();
    assert_eq!(steps, [1, 2]);
}

#[test]
fn a_reused_out_kept_the_earlier_runs_hlog_files() {
    let target = ServeProcess::start(&[]);
    let cwd = tempfile::tempdir().unwrap();
    let first = run_in(cwd.path(), &target.url(), "20,20,20", &["--out", "today"]);
    assert!(first.status.success(), "{}", text(&first.stderr));
    let again = run_in(cwd.path(), &target.url(), "20", &["--out", "today"]);
    let err = text(&again.stderr);
    assert_eq!(again.status.code(), Some(2), "{err}");
    assert_eq!(
        err,
        "stampede: output directory today holds another run's files (run.json, steps.tsv, report.html, events.ndjson, 7 more): give another --out, or add --force to replace them\n"
    );
    assert_eq!(
        tests::run_json(&cwd.path().join("today"))["steps"]
            .as_array()
            .unwrap()
            .len(),
        3
    );
    let forced = run_in(
        cwd.path(),
        &target.url(),
        "20",
        &["--out", "today", "--force"],
    );
    assert!(forced.status.success(), "{}", text(&forced.stderr));
    let mut hlogs: Vec<_> = std::fs::read_dir(cwd.path().join("today/hlog"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    hlogs.sort();
    assert_eq!(
        hlogs,
        ["step-001.hgrm", "step-001.hlog"],
        "nothing of the earlier run is left"
    );
    assert_eq!(
        tests::run_json(&cwd.path().join("today"))["steps"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
}

#[test]
fn stdout_that_cannot_be_written_panicked() {
    let target = ServeProcess::start(&[]);
    let cwd = tempfile::tempdir().unwrap();
    let o = Command::new(tests::bin("stampede"))
        .current_dir(cwd.path())
        .args(["run", &target.url(), "--model", "requests", "--steps", "20"])
        .args(["--step-duration", "300ms", "--quiet", "--out", "r"])
        .stdin(std::process::Stdio::null())
        .stdout(std::fs::File::create("/dev/full").unwrap())
        .output()
        .unwrap();
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert_eq!(
        err,
        "stampede: cannot write to stdout: No space left on device (os error 28); the results are in r\n"
    );
}
