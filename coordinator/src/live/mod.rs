//! A run as it happens: its events (`results::events`) written to `events.ndjson` as they come, folded,
//! and with `--live ADDR` served to browsers (the page, its event stream) and to Prometheus
//! (`/metrics`). The run task hands over what it has already merged: one event a merged second and
//! one per step, never one per agent sample or request.
//!
//! The events, their fold, the rendered view and the metrics are kept behind one lock: the run task
//! takes it once an event (about once a second), each browser's task once an event to copy out what
//! it has not sent yet, and a view is rendered at most once an event, only when someone reads it.
//! `/metrics` is encoded at most once a change too, outside that lock, and every scrape until the
//! next change is served the same bytes: a scrape flood costs the run a lock taken to read a number.
//! Nothing a browser or a scraper sends reaches the run: the server answers GETs from this state.
pub mod metrics;
pub mod push;
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

pub use server::{Bound, LiveError, Route, fuzz_route, route};

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

/// The run's events as the run task sends them. Cloned into every target's output; `Feed::off` (for
/// tests of pieces) records nothing.
#[derive(Clone)]
pub struct Feed(Option<Arc<Hub>>);

/// Everything the run's events make, behind the one lock.
pub(crate) struct Hub {
    state: Mutex<State>,
    /// The last event's id, for the browsers' tasks to wait on.
    changed: tokio::sync::watch::Sender<u64>,
    /// Whether /metrics is served (`--live`): fixed for the run, so asking takes no lock.
    serving: bool,
    /// Whether anything is pushed: fixed for the run, so a `--live` run alone walks no batch.
    pushes: bool,
    /// The pushes' senders (`--prometheus-remote-write`, `--otlp`), taken at the run's end to
    /// flush them.
    pushing: Mutex<Option<push::Pushing>>,
    /// /metrics as last encoded, and the metrics' version it is of. Its own lock, held while
    /// encoding, so scrapes that come together wait for one encode rather than each doing it,
    /// and the run task, which never takes it, never waits on an encode.
    scraped: Mutex<(u64, Option<bytes::Bytes>)>,
    /// Encodes of /metrics so far (a scrape of unchanged metrics makes none).
    encodes: std::sync::atomic::AtomicU64,
}

