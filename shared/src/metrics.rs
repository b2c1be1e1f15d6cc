//! What one worker, agent or fleet measured over an interval: counters, histograms and CPU time,
//! and the one lossless merge that combines them (add everything; compute statistics only afterwards).
use std::borrow::Cow;

use crate::histogram::{self, Encoded, Histogram, Sum};
use crate::status::StatusCodes;

/// httperf's error classes. The generator's own resource failures are kept apart from the target's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorClass {
    /// No complete reply within `--timeout`.
    ClientTimeout,
    /// The TCP (or TLS) connection was not established within the connect timeout.
    ConnectTimeout,
    ConnRefused,
    /// The target reset or closed the connection before a complete reply.
    ConnReset,
    /// The generator ran out of file descriptors (EMFILE/ENFILE).
    FdUnavailable,
    /// The generator ran out of local ports (EADDRNOTAVAIL).
    AddrUnavailable,
    /// Anything else: malformed replies, TLS failures, unreachable networks.
    Other,
}

impl ErrorClass {
    pub const COUNT: usize = 7;
    pub const ALL: [ErrorClass; Self::COUNT] = [
        ErrorClass::ClientTimeout,
        ErrorClass::ConnectTimeout,
        ErrorClass::ConnRefused,
        ErrorClass::ConnReset,
        ErrorClass::FdUnavailable,
        ErrorClass::AddrUnavailable,
        ErrorClass::Other,
    ];

    pub fn index(self) -> usize {
        self as usize
    }

    /// The name used in run.json and in verdict reasons.
    pub fn name(self) -> &'static str {
        match self {
            ErrorClass::ClientTimeout => "client-timeout",
            ErrorClass::ConnectTimeout => "connect-timeout",
            ErrorClass::ConnRefused => "conn-refused",
            ErrorClass::ConnReset => "conn-reset",
            ErrorClass::FdUnavailable => "fd-unavailable",
            ErrorClass::AddrUnavailable => "addr-unavailable",
            ErrorClass::Other => "other",
        }
    }

    /// The column name in steps.tsv.
    pub fn column(self) -> String {
        format!("err_{}", self.name().replace('-', "_"))
    }

    /// True when the failure is the generator's own (its fds or ports), not the target's.
    pub fn is_generator_resource(self) -> bool {
        matches!(
            self,
            ErrorClass::FdUnavailable | ErrorClass::AddrUnavailable
        )
    }

    /// Classifies an OS error number seen while connecting, sending or receiving.
    pub fn from_errno(errno: i32) -> ErrorClass {
        // Linux errno values; stampede agents run on Linux.
        const EMFILE: i32 = 24;
        const ENFILE: i32 = 23;
        const EADDRNOTAVAIL: i32 = 99;
        const ECONNREFUSED: i32 = 111;
        const ECONNRESET: i32 = 104;
        const EPIPE: i32 = 32;
        const ECONNABORTED: i32 = 103;
        const ETIMEDOUT: i32 = 110;
        match errno {
            EMFILE | ENFILE => ErrorClass::FdUnavailable,
            EADDRNOTAVAIL => ErrorClass::AddrUnavailable,
            ECONNREFUSED => ErrorClass::ConnRefused,
            ECONNRESET | EPIPE | ECONNABORTED => ErrorClass::ConnReset,
            ETIMEDOUT => ErrorClass::ConnectTimeout,
            _ => ErrorClass::Other,
        }
    }
}

/// Reply status classes, 1xx to 5xx.
pub const STATUS_CLASSES: [&str; 5] = ["1xx", "2xx", "3xx", "4xx", "5xx"];

