//! `stampede compare`: results directories read back, named, compared (`results::compare`) and
//! written as compare.html, and on request compare.tsv and compare.json. [`run`] is also how a
//! two-host run writes the comparison beside its runs.
use std::path::{Path, PathBuf};

use results::compare::{self, Comparison, Gate, Judged, Labelled, Regression, Threshold};
use results::run_file::{RunFile, RunFileError};

use crate::destination::{self, Destination, DestinationError};

/// What to compare and where to write it.
#[derive(Debug, Clone, PartialEq)]
pub struct CompareConfig {
    /// Results directories (each holding a run.json), or run.json files themselves.
    pub dirs: Vec<PathBuf>,
    /// The first runs' labels, in order; a run beyond them goes by its run.json's label, else by
    /// its directory's name.
    pub labels: Vec<String>,
    /// The baseline's label; none: the first run.
    pub baseline: Option<String>,
    pub threshold: Threshold,
    /// `--regression` gates: a quantity of the step or of a named request, and how much worse
    /// fails (exit 3).
    pub gates: Vec<Gate>,
    /// Where each file goes: written through, never replaced (a symlink's target, a FIFO, `-`).
    pub html: Destination,
    pub tsv: Option<Destination>,
    pub json: Option<Destination>,
}

impl CompareConfig {
    /// `dirs` compared against the first, at the default threshold, into `compare.html` here.
    pub fn new(dirs: Vec<PathBuf>) -> CompareConfig {
        CompareConfig {
            dirs,
            labels: Vec::new(),
            baseline: None,
            threshold: Threshold::default(),
            gates: Vec::new(),
            html: Destination::File(PathBuf::from("compare.html")),
            tsv: None,
            json: None,
        }
    }
}

/// What a comparison made.
#[derive(Debug)]
pub struct Outcome {
    pub comparison: Comparison,
    /// Where the files went, compare.html's first.
    pub written: Vec<Destination>,
}

impl Outcome {
    /// Trusted steps that got worse than the baseline's beyond the threshold.
    pub fn regressions(&self) -> &[Regression] {
        &self.comparison.regressions
    }

    /// The `--regression` gates that breached on some step.
    pub fn gates_breached(&self) -> Vec<&Judged> {
        self.comparison
            .gates
            .iter()
            .filter(|g| !g.breaches.is_empty())
            .collect()
    }
}

