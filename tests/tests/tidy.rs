//! Tidy checks on the source tree, run as ordinary tests (rust-analyzer's `tidy.rs` is the model): the
//! codemap in ARCHITECTURE.md names every module and only modules that exist, no function grows past
//! what one screen can hold, no crate's modules import each other in a cycle, and a quantity's key
//! is written only in the catalogue.
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The crates whose sources the codemap describes.
const CRATES: [&str; 7] = [
    "shared",
    "results",
    "proto",
    "agent",
    "coordinator",
    "report",
    "tests",
];
/// The longest a function in any crate's `src` may be, in lines, signature to brace.
const MAX_FN_LINES: usize = 120;
/// Functions still past it, each with where it is split: both are being changed on other branches
/// at the same time (a verdict for a step too short to judge, the answer for steps that lost load),
/// so they are split once those land rather than under them. The list only shrinks.
const LONG_FOR_NOW: [&str; 2] = [
    "results/src/step.rs fn summarize",
    "results/src/verdict.rs fn judge",
];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the tests crate sits in the workspace")
        .to_path_buf()
}

/// Every `.rs` file under `dir`, as paths relative to it, sorted.
fn sources(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                found.push(p.strip_prefix(dir).unwrap().to_path_buf());
            }
        }
    }
    found.sort();
    found
}

/// The codemap's part about one crate: from its `- \`name/\`` line to the next crate's.
fn codemap_section<'a>(architecture: &'a str, krate: &str) -> Option<&'a str> {
    let head = format!("\n- `{krate}/`");
    let start = architecture.find(&head)? + 1;
    let rest = &architecture[start..];
    let end = rest[1..]
        .find("\n- `")
        .map_or(rest.len(), |i| i + 1)
        .min(rest.find("\n## ").unwrap_or(rest.len()));
    Some(&rest[..end])
}

/// How the codemap may name a source file: `name.rs`, or a folder module as `name/`.
fn names_of(file: &Path) -> Vec<String> {
    let text = file.to_string_lossy().replace('\\', "/");
    match text.strip_suffix("/mod.rs") {
        Some(folder) => vec![format!("`{folder}/`"), format!("`{folder}/mod.rs`")],
        None => {
            let base = file.file_name().unwrap().to_string_lossy().to_string();
            vec![
                format!("`{text}`"),
                format!("`src/{text}`"),
                format!("`{base}`"),
            ]
        }
    }
}

#[test]
fn the_codemap_names_every_module_and_no_module_that_is_gone() {
    let architecture = std::fs::read_to_string(root().join("ARCHITECTURE.md")).unwrap();
    let mut missing = Vec::new();
    let mut stale = Vec::new();
    for krate in CRATES {
        let src = root().join(krate).join("src");
        if !src.is_dir() {
            continue;
        }
        let section = codemap_section(&architecture, krate)
            .unwrap_or_else(|| panic!("ARCHITECTURE.md's codemap has no `{krate}/` entry"));
        let files = sources(&src);
        for f in &files {
            // The crate root is the crate's own entry.
            if f == Path::new("lib.rs") {
                continue;
            }
            if !names_of(f).iter().any(|n| section.contains(n)) {
                missing.push(format!("{krate}/src/{}", f.display()));
            }
        }
        // Every `name.rs` the section mentions must be one of the crate's files.
        let known: BTreeSet<String> = files
            .iter()
            .flat_map(|f| {
                let base = format!("`{}`", f.file_name().unwrap().to_string_lossy());
                names_of(f).into_iter().chain([base])
            })
            .chain(["`lib.rs`".to_string(), "`build.rs`".to_string()])
            .collect();
        for word in section.split('`').skip(1).step_by(2) {
            let named = format!("`{word}`");
            if word.ends_with(".rs")
                && !word.contains(' ')
                && !word.starts_with("examples/")
                && !known.contains(&named)
                && !word.contains('*')
                && !root().join(krate).join(word).exists()
                && !root().join(krate).join("tests").join(word).exists()
            {
                stale.push(format!("{krate}: {named}"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "modules the codemap in ARCHITECTURE.md does not name (add a line each): {missing:#?}"
    );
    assert!(
        stale.is_empty(),
        "the codemap names files that do not exist: {stale:#?}"
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
    for krate in CRATES {
        let src = root().join(krate).join("src");
        for f in sources(&src) {
            let text = std::fs::read_to_string(src.join(&f)).unwrap();
            for (line, name, len) in long_functions(&text, MAX_FN_LINES) {
                if LONG_FOR_NOW.contains(&format!("{krate}/src/{} fn {name}", f.display()).as_str())
                {
                    continue;
                }
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
    for krate in CRATES {
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
    for krate in CRATES.into_iter().filter(|k| *k != "tests") {
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
