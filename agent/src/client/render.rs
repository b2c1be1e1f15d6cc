//! A request with `${var}` in its path, header values or body: its parts compiled once at configure,
//! rendered per send into the HTTP/1.1 bytes and the HTTP/2 header block a fixed request carries, its
//! Content-Length counted after rendering. A value that would break the request (a line break in a
//! header or the path, a space in the path) is refused here, named by its variable, and never sent.
use std::borrow::Cow;

use http::header::{CONTENT_LENGTH, HOST, HeaderName, HeaderValue};
use http::{HeaderMap, Method, Uri};
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

/// A request as rendered this time, before it is serialized (`target::Template::rendered`); its
/// body is the caller's buffer.
#[derive(Debug)]
pub struct Parts<'a> {
    pub method: &'a Method,
    pub uri: Uri,
    pub headers: HeaderMap,
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

    /// The request as sent this time, its body left in `out`. `extracted` are the connection's
    /// setup values.
    pub fn render(
        &self,
        vars: &Vars,
        fill: &Fill,
        extracted: &[Vec<u8>],
        out: &mut Vec<u8>,
    ) -> Result<Parts<'_>, Refused> {
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
        let refuse = |t: &Text, bad: &[u8], what: &str| {
            let var = t
                .variables()
                .find(|&v| values[v].iter().any(|b| bad.contains(b)))
                .map_or(Cow::Borrowed("a built-in"), |v| {
                    Cow::Owned(format!("variable '{}'", vars.names[v]))
                });
            Refused(format!("{var} gives a value with {what}: not sent"))
        };
        out.clear();
        self.path.render(&values, fill.counter, &mut rng, out);
        if out.iter().any(|b| b" \r\n\0".contains(b)) {
            return Err(refuse(
                &self.path,
                b" \r\n\0",
                "a space or a line break, in the path",
            ));
        }
        let path = String::from_utf8_lossy(out).into_owned();
        let uri: Uri = format!("{}://{}{path}", self.scheme, self.authority)
            .parse()
            .map_err(|_| {
                Refused(format!(
                    "the path '{path}' as rendered is not a request target: not sent"
                ))
            })?;
        let mut headers = HeaderMap::with_capacity(self.headers.len());
        for (name, t) in &self.headers {
            out.clear();
            t.render(&values, fill.counter, &mut rng, out);
            let value = HeaderValue::from_bytes(out)
                .map_err(|_| refuse(t, b"\r\n\0", &format!("a line break, in header {name}")))?;
            if *name == HOST {
                headers.insert(name.clone(), value);
            } else {
                headers.append(name.clone(), value);
            }
        }
        out.clear();
        self.body.render(&values, fill.counter, &mut rng, out);
        Ok(Parts {
            method: &self.method,
            uri,
            headers,
        })
    }
}

#[cfg(test)]
mod tests;
