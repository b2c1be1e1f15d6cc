//! An absolute http(s) URL, parsed once into what a connection and a request line need; and the
//! h2c:// and h2:// spellings of a target that name HTTP/2 as well.
use super::PlanError;

/// The schemes a target may be written with that name the protocol as well as the transport, each
/// with the http(s) scheme of its transport: HTTP/2 over TCP by prior knowledge, over TLS by ALPN.
const HTTP2_SCHEMES: [(&str, &str); 2] = [("h2c://", "http://"), ("h2://", "https://")];

/// A URL written `h2c://…` or `h2://…`, as [`Url::parse`] takes it: `http://…` or `https://…`. None
/// for any other input. The protocol is a workload's setting (`Workload::with_http`), not a URL's:
/// agents are sent the http(s) spelling and the protocol beside it.
pub fn http2_spelling(input: &str) -> Option<String> {
    HTTP2_SCHEMES
        .iter()
        .find_map(|(h2, http)| input.strip_prefix(h2).map(|rest| format!("{http}{rest}")))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    Http,
    Https,
}

/// An absolute http(s) URL, split into what a connection needs and what a request line needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Url {
    scheme: Scheme,
    host: String,
    port: u16,
    path: String,
}

impl Url {
    pub fn parse(input: &str) -> Result<Url, PlanError> {
        let bad = |why: &str| PlanError::BadUrl {
            url: input.to_string(),
            why: why.to_string(),
        };
        if input.is_empty() {
            return Err(bad("it is empty"));
        }
        if input.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(bad("it contains white space or control characters"));
        }
        let (scheme, rest) = if let Some(r) = input.strip_prefix("http://") {
            (Scheme::Http, r)
        } else if let Some(r) = input.strip_prefix("https://") {
            (Scheme::Https, r)
        } else if http2_spelling(input).is_some() {
            // Only a target names its protocol by its scheme; one that got here unmapped would lose it.
            return Err(bad(
                "h2c:// and h2:// name a target's protocol; here write http:// or https://",
            ));
        } else {
            return Err(bad("it must start with http:// or https://"));
        };
        let (authority, path) = match rest.find(['/', '?']) {
            Some(i) if rest.as_bytes()[i] == b'/' => (&rest[..i], rest[i..].to_string()),
            Some(i) => (&rest[..i], format!("/{}", &rest[i..])),
            None => (rest, "/".to_string()),
        };
        let path = match path.find('#') {
            Some(i) => path[..i].to_string(),
            None => path,
        };
        if authority.contains('@') {
            return Err(bad(
                "user information in URLs is not supported; use --basic-auth USER:PASSWORD (or -H 'Authorization: ...')",
            ));
        }
        let default_port = match scheme {
            Scheme::Http => 80,
            Scheme::Https => 443,
        };
        let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
            let end = v6
                .find(']')
                .ok_or_else(|| bad("an IPv6 host lacks its closing ']'"))?;
            let host = &v6[..end];
            let after = &v6[end + 1..];
            let port = match after.strip_prefix(':') {
                Some(p) => {
                    parse_port(p).ok_or_else(|| bad("the port is not a number from 1 to 65535"))?
                }
                None if after.is_empty() => default_port,
                None => return Err(bad("unexpected text after the IPv6 host")),
            };
            if host.parse::<std::net::Ipv6Addr>().is_err() {
                return Err(bad("the bracketed host is not an IPv6 address"));
            }
            (host.to_string(), port)
        } else {
            match authority.rsplit_once(':') {
                Some((h, p)) => (
                    h.to_string(),
                    parse_port(p).ok_or_else(|| bad("the port is not a number from 1 to 65535"))?,
                ),
                None => (authority.to_string(), default_port),
            }
        };
        if host.is_empty() {
            return Err(bad("it has no host"));
        }
        if !host.contains(':')
            && !host
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
        {
            return Err(bad("the host has characters a host name cannot have"));
        }
        Ok(Url {
            scheme,
            host,
            port,
            path,
        })
    }

    pub fn scheme(&self) -> Scheme {
        self.scheme
    }

    /// Host as written, without brackets for IPv6.
    pub fn host(&self) -> &str {
        &self.host
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// Path and query, always starting with '/'.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// scheme://host:port, the part every URL of a run must share.
    pub fn origin(&self) -> String {
        let scheme = match self.scheme {
            Scheme::Http => "http",
            Scheme::Https => "https",
        };
        format!("{scheme}://{}", self.authority())
    }

    /// host:port as it goes in a Host header (brackets for IPv6).
    pub fn authority(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

fn parse_port(p: &str) -> Option<u16> {
    if p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    p.parse::<u16>().ok().filter(|p| *p != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_parse_into_parts() {
        let u = Url::parse("http://127.0.0.1:8080/a/b?x=1").unwrap();
        assert_eq!(
            (u.host.as_str(), u.port, u.path.as_str()),
            ("127.0.0.1", 8080, "/a/b?x=1")
        );
        let u = Url::parse("https://example.test").unwrap();
        assert_eq!(
            (u.port, u.path.as_str(), u.scheme),
            (443, "/", Scheme::Https)
        );
        let u = Url::parse("http://[::1]:9/x").unwrap();
        assert_eq!(
            (u.host.as_str(), u.authority()),
            ("::1", "[::1]:9".to_string())
        );
        let u = Url::parse("http://h?q=1#frag").unwrap();
        assert_eq!(u.path, "/?q=1");
    }

    #[test]
    fn the_http2_schemes_are_spelled_by_their_transport() {
        assert_eq!(
            http2_spelling("h2c://127.0.0.1:8080/a?b").as_deref(),
            Some("http://127.0.0.1:8080/a?b")
        );
        assert_eq!(
            http2_spelling("h2://example.test").as_deref(),
            Some("https://example.test")
        );
        for other in [
            "http://h/",
            "https://h/",
            "h2",
            "h2:/h",
            "H2C://h/",
            "xh2://h/",
        ] {
            assert_eq!(http2_spelling(other), None, "{other}");
        }
        let u = Url::parse(&http2_spelling("h2://h/x").unwrap()).unwrap();
        assert_eq!((u.scheme(), u.port()), (Scheme::Https, 443));
    }

    #[test]
    fn bad_urls_say_why() {
        for (url, why) in [
            ("ftp://x/", "must start with http://"),
            ("http://", "no host"),
            ("http://h:0/", "port"),
            ("http://h:99999/", "port"),
            ("http://h:abc/", "port"),
            ("http://a b/", "white space"),
            ("http://u:p@h/", "use --basic-auth USER:PASSWORD"),
            ("http://[::1/", "closing"),
            ("http://ho$t/", "characters"),
            ("h2c://h/", "here write http://"),
        ] {
            let e = Url::parse(url).unwrap_err().to_string();
            assert!(e.contains(why), "{url}: {e}");
        }
    }
}
