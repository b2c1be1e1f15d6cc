//! Tidy checks on the source tree as git tracks it, run as ordinary tests (rust-analyzer's `tidy.rs` is
//! the model): every source file opens with a `//!` header saying what it is for, ARCHITECTURE.md's
//! codemap has every crate and top-level folder, every path it and CONTRIBUTING.md name is in the
//! checkout, no function grows past what one screen can hold, no crate's files nor its modules import
//! each other in a cycle, and a quantity's key is written only in the catalogue.
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

#[path = "tidy/import_graph.rs"]
mod import_graph;

/// The longest a function in any crate's `src` may be, in lines, signature to brace.
const MAX_FN_LINES: usize = 120;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the tests crate sits in the workspace")
        .to_path_buf()
}

/// The checkout's files the checks read, relative to `root`, sorted: git's tracked files, so what a
/// user's run leaves in the checkout (`stampede-results/` from the README's demo, a `--out` folder)
/// never fails a check. A new file counts once it is added (`git add`), as CI's clean clone sees it.
/// Without git (a source archive, no `git` on the machine), every file but the hidden, the build's and
/// the top-level folders `.gitignore` names.
fn checkout_files(root: &Path) -> Vec<PathBuf> {
    let mut files = tracked_files(root).unwrap_or_else(|| walked_files(root));
    // A tracked file deleted but not yet committed is not there to read.
    files.retain(|f| root.join(f).is_file());
    files.sort();
    files
}

/// `git ls-files` in `root`, or None where there is no git or no repository.
fn tracked_files(root: &Path) -> Option<Vec<PathBuf>> {
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(root)
        .args(["ls-files", "-z"])
        .output()
        .ok()
        .filter(|o| o.status.success())?;
    Some(
        out.stdout
            .split(|b| *b == 0)
            .filter(|p| !p.is_empty())
            .map(|p| PathBuf::from(String::from_utf8_lossy(p).into_owned()))
            .collect(),
    )
}

/// Every file under `root` but the hidden ones, the build's (`target/`) and those of the top-level
/// folders the root `.gitignore` names (`stampede-results/`, `/bench-results`): the checkout as git
/// would track it, near enough, where there is no git to ask.
fn walked_files(root: &Path) -> Vec<PathBuf> {
    let ignore = std::fs::read_to_string(root.join(".gitignore")).unwrap_or_default();
    let ignored: BTreeSet<&str> = ignore
        .lines()
        .map(|l| l.trim().trim_start_matches('/').trim_end_matches('/'))
        .filter(|l| !l.is_empty() && !l.starts_with('#') && !l.contains(['/', '*']))
        .chain(["target"])
        .collect();
    let mut found = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            let name = e.file_name().to_string_lossy().to_string();
            let top = d == root;
            if name.starts_with('.') || (top && ignored.contains(name.as_str())) {
                continue;
            }
            if p.is_dir() {
                stack.push(p);
            } else {
                found.push(p.strip_prefix(root).unwrap().to_path_buf());
            }
        }
    }
    found
}

/// Every `.rs` file of the checkout under `dir` (relative to the workspace root), as paths relative
/// to `dir`, sorted.
fn sources(dir: &Path) -> Vec<PathBuf> {
    let rel = dir.strip_prefix(root()).unwrap_or(dir);
    checkout_files(&root())
        .into_iter()
        .filter(|f| f.extension().is_some_and(|x| x == "rs"))
        .filter_map(|f| f.strip_prefix(rel).ok().map(Path::to_path_buf))
        .collect()
}

/// The workspace's crates: every top-level folder with a `Cargo.toml` and a `src/`, so a crate added
/// is covered without a list to keep.
fn workspace_crates() -> Vec<String> {
    let files = checkout_files(&root());
    let mut crates: Vec<String> = top_level_folders(&root())
        .into_iter()
        .filter(|d| {
            files.contains(&Path::new(d).join("Cargo.toml"))
                && files
                    .iter()
                    .any(|f| f.starts_with(Path::new(d).join("src")))
        })
        .collect();
    crates.sort();
    crates
}

