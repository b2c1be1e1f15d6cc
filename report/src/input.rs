//! What a report is drawn from: a results directory read back.
use std::path::{Path, PathBuf};

use shared::distribution::Distribution;
use shared::run_file::{RunFile, RunFileError};

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
    #[error("{path}: {message}")]
    Distribution { path: PathBuf, message: String },
}

impl RunReport {
    /// Reads `dir`'s run.json (the distributions are filled in by the `.hgrm` reader).
    pub fn read(dir: &Path) -> Result<RunReport, InputError> {
        let run = RunFile::read(&dir.join("run.json"))?;
        Ok(RunReport {
            run,
            distributions: Vec::new(),
        })
    }
}
