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

/// Every page a reader may open, each with its path: the README and the files beside it, docs/ with
/// its guide and reference (but the generated cli.md, which is `--help`'s words), deploy/README.md.
fn every_page() -> Vec<(String, String)> {
    let mut pages = Vec::new();
    for name in [
        "README.md",
        "ARCHITECTURE.md",
        "CONTRIBUTING.md",
        "SECURITY.md",
        "deploy/README.md",
    ] {
        let text =
            std::fs::read_to_string(root().join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        pages.push((name.to_string(), text));
    }
    for dir in ["docs", "docs/guide", "docs/reference"] {
        let mut found: Vec<(String, String)> = std::fs::read_dir(root().join(dir))
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "md"))
            .map(|p| {
                let name = format!("{dir}/{}", p.file_name().unwrap().to_string_lossy());
                (name, std::fs::read_to_string(&p).unwrap())
            })
            .filter(|(name, _)| name != "docs/reference/cli.md")
            .collect();
        found.sort();
        pages.extend(found);
    }
    pages
}

/// The lines of a page outside its fenced code blocks, numbered from 1; a fence's own line is given
/// as blank, so that it ends a paragraph.
fn prose_lines(text: &str) -> Vec<(usize, &str)> {
    let mut fenced = false;
    let mut lines = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            lines.push((i + 1, ""));
        } else if !fenced {
            lines.push((i + 1, line));
        }
    }
    lines
}

/// Each paragraph or list item of a page that ends without a full stop (or `:`, `?`, `!`; a list item
/// may also end with `;`, a clause of a list), as its first line and its last words: the trace of a
/// sentence cut off, as the wrk2 bullet once stopped at "so a".
fn unfinished_paragraphs(text: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    let mut block: Vec<(usize, &str)> = Vec::new();
    let mut check = |block: &mut Vec<(usize, &str)>| {
        let Some(&(first, head)) = block.first() else {
            return;
        };
        let head = head.trim_start();
        // Headings, tables, comments and pictures are not sentences.
        if !["#", "|", "<!--", "!["].iter().any(|p| head.starts_with(p)) {
            let mut items: Vec<Vec<(usize, &str)>> = Vec::new();
            for &(n, line) in block.iter() {
                let t = line.trim_start();
                let item = t.starts_with("- ")
                    || t.starts_with("* ")
                    || t.split_once(". ").is_some_and(|(d, _)| {
                        !d.is_empty() && d.chars().all(|c| c.is_ascii_digit())
                    });
                match items.last_mut() {
                    Some(last) if !item => last.push((n, line)),
                    _ => items.push(vec![(n, line)]),
                }
            }
            for item in items {
                let is_item = item.len() != block.len() || {
                    let t = head;
                    t.starts_with("- ") || t.starts_with("* ") || t.starts_with(char::is_numeric)
                };
                let end = item.last().unwrap().1.trim_end();
                // Closing marks after the stop: `.)`, `.**`, `.`` ` ``, `."`.
                let bare = end.trim_end_matches([')', '*', '`', '"']);
                let stops: &[char] = if is_item {
                    &['.', ':', '?', '!', ';']
                } else {
                    &['.', ':', '?', '!']
                };
                if !bare.ends_with(stops) {
                    let tail: String = end
                        .chars()
                        .rev()
                        .take(60)
                        .collect::<Vec<_>>()
                        .into_iter()
                        .rev()
                        .collect();
                    found.push((item[0].0.max(first), tail));
                }
            }
        }
        block.clear();
    };
    for (n, line) in prose_lines(text) {
        if line.trim().is_empty() {
            check(&mut block);
        } else {
            block.push((n, line));
        }
    }
    check(&mut block);
    found
}

/// Each heading of a page whose section is code and nothing else: no sentence says what the block
/// shows (as "## A plan file" once had none). A section of tables or subsections only is reference.
fn sections_that_are_only_code(text: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    let mut heading: Option<(usize, &str)> = None;
    let (mut code, mut words) = (false, false);
    let mut fenced = false;
    for (i, line) in text.lines().chain(std::iter::once("# end")).enumerate() {
        let t = line.trim();
        if t.starts_with("```") {
            fenced = !fenced;
            code = true;
            continue;
        }
        if fenced {
            continue;
        }
        if line.starts_with('#') {
            if let Some((at, h)) = heading.filter(|_| code && !words) {
                found.push((at, h.to_string()));
            }
            heading = Some((i + 1, line));
            (code, words) = (false, false);
        } else if !t.is_empty() && !t.starts_with("<!--") && !t.starts_with("![") {
            words = true;
        }
    }
    found
}

