//! Reading /proc and /sys text: a file that vanished because its process exited is told apart from a
//! real failure, and a parse error names the line, so the sensor's error names the file and line.
use std::fmt;
use std::io;
use std::path::Path;

use super::SensorError;

/// What is wrong with a file's text, and on which line (1-based).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    pub line: usize,
    pub what: String,
}

impl ParseError {
    pub fn new(line: usize, what: impl Into<String>) -> ParseError {
        ParseError {
            line,
            what: what.into(),
        }
    }
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.what)
    }
}

/// A /proc entry of a process that exited between listing and reading is gone, not broken: ENOENT
/// for its files, ESRCH for some of its links and directories.
pub fn is_gone(err: &io::Error) -> bool {
    err.kind() == io::ErrorKind::NotFound || err.raw_os_error() == Some(libc::ESRCH)
}

/// The file's text.
pub fn read(path: &Path) -> Result<String, SensorError> {
    std::fs::read_to_string(path).map_err(|source| SensorError::Read {
        path: path.to_path_buf(),
        source,
    })
}

/// The file's text, or `None` when its process has exited.
pub fn read_alive(path: &Path) -> Result<Option<String>, SensorError> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(err) if is_gone(&err) => Ok(None),
        Err(source) => Err(SensorError::Read {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// The file parsed, its error naming the file.
pub fn parse<T>(
    path: &Path,
    text: &str,
    parser: impl FnOnce(&str) -> Result<T, ParseError>,
) -> Result<T, SensorError> {
    parser(text).map_err(|err| SensorError::Parse {
        path: path.to_path_buf(),
        line: err.line,
        what: err.what,
    })
}

/// A decimal field, its error naming what it is.
pub fn number<T: std::str::FromStr>(field: &str, line: usize, what: &str) -> Result<T, ParseError> {
    field
        .parse()
        .map_err(|_| ParseError::new(line, format!("{what} is not a number: {field:?}")))
}

/// Every `key value` line (cpu.stat, memory.stat, memory.events), for the keys the caller asks for;
/// another key is skipped, since each kernel adds some.
pub fn key_values<'t>(
    text: &'t str,
) -> impl Iterator<Item = Result<(&'t str, u64), ParseError>> + 't {
    text.lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(i, line)| {
            let mut parts = line.split_whitespace();
            let key = parts.next().unwrap_or_default();
            let value = parts
                .next()
                .ok_or_else(|| ParseError::new(i + 1, format!("{key} has no value")))?;
            Ok((key, number(value, i + 1, key)?))
        })
}

/// The first number after each of `names` in a `Name:   value [unit]` file (/proc/meminfo,
/// /proc/PID/status); `None` for a name the file lacks.
pub fn colon_fields<const N: usize>(
    text: &str,
    names: [&str; N],
) -> Result<[Option<u64>; N], ParseError> {
    let mut found = [None; N];
    for (i, line) in text.lines().enumerate() {
        let Some((key, rest)) = line.split_once(':') else {
            continue;
        };
        if let Some(k) = names.iter().position(|n| *n == key) {
            let value = rest.split_whitespace().next().unwrap_or_default();
            found[k] = Some(number(value, i + 1, key)?);
        }
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_values_name_the_bad_line() {
        let good: Vec<_> = key_values("a 1\n\nb 2\n")
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(good, vec![("a", 1), ("b", 2)]);
        let err = key_values("a 1\nb x\n").collect::<Result<Vec<_>, _>>();
        assert_eq!(
            err.unwrap_err(),
            ParseError::new(2, "b is not a number: \"x\"")
        );
        let err = key_values("a\n").collect::<Result<Vec<_>, _>>();
        assert_eq!(err.unwrap_err().line, 1);
    }

    #[test]
    fn colon_fields_take_the_first_number() {
        let text = "MemTotal:   10 kB\nOther: x\nMemAvailable:\t7 kB\n";
        assert_eq!(
            colon_fields(text, ["MemAvailable", "MemTotal", "Nope"]).unwrap(),
            [Some(7), Some(10), None]
        );
        assert_eq!(colon_fields("A: 1\nB: y\n", ["B"]).unwrap_err().line, 2);
    }

    #[test]
    fn a_missing_file_is_gone_not_failed() {
        assert_eq!(read_alive(Path::new("/proc/0/stat")).unwrap(), None);
        let err = read(Path::new("/proc/0/stat")).unwrap_err();
        assert!(err.to_string().contains("/proc/0/stat"), "{err}");
    }
}
