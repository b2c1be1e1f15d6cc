//! The docs' promises checked against the code, so they cannot drift: the README's first screen and
//! its two set-up commands, docs/reference/cli.md as the binaries' own `--help`, and every flag the
//! README and the guide pages (docs/guide/) use in a command as one the binary lists.
use std::path::{Path, PathBuf};
use tests::{bin, text};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn readme() -> String {
    std::fs::read_to_string(root().join("README.md")).unwrap()
}

/// The guide's pages, each with its path, sorted.
fn guide_pages() -> Vec<(String, String)> {
    let dir = root().join("docs/guide");
    let mut pages: Vec<(String, String)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .map(|p| {
            let name = format!("docs/guide/{}", p.file_name().unwrap().to_string_lossy());
            (name, std::fs::read_to_string(&p).unwrap())
        })
        .collect();
    pages.sort();
    assert!(pages.len() >= 9, "docs/guide/ holds {} pages", pages.len());
    pages
}

/// The README and every guide page, each with its path: what a user reads.
fn user_docs() -> Vec<(String, String)> {
    let mut docs = vec![("README.md".to_string(), readme())];
    docs.extend(guide_pages());
    docs
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
        "the README's first sh block must be exactly the run and the test command"
    );
    // Before them, on the first screen: the title, what stampede is, and the picture; no other command.
    let before = readme.split("```sh\n").next().unwrap();
    assert!(before.starts_with("# stampede\n"), "{before}");
    assert!(
        before.contains("](docs/report.png)"),
        "the picture is not on the first screen"
    );
    assert!(
        !before.contains("```"),
        "a code block comes before the set-up commands"
    );
    assert!(
        before.lines().count() < 25,
        "the set-up commands are not on the first screen"
    );
    // It says how to install both binaries, and stays a short read.
    for install in [
        "cargo install --locked --path coordinator",
        "cargo install --locked --path agent",
    ] {
        assert!(readme.contains(install), "README lacks `{install}`");
    }
    assert!(
        readme.len() <= 11 * 1024,
        "README.md is {} bytes: move detail into docs/guide/",
        readme.len()
    );
    // Every page it links to exists.
    for path in readme
        .split("](")
        .skip(1)
        .filter_map(|s| s.split(')').next())
        .filter(|p| !p.starts_with("http"))
    {
        let file = path.split('#').next().unwrap();
        assert!(
            root().join(file).exists(),
            "README links to {path}, which does not exist"
        );
    }
    // CI runs the README's two commands, in its order: the suite must pass with the results folder the
    // demo leaves in the checkout.
    let ci = std::fs::read_to_string(root().join(".ci/run")).unwrap();
    let both = format!("\n{}\n", commands.join("\n"));
    assert!(
        ci.contains(&both),
        ".ci/run does not run the README's commands one after the other:{both}"
    );
}

#[test]
fn every_link_between_the_docs_leads_to_a_file() {
    let mut pages = guide_pages();
    for dir in ["docs/reference", "docs"] {
        for e in std::fs::read_dir(root().join(dir)).unwrap().flatten() {
            let p = e.path();
            if p.extension().is_some_and(|x| x == "md") {
                let name = format!("{dir}/{}", p.file_name().unwrap().to_string_lossy());
                pages.push((name, std::fs::read_to_string(&p).unwrap()));
            }
        }
    }
    for name in ["ARCHITECTURE.md", "CONTRIBUTING.md"] {
        pages.push((
            name.into(),
            std::fs::read_to_string(root().join(name)).unwrap(),
        ));
    }
    let mut broken = Vec::new();
    for (name, text) in &pages {
        let dir = root().join(name).parent().unwrap().to_path_buf();
        for link in text.split("](").skip(1).filter_map(|s| s.split(')').next()) {
            let file = link.split('#').next().unwrap();
            if link.starts_with("http") || link.contains(' ') {
                continue;
            }
            // `#anchor` alone is a heading of the page itself.
            let (file, target) = if file.is_empty() {
                (name.as_str(), root().join(name))
            } else {
                (file, dir.join(file))
            };
            if !target.exists() {
                broken.push(format!("{name}: {link}"));
                continue;
            }
            // An anchor into a page must be one of its headings, as GitHub makes their ids.
            if let Some(anchor) = link.split_once('#').map(|(_, a)| a)
                && file.ends_with(".md")
            {
                let page = std::fs::read_to_string(&target).unwrap();
                if !page
                    .lines()
                    .any(|l| l.starts_with('#') && slug(l) == anchor)
                {
                    broken.push(format!("{name}: {link} (no such heading)"));
                }
            }
        }
    }
    assert!(
        broken.is_empty(),
        "links to files that do not exist: {broken:#?}"
    );
}

