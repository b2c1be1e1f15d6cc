//! The import graph between one crate's source files, read from the source as written: every `use`
//! (`crate::`, `self::`, `super::` at any depth, a child module's name, `pub use` re-exports) and every
//! path written inline (`crate::a::f()`, `super::b::T`), in files and in inline `mod x { }` blocks,
//! each resolved through re-exports to the file that defines the name it reaches. A token scan, not a
//! parser: the code it reads compiles, and the tidy checks stay free of dependencies.
use std::collections::{BTreeMap, BTreeSet};

/// For each (importing file, imported file), the names the first takes from the second.
pub type Edges = BTreeMap<(String, String), BTreeSet<String>>;

/// A module's place in its crate: the names from the crate root down (`[]` is the root).
type ModPath = Vec<String>;

/// How deep a name may be followed through re-exports: more is a loop of `use`s, not a crate.
const MAX_HOPS: usize = 16;

#[derive(Clone, Debug, PartialEq)]
enum Token {
    Ident(String),
    /// `::`
    Colons,
    Punct(char),
}

/// The identifiers, `::` and punctuation of Rust source: comments, string and character literals,
/// lifetimes and numbers dropped, so that a path in a doc comment or a string is no import.
fn tokens(text: &str) -> Vec<Token> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(&c) = chars.get(i) {
        let next = chars.get(i + 1).copied();
        if c.is_whitespace() {
            i += 1;
        } else if c == '/' && next == Some('/') {
            i = chars[i..]
                .iter()
                .position(|c| *c == '\n')
                .map_or(chars.len(), |n| i + n);
        } else if c == '/' && next == Some('*') {
            i = block_comment_end(&chars, i);
        } else if c == '"' {
            i = string_end(&chars, i + 1);
        } else if c == '\'' {
            i = quote_end(&chars, i);
        } else if c.is_alphabetic() || c == '_' {
            i = word(&chars, i, &mut out);
        } else if c.is_ascii_digit() {
            i += 1;
            while chars.get(i).is_some_and(|c| {
                c.is_alphanumeric()
                    || *c == '_'
                    || *c == '.' && chars.get(i + 1).is_some_and(char::is_ascii_digit)
            }) {
                i += 1;
            }
        } else if c == ':' && next == Some(':') {
            out.push(Token::Colons);
            i += 2;
        } else {
            out.push(Token::Punct(c));
            i += 1;
        }
    }
    out
}

/// Past the `/* … */` (nested) that starts at `i`.
fn block_comment_end(chars: &[char], mut i: usize) -> usize {
    let mut depth = 0;
    while i < chars.len() {
        match (chars[i], chars.get(i + 1)) {
            ('/', Some('*')) => (depth, i) = (depth + 1, i + 2),
            ('*', Some('/')) => {
                (depth, i) = (depth - 1, i + 2);
                if depth == 0 {
                    return i;
                }
            }
            _ => i += 1,
        }
    }
    i
}

/// Past the closing quote of a string whose text starts at `i`.
fn string_end(chars: &[char], mut i: usize) -> usize {
    while let Some(&c) = chars.get(i) {
        match c {
            '\\' => i += 2,
            '"' => return i + 1,
            _ => i += 1,
        }
    }
    i
}

/// Past the character literal or lifetime whose quote is at `i`.
fn quote_end(chars: &[char], i: usize) -> usize {
    if chars.get(i + 1) == Some(&'\\') {
        let close = chars[i + 3..].iter().position(|c| *c == '\'');
        return close.map_or(chars.len(), |n| i + 3 + n + 1);
    }
    if chars.get(i + 2) == Some(&'\'') {
        return i + 3;
    }
    let mut j = i + 1;
    while chars
        .get(j)
        .is_some_and(|c| c.is_alphanumeric() || *c == '_')
    {
        j += 1;
    }
    j
}

