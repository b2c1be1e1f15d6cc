//! A file the user named on the command line (`report -o`, `compare -o/--tsv/--json`): written
//! through, never replaced. A symlink's target is what is written, a FIFO's reader gets the bytes,
//! `/dev/stdout` and `-` are stdout. Atomic replace (a temporary file renamed over the old one) is
//! only for the results directory's own files ([`crate::output::write_file`]): renamed over a path
//! the user named, it destroyed what was there (a symlink, a FIFO, as root even `/dev/full`).
use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};

use crate::output::OutputError;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Destination {
    /// `-`.
    Stdout,
    /// A path the user named: written through.
    File(PathBuf),
    /// A file of the results directory's own (a side-by-side run's compare.html): replaced
    /// atomically, like run.json.
    Own(PathBuf),
}

#[derive(Debug, thiserror::Error)]
pub enum DestinationError {
    /// What is at the path is not something a page is written into; nothing was touched.
    #[error(
        "{flag} {path}: {what}, not a file: name a file, a FIFO or a terminal (or - for stdout)",
        path = path.display()
    )]
    Refused {
        flag: &'static str,
        path: PathBuf,
        what: &'static str,
    },
    #[error("{first} and {second} are both - (stdout): give at most one of them -")]
    StdoutTwice {
        first: &'static str,
        second: &'static str,
    },
    #[error(transparent)]
    Write(#[from] OutputError),
}

impl DestinationError {
    /// 2 for a path the user must change, 1 for a write that failed (a full disk, /dev/full).
    pub fn exit_code(&self) -> u8 {
        match self {
            DestinationError::Refused { .. } | DestinationError::StdoutTwice { .. } => 2,
            DestinationError::Write(_) => 1,
        }
    }
}

impl Destination {
    /// `-` (and `/dev/stdout`, so the summary knows to keep off it) is stdout; anything else a path.
    pub fn of(path: &Path) -> Destination {
        if path == Path::new("-") || path == Path::new("/dev/stdout") {
            Destination::Stdout
        } else {
            Destination::File(path.to_path_buf())
        }
    }

    pub fn is_stdout(&self) -> bool {
        matches!(self, Destination::Stdout)
    }

    /// Refuses, before anything is computed or written, a path that names a directory, a block
    /// device or a socket (following symlinks: the target is what counts). A path that does not
    /// exist yet is fine: it is created.
    pub fn check(&self, flag: &'static str) -> Result<(), DestinationError> {
        let Destination::File(path) = self else {
            return Ok(());
        };
        let Ok(meta) = fs::metadata(path) else {
            // Missing (or a dangling symlink, whose target is created): the write says what fails.
            return Ok(());
        };
        let kind = meta.file_type();
        let what = if kind.is_dir() {
            "a directory"
        } else if kind.is_block_device() {
            "a block device"
        } else if kind.is_socket() {
            "a socket"
        } else {
            return Ok(());
        };
        Err(DestinationError::Refused {
            flag,
            path: path.clone(),
            what,
        })
    }

    /// Writes `text` through: opened for writing (created or truncated, symlinks followed), never
    /// renamed over. A regular file is synced, so "wrote" means on disk.
    pub fn write(&self, flag: &'static str, text: &str) -> Result<(), DestinationError> {
        self.check(flag)?;
        let path = match self {
            Destination::Stdout => {
                let mut out = io::stdout().lock();
                return out
                    .write_all(text.as_bytes())
                    .and_then(|()| out.flush())
                    .map_err(|source| {
                        OutputError {
                            path: PathBuf::from("-"),
                            source,
                        }
                        .into()
                    });
            }
            Destination::Own(path) => return Ok(crate::output::write_file(path, text)?),
            Destination::File(path) => path,
        };
        let named = |source| OutputError {
            path: path.clone(),
            source,
        };
        let mut file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)
            .map_err(named)?;
        file.write_all(text.as_bytes()).map_err(named)?;
        let regular = file.metadata().map_err(named)?.file_type().is_file();
        if regular {
            file.sync_data().map_err(named)?;
        }
        Ok(())
    }
}