/// The top-level folders of the checkout, as ARCHITECTURE.md's codemap lists them (the tidy checks
/// keep that list whole).
fn top_level_folders() -> Vec<String> {
    let architecture = std::fs::read_to_string(root().join("ARCHITECTURE.md")).unwrap();
    architecture
        .lines()
        .filter_map(|l| l.strip_prefix("- `"))
        .filter_map(|l| l.split_once("/`").map(|(name, _)| name.to_string()))
        .filter(|name| !name.contains('/'))
        .collect()
}

/// The paths into the checkout a page names in backticks outside its code blocks: those under a
/// top-level folder, without wildcards or placeholders (`hlog/step-NNN.hlog`, `OUT/NAME/`).
fn named_paths(text: &str, folders: &[String]) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for (n, line) in prose_lines(text) {
        for (i, span) in line.split('`').enumerate() {
            // Odd pieces are inside backticks.
            if i % 2 == 0 || span.contains([' ', '*', '{', '<']) {
                continue;
            }
            let Some((first, rest)) = span.split_once('/') else {
                continue;
            };
            let placeholder = rest.split('/').any(|part| {
                part.len() > 1 && part.chars().all(|c| c.is_ascii_uppercase() || c == '_')
                    || part.contains("NNN")
            });
            if folders.iter().any(|f| f == first) && !placeholder {
                found.push((n, span.to_string()));
            }
        }
    }
    found
}

#[test]
fn a_cut_off_sentence_and_a_section_of_bare_code_are_found() {
    let page = "# Page\n\nA sentence.\n\n- **wrk2**: measures, so a\n- **wrk/ab**: the closed loop.\n\n\
                ## A plan file\n\n\n```toml\nurl = \"x\"\n```\n\n## Fine\n\nWhat it is:\n\n```sh\nls\n```\n\n\
                | a | b |\n|---|---|\n\n1. first; \n2. second:\n\nends with a word\n";
    assert_eq!(
        unfinished_paragraphs(page),
        vec![
            (5, "- **wrk2**: measures, so a".to_string()),
            (29, "ends with a word".to_string())
        ]
    );
    assert_eq!(
        sections_that_are_only_code(page),
        vec![(8, "## A plan file".to_string())]
    );
    let folders = vec!["results".to_string(), "docs".to_string()];
    assert_eq!(
        named_paths(
            "`results/src/report.rs` and `run/step.rs`, `docs/guide/` and `OUT/NAME/`, \
             `results/NAME/x`, `tests/*.rs`\n```\n`results/in/code`\n```\n",
            &folders
        ),
        vec![
            (1, "results/src/report.rs".to_string()),
            (1, "docs/guide/".to_string())
        ]
    );
}

