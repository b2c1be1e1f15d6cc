//! The run plan as domain types that are valid by construction: what to send, which load model,
//! which steps, and one agent's share of a step.
use std::fmt;
use std::net::IpAddr;
use std::num::{NonZeroU32, NonZeroU64};
use std::time::Duration;

use crate::schedule::Slice;

/// Everything that can be wrong with a plan, said so a person can fix it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PlanError {
    #[error("bad URL '{url}': {why}")]
    BadUrl { url: String, why: String },
    #[error("{what} must be a positive number, got {value}")]
    NotPositive { what: &'static str, value: String },
    #[error("--low-rate ({low}) is above --high-rate ({high})")]
    LowAboveHigh { low: f64, high: f64 },
    #[error("the ramp from {low} to {high} by {step} has {count} steps; at most {max} are allowed")]
    TooManySteps {
        low: f64,
        high: f64,
        step: f64,
        count: u64,
        max: u64,
    },
    #[error("no steps: give --steps, or --low-rate/--high-rate/--rate-step")]
    NoSteps,
    #[error("the concurrency model takes whole connection counts; step {index} is {value}")]
    FractionalConnections { index: usize, value: f64 },
    #[error("--num-conn only fits the connections model, not {0}")]
    NumConnWithoutConnections(&'static str),
    #[error("no request to send: give a URL or --urls FILE")]
    NoRequests,
    #[error("all URLs must share one origin ({first}); URL {index} is {other}")]
    MixedOrigins {
        first: String,
        index: usize,
        other: String,
    },
    #[error("bad header '{0}': write it as 'Name: value'")]
    BadHeader(String),
    #[error(
        "header 'Content-Length: {declared}' does not match the body's {actual} bytes: leave it out, stampede sets it from the body"
    )]
    ContentLength { declared: String, actual: usize },
    #[error(
        "header 'Transfer-Encoding: {0}' is not supported: stampede sends the body as given, framed by its Content-Length; leave it out"
    )]
    TransferEncoding(String),
    #[error("bad method '{0}': use a token such as GET or POST")]
    BadMethod(String),
    #[error("rate {0} is outside {MIN_RATE} to {MAX_RATE} per second")]
    RateRange(f64),
    #[error("a step would last {0:?}; at most 24 h is allowed")]
    StepTooLong(Duration),
    #[error("--step-duration {0:?} is too short: a step lasts at least 1ms")]
    StepTooShort(Duration),
    #[error(
        "a request count (-n) ends a closed loop: use --model concurrency (or -c N), not {0}; an open model's count is its rate times --step-duration"
    )]
    MaxRequestsWithoutConcurrency(&'static str),
    #[error(
        "-n {requests} is fewer requests than the {connections} connections of a step: give each connection one at least (ab refuses this too)"
    )]
    MaxRequestsBelowConnections { requests: u64, connections: u64 },
    #[error("an open-model step share needs at least one slice of the arrivals")]
    NoSlices,
    #[error("slice {index} of {count} does not exist")]
    BadSlice { index: u64, count: u64 },
    #[error(
        "bad --source-addrs '{input}': {why} (write addresses and ranges separated by commas, e.g. 127.0.0.1,127.0.0.2 or 127.0.0.1-127.0.0.8)"
    )]
    BadSourceAddrs { input: String, why: String },
    #[error(
        "--source-addrs are {source_family} but the target {target} is {target_family}: connections leave from an address of the target's family"
    )]
    SourceFamily {
        source_family: &'static str,
        target: String,
        target_family: &'static str,
    },
}

// The doc comments of these enums' variants are what `--help` shows beside each value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
#[serde(rename_all = "kebab-case")]
pub enum LoadModel {
    /// httperf/autobench: new connections per second, --num-call requests each; a new connection
    /// per request by default (open)
    Connections,
    /// wrk2/k6 arrival rate: requests per second over a keep-alive pool (open)
    Requests,
    /// ab/wrk: N connections, each sending request after request (closed loop)
    Concurrency,
}

impl LoadModel {
    pub fn name(self) -> &'static str {
        match self {
            LoadModel::Connections => "connections",
            LoadModel::Requests => "requests",
            LoadModel::Concurrency => "concurrency",
        }
    }

    /// Open models send on a schedule whatever the replies do, so latency counts from the intended send.
    pub fn is_open(self) -> bool {
        !matches!(self, LoadModel::Concurrency)
    }
}

impl fmt::Display for LoadModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How arrivals are spaced in an open model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
#[serde(rename_all = "kebab-case")]
pub enum Arrival {
    /// evenly spaced
    #[cfg_attr(feature = "cli", value(alias = "constant"))]
    #[serde(alias = "constant")]
    Uniform,
    /// exponential gaps, as independent users arrive
    #[cfg_attr(feature = "cli", value(alias = "exponential"))]
    #[serde(alias = "exponential")]
    Poisson,
}