/// Reads the word at `start` into `out` (a raw identifier as its name; a raw or byte string's
/// prefix as nothing) and returns where the scan goes on.
fn word(chars: &[char], start: usize, out: &mut Vec<Token>) -> usize {
    let mut i = start;
    while chars
        .get(i)
        .is_some_and(|c| c.is_alphanumeric() || *c == '_')
    {
        i += 1;
    }
    let w: String = chars[start..i].iter().collect();
    let hashes = chars[i..].iter().take_while(|c| **c == '#').count();
    if matches!(w.as_str(), "r" | "br") && chars.get(i + hashes) == Some(&'"') {
        // A raw string: its backslashes escape nothing; it ends at a quote and as many hashes.
        let mut j = i + hashes + 1;
        while j < chars.len() {
            if chars[j] == '"'
                && chars[j + 1..]
                    .iter()
                    .take(hashes)
                    .filter(|c| **c == '#')
                    .count()
                    == hashes
            {
                return j + 1 + hashes;
            }
            j += 1;
        }
        return j;
    }
    if w == "r"
        && hashes == 1
        && chars
            .get(i + 1)
            .is_some_and(|c| c.is_alphabetic() || *c == '_')
    {
        return word(chars, i + 1, out);
    }
    if w == "b" && matches!(chars.get(i), Some('"' | '\'')) {
        return i;
    }
    out.push(Token::Ident(w));
    i
}

/// What the scan of a crate's files found, before any name is resolved.
#[derive(Default)]
struct Scan {
    /// Every module and the file it is written in.
    modules: BTreeMap<ModPath, String>,
    /// Modules declared `#[cfg(test)] mod x;`: test code, left out with what is under them.
    test_only: BTreeSet<ModPath>,
    /// The names each module defines (a function, a type, a constant, a module, a macro).
    defined: BTreeSet<(ModPath, String)>,
    /// The names each module's `use`s bind, to the path as written there.
    bound: BTreeMap<(ModPath, String), Vec<String>>,
    /// Each module's glob imports (`use a::*`), as written there.
    globs: Vec<(ModPath, Vec<String>)>,
    /// Every path a file names: the file, the module it is written in, the path as written.
    paths: Vec<(String, ModPath, Vec<String>)>,
}

/// The module a file under a crate's `src/` is: `lib.rs` the root, `a/mod.rs` and `a.rs` both `a`.
fn module_of(under_src: &str) -> ModPath {
    let mut parts: ModPath = under_src
        .trim_end_matches(".rs")
        .split('/')
        .map(String::from)
        .collect();
    if parts == ["lib"] || parts == ["main"] || parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    parts
}

/// The keywords that start an item a module defines, after its visibility: what a path through
/// the module may name without a `use`.
const ITEM_KEYWORDS: [&str; 9] = [
    "fn", "struct", "enum", "trait", "type", "const", "static", "union", "mod",
];

/// One file's scan: where it is in the tokens, how deep in braces, and in which inline module.
struct FileScan<'a> {
    scan: &'a mut Scan,
    file: String,
    toks: Vec<Token>,
    i: usize,
    depth: usize,
    /// The module being read and the brace depth its items are at, innermost last.
    scopes: Vec<(ModPath, usize)>,
}