/// The top-level folders of the checkout at `root` a person would look into: not hidden, and holding
/// a file the checkout has (not a results folder a run left, not the build's).
fn top_level_folders(root: &Path) -> Vec<String> {
    let found: BTreeSet<String> = checkout_files(root)
        .iter()
        .filter(|f| f.components().count() > 1)
        .filter_map(|f| f.components().next())
        .map(|c| c.as_os_str().to_string_lossy().to_string())
        .filter(|n| !n.starts_with('.') && n != "target")
        .collect();
    found.into_iter().collect()
}

/// A checkout as the README leaves it: one crate tracked, and the demo's `stampede-results/` (ignored)
/// and a `--out shootout` folder (neither tracked nor ignored) beside it.
fn checkout_after_a_run() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (file, text) in [
        (".gitignore", "/target\nstampede-results/\n"),
        ("shared/src/lib.rs", "//! The wire.\n"),
        ("shared/Cargo.toml", "[package]\n"),
        ("stampede-results/20261202T160816Z/run.json", "{}\n"),
        ("target/debug/stampede", ""),
    ] {
        let path = dir.path().join(file);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    dir
}

#[test]
fn a_results_folder_the_readme_s_demo_leaves_is_no_code_folder() {
    // Regression: `cargo run --release --bin stampede -- demo`, then `cargo test --workspace`, as the
    // README orders them, failed the codemap check on stampede-results/ and so never ran the tests
    // after tidy.
    let checkout = checkout_after_a_run();
    let root = checkout.path();
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .arg("-C")
            .arg(root)
            .args(args)
            .output()
            .is_ok_and(|o| o.status.success())
    };
    // Without git (none installed) the check falls back to the walk, asserted below as well.
    if git(&["init", "-q"]) {
        assert!(git(&["add", ".gitignore", "shared"]));
        std::fs::create_dir_all(root.join("shootout/nginx")).unwrap();
        std::fs::write(root.join("shootout/nginx/run.json"), "{}\n").unwrap();
        assert_eq!(top_level_folders(root), ["shared"]);
        std::fs::remove_dir_all(root.join("shootout")).unwrap();
        std::fs::remove_dir_all(root.join(".git")).unwrap();
    }
    // No repository: the walk leaves out the folders .gitignore names and the build's.
    let walked = walked_files(root);
    assert!(
        walked.contains(&PathBuf::from("shared/src/lib.rs")),
        "{walked:?}"
    );
    assert!(
        !walked
            .iter()
            .any(|f| f.starts_with("stampede-results") || f.starts_with("target")),
        "{walked:?}"
    );
}

/// Whether a source file opens with a `//!` header (a file's first line, before any code).
fn has_header(text: &str) -> bool {
    text.lines().next().is_some_and(|l| l.starts_with("//!"))
}

#[test]
fn every_source_file_opens_with_a_header_saying_what_it_is() {
    let crates = workspace_crates();
    for krate in ["shared", "proto", "agent", "coordinator", "report", "tests"] {
        assert!(
            crates.iter().any(|c| c == krate),
            "no crate {krate}: {crates:?}"
        );
    }
    let mut bare = Vec::new();
    for krate in &crates {
        let src = root().join(krate).join("src");
        for f in sources(&src) {
            let text = std::fs::read_to_string(src.join(&f)).unwrap();
            if !has_header(&text) {
                bare.push(format!("{krate}/src/{}", f.display()));
            }
        }
    }
    assert!(
        bare.is_empty(),
        "source files without a `//!` header on their first line (one or two lines: what the file is \
         for): {bare:#?}"
    );
}

#[test]
fn the_header_check_wants_the_first_line() {
    assert!(has_header("//! The merge.\nuse std::fmt;\n"));
    assert!(!has_header("use std::fmt;\n//! Too late.\n"));
    assert!(!has_header("// A plain comment.\n"));
    assert!(!has_header(""));
}