/// Plain counts; adding two is the merge.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    /// Requests written to an established connection.
    pub requests: u64,
    /// Complete replies received, whatever their status.
    pub replies: u64,
    /// Of those, replies with an expected status (`--ok-status`): what the server really served.
    pub ok: u64,
    /// Connections established.
    pub connections: u64,
    pub bytes_in: u64,
    pub bytes_out: u64,
    pub status: [u64; 5],
    pub errors: [u64; ErrorClass::COUNT],
    /// Arrivals that found no free connection and had to wait (requests model).
    pub waited: u64,
    /// Requests that were due but never written: their connection failed, or they expired in the queue.
    pub unsent: u64,
    /// Of those, arrivals still waiting for a free connection when the step ended (requests model).
    pub dropped: u64,
    /// Due requests given up without a reply (timed out, expired in the queue, dropped at the end),
    /// which enter the latency at their age then.
    pub given_up: u64,
    /// Of the unsent, the later calls of a connection the target failed (refused, timed out, reset)
    /// or closed before them (connections model): the target's doing, however late the generator.
    pub abandoned: u64,
    /// HTTP/2: streams the server refused (RST_STREAM REFUSED_STREAM), each sent once more.
    pub refused_streams: u64,
    /// HTTP/2: sessions the server ended with GOAWAY (its keepalive_requests, a restart, an error).
    pub goaways: u64,
    /// HTTP/2: the fewest concurrent streams a server's SETTINGS allowed on any session (0: no
    /// session seen). Merged as the least, not added.
    pub peer_max_streams: u64,
    /// HTTP/2: streams the server reset (RST_STREAM) with any code but REFUSED_STREAM.
    pub stream_resets: u64,
    /// HTTP/2: bytes of the replies' header blocks (HPACK-compressed, as received) and of their
    /// bodies (DATA payload), apart.
    pub header_bytes_in: u64,
    pub body_bytes_in: u64,
    /// HTTP/2: request bodies that waited for the server's flow-control window, and how long in all
    /// (microseconds).
    pub window_stalls: u64,
    pub window_stall_us: u64,
    /// Replies that arrived after the open schedule's end, in the drain: the step's backlog then
    /// (a healthy server's is what it had in flight; a queueing one's grows with the step).
    pub drained: u64,
    /// TLS handshakes done in full (a HelloRetryRequest's too) and resumed from a session of the
    /// worker's (`--tls-sessions resume`): a resumed one costs the server far less.
    pub tls_full: u64,
    pub tls_resumed: u64,
    /// Sessions (`--wsesslog`): arrivals that began one; of those, sessions every request of which
    /// had a reply, and sessions a failed request ended (their later requests `abandoned`). The
    /// rest were cut by the step's end.
    pub sessions_started: u64,
    pub sessions_completed: u64,
    pub sessions_abandoned: u64,
    /// A plan's `[setup]`: runs on a connection (each before the connection's first request of the
    /// mix), and of those, runs that failed (no reply, a status not expected, nothing extracted), each
    /// of which left the request that waited for it unsent.
    pub setups: u64,
    pub setup_failed: u64,
}

/// How a server that sets no stream limit is recorded in `Counters::peer_max_streams`: above any
/// limit SETTINGS can carry (2^31 - 1).
pub const UNLIMITED_STREAMS: u64 = u32::MAX as u64;

/// The lesser of two limits where 0 means none seen.
fn least_seen(a: u64, b: u64) -> u64 {
    match (a, b) {
        (0, n) | (n, 0) => n,
        (a, b) => a.min(b),
    }
}

impl Counters {
    pub fn add(&mut self, o: &Counters) {
        self.requests += o.requests;
        self.replies += o.replies;
        self.ok += o.ok;
        self.connections += o.connections;
        self.bytes_in += o.bytes_in;
        self.bytes_out += o.bytes_out;
        for (a, b) in self.status.iter_mut().zip(o.status) {
            *a += b;
        }
        for (a, b) in self.errors.iter_mut().zip(o.errors) {
            *a += b;
        }
        self.waited += o.waited;
        self.unsent += o.unsent;
        self.dropped += o.dropped;
        self.given_up += o.given_up;
        self.abandoned += o.abandoned;
        self.refused_streams += o.refused_streams;
        self.goaways += o.goaways;
        self.stream_resets += o.stream_resets;
        self.header_bytes_in += o.header_bytes_in;
        self.body_bytes_in += o.body_bytes_in;
        self.window_stalls += o.window_stalls;
        self.window_stall_us += o.window_stall_us;
        self.drained += o.drained;
        self.tls_full += o.tls_full;
        self.tls_resumed += o.tls_resumed;
        self.sessions_started += o.sessions_started;
        self.sessions_completed += o.sessions_completed;
        self.sessions_abandoned += o.sessions_abandoned;
        self.setups += o.setups;
        self.setup_failed += o.setup_failed;
        self.peer_max_streams = least_seen(self.peer_max_streams, o.peer_max_streams);
    }