impl FileScan<'_> {
    fn scope(&self) -> &ModPath {
        &self.scopes.last().expect("the file's own module").0
    }

    fn at(&self, k: usize) -> Option<&Token> {
        self.toks.get(self.i + k)
    }

    fn ident(&self, k: usize) -> Option<&str> {
        match self.at(k) {
            Some(Token::Ident(s)) => Some(s),
            _ => None,
        }
    }

    fn run(&mut self) {
        while let Some(t) = self.at(0).cloned() {
            let at_items = self.depth == self.scopes.last().expect("a scope").1;
            match t {
                Token::Punct('#') => self.attribute(),
                Token::Punct('{') => {
                    self.depth += 1;
                    self.i += 1;
                }
                Token::Punct('}') => {
                    if self.scopes.len() > 1 && self.depth == self.scopes.last().unwrap().1 {
                        self.scopes.pop();
                    }
                    self.depth = self.depth.saturating_sub(1);
                    self.i += 1;
                }
                Token::Ident(w) if w == "use" => self.use_declaration(),
                Token::Ident(w) if at_items && ITEM_KEYWORDS.contains(&w.as_str()) => self.item(),
                Token::Ident(w) if w == "macro_rules" && self.at(1) == Some(&Token::Punct('!')) => {
                    if let Some(name) = self.ident(2) {
                        let key = (self.scope().clone(), name.to_string());
                        self.scan.defined.insert(key);
                    }
                    self.i += 3;
                }
                Token::Ident(_) if self.starts_path() => self.inline_path(),
                _ => self.i += 1,
            }
        }
    }

    /// An attribute; after `#[cfg(test)]` the item it is on is skipped, as test code.
    fn attribute(&mut self) {
        let inner = self.at(1) == Some(&Token::Punct('!'));
        let open = self.i + 1 + usize::from(inner);
        if self.toks.get(open) != Some(&Token::Punct('[')) {
            self.i += 1;
            return;
        }
        let close = self.closing(open);
        let cfg_test = self.toks[open + 1..close]
            == [
                Token::Ident("cfg".into()),
                Token::Punct('('),
                Token::Ident("test".into()),
                Token::Punct(')'),
            ];
        self.i = close + 1;
        if cfg_test && !inner {
            while self.at(0) == Some(&Token::Punct('#')) {
                let close = self.closing(self.i + 1);
                self.i = close + 1;
            }
            self.skip_item();
        }
    }

    /// The index of the bracket closing the one at `open`.
    fn closing(&self, open: usize) -> usize {
        let mut nest = 0usize;
        for (k, t) in self.toks.iter().enumerate().skip(open) {
            match t {
                Token::Punct('(' | '[' | '{') => nest += 1,
                Token::Punct(')' | ']' | '}') => {
                    nest -= 1;
                    if nest == 0 {
                        return k;
                    }
                }
                _ => {}
            }
        }
        self.toks.len()
    }

    /// Past the item at the cursor: to its `;`, or its body's closing brace. A `mod x;` skipped
    /// marks the file `x` is as test code.
    fn skip_item(&mut self) {
        let mut k = 0;
        while matches!(
            self.ident(k),
            Some("pub" | "crate" | "in" | "super" | "self")
        ) || matches!(self.at(k), Some(Token::Punct('(' | ')')))
        {
            k += 1;
        }
        if self.ident(k) == Some("mod")
            && let Some(name) = self.ident(k + 1)
        {
            let mut module = self.scope().clone();
            module.push(name.to_string());
            self.scan.test_only.insert(module);
        }
        while let Some(t) = self.at(0) {
            match t {
                Token::Punct(';') => break,
                Token::Punct('{') => {
                    self.i = self.closing(self.i);
                    break;
                }
                Token::Punct('(' | '[') => self.i = self.closing(self.i) + 1,
                _ => self.i += 1,
            }
        }
        self.i += 1;
    }

    /// A `use` declaration: each name it brings in is bound in the module, and is an import.
    fn use_declaration(&mut self) {
        self.i += 1;
        let mut entries = Vec::new();
        use_tree(&self.toks, &mut self.i, &[], &mut entries);
        while self.at(0).is_some_and(|t| *t != Token::Punct(';')) {
            self.i += 1;
        }
        let scope = self.scope().clone();
        for (path, name) in entries {
            if name == "*" {
                self.scan.globs.push((scope.clone(), path.clone()));
            } else if name != "_" {
                self.scan.bound.insert((scope.clone(), name), path.clone());
            }
            self.scan
                .paths
                .push((self.file.clone(), scope.clone(), path));
        }
    }

    /// An item the module defines; an inline `mod x { … }` is entered as a module of its own.
    fn item(&mut self) {
        // `const fn f`, `unsafe fn`: the keyword after names nothing; the next turn reads it.
        let Some(name) = self
            .ident(1)
            .filter(|n| !ITEM_KEYWORDS.contains(n) && !["unsafe", "async", "extern"].contains(n))
            .map(String::from)
        else {
            self.i += 1;
            return;
        };
        let scope = self.scope().clone();
        self.scan.defined.insert((scope.clone(), name.clone()));
        if self.ident(0) == Some("mod") && self.at(2) == Some(&Token::Punct('{')) {
            let mut module = scope;
            module.push(name);
            self.scan.modules.insert(module.clone(), self.file.clone());
            self.depth += 1;
            self.scopes.push((module, self.depth));
            self.i += 3;
        } else {
            self.i += 2;
        }
    }

    /// Whether a path starts at the cursor: a name and `::` after it, not the tail of another path,
    /// a macro's `$crate` nor the module a visibility names (`pub(in crate::a)`), which takes nothing.
    fn starts_path(&self) -> bool {
        let before = self.i.checked_sub(1).and_then(|b| self.toks.get(b));
        self.at(1) == Some(&Token::Colons)
            && matches!(self.at(2), Some(Token::Ident(_)))
            && !matches!(before, Some(Token::Colons | Token::Punct('$')))
            && before != Some(&Token::Ident("in".into()))
    }

    /// A path written in code (`crate::a::f()`, `super::b::T`, `child::g`).
    fn inline_path(&mut self) {
        let mut path = Vec::new();
        while let Some(name) = self.ident(0) {
            path.push(name.to_string());
            self.i += 1;
            if self.at(0) != Some(&Token::Colons) || self.ident(1).is_none() {
                break;
            }
            self.i += 1;
        }
        let scope = self.scope().clone();
        self.scan.paths.push((self.file.clone(), scope, path));
    }
}

