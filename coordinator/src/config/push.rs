//! `--prometheus-remote-write`, `--otlp` and `--push-header`: where the run's metrics are pushed, checked
//! before any load, so a bad URL or header stops the run with exit 2 rather than being dropped.
use super::{ConfigError, Settings};
use crate::live::push::{PushSpec, PushTo};

/// The endpoints the run pushes to (none: no push), each with its format and the headers.
pub fn push(s: &Settings) -> Result<PushSpec, ConfigError> {
    let args = &s.given;
    // A header's error names --push-header, a URL's the flag it was given to.
    let bad = |url_flag: &'static str| {
        move |e: push::PushError| {
            let flag = match e {
                push::PushError::Url { .. } => url_flag,
                push::PushError::Header { .. } => "--push-header",
            };
            ConfigError::Value(format!("{flag}: {e}"))
        }
    };
    let mut to = Vec::new();
    if let Some(url) = &args.prometheus_remote_write {
        let endpoint = push::Endpoint::parse(url, &args.push_header)
            .map_err(bad("--prometheus-remote-write"))?;
        to.push(PushTo::new(endpoint, push::RemoteWrite));
    }
    if let Some(url) = &args.otlp {
        // The URL as given is checked first, so an error names what the user wrote.
        push::Endpoint::parse(url, &args.push_header).map_err(bad("--otlp"))?;
        let endpoint = push::Endpoint::parse(&push::otlp::metrics_url(url), &args.push_header)
            .map_err(bad("--otlp"))?;
        to.push(PushTo::new(endpoint, push::Otlp));
    }
    if to.is_empty() && !args.push_header.is_empty() {
        return Err(ConfigError::Conflict(
            "--push-header is sent with a push: add --prometheus-remote-write URL or --otlp URL"
                .into(),
        ));
    }
    Ok(PushSpec { to })
}
