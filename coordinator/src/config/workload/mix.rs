//! A plan file's mix of named requests (`[[request]]`): each a request on the target with its name
//! and weight, so every target of a side-by-side run gets the same mix and each name its row.
use shared::plan::{PlanError, RequestSpec, Url, parse_header};

use super::super::{ConfigError, read_file};
use crate::cli::RequestEntry;

/// The mix as requests, with their names (empty when a single request is left unnamed) and weights.
#[derive(Debug)]
pub struct Named {
    pub requests: Vec<RequestSpec>,
    pub names: Vec<String>,
    pub weights: Vec<u32>,
}

/// The requests of `entries` on `target` (its URL, in the http(s) spelling): a path is joined to its
/// origin; `method` is the run's, for an entry without its own; `common` are the headers every
/// request carries (`-H`, the plan's `headers`, `--basic-auth`), before the entry's own.
pub fn named(
    entries: &[RequestEntry],
    target: &str,
    method: &str,
    common: &[(String, String)],
) -> Result<Named, ConfigError> {
    let origin = Url::parse(target)?.origin();
    let mut out = Named {
        requests: Vec::with_capacity(entries.len()),
        names: Vec::with_capacity(entries.len()),
        weights: Vec::with_capacity(entries.len()),
    };
    let unnamed = entries.iter().position(|e| e.name.is_none());
    if let (Some(i), true) = (unnamed, entries.len() > 1) {
        return Err(PlanError::UnnamedRequest(i + 1).into());
    }
    for (i, e) in entries.iter().enumerate() {
        let which = || match &e.name {
            Some(n) => format!("request '{n}'"),
            None => format!("request {}", i + 1),
        };
        let url = if e.url.starts_with('/') {
            format!("{origin}{}", e.url)
        } else {
            let theirs = Url::parse(&e.url)
                .map_err(|err| ConfigError::Value(format!("{}: {err}", which())))?
                .origin();
            if theirs != origin {
                return Err(ConfigError::Value(format!(
                    "{}: {} is not on the target {origin}: write its path (it is sent to every target)",
                    which(),
                    e.url
                )));
            }
            e.url.clone()
        };
        let mut headers = common.to_vec();
        for h in &e.headers {
            headers.push(parse_header(h)?);
        }
        let body = match (&e.body, &e.body_file) {
            (Some(_), Some(_)) => {
                return Err(ConfigError::Conflict(format!(
                    "{} gives body and body_file: give one",
                    which()
                )));
            }
            (Some(b), None) => b.clone().into_bytes(),
            (None, Some(p)) => read_file("body file", p)?,
            (None, None) => Vec::new(),
        };
        let spec = RequestSpec::try_new(e.method.as_deref().unwrap_or(method), &url, headers, body)
            .map_err(|err| ConfigError::Value(format!("{}: {err}", which())))?;
        out.requests.push(spec);
        out.weights.push(e.weight.unwrap_or(1));
        if let Some(n) = &e.name {
            out.names.push(n.clone());
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(name: &str, url: &str) -> RequestEntry {
        RequestEntry {
            name: Some(name.into()),
            url: url.into(),
            ..RequestEntry::default()
        }
    }

    #[test]
    fn paths_join_the_target_and_every_request_keeps_its_name_and_weight() {
        let mut login = entry("login", "/login");
        login.method = Some("post".into());
        login.body = Some("{}".into());
        login.headers = vec!["Content-Type: application/json".into()];
        let mut items = entry("items", "http://127.0.0.1:8080/items?page=2");
        items.weight = Some(5);
        let common = [("X-Run".to_string(), "1".to_string())];
        let n = named(
            &[login, items],
            "http://127.0.0.1:8080/ignored",
            "GET",
            &common,
        )
        .unwrap();
        assert_eq!(n.names, ["login", "items"]);
        assert_eq!(n.weights, [1, 5]);
        assert_eq!(n.requests[0].method(), "POST");
        assert_eq!(n.requests[0].url().path(), "/login");
        assert_eq!(n.requests[0].headers().len(), 2);
        assert_eq!(n.requests[0].headers()[0].0, "X-Run");
        assert_eq!(n.requests[1].method(), "GET");
        assert_eq!(n.requests[1].url().path(), "/items?page=2");
    }

    #[test]
    fn a_mix_of_several_names_each_and_a_bad_entry_says_which() {
        let two = [
            entry("a", "/a"),
            RequestEntry {
                url: "/b".into(),
                ..RequestEntry::default()
            },
        ];
        let e = named(&two, "http://h:1/", "GET", &[]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "request 2 of the mix has no name: with more than one request, name each"
        );
        let mut bad = entry("upload", "/u");
        bad.method = Some("GE T".into());
        let e = named(&[bad], "http://h:1/", "GET", &[]).unwrap_err();
        assert!(
            e.to_string().starts_with("request 'upload': bad method"),
            "{e}"
        );
        // One unnamed request is the plain case: no rows.
        let one = [RequestEntry {
            url: "/x".into(),
            ..RequestEntry::default()
        }];
        assert!(
            named(&one, "http://h:1/", "GET", &[])
                .unwrap()
                .names
                .is_empty()
        );
    }
}