/// The names a `use` tree brings in, each as (the path written, the name it binds): `*` for a glob,
/// the alias after `as`, the module for `self` in braces.
fn use_tree(
    toks: &[Token],
    i: &mut usize,
    prefix: &[String],
    out: &mut Vec<(Vec<String>, String)>,
) {
    let mut path = prefix.to_vec();
    while let Some(t) = toks.get(*i) {
        *i += 1;
        match t {
            Token::Colons => {}
            Token::Ident(s) => {
                path.push(s.clone());
                if toks.get(*i) == Some(&Token::Colons) {
                    continue;
                }
                let mut name = s.clone();
                if s == "self" {
                    path.pop();
                    name = path.last().cloned().unwrap_or_default();
                }
                if toks.get(*i) == Some(&Token::Ident("as".into())) {
                    if let Some(Token::Ident(alias)) = toks.get(*i + 1) {
                        name = alias.clone();
                    }
                    *i += 2;
                }
                out.push((path, name));
                return;
            }
            Token::Punct('*') => {
                out.push((path, "*".into()));
                return;
            }
            Token::Punct('{') => {
                while toks.get(*i).is_some_and(|t| *t != Token::Punct('}')) {
                    use_tree(toks, i, &path, out);
                    if toks.get(*i) == Some(&Token::Punct(',')) {
                        *i += 1;
                    }
                }
                *i += 1;
                return;
            }
            _ => return,
        }
    }
}

impl Scan {
    fn read(&mut self, file: &str, module: ModPath, text: &str) {
        self.modules.insert(module.clone(), file.to_string());
        FileScan {
            scan: self,
            file: file.to_string(),
            toks: tokens(text),
            i: 0,
            depth: 0,
            scopes: vec![(module, 0)],
        }
        .run();
    }

    fn is_module(&self, m: &[String]) -> bool {
        self.modules.contains_key(m)
    }

    /// The path from the crate root that `path`, written in module `scope`, names; None for one
    /// into another crate, the prelude or a local name.
    fn absolute(&self, scope: &[String], path: &[String], hops: usize) -> Option<Vec<String>> {
        let (first, rest) = path.split_first()?;
        let mut base = scope.to_vec();
        let mut tail = path;
        match first.as_str() {
            "crate" => (base, tail) = (Vec::new(), rest),
            "self" => tail = rest,
            "super" => {
                while tail.first().is_some_and(|s| s == "super") {
                    base.pop()?;
                    tail = &tail[1..];
                }
            }
            name => {
                let child = [scope, &[name.to_string()]].concat();
                if !self.is_module(&child) {
                    let written = self.bound.get(&(scope.to_vec(), name.to_string()))?;
                    if hops >= MAX_HOPS || written.first() == Some(first) && written.len() == 1 {
                        return None;
                    }
                    return self.absolute(scope, &[written.as_slice(), rest].concat(), hops + 1);
                }
            }
        }
        Some([base.as_slice(), tail].concat())
    }

    /// The file that defines what the crate-root path `path` reaches, and the name it has there:
    /// through modules as far as they go, then through the `use`s (re-exports, globs) to the
    /// definition. None for a name that is another crate's.
    fn locate(&self, path: &[String], hops: usize) -> Option<(String, String)> {
        let mut module: ModPath = Vec::new();
        for name in path {
            let next = [module.as_slice(), std::slice::from_ref(name)].concat();
            if !self.is_module(&next) {
                return self.item(&module, name, hops);
            }
            module = next;
        }
        let name = path.last().cloned().unwrap_or_else(|| "crate".into());
        Some((self.modules[&module].clone(), name))
    }

    /// Where the name `name` of module `module` is defined.
    fn item(&self, module: &ModPath, name: &str, hops: usize) -> Option<(String, String)> {
        let here = Some((self.modules[module].clone(), name.to_string()));
        let key = (module.clone(), name.to_string());
        if self.defined.contains(&key) || hops >= MAX_HOPS {
            return here;
        }
        if let Some(written) = self.bound.get(&key) {
            let path = self.absolute(module, written, hops + 1)?;
            return self.locate(&path, hops + 1);
        }
        for (_, written) in self.globs.iter().filter(|(m, _)| m == module) {
            let Some(from) = self.absolute(module, written, hops + 1) else {
                continue;
            };
            let key = (from.clone(), name.to_string());
            if self.is_module(&from)
                && (self.defined.contains(&key) || self.bound.contains_key(&key))
            {
                return self.item(&from, name, hops + 1);
            }
        }
        here
    }