impl Arrival {
    pub fn name(self) -> &'static str {
        match self {
            Arrival::Uniform => "uniform",
            Arrival::Poisson => "poisson",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
#[serde(rename_all = "kebab-case")]
pub enum UrlOrder {
    /// each URL in turn
    #[cfg_attr(feature = "cli", value(alias = "roundrobin", alias = "sequential"))]
    #[serde(alias = "roundrobin", alias = "sequential")]
    RoundRobin,
    /// a random URL per request (--seed)
    Random,
}

impl UrlOrder {
    pub fn name(self) -> &'static str {
        match self {
            UrlOrder::RoundRobin => "round-robin",
            UrlOrder::Random => "random",
        }
    }
}

/// When a step ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepLimit {
    Duration(Duration),
    /// autobench's `num_conn`: the step ends once this many connections were opened.
    Connections(NonZeroU64),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    Http,
    Https,
}

/// An absolute http(s) URL, split into what a connection needs and what a request line needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Url {
    pub scheme: Scheme,
    /// Host as written, without brackets for IPv6.
    pub host: String,
    pub port: u16,
    /// Path and query, always starting with '/'.
    pub path: String,
}

impl Url {
    pub fn parse(input: &str) -> Result<Url, PlanError> {
        let bad = |why: &str| PlanError::BadUrl {
            url: input.to_string(),
            why: why.to_string(),
        };
        if input.is_empty() {
            return Err(bad("it is empty"));
        }
        if input.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(bad("it contains white space or control characters"));
        }
        let (scheme, rest) = if let Some(r) = input.strip_prefix("http://") {
            (Scheme::Http, r)
        } else if let Some(r) = input.strip_prefix("https://") {
            (Scheme::Https, r)
        } else {
            return Err(bad("it must start with http:// or https://"));
        };
        let (authority, path) = match rest.find(['/', '?']) {
            Some(i) if rest.as_bytes()[i] == b'/' => (&rest[..i], rest[i..].to_string()),
            Some(i) => (&rest[..i], format!("/{}", &rest[i..])),
            None => (rest, "/".to_string()),
        };
        let path = match path.find('#') {
            Some(i) => path[..i].to_string(),
            None => path,
        };
        if authority.contains('@') {
            return Err(bad(
                "user information in URLs is not supported; use -H 'Authorization: ...'",
            ));
        }
        let default_port = match scheme {
            Scheme::Http => 80,
            Scheme::Https => 443,
        };
        let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
            let end = v6
                .find(']')
                .ok_or_else(|| bad("an IPv6 host lacks its closing ']'"))?;
            let host = &v6[..end];
            let after = &v6[end + 1..];
            let port = match after.strip_prefix(':') {
                Some(p) => {
                    parse_port(p).ok_or_else(|| bad("the port is not a number from 1 to 65535"))?
                }
                None if after.is_empty() => default_port,
                None => return Err(bad("unexpected text after the IPv6 host")),
            };
            if host.parse::<std::net::Ipv6Addr>().is_err() {
                return Err(bad("the bracketed host is not an IPv6 address"));
            }
            (host.to_string(), port)
        } else {
            match authority.rsplit_once(':') {
                Some((h, p)) => (
                    h.to_string(),
                    parse_port(p).ok_or_else(|| bad("the port is not a number from 1 to 65535"))?,
                ),
                None => (authority.to_string(), default_port),
            }
        };
        if host.is_empty() {
            return Err(bad("it has no host"));
        }
        if !host.contains(':')
            && !host
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
        {
            return Err(bad("the host has characters a host name cannot have"));
        }
        Ok(Url {
            scheme,
            host,
            port,
            path,
        })
    }

    /// scheme://host:port, the part every URL of a run must share.
    pub fn origin(&self) -> String {
        let scheme = match self.scheme {
            Scheme::Http => "http",
            Scheme::Https => "https",
        };
        format!("{scheme}://{}", self.authority())
    }

    /// host:port as it goes in a Host header (brackets for IPv6).
    pub fn authority(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

fn parse_port(p: &str) -> Option<u16> {
    if p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    p.parse::<u16>().ok().filter(|p| *p != 0)
}

/// One request to send, as the user wrote it; the agent turns it into wire bytes once.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestSpec {
    pub method: String,
    pub url: Url,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl RequestSpec {
    /// Whether the server closes a connection after this request when it is the connection's last:
    /// the agent then sends `Connection: close` itself, unless the user set a Connection header, in
    /// which case only a `close` of theirs does it. The side that closes first keeps the TIME_WAIT.
    pub fn server_closes_last(&self) -> bool {
        let mut theirs = self
            .headers
            .iter()
            .filter(|(name, _)| name.eq_ignore_ascii_case("connection"))
            .peekable();
        theirs.peek().is_none()
            || theirs.any(|(_, v)| v.split(',').any(|t| t.trim().eq_ignore_ascii_case("close")))
    }
}

impl RequestSpec {
    pub fn try_new(
        method: &str,
        url: &str,
        headers: Vec<(String, String)>,
        body: Vec<u8>,
    ) -> Result<Self, PlanError> {
        if method.is_empty()
            || !method
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
        {
            return Err(PlanError::BadMethod(method.to_string()));
        }
        for (name, value) in &headers {
            let name_ok = !name.is_empty()
                && name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
            if !name_ok || value.bytes().any(|b| b == b'\r' || b == b'\n' || b == 0) {
                return Err(PlanError::BadHeader(format!("{name}: {value}")));
            }
            // The agent sends the body as it is: a length or an encoding of the user's that says
            // otherwise would desynchronise the connection (the server reads past or short of it).
            if name.eq_ignore_ascii_case("content-length")
                && value.trim().parse::<usize>().ok() != Some(body.len())
            {
                return Err(PlanError::ContentLength {
                    declared: value.clone(),
                    actual: body.len(),
                });
            }
            if name.eq_ignore_ascii_case("transfer-encoding") {
                return Err(PlanError::TransferEncoding(value.clone()));
            }
        }
        Ok(RequestSpec {
            method: method.to_ascii_uppercase(),
            url: Url::parse(url)?,
            headers,
            body,
        })
    }
}

/// Parses a `Name: value` header argument.
pub fn parse_header(arg: &str) -> Result<(String, String), PlanError> {
    let (name, value) = arg
        .split_once(':')
        .ok_or_else(|| PlanError::BadHeader(arg.to_string()))?;
    let name = name.trim();
    if name.is_empty() {
        return Err(PlanError::BadHeader(arg.to_string()));
    }
    Ok((name.to_string(), value.trim().to_string()))
}

/// A bad line in a URL list file.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("line {line}: {why}")]
pub struct UrlListError {
    pub line: usize,
    pub why: String,
}

/// Parses a siege-style URL list: one `URL` or `METHOD URL` per line; blank lines and `#` comments skipped.
pub fn parse_url_list(text: &str) -> Result<Vec<(String, String)>, UrlListError> {
    let mut out = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let err = |why: String| UrlListError { line: i + 1, why };
        let mut words = line.split_whitespace();
        let first = words.next().unwrap_or_default();
        let (method, url) = match words.next() {
            Some(url) => (first.to_string(), url.to_string()),
            None => ("GET".to_string(), first.to_string()),
        };
        if words.next().is_some() {
            return Err(err(format!(
                "expected 'URL' or 'METHOD URL', found '{line}'"
            )));
        }
        RequestSpec::try_new(&method, &url, Vec::new(), Vec::new())
            .map_err(|e| err(e.to_string()))?;
        out.push((method, url));
    }
    if out.is_empty() {
        return Err(UrlListError {
            line: 0,
            why: "the file lists no URL".to_string(),
        });
    }
    Ok(out)
}

