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
    for sub in ["run", "serve", "demo", "report", "compare", "find-max"] {
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
        "--connections",
        "--rate",
        "--max-requests",
        "--duration",
        "--on-agent-loss",
        "--label",
        "--monitors",
        "--expect-monitors",
        "--monitor-pid",
        "--monitor-process",
        "--monitor-cgroup",
    ] {
        assert!(run.contains(flag), "run --help lacks {flag}");
        assert!(
            readme().contains(flag.trim_start_matches('-')),
            "README does not mention {flag}"
        );
    }
    let compare = help(&["compare", "--help"]);
    for flag in [
        "--label",
        "--baseline",
        "--threshold",
        "--output",
        "--tsv",
        "--json",
        "--fail-on-regression",
    ] {
        assert!(compare.contains(flag), "compare --help lacks {flag}");
        assert!(readme().contains(flag), "README does not mention {flag}");
    }
    let find_max = help(&["find-max", "--help"]);
    for flag in [
        "--slo",
        "--start",
        "--max-rate",
        "--precision",
        "--probe",
        "--warmup",
        "--confirm",
        "--repeat",
        "--cooldown",
        "--deadline",
        // `run`'s flags come with it.
        "--agents",
        "--model",
        "--out",
    ] {
        assert!(find_max.contains(flag), "find-max --help lacks {flag}");
        assert!(readme().contains(flag), "README does not mention {flag}");
    }
    let serve = help(&["serve", "--help"]);
    for flag in ["--delay", "--capacity", "--tls", "--listen", "--ready-file"] {
        assert!(serve.contains(flag), "serve --help lacks {flag}");
    }
    assert!(help(&["--version"]).starts_with("stampede "));
    let agent = std::process::Command::new(bin("stampede-agent"))
        .arg("--help")
        .output()
        .unwrap();
    let agent = text(&agent.stdout);
    assert!(agent.contains("--listen"));
    for flag in [
        "--monitor",
        "--name",
        "--pid",
        "--process",
        "--cgroup",
        "--container",
    ] {
        // As a whole flag: `--monitor` inside `--monitor-pid` does not count.
        let named = |text: &str| {
            text.match_indices(flag).any(|(i, _)| {
                !text[i + flag.len()..].starts_with(|c: char| c == '-' || c.is_alphanumeric())
            })
        };
        assert!(named(&agent), "stampede-agent --help lacks {flag}");
        assert!(named(&readme()), "README does not mention {flag}");
    }
}

fn help_of(bin_name: &str, args: &[&str]) -> String {
    let o = std::process::Command::new(bin(bin_name))
        .args(args)
        .output()
        .unwrap();
    assert!(o.status.success(), "{args:?}: {}", text(&o.stderr));
    text(&o.stdout)
}

#[test]
fn run_help_was_one_unsorted_list_without_defaults() {
    let run = help_of("stampede", &["run", "--help"]);
    let mut at = 0;
    for group in [
        "Target and request:",
        "Load shape:",
        "Output:",
        "Distributed:",
        "Examples:",
    ] {
        let i = run[at..]
            .find(group)
            .unwrap_or_else(|| panic!("run --help lacks '{group}' after byte {at}"));
        at += i;
    }
    let examples = run.split("Examples:").nth(1).unwrap();
    assert_eq!(examples.matches("stampede run ").count(), 3, "{examples}");
    for default in [
        "[default: GET]",
        "[default: connections]",
        "[default: uniform]",
        "[default: round-robin]",
        "[default: 10s]",
        "[default: 5s]",
        "[default: 1]",
        "[default: 1000]",
        "[default: tsv]",
        "[default: degrade]",
        "[default: 60s]",
        "[default: one per core]",
    ] {
        assert!(run.contains(default), "run --help lacks {default}");
    }
    assert!(run.contains("The default opens a new connection per request"));
    // The enums' values are listed, from the types themselves.
    for value in [
        "connections:",
        "requests:",
        "concurrency:",
        "poisson:",
        "csv:",
        "abort:",
    ] {
        assert!(run.contains(value), "run --help lacks the value {value}");
    }
    let agent = help_of("stampede-agent", &["--help"]);
    for flag in [
        "--listen",
        "--join",
        "--allow-target",
        "--max-rate",
        "--ready-file",
        "[default: 127.0.0.1:7700]",
        "[default: one per core]",
    ] {
        assert!(agent.contains(flag), "stampede-agent --help lacks {flag}");
    }
    // The ready file's format, where each of its flags is described.
    let serve = help_of("stampede", &["serve", "--help"]);
    for help in [&run, &agent, &serve] {
        assert!(
            help.contains(r#"{"listen":"127.0.0.1:PORT","pid":N}"#),
            "--ready-file's format is not in: {help}"
        );
    }
    assert!(readme().contains(r#"`{"listen":"127.0.0.1:PORT","pid":N}`"#));
}

#[test]
fn a_documented_flag_could_be_missing_from_the_binary() {
    let run = help_of("stampede", &["run", "--help"]);
    let agent = help_of("stampede-agent", &["--help"]);
    let compare = help_of("stampede", &["compare", "--help"]);
    let readme = readme();
    let mut checked = 0;
    // Commands in code blocks and in table cells alike.
    for cell in readme.lines().flat_map(|l| l.split(" | ")) {
        let (help, command) = if let Some((_, c)) = cell.split_once("stampede run ") {
            (&run, c)
        } else if let Some((_, c)) = cell.split_once("stampede compare ") {
            (&compare, c)
        } else if let Some((_, c)) = cell.split_once("stampede-agent ") {
            (&agent, c)
        } else {
            continue;
        };
        let line = cell;
        for word in command.split(|c: char| c.is_whitespace() || c == '`' || c == '(') {
            let Some(flag) = word.strip_prefix("--") else {
                continue;
            };
            let flag = flag.split('=').next().unwrap().replace('_', "-");
            if flag.is_empty() {
                continue;
            }
            assert!(
                help.contains(&format!("--{flag}")),
                "README line '{line}' uses --{flag}, which --help does not list"
            );
            checked += 1;
        }
    }
    assert!(checked > 40, "only {checked} flags found in the README");
}