#[test]
fn every_paragraph_ends_and_every_path_named_exists() {
    let folders = top_level_folders();
    assert!(
        folders.len() >= 8 && folders.iter().any(|f| f == "coordinator"),
        "{folders:?}"
    );
    let mut wrong = Vec::new();
    for (name, text) in every_page() {
        for (line, end) in unfinished_paragraphs(&text) {
            wrong.push(format!(
                "{name}:{line}: a paragraph ends without a full stop: ...{end}"
            ));
        }
        for (line, heading) in sections_that_are_only_code(&text) {
            wrong.push(format!(
                "{name}:{line}: '{heading}' has a code block and no text saying what it shows"
            ));
        }
        for (line, path) in named_paths(&text, &folders) {
            if !root().join(&path).exists() {
                wrong.push(format!("{name}:{line}: `{path}` does not exist"));
            }
        }
        // Relative links, from the page's own folder.
        let dir = root().join(&name).parent().unwrap().to_path_buf();
        for link in text.split("](").skip(1).filter_map(|s| s.split(')').next()) {
            let file = link.split('#').next().unwrap();
            if file.is_empty() || link.contains("://") || link.contains(' ') {
                continue;
            }
            if !dir.join(file).exists() {
                wrong.push(format!("{name}: link to {link}, which does not exist"));
            }
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

/// The blocks of a page marked to be run (a fence opened with ```` ```sh runnable ````), each with the
/// line its fence is on.
fn runnable_blocks(text: &str) -> Vec<(usize, String)> {
    let mut blocks = Vec::new();
    let mut open: Option<(usize, String)> = None;
    for (i, line) in text.lines().enumerate() {
        match (&mut open, line.trim_start()) {
            (None, "```sh runnable") => open = Some((i + 1, String::new())),
            (Some(_), t) if t.starts_with("```") => blocks.push(open.take().unwrap()),
            (Some((_, body)), _) => {
                body.push_str(line);
                body.push('\n');
            }
            _ => {}
        }
    }
    blocks
}

/// The script with each loopback port it names (`127.0.0.1:8080`) moved to a free one, the same port
/// to the same free one: the page's commands as a reader pastes them, without the fixed ports a test
/// must not bind beside other tests.
fn on_free_ports(script: &str) -> String {
    const HOST: &str = "127.0.0.1:";
    let mut moved: Vec<(String, String)> = Vec::new();
    let mut out = String::new();
    let mut rest = script;
    while let Some(at) = rest.find(HOST) {
        let after = &rest[at + HOST.len()..];
        let digits: String = after.chars().take_while(char::is_ascii_digit).collect();
        out.push_str(&rest[..at + HOST.len()]);
        if digits.is_empty() || digits == "0" {
            rest = after;
            continue;
        }
        let known = moved.iter().find(|(from, _)| *from == digits).cloned();
        let to = known.map(|(_, to)| to).unwrap_or_else(|| {
            let free = std::net::TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port()
                .to_string();
            moved.push((digits.clone(), free.clone()));
            free
        });
        out.push_str(&to);
        rest = &after[digits.len()..];
    }
    out.push_str(rest);
    out
}

#[test]
fn the_port_mover_keeps_one_port_one_port() {
    let moved =
        on_free_ports("a 127.0.0.1:8080 b 127.0.0.1:8080/ c 127.0.0.1:7701 d 127.0.0.1:0\n");
    let ports: Vec<&str> = moved
        .split("127.0.0.1:")
        .skip(1)
        .map(|p| p.split(|c: char| !c.is_ascii_digit()).next().unwrap())
        .collect();
    assert_eq!(ports.len(), 4);
    assert_eq!(ports[0], ports[1]);
    assert_ne!(ports[0], ports[2]);
    assert_ne!(ports[0], "8080");
    assert_eq!(ports[3], "0");
}

/// Runs one block with the built binaries first on PATH, in its own directory and process group
/// (whatever it leaves running is killed after), for at most `limit`: its exit status and output.
fn run_block(script: &str, limit: std::time::Duration) -> Result<String, String> {
    use std::os::unix::process::CommandExt;
    let dir = tempfile::tempdir().unwrap();
    let bins = bin("stampede").parent().unwrap().to_path_buf();
    bin("stampede-agent");
    let path = std::env::join_paths(std::iter::once(bins).chain(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    )))
    .unwrap();
    let mut child = std::process::Command::new("bash")
        .args(["-euo", "pipefail", "-c", script])
        .current_dir(dir.path())
        .env("PATH", path)
        // A page's blocks run from the checkout's root as a reader's do; here in a directory of
        // their own, told where the checkout is (its tests/app, its docs).
        .env("STAMPEDE_CHECKOUT", root())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .process_group(0)
        .spawn()
        .unwrap();
    let group = child.id() as i32;
    let start = std::time::Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if start.elapsed() > limit {
            break None;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    // SAFETY: kill(2) with a negative pid signals the group this test made; no memory is touched.
    unsafe {
        libc::kill(-group, libc::SIGKILL);
    }
    let out = child.wait_with_output().unwrap();
    let said = format!("{}{}", text(&out.stdout), text(&out.stderr));
    match status {
        Some(s) if s.success() => Ok(said),
        Some(s) => Err(format!("exited {s}: {said}")),
        None => Err(format!("still running after {limit:?}: {said}")),
    }
}

#[test]
fn the_guide_s_runnable_blocks_run_on_loopback() {
    let mut ran = 0;
    let mut failed = Vec::new();
    for (name, text) in guide_pages() {
        for (line, block) in runnable_blocks(&text) {
            // Traffic only to loopback: a block that names another address is no block to run here.
            assert!(
                !block.contains("0.0.0.0") && !block.contains("10.0."),
                "{name}:{line}: a runnable block leaves loopback"
            );
            if let Err(e) = run_block(&on_free_ports(&block), std::time::Duration::from_secs(120)) {
                failed.push(format!("{name}:{line}: {e}"));
            }
            ran += 1;
        }
    }
    assert!(failed.is_empty(), "{failed:#?}");
    assert!(ran >= 1, "no ```sh runnable block in docs/guide/");
}