#[test]
fn the_codemap_has_every_crate_and_top_level_folder() {
    let architecture = std::fs::read_to_string(root().join("ARCHITECTURE.md")).unwrap();
    let codemap = architecture
        .split("\n## Codemap\n")
        .nth(1)
        .and_then(|rest| rest.split("\n## ").next())
        .expect("ARCHITECTURE.md has a `## Codemap` section");
    let missing: Vec<String> = top_level_folders(&root())
        .into_iter()
        .filter(|d| !codemap.contains(&format!("\n- `{d}/`")))
        .collect();
    assert!(
        missing.is_empty(),
        "folders ARCHITECTURE.md's codemap has no `- `NAME/` — ...` entry for (say what each holds, \
         at the level of its folders and modules; per-file detail goes in the file's `//!` header): \
         {missing:#?}"
    );
    // The dependency direction is stated where a newcomer reads the map.
    for edge in [
        "shared <- proto <- control <- agent <- coordinator",
        "shared <- monitor <- results <- report <- coordinator",
    ] {
        assert!(
            codemap.contains(edge),
            "the codemap does not state `{edge}`"
        );
    }
    // And every arrow the picture draws is a dependency in the crate's manifest.
    let picture = codemap
        .split("```")
        .nth(1)
        .expect("the codemap draws its dependency picture in a code block");
    for line in picture.lines() {
        let crates: Vec<&str> = line
            .split("<-")
            .map(|c| c.trim().split('[').next().unwrap_or("").trim())
            .collect();
        for pair in crates.windows(2) {
            let (used, user) = (pair[0], pair[1]);
            let manifest = std::fs::read_to_string(root().join(user).join("Cargo.toml"))
                .unwrap_or_else(|e| panic!("the codemap draws a crate `{user}`: {e}"));
            let depends = manifest.lines().any(|l| {
                l.trim_start().starts_with(&format!("{used}.workspace"))
                    || l.trim_start().starts_with(&format!("{used} = "))
            });
            assert!(
                depends,
                "the codemap draws `{used} <- {user}`, but {user}/Cargo.toml does not depend on {used}"
            );
        }
    }
}

/// The pages whose every path must be in the checkout: the map a contributor works from.
const MAPS: [&str; 2] = ["ARCHITECTURE.md", "CONTRIBUTING.md"];

/// What a named file ends with when it is part of the checkout (a source, a doc, a script, a
/// picture), unlike `run.json` or `steps.tsv`, which name what a run writes.
const CHECKOUT_EXTENSIONS: [&str; 9] = [
    ".rs", ".md", ".sh", ".toml", ".proto", ".png", ".yml", ".yaml", ".service",
];

/// Whether a backticked span is a path into the checkout: a folder (`agent/src/monitor/probe/`),
/// a file (`run/step.rs`, `check.sh`); not a URL, a Rust path, a flag, a route (`/metrics`), a
/// wildcard or a placeholder (`OUT/NAME/`, `hlog/step-NNN.hlog`).
fn is_checkout_path(span: &str) -> bool {
    let file = CHECKOUT_EXTENSIONS
        .iter()
        .any(|x| span.ends_with(x) && span.len() > x.len() && !span.ends_with(&format!("/{x}")));
    let placeholder = span.split('/').any(|part| {
        part.len() > 1 && part.chars().all(|c| c.is_ascii_uppercase() || c == '_')
            || part.contains("NNN")
    });
    (file || span.contains('/'))
        && !placeholder
        && !span.starts_with(['/', '-', '$'])
        && !span.contains(|c: char| c.is_whitespace() || "*{}<>:$=".contains(c))
}

