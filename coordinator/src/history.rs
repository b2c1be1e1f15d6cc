//! `stampede history`: run.json files found under the directories given, read, named as `compare`
//! names runs, made a history (`results::history`) and written as a TSV and a trend page, each to a
//! path the user names (`destination`). Finding the runs is the one thing here: a DIR is a results
//! directory, a run.json, or a folder of them (a side-by-side run's targets, a nightly job's
//! folder of runs), searched [`DEPTH`] levels down.
use std::path::{Path, PathBuf};

use results::compare::Labelled;
use results::history::History;
use results::run_file::{RunFile, RunFileError};

use crate::destination::{self, Destination, DestinationError};

/// How many levels below a DIR without a run.json of its own its runs are looked for: a folder of
/// results directories (1), a folder of side-by-side runs, each a directory per target (2).
pub const DEPTH: usize = 2;

/// What to read and where to write it.
#[derive(Debug, Clone, PartialEq)]
pub struct HistoryConfig {
    pub dirs: Vec<PathBuf>,
    /// `--at`: the rate each row is read at; none: the highest every run offered.
    pub at: Option<f64>,
    /// A run.json found that cannot be read (damaged, an older schema) is skipped with a warning
    /// instead of refusing the history, as long as one run is left.
    pub skip_unreadable: bool,
    pub tsv: Destination,
    pub html: Option<Destination>,
}

/// Why a history was not made or not written.
#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    #[error("{}: no run.json there nor in its folders {DEPTH} levels down: name a results directory, a run.json, or a folder of them", path.display())]
    NoRun { path: PathBuf },
    #[error(transparent)]
    Read(#[from] RunFileError),
    #[error(
        "--at '{0}': not a rate; give the offered value of a step, e.g. 400 (req/s) or 8 (connections)"
    )]
    At(String),
    #[error(transparent)]
    Write(#[from] DestinationError),
}

impl HistoryError {
    /// 2 for what the user gave (a path without runs, a run.json that cannot be read, a bad
    /// flag), else the write's.
    pub fn exit_code(&self) -> u8 {
        match self {
            HistoryError::Write(e) => e.exit_code(),
            HistoryError::NoRun { .. } | HistoryError::Read(_) | HistoryError::At(_) => 2,
        }
    }
}

/// What a history made.
#[derive(Debug)]
pub struct Outcome {
    pub history: History,
    /// The run.json files skipped (`skip_unreadable`), each with why.
    pub skipped: Vec<HistoryError>,
    pub written: Vec<Destination>,
}

/// `--at`'s value: a finite number of at least 0 (`400`, `2.5`, `400/s`).
pub fn parse_at(text: &str) -> Result<f64, HistoryError> {
    let number = text.trim().trim_end_matches("/s").trim_end();
    match number.parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
        _ => Err(HistoryError::At(text.to_string())),
    }
}

/// The run.json files `dir` stands for, in path order: itself (a file), its own run.json, or the
/// run.json of each folder below it, at most [`DEPTH`] levels down, a folder with a run.json not
/// looked into further.
pub fn run_files(dir: &Path) -> Vec<PathBuf> {
    if dir.is_file() {
        return vec![dir.to_path_buf()];
    }
    let mut found = Vec::new();
    collect(dir, DEPTH, &mut found);
    found
}