    /// Notes a server's stream limit as a session sees it.
    pub fn saw_peer_max_streams(&mut self, n: u64) {
        self.peer_max_streams = least_seen(self.peer_max_streams, n);
    }

    pub fn error(&self, class: ErrorClass) -> u64 {
        self.errors[class.index()]
    }

    pub fn record_error(&mut self, class: ErrorClass) {
        self.errors[class.index()] += 1;
    }

    /// Counts a reply's status code into its class; codes outside 100..=599 count as `other` errors.
    pub fn record_status(&mut self, code: u16) {
        match code {
            crate::status::LOWEST..=crate::status::HIGHEST => {
                self.status[usize::from(code / 100 - 1)] += 1
            }
            _ => self.record_error(ErrorClass::Other),
        }
    }

    pub fn errors_total(&self) -> u64 {
        self.errors.iter().sum()
    }

    /// Attempts: requests sent plus requests that were due but could not be sent. In the open models
    /// every arrival the schedule held is one or the other (`num_call` each in the connections model).
    pub fn attempts(&self) -> u64 {
        self.requests + self.unsent
    }

    /// Errors that were the generator's own (its fds or ports): each one a due request it failed to
    /// make, none of them the target's doing.
    pub fn generator_errors(&self) -> u64 {
        ErrorClass::ALL
            .iter()
            .filter(|e| e.is_generator_resource())
            .map(|e| self.error(*e))
            .sum()
    }

    /// Transport errors the target is answerable for (autobench's and httperf's `errors`).
    pub fn target_errors(&self) -> u64 {
        self.errors_total() - self.generator_errors()
    }

    /// Requests due that the target had its chance at: every attempt but those the generator itself
    /// failed to make.
    pub fn due(&self) -> u64 {
        self.attempts().saturating_sub(self.generator_errors())
    }

    /// Of the requests due, those not served: a transport error, an unexpected status, or never
    /// sent (timed out in the queue, dropped at the step's end, a connection that failed before its
    /// later calls). Every due request is either served (`ok`) or this.
    pub fn failed(&self) -> u64 {
        self.due().saturating_sub(self.ok)
    }

    /// Replies whose status was not expected.
    pub fn unexpected(&self) -> u64 {
        self.replies.saturating_sub(self.ok)
    }

    /// Of the requests due, those already known to have failed while some may still be in flight
    /// (an interval's view; at a step's end every due request is `ok` or [`Counters::failed`]).
    pub fn known_failed(&self) -> u64 {
        self.unexpected() + self.target_errors() + self.dropped + self.abandoned
    }
}

/// The first message of each error class, in words a person can act on ("connection refused by
/// 127.0.0.1:1: is the target up?", "TLS: certificate signed by unknown issuer: use --insecure for a
/// self-signed target"). A message is made and kept only while its class's slot is empty, so an error
/// on the hot path costs a check, and the words are made at most once per class per interval.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FirstErrors([Option<Cow<'static, str>>; ErrorClass::COUNT]);

impl FirstErrors {
    /// The longest message kept, in bytes: enough for an OS or TLS error and its hint; anything a
    /// peer sends beyond it is cut (at a character boundary).
    pub const MAX_LEN: usize = 300;

