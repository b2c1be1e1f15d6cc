//! A run as it happens: its events (`results::events`) written to `events.ndjson` as they come, folded,
//! and with `--live ADDR` served to browsers (the page, its event stream) and to Prometheus
//! (`/metrics`). The run task hands over what it has already merged: one event a merged second and
//! one per step, never one per agent sample or request.
//!
//! The events, their fold, the rendered view and the metrics are kept behind one lock: the run task
//! takes it once an event (about once a second), each browser's task once an event to copy out what
//! it has not sent yet, and a view is rendered at most once an event, only when someone reads it.
//! Nothing a browser or a scraper sends reaches the run: the server answers GETs from this state.
pub mod metrics;
mod server;

use std::fs::File;
use std::io::{self, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use hdrhistogram::Histogram;
use results::events::{Event, Interval, Line, Live};
use results::run_file::RunFile;
use tokio_util::sync::CancellationToken;

pub use server::{Bound, LiveError};

/// The file the events go to, beside run.json (side by side: beside the targets' directories).
pub const EVENTS_FILE: &str = "events.ndjson";
/// The finished run's page, drawn from events.ndjson alone.
pub const PAGE_FILE: &str = "live.html";

/// The live page's own token, made from the fleet's: whoever has it can read the run, never
/// command an agent or join the fleet (HMAC-SHA256 of a fixed label under the fleet's token; 32 hex
/// characters).
pub fn view_token(fleet: &str) -> String {
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, fleet.as_bytes());
    let tag = ring::hmac::sign(&key, b"stampede live page");
    tag.as_ref()[..16]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// What `--live` asked for, checked.
#[derive(Debug, Clone)]
pub struct LiveSpec {
    pub addr: SocketAddr,
    /// How long the page and /metrics stay served once the run has ended.
    pub keep: Duration,
    /// A finished run drawn underneath (`--baseline DIR`), read before any load.
    pub baseline: Option<Box<RunFile>>,
    /// Asked of every request when set (`?token=` or `Authorization: Bearer`): the page's token,
    /// [`view_token`] of the fleet's.
    pub token: Option<String>,
}

/// The run's events as the run task sends them. Cloned into every lane's output; `Feed::off` (for
/// tests of pieces) records nothing.
#[derive(Clone)]
pub struct Feed(Option<Arc<Hub>>);

/// Everything the run's events make, behind the one lock.
pub(crate) struct Hub {
    state: Mutex<State>,
    /// The last event's id, for the browsers' tasks to wait on.
    changed: tokio::sync::watch::Sender<u64>,
    /// Whether /metrics is kept (`--live`): fixed for the run, so asking takes no lock.
    serving: bool,
}

pub(crate) struct State {
    /// Every event so far, as its stream message's data (the line of events.ndjson).
    lines: Vec<Arc<str>>,
    live: Live,
    /// The view and the page after the last event, once someone asked for them.
    view: Option<Arc<str>>,
    page: Option<bytes::Bytes>,
    metrics: Option<metrics::Metrics>,
    file: Option<(PathBuf, File)>,
    /// Why the file stopped being written, said when the run is over (a full disk is said once,
    /// by the run).
    file_error: Option<String>,
    /// The report's path once the run is over, for `/report.html`.
    report: Option<PathBuf>,
}

impl Feed {
    pub fn off() -> Feed {
        Feed(None)
    }

    /// A feed whose metrics are kept (for /metrics) when `serving`.
    pub fn new(serving: bool) -> Feed {
        let (changed, _) = tokio::sync::watch::channel(0);
        Feed(Some(Arc::new(Hub {
            state: Mutex::new(State {
                lines: Vec::new(),
                live: Live::default(),
                view: None,
                page: None,
                file_error: None,
                metrics: serving.then(metrics::Metrics::new),
                file: None,
                report: None,
            }),
            changed,
            serving,
        })))
    }

    /// Writes the events from here on to `dir/events.ndjson`, after those already sent.
    pub fn write_to(&self, dir: &Path) -> io::Result<()> {
        let Some(hub) = &self.0 else { return Ok(()) };
        let path = dir.join(EVENTS_FILE);
        let mut file = File::create(&path)?;
        let mut state = hub.lock();
        for line in &state.lines {
            file.write_all(line.as_bytes())?;
            file.write_all(b"\n")?;
        }
        state.file = Some((path, file));
        Ok(())
    }

    pub fn is_on(&self) -> bool {
        self.0.is_some()
    }

    /// Whether /metrics is kept, so a merged second's latency is worth a copy.
    pub fn keeps_metrics(&self) -> bool {
        self.0.as_ref().is_some_and(|hub| hub.serving)
    }

    pub fn emit(&self, event: Event) {
        self.emit_with(event, |_| {});
    }

    /// One merged second, with its merged latency for /metrics.
    pub fn interval(&self, lane: usize, interval: Interval, latency: Option<&Histogram<u64>>) {
        let step = interval.step;
        self.emit_with(Event::Interval { lane, interval }, |m| {
            if let Some(h) = latency {
                m.add_latency(lane, step, h);
            }
        });
    }

    /// A written step's whole merged latency, for /metrics (before its `Step` event).
    pub fn step_latency(&self, lane: usize, step: u32, latency: &Histogram<u64>) {
        let Some(hub) = &self.0 else { return };
        if let Some(m) = hub.lock().metrics.as_mut() {
            m.set_step_latency(lane, step, latency);
        }
    }

    /// The run is over: its report (side by side, the comparison) is `report`, beside the events.
    /// A run that ended before it began (no agent reached) has no events to end.
    /// `say` is whether the events' own write errors are still to be said (not when the run
    /// failed for its outputs: that error was said, and is the same disk's).
    pub fn finished(&self, report: Option<PathBuf>, say: bool) {
        if self
            .0
            .as_ref()
            .is_none_or(|hub| hub.lock().live.begun.is_none())
        {
            return;
        }
        let name = report
            .as_ref()
            .and_then(|p| p.file_name())
            .map(|n| n.to_string_lossy().into_owned());
        if let Some(hub) = &self.0 {
            hub.lock().report = report.clone();
        }
        self.emit(Event::Finished { report: name });
        let written = self.write_page();
        let Some(hub) = &self.0 else { return };
        let said = hub.lock().file_error.take();
        if say {
            for e in said.into_iter().chain(written.err()) {
                eprintln!("stampede: {e}");
            }
        }
    }

    /// `live.html` beside events.ndjson: the finished run's page, as a browser saw it last, without
    /// its stream. None without a whole events.ndjson to go with it.
    fn write_page(&self) -> Result<(), String> {
        let Some(hub) = &self.0 else { return Ok(()) };
        let state = hub.lock();
        let Some((path, _)) = &state.file else {
            return Ok(());
        };
        let page = report::live_page(&state.live, state.live.baseline.as_ref(), None);
        let to = path.with_file_name(PAGE_FILE);
        std::fs::write(&to, page).map_err(|e| format!("could not write {}: {e}", to.display()))
    }

    fn emit_with(&self, event: Event, also: impl FnOnce(&mut metrics::Metrics)) {
        let Some(hub) = &self.0 else { return };
        let id = {
            let mut state = hub.lock();
            let id = state.lines.len() as u64 + 1;
            let line = Line { id, event };
            let text = line.to_json();
            // Folded before it is told: what is sent is what the fold holds.
            if let Err(e) = state.live.apply(&line) {
                // Only a bug of ours: every event is made here, in order.
                eprintln!("stampede: the live view could not take event {id}: {e}");
            }
            if let Some(m) = state.metrics.as_mut() {
                also(m);
            }
            let State {
                live,
                metrics,
                file,
                lines,
                view,
                page,
                file_error,
                ..
            } = &mut *state;
            if let Some(m) = metrics.as_mut() {
                m.apply(&line, live);
            }
            if let Some((path, f)) = file.as_mut() {
                // Not synced: the events are the run's story, run.json its record; a line lost to a
                // crash is one second of a view, never a result.
                let written = f
                    .write_all(text.as_bytes())
                    .and_then(|()| f.write_all(b"\n"));
                if let Err(e) = written {
                    // No line after a cut one: the file stays readable up to where it stopped.
                    *file_error = Some(format!(
                        "{} was written up to event {} ({e}); the run went on",
                        path.display(),
                        id - 1
                    ));
                    *file = None;
                }
            }
            lines.push(text.into());
            *view = None;
            *page = None;
            id
        };
        hub.changed.send_replace(id);
    }

    pub(crate) fn hub(&self) -> Option<&Arc<Hub>> {
        self.0.as_ref()
    }
}

impl Hub {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding it leaves the state as it was between two events: still whole.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The events after `after`, and the view after the last of them (rendered now if nobody has
    /// asked since that event).
    pub(crate) fn since(&self, after: u64) -> (Vec<Arc<str>>, u64, Arc<str>) {
        let mut state = self.lock();
        let from = (after as usize).min(state.lines.len());
        let lines = state.lines[from..].to_vec();
        let last = state.lines.len() as u64;
        let view = match &state.view {
            Some(v) => v.clone(),
            None => {
                let v: Arc<str> = report::live_view(&state.live, state.live.baseline.as_ref())
                    .to_json()
                    .into();
                state.view = Some(v.clone());
                v
            }
        };
        (lines, last, view)
    }

    /// The whole page as it stands (its script follows `events`), rendered once an event.
    pub(crate) fn page(&self) -> bytes::Bytes {
        let mut state = self.lock();
        if let Some(p) = &state.page {
            return p.clone();
        }
        let p = bytes::Bytes::from(report::live_page(
            &state.live,
            state.live.baseline.as_ref(),
            Some("events"),
        ));
        state.page = Some(p.clone());
        p
    }

    pub(crate) fn metrics(&self) -> Option<String> {
        self.lock().metrics.as_ref().map(metrics::Metrics::encode)
    }

    pub(crate) fn report(&self) -> Option<PathBuf> {
        let state = self.lock();
        state.live.finished.then(|| state.report.clone()).flatten()
    }

    pub(crate) fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.changed.subscribe()
    }
}

/// The live server of a run: bound before any load, serving until the run is over and `keep` has
/// passed (or `stop` is cancelled).
pub struct Server {
    bound: Bound,
    feed: Feed,
    keep: Duration,
    token: Option<String>,
}

impl Server {
    /// Binds `spec.addr` (a port in use is the user's to fix: exit 2) and starts serving `feed`.
    pub async fn start(spec: &LiveSpec, feed: &Feed) -> Result<Server, LiveError> {
        let hub = feed.hub().cloned().ok_or(LiveError::NoFeed)?;
        let bound = server::bind(spec.addr, spec.token.clone(), hub).await?;
        Ok(Server {
            bound,
            feed: feed.clone(),
            keep: spec.keep,
            token: spec.token.clone(),
        })
    }

    /// The page's address, with its token when one is asked.
    pub fn url(&self) -> String {
        match &self.token {
            Some(t) => format!("http://{}/?token={t}", self.bound.addr),
            None => format!("http://{}/", self.bound.addr),
        }
    }

    /// Keeps serving the finished run for `keep` (when `stay`; or until `stop`), then stops.
    pub async fn linger(self, stop: &CancellationToken, quiet: bool, stay: bool) {
        if stay && !self.keep.is_zero() && self.feed.is_on() {
            if !quiet {
                eprintln!(
                    "stampede: the live page stays at {} for {} (Ctrl-C ends it)",
                    self.url(),
                    crate::progress::span(self.keep)
                );
            }
            tokio::select! {
                () = tokio::time::sleep(self.keep) => {}
                () = stop.cancelled() => {}
            }
        }
        self.bound.stop().await;
    }
}
