//! The README's promises checked against the code, so the docs cannot drift.
use tests::{bin, text};

fn readme() -> String {
    std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md")).unwrap()
}

#[test]
fn readme_starts_with_the_two_setup_commands() {
    let readme = readme();
    let block = readme
        .split("```sh\n")
        .nth(1)
        .and_then(|b| b.split("```").next())
        .expect("a first sh block");
    let commands: Vec<&str> = block
        .lines()
        .map(|l| l.split('#').next().unwrap().trim())
        .collect();
    assert_eq!(
        commands,
        [
            "cargo run --release --bin stampede -- demo",
            "cargo test --workspace"
        ],
        "the README must open with exactly the run and the test command"
    );
    // Nothing but the title comes before them.
    let before = readme.split("```sh\n").next().unwrap();
    assert_eq!(before.trim(), "# stampede");
    // CI runs the README's test command.
    let ci = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../.ci/run")).unwrap();
    assert!(ci.contains("\ncargo test --workspace\n"));
}

#[test]
fn every_documented_subcommand_and_flag_exists() {
    let help = |args: &[&str]| {
        let o = std::process::Command::new(bin("stampede"))
            .args(args)
            .output()
            .unwrap();
        assert!(o.status.success(), "{args:?}: {}", text(&o.stderr));
        text(&o.stdout)
    };
    let top = help(&["--help"]);
    for sub in ["run", "serve", "demo"] {
        assert!(top.contains(sub), "{top}");
    }
    let run = help(&["run", "--help"]);
    for flag in [
        "--model",
        "--arrival",
        "--low-rate",
        "--high-rate",
        "--rate-step",
        "--steps",
        "--step-duration",
        "--num-conn",
        "--num-call",
        "--max-connections",
        "--timeout",
        "--connect-timeout",
        "--threads",
        "--out",
        "--format",
        "--quiet",
        "--urls",
        "--urls-order",
        "--method",
        "--header",
        "--body",
        "--body-file",
        "--insecure",
        "--source-addrs",
    ] {
        assert!(run.contains(flag), "run --help lacks {flag}");
        assert!(
            readme().contains(flag.trim_start_matches('-')),
            "README does not mention {flag}"
        );
    }
    let serve = help(&["serve", "--help"]);
    for flag in ["--delay", "--capacity", "--tls", "--listen"] {
        assert!(serve.contains(flag), "serve --help lacks {flag}");
    }
    assert!(help(&["--version"]).starts_with("stampede "));
    let agent = std::process::Command::new(bin("stampede-agent"))
        .arg("--help")
        .output()
        .unwrap();
    assert!(text(&agent.stdout).contains("--listen"));
}