/// Each path a page names, with its line and, inside ARCHITECTURE.md's codemap, the folder whose
/// entry it is in (where a bare name like `step.rs` is looked for): backticked spans and relative
/// link targets, outside code blocks.
fn paths_named(text: &str) -> Vec<(usize, String, Option<String>)> {
    let mut found = Vec::new();
    let (mut fenced, mut in_codemap, mut entry) = (false, false, None);
    for (n, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        if line.starts_with("## ") {
            in_codemap = line == "## Codemap";
        }
        if !line.starts_with("  ") {
            entry = line
                .strip_prefix("- `")
                .and_then(|l| l.split_once("/`"))
                .filter(|_| in_codemap)
                .map(|(folder, _)| folder.to_string());
        }
        let spans = line.split('`').skip(1).step_by(2);
        let links = line
            .split("](")
            .skip(1)
            .filter_map(|s| s.split(')').next())
            .filter(|l| !l.contains("://") && !l.starts_with('#'))
            .map(|l| l.split('#').next().unwrap_or(l));
        for path in spans.filter(|s| is_checkout_path(s)).chain(links) {
            found.push((n + 1, path.to_string(), entry.clone()));
        }
    }
    found
}

/// Whether the checkout (its tracked `files`) has `path`, a file or a folder holding one (only a
/// folder when it ends with `/`): from the root when its first part is a top-level name of the
/// checkout, else as the end of a tracked path, under `within` when given.
fn in_checkout(files: &[PathBuf], path: &str, within: Option<&str>) -> bool {
    let folder_only = path.ends_with('/');
    let path = path.trim_start_matches("./").trim_end_matches('/');
    let first = path.split('/').next().unwrap_or(path);
    let from_root = files.iter().any(|f| {
        f.components()
            .next()
            .is_some_and(|c| c.as_os_str() == first)
    });
    let under = match within {
        Some(w) if !from_root => format!("{w}/"),
        _ => String::new(),
    };
    files.iter().any(|f| {
        let f = f.to_string_lossy().replace('\\', "/");
        let Some(rest) = f.strip_prefix(&under) else {
            return false;
        };
        // Where the path may begin: the root, or (a bare name) after any `/`.
        let starts: Vec<&str> = if from_root {
            vec![rest]
        } else {
            std::iter::once(rest)
                .chain(rest.match_indices('/').map(|(i, _)| &rest[i + 1..]))
                .collect()
        };
        starts.iter().any(|s| {
            (!folder_only && *s == path) || s.strip_prefix(path).is_some_and(|r| r.starts_with('/'))
        })
    })
}

#[test]
fn every_path_the_map_names_is_in_the_checkout() {
    let files = checkout_files(&root());
    let mut missing = Vec::new();
    for page in MAPS {
        let text = std::fs::read_to_string(root().join(page)).unwrap();
        for (line, path, within) in paths_named(&text) {
            if !in_checkout(&files, &path, within.as_deref()) {
                let place = within.map_or(String::new(), |w| format!(" (under {w}/)"));
                missing.push(format!("{page}:{line}: `{path}`{place}"));
            }
        }
    }
    for m in &missing {
        eprintln!("{m}");
    }
    assert!(
        missing.is_empty(),
        "paths ARCHITECTURE.md or CONTRIBUTING.md name that the checkout (git ls-files) does not \
         have: say where the thing is now: {missing:#?}"
    );
}