/// The most source addresses one run may list: enough for any real NIC's aliases, and a typo such as
/// `10.0.0.0-10.255.255.255` is refused instead of allocating 16 million entries.
pub const MAX_SOURCE_ADDRS: u128 = 4096;

fn family(ip: IpAddr) -> &'static str {
    if ip.is_ipv4() { "IPv4" } else { "IPv6" }
}

/// Parses `--source-addrs`: addresses and inclusive ranges separated by commas, e.g.
/// `127.0.0.1,127.0.0.2` or `127.0.0.1-127.0.0.8` or `10.0.0.5,10.0.0.10-10.0.0.12` (IPv6 alike).
/// The order is kept: it is the round-robin order.
pub fn parse_source_addrs(input: &str) -> Result<Vec<IpAddr>, PlanError> {
    let bad = |why: String| PlanError::BadSourceAddrs {
        input: input.to_string(),
        why,
    };
    let ip = |s: &str| {
        s.trim()
            .parse::<IpAddr>()
            .map_err(|_| bad(format!("'{}' is not an IP address", s.trim())))
    };
    let mut out = Vec::new();
    for item in input.split(',') {
        let item = item.trim();
        if item.is_empty() {
            continue;
        }
        // '-' never occurs in an IPv4 or IPv6 address, so it can only be a range.
        let Some((a, b)) = item.split_once('-') else {
            out.push(ip(item)?);
            continue;
        };
        let (first, last) = (ip(a)?, ip(b)?);
        let (lo, hi) = match (first, last) {
            (IpAddr::V4(a), IpAddr::V4(b)) => (u128::from(u32::from(a)), u128::from(u32::from(b))),
            (IpAddr::V6(a), IpAddr::V6(b)) => (u128::from(a), u128::from(b)),
            _ => return Err(bad(format!("range {item} mixes IPv4 and IPv6"))),
        };
        if lo > hi {
            return Err(bad(format!("range {item} runs backwards")));
        }
        if hi - lo >= MAX_SOURCE_ADDRS || out.len() as u128 + (hi - lo) >= MAX_SOURCE_ADDRS {
            return Err(bad(format!("more than {MAX_SOURCE_ADDRS} addresses")));
        }
        for v in lo..=hi {
            out.push(match first {
                // In range: both ends are IPv4, so every value between fits in 32 bits.
                IpAddr::V4(_) => IpAddr::from(std::net::Ipv4Addr::from(v as u32)),
                IpAddr::V6(_) => IpAddr::from(std::net::Ipv6Addr::from(v)),
            });
        }
    }
    if out.is_empty() {
        return Err(bad("it lists no address".into()));
    }
    check_source_addrs(&out).map_err(bad)?;
    Ok(out)
}

