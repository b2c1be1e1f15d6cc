//! `--junit FILE` on `run`, `find-max` and `compare`: where the JUnit XML goes (a path the user
//! named, written through by [`Destination`], checked before any load) and what it is built from
//! once the command has ended: each target's run.json as written, or the error that ended it. The
//! XML itself is `results::junit`'s. Written after every other output, whatever the exit code, so
//! a CI job that fails on exit 3 still has the file to show.
use std::path::{Path, PathBuf};

use results::junit::{self, Suite};
use results::run_file::{self, RunFile};

use crate::destination::{Destination, DestinationError};
use crate::run::{RunError, RunOutcome, SideOutcome};

/// How a command ended, as far as its JUnit file cares.
pub enum Ended {
    /// The results directories of its targets, in the command line's order.
    Ran(Vec<PathBuf>),
    /// No run.json to read: what ended it, as stderr said it.
    Failed(String),
    /// A comparison's suite, made from its outcome.
    Compared(Suite),
}

impl Ended {
    pub fn of_run(outcome: &Result<RunOutcome, RunError>) -> Ended {
        match outcome {
            Ok(o) => Ended::Ran(vec![o.dir.clone()]),
            Err(e) => Ended::Failed(e.to_string()),
        }
    }

    pub fn of_side(outcome: &Result<SideOutcome, RunError>) -> Ended {
        match outcome {
            Ok(side) => Ended::Ran(side.runs.iter().map(|o| o.dir.clone()).collect()),
            Err(e) => Ended::Failed(e.to_string()),
        }
    }
}

/// The file a command was asked for, if any, and the command's name for its `<testsuites>`.
pub struct Junit {
    to: Option<Destination>,
    command: &'static str,
}

impl Junit {
    /// `--junit PATH` of `command`, refused (exit 2) before anything runs when the path names a
    /// directory, a block device or a socket.
    pub fn named(command: &'static str, path: Option<&Path>) -> Result<Junit, DestinationError> {
        let to = path.map(Destination::of);
        if let Some(to) = &to {
            to.check("--junit")?;
        }
        Ok(Junit { to, command })
    }

    /// Writes the file for how the command `ended`, and returns its exit code: `code`, or 1 when
    /// the file could not be written and the command had otherwise succeeded (CI must not take a
    /// missing report for a pass).
    pub fn write(&self, ended: Ended, code: u8) -> u8 {
        let Some(to) = &self.to else {
            return code;
        };
        let suites = match ended {
            Ended::Ran(dirs) => dirs.iter().map(|d| suite_of(d)).collect(),
            Ended::Failed(why) => vec![Suite::errored(self.command, "run", &why)],
            Ended::Compared(suite) => vec![suite],
        };
        // `--junit results/junit.xml` beside `--out results`: a run refused before it made its
        // results directory still leaves the report of why, where the job looks for it.
        if let Destination::File(path) = to
            && let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty())
        {
            let _ = std::fs::create_dir_all(dir);
        }
        match to.write("--junit", &junit::render(self.command, &suites)) {
            Ok(()) => code,
            Err(e) => {
                eprintln!("stampede: {e}");
                code.max(1)
            }
        }
    }
}

/// A target's suite from its run.json; a run.json that cannot be read is an errored run.
fn suite_of(dir: &Path) -> Suite {
    match RunFile::read(&run_file::path_of(dir)) {
        Ok(run) => junit::of_run(&run, None),
        Err(e) => Suite::errored(&dir.display().to_string(), "run", &e.to_string()),
    }
}
