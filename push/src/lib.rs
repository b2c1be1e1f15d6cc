//! A run's metrics pushed where ops already look: Prometheus remote write and OTLP over HTTP. The
//! input is [`series::Batch`], the same families, names and labels `/metrics` serves (the coordinator
//! builds both from one walk of its metrics); each [`Format`] turns a batch into one request body.
//! Nothing here knows a run: no coordinator, no results.
pub mod otlp;
pub mod remote_write;
pub mod sender;
pub mod series;

pub use otlp::Otlp;
pub use remote_write::RemoteWrite;
pub use sender::{Dropped, Endpoint, Options, PushError, Sender, Tally};
pub use series::{Batch, Family, Kind, Resource, Series, Value};

/// One wire format a batch is pushed in (`--prometheus-remote-write`, `--otlp`).
pub trait Format: Send + Sync + 'static {
    /// For the one line that says what was dropped ("remote write", "OTLP").
    fn name(&self) -> &'static str;
    /// The request's headers beside the body (Content-Type first).
    fn headers(&self) -> &'static [(&'static str, &'static str)];
    /// One batch as one request body.
    fn encode(&self, batch: &Batch) -> Vec<u8>;
}
