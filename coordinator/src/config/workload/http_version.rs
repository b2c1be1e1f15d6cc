//! Which HTTP a target is spoken in and how many requests one connection carries at once: the
//! `--http`/`--http2`/`--streams` settings against what the target's scheme says (`h2c://` and
//! `h2://` name HTTP/2), resolved once per target so two targets of a run may differ, and every
//! contradiction refused naming the target.
use shared::plan::{HttpVersion, MAX_STREAMS, Scheme, Url, http2_spelling};

/// A target's protocol settings that cannot hold; exit code 2 like every configuration error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HttpVersionError {
    #[error(
        "{target} is HTTP/2 by its scheme, but --http 1.1 (the flag or the plan file's http) asks for HTTP/1.1: leave --http out, or write the target {plain}"
    )]
    SchemeAgainstHttp1 { target: String, plain: String },
    #[error(
        "--streams {streams} needs HTTP/2, but {target} is HTTP/1.1{why}, one request at a time per connection: write it {h2}, or add --http 2"
    )]
    StreamsOverHttp1 {
        streams: u32,
        target: String,
        /// Why it is HTTP/1.1 when that is not the default's doing.
        why: &'static str,
        h2: String,
    },
    #[error(
        "the URLs of --urls mix h2c:// or h2:// with http:// or https://: they share one target's connections, so one protocol; write them all one way, or give --http"
    )]
    MixedSchemes,
}

/// A URL as written, in the http(s) spelling the plan and the agents take, and whether its scheme
/// named HTTP/2.
pub fn transport(url: &str) -> (String, bool) {
    match http2_spelling(url) {
        Some(plain) => (plain, true),
        None => (url.to_string(), false),
    }
}

/// Whether a target's URLs (one, or a `--urls` list sharing its connections) name HTTP/2 by their
/// scheme: all of them, or none.
pub fn named_by_scheme<'a>(
    mut urls: impl Iterator<Item = &'a str>,
) -> Result<bool, HttpVersionError> {
    let first = urls.next().is_some_and(|u| transport(u).1);
    match urls.all(|u| transport(u).1 == first) {
        true => Ok(first),
        false => Err(HttpVersionError::MixedSchemes),
    }
}

/// One target as its messages name it: its label and URL, or its URL, in the scheme it was written
/// with.
#[derive(Debug, Clone, Copy)]
pub struct Target<'a> {
    pub label: Option<&'a str>,
    /// The origin every request of the target shares, in its http(s) spelling.
    pub origin: &'a Url,
    /// Whether it was written `h2c://` or `h2://`.
    pub by_scheme: bool,
}

impl Target<'_> {
    /// The origin with `scheme` in front: `h2c`, `http`, ...
    fn spelled(&self, http2: bool) -> String {
        let scheme = match (self.origin.scheme(), http2) {
            (Scheme::Http, false) => "http",
            (Scheme::Https, false) => "https",
            (Scheme::Http, true) => "h2c",
            (Scheme::Https, true) => "h2",
        };
        format!(
            "{scheme}://{}{}",
            self.origin.authority(),
            self.origin.path()
        )
    }

    fn named(&self) -> String {
        let url = self.spelled(self.by_scheme);
        match self.label {
            Some(l) => format!("target {l} ({url})"),
            None => format!("the target {url}"),
        }
    }
}

/// A target's protocol and the streams each of its connections carries at once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    pub http: HttpVersion,
    pub streams: u32,
    /// `--streams` above 1 asked of a target that can only be HTTP/1.1, which then carries one
    /// request at a time: the run's to refuse, unless another of its targets is HTTP/2 (side by
    /// side, `h1=http://… h2=h2c://… --streams 8` is the comparison asked for).
    pub over_http1: Option<HttpVersionError>,
}