#[test]
fn a_path_moved_away_from_where_the_map_says_is_found() {
    let page = "# Map\n\nSee [the guide](docs/guide/) and [gone](docs/old.md#top), `run.json`, \
                `h2c://`, `/metrics`, `OUT/NAME/`, `tests/*.rs`, `run::step`.\n\n## Codemap\n\n\
                ```\nshared <- results/step.rs\n```\n\n\
                - `results/` — `step.rs` the schema, `step/knee.rs`,\n  `compare/` the ranking.\n\
                - `coordinator/` — `run/step.rs`.\n\n## Invariants\n\n\
                - `results/src/step.rs` and `step.rs` are the schema, `deploy/Dockerfile`, \
                `results/src/compare`, `compare/mod.rs/`.\n";
    let named = paths_named(page);
    let shown: Vec<String> = named
        .iter()
        .map(|(n, p, w)| format!("{n} {p} {}", w.as_deref().unwrap_or("-")))
        .collect();
    assert_eq!(
        shown,
        [
            "3 docs/guide/ -",
            "3 docs/old.md -",
            "11 results/ results",
            "11 step.rs results",
            "11 step/knee.rs results",
            "12 compare/ results",
            "13 coordinator/ coordinator",
            "13 run/step.rs coordinator",
            "17 results/src/step.rs -",
            "17 step.rs -",
            "17 deploy/Dockerfile -",
            "17 results/src/compare -",
            "17 compare/mod.rs/ -",
        ]
    );
    // results/src/step.rs became step/mod.rs; coordinator's run/step.rs stays.
    let files: Vec<PathBuf> = [
        "docs/guide/live.md",
        "results/src/step/mod.rs",
        "results/src/step/knee.rs",
        "results/src/compare/mod.rs",
        "coordinator/src/run/step.rs",
        "deploy/Dockerfile",
    ]
    .iter()
    .map(PathBuf::from)
    .collect();
    let missing: Vec<&str> = named
        .iter()
        .filter(|(_, p, w)| !in_checkout(&files, p, w.as_deref()))
        .map(|(_, p, _)| p.as_str())
        .collect();
    // A name with a `/` after it is a folder, which a file is not.
    assert_eq!(
        missing,
        [
            "docs/old.md",
            "step.rs",
            "results/src/step.rs",
            "compare/mod.rs/"
        ]
    );
}

/// Each function in `text` whose body runs past `max` lines, as (line, name, length).
fn long_functions(text: &str, max: usize) -> Vec<(usize, String, usize)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut long = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        let after_vis = trimmed
            .strip_prefix("pub(crate) ")
            .or_else(|| trimmed.strip_prefix("pub "))
            .unwrap_or(trimmed);
        let after_async = after_vis.strip_prefix("async ").unwrap_or(after_vis);
        let Some(sig) = after_async.strip_prefix("fn ") else {
            continue;
        };
        let name: String = sig
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        // A declaration without a body (a trait's) ends at its semicolon.
        let closing = format!("{}}}", " ".repeat(indent));
        let Some(end) = lines[i..].iter().position(|l| {
            *l == closing || (l.trim_end().ends_with(';') && !l.contains('{') && *l == lines[i])
        }) else {
            continue;
        };
        if end + 1 > max {
            long.push((i + 1, name, end + 1));
        }
    }
    long
}

#[test]
fn no_function_runs_past_one_screen() {
    let mut long = Vec::new();
    for krate in &workspace_crates() {
        let src = root().join(krate).join("src");
        for f in sources(&src) {
            let text = std::fs::read_to_string(src.join(&f)).unwrap();
            for (line, name, len) in long_functions(&text, MAX_FN_LINES) {
                long.push(format!(
                    "{krate}/src/{}:{line} fn {name}: {len} lines",
                    f.display()
                ));
            }
        }
    }
    assert!(
        long.is_empty(),
        "functions over {MAX_FN_LINES} lines (split them by what they do): {long:#?}"
    );
}

#[test]
fn the_function_measure_counts_signature_to_closing_brace() {
    let text = "fn short() {\n    one();\n}\n\n    pub async fn long(\n        a: u8,\n    ) {\n        x();\n        y();\n    }\n";
    assert_eq!(long_functions(text, 3), vec![(5, "long".to_string(), 6)]);
    assert!(long_functions(text, 6).is_empty());
}

/// Each crate's import graph between its files, by crate.
fn crate_graphs() -> Vec<(String, import_graph::Edges)> {
    let mut graphs = Vec::new();
    for krate in workspace_crates() {
        let src = root().join(&krate).join("src");
        let files: Vec<(String, String, String)> = sources(&src)
            .into_iter()
            .map(|f| {
                let text = std::fs::read_to_string(src.join(&f)).unwrap();
                let under = f.to_string_lossy().replace('\\', "/");
                (format!("{krate}/src/{under}"), under, text)
            })
            .collect();
        graphs.push((krate, import_graph::edges(&files)));
    }
    graphs
}

