//! The siege-style URL list file (`--urls FILE`).
use super::{RequestSpec, http2_spelling};

/// A bad line in a URL list file.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("line {line}: {why}")]
pub struct UrlListError {
    pub line: usize,
    pub why: String,
}

/// Parses a siege-style URL list: one `URL` or `METHOD URL` per line; blank lines and `#` comments
/// skipped. A URL is returned as written: an `h2c://` or `h2://` one (checked in its http(s)
/// spelling) still names its protocol to the caller.
pub fn parse_url_list(text: &str) -> Result<Vec<(String, String)>, UrlListError> {
    let mut out = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let err = |why: String| UrlListError { line: i + 1, why };
        let mut words = line.split_whitespace();
        let first = words.next().unwrap_or_default();
        let (method, url) = match words.next() {
            Some(url) => (first.to_string(), url.to_string()),
            None => ("GET".to_string(), first.to_string()),
        };
        if words.next().is_some() {
            return Err(err(format!(
                "expected 'URL' or 'METHOD URL', found '{line}'"
            )));
        }
        let checked = http2_spelling(&url).unwrap_or_else(|| url.clone());
        RequestSpec::try_new(&method, &checked, Vec::new(), Vec::new())
            .map_err(|e| err(e.to_string()))?;
        out.push((method, url));
    }
    if out.is_empty() {
        return Err(UrlListError {
            line: 0,
            why: "the file lists no URL".to_string(),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_list_names_the_bad_line() {
        let ok = parse_url_list("# c\nhttp://h/a\n\nPOST http://h/b\nh2c://h/c\n").unwrap();
        assert_eq!(
            ok,
            vec![
                ("GET".into(), "http://h/a".into()),
                ("POST".into(), "http://h/b".into()),
                ("GET".into(), "h2c://h/c".into())
            ]
        );
        let e = parse_url_list("http://h/a\nnot-a-url\n").unwrap_err();
        assert_eq!(e.line, 2);
        assert!(
            e.to_string().starts_with("line 2: bad URL 'not-a-url'"),
            "{e}"
        );
        assert_eq!(parse_url_list("GET http://h/ extra\n").unwrap_err().line, 1);
        assert!(
            parse_url_list("# nothing\n")
                .unwrap_err()
                .to_string()
                .contains("no URL")
        );
    }
}
