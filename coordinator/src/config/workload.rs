//! The workload: the requests (the URL or `--urls` list, method, headers, body), what every request
//! shares (timeouts, URL order, source addresses, expected statuses, TLS sessions), and each
//! target's HTTP version (`http_version`) from the positional targets (`targets`).
pub mod feeder;
pub mod http_version;
pub mod mix;
pub mod targets;
pub mod wsesslog;

use shared::plan::{
    self, HttpVersion, PlanError, RequestSpec, Workload, parse_header, parse_url_list,
};
use shared::status::StatusSet;

use super::duration::dur;
use super::{ConfigError, Settings, parse_duration, read_file};
use http_version::HttpVersionError;

/// The requests to send: the URL, each line of the --urls file, or the plan file's mix
/// (`[[request]]`, named and weighed), with the headers and body; and whether their scheme names
/// HTTP/2 (`h2c://`, `h2://`: the requests are in the http(s) spelling).
pub fn requests(s: &Settings) -> Result<(mix::Named, bool), ConfigError> {
    let args = &s.given;
    let url = args.url.clone();
    let urls_file = args.urls.clone();
    if url.is_some() && urls_file.is_some() {
        return Err(ConfigError::Conflict(
            "give a URL or --urls FILE, not both".into(),
        ));
    }
    if !args.request.is_empty() {
        for (given, what) in [
            (urls_file.is_some(), "--urls"),
            (args.body.is_some(), "--body"),
            (args.body_file.is_some(), "--body-file"),
        ] {
            if given {
                return Err(ConfigError::Conflict(format!(
                    "give the plan file's [[request]] mix or {what}, not both (a request of the mix has its own body)"
                )));
            }
        }
    }
    let method = s.method.clone();
    let mut headers = args
        .headers
        .iter()
        .map(|h| parse_header(h))
        .collect::<Result<Vec<_>, _>>()?;
    if let Some(credentials) = &args.basic_auth {
        headers.push(basic_auth(credentials, &headers)?);
    }
    let body = match (&args.body, &args.body_file) {
        (Some(b), _) => b.clone().into_bytes(),
        (None, Some(p)) => read_file("body file", p)?,
        _ => Vec::new(),
    };
    if !args.request.is_empty() {
        let Some(target) = &url else {
            return Err(ConfigError::Value(
                "the plan file's [[request]] mix needs a target: give its URL (its paths are joined to it)".into(),
            ));
        };
        let by_scheme = http_version::named_by_scheme(std::iter::once(target.as_str()))?;
        let (target, _) = http_version::transport(target);
        let named = mix::named(&args.request, &target, &s.method, &headers)?;
        return Ok((named, by_scheme));
    }
    let urls = match (&url, &urls_file) {
        (Some(u), _) => vec![(method, u.clone())],
        (None, Some(path)) => {
            let text = String::from_utf8(read_file("URL list", path)?).map_err(|_| {
                ConfigError::UrlList {
                    path: path.clone(),
                    source: plan::UrlListError {
                        line: 0,
                        why: "the file is not UTF-8 text".into(),
                    },
                }
            })?;
            parse_url_list(&text).map_err(|source| ConfigError::UrlList {
                path: path.clone(),
                source,
            })?
        }
        (None, None) => return Err(PlanError::NoRequests.into()),
    };
    let by_scheme = http_version::named_by_scheme(urls.iter().map(|(_, u)| u.as_str()))?;
    let requests = urls
        .iter()
        .map(|(m, u)| {
            let (u, _) = http_version::transport(u);
            RequestSpec::try_new(m, &u, headers.clone(), body.clone())
        })
        .collect::<Result<Vec<_>, _>>()?;
    let weights = vec![1; requests.len()];
    let named = mix::Named {
        requests,
        names: Vec::new(),
        weights,
    };
    Ok((named, by_scheme))
}

/// `--basic-auth USER:PASSWORD` as the header it is (RFC 7617): refused without its colon, and beside
/// an Authorization header of the headers given, which one of the two would silently replace.
fn basic_auth(
    credentials: &str,
    headers: &[(String, String)],
) -> Result<(String, String), ConfigError> {
    // The value is a password: no refusal repeats it.
    if !credentials.contains(':') {
        return Err(ConfigError::Value(
            "--basic-auth takes USER:PASSWORD, a colon between them (a user alone is USER:)".into(),
        ));
    }
    if headers
        .iter()
        .any(|(name, _)| name.eq_ignore_ascii_case("authorization"))
    {
        return Err(ConfigError::Conflict(
            "give --basic-auth or an Authorization header (-H or the plan file's headers), not both"
                .into(),
        ));
    }
    let encoded = base64(credentials.as_bytes());
    Ok(("Authorization".into(), format!("Basic {encoded}")))
}

/// Standard base64 with padding (RFC 4648), written out for the one header that needs it rather
/// than a dependency.
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let byte = |i: usize| u32::from(chunk.get(i).copied().unwrap_or(0));
        let n = byte(0) << 16 | byte(1) << 8 | byte(2);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[(n >> (18 - 6 * i) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// What every request of the run shares: timeouts, URL order, source addresses, expected statuses;
/// the mix's names and weights.
pub fn workload(s: &Settings, named: mix::Named) -> Result<Workload, ConfigError> {
    let mix::Named {
        requests,
        names,
        weights,
    } = named;
    let args = &s.given;
    let timeout = parse_duration("--timeout", &s.timeout.0)?;
    let connect_timeout = dur("--connect-timeout", &args.connect_timeout)?.unwrap_or(timeout);
    let source_addrs = match &args.source_addrs {
        Some(list) => plan::parse_source_addrs(&list.joined())?,
        None => Vec::new(),
    };
    let workload = Workload::try_new(
        requests,
        s.urls_order,
        timeout,
        connect_timeout,
        args.insecure,
    )?
    .with_source_addrs(source_addrs)?
    .with_tls_sessions(s.tls_sessions);
    let workload = if names.is_empty() {
        workload
    } else {
        workload.with_names(names, weights)?
    };
    Ok(workload.with_ok_status(StatusSet::parse(&s.ok_status.joined())?))
}

/// The protocol and streams per connection of the target `label` names (if any): `--http` (or
/// `--http2`) and `--streams` against what its scheme says, `by_scheme` whether it names HTTP/2;
/// with it, `--streams` asked of a target that can only be HTTP/1.1 (see `http_version::Resolved`).
pub fn http_version(
    s: &Settings,
    workload: Workload,
    by_scheme: bool,
    label: Option<&str>,
) -> Result<(Workload, Option<HttpVersionError>), ConfigError> {
    let asked = s.given.http.or(s.given.http2.then_some(HttpVersion::Http2));
    let target = http_version::Target {
        label,
        origin: workload.origin(),
        by_scheme,
    };
    let r = http_version::resolve(target, asked, s.streams)?;
    Ok((workload.with_http(r.http, r.streams)?, r.over_http1))
}

#[cfg(test)]
mod tests;
