//! One request as the user wrote it (method, URL, headers, body), checked so it cannot desynchronise
//! a connection, and the `Name: value` header parser.
use super::{PlanError, Url};

/// One request to send, as the user wrote it; the agent turns it into wire bytes once.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestSpec {
    method: String,
    url: Url,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl RequestSpec {
    /// The method, in upper case.
    pub fn method(&self) -> &str {
        &self.method
    }

    pub fn url(&self) -> &Url {
        &self.url
    }

    /// The user's headers, as given.
    pub fn headers(&self) -> &[(String, String)] {
        &self.headers
    }

    pub fn body(&self) -> &[u8] {
        &self.body
    }

    /// Whether the server closes a connection after this request when it is the connection's last:
    /// the agent then sends `Connection: close` itself, unless the user set a Connection header, in
    /// which case only a `close` of theirs does it. The side that closes first keeps the TIME_WAIT.
    pub fn server_closes_last(&self) -> bool {
        let mut theirs = self
            .headers
            .iter()
            .filter(|(name, _)| name.eq_ignore_ascii_case("connection"))
            .peekable();
        theirs.peek().is_none()
            || theirs.any(|(_, v)| v.split(',').any(|t| t.trim().eq_ignore_ascii_case("close")))
    }
}

/// Whether `text` is an HTTP token (RFC 9110): what a method and a header's name are made of.
pub fn is_token(text: &str) -> bool {
    !text.is_empty()
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

impl RequestSpec {
    pub fn try_new(
        method: &str,
        url: &str,
        headers: Vec<(String, String)>,
        body: Vec<u8>,
    ) -> Result<Self, PlanError> {
        if !is_token(method) {
            return Err(PlanError::BadMethod(method.to_string()));
        }
        for (name, value) in &headers {
            if !is_token(name) || value.bytes().any(|b| b == b'\r' || b == b'\n' || b == 0) {
                return Err(PlanError::BadHeader(format!("{name}: {value}")));
            }
            // The agent sends the body as it is: a length or an encoding of the user's that says
            // otherwise would desynchronise the connection (the server reads past or short of it).
            if name.eq_ignore_ascii_case("content-length")
                && value.trim().parse::<usize>().ok() != Some(body.len())
            {
                return Err(PlanError::ContentLength {
                    declared: value.clone(),
                    actual: body.len(),
                });
            }
            if name.eq_ignore_ascii_case("transfer-encoding") {
                return Err(PlanError::TransferEncoding(value.clone()));
            }
        }
        Ok(RequestSpec {
            method: method.to_ascii_uppercase(),
            url: Url::parse(url)?,
            headers,
            body,
        })
    }
}

/// Parses a `Name: value` header argument.
pub fn parse_header(arg: &str) -> Result<(String, String), PlanError> {
    let (name, value) = arg
        .split_once(':')
        .ok_or_else(|| PlanError::BadHeader(arg.to_string()))?;
    let name = name.trim();
    if name.is_empty() {
        return Err(PlanError::BadHeader(arg.to_string()));
    }
    Ok((name.to_string(), value.trim().to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_content_length_overriding_the_body_length_is_refused() {
        let spec = |h: &str, body: &[u8]| {
            RequestSpec::try_new(
                "POST",
                "http://127.0.0.1:9/",
                vec![parse_header(h).unwrap()],
                body.to_vec(),
            )
        };
        assert_eq!(
            spec("Content-Length: 99", b"1234567")
                .unwrap_err()
                .to_string(),
            "header 'Content-Length: 99' does not match the body's 7 bytes: leave it out, stampede sets it from the body"
        );
        assert!(matches!(
            spec("content-length: x", b""),
            Err(PlanError::ContentLength { .. })
        ));
        // One that tells the truth is harmless: the agent then adds none of its own.
        assert!(spec("Content-Length: 7", b"1234567").is_ok());
        assert_eq!(
            spec("Transfer-Encoding: chunked", b"hello").unwrap_err(),
            PlanError::TransferEncoding("chunked".into())
        );
    }

    #[test]
    fn headers_and_methods_are_checked() {
        assert_eq!(
            parse_header("X-A: b c").unwrap(),
            ("X-A".into(), "b c".into())
        );
        assert!(parse_header("nocolon").is_err());
        assert!(RequestSpec::try_new("GE T", "http://h/", vec![], vec![]).is_err());
        assert!(
            RequestSpec::try_new(
                "GET",
                "http://h/",
                vec![("X".into(), "a\r\nB: c".into())],
                vec![]
            )
            .is_err()
        );
    }

    #[test]
    fn who_closes_a_connections_model_connection() {
        let spec = |headers: &[(&str, &str)]| {
            let headers = headers
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            RequestSpec::try_new("GET", "http://h/", headers, Vec::new()).unwrap()
        };
        assert!(spec(&[]).server_closes_last());
        assert!(spec(&[("X-A", "b")]).server_closes_last());
        assert!(spec(&[("connection", "Close")]).server_closes_last());
        assert!(spec(&[("Connection", "upgrade, close")]).server_closes_last());
        assert!(!spec(&[("Connection", "keep-alive")]).server_closes_last());
    }
}
