//! What a report is drawn from: a results directory read back.
use std::io;
use std::path::{Path, PathBuf};

use results::distribution::{Distribution, HgrmError};
use results::run_file::{RunFile, RunFileError};

/// One run, as its results directory holds it.
#[derive(Debug, Clone, PartialEq)]
pub struct RunReport {
    pub run: RunFile,
    /// The steps' merged latency distributions (from `hlog/step-NNN.hgrm`), in step order; a step
    /// without one is left out.
    pub distributions: Vec<Distribution>,
}

/// Why a results directory could not be read.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    #[error(transparent)]
    Run(#[from] RunFileError),
    #[error("cannot read {path}: {source}")]
    Read { path: PathBuf, source: io::Error },
    #[error("{path}: {source}")]
    Distribution { path: PathBuf, source: HgrmError },
}

impl RunReport {
    /// Reads `dir`'s run.json and each of its steps' `hlog/step-NNN.hgrm`. A step without one is
    /// a run from before stampede wrote them (or a step killed before its files): left out, not an
    /// error. A damaged one is, naming the file and the line.
    pub fn read(dir: &Path) -> Result<RunReport, InputError> {
        let run = RunFile::read(&dir.join("run.json"))?;
        let mut distributions = Vec::new();
        for step in &run.steps {
            if let Some(d) = read_hgrm(dir, step.number)? {
                distributions.push(d);
            }
        }
        Ok(RunReport { run, distributions })
    }
}

/// The `.hgrm` the coordinator writes for step `number` (counted from 1), if there is one.
fn read_hgrm(dir: &Path, number: u32) -> Result<Option<Distribution>, InputError> {
    let path = dir.join("hlog").join(format!("step-{number:03}.hgrm"));
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(source) => return Err(InputError::Read { path, source }),
    };
    Distribution::parse_hgrm(number, &text)
        .map(Some)
        .map_err(|source| InputError::Distribution { path, source })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    const RUN_JSON: &str = include_str!("../../results/tests/golden/run.json");

    /// A results directory holding the golden run.json (steps 1 to 6) and the given .hgrm files.
    fn results(hgrm: &[(u32, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir(dir.path().join("hlog")).unwrap();
        fs::write(dir.path().join("run.json"), RUN_JSON).unwrap();
        for (step, text) in hgrm {
            let path = dir.path().join(format!("hlog/step-{step:03}.hgrm"));
            fs::write(path, text).unwrap();
        }
        dir
    }

    fn hgrm(values_us: &[u64]) -> String {
        let mut h = shared::histogram::new();
        for &v in values_us {
            h.record(v).unwrap();
        }
        Distribution::of(0, &h).to_hgrm()
    }

    #[test]
    fn each_steps_hgrm_is_read_in_step_order_and_a_missing_one_left_out() {
        let dir = results(&[(3, &hgrm(&[30_000, 31_000])), (1, &hgrm(&[10_000]))]);
        let r = RunReport::read(dir.path()).unwrap();
        let got: Vec<(u32, u64)> = r.distributions.iter().map(|d| (d.step, d.total)).collect();
        assert_eq!(got, [(1, 1), (3, 2)]);
        assert_eq!(r.run.steps.len(), 6);
    }

    #[test]
    fn a_run_from_before_hgrm_files_has_no_distributions() {
        let dir = results(&[]);
        fs::remove_dir(dir.path().join("hlog")).unwrap();
        assert_eq!(RunReport::read(dir.path()).unwrap().distributions, []);
    }

    #[test]
    fn a_damaged_hgrm_names_the_file_and_the_line() {
        let damaged = hgrm(&[10_000]).replace("1.00", "x");
        let dir = results(&[(2, &damaged)]);
        let e = RunReport::read(dir.path()).unwrap_err().to_string();
        let path = dir.path().join("hlog/step-002.hgrm");
        assert!(
            e.starts_with(&format!("{}: line 3: ", path.display())),
            "{e}"
        );
    }

    #[test]
    fn an_unreadable_hgrm_is_an_error_not_a_missing_one() {
        let dir = results(&[]);
        // A directory where the file should be: it exists but cannot be read as text.
        fs::create_dir(dir.path().join("hlog/step-004.hgrm")).unwrap();
        let e = RunReport::read(dir.path()).unwrap_err().to_string();
        assert!(
            e.starts_with("cannot read ") && e.contains("step-004.hgrm"),
            "{e}"
        );
    }
}
