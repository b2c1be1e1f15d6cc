//! What a setup request's reply hands the requests after it: a value taken from one of its headers,
//! from its JSON body by a JSON pointer (RFC 6901), or from its body by a regular expression (its
//! first group, else the whole match). Written `header:NAME`, `json:/POINTER`, `regex:PATTERN`.

/// Where a value comes from in a reply.
#[derive(Debug, Clone)]
pub enum Source {
    Header(String),
    Json(String),
    Regex(regex::bytes::Regex),
}

impl PartialEq for Source {
    fn eq(&self, other: &Source) -> bool {
        match (self, other) {
            (Source::Header(a), Source::Header(b)) => a.eq_ignore_ascii_case(b),
            (Source::Json(a), Source::Json(b)) => a == b,
            (Source::Regex(a), Source::Regex(b)) => a.as_str() == b.as_str(),
            _ => false,
        }
    }
}

/// One variable filled from a reply.
#[derive(Debug, Clone, PartialEq)]
pub struct Extraction {
    var: String,
    source: Source,
}

/// What is wrong with an extraction, said with what was written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExtractError {
    #[error("'{0}' is not a variable name (letters, digits, '_', '-', '.', from a letter or '_')")]
    BadName(String),
    #[error("{var} = '{spec}': write header:NAME, json:/POINTER or regex:PATTERN")]
    Kind { var: String, spec: String },
    #[error(
        "{var} = '{spec}': a JSON pointer is empty or starts with '/', e.g. json:/token or json:/data/0/id"
    )]
    Pointer { var: String, spec: String },
    #[error("{var} = '{spec}': {why}")]
    Regex {
        var: String,
        spec: String,
        why: String,
    },
    #[error("{var} = '{spec}': '{name}' is not a header name")]
    Header {
        var: String,
        spec: String,
        name: String,
    },
}

impl Extraction {
    /// `var` filled by `spec` (`header:NAME`, `json:/POINTER`, `regex:PATTERN`).
    pub fn parse(var: &str, spec: &str) -> Result<Extraction, ExtractError> {
        if !super::is_variable_name(var) {
            return Err(ExtractError::BadName(var.into()));
        }
        let source = match spec.split_once(':') {
            Some(("header", name)) => {
                if !super::request::is_token(name) {
                    return Err(ExtractError::Header {
                        var: var.into(),
                        spec: spec.into(),
                        name: name.into(),
                    });
                }
                Source::Header(name.into())
            }
            Some(("json", pointer)) if pointer.is_empty() || pointer.starts_with('/') => {
                Source::Json(pointer.into())
            }
            Some(("json", _)) => {
                return Err(ExtractError::Pointer {
                    var: var.into(),
                    spec: spec.into(),
                });
            }
            Some(("regex", pattern)) => {
                Source::Regex(regex::bytes::Regex::new(pattern).map_err(|e| {
                    ExtractError::Regex {
                        var: var.into(),
                        spec: spec.into(),
                        why: e
                            .to_string()
                            .lines()
                            .last()
                            .unwrap_or("not a regular expression")
                            .trim()
                            .to_string(),
                    }
                })?)
            }
            _ => {
                return Err(ExtractError::Kind {
                    var: var.into(),
                    spec: spec.into(),
                });
            }
        };
        Ok(Extraction {
            var: var.into(),
            source,
        })
    }

    pub fn var(&self) -> &str {
        &self.var
    }

    /// The spec as written, to send and echo.
    pub fn spec(&self) -> String {
        match &self.source {
            Source::Header(name) => format!("header:{name}"),
            Source::Json(pointer) => format!("json:{pointer}"),
            Source::Regex(re) => format!("regex:{}", re.as_str()),
        }
    }

    /// The value in a reply, or `None` where it has none (the setup then fails, counted as such).
    /// A JSON string is its text; any other JSON value its JSON.
    pub fn take<'a>(
        &self,
        mut headers: impl Iterator<Item = (&'a str, &'a [u8])>,
        body: &[u8],
    ) -> Option<Vec<u8>> {
        match &self.source {
            Source::Header(name) => headers
                .find(|(n, _)| n.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.to_vec()),
            Source::Json(pointer) => {
                let value: serde_json::Value = serde_json::from_slice(body).ok()?;
                match value.pointer(pointer)? {
                    serde_json::Value::String(s) => Some(s.clone().into_bytes()),
                    other => Some(other.to_string().into_bytes()),
                }
            }
            Source::Regex(re) => {
                let caps = re.captures(body)?;
                caps.get(1)
                    .or_else(|| caps.get(0))
                    .map(|m| m.as_bytes().to_vec())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADERS: [(&str, &[u8]); 2] =
        [("Content-Type", b"application/json"), ("X-Token", b"h-123")];
    const BODY: &[u8] = br#"{"token":"abc","user":{"id":7,"roles":["a","b"]},"ok":true}"#;

    fn take(var: &str, spec: &str) -> Option<String> {
        let e = Extraction::parse(var, spec).unwrap();
        e.take(HEADERS.iter().copied(), BODY)
            .map(|v| String::from_utf8(v).unwrap())
    }

    #[test]
    fn values_come_from_a_header_a_json_pointer_or_a_regex() {
        assert_eq!(take("t", "header:x-token").as_deref(), Some("h-123"));
        assert_eq!(take("t", "json:/token").as_deref(), Some("abc"));
        assert_eq!(take("id", "json:/user/id").as_deref(), Some("7"));
        assert_eq!(
            take("r", "json:/user/roles").as_deref(),
            Some(r#"["a","b"]"#)
        );
        assert_eq!(take("r", "json:/user/roles/1").as_deref(), Some("b"));
        assert_eq!(
            take("t", r#"regex:"token":"(\w+)""#).as_deref(),
            Some("abc")
        );
        assert_eq!(take("t", r"regex:\d+").as_deref(), Some("7"));
        // Absent: no such header, pointer, match; a body that is not JSON.
        assert_eq!(take("t", "header:Authorization"), None);
        assert_eq!(take("t", "json:/nope"), None);
        assert_eq!(take("t", "regex:nothing-like-this"), None);
        let e = Extraction::parse("t", "json:/token").unwrap();
        assert_eq!(e.take(std::iter::empty(), b"<html>"), None);
        assert_eq!(e.spec(), "json:/token");
        assert_eq!(e.var(), "t");
    }

    #[test]
    fn a_bad_extraction_is_refused_in_words() {
        let e = |var: &str, spec: &str| Extraction::parse(var, spec).unwrap_err().to_string();
        assert!(e("1t", "json:/a").contains("'1t' is not a variable name"));
        assert_eq!(
            e("t", "body:/a"),
            "t = 'body:/a': write header:NAME, json:/POINTER or regex:PATTERN"
        );
        assert!(e("t", "json:token").contains("starts with '/'"));
        assert!(e("t", "regex:(open").starts_with("t = 'regex:(open': "));
        assert!(e("t", "header:Bad Name").contains("'Bad Name' is not a header name"));
    }
}
