//! A request with `${var}` in its path, header values or body: its parts compiled once at configure,
//! rendered per send into the HTTP/1.1 bytes and the HTTP/2 header block a fixed request carries, its
//! Content-Length counted after rendering. A value that would break the request (a line break in a
//! header or the path, a space in the path) is refused here, named by its variable, and never sent.
use std::borrow::Cow;

use std::ops::Range;

use http::header::{CONTENT_LENGTH, HeaderName};
use http::{HeaderMap, Method};
use shared::plan::{Data, Template as Text};
use shared::rng::Rng;

use crate::feeder::Row;

/// Where variable `i` of the run takes its value from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// Feeder `feeder`'s column `column`, of the row drawn for the request.
    Fed { feeder: usize, column: usize },
    /// The setup's extraction `k`, kept by the connection.
    Extracted(usize),
}

/// The run's variables: their names (for the words of a refusal) and sources, by index.
#[derive(Debug, Default)]
pub struct Vars {
    pub names: Vec<String>,
    pub sources: Vec<Source>,
}

impl Vars {
    pub fn of(data: &Data) -> Vars {
        let names: Vec<String> = data.variables().iter().map(|v| v.to_string()).collect();
        let sources = (0..names.len())
            .map(|i| match data.feeder_of(i) {
                Some(f) => Source::Fed {
                    feeder: f,
                    column: i - data.first_of(f),
                },
                None => Source::Extracted(i - data.first_extracted()),
            })
            .collect();
        Vars { names, sources }
    }
}

/// A request's parts with their variables, compiled once.
#[derive(Debug)]
pub struct Recipe {
    method: Method,
    scheme: &'static str,
    authority: String,
    path: Text,
    headers: Vec<(HeaderName, Text)>,
    body: Text,
    /// The feeders whose rows it takes (one row of each per request), in feeder order.
    pub feeders: Vec<usize>,
}

/// What one request is filled with: a row of each feeder it takes (by feeder index), its number and
/// the seed of its random built-ins.
#[derive(Debug, Default)]
pub struct Fill {
    pub rows: Vec<Option<Row>>,
    pub counter: u64,
    pub seed: u64,
}

/// Why a rendered request is not sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused(pub String);

/// Where each part of a rendered request is in its buffer: the path, each header's value (in the
/// recipe's order), the body.
#[derive(Debug, Default)]
pub struct Spans {
    pub path: Range<usize>,
    pub headers: Vec<Range<usize>>,
    pub body: Range<usize>,
}

impl Recipe {
    /// `None` when nothing in it varies (it is sent as the bytes compiled once).
    pub fn compile(
        method: &Method,
        scheme: &'static str,
        authority: &str,
        path: &str,
        headers: &HeaderMap,
        body: &[u8],
        vars: &Vars,
    ) -> Result<Option<Recipe>, String> {
        let names: Vec<&str> = vars.names.iter().map(String::as_str).collect();
        let text =
            |t: &str, what: &str| Text::compile(t, &names).map_err(|e| format!("{what}: {e}"));
        let path = text(path, "its URL")?;
        let mut hs = Vec::new();
        for (name, value) in headers {
            // The length is the rendered body's, counted per send.
            if name == CONTENT_LENGTH {
                continue;
            }
            let value = String::from_utf8_lossy(value.as_bytes());
            hs.push((name.clone(), text(&value, &format!("header {name}"))?));
        }
        // A body that is not text (a binary --body-file) is sent as it is.
        let body = match std::str::from_utf8(body) {
            Ok(b) => text(b, "its body")?,
            Err(_) => Text::compile("", &[]).map_err(|e| e.to_string())?,
        };
        if path.is_fixed() && body.is_fixed() && hs.iter().all(|(_, t)| t.is_fixed()) {
            return Ok(None);
        }
        let mut feeders: Vec<usize> = path
            .variables()
            .chain(body.variables())
            .chain(hs.iter().flat_map(|(_, t)| t.variables()))
            .filter_map(|v| match vars.sources[v] {
                Source::Fed { feeder, .. } => Some(feeder),
                Source::Extracted(_) => None,
            })
            .collect();
        feeders.sort_unstable();
        feeders.dedup();
        Ok(Some(Recipe {
            method: method.clone(),
            scheme,
            authority: authority.to_string(),
            path,
            headers: hs,
            body,
            feeders,
        }))
    }

    /// The request as sent this time: its parts rendered into `out`, where `spans` says they are.
    /// `extracted` are the connection's setup values.
    pub fn render(
        &self,
        vars: &Vars,
        fill: &Fill,
        extracted: &[Vec<u8>],
        out: &mut Vec<u8>,
        spans: &mut Spans,
    ) -> Result<(), Refused> {
        let values: Vec<&[u8]> = vars
            .sources
            .iter()
            .map(|s| match *s {
                Source::Fed { feeder, column } => fill
                    .rows
                    .get(feeder)
                    .and_then(Option::as_ref)
                    .map_or(&[][..], |r| r.field(column)),
                Source::Extracted(k) => extracted.get(k).map_or(&[][..], Vec::as_slice),
            })
            .collect();
        let mut rng = Rng::new(fill.seed);
        let refuse = |t: &Text, bad: fn(u8) -> bool, what: &str| {
            let var = t
                .variables()
                .find(|&v| values[v].iter().any(|&b| bad(b)))
                .map_or(Cow::Borrowed("a built-in"), |v| {
                    Cow::Owned(format!("variable '{}'", vars.names[v]))
                });
            Refused(format!("{var} gives a value with {what}: not sent"))
        };
        out.clear();
        spans.headers.clear();
        self.path.render(&values, fill.counter, &mut rng, out);
        spans.path = 0..out.len();
        if out.iter().any(|&b| not_in_path(b)) {
            return Err(refuse(
                &self.path,
                not_in_path,
                "a space, a line break or a byte outside visible ASCII, in the path",
            ));
        }
        for (name, t) in &self.headers {
            let from = out.len();
            t.render(&values, fill.counter, &mut rng, out);
            if out[from..].iter().any(|&b| not_in_header(b)) {
                return Err(refuse(
                    t,
                    not_in_header,
                    &format!("a line break or a control character, in header {name}"),
                ));
            }
            spans.headers.push(from..out.len());
        }
        let from = out.len();
        self.body.render(&values, fill.counter, &mut rng, out);
        spans.body = from..out.len();
        Ok(())
    }

    pub fn method(&self) -> &Method {
        &self.method
    }

    pub fn scheme(&self) -> &'static str {
        self.scheme
    }

    /// The target's authority, the HTTP/2 `:authority` where the Host header is not text.
    pub fn authority(&self) -> &str {
        &self.authority
    }

    /// The header names, in the order `Spans::headers` gives their values.
    pub fn header_names(&self) -> impl Iterator<Item = &HeaderName> {
        self.headers.iter().map(|(n, _)| n)
    }
}

/// A byte a request target cannot hold as it is (RFC 9112 3.2: visible ASCII, no space).
fn not_in_path(b: u8) -> bool {
    b <= b' ' || b >= 0x7f
}

/// A byte a header's value cannot hold (RFC 9110 5.5: no control but a tab).
fn not_in_header(b: u8) -> bool {
    (b < b' ' && b != b'\t') || b == 0x7f
}

#[cfg(test)]
mod tests;