/// What every source list must satisfy, however it arrived (flag, plan file or a coordinator's message).
fn check_source_addrs(addrs: &[IpAddr]) -> Result<(), String> {
    if addrs.len() as u128 > MAX_SOURCE_ADDRS {
        return Err(format!("more than {MAX_SOURCE_ADDRS} addresses"));
    }
    let mut seen = std::collections::HashSet::new();
    for a in addrs {
        if a.is_unspecified() || a.is_multicast() || *a == IpAddr::from([255, 255, 255, 255]) {
            return Err(format!(
                "{a} cannot be the source of a TCP connection (unspecified, multicast or broadcast)"
            ));
        }
        if family(*a) != family(addrs[0]) {
            return Err(format!(
                "it mixes IPv4 and IPv6 ({} and {a}); one target has one family",
                addrs[0]
            ));
        }
        if !seen.insert(a) {
            return Err(format!("{a} is listed twice"));
        }
    }
    Ok(())
}

/// What to send, fixed for the run.
#[derive(Debug, Clone, PartialEq)]
pub struct Workload {
    pub requests: Vec<RequestSpec>,
    pub url_order: UrlOrder,
    pub timeout: Duration,
    pub connect_timeout: Duration,
    pub insecure_tls: bool,
    /// Local addresses new connections leave from, round robin per worker thread (`--source-addrs`);
    /// empty lets the kernel choose. More addresses, more local ports per destination.
    pub source_addrs: Vec<IpAddr>,
    /// Reply statuses that count as served (`--ok-status`, 200-399 unless set).
    pub ok_status: crate::status::StatusSet,
}

