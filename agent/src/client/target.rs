//! A workload compiled once per run into what every send reuses: the resolved address, each request
//! serialized to its bytes (and its `Connection: close` twin), the TLS connector and server name.
use std::cell::RefCell;
use std::io::{self, Write};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::header::{
    CONNECTION, CONTENT_LENGTH, HOST, HeaderName, HeaderValue, TE, TRANSFER_ENCODING, UPGRADE,
    USER_AGENT,
};
use http::{HeaderMap, Method, Uri};
use shared::plan::{HttpVersion, RequestSpec, Scheme, Workload};
use shared::refusal::{Refusal, RefusalKind};

use shared::plan::Extraction;

use super::render::{Fill, Recipe, Refused, Spans, Vars};
use crate::feeder::Spool;

/// A workload that cannot be prepared for sending.
#[derive(Debug, thiserror::Error)]
pub enum PrepareError {
    #[error("cannot resolve target host '{host}': {source}")]
    Resolve { host: String, source: io::Error },
    #[error("target host '{0}' resolves to no address")]
    NoAddress(String),
    #[error("target host '{host}' has no {family} address, the family of the --source-addrs")]
    NoSourceFamily { host: String, family: &'static str },
    #[error("request {index} cannot be built: {why}")]
    Request { index: usize, why: String },
    #[error("the setup request cannot be built: {0}")]
    Setup(String),
    #[error("TLS server name '{0}' is not valid")]
    ServerName(String),
    /// Known before any load: the target does not speak the HTTP asked for.
    #[error("before any load, {0}")]
    Protocol(String),
}

impl PrepareError {
    /// The refusal of the configure this failed: its kind, which the coordinator decides by.
    pub fn refusal(&self) -> Refusal {
        let kind = match self {
            PrepareError::Resolve { .. }
            | PrepareError::NoAddress(_)
            | PrepareError::NoSourceFamily { .. } => RefusalKind::Target,
            PrepareError::Protocol(_) => RefusalKind::Protocol,
            PrepareError::Request { .. } | PrepareError::Setup(_) | PrepareError::ServerName(_) => {
                RefusalKind::Other
            }
        };
        Refusal::new(kind, self.to_string())
    }
}

/// One request, serialized once: every send writes these bytes as they are.
#[derive(Debug, Clone)]
pub struct Template {
    pub(super) wire: Bytes,
    /// The same request saying `Connection: close`, for the last call on a connection: the server
    /// then closes first and keeps the TIME_WAIT, so the generator's ephemeral ports are not held
    /// for a minute after every connection (at 1,000 connections/s that would exhaust them).
    pub(super) last: Bytes,
    /// A reply to HEAD has no body, whatever its headers announce.
    pub(super) head: bool,
    /// The same request as HTTP/2 sends it, its header block encoded once (HPACK, nothing indexed):
    /// pseudo-headers from the URI and the Host, no connection-specific headers (RFC 9113 8.2.2
    /// forbids them).
    pub(super) h2_block: Bytes,
    pub(super) body: Bytes,
    /// A request with variables is rendered per send from this (its bytes above are never sent).
    pub(crate) recipe: Option<Arc<Recipe>>,
    /// Which request of the workload this is: its row in the results, when they are named.
    pub(crate) index: u16,
}

thread_local! {
    /// The worker thread's buffer a request with variables is rendered into before its bytes are
    /// made: reused, so a send allocates only the bytes it sends.
    static RENDERING: RefCell<(Vec<u8>, Spans)> = RefCell::default();
}

/// A rendered request as HTTP/1.1 sends it, written as [`Template::new`] writes a fixed one.
fn rendered_h1(r: &Recipe, buf: &[u8], spans: &Spans, last: bool) -> Template {
    let method = r.method();
    let body = &buf[spans.body.clone()];
    let mut wire = Vec::with_capacity(buf.len() + 64 + 4 * spans.headers.len());
    wire.extend_from_slice(method.as_str().as_bytes());
    wire.push(b' ');
    wire.extend_from_slice(&buf[spans.path.clone()]);
    wire.extend_from_slice(b" HTTP/1.1\r\n");
    let mut closes = false;
    for (name, span) in r.header_names().zip(&spans.headers) {
        closes |= *name == CONNECTION;
        wire.extend_from_slice(name.as_str().as_bytes());
        wire.extend_from_slice(b": ");
        wire.extend_from_slice(&buf[span.clone()]);
        wire.extend_from_slice(b"\r\n");
    }
    if !body.is_empty() || matches!(*method, Method::POST | Method::PUT | Method::PATCH) {
        let _ = write!(wire, "content-length: {}\r\n", body.len());
    }
    // A user's own Connection header is sent as given, on every call.
    if last && !closes {
        wire.extend_from_slice(b"connection: close\r\n");
    }
    wire.extend_from_slice(b"\r\n");
    wire.extend_from_slice(body);
    let wire = Bytes::from(wire);
    Template {
        body: wire.slice(wire.len() - body.len()..),
        last: wire.clone(),
        wire,
        head: *method == Method::HEAD,
        h2_block: Bytes::new(),
        recipe: None,
        index: 0,
    }
}

/// A rendered request as HTTP/2 sends it: its header block (as [`Template::new`] encodes a fixed
/// one) and its body.
fn rendered_h2(r: &Recipe, buf: &[u8], spans: &Spans) -> Template {
    let headers = || {
        r.header_names()
            .zip(&spans.headers)
            .map(|(n, s)| (n, &buf[s.clone()]))
    };
    let fields: Vec<(&[u8], &[u8])> = headers()
        .filter(|(name, value)| {
            let te_other_than_trailers = **name == TE && *value != b"trailers";
            !NOT_IN_HTTP2.contains(name) && !te_other_than_trailers
        })
        .map(|(name, value)| (name.as_str().as_bytes(), value))
        .collect();
    // The Host sent over HTTP/1.1 (the user's own, or ours) is the :authority.
    let authority = headers()
        .find(|(name, _)| **name == HOST)
        .and_then(|(_, v)| std::str::from_utf8(v).ok())
        .unwrap_or(r.authority());
    // Visible ASCII: checked as it was rendered.
    let path = std::str::from_utf8(&buf[spans.path.clone()]).unwrap_or("/");
    let block = super::http2::hpack::encode_request(
        r.method().as_str(),
        r.scheme(),
        authority,
        path,
        &fields,
    );
    Template {
        wire: Bytes::new(),
        last: Bytes::new(),
        head: *r.method() == Method::HEAD,
        h2_block: Bytes::from(block),
        body: Bytes::copy_from_slice(&buf[spans.body.clone()]),
        recipe: None,
        index: 0,
    }
}

/// The setup request (see `client::setup`) as a worker sends it: its request, rendered per
/// connection when it has variables, and what to take from its reply.
#[derive(Debug)]
pub struct Setup {
    pub(super) template: Template,
    pub(super) extract: Vec<Extraction>,
}

impl Setup {
    /// The feeders its own variables take rows from.
    pub fn feeders(&self) -> &[usize] {
        self.template.recipe.as_ref().map_or(&[], |r| &r.feeders)
    }
}

/// Headers that belong to one HTTP/1.1 connection and have no place in HTTP/2; Host becomes the
/// `:authority`.
const NOT_IN_HTTP2: [HeaderName; 6] = [
    CONNECTION,
    HOST,
    TRANSFER_ENCODING,
    UPGRADE,
    HeaderName::from_static("keep-alive"),
    HeaderName::from_static("proxy-connection"),
];

impl Template {
    /// Serializes a request as hyper would: lower-case header names, a Content-Length for a body (or
    /// for an empty POST/PUT/PATCH) unless the user framed the body themselves.
    pub(super) fn new(method: &Method, uri: &Uri, headers: &HeaderMap, body: &[u8]) -> Template {
        let target = uri.path_and_query().map_or("/", |p| p.as_str());
        let mut wire = Vec::with_capacity(128 + body.len());
        wire.extend_from_slice(method.as_str().as_bytes());
        wire.push(b' ');
        wire.extend_from_slice(target.as_bytes());
        wire.extend_from_slice(b" HTTP/1.1\r\n");
        for (name, value) in headers {
            wire.extend_from_slice(name.as_str().as_bytes());
            wire.extend_from_slice(b": ");
            wire.extend_from_slice(value.as_bytes());
            wire.extend_from_slice(b"\r\n");
        }
        let framed =
            headers.contains_key(CONTENT_LENGTH) || headers.contains_key(TRANSFER_ENCODING);
        let wants_length =
            !body.is_empty() || matches!(*method, Method::POST | Method::PUT | Method::PATCH);
        if wants_length && !framed {
            wire.extend_from_slice(format!("content-length: {}\r\n", body.len()).as_bytes());
        }
        let mut last = wire.clone();
        // A user's own Connection header is sent as given, on every call.
        if !headers.contains_key(CONNECTION) {
            last.extend_from_slice(b"connection: close\r\n");
        }
        for w in [&mut wire, &mut last] {
            w.extend_from_slice(b"\r\n");
            w.extend_from_slice(body);
        }
        let fields: Vec<(&[u8], &[u8])> = headers
            .iter()
            .filter(|(name, value)| {
                let te_other_than_trailers = *name == TE && *value != "trailers";
                !NOT_IN_HTTP2.contains(name) && !te_other_than_trailers
            })
            .map(|(name, value)| (name.as_str().as_bytes(), value.as_bytes()))
            .collect();
        // The Host sent over HTTP/1.1 (the user's own, or ours) is the :authority.
        let authority = headers
            .get(HOST)
            .and_then(|h| h.to_str().ok())
            .or_else(|| uri.authority().map(|a| a.as_str()))
            .unwrap_or_default();
        let h2_block = super::http2::hpack::encode_request(
            method.as_str(),
            uri.scheme_str().unwrap_or("http"),
            authority,
            target,
            &fields,
        );
        let wire = Bytes::from(wire);
        Template {
            // The end of the HTTP/1.1 bytes, shared rather than copied: an upload is held once.
            body: wire.slice(wire.len() - body.len()..),
            wire,
            last: Bytes::from(last),
            head: *method == Method::HEAD,
            h2_block: Bytes::from(h2_block),
            recipe: None,
            index: 0,
        }
    }