/// The crate-level module a file of `krate` is part of (`run` for `run/step.rs`), None for the
/// crate's root.
fn top_module(krate: &str, file: &str) -> Option<String> {
    let under = file.strip_prefix(&format!("{krate}/src/"))?;
    let top = under.split('/').next()?.trim_end_matches(".rs");
    (top != "lib" && top != "main").then(|| top.to_string())
}

#[test]
fn no_crate_has_files_that_import_each_other_in_a_cycle() {
    let mut found = Vec::new();
    for (_, edges) in crate_graphs() {
        for group in import_graph::cycles(&edges) {
            found.push(import_graph::describe(&group, &edges));
        }
    }
    // Every finding, whole, where a reader of the test's output looks first.
    for cycle in &found {
        eprintln!("{cycle}");
    }
    assert!(
        found.is_empty(),
        "files of one crate that import each other in a cycle (move what both need into a module \
         both import): {found:#?}"
    );
}

#[test]
fn no_crate_has_modules_that_import_each_other_in_a_cycle() {
    // Files can take from each other one way only and their crate-level modules still both ways
    // (`a/x.rs` from `b.rs`, `b.rs` from `a/y.rs`): the crate's map is tangled all the same.
    let mut found = Vec::new();
    for (krate, edges) in crate_graphs() {
        let modules = import_graph::grouped(&edges, |f| top_module(&krate, f));
        for group in import_graph::cycles(&modules) {
            found.push(format!(
                "{krate}: {}",
                import_graph::describe(&group, &modules)
            ));
        }
    }
    for cycle in &found {
        eprintln!("{cycle}");
    }
    assert!(
        found.is_empty(),
        "crate-level modules that import each other in a cycle: {found:#?}"
    );
}

/// A crate of `(path under src/, text)` files as the graph reads them, shown by that path.
fn crate_of(files: &[(&str, &str)]) -> import_graph::Edges {
    let files: Vec<(String, String, String)> = files
        .iter()
        .map(|(f, t)| (f.to_string(), f.to_string(), t.to_string()))
        .collect();
    import_graph::edges(&files)
}

fn names(edges: &import_graph::Edges, from: &str, to: &str) -> Vec<String> {
    edges
        .get(&(from.to_string(), to.to_string()))
        .map(|n| n.iter().cloned().collect())
        .unwrap_or_default()
}

#[test]
fn the_cycle_check_finds_a_cycle_through_braces() {
    let mut files = vec![
        ("lib.rs", "mod fleet;\nmod output;\nmod run;\n"),
        ("run.rs", "use crate::{fleet::{Fleet, X}, output};\n"),
        ("fleet.rs", "use crate::run::RunError;\npub struct Fleet;\n"),
        ("output.rs", "//! Nothing imported.\n"),
    ];
    let edges = crate_of(&files);
    assert_eq!(names(&edges, "run.rs", "fleet.rs"), ["Fleet", "X"]);
    assert_eq!(names(&edges, "run.rs", "output.rs"), ["output"]);
    let cycles = import_graph::cycles(&edges);
    assert_eq!(cycles, [["fleet.rs", "run.rs"]], "run -> fleet -> run");
    files[2].1 = "pub struct Fleet;\n";
    assert!(import_graph::cycles(&crate_of(&files)).is_empty());
}

#[test]
fn the_cycle_check_follows_super_at_any_depth() {
    // Regression: report/src/run_page/charts.rs and search.rs took from each other through
    // `super::`, which the crate-level check never read.
    let files = [
        ("lib.rs", "mod page;\n"),
        ("page.rs", "mod charts;\nmod search;\n"),
        (
            "page/charts.rs",
            "fn knee() { super::search::boundaries(); }\npub fn unit_label() {}\n",
        ),
        (
            "page/search.rs",
            "use super::charts::{self as c};\npub fn boundaries() { c::unit_label(); }\n",
        ),
        (
            "page/deep/leaf.rs",
            "use super::super::charts::unit_label;\n",
        ),
    ];
    let edges = crate_of(&files);
    assert_eq!(
        names(&edges, "page/charts.rs", "page/search.rs"),
        ["boundaries"]
    );
    assert_eq!(
        names(&edges, "page/search.rs", "page/charts.rs"),
        ["charts", "unit_label"]
    );
    assert_eq!(
        names(&edges, "page/deep/leaf.rs", "page/charts.rs"),
        ["unit_label"]
    );
    let cycles = import_graph::cycles(&edges);
    assert_eq!(cycles, [["page/charts.rs", "page/search.rs"]]);
    let shown = import_graph::describe(&cycles[0], &edges);
    assert!(
        shown.contains("page/charts.rs takes boundaries from page/search.rs"),
        "{shown}"
    );
}