    /// Keeps `words()` as `class`'s message unless it has one; `words` runs only then.
    pub fn keep(&mut self, class: ErrorClass, words: impl FnOnce() -> Cow<'static, str>) {
        let slot = &mut self.0[class.index()];
        if slot.is_none() {
            *slot = Some(cut(words()));
        }
    }

    pub fn get(&self, class: ErrorClass) -> Option<&str> {
        self.0[class.index()].as_deref()
    }

    /// The merge: a class keeps the message it has; an empty one takes `o`'s. Adding in order of
    /// time (then of worker or agent) keeps the first seen.
    pub fn add(&mut self, o: &FirstErrors) {
        for (a, b) in self.0.iter_mut().zip(&o.0) {
            if a.is_none() {
                a.clone_from(b);
            }
        }
    }

    /// The classes that have a message, in the order of [`ErrorClass::ALL`].
    pub fn iter(&self) -> impl Iterator<Item = (ErrorClass, &str)> {
        ErrorClass::ALL
            .into_iter()
            .filter_map(|c| Some((c, self.get(c)?)))
    }

    pub fn is_empty(&self) -> bool {
        self.0.iter().all(Option::is_none)
    }
}

/// run.json's `error_messages`: `{"other": "TLS: certificate signed by unknown issuer: ..."}`.
impl serde::Serialize for FirstErrors {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.iter().map(|(c, m)| (c.name(), m)))
    }
}

/// What its `Serialize` writes: an error class's name to its first message; its `Deserialize` refuses
/// a class it does not know, so the schema does too.
#[cfg(feature = "schema")]
impl schemars::JsonSchema for FirstErrors {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "FirstErrors".into()
    }

    fn json_schema(g: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let words = g.subschema_for::<String>();
        let properties: serde_json::Map<String, serde_json::Value> = ErrorClass::ALL
            .iter()
            .map(|c| (c.name().to_string(), words.clone().into()))
            .collect();
        schemars::json_schema!({
            "description": "Each error class's first message, in words.",
            "type": "object",
            "properties": properties,
            "additionalProperties": false,
        })
    }
}

/// The inverse of its `Serialize`; a class stampede does not know is refused, by name.
impl<'de> serde::Deserialize<'de> for FirstErrors {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let mut out = FirstErrors::default();
        // Keyed by class: the file's order does not matter.
        let written = std::collections::BTreeMap::<String, String>::deserialize(d)?;
        for (name, message) in written {
            let class = ErrorClass::ALL
                .into_iter()
                .find(|c| c.name() == name)
                .ok_or_else(|| serde::de::Error::custom(format!("unknown error class `{name}`")))?;
            out.0[class.index()] = Some(Cow::Owned(message));
        }
        Ok(out)
    }
}

