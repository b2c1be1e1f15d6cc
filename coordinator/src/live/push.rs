//! The run's metrics pushed as it happens (`--prometheus-remote-write`, `--otlp`): every merged second and
//! every written step (and the run's end), the families `/metrics` serves from the same walk
//! ([`super::metrics::Metrics::families`]), with the run as the resource. The run task only
//! hands a batch to each endpoint's sender, which never waits (`push::Sender`); the walk is made
//! outside the events' lock, and the encoding in the sender's own task.
use std::sync::Arc;
use std::time::Duration;

use push::{Batch, Endpoint, Format, Options, Resource, Sender, Tally};
use results::events::Live;

/// How long the run's end waits for what is still queued to be sent.
pub const FLUSH_WAIT: Duration = Duration::from_secs(5);

/// One endpoint and the format it takes.
#[derive(Clone)]
pub struct PushTo {
    pub endpoint: Endpoint,
    pub format: Arc<dyn Format>,
}

impl PushTo {
    pub fn new(endpoint: Endpoint, format: impl Format) -> PushTo {
        PushTo {
            endpoint,
            format: Arc::new(format),
        }
    }
}

impl std::fmt::Debug for PushTo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} to {}", self.format.name(), self.endpoint.url())
    }
}

/// Where a run pushes (none: it does not).
#[derive(Debug, Clone, Default)]
pub struct PushSpec {
    pub to: Vec<PushTo>,
}

/// The running senders of a run, the run's start and the last batch's moment.
pub(crate) struct Pushing {
    senders: Vec<Sender>,
    /// When the senders started, with the run (before its begin event): what its counters count
    /// from.
    start_ms: i64,
    last_ms: i64,
}

impl Pushing {
    /// Starts a sender per endpoint (on the current runtime); `None` without any.
    pub(crate) fn start(spec: &PushSpec) -> Option<Pushing> {
        if spec.to.is_empty() {
            return None;
        }
        let senders = spec
            .to
            .iter()
            .map(|t| Sender::start(t.endpoint.clone(), t.format.clone(), Options::default()))
            .collect();
        Some(Pushing {
            senders,
            start_ms: unix_ms(),
            last_ms: 0,
        })
    }

    /// The next batch's moment: now, and always after the last one's (a sample of a series at the
    /// same millisecond twice is refused by Prometheus).
    pub(crate) fn next_ms(&mut self) -> i64 {
        self.last_ms = unix_ms().max(self.last_ms + 1);
        self.last_ms
    }

    /// The run's start, for each batch (`Batch::start_ms`).
    pub(crate) fn start_ms(&self) -> i64 {
        self.start_ms
    }

    /// Hands the batch to every sender, never waiting.
    pub(crate) fn send(&self, batch: Batch) {
        let batch = Arc::new(batch);
        for s in &self.senders {
            s.send(batch.clone());
        }
    }

    /// Sends what is queued, waiting [`FLUSH_WAIT`] at most in all: each sender's tally.
    pub(crate) async fn finish(self) -> Vec<Tally> {
        let until = tokio::time::Instant::now() + FLUSH_WAIT;
        let mut out = Vec::with_capacity(self.senders.len());
        for s in self.senders {
            let left = until.saturating_duration_since(tokio::time::Instant::now());
            out.push(s.finish(left).await);
        }
        out
    }
}

fn unix_ms() -> i64 {
    control::session::unix_ns_now() / 1_000_000
}

/// The run as the pushed series' resource: `service.name` stampede, `stampede.run` its start
/// (RFC 3339, to the millisecond: the run's id), `stampede.url` the targets' origins (space
/// apart, side by side) and `stampede.label` a run of one target's `--label`.
pub fn resource(live: &Live) -> Resource {
    let mut attributes = vec![("service.name".to_string(), "stampede".to_string())];
    if let Some(b) = &live.begun {
        attributes.push(("stampede.run".to_string(), b.started_at.clone()));
    }
    let runs: Vec<_> = live.targets.iter().filter_map(|t| t.run.as_ref()).collect();
    if !runs.is_empty() {
        let urls: Vec<&str> = runs.iter().map(|r| r.target.as_str()).collect();
        attributes.push(("stampede.url".to_string(), urls.join(" ")));
    }
    if let [run] = runs.as_slice()
        && let Some(label) = &run.label
    {
        attributes.push(("stampede.label".to_string(), label.clone()));
    }
    Resource { attributes }
}
