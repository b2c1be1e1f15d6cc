//! The control protocol: generated messages and service, and the only conversions between them and
//! `shared`'s domain types (the monitor's are `monitor::wire`'s). Everything received is validated here
//! before the rest of the code sees it.
use std::num::NonZeroU64;
use std::time::Duration;

use shared::histogram::Encoded;
use shared::histogram::{self, CodecError};
use shared::metrics::{
    Counters, EncodedHistograms, EncodedInterval, EncodedName, ErrorClass, FirstErrors, Histograms,
    Interval, NameCounters, NameStats, Snapshot,
};
use shared::plan::{
    self, Arrival, Fork, ForkSide, HttpVersion, LoadModel, PlanError, Sessions, Slice, StepLimit,
    StepShare, TlsSessions, UrlOrder, Workload,
};
use shared::refusal::{Refusal, RefusalKind};
use shared::status::{StatusCodes, StatusSet};
use shared::warning::{Warning, WarningKind};

mod data;

pub mod pb {
    #![allow(clippy::all, clippy::pedantic, missing_docs)]
    tonic::include_proto!("stampede.v1");
}

/// Bumped whenever a message changes meaning; peers with another version are refused.
pub const PROTOCOL_VERSION: u32 = 7;

impl From<&Warning> for pb::Warning {
    fn from(w: &Warning) -> pb::Warning {
        let kind = match w.kind {
            WarningKind::Dispatch => pb::WarningKind::Dispatch,
            WarningKind::FdUnavailable => pb::WarningKind::FdUnavailable,
            WarningKind::AddrUnavailable => pb::WarningKind::AddrUnavailable,
            WarningKind::Capacity => pb::WarningKind::Capacity,
            WarningKind::Other => pb::WarningKind::Other,
        };
        pb::Warning {
            kind: kind as i32,
            text: w.text.clone(),
        }
    }
}

/// A kind this side does not know (a newer peer's) is still a warning, said every time.
impl From<pb::Warning> for Warning {
    fn from(w: pb::Warning) -> Warning {
        let kind = match pb::WarningKind::try_from(w.kind) {
            Ok(pb::WarningKind::Dispatch) => WarningKind::Dispatch,
            Ok(pb::WarningKind::FdUnavailable) => WarningKind::FdUnavailable,
            Ok(pb::WarningKind::AddrUnavailable) => WarningKind::AddrUnavailable,
            Ok(pb::WarningKind::Capacity) => WarningKind::Capacity,
            Ok(pb::WarningKind::Other) | Err(_) => WarningKind::Other,
        };
        Warning { kind, text: w.text }
    }
}

impl From<&Refusal> for pb::Refusal {
    fn from(r: &Refusal) -> pb::Refusal {
        let kind = match r.kind {
            RefusalKind::Other => pb::RefusalKind::Other,
            RefusalKind::Busy => pb::RefusalKind::Busy,
            RefusalKind::Setup => pb::RefusalKind::Setup,
            RefusalKind::Target => pb::RefusalKind::Target,
            RefusalKind::Protocol => pb::RefusalKind::Protocol,
            RefusalKind::Policy => pb::RefusalKind::Policy,
            RefusalKind::Capacity => pb::RefusalKind::Capacity,
        };
        pb::Refusal {
            message: r.message.clone(),
            kind: kind as i32,
        }
    }
}

/// A kind this side does not know is an invalid message: both peers speak one protocol version, and
/// a refusal's kind decides the run's exit code.
impl TryFrom<pb::Refusal> for Refusal {
    type Error = ConvertError;

    fn try_from(r: pb::Refusal) -> Result<Refusal, ConvertError> {
        let kind = match pb::RefusalKind::try_from(r.kind) {
            Ok(pb::RefusalKind::Other) => RefusalKind::Other,
            Ok(pb::RefusalKind::Busy) => RefusalKind::Busy,
            Ok(pb::RefusalKind::Setup) => RefusalKind::Setup,
            Ok(pb::RefusalKind::Target) => RefusalKind::Target,
            Ok(pb::RefusalKind::Protocol) => RefusalKind::Protocol,
            Ok(pb::RefusalKind::Policy) => RefusalKind::Policy,
            Ok(pb::RefusalKind::Capacity) => RefusalKind::Capacity,
            Err(_) => {
                return Err(ConvertError::Unknown {
                    what: "refusal kind",
                    value: r.kind,
                });
            }
        };
        Ok(Refusal {
            kind,
            message: r.message,
        })
    }
}