fn cut(m: Cow<'static, str>) -> Cow<'static, str> {
    if m.len() <= FirstErrors::MAX_LEN {
        return m;
    }
    let end = (0..=FirstErrors::MAX_LEN)
        .rev()
        .find(|i| m.is_char_boundary(*i))
        .unwrap_or(0);
    Cow::Owned(m[..end].to_string())
}

/// Histograms of one interval, all in microseconds.
#[derive(Debug, Clone)]
pub struct Histograms {
    /// Reply complete minus intended send time (open models) or actual send time (closed model), for
    /// replies with an expected status; plus every request given up (timed out, expired in the queue,
    /// dropped at the step's end) at its age then, which is a lower bound of its latency.
    pub latency: Histogram<u64>,
    /// The given-up requests of `latency` alone, so a percentile can tell whether it is exact or
    /// falls among them (a lower bound).
    pub censored: Histogram<u64>,
    /// Latency of replies with an unexpected status, kept apart from `latency`.
    pub unexpected: Histogram<u64>,
    /// TCP (+TLS) connect time.
    pub connect: Histogram<u64>,
    /// Send to reply head received.
    pub ttfb: Histogram<u64>,
    /// How late an arrival was dispatched versus its schedule (the generator's own lag).
    pub lag: Histogram<u64>,
    /// How long an arrival waited for a free connection (requests model).
    pub wait: Histogram<u64>,
    /// A completed session's length (`--wsesslog`), from its intended start to its last reply.
    pub session: Histogram<u64>,
}

impl Default for Histograms {
    fn default() -> Self {
        Histograms {
            latency: histogram::new(),
            censored: histogram::new(),
            unexpected: histogram::new(),
            connect: histogram::new(),
            ttfb: histogram::new(),
            lag: histogram::new(),
            wait: histogram::new(),
            session: histogram::new(),
        }
    }
}

impl Histograms {
    pub fn add(&mut self, o: &Histograms) {
        histogram::add(&mut self.latency, &o.latency);
        histogram::add(&mut self.censored, &o.censored);
        histogram::add(&mut self.unexpected, &o.unexpected);
        histogram::add(&mut self.connect, &o.connect);
        histogram::add(&mut self.ttfb, &o.ttfb);
        histogram::add(&mut self.lag, &o.lag);
        histogram::add(&mut self.wait, &o.wait);
        histogram::add(&mut self.session, &o.session);
    }
}

/// The five histograms of one interval as they arrived: checked, still encoded.
#[derive(Debug, Clone)]
pub struct EncodedHistograms {
    pub latency: Encoded,
    pub censored: Encoded,
    pub unexpected: Encoded,
    pub connect: Encoded,
    pub ttfb: Encoded,
    pub lag: Encoded,
    pub wait: Encoded,
    pub session: Encoded,
}

/// Encoded histograms summed: the merge of many intervals, equal to adding each decoded into
/// [`Histograms`], at the cost of what they recorded.
#[derive(Debug, Clone, Default)]
pub struct HistogramSums {
    pub latency: Sum,
    pub censored: Sum,
    pub unexpected: Sum,
    pub connect: Sum,
    pub ttfb: Sum,
    pub lag: Sum,
    pub wait: Sum,
    pub session: Sum,
}

impl HistogramSums {
    pub fn add(&mut self, e: &EncodedHistograms) {
        self.latency.add(&e.latency);
        self.censored.add(&e.censored);
        self.unexpected.add(&e.unexpected);
        self.connect.add(&e.connect);
        self.ttfb.add(&e.ttfb);
        self.lag.add(&e.lag);
        self.wait.add(&e.wait);
        self.session.add(&e.session);
    }

    pub fn to_histograms(&self) -> Histograms {
        Histograms {
            latency: self.latency.to_histogram(),
            censored: self.censored.to_histogram(),
            unexpected: self.unexpected.to_histogram(),
            connect: self.connect.to_histogram(),
            ttfb: self.ttfb.to_histogram(),
            lag: self.lag.to_histogram(),
            wait: self.wait.to_histogram(),
            session: self.session.to_histogram(),
        }
    }
}

/// What one request of a named mix measured (its row): counted when it leaves, as the step counts it.
/// A connection that failed before any request was chosen for it is the step's alone.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NameCounters {
    /// Requests of this name written to a connection.
    pub requests: u64,
    pub replies: u64,
    /// Of the replies, those with an expected status.
    pub ok: u64,
    /// Due requests of this name given up without a reply (their ages are in `latency`).
    pub given_up: u64,
    /// Due requests of this name never written (expired in the queue, their connection failed).
    pub unsent: u64,
    pub status: [u64; 5],
    pub errors: [u64; ErrorClass::COUNT],
}

impl NameCounters {
    pub fn add(&mut self, o: &NameCounters) {
        self.requests += o.requests;
        self.replies += o.replies;
        self.ok += o.ok;
        self.given_up += o.given_up;
        self.unsent += o.unsent;
        for (a, b) in self.status.iter_mut().zip(o.status) {
            *a += b;
        }
        for (a, b) in self.errors.iter_mut().zip(o.errors) {
            *a += b;
        }
    }

    pub fn error(&self, class: ErrorClass) -> u64 {
        self.errors[class.index()]
    }