/// A heading's id as GitHub makes it: lower case, punctuation dropped, spaces as dashes.
fn slug(heading: &str) -> String {
    heading
        .trim_start_matches('#')
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// Every command path of a binary, found from the `Commands:` lists of its own help: `[]`, `["run"]`,
/// `["certs"]`, `["certs", "init"]`, ...
fn command_paths(bin_name: &str, path: Vec<String>) -> Vec<Vec<String>> {
    let mut args = path.clone();
    args.push("--help".into());
    let help = help_of(
        bin_name,
        &args.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    let mut found = vec![path.clone()];
    if let Some(list) = help.split("\nCommands:\n").nth(1) {
        for line in list.lines().take_while(|l| l.starts_with("  ")) {
            let name = line.split_whitespace().next().unwrap();
            if name != "help" {
                let mut sub = path.clone();
                sub.push(name.to_string());
                found.extend(command_paths(bin_name, sub));
            }
        }
    }
    found
}

/// docs/reference/cli.md as the binaries' help makes it today.
fn cli_reference() -> String {
    let mut out = String::from(
        "# Command-line reference\n\n\
         <!-- Generated from the binaries' --help by tests/tests/docs.rs; do not edit. Regenerate with:\n\
         \x20    STAMPEDE_BLESS=1 cargo test -p tests --test docs the_cli_reference -->\n\n\
         Every subcommand's `--help`, as the binaries print it. The guide pages (docs/guide/) say what the\n\
         flags are for; this page is what each one is called and its default.\n\n",
    );
    let mut sections = Vec::new();
    for bin_name in ["stampede", "stampede-agent"] {
        for path in command_paths(bin_name, Vec::new()) {
            let mut args = path.clone();
            args.push("--help".into());
            let help = help_of(
                bin_name,
                &args.iter().map(String::as_str).collect::<Vec<_>>(),
            );
            let title = std::iter::once(bin_name.to_string())
                .chain(path)
                .collect::<Vec<_>>()
                .join(" ");
            sections.push((title, help));
        }
    }
    out.push_str("Commands:\n\n");
    for (title, _) in &sections {
        let anchor = title.replace(' ', "-");
        out.push_str(&format!("- [`{title}`](#{anchor})\n"));
    }
    for (title, help) in &sections {
        out.push_str(&format!(
            "\n## {title}\n\n```text\n{}\n```\n",
            help.trim_end()
        ));
    }
    out
}

#[test]
fn the_cli_reference_is_the_generated_help_and_is_current() {
    let path = root().join("docs/reference/cli.md");
    let fresh = cli_reference();
    if std::env::var_os("STAMPEDE_BLESS").is_some() {
        std::fs::write(&path, &fresh).unwrap();
        return;
    }
    let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
    if on_disk != fresh {
        let differs = on_disk
            .lines()
            .zip(fresh.lines())
            .position(|(a, b)| a != b)
            .map_or_else(
                || "one is longer".to_string(),
                |i| format!("line {}", i + 1),
            );
        panic!(
            "docs/reference/cli.md is not the binaries' --help (first difference: {differs}); \
             regenerate it with:\n    STAMPEDE_BLESS=1 cargo test -p tests --test docs the_cli_reference"
        );
    }
    for section in [
        "## stampede run\n",
        "## stampede find-max\n",
        "## stampede certs init\n",
        "## stampede-agent\n",
    ] {
        assert!(fresh.contains(section), "the reference lacks {section}");
    }
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
    assert!(
        user_docs()
            .iter()
            .any(|(_, page)| page.contains(r#"`{"listen":"127.0.0.1:PORT","pid":N}`"#)),
        "no guide page says the ready file's format"
    );
}

#[test]
fn a_documented_flag_could_be_missing_from_the_binary() {
    // The commands a page can show, longest first so `stampede-agent ` is not read as `stampede `.
    let commands: Vec<(&str, String)> = [
        (
            "stampede find-max ",
            help_of("stampede", &["find-max", "--help"]),
        ),
        (
            "stampede compare ",
            help_of("stampede", &["compare", "--help"]),
        ),
        (
            "stampede report ",
            help_of("stampede", &["report", "--help"]),
        ),
        ("stampede serve ", help_of("stampede", &["serve", "--help"])),
        (
            "stampede certs init ",
            help_of("stampede", &["certs", "init", "--help"]),
        ),
        (
            "stampede certs issue ",
            help_of("stampede", &["certs", "issue", "--help"]),
        ),
        ("stampede run ", help_of("stampede", &["run", "--help"])),
        ("stampede-agent ", help_of("stampede-agent", &["--help"])),
    ]
    .into_iter()
    .collect();
    let mut checked = 0;
    let mut unknown = Vec::new();
    for (page, text) in user_docs() {
        // Commands in code blocks and in table cells alike.
        for cell in text.lines().flat_map(|l| l.split(" | ")) {
            let Some((help, command)) = commands
                .iter()
                .find_map(|(name, help)| cell.split_once(name).map(|(_, c)| (help, c)))
            else {
                continue;
            };
            for word in command.split(|c: char| c.is_whitespace() || c == '`' || c == '(') {
                let Some(flag) = word.strip_prefix("--") else {
                    continue;
                };
                let flag = flag
                    .split(['=', ',', ')', ';', ':'])
                    .next()
                    .unwrap()
                    .replace('_', "-");
                if flag.is_empty() || !flag.starts_with(|c: char| c.is_ascii_lowercase()) {
                    continue;
                }
                if !help.contains(&format!("--{flag}")) {
                    unknown.push(format!("{page}: '{}' uses --{flag}", cell.trim()));
                }
                checked += 1;
            }
        }
    }
    assert!(
        unknown.is_empty(),
        "flags the docs use that --help does not list: {unknown:#?}"
    );
    assert!(checked > 100, "only {checked} flags found in the docs");
}
