//! Tidy checks on the source tree as git tracks it, run as ordinary tests (rust-analyzer's `tidy.rs` is
//! the model): every source file opens with a `//!` header saying what it is for, ARCHITECTURE.md's
//! codemap has every crate and top-level folder, no function grows past what one screen can hold, no
//! crate's modules import each other in a cycle, and a quantity's key is written only in the catalogue.
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

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
        "shared <- proto <- agent <- coordinator",
        "shared <- results <- report <- coordinator",
    ] {
        assert!(
            codemap.contains(edge),
            "the codemap does not state `{edge}`"
        );
    }
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

/// The crate-level modules a module names through `crate::`.
fn crate_imports(text: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for (at, _) in text.match_indices("crate::") {
        // `$crate::` in a macro is the macro's own crate, not an import.
        if text[..at].ends_with('$') {
            continue;
        }
        let rest = &text[at + "crate::".len()..];
        let name: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        if !name.is_empty() {
            found.insert(name);
        }
        // `use crate::{a, b::c}`: every top-level name in the braces.
        if let Some(group) = rest.strip_prefix('{') {
            let mut depth = 0;
            let mut word = String::new();
            for c in group.chars() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    c if depth == 0 && (c.is_alphanumeric() || c == '_') => word.push(c),
                    _ => {
                        if depth == 0 && !word.is_empty() {
                            found.insert(std::mem::take(&mut word));
                        } else if c != ':' {
                            word.clear();
                        }
                    }
                }
            }
            if !word.is_empty() {
                found.insert(word);
            }
        }
    }
    found
}

/// A cycle in `graph`, if there is one, as the modules along it.
fn find_cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|p| p == node) {
            let mut cycle = path[at..].to_vec();
            cycle.push(node.to_string());
            return Some(cycle);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_string());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(c) = visit(next, graph, path, done) {
                return Some(c);
            }
        }
        path.pop();
        done.insert(node.to_string());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|k| visit(k, graph, &mut Vec::new(), &mut done))
}

#[test]
fn no_crate_has_modules_that_import_each_other_in_a_cycle() {
    for krate in &workspace_crates() {
        let src = root().join(krate).join("src");
        let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for f in sources(&src) {
            let top = f
                .components()
                .next()
                .unwrap()
                .as_os_str()
                .to_string_lossy()
                .trim_end_matches(".rs")
                .to_string();
            if top == "lib" || top == "main" {
                continue;
            }
            let text = std::fs::read_to_string(src.join(&f)).unwrap();
            // A module's tests may reach anywhere; the cycle that matters is in what it is built of.
            let code = text.split("#[cfg(test)]").next().unwrap();
            let imports = crate_imports(code);
            let edges = graph.entry(top.clone()).or_default();
            edges.extend(imports.into_iter().filter(|m| *m != top));
        }
        let modules: BTreeSet<String> = graph.keys().cloned().collect();
        for edges in graph.values_mut() {
            edges.retain(|m| modules.contains(m));
        }
        assert_eq!(
            find_cycle(&graph),
            None,
            "{krate}'s modules import each other in a cycle"
        );
    }
}

#[test]
fn the_cycle_check_finds_a_cycle_through_braces() {
    let mut graph = BTreeMap::new();
    graph.insert(
        "run".to_string(),
        crate_imports("use crate::{fleet::{Fleet, X}, output};"),
    );
    graph.insert(
        "fleet".to_string(),
        crate_imports("use crate::run::RunError;"),
    );
    graph.insert("output".to_string(), BTreeSet::new());
    assert_eq!(
        graph["run"],
        BTreeSet::from(["fleet".to_string(), "output".to_string()])
    );
    let cycle = find_cycle(&graph).expect("run -> fleet -> run");
    assert_eq!(cycle.first(), cycle.last());
    graph.insert("fleet".to_string(), BTreeSet::new());
    assert_eq!(find_cycle(&graph), None);
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
