//! What to send, fixed for the run: the requests, their order, the timeouts, where connections leave
//! from and which statuses count as served.
use std::net::IpAddr;
use std::time::Duration;

use crate::status::StatusSet;

use super::source_addrs::{check_source_addrs, family};
use super::{Data, Mix, PlanError, RequestSpec, Sessions, Url, UrlOrder};

/// The longest request name: a column's worth in a table, a label's in /metrics.
pub const MAX_NAME_LEN: usize = 64;

/// Whether `name` may name a request of a mix: 1 to 64 of letters, digits, `_`, `.` and `-`, so it
/// is a TSV cell, a file name (its .hlog), a Prometheus label value and a condition's `[name]` as is.
pub fn is_request_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME_LEN
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b))
}

/// Which HTTP a target is spoken to in (`--http`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
pub enum HttpVersion {
    /// HTTP/1.1, over TCP or TLS
    #[default]
    #[cfg_attr(feature = "cli", value(name = "1.1", alias = "1", alias = "h1"))]
    #[serde(rename = "1.1", alias = "1", alias = "h1")]
    Http1,
    /// HTTP/2: h2c with prior knowledge over TCP, h2 by ALPN over TLS (a server that offers only
    /// http/1.1 is an error)
    #[cfg_attr(feature = "cli", value(name = "2", alias = "h2", alias = "h2c"))]
    #[serde(rename = "2", alias = "h2", alias = "h2c")]
    Http2,
    /// over TLS, what ALPN agrees (h2 first, else http/1.1); HTTP/1.1 over TCP
    #[cfg_attr(feature = "cli", value(name = "auto"))]
    #[serde(rename = "auto")]
    Auto,
}

impl HttpVersion {
    pub fn name(self) -> &'static str {
        match self {
            HttpVersion::Http1 => "1.1",
            HttpVersion::Http2 => "2",
            HttpVersion::Auto => "auto",
        }
    }

    /// Whether a connection may carry more than one request at once.
    pub fn multiplexes(self) -> bool {
        self != HttpVersion::Http1
    }
}

/// Whether a new TLS connection may resume a session an earlier one of its worker made
/// (`--tls-sessions`). Resumed handshakes cost a server far less than full ones, so which one a run
/// does decides what its connection rate measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
#[serde(rename_all = "kebab-case")]
pub enum TlsSessions {
    /// every new connection a full handshake: the server's TLS capacity
    #[default]
    Fresh,
    /// a new connection resumes a session of its worker thread (tickets or IDs), as browsers do
    /// and httperf does unless --ssl-no-reuse
    Resume,
}

impl TlsSessions {
    pub fn name(self) -> &'static str {
        match self {
            TlsSessions::Fresh => "fresh",
            TlsSessions::Resume => "resume",
        }
    }
}

/// Streams one HTTP/2 connection carries at once at most (`--streams`); 1 means HTTP/1.1's one request
/// at a time, and is all an HTTP/1.1 connection ever carries.
pub const MAX_STREAMS: u32 = 1_000;

/// What to send, fixed for the run.
#[derive(Debug, Clone, PartialEq)]
pub struct Workload {
    requests: Vec<RequestSpec>,
    /// Each request's name, in the order of `requests`; empty when they are unnamed (a URL, `--urls`).
    names: Vec<String>,
    /// Each request's weight in the mix, in the order of `requests` (all 1 unless named).
    weights: Vec<u32>,
    url_order: UrlOrder,
    timeout: Duration,
    connect_timeout: Duration,
    insecure_tls: bool,
    source_addrs: Vec<IpAddr>,
    ok_status: StatusSet,
    http: HttpVersion,
    streams: std::num::NonZeroU32,
    tls_sessions: TlsSessions,
    /// httperf's sessions (`--wsesslog`), naming `requests` by index; `None`: an arrival sends
    /// `--num-call` of the requests in turn.
    sessions: Option<std::sync::Arc<Sessions>>,
    /// Feeders and a setup the requests' `${var}` draw on (see `plan::feeder`).
    data: std::sync::Arc<Data>,
}

impl Workload {
    /// The feeders and setup the requests' variables come from; empty for none.
    pub fn data(&self) -> &Data {
        &self.data
    }

    pub fn with_data(mut self, data: Data) -> Self {
        self.data = std::sync::Arc::new(data);
        self
    }

    /// The requests to send, at least one, all of one origin.
    pub fn requests(&self) -> &[RequestSpec] {
        &self.requests
    }