impl Workload {
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
        let origin = first.url.origin();
        for (i, r) in requests.iter().enumerate().skip(1) {
            if r.url.origin() != origin {
                return Err(PlanError::MixedOrigins {
                    first: origin,
                    index: i + 1,
                    other: r.url.origin(),
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
        Ok(Workload {
            requests,
            url_order,
            timeout,
            connect_timeout,
            insecure_tls,
            source_addrs: Vec::new(),
            ok_status: crate::status::StatusSet::default(),
        })
    }

    /// Sets the reply statuses that count as served.
    pub fn with_ok_status(mut self, ok: crate::status::StatusSet) -> Self {
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
        if let Ok(target) = origin.host.parse::<IpAddr>()
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
        &self.requests[0].url
    }
}

/// One agent's share of one step: everything its workers need to run it.
#[derive(Debug, Clone, PartialEq)]
pub struct StepShare {
    pub step: u32,
    pub model: LoadModel,
    /// The whole step's connections/s (connections model) or requests/s (requests model); 0 for
    /// concurrency. The agent sends only the arrivals in `slices`.
    pub rate: f64,
    /// This agent's part of the step's arrival sequence; together the agents' slices partition it.
    pub slices: Vec<Slice>,
    /// Connections held open (concurrency model).
    pub connections: u32,
    pub num_call: NonZeroU32,
    pub max_connections: NonZeroU32,
    pub limit: StepLimit,
    pub arrival: Arrival,
    pub seed: u64,
    /// Concurrency model: this agent's part of the step's request count (ab's `-n`); the step ends
    /// once it is sent, or at its limit, whichever comes first.
    pub max_requests: Option<NonZeroU64>,
}

impl StepShare {
    /// Validates a share received from a coordinator (the agent trusts nothing it is sent).
    #[allow(clippy::too_many_arguments)]
    pub fn try_new(
        step: u32,
        model: LoadModel,
        rate: f64,
        slices: Vec<Slice>,
        connections: u32,
        num_call: u32,
        max_connections: u32,
        limit: StepLimit,
        arrival: Arrival,
        seed: u64,
    ) -> Result<Self, PlanError> {
        let positive = |what, v: u32| {
            NonZeroU32::new(v).ok_or(PlanError::NotPositive {
                what,
                value: v.to_string(),
            })
        };
        match model {
            LoadModel::Concurrency if connections == 0 => {
                return Err(PlanError::NotPositive {
                    what: "connections",
                    value: "0".into(),
                });
            }
            LoadModel::Connections | LoadModel::Requests if !(rate.is_finite() && rate > 0.0) => {
                return Err(PlanError::NotPositive {
                    what: "rate",
                    value: rate.to_string(),
                });
            }
            LoadModel::Connections | LoadModel::Requests
                if !(MIN_RATE..=MAX_RATE).contains(&rate) =>
            {
                return Err(PlanError::RateRange(rate));
            }
            _ => {}
        }
        if matches!(limit, StepLimit::Connections(_)) && model != LoadModel::Connections {
            return Err(PlanError::NumConnWithoutConnections(model.name()));
        }
        if slices.is_empty() && model.is_open() {
            return Err(PlanError::NoSlices);
        }
        if let Some(bad) = slices.iter().find(|s| s.count == 0 || s.index >= s.count) {
            return Err(PlanError::BadSlice {
                index: bad.index,
                count: bad.count,
            });
        }
        if limit == StepLimit::Duration(Duration::ZERO) {
            return Err(PlanError::NotPositive {
                what: "step duration",
                value: "0".into(),
            });
        }
        check_length(limit, rate)?;
        Ok(StepShare {
            step,
            model,
            rate,
            slices,
            connections,
            num_call: positive("num-call", num_call)?,
            max_connections: positive("max-connections", max_connections)?,
            limit,
            arrival,
            seed,
            max_requests: None,
        })
    }

    /// Adds a request count to a received share (0: none); only a closed loop takes one.
    pub fn with_max_requests(mut self, n: u64) -> Result<Self, PlanError> {
        self.max_requests = NonZeroU64::new(n);
        if self.max_requests.is_some() && self.model != LoadModel::Concurrency {
            return Err(PlanError::MaxRequestsWithoutConcurrency(self.model.name()));
        }
        Ok(self)
    }

    /// The step's scheduled length: its duration, or the time for the whole fleet to open `num_conn`
    /// connections (the same for every agent).
    pub fn scheduled_duration(&self) -> Duration {
        match self.limit {
            StepLimit::Duration(d) => d,
            StepLimit::Connections(n) => Duration::from_secs_f64(n.get() as f64 / self.rate),
        }
    }
}

/// The whole run: a model, a list of step values, and what to send.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub model: LoadModel,
    /// Rates (conn/s or req/s) or, for concurrency, connection counts; one per step, in order.
    pub steps: Vec<f64>,
    pub limit: StepLimit,
    pub num_call: NonZeroU32,
    pub max_connections: NonZeroU32,
    pub arrival: Arrival,
    pub workload: Workload,
    /// Concurrency model: every step ends after this many requests (ab's `-n`), or at `limit`.
    pub max_requests: Option<NonZeroU64>,
}

/// The most steps one run may have; a typo like `--rate-step 0.001` should not plan a week of load.
pub const MAX_STEPS: u64 = 10_000;
/// Rates outside this range are typos, not plans (and would overflow time arithmetic).
pub const MIN_RATE: f64 = 0.001;
pub const MAX_RATE: f64 = 1e9;
/// The longest one step may last.
pub const MAX_STEP_DURATION: Duration = Duration::from_secs(24 * 3600);
/// The shortest: the control protocol carries a step's length in whole milliseconds.
pub const MIN_STEP_DURATION: Duration = Duration::from_millis(1);

impl Plan {
    pub fn try_new(
        model: LoadModel,
        steps: Vec<f64>,
        limit: StepLimit,
        num_call: NonZeroU32,
        max_connections: NonZeroU32,
        arrival: Arrival,
        workload: Workload,
    ) -> Result<Self, PlanError> {
        if steps.is_empty() {
            return Err(PlanError::NoSteps);
        }
        for (i, v) in steps.iter().enumerate() {
            if !(v.is_finite() && *v > 0.0) {
                return Err(PlanError::NotPositive {
                    what: "every step value",
                    value: v.to_string(),
                });
            }
            if model == LoadModel::Concurrency && v.fract() != 0.0 {
                return Err(PlanError::FractionalConnections {
                    index: i + 1,
                    value: *v,
                });
            }
            if model == LoadModel::Concurrency && *v > 10_000_000.0 {
                return Err(PlanError::NotPositive {
                    what: "a connection count (at most 10000000)",
                    value: v.to_string(),
                });
            }
            if model.is_open() {
                if !(MIN_RATE..=MAX_RATE).contains(v) {
                    return Err(PlanError::RateRange(*v));
                }
                check_length(limit, *v)?;
            }
        }
        if let StepLimit::Duration(d) = limit {
            check_length(limit, 1.0).map_err(|_| PlanError::StepTooLong(d))?;
            if d < MIN_STEP_DURATION {
                return Err(PlanError::StepTooShort(d));
            }
        }
        if matches!(limit, StepLimit::Connections(_)) && model != LoadModel::Connections {
            return Err(PlanError::NumConnWithoutConnections(model.name()));
        }
        Ok(Plan {
            model,
            steps,
            limit,
            num_call,
            max_connections,
            arrival,
            workload,
            max_requests: None,
        })
    }

    /// Ends every step after `n` requests (split exactly among agents and their workers); only a
    /// closed loop counts its requests this way, the open models are counted by their schedule.
    pub fn with_max_requests(mut self, n: NonZeroU64) -> Result<Self, PlanError> {
        if self.model != LoadModel::Concurrency {
            return Err(PlanError::MaxRequestsWithoutConcurrency(self.model.name()));
        }
        // As ab refuses a concurrency above its request count: a connection without a request of
        // its own would have no count to stop it.
        if let Some(&c) = self.steps.iter().find(|c| **c > n.get() as f64) {
            return Err(PlanError::MaxRequestsBelowConnections {
                requests: n.get(),
                connections: c as u64,
            });
        }
        self.max_requests = Some(n);
        Ok(self)
    }

    /// The request rate the plan demands at a step value, or None for the closed model.
    pub fn demanded_request_rate(&self, value: f64) -> Option<f64> {
        match self.model {
            LoadModel::Connections => Some(value * f64::from(self.num_call.get())),
            LoadModel::Requests => Some(value),
            LoadModel::Concurrency => None,
        }
    }

    /// Splits a step among agents in proportion to `weights` (e.g. their cores). Open-model arrivals
    /// are dealt out exactly: of every `sum(weights)` consecutive arrivals, agent `a` sends `weights[a]`,
    /// so the shares add up to the whole step whatever the rate. Connection counts are split by largest
    /// remainder, so they too add up exactly.
    pub fn step_shares(&self, index: usize, seed: u64, weights: &[u64]) -> Vec<StepShare> {
        let value = self.steps[index];
        let total: u64 = weights.iter().sum::<u64>().max(1);
        let connections = split_proportional(value as u64, weights);
        // Every agent needs at least one pool connection to send anything at all.
        let max_connections = split_proportional(u64::from(self.max_connections.get()), weights);
        // A request count goes with the connections that send it: an agent without any sends none.
        let max_requests = self
            .max_requests
            .map(|n| split_proportional(n.get(), &connections));
        let owners = interleave(weights);
        (0..weights.len())
            .map(|a| {
                let slices = owners
                    .iter()
                    .enumerate()
                    .filter(|(_, owner)| **owner == a)
                    .map(|(index, _)| Slice {
                        index: index as u64,
                        count: total,
                    })
                    .collect();
                StepShare {
                    step: index as u32,
                    model: self.model,
                    rate: if self.model == LoadModel::Concurrency {
                        0.0
                    } else {
                        value
                    },
                    slices,
                    connections: if self.model == LoadModel::Concurrency {
                        connections[a] as u32
                    } else {
                        0
                    },
                    num_call: self.num_call,
                    max_connections: NonZeroU32::new(max_connections[a].max(1) as u32)
                        .expect("at least one"),
                    limit: self.limit,
                    arrival: self.arrival,
                    seed,
                    max_requests: max_requests.as_ref().and_then(|m| NonZeroU64::new(m[a])),
                }
            })
            .collect()
    }
}

/// Deals `sum(weights)` positions out to agents by smooth weighted round robin (as nginx balances):
/// agent `a` gets `weights[a]` of them, spread out rather than in one block, so that any prefix of the
/// arrivals is shared nearly in proportion. Returns each position's owner.
pub fn interleave(weights: &[u64]) -> Vec<usize> {
    let total: i128 = weights.iter().map(|w| i128::from(*w)).sum();
    let mut current = vec![0i128; weights.len()];
    (0..total)
        .map(|_| {
            for (c, w) in current.iter_mut().zip(weights) {
                *c += i128::from(*w);
            }
            let pick = (0..weights.len())
                .max_by_key(|&a| (current[a], std::cmp::Reverse(a)))
                .expect("at least one agent");
            current[pick] -= total;
            pick
        })
        .collect()
}

/// Splits `total` in proportion to `weights` so that the parts sum to `total` exactly (largest remainder).
pub fn split_proportional(total: u64, weights: &[u64]) -> Vec<u64> {
    let sum: u64 = weights.iter().sum();
    if sum == 0 {
        return vec![0; weights.len()];
    }
    let mut parts: Vec<u64> = weights.iter().map(|w| total * w / sum).collect();
    let mut rest = total - parts.iter().sum::<u64>();
    let mut order: Vec<usize> = (0..weights.len()).collect();
    // Largest remainder first; ties go to the earlier agent.
    order.sort_by_key(|&i| std::cmp::Reverse((total * weights[i]) % sum));
    for i in order {
        if rest == 0 {
            break;
        }
        parts[i] += 1;
        rest -= 1;
    }
    parts
}

/// Refuses steps longer than [`MAX_STEP_DURATION`], e.g. a `num_conn` of a million at 1 conn/s.
fn check_length(limit: StepLimit, rate: f64) -> Result<(), PlanError> {
    let secs = match limit {
        StepLimit::Duration(d) => d.as_secs_f64(),
        StepLimit::Connections(n) => n.get() as f64 / rate,
    };
    if secs > MAX_STEP_DURATION.as_secs_f64() || !secs.is_finite() {
        return Err(PlanError::StepTooLong(Duration::from_secs_f64(
            secs.min(MAX_STEP_DURATION.as_secs_f64() * 1000.0),
        )));
    }
    Ok(())
}

/// autobench's ramp: low, low + step, ... up to and including high (within rounding).
pub fn ramp(low: f64, high: f64, step: f64) -> Result<Vec<f64>, PlanError> {
    for (what, v) in [
        ("--low-rate", low),
        ("--high-rate", high),
        ("--rate-step", step),
    ] {
        if !(v.is_finite() && v > 0.0) {
            return Err(PlanError::NotPositive {
                what,
                value: v.to_string(),
            });
        }
    }
    if low > high {
        return Err(PlanError::LowAboveHigh { low, high });
    }
    let count = ((high - low) / step + 1e-9).floor() as u64 + 1;
    if count > MAX_STEPS {
        return Err(PlanError::TooManySteps {
            low,
            high,
            step,
            count,
            max: MAX_STEPS,
        });
    }
    // Computed by multiplication, not repeated addition, so 0.1 steps do not drift.
    Ok((0..count).map(|i| low + step * i as f64).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ramp_includes_both_ends() {
        assert_eq!(ramp(20.0, 200.0, 10.0).unwrap().len(), 19);
        assert_eq!(ramp(10.0, 30.0, 10.0).unwrap(), vec![10.0, 20.0, 30.0]);
        assert_eq!(ramp(5.0, 5.0, 1.0).unwrap(), vec![5.0]);
        assert_eq!(ramp(0.1, 0.3, 0.1).unwrap().len(), 3);
    }

    #[test]
    fn ramp_refuses_bad_bounds() {
        assert_eq!(
            ramp(50.0, 10.0, 5.0).unwrap_err().to_string(),
            "--low-rate (50) is above --high-rate (10)"
        );
        assert!(
            ramp(0.0, 10.0, 1.0)
                .unwrap_err()
                .to_string()
                .contains("--low-rate must be a positive")
        );
        assert!(ramp(-1.0, 10.0, 1.0).is_err());
        assert!(matches!(
            ramp(1.0, 1e9, 1.0),
            Err(PlanError::TooManySteps { .. })
        ));
    }

    #[test]
    fn urls_parse_into_parts() {
        let u = Url::parse("http://127.0.0.1:8080/a/b?x=1").unwrap();
        assert_eq!(
            (u.host.as_str(), u.port, u.path.as_str()),
            ("127.0.0.1", 8080, "/a/b?x=1")
        );
        let u = Url::parse("https://example.test").unwrap();
        assert_eq!(
            (u.port, u.path.as_str(), u.scheme),
            (443, "/", Scheme::Https)
        );
        let u = Url::parse("http://[::1]:9/x").unwrap();
        assert_eq!(
            (u.host.as_str(), u.authority()),
            ("::1", "[::1]:9".to_string())
        );
        let u = Url::parse("http://h?q=1#frag").unwrap();
        assert_eq!(u.path, "/?q=1");
    }

    #[test]
    fn user_content_length_overriding_the_body_length_is_refused() {
        let spec = |h: &str, body: &[u8]| {
            RequestSpec::try_new(
                "POST",
                "http://127.0.0.1:9/",
                vec![parse_header(h).unwrap()],
                body.to_vec(),
            )
        };
        assert_eq!(
            spec("Content-Length: 99", b"1234567")
                .unwrap_err()
                .to_string(),
            "header 'Content-Length: 99' does not match the body's 7 bytes: leave it out, stampede sets it from the body"
        );
        assert!(matches!(
            spec("content-length: x", b""),
            Err(PlanError::ContentLength { .. })
        ));
        // One that tells the truth is harmless: the agent then adds none of its own.
        assert!(spec("Content-Length: 7", b"1234567").is_ok());
        assert_eq!(
            spec("Transfer-Encoding: chunked", b"hello").unwrap_err(),
            PlanError::TransferEncoding("chunked".into())
        );
    }

    #[test]
    fn bad_urls_say_why() {
        for (url, why) in [
            ("ftp://x/", "must start with http://"),
            ("http://", "no host"),
            ("http://h:0/", "port"),
            ("http://h:99999/", "port"),
            ("http://h:abc/", "port"),
            ("http://a b/", "white space"),
            ("http://u:p@h/", "user information"),
            ("http://[::1/", "closing"),
            ("http://ho$t/", "characters"),
        ] {
            let e = Url::parse(url).unwrap_err().to_string();
            assert!(e.contains(why), "{url}: {e}");
        }
    }

    #[test]
    fn url_list_names_the_bad_line() {
        let ok = parse_url_list("# c\nhttp://h/a\n\nPOST http://h/b\n").unwrap();
        assert_eq!(
            ok,
            vec![
                ("GET".into(), "http://h/a".into()),
                ("POST".into(), "http://h/b".into())
            ]
        );
        let e = parse_url_list("http://h/a\nnot-a-url\n").unwrap_err();
        assert_eq!(e.line, 2);
        assert!(
            e.to_string().starts_with("line 2: bad URL 'not-a-url'"),
            "{e}"
        );
        assert_eq!(parse_url_list("GET http://h/ extra\n").unwrap_err().line, 1);
        assert!(
            parse_url_list("# nothing\n")
                .unwrap_err()
                .to_string()
                .contains("no URL")
        );
    }

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
    fn source_addrs_parse_lists_and_ranges_in_order() {
        let ips = |v: &[&str]| {
            v.iter()
                .map(|s| s.parse::<IpAddr>().unwrap())
                .collect::<Vec<_>>()
        };
        assert_eq!(
            parse_source_addrs("127.0.0.1,127.0.0.2, 127.0.0.3").unwrap(),
            ips(&["127.0.0.1", "127.0.0.2", "127.0.0.3"])
        );
        assert_eq!(
            parse_source_addrs("10.0.0.5,10.0.0.254-10.0.1.1").unwrap(),
            ips(&[
                "10.0.0.5",
                "10.0.0.254",
                "10.0.0.255",
                "10.0.1.0",
                "10.0.1.1"
            ])
        );
        assert_eq!(
            parse_source_addrs("fd00::1-fd00::3").unwrap(),
            ips(&["fd00::1", "fd00::2", "fd00::3"])
        );
        assert_eq!(parse_source_addrs("127.0.0.1-127.0.0.8").unwrap().len(), 8);
        assert_eq!(
            parse_source_addrs("10.0.0.0-10.0.15.255").unwrap().len() as u128,
            MAX_SOURCE_ADDRS
        );
    }

    #[test]
    fn bad_source_addrs_say_why() {
        for (input, why) in [
            ("", "lists no address"),
            (" , ", "lists no address"),
            ("127.0.0.1,localhost", "'localhost' is not an IP address"),
            ("127.0.0.300", "is not an IP address"),
            ("127.0.0.8-127.0.0.1", "runs backwards"),
            ("127.0.0.1-::1", "mixes IPv4 and IPv6"),
            ("127.0.0.1,::1", "mixes IPv4 and IPv6"),
            ("127.0.0.1,127.0.0.1", "127.0.0.1 is listed twice"),
            ("127.0.0.1-127.0.0.3,127.0.0.2", "listed twice"),
            ("0.0.0.0", "cannot be the source"),
            ("224.0.0.1", "cannot be the source"),
            ("10.0.0.0-10.255.255.255", "more than 4096 addresses"),
            ("::-ffff::", "more than 4096 addresses"),
            ("1-2-3", "is not an IP address"),
        ] {
            let e = parse_source_addrs(input).unwrap_err().to_string();
            assert!(e.contains(why), "{input}: {e}");
            assert!(
                e.starts_with(&format!("bad --source-addrs '{input}'")),
                "{e}"
            );
        }
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

    #[test]
    fn interleave_spreads_each_agent_out() {
        assert_eq!(interleave(&[2, 2, 2]), vec![0, 1, 2, 0, 1, 2]);
        assert_eq!(interleave(&[1, 3]), vec![1, 0, 1, 1]);
        let dealt = interleave(&[5, 1, 2]);
        for (a, w) in [5u64, 1, 2].iter().enumerate() {
            assert_eq!(dealt.iter().filter(|o| **o == a).count() as u64, *w);
        }
    }

    #[test]
    fn proportional_split_sums_exactly() {
        assert_eq!(split_proportional(10, &[1, 1, 1]), vec![4, 3, 3]);
        assert_eq!(split_proportional(7, &[2, 4, 2]), vec![2, 3, 2]);
        assert_eq!(split_proportional(0, &[3, 1]), vec![0, 0]);
        assert_eq!(split_proportional(5, &[0, 0]), vec![0, 0]);
        for total in 0..50 {
            assert_eq!(
                split_proportional(total, &[3, 5, 1, 7]).iter().sum::<u64>(),
                total
            );
        }
    }

    #[test]
    fn headers_and_methods_are_checked() {
        assert_eq!(
            parse_header("X-A: b c").unwrap(),
            ("X-A".into(), "b c".into())
        );
        assert!(parse_header("nocolon").is_err());
        assert!(RequestSpec::try_new("GE T", "http://h/", vec![], vec![]).is_err());
        assert!(
            RequestSpec::try_new(
                "GET",
                "http://h/",
                vec![("X".into(), "a\r\nB: c".into())],
                vec![]
            )
            .is_err()
        );
    }

    #[test]
    fn who_closes_a_connections_model_connection() {
        let spec = |headers: &[(&str, &str)]| RequestSpec {
            method: "GET".into(),
            url: Url::parse("http://h/").unwrap(),
            headers: headers
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            body: Vec::new(),
        };
        assert!(spec(&[]).server_closes_last());
        assert!(spec(&[("X-A", "b")]).server_closes_last());
        assert!(spec(&[("connection", "Close")]).server_closes_last());
        assert!(spec(&[("Connection", "upgrade, close")]).server_closes_last());
        assert!(!spec(&[("Connection", "keep-alive")]).server_closes_last());
    }
}
