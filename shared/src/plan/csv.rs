//! A CSV file read as a stream of records (RFC 4180: commas, quoted fields with `""` for a quote,
//! line breaks inside quotes, CRLF or LF), so a feeder of a gigabyte is never held whole. The first
//! record names the variables; every later one must have as many fields.
use std::io::BufRead;

/// What is wrong with a CSV file, by its line.
#[derive(Debug, thiserror::Error)]
pub enum CsvError {
    #[error("reading it: {0}")]
    Read(#[from] std::io::Error),
    #[error("it is empty: its first line names the variables, e.g. 'user,password'")]
    NoHeader,
    #[error(
        "line 1: '{0}' is not a variable name (letters, digits, '_', '-', '.', from a letter or '_')"
    )]
    BadName(String),
    #[error("line 1 names '{0}' twice")]
    Duplicate(String),
    #[error("line {line} has {found} fields where line 1 names {expected}")]
    Width {
        line: u64,
        found: usize,
        expected: usize,
    },
    #[error("line {line}: a quoted field is never closed")]
    Unclosed { line: u64 },
    #[error(
        "line {line}: '{found}' after a closing quote (a quote inside a quoted field is written \"\")"
    )]
    AfterQuote { line: u64, found: char },
}

impl CsvError {
    /// The line it is on, where it has one (for `file:line`).
    pub fn line(&self) -> Option<u64> {
        match self {
            CsvError::Read(_) => None,
            CsvError::NoHeader | CsvError::BadName(_) | CsvError::Duplicate(_) => Some(1),
            CsvError::Width { line, .. }
            | CsvError::Unclosed { line }
            | CsvError::AfterQuote { line, .. } => Some(*line),
        }
    }
}

/// The records of a CSV stream after its header.
pub struct Records<R> {
    input: R,
    names: Vec<String>,
    /// The line the next record starts on (from 1).
    line: u64,
    buf: Vec<u8>,
}

impl<R: BufRead> Records<R> {
    /// Reads the header; the records follow on demand.
    pub fn new(mut input: R) -> Result<Records<R>, CsvError> {
        let mut buf = Vec::new();
        let mut line = 1;
        let header = read_record(&mut input, &mut buf, &mut line)?.ok_or(CsvError::NoHeader)?;
        let mut names: Vec<String> = Vec::with_capacity(header.len());
        for field in header {
            let name = String::from_utf8_lossy(&field).trim().to_string();
            if !super::template::is_variable_name(&name) {
                return Err(CsvError::BadName(name));
            }
            if names.contains(&name) {
                return Err(CsvError::Duplicate(name));
            }
            names.push(name);
        }
        Ok(Records {
            input,
            names,
            line,
            buf,
        })
    }

    /// The line the next record starts on (from 1).
    pub fn line(&self) -> u64 {
        self.line
    }

    /// The variables the header names, in its order.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// The next record, its fields in the header's order; `None` at the end. An empty line is no
    /// record.
    pub fn next_record(&mut self) -> Result<Option<Vec<Vec<u8>>>, CsvError> {
        loop {
            let start = self.line;
            let Some(fields) = read_record(&mut self.input, &mut self.buf, &mut self.line)? else {
                return Ok(None);
            };
            if fields.len() == 1 && fields[0].is_empty() {
                continue;
            }
            if fields.len() != self.names.len() {
                return Err(CsvError::Width {
                    line: start,
                    found: fields.len(),
                    expected: self.names.len(),
                });
            }
            return Ok(Some(fields));
        }
    }
}

/// One record, which may span lines inside quotes; `line` counts the lines it took.
fn read_record(
    input: &mut impl BufRead,
    buf: &mut Vec<u8>,
    line: &mut u64,
) -> Result<Option<Vec<Vec<u8>>>, CsvError> {
    let start = *line;
    buf.clear();
    if input.read_until(b'\n', buf)? == 0 {
        return Ok(None);
    }
    *line += 1;
    let mut fields = Vec::new();
    let mut field = Vec::new();
    let mut at = 0;
    loop {
        if buf.get(at) == Some(&b'"') && field.is_empty() {
            at = quoted(input, buf, at + 1, &mut field, line, start)?;
            match buf.get(at) {
                None | Some(b'\n') | Some(b',') => {}
                Some(b'\r') if matches!(buf.get(at + 1), None | Some(b'\n')) => {}
                Some(other) => {
                    return Err(CsvError::AfterQuote {
                        line: *line - 1,
                        found: char::from(*other),
                    });
                }
            }
        }
        match buf.get(at) {
            Some(b',') => fields.push(std::mem::take(&mut field)),
            None | Some(b'\n') => break,
            Some(b'\r') if matches!(buf.get(at + 1), None | Some(b'\n')) => break,
            Some(b) => field.push(*b),
        }
        at += 1;
    }
    fields.push(field);
    Ok(Some(fields))
}