    /// The requests' names (a row each in the results), empty when they are unnamed.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// Each request's weight in the mix.
    pub fn weights(&self) -> &[u32] {
        &self.weights
    }

    /// Which request each arrival sends: the weights in the URL order (`smooth` interleave, or
    /// `random`).
    pub fn mix(&self) -> Mix {
        Mix::try_new(&self.weights, self.url_order)
            .expect("weights were checked when the workload was made")
    }

    /// Names the requests and weighs them: one name per request, unique, each a valid name
    /// ([`is_request_name`]); the weights positive and within the mix's bounds.
    pub fn with_names(mut self, names: Vec<String>, weights: Vec<u32>) -> Result<Self, PlanError> {
        if weights.len() != self.requests.len() || names.len() != self.requests.len() {
            return Err(PlanError::MixTooLarge(format!(
                "{} names and {} weights for {} requests",
                names.len(),
                weights.len(),
                self.requests.len()
            )));
        }
        for (i, name) in names.iter().enumerate() {
            if !is_request_name(name) {
                return Err(PlanError::BadRequestName(name.clone()));
            }
            if names[..i].contains(name) {
                return Err(PlanError::DuplicateRequestName(name.clone()));
            }
        }
        Mix::try_new(&weights, self.url_order)?;
        self.names = names;
        self.weights = weights;
        Ok(self)
    }

    pub fn url_order(&self) -> UrlOrder {
        self.url_order
    }

    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    pub fn connect_timeout(&self) -> Duration {
        self.connect_timeout
    }

    pub fn insecure_tls(&self) -> bool {
        self.insecure_tls
    }

    /// Local addresses new connections leave from, round robin per worker thread (`--source-addrs`);
    /// empty lets the kernel choose. More addresses, more local ports per destination.
    pub fn source_addrs(&self) -> &[IpAddr] {
        &self.source_addrs
    }

    /// Reply statuses that count as served (`--ok-status`, 200-399 unless set).
    pub fn ok_status(&self) -> &StatusSet {
        &self.ok_status
    }

    /// The HTTP spoken to the target (`--http`).
    pub fn http(&self) -> HttpVersion {
        self.http
    }

    /// Requests one connection carries at once (`--streams`): HTTP/2 streams, 1 over HTTP/1.1.
    pub fn streams(&self) -> std::num::NonZeroU32 {
        self.streams
    }

    /// Whether TLS sessions are resumed (`--tls-sessions`); plain TCP ignores it.
    pub fn tls_sessions(&self) -> TlsSessions {
        self.tls_sessions
    }

    pub fn with_tls_sessions(mut self, tls_sessions: TlsSessions) -> Self {
        self.tls_sessions = tls_sessions;
        self
    }

    /// Sets the protocol and the streams per connection: more than one stream needs HTTP/2 (or
    /// `auto`, where a connection that ALPN puts on HTTP/1.1 carries one at a time).
    pub fn with_http(mut self, http: HttpVersion, streams: u32) -> Result<Self, PlanError> {
        let Some(n) = std::num::NonZeroU32::new(streams).filter(|n| n.get() <= MAX_STREAMS) else {
            return Err(PlanError::NotPositive {
                what: "--streams (streams per connection, at most 1000)",
                value: streams.to_string(),
            });
        };
        if n.get() > 1 && !http.multiplexes() {
            return Err(PlanError::StreamsNeedHttp2 { streams });
        }
        self.http = http;
        self.streams = n;
        Ok(self)
    }

    /// Whether the server closes every connections-model connection first (see
    /// [`RequestSpec::server_closes_last`]): then the TIME_WAIT is the server's, not the agent's ports.
    pub fn server_closes_last(&self) -> bool {
        self.requests.iter().all(RequestSpec::server_closes_last)
    }