impl std::fmt::Display for Destination {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Destination::Stdout => f.write_str("-"),
            Destination::File(p) | Destination::Own(p) => write!(f, "{}", p.display()),
        }
    }
}

/// Refuses two flags that both name stdout: their bytes would interleave into one stream.
pub fn one_stdout(named: &[(&'static str, &Destination)]) -> Result<(), DestinationError> {
    let mut on_stdout = named.iter().filter(|(_, d)| d.is_stdout()).map(|(f, _)| *f);
    match (on_stdout.next(), on_stdout.next()) {
        (Some(first), Some(second)) => Err(DestinationError::StdoutTwice { first, second }),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn is_symlink(p: &Path) -> bool {
        fs::symlink_metadata(p).unwrap().file_type().is_symlink()
    }

    #[test]
    fn a_symlink_is_written_through_to_its_target_and_stays_a_symlink() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("real.html");
        fs::write(&target, "old, and longer than the new").unwrap();
        let link = dir.path().join("link.html");
        symlink(&target, &link).unwrap();
        Destination::of(&link).write("-o", "new").unwrap();
        assert!(is_symlink(&link));
        assert_eq!(fs::read_to_string(&target).unwrap(), "new");
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 2, "no temporary");
    }

    #[test]
    fn a_dangling_symlink_creates_its_target() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("later.tsv");
        let link = dir.path().join("link.tsv");
        symlink(&target, &link).unwrap();
        Destination::of(&link).write("--tsv", "a\tb\n").unwrap();
        assert!(is_symlink(&link));
        assert_eq!(fs::read_to_string(&target).unwrap(), "a\tb\n");
    }

    #[test]
    fn a_fifo_s_reader_gets_the_bytes_and_the_fifo_stays() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("pipe");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        let reader = {
            let fifo = fifo.clone();
            std::thread::spawn(move || fs::read_to_string(fifo).unwrap())
        };
        Destination::of(&fifo).write("--json", "{}\n").unwrap();
        assert_eq!(reader.join().unwrap(), "{}\n");
        assert!(fs::metadata(&fifo).unwrap().file_type().is_fifo());
    }

    #[test]
    fn dev_full_says_the_disk_is_full_and_stays_a_device() {
        let e = Destination::of(Path::new("/dev/full"))
            .write("-o", "page")
            .unwrap_err();
        assert_eq!(e.exit_code(), 1);
        assert!(e.to_string().starts_with("cannot write /dev/full: "), "{e}");
        let meta = fs::metadata("/dev/full").unwrap();
        assert!(meta.file_type().is_char_device());
    }

    #[test]
    fn a_directory_or_a_socket_is_refused_in_one_line_and_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let e = Destination::of(dir.path()).check("-o").unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert_eq!(
            e.to_string(),
            format!(
                "-o {}: a directory, not a file: name a file, a FIFO or a terminal (or - for stdout)",
                dir.path().display()
            )
        );
        let sock = dir.path().join("s");
        let _listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        let e = Destination::of(&sock).write("--tsv", "x").unwrap_err();
        assert!(e.to_string().contains("a socket"), "{e}");
        assert!(fs::metadata(&sock).unwrap().file_type().is_socket());
    }

    #[test]
    fn a_regular_file_is_truncated_and_rewritten_in_place() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("c.html");
        fs::write(&file, "a much longer old page").unwrap();
        let inode = std::os::unix::fs::MetadataExt::ino(&fs::metadata(&file).unwrap());
        Destination::of(&file).write("-o", "new").unwrap();
        assert_eq!(fs::read_to_string(&file).unwrap(), "new");
        let after = std::os::unix::fs::MetadataExt::ino(&fs::metadata(&file).unwrap());
        assert_eq!(inode, after, "the same file, not one renamed over it");
    }

    #[test]
    fn two_flags_on_stdout_are_refused() {
        let out = Destination::of(Path::new("-"));
        let file = Destination::of(Path::new("c.html"));
        assert!(one_stdout(&[("-o", &out), ("--tsv", &file)]).is_ok());
        let e = one_stdout(&[("-o", &out), ("--tsv", &file), ("--json", &out)]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "-o and --json are both - (stdout): give at most one of them -"
        );
    }
}