    /// A template with variables rendered with `fill` and the connection's `extracted` values into
    /// the bytes its protocol sends (the HTTP/1.1 request, with `Connection: close` when `last`; or
    /// the HTTP/2 header block and body), its Content-Length the rendered body's. `None` for a fixed
    /// template, whose bytes are sent as they are.
    pub(super) fn rendered(
        &self,
        target: &Endpoint,
        fill: Option<&Fill>,
        extracted: &[Vec<u8>],
        last: bool,
    ) -> Option<Result<Template, Refused>> {
        let recipe = self.recipe.as_ref()?;
        let empty = Fill::default();
        Some(RENDERING.with_borrow_mut(|(buf, spans)| {
            recipe.render(&target.vars, fill.unwrap_or(&empty), extracted, buf, spans)?;
            let mut t = if target.http2 {
                rendered_h2(recipe, buf, spans)
            } else {
                rendered_h1(recipe, buf, spans, last)
            };
            // Counted as the request it was rendered from.
            t.index = self.index;
            Ok(t)
        }))
    }

    /// Compiles the workload's request `index` (from 0), with our Host and User-Agent unless the user
    /// gave their own.
    fn compile(
        r: &RequestSpec,
        index: usize,
        host: &str,
        user_agent: &str,
        vars: &Vars,
    ) -> Result<Template, PrepareError> {
        let bad = |why: String| PrepareError::Request {
            index: index + 1,
            why,
        };
        let mut headers = HeaderMap::new();
        headers.insert(
            HOST,
            HeaderValue::from_str(host).map_err(|e| bad(e.to_string()))?,
        );
        headers.insert(
            USER_AGENT,
            HeaderValue::from_str(user_agent).map_err(|e| bad(e.to_string()))?,
        );
        for (name, value) in r.headers() {
            let name = HeaderName::from_bytes(name.as_bytes())
                .map_err(|e| bad(format!("header {name}: {e}")))?;
            let value =
                HeaderValue::from_str(value).map_err(|e| bad(format!("header {name}: {e}")))?;
            // A user's Host or User-Agent replaces ours; other repeated names are kept.
            if name == HOST || name == USER_AGENT {
                headers.insert(name, value);
            } else {
                headers.append(name, value);
            }
        }
        let method = Method::from_bytes(r.method().as_bytes()).map_err(|e| bad(e.to_string()))?;
        // Absolute, so HTTP/2's :scheme and :authority come from it; HTTP/1.1 writes its path.
        let scheme = match r.url().scheme() {
            Scheme::Http => "http",
            Scheme::Https => "https",
        };
        // The Host sent, the user's own or ours (set above).
        let authority = headers[HOST].to_str().unwrap_or(host);
        let recipe = Recipe::compile(
            &method,
            scheme,
            authority,
            r.url().path(),
            &headers,
            r.body(),
            vars,
        )
        .map_err(bad)?;
        if let Some(recipe) = recipe {
            // Its own bytes are never sent; the method says whether a reply has a body.
            let uri = format!("{scheme}://{authority}/")
                .parse::<Uri>()
                .map_err(|e| bad(e.to_string()))?;
            let mut t = Template::new(&method, &uri, &HeaderMap::new(), &[]);
            t.recipe = Some(Arc::new(recipe));
            // Below MAX_REQUESTS, which the workload checked.
            t.index = index as u16;
            return Ok(t);
        }
        let uri = format!("{scheme}://{authority}{}", r.url().path())
            .parse::<Uri>()
            .map_err(|e| bad(e.to_string()))?;
        Ok(Template {
            // Below MAX_REQUESTS, which the workload checked.
            index: index as u16,
            ..Template::new(&method, &uri, &headers, r.body())
        })
    }
}

/// Everything a worker needs to connect and send, shared read-only by all workers of the agent.
#[derive(Clone)]
pub struct Endpoint {
    pub addr: SocketAddr,
    pub templates: Arc<Vec<Template>>,
    pub tls: Option<super::tls::TlsTarget>,
    pub timeout: Duration,
    pub connect_timeout: Duration,
    /// Which request each arrival sends (`Workload::mix`).
    pub mix: Arc<shared::plan::Mix>,
    /// Whether the requests are named, each with its row in the results.
    pub named: bool,
    /// `--source-addrs`: new connections leave from these in turn (see `socket`); empty: any.
    pub sources: Arc<[IpAddr]>,
    /// Every request's closing twin makes the server close first (see `Workload::server_closes_last`).
    pub server_closes: bool,
    /// The reply statuses that count as served.
    pub ok_status: shared::status::StatusSet,
    /// Spoken over HTTP/2: `--http 2`, or `auto` where the target's ALPN chose h2.
    pub http2: bool,
    /// Streams one HTTP/2 connection carries at once (`--streams`); 1 over HTTP/1.1.
    pub streams: u32,
    /// httperf's sessions (`--wsesslog`), naming `templates` by index: the connections model runs
    /// one an arrival.
    pub sessions: Option<Arc<shared::plan::Sessions>>,
    /// The run's variables, where the templates' `${var}` take their values.
    pub vars: Arc<Vars>,
    /// The feeders' spooled rows, set by the session when a step starts (after they all arrived).
    pub feeds: Arc<[Arc<Spool>]>,
    /// The request run once per connection before its first of the mix.
    pub setup: Option<Arc<Setup>>,
}

impl Endpoint {
    /// The copy worker `index` sends with: the same, but for its own TLS sessions (see
    /// [`super::tls::TlsTarget::for_worker`]).
    pub fn for_worker(&self, index: u64) -> Endpoint {
        let mut mine = self.clone();
        mine.tls = self.tls.as_ref().map(|t| t.for_worker(index));
        mine
    }