fn collect(dir: &Path, depth: usize, found: &mut Vec<PathBuf>) {
    let own = results::run_file::path_of(dir);
    if own.is_file() {
        found.push(own);
        return;
    }
    if depth == 0 {
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut dirs: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    for d in dirs {
        collect(&d, depth - 1, found);
    }
}

/// Reads every run, makes the history and writes the files `cfg` names. Nothing is written unless
/// every destination is one a file can go to and every run was read (or skipped, asked to).
/// Each error found is returned, so that each is said on its own line.
pub fn run(cfg: HistoryConfig) -> Result<Outcome, Vec<HistoryError>> {
    let named: Vec<(&'static str, &Destination)> = [("--tsv", Some(&cfg.tsv))]
        .into_iter()
        .chain([("--html", cfg.html.as_ref())])
        .filter_map(|(flag, d)| d.map(|d| (flag, d)))
        .collect();
    destination::one_stdout(&named).map_err(|e| vec![e.into()])?;
    for (flag, d) in &named {
        d.check(flag).map_err(|e| vec![e.into()])?;
    }
    let mut errors = Vec::new();
    let mut unreadable = Vec::new();
    let mut runs = Vec::new();
    for dir in &cfg.dirs {
        let files = run_files(dir);
        if files.is_empty() {
            errors.push(HistoryError::NoRun { path: dir.clone() });
        }
        for file in files {
            match RunFile::read(&file) {
                Ok(run) => runs.push(labelled(&file, run)),
                Err(e) => unreadable.push(HistoryError::Read(e)),
            }
        }
    }
    let skipped = match cfg.skip_unreadable && !runs.is_empty() {
        true => unreadable,
        false => {
            errors.extend(unreadable);
            Vec::new()
        }
    };
    if !errors.is_empty() {
        return Err(errors);
    }
    let history = results::history::history(&runs, cfg.at);
    let mut written = Vec::new();
    if let Some(to) = cfg.html {
        to.write("--html", &report::render_history(&history))
            .map_err(|e| vec![e.into()])?;
        written.push(to);
    }
    cfg.tsv
        .write("--tsv", &history.tsv())
        .map_err(|e| vec![e.into()])?;
    written.push(cfg.tsv);
    Ok(Outcome {
        history,
        skipped,
        written,
    })
}

/// A run as `compare` names it: its run.json's label, else its directory's name.
pub(crate) fn labelled(file: &Path, run: RunFile) -> Labelled {
    let dir = file
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    Labelled {
        label: run
            .label
            .clone()
            .unwrap_or_else(|| crate::compare::directory_name(dir)),
        source: dir.display().to_string(),
        run,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    const RUN_JSON: &str = include_str!("../../results/tests/golden/run.json");

    fn put(dir: &Path, text: &str) {
        fs::create_dir_all(dir).unwrap();
        fs::write(dir.join("run.json"), text).unwrap();
    }

    fn config(dirs: Vec<PathBuf>, tsv: PathBuf) -> HistoryConfig {
        HistoryConfig {
            dirs,
            at: None,
            skip_unreadable: false,
            tsv: Destination::File(tsv),
            html: None,
        }
    }

    #[test]
    fn a_folder_of_runs_and_a_side_by_side_run_are_found_two_levels_down() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        put(&root.join("nightly/2026-12-01"), RUN_JSON);
        put(&root.join("nightly/2026-12-02/nginx"), RUN_JSON);
        put(&root.join("nightly/2026-12-02/app"), RUN_JSON);
        put(&root.join("nightly/2026-12-03/a/too-deep"), RUN_JSON);
        // A results directory's own run.json ends the search: its subfolders are its own (hlog/).
        put(&root.join("nightly/2026-12-01/hlog"), RUN_JSON);
        let found = run_files(&root.join("nightly"));
        let shown: Vec<String> = found
            .iter()
            .map(|p| p.strip_prefix(root).unwrap().display().to_string())
            .collect();
        assert_eq!(
            shown,
            [
                "nightly/2026-12-01/run.json",
                "nightly/2026-12-02/app/run.json",
                "nightly/2026-12-02/nginx/run.json",
            ]
        );
        let file = root.join("nightly/2026-12-01/run.json");
        assert_eq!(run_files(&file), [file]);
    }

    #[test]
    fn each_bad_dir_and_file_is_one_error_and_nothing_is_written() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        put(&root.join("good"), RUN_JSON);
        put(
            &root.join("old"),
            &RUN_JSON.replace(results::step::RUN_SCHEMA, "stampede.run/1"),
        );
        put(&root.join("broken"), "{\"schema\": ");
        fs::create_dir(root.join("empty")).unwrap();
        let tsv = root.join("history.tsv");
        let dirs = ["good", "old", "broken", "empty"]
            .map(|d| root.join(d))
            .to_vec();
        let errors = run(config(dirs.clone(), tsv.clone())).unwrap_err();
        let lines: Vec<String> = errors.iter().map(ToString::to_string).collect();
        assert_eq!(lines.len(), 3, "{lines:#?}");
        assert!(lines[0].contains("empty: no run.json there"), "{lines:#?}");
        assert!(lines.iter().any(|l| l.contains("stampede.run/1")));
        assert!(lines.iter().any(|l| l.contains("broken")));
        assert!(lines.iter().all(|l| !l.contains('\n')), "{lines:#?}");
        assert!(errors.iter().all(|e| e.exit_code() == 2));
        assert!(!tsv.exists());

        // Asked to, the unreadable are skipped (a directory without runs is still refused).
        let mut cfg = config(dirs[..3].to_vec(), tsv.clone());
        cfg.skip_unreadable = true;
        let outcome = run(cfg).unwrap();
        assert_eq!(outcome.skipped.len(), 2);
        assert_eq!(outcome.history.rows.len(), 1);
        assert_eq!(outcome.history.rows[0].label, "good");
        let text = fs::read_to_string(&tsv).unwrap();
        assert_eq!(text.lines().count(), 2);
    }

    #[test]
    fn at_takes_a_rate_and_refuses_anything_else() {
        assert_eq!(parse_at("400").unwrap(), 400.0);
        assert_eq!(parse_at("400/s").unwrap(), 400.0);
        assert_eq!(parse_at(" 2.5 ").unwrap(), 2.5);
        for bad in ["", "fast", "-1", "inf", "NaN"] {
            let e = parse_at(bad).unwrap_err();
            assert!(e.to_string().starts_with("--at '"), "{e}");
        }
    }
}