/// The protocol and streams per connection of `target`: HTTP/2 if its scheme says so (an explicit
/// `--http 1.1` then contradicts it), else `asked` (`--http`, `--http2`), HTTP/1.1 unless given.
/// More than one stream over what can only be HTTP/1.1 is worded here, where the target can be
/// named; the range of `streams` is `Workload::with_http`'s to check.
pub fn resolve(
    target: Target<'_>,
    asked: Option<HttpVersion>,
    streams: u32,
) -> Result<Resolved, HttpVersionError> {
    let http = match (target.by_scheme, asked) {
        (true, Some(HttpVersion::Http1)) => {
            return Err(HttpVersionError::SchemeAgainstHttp1 {
                target: target.named(),
                plain: target.spelled(false),
            });
        }
        (true, _) => HttpVersion::Http2,
        (false, asked) => asked.unwrap_or_default(),
    };
    let resolved = |streams, over_http1| Resolved {
        http,
        streams,
        over_http1,
    };
    // Without TLS there is no ALPN to agree HTTP/2 on: auto over TCP is HTTP/1.1.
    let why = match (http, target.origin.scheme()) {
        (HttpVersion::Http1, _) if asked.is_some() => " (--http 1.1)",
        (HttpVersion::Http1, _) => "",
        (HttpVersion::Auto, Scheme::Http) => " (--http auto negotiates over TLS only)",
        _ => return Ok(resolved(streams, None)),
    };
    if streams > 1 && streams <= MAX_STREAMS {
        let over = HttpVersionError::StreamsOverHttp1 {
            streams,
            target: target.named(),
            why,
            h2: target.spelled(true),
        };
        return Ok(resolved(1, Some(over)));
    }
    Ok(resolved(streams, None))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target<'a>(label: Option<&'a str>, origin: &'a Url, by_scheme: bool) -> Target<'a> {
        Target {
            label,
            origin,
            by_scheme,
        }
    }

    #[test]
    fn a_scheme_that_names_http2_wins_over_the_flag_but_not_over_an_explicit_http1() {
        let u = Url::parse("http://127.0.0.1:8080/x").unwrap();
        let h2c = target(Some("h2"), &u, true);
        for asked in [None, Some(HttpVersion::Http2), Some(HttpVersion::Auto)] {
            assert_eq!(
                resolve(h2c, asked, 10).map(|r| (r.http, r.streams)),
                Ok((HttpVersion::Http2, 10)),
                "{asked:?}"
            );
        }
        let e = resolve(h2c, Some(HttpVersion::Http1), 1).unwrap_err();
        assert_eq!(
            e.to_string(),
            "target h2 (h2c://127.0.0.1:8080/x) is HTTP/2 by its scheme, but --http 1.1 (the flag or the plan file's http) asks for HTTP/1.1: leave --http out, or write the target http://127.0.0.1:8080/x"
        );
        // An http:// target takes the flag, HTTP/1.1 without one.
        let plain = target(None, &u, false);
        let plain_as = |asked| resolve(plain, asked, 1).map(|r| (r.http, r.streams));
        assert_eq!(plain_as(None), Ok((HttpVersion::Http1, 1)));
        assert_eq!(
            plain_as(Some(HttpVersion::Auto)),
            Ok((HttpVersion::Auto, 1))
        );
    }

    #[test]
    fn streams_over_what_can_only_be_http1_are_refused_naming_the_target_and_the_fix() {
        let u = Url::parse("http://127.0.0.1:8080/").unwrap();
        // The words of the refusal the run makes of it, and the one stream such a target carries.
        let over = |t, asked, streams| {
            let r = resolve(t, asked, streams).unwrap();
            assert_eq!(r.streams, 1, "an HTTP/1.1 target carries one at a time");
            r.over_http1.expect("streams over HTTP/1.1")
        };
        let e = over(target(Some("h1"), &u, false), None, 4);
        assert_eq!(
            e.to_string(),
            "--streams 4 needs HTTP/2, but target h1 (http://127.0.0.1:8080/) is HTTP/1.1, one request at a time per connection: write it h2c://127.0.0.1:8080/, or add --http 2"
        );
        let e = over(target(None, &u, false), Some(HttpVersion::Http1), 2);
        assert!(
            e.to_string()
                .contains("the target http://127.0.0.1:8080/ is HTTP/1.1 (--http 1.1)"),
            "{e}"
        );
        let e = over(target(None, &u, false), Some(HttpVersion::Auto), 2);
        assert!(e.to_string().contains("negotiates over TLS only"), "{e}");
        // Over TLS, auto may agree on h2: its streams are the agent's to use when it does.
        let tls = Url::parse("https://example.test/").unwrap();
        assert_eq!(
            resolve(target(None, &tls, false), Some(HttpVersion::Auto), 8),
            Ok(Resolved {
                http: HttpVersion::Auto,
                streams: 8,
                over_http1: None
            })
        );
        let e = over(target(None, &tls, false), None, 8);
        assert!(
            e.to_string().contains("write it h2://example.test:443/"),
            "{e}"
        );
        // Out of range is the workload's to say, whatever the protocol.
        assert_eq!(
            resolve(target(None, &u, false), None, 0),
            Ok(Resolved {
                http: HttpVersion::Http1,
                streams: 0,
                over_http1: None
            })
        );
    }

    #[test]
    fn a_target_names_its_protocol_by_all_its_urls_or_none() {
        let list = |urls: &[&str]| named_by_scheme(urls.iter().copied());
        assert_eq!(list(&["h2c://h/a", "h2c://h/b"]), Ok(true));
        assert_eq!(list(&["http://h/a", "http://h/b"]), Ok(false));
        assert_eq!(
            list(&["h2c://h/a", "http://h/b"]),
            Err(HttpVersionError::MixedSchemes)
        );
        assert_eq!(transport("h2://h:1/x"), ("https://h:1/x".to_string(), true));
        assert_eq!(
            transport("http://h:1/x"),
            ("http://h:1/x".to_string(), false)
        );
    }
}