/// A quoted field's content from `at` (past its opening quote) into `field`, reading on past line
/// breaks; returns where its closing quote's next byte is.
fn quoted(
    input: &mut impl BufRead,
    buf: &mut Vec<u8>,
    mut at: usize,
    field: &mut Vec<u8>,
    line: &mut u64,
    start: u64,
) -> Result<usize, CsvError> {
    loop {
        match buf.get(at) {
            Some(b'"') if buf.get(at + 1) == Some(&b'"') => {
                field.push(b'"');
                at += 2;
            }
            Some(b'"') => return Ok(at + 1),
            Some(b) => {
                field.push(*b);
                at += 1;
            }
            None => {
                // The field goes on past this line: read the next onto the buffer.
                if input.read_until(b'\n', buf)? == 0 {
                    return Err(CsvError::Unclosed { line: start });
                }
                *line += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(text: &str) -> Result<(Vec<String>, Vec<Vec<String>>), CsvError> {
        let mut r = Records::new(text.as_bytes())?;
        let names = r.names().to_vec();
        let mut rows = Vec::new();
        while let Some(rec) = r.next_record()? {
            rows.push(
                rec.into_iter()
                    .map(|f| String::from_utf8(f).unwrap())
                    .collect(),
            );
        }
        Ok((names, rows))
    }

    #[test]
    fn records_follow_rfc_4180() {
        let (names, rows) = all(
            "user,password,note\r\nalice,s3cret,plain\r\n\"bob, jr\",\"say \"\"hi\"\"\",\"two\nlines\"\n\ncarol,,\n",
        )
        .unwrap();
        assert_eq!(names, ["user", "password", "note"]);
        assert_eq!(
            rows,
            [
                vec!["alice", "s3cret", "plain"],
                vec!["bob, jr", "say \"hi\"", "two\nlines"],
                vec!["carol", "", ""],
            ]
        );
        // No line break at the end, and a quoted field ending the file.
        let (_, rows) = all("a,b\n1,\"x\"").unwrap();
        assert_eq!(rows, [vec!["1", "x"]]);
    }

    #[test]
    fn a_file_is_read_as_it_is_asked_for_never_whole() {
        // A reader that fails past its first 64 bytes: the first records come before it fails.
        struct Short<'a>(&'a [u8], usize);
        impl std::io::Read for Short<'_> {
            fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
                if self.1 >= 64 {
                    return Err(std::io::Error::other("read past the first 64 bytes"));
                }
                let n = out.len().min(self.0.len() - self.1).min(8);
                out[..n].copy_from_slice(&self.0[self.1..self.1 + n]);
                self.1 += n;
                Ok(n)
            }
        }
        let text: String = std::iter::once("id\n".to_string())
            .chain((0..1000).map(|i| format!("{i}\n")))
            .collect();
        let input = std::io::BufReader::with_capacity(8, Short(text.as_bytes(), 0));
        let mut r = Records::new(input).unwrap();
        for i in 0..10 {
            assert_eq!(
                r.next_record().unwrap().unwrap(),
                [i.to_string().into_bytes()]
            );
        }
    }

    #[test]
    fn a_bad_file_is_refused_by_its_line() {
        let e = |t: &str| all(t).unwrap_err().to_string();
        assert_eq!(e(""), CsvError::NoHeader.to_string());
        assert_eq!(e("user,user\n"), "line 1 names 'user' twice");
        assert!(e("user,1st\n").contains("'1st' is not a variable name"));
        assert_eq!(
            e("a,b\n1,2\n3\n"),
            "line 3 has 1 fields where line 1 names 2"
        );
        assert_eq!(
            e("a,b\n1,\"2\n3,4\n"),
            "line 2: a quoted field is never closed"
        );
        assert!(e("a,b\n\"1\"x,2\n").contains("line 2: 'x' after a closing quote"));
        // Lines inside quotes are counted: the error after them names the right line.
        assert_eq!(
            e("a\n\"1\n2\"\n3,4\n"),
            "line 4 has 2 fields where line 1 names 1"
        );
    }
}
