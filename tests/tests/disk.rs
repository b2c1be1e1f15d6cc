//! The coordinator's own disk: a full disk mid-run fails loudly (exit 1, the OS error named) and keeps
//! every step already written, with run.json still valid.
use std::process::Command;

use tests::{Target, stampede, text};

/// A tiny tmpfs, unmounted when dropped.
struct Tiny(std::path::PathBuf);

impl Drop for Tiny {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

#[test]
fn a_full_disk_mid_run_fails_loudly_and_keeps_finished_steps() {
    let dir = tempfile::tempdir().unwrap();
    let mnt = dir.path().join("tiny");
    std::fs::create_dir(&mnt).unwrap();
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=40k", "tmpfs"])
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
        return;
    }
    let _tiny = Tiny(mnt.clone());
    let target = Target::start(&[]);
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
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("No space left on device"), "{err}");
    assert!(
        err.contains("the steps finished before this are kept in"),
        "{err}"
    );
    assert!(
        !out.join("run.json.tmp").exists(),
        "no half-written file is left"
    );
    let run: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("run.json")).unwrap())
            .expect("run.json stays valid");
    let kept = run["steps"].as_array().unwrap().len();
    assert!((1..12).contains(&kept), "{kept} steps kept");
    let tsv = std::fs::read_to_string(out.join("steps.tsv")).unwrap();
    assert!(
        tsv.lines().count() > kept,
        "every kept step has its row: {tsv}"
    );
}