    /// Counts a reply's status code into its class; codes outside 100..=599 count as `other` errors,
    /// as [`Counters::record_status`] does for the step.
    pub fn record_status(&mut self, code: u16) {
        match code {
            crate::status::LOWEST..=crate::status::HIGHEST => {
                self.status[usize::from(code / 100 - 1)] += 1
            }
            _ => self.errors[ErrorClass::Other.index()] += 1,
        }
    }

    pub fn errors_total(&self) -> u64 {
        self.errors.iter().sum()
    }

    /// Of this name's requests due (sent or not), those not served.
    pub fn failed(&self) -> u64 {
        (self.requests + self.unsent).saturating_sub(self.ok)
    }
}

/// One named request's interval: its counts, the latency of its served replies (with its given-up
/// requests as lower bounds, as the step's), and the latency of its replies with an unexpected
/// status apart, so a fast 503 never hides a slow 200.
#[derive(Debug, Clone)]
pub struct NameStats {
    pub counters: NameCounters,
    pub latency: Histogram<u64>,
    pub failed: Histogram<u64>,
}

impl Default for NameStats {
    fn default() -> Self {
        NameStats {
            counters: NameCounters::default(),
            latency: histogram::new(),
            failed: histogram::new(),
        }
    }
}

impl NameStats {
    pub fn add(&mut self, o: &NameStats) {
        self.counters.add(&o.counters);
        histogram::add(&mut self.latency, &o.latency);
        histogram::add(&mut self.failed, &o.failed);
    }
}

/// Adds `from`'s rows into `into`'s, row by row (by request index); a side that never saw a name has
/// no row for it, so the shorter is padded.
pub fn add_names(into: &mut Vec<NameStats>, from: &[NameStats]) {
    if into.len() < from.len() {
        into.resize_with(from.len(), NameStats::default);
    }
    for (a, b) in into.iter_mut().zip(from) {
        a.add(b);
    }
}

/// A [`NameStats`] as received: its histograms checked and still encoded.
#[derive(Debug, Clone)]
pub struct EncodedName {
    /// The request's index in the workload's list.
    pub index: u16,
    pub counters: NameCounters,
    pub latency: Encoded,
    pub failed: Encoded,
}

/// A name's rows summed over many reports, still in the encoded histograms' counts.
#[derive(Debug, Clone, Default)]
pub struct NameSums {
    pub counters: NameCounters,
    pub latency: Sum,
    pub failed: Sum,
}

impl NameSums {
    pub fn add(&mut self, e: &EncodedName) {
        self.counters.add(&e.counters);
        self.latency.add(&e.latency);
        self.failed.add(&e.failed);
    }

    pub fn to_stats(&self) -> NameStats {
        NameStats {
            counters: self.counters,
            latency: self.latency.to_histogram(),
            failed: self.failed.to_histogram(),
        }
    }
}

/// Everything measured over one interval by one worker, agent or the whole fleet.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    pub counters: Counters,
    pub hist: Histograms,
    /// Replies per status code.
    pub codes: StatusCodes,
    /// CPU time the worker threads used (user + system).
    pub cpu_ns: u64,
    /// Each error class's first message.
    pub messages: FirstErrors,
    /// Each named request's row, by its index in the workload (empty for unnamed requests; a name
    /// not seen yet may have no row).
    pub names: Vec<NameStats>,
}