/// Why a comparison was not made or not written.
#[derive(Debug, thiserror::Error)]
pub enum CompareError {
    #[error("{labels} --label given for {dirs} runs; give at most one per run, in their order")]
    TooManyLabels { labels: usize, dirs: usize },
    #[error(transparent)]
    Read(#[from] RunFileError),
    #[error(transparent)]
    Compare(#[from] compare::CompareError),
    #[error(transparent)]
    Gate(#[from] compare::GateError),
    #[error(transparent)]
    Write(#[from] DestinationError),
}

impl CompareError {
    /// 2 for what the user gave (flags, labels, a run.json that cannot be read), 1 for a file
    /// that could not be written.
    pub fn exit_code(&self) -> u8 {
        match self {
            CompareError::Write(e) => e.exit_code(),
            CompareError::TooManyLabels { .. }
            | CompareError::Read(_)
            | CompareError::Compare(_)
            | CompareError::Gate(_) => 2,
        }
    }
}

/// Reads every run, compares them and writes the files `cfg` names. Nothing is written unless
/// every run was read, the comparison made and every destination is one a file can go to.
pub fn run(cfg: CompareConfig) -> Result<Outcome, CompareError> {
    if cfg.labels.len() > cfg.dirs.len() {
        return Err(CompareError::TooManyLabels {
            labels: cfg.labels.len(),
            dirs: cfg.dirs.len(),
        });
    }
    let named: Vec<(&'static str, &Destination)> = [("-o", Some(&cfg.html))]
        .into_iter()
        .chain([("--tsv", cfg.tsv.as_ref()), ("--json", cfg.json.as_ref())])
        .filter_map(|(flag, d)| d.map(|d| (flag, d)))
        .collect();
    destination::one_stdout(&named)?;
    for (flag, d) in &named {
        d.check(flag)?;
    }
    let mut runs = Vec::with_capacity(cfg.dirs.len());
    for (i, dir) in cfg.dirs.iter().enumerate() {
        let run = RunFile::read(&results::run_file::path_of(dir))?;
        let label = cfg
            .labels
            .get(i)
            .cloned()
            .or_else(|| run.label.clone())
            .unwrap_or_else(|| directory_name(dir));
        runs.push(Labelled {
            label,
            source: dir.display().to_string(),
            run,
        });
    }
    let mut comparison = compare::compare(runs, cfg.baseline.as_deref(), cfg.threshold)?;
    // A gate of a name no run has is refused before anything is written: it could never fail.
    comparison.gates = compare::gate::judge(&comparison, &cfg.gates)?;
    let mut written = Vec::new();
    cfg.html.write("-o", &report::render_compare(&comparison))?;
    written.push(cfg.html);
    if let Some(to) = cfg.tsv {
        to.write("--tsv", &comparison.tsv())?;
        written.push(to);
    }
    if let Some(to) = cfg.json {
        to.write("--json", &(comparison.to_json() + "\n"))?;
        written.push(to);
    }
    Ok(Outcome {
        comparison,
        written,
    })
}

/// The name a run goes by when nothing names it: its directory's (the one holding run.json when
/// given the file), as the path was written or, for `.` and `..`, as it resolves.
pub(crate) fn directory_name(given: &Path) -> String {
    let dir = if given.is_file() {
        given
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."))
    } else {
        given
    };
    let named = |p: &Path| {
        p.file_name()
            .filter(|n| *n != "." && *n != "..")
            .map(|n| n.to_string_lossy().into_owned())
    };
    named(dir)
        .or_else(|| dir.canonicalize().ok().as_deref().and_then(named))
        .unwrap_or_else(|| dir.display().to_string())
}

/// What the command prints on stdout: the baseline, every run's headline, the banners, the
/// regressions, the files written, and last the ranking as one table.
pub fn summary(o: &Outcome) -> String {
    let c = &o.comparison;
    let mut out = String::new();
    for r in &c.runs {
        let role = if r.baseline { " (baseline)" } else { "" };
        out.push_str(&format!(
            "{}{role}: {}{} [{}]\n",
            r.label,
            r.headline.sentence,
            r.headline.versus(&c.baseline),
            r.source
        ));
    }
    for b in &c.banners {
        out.push_str(&format!("note: {b}\n"));
    }
    out.push_str(&regressions(c));
    for g in &c.gates {
        out.push_str(&g.sentence());
        out.push('\n');
    }
    out.push_str(&by_name(c));
    let files: Vec<String> = o.written.iter().map(ToString::to_string).collect();
    out.push_str(&format!("wrote: {}\n", files.join(", ")));
    out.push_str(&ranking(c));
    out
}

/// The ranking for stdout: a title line and the table, best first; searches' answers in one line
/// last.
pub fn ranking(c: &Comparison) -> String {
    let mut out = format!("ranking, best first:\n{}", c.ranking_table());
    if let Some(line) = &c.max_under_slo {
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// The regressions in words, or that there is none.
pub fn regressions(c: &Comparison) -> String {
    let base = &c.baseline;
    let threshold = c.threshold_pct;
    if c.regressions.is_empty() {
        return format!("no trusted step got worse than {base}'s beyond {threshold}%\n");
    }
    let lines = c.regressions_by_step();
    let n = lines.len();
    let mut out = format!(
        "{n} step{} regressed against {base} (trusted, worse beyond {threshold}%):\n",
        if n == 1 { "" } else { "s" }
    );
    for line in lines {
        out.push_str(&format!("  {line}\n"));
    }
    out
}

/// At most this many of a named mix's changes on stdout; the page and compare.json have them all.
const NAME_LINES: usize = 20;

/// A named mix compared name by name, for stdout: the names only one side has, and each name that
/// got worse beyond the threshold and the floor (shown, not a regression); nothing without names.
pub fn by_name(c: &Comparison) -> String {
    use results::compare::Change;
    let p = &c.per_request;
    if p.is_empty() {
        return String::new();
    }
    let base = &c.baseline;
    let mut out = String::new();
    for o in &p.only {
        if !o.run_only.is_empty() {
            out.push_str(&format!(
                "names only {} has (not compared): {}\n",
                o.label,
                o.run_only.join(", ")
            ));
        }
        if !o.baseline_only.is_empty() {
            out.push_str(&format!(
                "names only {base} has, not {} (not compared): {}\n",
                o.label,
                o.baseline_only.join(", ")
            ));
        }
    }
    if p.rows.is_empty() {
        return out;
    }
    let worse = results::compare::per_request::changes(c, Change::Worse);
    let threshold = c.threshold_pct;
    if worse.is_empty() {
        out.push_str(&format!(
            "by name: no request got worse than {base}'s beyond {threshold}%\n"
        ));
        return out;
    }
    out.push_str(&format!(
        "by name, worse than {base} beyond {threshold}% (trusted steps; shown, not judged):\n"
    ));
    for line in worse.iter().take(NAME_LINES) {
        out.push_str(&format!("  {line}\n"));
    }
    if worse.len() > NAME_LINES {
        out.push_str(&format!(
            "  and {} more (compare.html and compare.json have them all)\n",
            worse.len() - NAME_LINES
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOLDEN: &str = include_str!("../../results/tests/golden/run.json");

    /// A results directory `name` under `root` holding the golden run, labelled `label`.
    fn results(root: &Path, name: &str, label: Option<&str>) -> PathBuf {
        let dir = root.join(name);
        std::fs::create_dir_all(&dir).unwrap();
        let mut run = RunFile::parse(GOLDEN, Path::new("run.json")).unwrap();
        run.label = label.map(str::to_string);
        std::fs::write(dir.join("run.json"), run.to_json()).unwrap();
        dir
    }

    fn config(root: &Path, dirs: Vec<PathBuf>) -> CompareConfig {
        CompareConfig {
            html: Destination::File(root.join("compare.html")),
            ..CompareConfig::new(dirs)
        }
    }

    #[test]
    fn labels_come_from_the_flags_then_run_json_then_the_directory() {
        let root = tempfile::tempdir().unwrap();
        let a = results(root.path(), "first", None);
        let b = results(root.path(), "second", Some("named"));
        let c = results(root.path(), "third", None);
        let mut cfg = config(root.path(), vec![a, b.clone(), c]);
        let o = run(cfg.clone()).unwrap();
        let labels: Vec<&str> = o.comparison.runs.iter().map(|r| r.label.as_str()).collect();
        assert_eq!(labels, ["first", "named", "third"]);
        cfg.labels = vec!["x".into()];
        // A run.json file stands for its directory.
        cfg.dirs[2] = cfg.dirs[2].join("run.json");
        let o = run(cfg).unwrap();
        let labels: Vec<&str> = o.comparison.runs.iter().map(|r| r.label.as_str()).collect();
        assert_eq!(labels, ["x", "named", "third"]);
        assert_eq!(
            o.written,
            [Destination::File(root.path().join("compare.html"))]
        );
        // `.` is named as it resolves.
        assert_eq!(directory_name(&b.join(".")), "second");
    }

    #[test]
    fn the_same_name_twice_is_refused_and_nothing_is_written() {
        let root = tempfile::tempdir().unwrap();
        let a = results(&root.path().join("x"), "same", None);
        let b = results(&root.path().join("y"), "same", None);
        let mut cfg = config(root.path(), vec![a, b]);
        cfg.tsv = Some(Destination::File(root.path().join("compare.tsv")));
        let e = run(cfg.clone()).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(
            e.to_string().contains("two runs are labelled `same`"),
            "{e}"
        );
        assert!(
            !root.path().join("compare.html").exists() && !root.path().join("compare.tsv").exists()
        );
        cfg.labels = vec!["1".into(), "2".into(), "3".into()];
        let e = run(cfg).unwrap_err().to_string();
        assert_eq!(
            e,
            "3 --label given for 2 runs; give at most one per run, in their order"
        );
    }

    #[test]
    fn a_damaged_run_json_is_named_with_its_field() {
        let root = tempfile::tempdir().unwrap();
        let a = results(root.path(), "a", None);
        let b = results(root.path(), "b", None);
        let text = GOLDEN.replacen("\"ok_rate\": ", "\"ok_rate\": \"fast\", \"was\": ", 1);
        std::fs::write(b.join("run.json"), text).unwrap();
        let e = run(config(root.path(), vec![a, b.clone()])).unwrap_err();
        let said = e.to_string();
        assert!(
            said.contains(&b.join("run.json").display().to_string())
                && said.contains("field `ok_rate`"),
            "{said}"
        );
        assert_eq!(e.exit_code(), 2);
        let e = run(config(
            root.path(),
            vec![root.path().join("a"), root.path().join("gone")],
        ))
        .unwrap_err();
        assert!(e.to_string().contains("gone/run.json"), "{e}");
    }

    #[test]
    fn the_files_asked_for_are_written_and_an_unwritable_one_is_exit_1() {
        let root = tempfile::tempdir().unwrap();
        let a = results(root.path(), "a", None);
        let b = results(root.path(), "b", None);
        let mut cfg = config(root.path(), vec![a, b]);
        cfg.tsv = Some(Destination::File(root.path().join("c.tsv")));
        cfg.json = Some(Destination::File(root.path().join("c.json")));
        let o = run(cfg.clone()).unwrap();
        assert_eq!(o.written.len(), 3);
        let tsv = std::fs::read_to_string(root.path().join("c.tsv")).unwrap();
        assert_eq!(tsv, o.comparison.tsv());
        let json: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(root.path().join("c.json")).unwrap())
                .unwrap();
        assert_eq!(json["schema"], compare::COMPARE_SCHEMA);
        let said = summary(&o);
        assert!(said.contains("a (baseline): kept up to 400 req/s (p99 4.6 ms)"));
        // It ends with the ranking, one line per run.
        let tail: Vec<&str> = said.lines().rev().take(4).collect();
        assert!(
            tail[3] == "ranking, best first:" && tail[2].starts_with("#  target"),
            "{said}"
        );
        assert!(
            tail[1].starts_with("1  a ") && tail[0].starts_with("1  b "),
            "{said}"
        );
        cfg.html = Destination::File(root.path().join("missing-dir").join("compare.html"));
        let e = run(cfg).unwrap_err();
        assert_eq!(e.exit_code(), 1);
        assert!(e.to_string().contains("missing-dir/compare.html"), "{e}");
    }

    /// A results directory `name` under `root` holding the golden run with a mix: each step's
    /// `names` of `(name, served, µs each)`.
    fn named(root: &Path, name: &str, names: &[(&str, u64, u64)]) -> PathBuf {
        let dir = root.join(name);
        std::fs::create_dir_all(&dir).unwrap();
        let mut run = RunFile::parse(GOLDEN, Path::new("run.json")).unwrap();
        let list: Vec<String> = names.iter().map(|n| n.0.to_string()).collect();
        let stats: Vec<shared::metrics::NameStats> = names
            .iter()
            .map(|n| {
                let mut s = shared::metrics::NameStats::default();
                s.counters.requests = n.1;
                s.counters.replies = n.1;
                s.counters.ok = n.1;
                s.latency.record_n(n.2, n.1).unwrap();
                s
            })
            .collect();
        for step in &mut run.steps {
            step.per_request =
                results::step::per_request::rows(&list, &vec![1; list.len()], &stats, 1.0);
        }
        std::fs::write(dir.join("run.json"), run.to_json()).unwrap();
        dir
    }

    #[test]
    fn a_named_mix_says_which_name_got_worse_and_which_names_one_side_lacks() {
        let root = tempfile::tempdir().unwrap();
        let a = named(
            root.path(),
            "a",
            &[("home", 100, 2_000), ("slow", 50, 5_000)],
        );
        let b = named(
            root.path(),
            "b",
            &[
                ("home", 100, 2_000),
                ("slow", 50, 50_000),
                ("new", 5, 1_000),
            ],
        );
        let o = run(config(root.path(), vec![a, b])).unwrap();
        let said = summary(&o);
        assert!(
            said.contains("names only b has (not compared): new\n"),
            "{said}"
        );
        assert!(
            said.contains("by name, worse than a beyond 5% (trusted steps; shown, not judged):\n"),
            "{said}"
        );
        assert!(
            said.contains("  b at 100 req/s (step 1) slow: p99_ms 50"),
            "{said}"
        );
        assert!(!said.contains(") home:"), "{said}");
        // The golden run's own steps are the same: the step deltas find nothing.
        assert!(said.contains("no trusted step got worse"), "{said}");
        let plain = root.path().join("plain");
        std::fs::create_dir_all(&plain).unwrap();
        let p = results(&plain, "a", None);
        let q = results(&plain, "b", None);
        let said = summary(&run(config(&plain, vec![p, q])).unwrap());
        assert!(!said.contains("by name"), "{said}");
    }

    #[test]
    fn a_gate_of_a_name_is_judged_and_said_and_one_of_a_name_no_run_has_writes_nothing() {
        let root = tempfile::tempdir().unwrap();
        let a = named(
            root.path(),
            "a",
            &[("home", 100, 2_000), ("slow", 50, 5_000)],
        );
        let b = named(
            root.path(),
            "b",
            &[("home", 100, 2_000), ("slow", 50, 50_000)],
        );
        let mut cfg = config(root.path(), vec![a, b]);
        cfg.gates = ["p99[slow]>5%", "p99[home]>5%"]
            .iter()
            .map(|g| Gate::parse(g).unwrap())
            .collect();
        let o = run(cfg.clone()).unwrap();
        let breached: Vec<&str> = o.gates_breached().iter().map(|g| g.gate.as_str()).collect();
        assert_eq!(breached, ["p99[slow]>5%"]);
        let json: serde_json::Value = serde_json::from_str(&o.comparison.to_json()).unwrap();
        assert_eq!(json["gates"][1]["gate"], "p99[home]>5%");
        assert_eq!(json["gates"][1]["breaches"], serde_json::json!([]));
        assert!(json["gates"][0]["compared"].as_u64().unwrap() > 0);
        let said = summary(&o);
        assert!(
            said.contains("--regression p99[slow]>5%: breached at b at 100 req/s (step 1): p99[slow] 50 ms against 5.0 ms (+"),
            "{said}"
        );
        assert!(
            said.contains("--regression p99[home]>5%: held on "),
            "{said}"
        );
        std::fs::remove_file(root.path().join("compare.html")).unwrap();
        cfg.gates = vec![Gate::parse("p99[hme]>5%").unwrap()];
        let e = run(cfg).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(
            e.to_string()
                .contains("no run compared has a request named 'hme' (their names: home, slow)"),
            "{e}"
        );
        assert!(!root.path().join("compare.html").exists());
    }

    #[test]
    fn a_destination_that_is_no_file_is_refused_before_anything_is_written() {
        let root = tempfile::tempdir().unwrap();
        let a = results(root.path(), "a", None);
        let b = results(root.path(), "b", None);
        let mut cfg = config(root.path(), vec![a, b]);
        cfg.tsv = Some(Destination::File(root.path().join("c.tsv")));
        cfg.json = Some(Destination::File(root.path().to_path_buf()));
        let e = run(cfg).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(e.to_string().starts_with("--json "), "{e}");
        assert!(!root.path().join("compare.html").exists());
        assert!(!root.path().join("c.tsv").exists());
    }
}
