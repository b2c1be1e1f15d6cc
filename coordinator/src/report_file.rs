//! report.html: a results directory rendered into its page, by a run after each step and by
//! `stampede report DIR [-o FILE]` afterwards. Both go through [`render`], so the page a run leaves
//! and the one rebuilt from its files are the same bytes. (Writing it is `output`'s.)
use std::io;
use std::path::{Path, PathBuf};

/// The report's name in a results directory.
pub const REPORT: &str = "report.html";

/// Why a report could not be made.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error("{0}: no such results directory")]
    NoDir(PathBuf),
    #[error("{0} is not a directory (give a results directory, the one holding run.json)")]
    NotDir(PathBuf),
    #[error("{0} holds no run.json: it is not a stampede results directory")]
    NoRun(PathBuf),
    #[error(transparent)]
    Input(#[from] report::InputError),
    #[error("{path}: {source}")]
    Events {
        path: PathBuf,
        source: results::events::ReadError,
    },
    #[error("cannot read {path}: {source}")]
    ReadEvents { path: PathBuf, source: io::Error },
}

/// The page of the run in `dir`, from its files as they are now.
pub fn render(dir: &Path) -> Result<String, ReportError> {
    match std::fs::metadata(dir) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(ReportError::NoDir(dir.to_path_buf()));
        }
        Ok(m) if !m.is_dir() => return Err(ReportError::NotDir(dir.to_path_buf())),
        Ok(_) if !dir.join("run.json").exists() => {
            return Err(ReportError::NoRun(dir.to_path_buf()));
        }
        // Any other trouble is named by the read below, with its file.
        _ => {}
    }
    let run = report::RunReport::read(dir)?;
    Ok(report::render_run(&run))
}

/// The live page of the run in `dir` as its events.ndjson leaves it (`live.html`), or none when the
/// run kept no events (one from before they were written).
pub fn render_live(dir: &Path) -> Result<Option<String>, ReportError> {
    let path = dir.join(crate::live::EVENTS_FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(source) => return Err(ReportError::ReadEvents { path, source }),
    };
    let live = results::events::Live::read(&text)
        .map_err(|source| ReportError::Events { path, source })?;
    Ok(Some(report::live_page(&live, live.baseline.as_ref(), None)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A results directory holding `shared`'s golden run.json (a real demo run).
    fn golden_dir() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let golden = Path::new(env!("CARGO_MANIFEST_DIR")).join("../results/tests/golden/run.json");
        std::fs::copy(golden, dir.path().join("run.json")).unwrap();
        dir
    }

    #[test]
    fn the_report_is_the_page_of_the_run_json() {
        let dir = golden_dir();
        let run = report::RunReport::read(dir.path()).unwrap();
        assert_eq!(render(dir.path()).unwrap(), report::render_run(&run));
    }

    #[test]
    fn a_wrong_directory_is_named_and_is_a_usage_error() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nope");
        let e = render(&missing).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!("{}: no such results directory", missing.display())
        );
        let e = render(dir.path()).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "{} holds no run.json: it is not a stampede results directory",
                dir.path().display()
            )
        );
        let file = dir.path().join("run.json");
        std::fs::write(&file, "{\"schema\": \"stampede.run/").unwrap();
        let e = render(&file).unwrap_err();
        assert!(e.to_string().contains("is not a directory"), "{e}");
        let e = render(dir.path()).unwrap_err();
        assert!(
            e.to_string()
                .starts_with(&format!("{} is not a readable run.json", file.display())),
            "{e}"
        );
    }
}