/// A message that does not convert into a valid domain value.
#[derive(Debug, thiserror::Error)]
pub enum ConvertError {
    #[error("{0} is missing")]
    Missing(&'static str),
    #[error("{what} has an unknown value {value}")]
    Unknown { what: &'static str, value: i32 },
    #[error("{what} has {found} entries, expected {expected}")]
    Length {
        what: &'static str,
        found: usize,
        expected: usize,
    },
    #[error("both or neither of duration_ms and num_conns are set")]
    Limit,
    #[error("{0}")]
    Invalid(&'static str),
    #[error(transparent)]
    Plan(#[from] PlanError),
    #[error("{what}: {source}")]
    Histogram {
        what: &'static str,
        source: CodecError,
    },
}

pub fn model_to_pb(m: LoadModel) -> pb::LoadModel {
    match m {
        LoadModel::Connections => pb::LoadModel::Connections,
        LoadModel::Requests => pb::LoadModel::Requests,
        LoadModel::Concurrency => pb::LoadModel::Concurrency,
    }
}

fn model_from_pb(v: i32) -> Result<LoadModel, ConvertError> {
    match pb::LoadModel::try_from(v) {
        Ok(pb::LoadModel::Connections) => Ok(LoadModel::Connections),
        Ok(pb::LoadModel::Requests) => Ok(LoadModel::Requests),
        Ok(pb::LoadModel::Concurrency) => Ok(LoadModel::Concurrency),
        _ => Err(ConvertError::Unknown {
            what: "load model",
            value: v,
        }),
    }
}

impl From<&StepShare> for pb::PrepareStep {
    fn from(s: &StepShare) -> Self {
        let (duration_ms, num_conns) = match s.limit() {
            StepLimit::Duration(d) => (d.as_millis() as u64, 0),
            StepLimit::Connections(n) => (0, n.get()),
        };
        pb::PrepareStep {
            step: s.step(),
            model: model_to_pb(s.model()) as i32,
            rate: s.rate(),
            connections: s.connections(),
            num_call: s.num_call().get(),
            max_connections: s.max_connections().get(),
            duration_ms,
            num_conns,
            arrival: match s.arrival() {
                Arrival::Uniform => pb::Arrival::Uniform,
                Arrival::Poisson => pb::Arrival::Poisson,
            } as i32,
            seed: s.seed(),
            path: s
                .slice()
                .forks()
                .iter()
                .map(|f| pb::Fork {
                    left: f.left(),
                    right: f.right(),
                    right_side: f.side() == ForkSide::Right,
                })
                .collect(),
            max_requests: s.max_requests().map_or(0, NonZeroU64::get),
        }
    }
}

impl TryFrom<&pb::PrepareStep> for StepShare {
    type Error = ConvertError;

    fn try_from(p: &pb::PrepareStep) -> Result<Self, ConvertError> {
        let limit = match (p.duration_ms, NonZeroU64::new(p.num_conns)) {
            (0, Some(n)) => StepLimit::Connections(n),
            (ms, None) if ms > 0 => StepLimit::Duration(Duration::from_millis(ms)),
            _ => return Err(ConvertError::Limit),
        };
        let arrival = match pb::Arrival::try_from(p.arrival) {
            Ok(pb::Arrival::Uniform) => Arrival::Uniform,
            Ok(pb::Arrival::Poisson) => Arrival::Poisson,
            _ => {
                return Err(ConvertError::Unknown {
                    what: "arrival",
                    value: p.arrival,
                });
            }
        };
        let forks = p
            .path
            .iter()
            .map(|f| {
                let side = if f.right_side {
                    ForkSide::Right
                } else {
                    ForkSide::Left
                };
                Fork::try_new(f.left, f.right, side)
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(StepShare::try_new(
            p.step,
            model_from_pb(p.model)?,
            p.rate,
            Slice::try_from_forks(forks)?,
            p.connections,
            p.num_call,
            p.max_connections,
            limit,
            arrival,
            p.seed,
        )?
        .with_max_requests(p.max_requests)?)
    }
}

impl From<&Workload> for pb::Configure {
    fn from(w: &Workload) -> Self {
        let mut c = pb::Configure {
            requests: w.requests().iter().map(data::request_to_pb).collect(),
            url_order: match w.url_order() {
                UrlOrder::RoundRobin => pb::UrlOrder::RoundRobin,
                UrlOrder::Random => pb::UrlOrder::Random,
            } as i32,
            timeout_ms: w.timeout().as_millis() as u64,
            connect_timeout_ms: w.connect_timeout().as_millis() as u64,
            insecure_tls: w.insecure_tls(),
            source_addrs: w.source_addrs().iter().map(ToString::to_string).collect(),
            ok_status: w
                .ok_status()
                .ranges()
                .iter()
                .map(|&(low, high)| pb::StatusRange {
                    low: low.into(),
                    high: high.into(),
                })
                .collect(),
            http: match w.http() {
                HttpVersion::Http1 => pb::HttpVersion::Http1,
                HttpVersion::Http2 => pb::HttpVersion::Http2,
                HttpVersion::Auto => pb::HttpVersion::Auto,
            } as i32,
            streams: w.streams().get(),
            tls_sessions: match w.tls_sessions() {
                TlsSessions::Fresh => pb::TlsSessions::Fresh,
                TlsSessions::Resume => pb::TlsSessions::Resume,
            } as i32,
            names: w.names().to_vec(),
            weights: if w.names().is_empty() {
                Vec::new()
            } else {
                w.weights().to_vec()
            },
            sessions: w.sessions().map_or_else(Vec::new, |s| sessions_to_pb(s)),
            ..Default::default()
        };
        data::data_to_pb(w.data(), &mut c);
        c
    }
}

impl TryFrom<&pb::Configure> for Workload {
    type Error = ConvertError;

    fn try_from(c: &pb::Configure) -> Result<Self, ConvertError> {
        let requests = c
            .requests
            .iter()
            .map(data::request_from_pb)
            .collect::<Result<Vec<_>, _>>()?;
        let url_order = match pb::UrlOrder::try_from(c.url_order) {
            Ok(pb::UrlOrder::Random) => UrlOrder::Random,
            Ok(pb::UrlOrder::RoundRobin) | Ok(pb::UrlOrder::Unspecified) => UrlOrder::RoundRobin,
            Err(_) => {
                return Err(ConvertError::Unknown {
                    what: "url order",
                    value: c.url_order,
                });
            }
        };
        let http = match pb::HttpVersion::try_from(c.http) {
            Ok(pb::HttpVersion::Unspecified | pb::HttpVersion::Http1) => HttpVersion::Http1,
            Ok(pb::HttpVersion::Http2) => HttpVersion::Http2,
            Ok(pb::HttpVersion::Auto) => HttpVersion::Auto,
            Err(_) => {
                return Err(ConvertError::Unknown {
                    what: "HTTP version",
                    value: c.http,
                });
            }
        };
        let tls_sessions = match pb::TlsSessions::try_from(c.tls_sessions) {
            Ok(pb::TlsSessions::Unspecified | pb::TlsSessions::Fresh) => TlsSessions::Fresh,
            Ok(pb::TlsSessions::Resume) => TlsSessions::Resume,
            Err(_) => {
                return Err(ConvertError::Unknown {
                    what: "TLS sessions",
                    value: c.tls_sessions,
                });
            }
        };
        let source_addrs = c
            .source_addrs
            .iter()
            .map(|a| {
                a.parse().map_err(|_| PlanError::BadSourceAddrs {
                    input: c.source_addrs.join(","),
                    why: format!("'{a}' is not an IP address"),
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let workload = Workload::try_new(
            requests,
            url_order,
            Duration::from_millis(c.timeout_ms),
            Duration::from_millis(c.connect_timeout_ms),
            c.insecure_tls,
        )?
        .with_source_addrs(source_addrs)?
        .with_ok_status(ok_status_from_pb(&c.ok_status)?)
        .with_http(http, c.streams.max(1))?
        .with_tls_sessions(tls_sessions)
        .with_data(data::data_from_pb(c)?);
        let workload = if c.names.is_empty() && c.weights.is_empty() {
            workload
        } else {
            workload.with_names(c.names.clone(), c.weights.clone())?
        };
        if c.sessions.is_empty() {
            return Ok(workload);
        }
        let count = workload.requests().len();
        Ok(workload.with_sessions(sessions_from_pb(&c.sessions, count)?)?)
    }
}

fn sessions_to_pb(s: &Sessions) -> Vec<pb::Session> {
    s.list()
        .iter()
        .map(|s| pb::Session {
            bursts: s
                .bursts()
                .iter()
                .map(|b| pb::SessionBurst {
                    requests: b.requests().iter().map(|&i| u32::from(i)).collect(),
                    think_us: b.think().as_micros() as u64,
                })
                .collect(),
        })
        .collect()
}

/// Checked as a log read by the coordinator is: sizes first, so a peer's list costs no more than
/// a log's may.
fn sessions_from_pb(list: &[pb::Session], requests: usize) -> Result<Sessions, ConvertError> {
    if list.len() > plan::MAX_SESSIONS {
        return Err(PlanError::from(plan::SessionsError::TooMany(list.len())).into());
    }
    let sessions = list
        .iter()
        .map(|s| {
            s.bursts
                .iter()
                .map(|b| (b.requests.clone(), Duration::from_micros(b.think_us)))
                .collect()
        })
        .collect();
    Ok(Sessions::try_new(sessions, requests).map_err(PlanError::from)?)
}

fn ok_status_from_pb(ranges: &[pb::StatusRange]) -> Result<StatusSet, ConvertError> {
    if ranges.is_empty() {
        return Ok(StatusSet::default());
    }
    let code = |v: u32| u16::try_from(v).unwrap_or(u16::MAX);
    StatusSet::from_ranges(ranges.iter().map(|r| (code(r.low), code(r.high))).collect()).ok_or(
        ConvertError::Invalid("ok_status has a range outside 100-599 or backwards"),
    )
}

fn codes_from_pb(counts: &[pb::StatusCount]) -> Result<StatusCodes, ConvertError> {
    let mut codes = StatusCodes::default();
    for c in counts {
        let code = u16::try_from(c.code).unwrap_or(u16::MAX);
        if !codes.add_count(code, c.count) {
            return Err(ConvertError::Invalid(
                "status_codes has a code outside 100-599",
            ));
        }
    }
    Ok(codes)
}

fn codes_to_pb(codes: &StatusCodes) -> Vec<pb::StatusCount> {
    codes
        .nonzero()
        .map(|(code, count)| pb::StatusCount {
            code: code.into(),
            count,
        })
        .collect()
}

impl From<&Counters> for pb::Counters {
    fn from(c: &Counters) -> Self {
        pb::Counters {
            requests: c.requests,
            replies: c.replies,
            connections: c.connections,
            bytes_in: c.bytes_in,
            bytes_out: c.bytes_out,
            status: c.status.to_vec(),
            errors: c.errors.to_vec(),
            waited: c.waited,
            unsent: c.unsent,
            dropped: c.dropped,
            ok: c.ok,
            given_up: c.given_up,
            abandoned: c.abandoned,
            refused_streams: c.refused_streams,
            goaways: c.goaways,
            peer_max_streams: c.peer_max_streams,
            stream_resets: c.stream_resets,
            header_bytes_in: c.header_bytes_in,
            body_bytes_in: c.body_bytes_in,
            window_stalls: c.window_stalls,
            window_stall_us: c.window_stall_us,
            drained: c.drained,
            tls_full: c.tls_full,
            tls_resumed: c.tls_resumed,
            sessions_started: c.sessions_started,
            sessions_completed: c.sessions_completed,
            sessions_abandoned: c.sessions_abandoned,
            setups: c.setups,
            setup_failed: c.setup_failed,
        }
    }
}

impl TryFrom<&pb::Counters> for Counters {
    type Error = ConvertError;

    fn try_from(c: &pb::Counters) -> Result<Self, ConvertError> {
        let fixed = |what, v: &[u64], n: usize| -> Result<(), ConvertError> {
            if v.len() == n {
                Ok(())
            } else {
                Err(ConvertError::Length {
                    what,
                    found: v.len(),
                    expected: n,
                })
            }
        };
        let mut out = Counters {
            requests: c.requests,
            replies: c.replies,
            connections: c.connections,
            bytes_in: c.bytes_in,
            bytes_out: c.bytes_out,
            waited: c.waited,
            unsent: c.unsent,
            dropped: c.dropped,
            ok: c.ok,
            given_up: c.given_up,
            abandoned: c.abandoned,
            refused_streams: c.refused_streams,
            goaways: c.goaways,
            peer_max_streams: c.peer_max_streams,
            stream_resets: c.stream_resets,
            header_bytes_in: c.header_bytes_in,
            body_bytes_in: c.body_bytes_in,
            window_stalls: c.window_stalls,
            window_stall_us: c.window_stall_us,
            drained: c.drained,
            tls_full: c.tls_full,
            tls_resumed: c.tls_resumed,
            sessions_started: c.sessions_started,
            sessions_completed: c.sessions_completed,
            sessions_abandoned: c.sessions_abandoned,
            setups: c.setups,
            setup_failed: c.setup_failed,
            ..Counters::default()
        };
        if c.ok > c.replies {
            return Err(ConvertError::Invalid(
                "counters have more ok replies than replies",
            ));
        }
        if c.setup_failed > c.setups {
            return Err(ConvertError::Invalid(
                "counters have more failed setups than setups",
            ));
        }
        if c.drained > c.replies {
            return Err(ConvertError::Invalid(
                "counters have more replies in the drain than replies",
            ));
        }
        fixed("status counts", &c.status, 5)?;
        fixed("error counts", &c.errors, ErrorClass::COUNT)?;
        out.status.copy_from_slice(&c.status);
        out.errors.copy_from_slice(&c.errors);
        Ok(out)
    }
}

impl From<&Interval> for pb::IntervalReport {
    fn from(i: &Interval) -> Self {
        let h = &i.snapshot.hist;
        pb::IntervalReport {
            step: i.step,
            seq: i.seq,
            offset_us: i.offset.as_micros() as u64,
            length_us: i.length.as_micros() as u64,
            tail: i.tail,
            counters: Some((&i.snapshot.counters).into()),
            latency: histogram::encode(&h.latency),
            censored: histogram::encode(&h.censored),
            unexpected: histogram::encode(&h.unexpected),
            status_codes: codes_to_pb(&i.snapshot.codes),
            connect: histogram::encode(&h.connect),
            ttfb: histogram::encode(&h.ttfb),
            lag: histogram::encode(&h.lag),
            wait: histogram::encode(&h.wait),
            session: histogram::encode(&h.session),
            cpu_ns: i.snapshot.cpu_ns,
            error_messages: messages_to_pb(&i.snapshot.messages),
            names: names_to_pb(&i.snapshot.names),
        }
    }
}

/// The rows of the names that saw anything: an idle name costs nothing on the wire.
fn names_to_pb(names: &[NameStats]) -> Vec<pb::NameInterval> {
    names
        .iter()
        .enumerate()
        .filter(|(_, n)| n.counters != NameCounters::default() || !n.failed.is_empty())
        .map(|(index, n)| pb::NameInterval {
            index: index as u32,
            counters: Some(pb::NameCounters {
                requests: n.counters.requests,
                replies: n.counters.replies,
                ok: n.counters.ok,
                given_up: n.counters.given_up,
                unsent: n.counters.unsent,
                status: n.counters.status.to_vec(),
                errors: n.counters.errors.to_vec(),
            }),
            latency: histogram::encode(&n.latency),
            failed: histogram::encode(&n.failed),
        })
        .collect()
}

impl TryFrom<&pb::NameCounters> for NameCounters {
    type Error = ConvertError;

    fn try_from(c: &pb::NameCounters) -> Result<Self, ConvertError> {
        // Per interval only: a request counted as it left may be answered in the next interval.
        if c.ok > c.replies {
            return Err(ConvertError::Invalid(
                "a name's counters have more ok replies than replies",
            ));
        }
        let mut out = NameCounters {
            requests: c.requests,
            replies: c.replies,
            ok: c.ok,
            given_up: c.given_up,
            unsent: c.unsent,
            ..NameCounters::default()
        };
        for (what, from, to) in [
            ("a name's status counts", &c.status, &mut out.status[..]),
            ("a name's error counts", &c.errors, &mut out.errors[..]),
        ] {
            if from.len() != to.len() {
                return Err(ConvertError::Length {
                    what,
                    found: from.len(),
                    expected: to.len(),
                });
            }
            to.copy_from_slice(from);
        }
        Ok(out)
    }
}

/// A name's index is checked against the workload's names by the receiver, which knows them; here
/// only that each index comes once and fits.
fn check_name_indexes(names: &[pb::NameInterval]) -> Result<(), ConvertError> {
    let mut seen = std::collections::BTreeSet::new();
    for n in names {
        if n.index as usize >= shared::plan::MAX_REQUESTS || !seen.insert(n.index) {
            return Err(ConvertError::Invalid(
                "a name's row is out of range or given twice in one interval",
            ));
        }
    }
    Ok(())
}

impl TryFrom<&pb::IntervalReport> for Interval {
    type Error = ConvertError;

    fn try_from(r: &pb::IntervalReport) -> Result<Self, ConvertError> {
        let dec = |what, b: &[u8]| {
            histogram::decode(b).map_err(|source| ConvertError::Histogram { what, source })
        };
        Ok(Interval {
            step: r.step,
            seq: r.seq,
            offset: Duration::from_micros(r.offset_us),
            length: Duration::from_micros(r.length_us),
            tail: r.tail,
            snapshot: Snapshot {
                counters: r
                    .counters
                    .as_ref()
                    .ok_or(ConvertError::Missing("counters"))?
                    .try_into()?,
                hist: Histograms {
                    latency: dec("latency histogram", &r.latency)?,
                    censored: dec("censored histogram", &r.censored)?,
                    unexpected: dec("unexpected-status histogram", &r.unexpected)?,
                    connect: dec("connect histogram", &r.connect)?,
                    ttfb: dec("ttfb histogram", &r.ttfb)?,
                    lag: dec("lag histogram", &r.lag)?,
                    wait: dec("wait histogram", &r.wait)?,
                    session: dec("session histogram", &r.session)?,
                },
                codes: codes_from_pb(&r.status_codes)?,
                cpu_ns: r.cpu_ns,
                messages: messages_from_pb(&r.error_messages)?,
                names: {
                    check_name_indexes(&r.names)?;
                    let mut names = Vec::new();
                    for n in &r.names {
                        let i = n.index as usize;
                        if names.len() <= i {
                            names.resize_with(i + 1, NameStats::default);
                        }
                        names[i] = NameStats {
                            counters: n
                                .counters
                                .as_ref()
                                .ok_or(ConvertError::Missing("a name's counters"))?
                                .try_into()?,
                            latency: dec("a name's latency histogram", &n.latency)?,
                            failed: dec("a name's failed histogram", &n.failed)?,
                        };
                    }
                    names
                },
            },
        })
    }
}

/// The merge's conversion: takes the report so its histogram bytes are kept, not copied, and checks
/// them without decoding (see [`Encoded`]). Accepts and refuses what the `Interval` conversion does.
impl TryFrom<pb::IntervalReport> for EncodedInterval {
    type Error = ConvertError;

    fn try_from(r: pb::IntervalReport) -> Result<Self, ConvertError> {
        let check = |what, b: Vec<u8>| {
            Encoded::parse(b).map_err(|source| ConvertError::Histogram { what, source })
        };
        Ok(EncodedInterval {
            step: r.step,
            seq: r.seq,
            offset: Duration::from_micros(r.offset_us),
            length: Duration::from_micros(r.length_us),
            tail: r.tail,
            counters: r
                .counters
                .as_ref()
                .ok_or(ConvertError::Missing("counters"))?
                .try_into()?,
            codes: codes_from_pb(&r.status_codes)?,
            cpu_ns: r.cpu_ns,
            messages: messages_from_pb(&r.error_messages)?,
            names: {
                check_name_indexes(&r.names)?;
                r.names
                    .into_iter()
                    .map(|n| {
                        Ok(EncodedName {
                            index: n.index as u16,
                            counters: n
                                .counters
                                .as_ref()
                                .ok_or(ConvertError::Missing("a name's counters"))?
                                .try_into()?,
                            latency: check("a name's latency histogram", n.latency)?,
                            failed: check("a name's failed histogram", n.failed)?,
                        })
                    })
                    .collect::<Result<_, ConvertError>>()?
            },
            hist: EncodedHistograms {
                latency: check("latency histogram", r.latency)?,
                censored: check("censored histogram", r.censored)?,
                unexpected: check("unexpected-status histogram", r.unexpected)?,
                connect: check("connect histogram", r.connect)?,
                ttfb: check("ttfb histogram", r.ttfb)?,
                lag: check("lag histogram", r.lag)?,
                wait: check("wait histogram", r.wait)?,
                session: check("session histogram", r.session)?,
            },
        })
    }
}

fn messages_to_pb(m: &FirstErrors) -> Vec<String> {
    if m.is_empty() {
        return Vec::new();
    }
    ErrorClass::ALL
        .iter()
        .map(|c| m.get(*c).unwrap_or_default().to_string())
        .collect()
}

/// A peer's messages are words to show, never trusted for more: [`FirstErrors::keep`] cuts a long
/// one.
fn messages_from_pb(v: &[String]) -> Result<FirstErrors, ConvertError> {
    let mut m = FirstErrors::default();
    if v.is_empty() {
        return Ok(m);
    }
    if v.len() != ErrorClass::COUNT {
        return Err(ConvertError::Length {
            what: "error messages",
            found: v.len(),
            expected: ErrorClass::COUNT,
        });
    }
    for (class, text) in ErrorClass::ALL.iter().zip(v) {
        if !text.is_empty() {
            m.keep(*class, || text.clone().into());
        }
    }
    Ok(m)
}

/// Shorthands for building the oneof envelopes.
pub fn to_agent(kind: pb::coordinator_message::Kind) -> pb::CoordinatorMessage {
    pb::CoordinatorMessage { kind: Some(kind) }
}

pub fn from_agent(kind: pb::agent_message::Kind) -> pb::AgentMessage {
    pb::AgentMessage { kind: Some(kind) }
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_refusal_kind_crosses_the_wire_as_itself_and_an_unknown_one_is_invalid() {
        use shared::refusal::{Refusal, RefusalKind};
        for kind in RefusalKind::ALL {
            let r = Refusal::new(kind, "words");
            assert_eq!(Refusal::try_from(super::pb::Refusal::from(&r)).unwrap(), r);
        }
        let unknown = super::pb::Refusal {
            message: "words".into(),
            kind: 99,
        };
        assert!(Refusal::try_from(unknown).is_err());
    }

    use super::*;
    use shared::plan::RequestSpec;

    #[test]
    fn step_share_roundtrips() {
        let slice = Slice::among(&[5, 1_000_000_000, 2])[1].clone();
        assert_eq!(slice.forks().len(), 2);
        let s = StepShare::try_new(
            3,
            LoadModel::Connections,
            12.5,
            slice,
            0,
            10,
            100,
            StepLimit::Connections(NonZeroU64::new(500).unwrap()),
            Arrival::Poisson,
            77,
        )
        .unwrap();
        let p = pb::PrepareStep::from(&s);
        assert_eq!(p.path.len(), 2);
        let back = StepShare::try_from(&p).unwrap();
        assert_eq!(back, s);
    }

    #[test]
    fn invalid_prepare_is_refused() {
        let fork = |left, right| pb::Fork {
            left,
            right,
            right_side: true,
        };
        let mut p = pb::PrepareStep {
            model: pb::LoadModel::Requests as i32,
            rate: 10.0,
            num_call: 1,
            max_connections: 1,
            duration_ms: 1000,
            arrival: pb::Arrival::Uniform as i32,
            path: vec![fork(1, 3)],
            ..Default::default()
        };
        assert!(StepShare::try_from(&p).is_ok());
        for (left, right) in [(0, 1), (1, 0), (u64::MAX, 1)] {
            p.path[0] = fork(left, right);
            let e = StepShare::try_from(&p).unwrap_err().to_string();
            assert!(
                e.contains(&format!("a split of the arrivals {left}:{right}")),
                "{e}"
            );
        }
        p.path = vec![fork(1, 1); 65];
        let e = StepShare::try_from(&p).unwrap_err().to_string();
        assert!(e.contains("path of 65 forks"), "{e}");
        // No path is the whole step, as a lone agent is sent.
        p.path.clear();
        assert!(StepShare::try_from(&p).is_ok());
        p.num_conns = 5;
        assert!(matches!(StepShare::try_from(&p), Err(ConvertError::Limit)));
        p.num_conns = 0;
        p.rate = -1.0;
        assert!(
            StepShare::try_from(&p)
                .unwrap_err()
                .to_string()
                .contains("rate -1 is outside")
        );
        p.rate = 1.0;
        p.model = 42;
        assert!(StepShare::try_from(&p).is_err());
    }

    #[test]
    fn workload_with_source_addrs_roundtrips_and_bad_ones_are_refused() {
        let w = Workload::try_new(
            vec![RequestSpec::try_new("GET", "http://127.0.0.1:9/x", vec![], vec![]).unwrap()],
            UrlOrder::RoundRobin,
            Duration::from_secs(2),
            Duration::from_secs(1),
            false,
        )
        .unwrap()
        .with_source_addrs(shared::plan::parse_source_addrs("127.0.0.2-127.0.0.3").unwrap())
        .unwrap();
        let mut c = pb::Configure::from(&w);
        assert_eq!(c.source_addrs, ["127.0.0.2", "127.0.0.3"]);
        assert_eq!(Workload::try_from(&c).unwrap(), w);
        c.source_addrs.push("nonsense".into());
        let e = Workload::try_from(&c).unwrap_err().to_string();
        assert!(e.contains("'nonsense' is not an IP address"), "{e}");
        c.source_addrs = vec!["::1".into()];
        let e = Workload::try_from(&c).unwrap_err().to_string();
        assert!(e.contains("--source-addrs are IPv6"), "{e}");
    }

    #[test]
    fn the_http_version_and_streams_roundtrip_and_an_old_coordinator_means_http1() {
        let w = Workload::try_new(
            vec![RequestSpec::try_new("GET", "http://127.0.0.1:9/x", vec![], vec![]).unwrap()],
            UrlOrder::RoundRobin,
            Duration::from_secs(2),
            Duration::from_secs(1),
            false,
        )
        .unwrap();
        let h2 = w.clone().with_http(HttpVersion::Http2, 10).unwrap();
        let mut c = pb::Configure::from(&h2);
        assert_eq!(Workload::try_from(&c).unwrap(), h2);
        // A coordinator from before the fields sends neither.
        c.http = 0;
        c.streams = 0;
        assert_eq!(Workload::try_from(&c).unwrap(), w);
        c.http = 9;
        let e = Workload::try_from(&c).unwrap_err().to_string();
        assert!(e.contains("HTTP version"), "{e}");
        c.http = pb::HttpVersion::Http1 as i32;
        c.streams = 4;
        let e = Workload::try_from(&c).unwrap_err().to_string();
        assert!(e.contains("--streams 4 needs HTTP/2"), "{e}");
    }

    #[test]
    fn tls_sessions_roundtrip_and_an_old_coordinator_means_fresh() {
        let w = Workload::try_new(
            vec![RequestSpec::try_new("GET", "https://h/x", vec![], vec![]).unwrap()],
            UrlOrder::RoundRobin,
            Duration::from_secs(2),
            Duration::from_secs(1),
            false,
        )
        .unwrap();
        let resume = w.clone().with_tls_sessions(TlsSessions::Resume);
        let mut c = pb::Configure::from(&resume);
        assert_eq!(Workload::try_from(&c).unwrap(), resume);
        c.tls_sessions = 0;
        assert_eq!(
            Workload::try_from(&c).unwrap().tls_sessions(),
            TlsSessions::Fresh
        );
        c.tls_sessions = 7;
        let e = Workload::try_from(&c).unwrap_err().to_string();
        assert!(e.contains("TLS sessions"), "{e}");
    }

    #[test]
    fn sessions_roundtrip_and_one_naming_a_request_the_workload_lacks_is_refused() {
        let get = |p: &str| RequestSpec::try_new("GET", &format!("http://h/{p}"), vec![], vec![]);
        let w = Workload::try_new(
            vec![get("a").unwrap(), get("b").unwrap()],
            UrlOrder::RoundRobin,
            Duration::from_secs(2),
            Duration::from_secs(1),
            false,
        )
        .unwrap();
        let ms = Duration::from_millis;
        let sessions = Sessions::try_new(
            vec![
                vec![(vec![0, 1], ms(50)), (vec![1], ms(0))],
                vec![(vec![0], ms(1))],
            ],
            2,
        )
        .unwrap();
        let with = w.clone().with_sessions(sessions).unwrap();
        let mut c = pb::Configure::from(&with);
        assert_eq!(c.sessions.len(), 2);
        assert_eq!(Workload::try_from(&c).unwrap(), with);
        // An older coordinator's configure has none.
        assert_eq!(Workload::try_from(&pb::Configure::from(&w)).unwrap(), w);
        c.sessions[1].bursts[0].requests = vec![2];
        let e = Workload::try_from(&c).unwrap_err().to_string();
        assert!(
            e.contains("session 2 names request 2, past the 2 requests"),
            "{e}"
        );
        c.sessions[1].bursts.clear();
        assert!(Workload::try_from(&c).is_err());
    }

    #[test]
    fn the_session_counters_and_lengths_cross_the_wire() {
        let mut snapshot = Snapshot::default();
        snapshot.counters.sessions_started = 5;
        snapshot.counters.sessions_completed = 3;
        snapshot.counters.sessions_abandoned = 1;
        snapshot.hist.session.record(250_000).unwrap();
        let i = Interval {
            step: 0,
            seq: 0,
            offset: Duration::ZERO,
            length: Duration::from_secs(1),
            tail: false,
            snapshot,
        };
        let pb = pb::IntervalReport::from(&i);
        let back = Interval::try_from(&pb).unwrap();
        assert_eq!(back.snapshot.counters, i.snapshot.counters);
        assert_eq!(back.snapshot.hist.session.len(), 1);
        let encoded = EncodedInterval::try_from(pb).unwrap();
        let mut sum = shared::metrics::HistogramSums::default();
        sum.add(&encoded.hist);
        assert_eq!(sum.to_histograms().session.len(), 1);
    }

    #[test]
    fn interval_roundtrips_losslessly() {
        let mut s = Snapshot::default();
        s.counters.requests = 5;
        s.counters.record_status(200);
        s.counters.record_error(ErrorClass::ConnReset);
        s.counters.tls_full = 3;
        s.counters.tls_resumed = 4;
        s.hist.latency.record(12_345).unwrap();
        s.cpu_ns = 99;
        s.messages
            .keep(ErrorClass::ConnReset, || "connection reset by peer".into());
        let i = Interval {
            step: 1,
            seq: 2,
            offset: Duration::from_secs(2),
            length: Duration::from_secs(1),
            tail: false,
            snapshot: s,
        };
        let back = Interval::try_from(&pb::IntervalReport::from(&i)).unwrap();
        assert_eq!(back.snapshot.counters, i.snapshot.counters);
        assert_eq!(back.snapshot.hist.latency, i.snapshot.hist.latency);
        assert_eq!(back.offset, i.offset);
        assert_eq!(back.snapshot.messages, i.snapshot.messages);
        let e = EncodedInterval::try_from(pb::IntervalReport::from(&i)).unwrap();
        assert_eq!(e.messages, i.snapshot.messages);
    }

    #[test]
    fn error_messages_of_a_wrong_length_are_refused_and_long_ones_cut() {
        let mut r = pb::IntervalReport {
            counters: Some(pb::Counters {
                status: vec![0; 5],
                errors: vec![0; ErrorClass::COUNT],
                ..Default::default()
            }),
            error_messages: vec!["x".into(); 2],
            ..Default::default()
        };
        let e = EncodedInterval::try_from(r.clone())
            .unwrap_err()
            .to_string();
        assert_eq!(e, "error messages has 2 entries, expected 7");
        r.error_messages = vec![String::new(); ErrorClass::COUNT];
        r.error_messages[6] = "y".repeat(10_000);
        let m = EncodedInterval::try_from(r).unwrap().messages;
        assert_eq!(
            m.get(ErrorClass::Other).map(str::len),
            Some(FirstErrors::MAX_LEN)
        );
        assert_eq!(m.get(ErrorClass::ConnReset), None);
    }

    #[test]
    fn encoded_interval_matches_the_decoded_one() {
        let mut s = Snapshot::default();
        s.counters.requests = 7;
        s.hist.latency.record(12_345).unwrap();
        s.hist.wait.record(99).unwrap();
        s.cpu_ns = 3;
        let i = Interval {
            step: 2,
            seq: 4,
            offset: Duration::from_secs(4),
            length: Duration::from_millis(500),
            tail: true,
            snapshot: s,
        };
        let report = pb::IntervalReport::from(&i);
        let decoded = Interval::try_from(&report).unwrap();
        let e = EncodedInterval::try_from(report).unwrap();
        assert_eq!(
            (e.step, e.seq, e.offset, e.length, e.tail),
            (2, 4, i.offset, i.length, true)
        );
        assert_eq!((e.counters, e.cpu_ns), (i.snapshot.counters, 3));
        let mut sums = shared::metrics::HistogramSums::default();
        sums.add(&e.hist);
        let h = sums.to_histograms();
        assert_eq!(h.latency, decoded.snapshot.hist.latency);
        assert_eq!(h.wait, decoded.snapshot.hist.wait);
    }

    #[test]
    fn encoded_interval_refuses_a_bad_histogram_by_name() {
        let mut report = pb::IntervalReport::from(&Interval {
            step: 0,
            seq: 0,
            offset: Duration::ZERO,
            length: Duration::from_secs(1),
            tail: false,
            snapshot: Snapshot::default(),
        });
        report.ttfb = b"not a histogram".to_vec();
        let e = EncodedInterval::try_from(report.clone()).unwrap_err();
        assert!(e.to_string().starts_with("ttfb histogram:"), "{e}");
        report.ttfb.clear();
        report.counters = None;
        assert!(matches!(
            EncodedInterval::try_from(report),
            Err(ConvertError::Missing("counters"))
        ));
    }

    #[test]
    fn wrong_length_counters_are_refused() {
        let c = pb::Counters {
            status: vec![1, 2],
            errors: vec![0; ErrorClass::COUNT],
            ..Default::default()
        };
        assert!(
            Counters::try_from(&c)
                .unwrap_err()
                .to_string()
                .contains("status counts has 2 entries")
        );
    }
}