    /// Whether module `m` is test code: under a `#[cfg(test)] mod`.
    fn is_test(&self, m: &[String]) -> bool {
        self.test_only.iter().any(|t| m.starts_with(t))
    }
}

/// The import graph of one crate from its files, each given as (the name to show it by, its path
/// under the crate's `src/`, its text). Test code (`#[cfg(test)]` items and the files they declare)
/// is left out: a module's tests may reach anywhere, and the cycle that matters is in what it is
/// built of. A binary's `main.rs` beside a `lib.rs` is a crate of its own and left out too.
///
/// What a file takes from a module it is inside (`super::Error` from `a/b.rs` in `a.rs`, `crate::X`
/// from the root) is no edge: a module is built of its children, which take their context from it
/// as a function takes the items of its module. The tangle is between files neither of which is
/// inside the other, and a parent that takes from a child that takes from a third file that takes
/// from the parent is still one.
pub fn edges(files: &[(String, String, String)]) -> Edges {
    let has_lib = files.iter().any(|(_, under, _)| under == "lib.rs");
    let mut scan = Scan::default();
    let mut module_of_file = BTreeMap::new();
    for (shown, under, text) in files {
        if has_lib && under == "main.rs" {
            continue;
        }
        module_of_file.insert(shown.clone(), module_of(under));
        scan.read(shown, module_of(under), text);
    }
    let inside = |file: &String, to: &String| module_of_file[file].starts_with(&module_of_file[to]);
    let test_files: BTreeSet<&String> = scan
        .modules
        .iter()
        .filter(|(m, _)| scan.is_test(m))
        .map(|(_, f)| f)
        .collect();
    let mut edges = Edges::new();
    for (file, scope, path) in &scan.paths {
        if test_files.contains(file) || scan.is_test(scope) {
            continue;
        }
        let Some((to, name)) = scan
            .absolute(scope, path, 0)
            .and_then(|p| scan.locate(&p, 0))
        else {
            continue;
        };
        if to != *file && !test_files.contains(&to) && !inside(file, &to) {
            edges.entry((file.clone(), to)).or_default().insert(name);
        }
    }
    edges
}

/// The groups of files that import each other in a cycle (each a strongly connected part of the
/// graph with more than one file), each sorted.
pub fn cycles(edges: &Edges) -> Vec<Vec<String>> {
    let mut next: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (from, to) in edges.keys() {
        next.entry(from).or_default().push(to);
    }
    let reach = |start: &str| {
        let mut seen = BTreeSet::new();
        let mut stack = vec![start];
        while let Some(n) = stack.pop() {
            for m in next.get(n).into_iter().flatten() {
                if seen.insert(*m) {
                    stack.push(m);
                }
            }
        }
        seen
    };
    let reached: BTreeMap<&str, BTreeSet<&str>> = next.keys().map(|n| (*n, reach(n))).collect();
    let mut placed: BTreeSet<String> = BTreeSet::new();
    let mut groups = Vec::new();
    for (n, from_n) in &reached {
        if placed.contains(*n) || !from_n.contains(n) {
            continue;
        }
        let group: Vec<String> = from_n
            .iter()
            .filter(|m| reached.get(*m).is_some_and(|r| r.contains(n)))
            .map(|m| m.to_string())
            .collect();
        placed.extend(group.iter().cloned());
        groups.push(group);
    }
    groups
}

/// A cycle as a person reads it: its files, then what each takes from which of the others.
pub fn describe(group: &[String], edges: &Edges) -> String {
    let mut out = group.join(" ↔ ");
    for ((from, to), names) in edges {
        if group.contains(from) && group.contains(to) {
            let names: Vec<&str> = names.iter().map(String::as_str).collect();
            out.push_str(&format!(
                "\n    {from} takes {} from {to}",
                names.join(", ")
            ));
        }
    }
    out
}

/// The graph with each file replaced by what `group` names it (its top-level module, say), the
/// edges inside one group and those of files `group` leaves out (None) dropped.
pub fn grouped(edges: &Edges, group: impl Fn(&str) -> Option<String>) -> Edges {
    let mut out = Edges::new();
    for ((from, to), names) in edges {
        if let (Some(a), Some(b)) = (group(from), group(to))
            && a != b
        {
            out.entry((a, b)).or_default().extend(names.iter().cloned());
        }
    }
    out
}
