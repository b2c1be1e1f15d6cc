//! `--prometheus-remote-write`, `--otlp` and `--push-header`: where the run's metrics are pushed, checked
//! before any load, so a bad URL or header stops the run with exit 2 rather than being dropped.
use super::{ConfigError, Settings};
use crate::live::push::{PushSpec, PushTo};

/// The endpoints the run pushes to (none: no push), each with its format and the headers.
pub fn push(s: &Settings) -> Result<PushSpec, ConfigError> {
    let args = &s.given;
    let bad = |e: push::PushError| ConfigError::Value(format!("--prometheus-remote-write: {e}"));
    let mut to = Vec::new();
    if let Some(url) = &args.prometheus_remote_write {
        let endpoint = push::Endpoint::parse(url, &args.push_header).map_err(bad)?;
        to.push(PushTo::new(endpoint, push::RemoteWrite));
    }
    if let Some(url) = &args.otlp {
        let bad = |e: push::PushError| ConfigError::Value(format!("--otlp: {e}"));
        // The URL as given is checked first, so an error names what the user wrote.
        push::Endpoint::parse(url, &args.push_header).map_err(bad)?;
        let endpoint =
            push::Endpoint::parse(&push::otlp::metrics_url(url), &args.push_header).map_err(bad)?;
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