    /// Resolves the target and compiles its requests, before the preflight asks it which HTTP it
    /// speaks (`client::preflight`).
    pub async fn prepare(w: &Workload) -> Result<Endpoint, PrepareError> {
        let origin = w.origin();
        let resolved = tokio::net::lookup_host((origin.host(), origin.port()))
            .await
            .map_err(|source| PrepareError::Resolve {
                host: origin.host().to_string(),
                source,
            })?;
        let addr =
            crate::socket::choose(resolved, w.source_addrs()).map_err(|family| match family {
                None => PrepareError::NoAddress(origin.host().to_string()),
                Some(family) => PrepareError::NoSourceFamily {
                    host: origin.host().to_string(),
                    family,
                },
            })?;
        let host_value = if origin.port() == default_port(origin.scheme()) {
            if origin.host().contains(':') {
                format!("[{}]", origin.host())
            } else {
                origin.host().to_string()
            }
        } else {
            origin.authority()
        };
        let user_agent = format!("stampede/{}", shared::VERSION);
        let vars = Vars::of(w.data());
        let templates = w
            .requests()
            .iter()
            .enumerate()
            .map(|(i, r)| Template::compile(r, i, &host_value, &user_agent, &vars))
            .collect::<Result<Vec<_>, _>>()?;
        let setup = match w.data().setup() {
            None => None,
            Some(_) if w.http() != HttpVersion::Http1 => {
                return Err(PrepareError::Setup(
                    "a setup runs over HTTP/1.1 only (--http 1.1)".into(),
                ));
            }
            Some(s) => {
                let t = Template::compile(s.request(), 0, &host_value, &user_agent, &vars)
                    .map_err(|e| match e {
                        PrepareError::Request { why, .. } => PrepareError::Setup(why),
                        other => other,
                    })?;
                Some(Arc::new(Setup {
                    template: t,
                    extract: s.extract().to_vec(),
                }))
            }
        };
        let tls = match origin.scheme() {
            Scheme::Http => None,
            Scheme::Https => Some(
                super::tls::target(origin.host(), w.insecure_tls(), w.http(), w.tls_sessions())
                    .map_err(|_| PrepareError::ServerName(origin.host().to_string()))?,
            ),
        };
        // HTTP/2 asked for, or `auto` until the preflight (`client::preflight`) says ALPN chose it.
        let http2 = w.http() == HttpVersion::Http2;
        Ok(Endpoint {
            addr,
            templates: Arc::new(templates),
            tls,
            timeout: w.timeout(),
            connect_timeout: w.connect_timeout(),
            mix: Arc::new(w.mix()),
            named: !w.names().is_empty(),
            sources: w.source_addrs().to_vec().into(),
            server_closes: w.server_closes_last(),
            ok_status: w.ok_status().clone(),
            http2,
            // A connection on HTTP/1.1 carries one request at a time.
            streams: if http2 { w.streams().get() } else { 1 },
            sessions: w.sessions().cloned(),
            vars: Arc::new(vars),
            feeds: Arc::new([]),
            setup,
        })
    }
}

fn default_port(s: Scheme) -> u16 {
    match s {
        Scheme::Http => 80,
        Scheme::Https => 443,
    }
}

#[cfg(test)]
mod tests;