impl Snapshot {
    /// The one merge: over workers, over agents and over time alike (`self` is the earlier: its
    /// first messages are kept).
    pub fn add(&mut self, o: &Snapshot) {
        self.counters.add(&o.counters);
        self.hist.add(&o.hist);
        self.codes.add(&o.codes);
        self.cpu_ns += o.cpu_ns;
        self.messages.add(&o.messages);
        add_names(&mut self.names, &o.names);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_codes_land_in_their_class() {
        let mut c = Counters::default();
        for code in [100, 200, 204, 301, 404, 503, 599] {
            c.record_status(code);
        }
        assert_eq!(c.status, [1, 2, 1, 1, 2]);
        c.record_status(999);
        assert_eq!(c.error(ErrorClass::Other), 1);
    }

    #[test]
    fn errno_classes_keep_generator_resources_apart() {
        assert_eq!(ErrorClass::from_errno(24), ErrorClass::FdUnavailable);
        assert_eq!(ErrorClass::from_errno(99), ErrorClass::AddrUnavailable);
        assert!(ErrorClass::from_errno(99).is_generator_resource());
        assert!(!ErrorClass::from_errno(111).is_generator_resource());
        assert_eq!(ErrorClass::from_errno(104), ErrorClass::ConnReset);
    }

    #[test]
    fn snapshot_add_sums_everything() {
        let mut a = Snapshot::default();
        a.counters.requests = 3;
        a.counters.record_error(ErrorClass::ConnReset);
        a.hist.latency.record(100).unwrap();
        a.cpu_ns = 5;
        let mut b = a.clone();
        b.add(&a);
        assert_eq!(b.counters.requests, 6);
        assert_eq!(b.counters.error(ErrorClass::ConnReset), 2);
        assert_eq!(b.hist.latency.len(), 2);
        assert_eq!(b.cpu_ns, 10);
    }

    #[test]
    fn first_error_message_is_kept_and_later_ones_are_not_even_made() {
        let mut m = FirstErrors::default();
        m.keep(ErrorClass::Other, || "not an HTTP reply".into());
        m.keep(ErrorClass::Other, || {
            unreachable!("a full slot makes no words")
        });
        assert_eq!(m.get(ErrorClass::Other), Some("not an HTTP reply"));
        assert_eq!(m.get(ErrorClass::ConnRefused), None);
        // The merge keeps the earlier side's and fills its empty classes from the later.
        let mut later = FirstErrors::default();
        later.keep(ErrorClass::Other, || "a later one".into());
        later.keep(ErrorClass::ConnRefused, || "connection refused".into());
        m.add(&later);
        assert_eq!(
            m.iter().collect::<Vec<_>>(),
            [
                (ErrorClass::ConnRefused, "connection refused"),
                (ErrorClass::Other, "not an HTTP reply")
            ]
        );
        assert_eq!(
            serde_json::to_string(&m).unwrap(),
            r#"{"conn-refused":"connection refused","other":"not an HTTP reply"}"#
        );
        // A message too long is cut at a character boundary.
        let mut long = FirstErrors::default();
        long.keep(ErrorClass::Other, || "é".repeat(400).into());
        let kept = long.get(ErrorClass::Other).unwrap();
        assert!(kept.len() <= FirstErrors::MAX_LEN && kept.len() >= FirstErrors::MAX_LEN - 1);
    }

    #[test]
    fn columns_are_snake_case() {
        assert_eq!(ErrorClass::AddrUnavailable.column(), "err_addr_unavailable");
    }
}

/// One interval of a step as an agent reports it: which part of the step, and what was measured.
#[derive(Debug, Clone)]
pub struct Interval {
    pub step: u32,
    pub seq: u32,
    /// Start of the interval, from the step's start instant.
    pub offset: std::time::Duration,
    pub length: std::time::Duration,
    /// The drain after the last full interval: counted in totals, not in the 1 s rate series.
    pub tail: bool,
    pub snapshot: Snapshot,
}

/// An [`Interval`] as received, for a receiver that merges: everything checked, the histograms kept
/// encoded, so holding or adding one costs what was recorded rather than five full histograms.
#[derive(Debug, Clone)]
pub struct EncodedInterval {
    pub step: u32,
    pub seq: u32,
    pub offset: std::time::Duration,
    pub length: std::time::Duration,
    pub tail: bool,
    pub counters: Counters,
    pub codes: StatusCodes,
    pub cpu_ns: u64,
    pub hist: EncodedHistograms,
    pub messages: FirstErrors,
    /// The named requests' rows the interval has (any order, each index once).
    pub names: Vec<EncodedName>,
}