    /// Checks the invariants the agent relies on: at least one request, one origin for all.
    pub fn try_new(
        requests: Vec<RequestSpec>,
        url_order: UrlOrder,
        timeout: Duration,
        connect_timeout: Duration,
        insecure_tls: bool,
    ) -> Result<Self, PlanError> {
        let first = requests.first().ok_or(PlanError::NoRequests)?;
        let origin = first.url().origin();
        for (i, r) in requests.iter().enumerate().skip(1) {
            if r.url().origin() != origin {
                return Err(PlanError::MixedOrigins {
                    first: origin,
                    index: i + 1,
                    other: r.url().origin(),
                });
            }
        }
        for (what, d) in [
            ("--timeout", timeout),
            ("--connect-timeout", connect_timeout),
        ] {
            if d.is_zero() {
                return Err(PlanError::NotPositive {
                    what,
                    value: "0".into(),
                });
            }
        }
        if requests.len() > super::MAX_REQUESTS {
            return Err(PlanError::MixTooLarge(format!(
                "{} requests; at most {}",
                requests.len(),
                super::MAX_REQUESTS
            )));
        }
        Ok(Workload {
            weights: vec![1; requests.len()],
            names: Vec::new(),
            requests,
            url_order,
            timeout,
            connect_timeout,
            insecure_tls,
            source_addrs: Vec::new(),
            ok_status: StatusSet::default(),
            http: HttpVersion::Http1,
            streams: std::num::NonZeroU32::MIN,
            tls_sessions: TlsSessions::Fresh,
            sessions: None,
            data: Default::default(),
        })
    }

    /// Sets the sessions each arrival of the connections model runs: every request they name must
    /// be one of the workload's.
    pub fn with_sessions(mut self, sessions: Sessions) -> Result<Self, PlanError> {
        sessions.fits(self.requests.len())?;
        self.sessions = Some(std::sync::Arc::new(sessions));
        Ok(self)
    }

    /// The sessions of a `--wsesslog` run, if it is one.
    pub fn sessions(&self) -> Option<&std::sync::Arc<Sessions>> {
        self.sessions.as_ref()
    }

    /// Sets the reply statuses that count as served.
    pub fn with_ok_status(mut self, ok: StatusSet) -> Self {
        self.ok_status = ok;
        self
    }

    /// Sets the source addresses: a valid list, of the target's family when the target is an address
    /// (a host name is checked by the agent, once it has resolved it).
    pub fn with_source_addrs(mut self, addrs: Vec<IpAddr>) -> Result<Self, PlanError> {
        if addrs.is_empty() {
            self.source_addrs = addrs;
            return Ok(self);
        }
        check_source_addrs(&addrs).map_err(|why| PlanError::BadSourceAddrs {
            input: addrs
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(","),
            why,
        })?;
        let origin = self.origin();
        if let Ok(target) = origin.host().parse::<IpAddr>()
            && family(target) != family(addrs[0])
        {
            return Err(PlanError::SourceFamily {
                source_family: family(addrs[0]),
                target: origin.authority(),
                target_family: family(target),
            });
        }
        self.source_addrs = addrs;
        Ok(self)
    }

    pub fn origin(&self) -> &Url {
        self.requests[0].url()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::parse_source_addrs;

    #[test]
    fn mixed_origins_are_refused() {
        let a = RequestSpec::try_new("GET", "http://a:1/", vec![], vec![]).unwrap();
        let b = RequestSpec::try_new("GET", "http://b:1/", vec![], vec![]).unwrap();
        let e = Workload::try_new(
            vec![a, b],
            UrlOrder::RoundRobin,
            Duration::from_secs(1),
            Duration::from_secs(1),
            false,
        )
        .unwrap_err();
        assert!(e.to_string().contains("URL 2 is http://b:1"), "{e}");
    }

    #[test]
    fn source_addrs_must_match_the_target_family() {
        let w = |url: &str| {
            Workload::try_new(
                vec![RequestSpec::try_new("GET", url, vec![], vec![]).unwrap()],
                UrlOrder::RoundRobin,
                Duration::from_secs(1),
                Duration::from_secs(1),
                false,
            )
            .unwrap()
        };
        let v4 = parse_source_addrs("127.0.0.2,127.0.0.3").unwrap();
        let v6 = parse_source_addrs("::1").unwrap();
        assert_eq!(
            w("http://127.0.0.1:8080/")
                .with_source_addrs(v4.clone())
                .unwrap()
                .source_addrs,
            v4
        );
        let e = w("http://127.0.0.1:8080/")
            .with_source_addrs(v6.clone())
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "--source-addrs are IPv6 but the target 127.0.0.1:8080 is IPv4: connections leave from an address of the target's family"
        );
        assert!(
            w("http://[::1]:8080/")
                .with_source_addrs(v4.clone())
                .is_err()
        );
        // A name is resolved by the agent, which checks then.
        assert!(w("http://localhost:8080/").with_source_addrs(v6).is_ok());
        // A list that did not come through the parser (a coordinator's message) is checked too.
        let twice = vec![v4[0], v4[0]];
        assert!(
            w("http://127.0.0.1/")
                .with_source_addrs(twice)
                .unwrap_err()
                .to_string()
                .contains("listed twice")
        );
    }
}
