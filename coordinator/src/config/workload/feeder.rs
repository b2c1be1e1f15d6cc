//! A plan file's `[[feeder]]`s and `[setup]` resolved into the run's `Data`: each CSV file read
//! through once as a stream (its header, every row as wide, at least one row) before any load, and
//! every request's `${var}` checked against the variables they define, refused with the request
//! and where in it.
use std::io::BufReader;
use std::path::{Path, PathBuf};

use shared::plan::{
    Data, Extraction, Feeder, HttpVersion, MAX_ROW, Records, RequestSpec, Setup, Template,
    Workload, parse_header, row_len,
};

use super::super::ConfigError;
use crate::cli::{FeederArg, RunArgs, SetupArg};

/// The run's data and each feeder's file, in feeder order (shipped to the agents after configure).
/// `names` are the requests' names (empty when they are unnamed), for the words of a refusal.
pub fn data(
    args: &RunArgs,
    requests: &[RequestSpec],
    names: &[String],
) -> Result<(Data, Vec<PathBuf>), ConfigError> {
    let mut feeders = Vec::with_capacity(args.feeder.len());
    for f in &args.feeder {
        feeders.push(feeder(f)?);
    }
    let setup = match &args.setup {
        None => None,
        Some(s) => Some(setup(s, requests)?),
    };
    let data = Data::try_new(feeders, setup).map_err(|e| ConfigError::Value(e.to_string()))?;
    let variables = data.variables();
    for (i, r) in requests.iter().enumerate() {
        let which = match names.get(i) {
            Some(name) => format!("request {name}"),
            None => format!("request {}", i + 1),
        };
        check(r, &variables, &which)?;
    }
    if let Some(s) = data.setup() {
        check(s.request(), &variables, "the setup")?;
    }
    Ok((data, args.feeder.iter().map(|f| f.file.clone()).collect()))
}

/// A setup runs over HTTP/1.1 only: refused before any agent is asked.
pub fn check_http(w: &Workload) -> Result<(), ConfigError> {
    if w.data().setup().is_some() && w.http() != HttpVersion::Http1 {
        return Err(ConfigError::Conflict(format!(
            "[setup] runs over HTTP/1.1 only: this target is spoken to in HTTP {} (--http 1.1, or an http:// target)",
            w.http().name()
        )));
    }
    Ok(())
}

/// A feeder's CSV read through: its header names the columns, and every row is checked (ragged,
/// unclosed quotes) before any load, so a bad line is found here, not by an agent mid-run.
fn feeder(f: &FeederArg) -> Result<Feeder, ConfigError> {
    let (columns, rows) = scan(&f.file)?;
    if rows == 0 {
        return Err(refused(
            &f.file,
            1,
            "it has a header and no rows: a feeder needs at least one",
        ));
    }
    Feeder::try_new(&f.name, f.mode, columns).map_err(|e| ConfigError::Value(e.to_string()))
}

/// The header's names and the number of rows of a CSV file, read as a stream.
pub fn scan(path: &Path) -> Result<(Vec<String>, u64), ConfigError> {
    let file = std::fs::File::open(path)
        .map_err(|e| ConfigError::File(format!("feeder file {}: {e}", path.display())))?;
    let mut records =
        Records::new(BufReader::with_capacity(256 * 1024, file)).map_err(|e| csv_error(path, e))?;
    let mut rows = 0u64;
    loop {
        let line = records.line();
        let Some(fields) = records.next_record().map_err(|e| csv_error(path, e))? else {
            break;
        };
        if row_len(&fields) > MAX_ROW {
            return Err(refused(
                path,
                line,
                &format!("a row of more than {} MiB", MAX_ROW >> 20),
            ));
        }
        rows += 1;
    }
    Ok((records.names().to_vec(), rows))
}

fn csv_error(path: &Path, e: shared::plan::CsvError) -> ConfigError {
    match e.line() {
        Some(line) => refused(path, line, &e.to_string()),
        None => ConfigError::File(format!("feeder file {}: {e}", path.display())),
    }
}

fn refused(path: &Path, line: u64, why: &str) -> ConfigError {
    ConfigError::File(format!("feeder file {}:{line}: {why}", path.display()))
}

/// The setup's request: a path is joined to the target's origin, as a request's is.
fn setup(s: &SetupArg, requests: &[RequestSpec]) -> Result<Setup, ConfigError> {
    let bad = |why: String| ConfigError::Value(format!("[setup]: {why}"));
    let origin = requests
        .first()
        .map(|r| r.url().origin())
        .unwrap_or_default();
    let url = if s.url.starts_with('/') {
        format!("{origin}{}", s.url)
    } else {
        s.url.clone()
    };
    let headers = s
        .headers
        .iter()
        .map(|h| parse_header(h))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| bad(e.to_string()))?;
    let method = s.method.as_deref().unwrap_or("GET");
    let body = s.body.clone().unwrap_or_default().into_bytes();
    let request =
        RequestSpec::try_new(method, &url, headers, body).map_err(|e| bad(e.to_string()))?;
    if request.url().origin() != origin {
        return Err(bad(format!(
            "its URL {url} is not on the target's origin {origin}"
        )));
    }
    let extract = s
        .extract
        .iter()
        .map(|(var, spec)| Extraction::parse(var, spec).map_err(|e| bad(e.to_string())))
        .collect::<Result<Vec<_>, _>>()?;
    if extract.is_empty() {
        return Err(bad(
            "it extracts nothing: add extract = { token = \"json:/token\" } (header:NAME, json:/POINTER, regex:PATTERN)".into(),
        ));
    }
    Ok(Setup::new(request, extract))
}

/// Every `${var}` of a request names a variable the data defines.
fn check(r: &RequestSpec, names: &[&str], which: &str) -> Result<(), ConfigError> {
    let refuse = |part: &str, e: shared::plan::TemplateError| {
        ConfigError::Value(format!("{which}, its {part}: {e}"))
    };
    Template::compile(r.url().path(), names).map_err(|e| refuse("URL", e))?;
    for (name, value) in r.headers() {
        Template::compile(value, names).map_err(|e| refuse(&format!("header {name}"), e))?;
    }
    if let Ok(body) = std::str::from_utf8(r.body()) {
        Template::compile(body, names).map_err(|e| refuse("body", e))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests;