pub(crate) struct State {
    /// Every event so far, as its stream message's data (the line of events.ndjson).
    lines: Vec<Arc<str>>,
    live: Live,
    /// The view and the page after the last event, once someone asked for them.
    view: Option<Arc<str>>,
    page: Option<bytes::Bytes>,
    metrics: Option<metrics::Metrics>,
    /// Changes made to `metrics`, so a scrape knows whether its last encode still holds.
    metrics_version: u64,
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
        Feed::with_push(serving, &push::PushSpec::default())
    }

    /// A feed whose metrics are kept when `serving` or pushing, and pushed to `push`'s endpoints
    /// (their senders started on the current runtime).
    pub fn with_push(serving: bool, push: &push::PushSpec) -> Feed {
        let pushing = push::Pushing::start(push);
        let pushes = pushing.is_some();
        let (changed, _) = tokio::sync::watch::channel(0);
        Feed(Some(Arc::new(Hub {
            state: Mutex::new(State {
                lines: Vec::new(),
                live: Live::default(),
                view: None,
                page: None,
                file_error: None,
                metrics: (serving || pushes).then(metrics::Metrics::new),
                metrics_version: 0,
                file: None,
                report: None,
            }),
            changed,
            serving,
            pushes,
            pushing: Mutex::new(pushing),
            scraped: Mutex::new((0, None)),
            encodes: Default::default(),
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

    /// Whether the metrics are kept (served or pushed), so a merged second's latency is worth a
    /// copy.
    pub fn keeps_metrics(&self) -> bool {
        self.0.as_ref().is_some_and(|hub| hub.serving || hub.pushes)
    }

    /// Flushes the pushes (a bounded wait, [`push::FLUSH_WAIT`]) once the run is over: each
    /// endpoint's tally, for its closing line. None when nothing was pushed.
    pub async fn finish_pushes(&self) -> Vec<::push::Tally> {
        let Some(hub) = &self.0 else {
            return Vec::new();
        };
        let pushing = hub.pushing.lock().unwrap_or_else(|e| e.into_inner()).take();
        match pushing {
            Some(p) => p.finish().await,
            None => Vec::new(),
        }
    }

    pub fn emit(&self, event: Event) {
        self.emit_with(event, |_| {});
    }

    /// One merged second, with its merged latency for /metrics.
    pub fn interval(&self, target: usize, interval: Interval, latency: Option<&Histogram<u64>>) {
        let step = interval.step;
        self.emit_with(Event::Interval { target, interval }, |m| {
            if let Some(h) = latency {
                m.add_latency(target, step, h);
            }
        });
    }

    /// A written step's whole merged latency, for /metrics (before its `Step` event).
    pub fn step_latency(&self, target: usize, step: u32, latency: &Histogram<u64>) {
        let Some(hub) = &self.0 else { return };
        let mut state = hub.lock();
        if let Some(m) = state.metrics.as_mut() {
            m.set_step_latency(target, step, latency);
            state.metrics_version += 1;
        }
    }

    /// A written step's latency per named request, in the plan's order, for /metrics (before its
    /// `Step` event, which names them).
    pub fn names_latency(&self, target: usize, step: u32, names: &[shared::metrics::NameStats]) {
        let Some(hub) = &self.0 else { return };
        if names.is_empty() {
            return;
        }
        let mut state = hub.lock();
        if let Some(m) = state.metrics.as_mut() {
            m.set_names_latency(target, step, names.iter().map(|n| &n.latency));
            state.metrics_version += 1;
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
        // A merged second, a written step and the run's end are pushed.
        let pushed = hub.pushes
            && matches!(
                event,
                Event::Interval { .. } | Event::Step { .. } | Event::Finished { .. }
            );
        let mut push = None;
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
                state.metrics_version += 1;
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
            if pushed && let Some(m) = metrics.as_ref() {
                push = Some((m.snapshot(), push::resource(live)));
            }
            id
        };
        hub.changed.send_replace(id);
        if let Some((metrics, resource)) = push {
            // Walked outside the events' lock; the senders never wait.
            let mut pushing = hub.pushing.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(p) = pushing.as_mut() {
                let batch = ::push::Batch {
                    at_ms: p.next_ms(),
                    start_ms: p.start_ms(),
                    resource,
                    families: metrics.families(),
                };
                p.send(batch);
            }
        }
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

    /// /metrics as it stands: the last encode's bytes while the metrics have not changed since,
    /// else encoded now, from a snapshot taken under the lock and encoded after it is let go.
    pub(crate) fn metrics(&self) -> Option<bytes::Bytes> {
        if !self.serving {
            return None;
        }
        let mut scraped = self.scraped.lock().unwrap_or_else(|e| e.into_inner());
        let (version, snapshot) = {
            let state = self.lock();
            let version = state.metrics_version;
            if scraped.0 == version
                && let Some(body) = &scraped.1
            {
                return Some(body.clone());
            }
            (version, state.metrics.as_ref()?.snapshot())
        };
        let body = bytes::Bytes::from(snapshot.encode());
        self.encodes
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        *scraped = (version, Some(body.clone()));
        Some(body)
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

    /// The page's addresses to open, with its token when one is asked: the bound address, or for
    /// an unspecified one (`0.0.0.0`, `[::]`) loopback first, then this host's own addresses,
    /// since the unspecified address itself is not one a browser can open.
    pub fn urls(&self) -> Vec<String> {
        open_at(self.bound.addr, &host_addrs())
            .into_iter()
            .map(|addr| match &self.token {
                Some(t) => format!("http://{addr}/?token={t}"),
                None => format!("http://{addr}/"),
            })
            .collect()
    }

    /// The first of [`Server::urls`]: the one to open on this host.
    pub fn url(&self) -> String {
        self.urls().swap_remove(0)
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

/// A finished run's live page, kept up for `--live-keep` after the run's table and answer are printed:
/// a person at the terminal has them at once, whatever the page does.
pub struct Lingering {
    server: Server,
    stop: CancellationToken,
    quiet: bool,
}

impl Lingering {
    pub fn new(server: Server, stop: CancellationToken, quiet: bool) -> Lingering {
        Lingering {
            server,
            stop,
            quiet,
        }
    }

    /// Serves the finished run for `--live-keep` (or until Ctrl-C), then stops.
    pub async fn wait(self) {
        self.server.linger(&self.stop, self.quiet, true).await;
    }
}

/// Where a browser can reach a server bound to `bound`: itself, or for an unspecified address the
/// loopback of its family and then each of `host`'s addresses of that family that another machine
/// could use (not loopback, not link-local, which needs an interface named beside it).
fn open_at(bound: SocketAddr, host: &[std::net::IpAddr]) -> Vec<SocketAddr> {
    use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
    let ip = bound.ip();
    if !ip.is_unspecified() {
        return vec![bound];
    }
    let loopback = match ip {
        IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::LOCALHOST),
    };
    let mut out = vec![SocketAddr::new(loopback, bound.port())];
    for &a in host {
        let usable = match a {
            IpAddr::V4(v4) => {
                ip.is_ipv4() && !v4.is_loopback() && !v4.is_unspecified() && !v4.is_link_local()
            }
            IpAddr::V6(v6) => {
                ip.is_ipv6()
                    && !v6.is_loopback()
                    && !v6.is_unspecified()
                    && !v6.is_unicast_link_local()
            }
        };
        let at = SocketAddr::new(a, bound.port());
        if usable && !out.contains(&at) {
            out.push(at);
        }
    }
    out
}

/// This host's interface addresses (getifaddrs(3)); none if they cannot be read.
fn host_addrs() -> Vec<std::net::IpAddr> {
    use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
    let mut out = Vec::new();
    let mut list: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs(3) sets `list` to a list of its own, walked read-only below and freed once.
    if unsafe { libc::getifaddrs(&mut list) } != 0 {
        return out;
    }
    let mut node = list;
    while !node.is_null() {
        // SAFETY: `node` is a node of the list getifaddrs returned, not freed yet; an address's
        // family says which sockaddr it is, so each cast reads a structure of that type.
        unsafe {
            let ifa = &*node;
            if !ifa.ifa_addr.is_null() {
                match i32::from((*ifa.ifa_addr).sa_family) {
                    libc::AF_INET => {
                        let sin = &*(ifa.ifa_addr as *const libc::sockaddr_in);
                        out.push(IpAddr::V4(Ipv4Addr::from(u32::from_be(
                            sin.sin_addr.s_addr,
                        ))));
                    }
                    libc::AF_INET6 => {
                        let sin6 = &*(ifa.ifa_addr as *const libc::sockaddr_in6);
                        out.push(IpAddr::V6(Ipv6Addr::from(sin6.sin6_addr.s6_addr)));
                    }
                    _ => {}
                }
            }
            node = ifa.ifa_next;
        }
    }
    // SAFETY: the list getifaddrs returned, freed once, nothing of it kept.
    unsafe { libc::freeifaddrs(list) };
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::IpAddr;
    use std::sync::atomic::Ordering;

    #[test]
    fn a_scrape_of_unchanged_metrics_is_the_last_encode_s_bytes() {
        let feed = Feed::new(true);
        let hub = feed.hub().unwrap().clone();
        let first = hub.metrics().unwrap();
        for _ in 0..100 {
            assert_eq!(
                hub.metrics().unwrap(),
                first,
                "byte-identical until a change"
            );
        }
        assert_eq!(
            hub.encodes.load(Ordering::Relaxed),
            1,
            "one encode for 101 scrapes"
        );
        // A merged second's latency (as the run task hands it over) is a change: encoded again,
        // once.
        let mut h = Histogram::<u64>::new(3).unwrap();
        h.record(1_000).unwrap();
        feed.step_latency(0, 1, &h);
        hub.metrics().unwrap();
        hub.metrics().unwrap();
        assert_eq!(hub.encodes.load(Ordering::Relaxed), 2);
        assert!(Feed::new(false).hub().unwrap().metrics().is_none());
    }

    #[test]
    fn an_unspecified_address_is_opened_on_loopback_and_the_host_s_addresses() {
        let host: Vec<IpAddr> = [
            "127.0.0.1",
            "192.168.1.5",
            "fe80::1",
            "2001:db8::5",
            "10.0.0.2",
        ]
        .iter()
        .map(|a| a.parse().unwrap())
        .collect();
        let open = |a: &str| -> Vec<String> {
            open_at(a.parse().unwrap(), &host)
                .iter()
                .map(|a| a.to_string())
                .collect()
        };
        assert_eq!(
            open("0.0.0.0:5665"),
            ["127.0.0.1:5665", "192.168.1.5:5665", "10.0.0.2:5665"]
        );
        assert_eq!(open("[::]:5665"), ["[::1]:5665", "[2001:db8::5]:5665"]);
        assert_eq!(open("192.168.1.5:1"), ["192.168.1.5:1"]);
        assert!(
            open_at("0.0.0.0:1".parse().unwrap(), &host_addrs())[0]
                .ip()
                .is_loopback()
        );
    }
}