#[test]
fn the_cycle_check_reads_nested_modules() {
    // `crate::a::b` from inside a `mod x { }` block, and `super::` from there (the block's parent
    // is its file's module), in files under a `mod.rs`.
    let files = [
        ("lib.rs", "mod client;\n"),
        ("client/mod.rs", "mod target;\nmod transport;\n"),
        (
            "client/target.rs",
            "pub struct Target;\nmod inner {\n    pub fn f() { crate::client::transport::Stream::new(); }\n}\n",
        ),
        (
            "client/transport.rs",
            "pub struct Stream;\nmod tls {\n    use super::super::target::Target;\n}\n",
        ),
    ];
    let edges = crate_of(&files);
    assert_eq!(
        names(&edges, "client/target.rs", "client/transport.rs"),
        ["Stream"]
    );
    assert_eq!(
        names(&edges, "client/transport.rs", "client/target.rs"),
        ["Target"]
    );
    assert_eq!(
        import_graph::cycles(&edges),
        [["client/target.rs", "client/transport.rs"]]
    );
}

#[test]
fn the_cycle_check_follows_a_re_export_to_its_file() {
    // `use crate::Fleet` takes fleet.rs's `Fleet` through lib.rs's `pub use`.
    let files = [
        (
            "lib.rs",
            "mod fleet;\nmod run;\npub use fleet::Fleet;\npub(crate) use self::run::*;\n",
        ),
        ("run.rs", "use crate::Fleet;\npub struct RunError;\n"),
        (
            "fleet.rs",
            "pub struct Fleet;\nfn f() -> crate::RunError { todo!() }\n",
        ),
    ];
    let edges = crate_of(&files);
    assert_eq!(names(&edges, "run.rs", "fleet.rs"), ["Fleet"]);
    assert_eq!(names(&edges, "fleet.rs", "run.rs"), ["RunError"]);
    assert_eq!(import_graph::cycles(&edges), [["fleet.rs", "run.rs"]]);
}

#[test]
fn a_child_taking_from_its_parent_is_no_cycle_but_a_tangle_through_it_is() {
    // run/step.rs takes run/mod.rs's `RunError` and run/mod.rs calls `step::run_step`: one module
    // built of its children. run/mod.rs -> run/step.rs -> fleet.rs -> run/mod.rs is a tangle.
    let mut files = vec![
        ("lib.rs", "mod fleet;\nmod run;\npub struct Exit;\n"),
        (
            "run/mod.rs",
            "mod step;\npub struct RunError;\nfn go() { step::run_step(); }\n",
        ),
        (
            "run/step.rs",
            "use super::RunError;\nuse crate::Exit;\npub fn run_step() {}\n",
        ),
        ("fleet.rs", "pub struct Fleet;\n"),
    ];
    let edges = crate_of(&files);
    assert_eq!(names(&edges, "run/mod.rs", "run/step.rs"), ["run_step"]);
    assert!(names(&edges, "run/step.rs", "run/mod.rs").is_empty());
    assert!(names(&edges, "run/step.rs", "lib.rs").is_empty());
    assert!(import_graph::cycles(&edges).is_empty());
    files[2].1 = "use crate::fleet::Fleet;\npub fn run_step() {}\n";
    files[3].1 = "pub struct Fleet;\nfn f() -> crate::run::RunError { todo!() }\n";
    let edges = crate_of(&files);
    assert_eq!(
        import_graph::cycles(&edges),
        [["fleet.rs", "run/mod.rs", "run/step.rs"]]
    );
}

#[test]
fn modules_tangled_through_different_files_are_found() {
    let files = [
        ("lib.rs", "mod a;\nmod b;\n"),
        ("a/mod.rs", "mod x;\nmod y;\n"),
        ("a/x.rs", "use crate::b::B;\n"),
        ("a/y.rs", "pub struct Y;\n"),
        (
            "b.rs",
            "pub struct B;\nfn f() -> crate::a::y::Y { todo!() }\n",
        ),
    ];
    let edges = crate_of(&files);
    assert!(import_graph::cycles(&edges).is_empty());
    let top = |f: &str| {
        f.split(['/', '.'])
            .next()
            .filter(|m| *m != "lib")
            .map(String::from)
    };
    let modules = import_graph::grouped(&edges, top);
    assert_eq!(import_graph::cycles(&modules), [["a", "b"]]);
    assert_eq!(names(&modules, "a", "b"), ["B"]);
}

#[test]
fn tests_comments_and_strings_are_no_imports() {
    let files = [
        ("lib.rs", "mod a;\nmod b;\nmod c;\nmod d;\n"),
        ("a.rs", "use crate::b::B;\n#[cfg(test)]\nmod c;\n"),
        (
            "b.rs",
            "//! Not `crate::a::A`.\npub struct B;\nconst S: &str = \"crate::a::A\";\n\
             /* crate::a::A */\n#[cfg(test)]\nmod tests {\n    use crate::a::A;\n}\n",
        ),
        ("a/c.rs", "use crate::b::B;\n"),
        ("d.rs", "pub(in crate::a) fn d() {}\n"),
        (
            "c.rs",
            "fn f<'a>(x: &'a u8) -> char { let _ = crate::b::B; 'c' }\n",
        ),
    ];
    let edges = crate_of(&files);
    assert_eq!(
        edges.keys().cloned().collect::<Vec<_>>(),
        [
            ("a.rs".to_string(), "b.rs".to_string()),
            ("c.rs".to_string(), "b.rs".to_string())
        ]
    );
}

/// Code that is not a test: a file's part before its `#[cfg(test)] mod`, none of a `tests.rs`.
fn non_test_code(file: &Path, text: &str) -> Option<String> {
    let name = file.file_name()?.to_string_lossy();
    if name == "tests.rs" || name.ends_with("_tests.rs") {
        return None;
    }
    let end = text.find("#[cfg(test)]\nmod ").unwrap_or(text.len());
    Some(text[..end].to_string())
}

/// Where a key's word is another thing's name, said why: the agents table's `errors` is an
/// agent's count of transport errors, not the step's share that steps.tsv's `errors` is.
const KEY_WORDS_ELSEWHERE: [(&str, &str); 1] = [("report/src/data.rs", "errors")];

#[test]
fn a_quantity_s_key_is_written_as_a_literal_only_in_the_catalogue() {
    let mut found = Vec::new();
    // The tests crate reads the files as a user's script would: a literal there is the contract
    // written out, which catches a key renamed in the catalogue.
    for krate in workspace_crates().iter().filter(|k| *k != "tests") {
        let src = root().join(krate).join("src");
        for f in sources(&src) {
            let shown = format!("{krate}/src/{}", f.display());
            if shown == "results/src/quantity.rs" {
                continue;
            }
            let text = std::fs::read_to_string(src.join(&f)).unwrap();
            let Some(code) = non_test_code(&f, &text) else {
                continue;
            };
            for q in results::quantity::all() {
                let literal = format!("\"{}\"", q.key);
                if code.contains(&literal) && !KEY_WORDS_ELSEWHERE.contains(&(&shown, q.key)) {
                    found.push(format!("{shown}: {literal}"));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "a quantity's key written outside results/src/quantity.rs (use the catalogue's entry): {found:#?}"
    );
}
