//! The push side of a run: a task per endpoint that POSTs batches in order, so a failing or slow
//! endpoint never slows or fails the run. The run hands batches over with [`Sender::send`], which
//! never waits: the queue is bounded and the oldest batch is dropped when it is full (the metrics
//! are cumulative, so a newer batch says all an older one did). Each batch is tried a few times
//! while no newer one waits, each try under a timeout, with a backoff between; a 4xx other than
//! 429 is final. The first
//! drop is said once on stderr, and [`Sender::finish`] flushes with a bounded wait and returns the
//! tally its one closing line is made of.
use std::collections::VecDeque;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::header::{HeaderName, HeaderValue};
use http::{Request, Uri};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tokio::sync::Notify;

use crate::{Batch, Format};

/// Why an endpoint or a header cannot be pushed to: said as the flag's error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PushError {
    #[error("{url:?} is not a URL to push to: {why}")]
    Url { url: String, why: String },
    #[error("{header:?} is not a header to push with: {why} (NAME: VALUE)")]
    Header { header: String, why: String },
}

/// Where a format's batches go: an `http://` or `https://` URL and the headers sent beside the
/// format's own (`--push-header`).
#[derive(Debug, Clone)]
pub struct Endpoint {
    uri: Uri,
    tls: bool,
    host: String,
    port: u16,
    headers: Vec<(HeaderName, HeaderValue)>,
}

impl Endpoint {
    /// Checks `url` (`http://` or `https://`, a host, a path) and `headers` (`NAME: VALUE` each).
    pub fn parse(url: &str, headers: &[String]) -> Result<Endpoint, PushError> {
        let bad = |why: &str| PushError::Url {
            url: url.to_string(),
            why: why.to_string(),
        };
        let uri: Uri = url
            .parse()
            .map_err(|e: http::uri::InvalidUri| bad(&e.to_string()))?;
        let tls = match uri.scheme_str() {
            Some("http") => false,
            Some("https") => true,
            _ => return Err(bad("it must start with http:// or https://")),
        };
        let host = uri
            .host()
            .filter(|h| !h.is_empty())
            .ok_or_else(|| bad("it names no host"))?
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string();
        let port = uri.port_u16().unwrap_or(if tls { 443 } else { 80 });
        let headers = headers
            .iter()
            .map(|h| parse_header(h))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Endpoint {
            uri,
            tls,
            host,
            port,
            headers,
        })
    }

    /// The URL as given, for what is said about it.
    pub fn url(&self) -> String {
        self.uri.to_string()
    }
}

/// One `NAME: VALUE` header.
pub fn parse_header(h: &str) -> Result<(HeaderName, HeaderValue), PushError> {
    let bad = |why: &str| PushError::Header {
        header: h.to_string(),
        why: why.to_string(),
    };
    let (name, value) = h.split_once(':').ok_or_else(|| bad("no colon"))?;
    let name = HeaderName::try_from(name.trim()).map_err(|_| bad("not a header name"))?;
    let value = HeaderValue::try_from(value.trim()).map_err(|_| bad("not a header value"))?;
    Ok((name, value))
}

/// How hard a sender tries, and how much it keeps waiting.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// Batches waiting at most; past it the oldest is dropped.
    pub queue: usize,
    /// One try's bound: connecting, sending and reading the answer.
    pub timeout: Duration,
    /// Tries of one batch (the first included).
    pub tries: u32,
    /// The wait after the first failed try, doubled after each further one.
    pub backoff: Duration,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            queue: 64,
            timeout: Duration::from_secs(3),
            tries: 3,
            backoff: Duration::from_millis(250),
        }
    }
}

/// Why a batch was dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dropped {
    /// The endpoint answered 4xx (not 429): sending it again would not help.
    Refused,
    /// A 5xx or 429 on every try.
    Failing,
    /// No connection, or it broke, on every try.
    Unreachable,
    /// No answer within the timeout on every try.
    TimedOut,
    /// The queue was full: a newer batch took its place.
    QueueFull,
    /// Still queued (or being sent) when the run's wait for the flush was over.
    Unflushed,
}

impl Dropped {
    const ALL: [Dropped; 6] = [
        Dropped::Refused,
        Dropped::Failing,
        Dropped::Unreachable,
        Dropped::TimedOut,
        Dropped::QueueFull,
        Dropped::Unflushed,
    ];

    fn words(self) -> &'static str {
        match self {
            Dropped::Refused => "refused",
            Dropped::Failing => "failing",
            Dropped::Unreachable => "unreachable",
            Dropped::TimedOut => "timed out",
            Dropped::QueueFull => "queue full",
            Dropped::Unflushed => "not flushed by the end",
        }
    }
}

/// What a sender did: batches sent, and dropped by why.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tally {
    /// The format's name and the URL, for the closing line.
    pub format: &'static str,
    pub url: String,
    pub sent: u64,
    pub dropped: [u64; 6],
    /// The first drop's words, as said on stderr.
    pub first_drop: Option<String>,
}

impl Tally {
    pub fn dropped(&self, why: Dropped) -> u64 {
        self.dropped[why as usize]
    }

    pub fn dropped_total(&self) -> u64 {
        self.dropped.iter().sum()
    }

    fn drop(&mut self, why: Dropped, n: u64) {
        self.dropped[why as usize] += n;
    }
}

impl fmt::Display for Tally {
    /// The one closing line: `remote write to URL: 12 batches sent, 3 dropped (refused 3)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} to {}: {} batch{} sent, {} dropped",
            self.format,
            self.url,
            self.sent,
            if self.sent == 1 { "" } else { "es" },
            self.dropped_total()
        )?;
        let why: Vec<String> = Dropped::ALL
            .iter()
            .filter(|&&d| self.dropped(d) > 0)
            .map(|&d| format!("{} {}", d.words(), self.dropped(d)))
            .collect();
        if !why.is_empty() {
            write!(f, " ({})", why.join(", "))?;
        }
        Ok(())
    }
}

/// The queue between the run and the sending task.
struct Queue {
    state: Mutex<QueueState>,
    ready: Notify,
    cap: usize,
}

struct QueueState {
    batches: VecDeque<Arc<Batch>>,
    closed: bool,
    /// A batch taken by the task and not yet counted, sent or dropped.
    in_flight: bool,
    tally: Tally,
}

impl Queue {
    fn lock(&self) -> std::sync::MutexGuard<'_, QueueState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// One endpoint's sending task and the run's end of its queue.
pub struct Sender {
    queue: Arc<Queue>,
    task: tokio::task::JoinHandle<()>,
}

impl Sender {
    /// Starts sending to `endpoint` in `format` (on the current tokio runtime).
    pub fn start(endpoint: Endpoint, format: Arc<dyn Format>, options: Options) -> Sender {
        let queue = Arc::new(Queue {
            state: Mutex::new(QueueState {
                batches: VecDeque::with_capacity(options.queue.max(1)),
                closed: false,
                in_flight: false,
                tally: Tally {
                    format: format.name(),
                    url: endpoint.url(),
                    ..Tally::default()
                },
            }),
            ready: Notify::new(),
            cap: options.queue.max(1),
        });
        let task = tokio::spawn(send_all(queue.clone(), endpoint, format, options));
        Sender { queue, task }
    }

    /// Hands a batch over, never waiting: the oldest waiting batch is dropped when the queue is full.
    pub fn send(&self, batch: Arc<Batch>) {
        let mut q = self.queue.lock();
        if q.closed {
            return;
        }
        if q.batches.len() >= self.queue.cap {
            q.batches.pop_front();
            say_drop(
                &mut q.tally,
                Dropped::QueueFull,
                "the endpoint is slower than the run",
            );
        }
        q.batches.push_back(batch);
        drop(q);
        self.queue.ready.notify_one();
    }

    /// Sends what is queued, waiting at most `wait`; what is still unsent then is dropped. The
    /// tally is the closing line's.
    pub async fn finish(self, wait: Duration) -> Tally {
        self.queue.lock().closed = true;
        self.queue.ready.notify_one();
        let mut task = self.task;
        if tokio::time::timeout(wait, &mut task).await.is_err() {
            task.abort();
            let _ = task.await;
            let mut q = self.queue.lock();
            // What was being sent is counted with what waited.
            let left = q.batches.len() as u64 + u64::from(q.in_flight);
            q.batches.clear();
            if left > 0 {
                say_drop(
                    &mut q.tally,
                    Dropped::Unflushed,
                    "the run's end did not wait longer",
                );
                q.tally.drop(Dropped::Unflushed, left - 1);
            }
        }
        self.queue.lock().tally.clone()
    }
}

/// Counts one drop, and says the first one (with its reason) once on stderr.
fn say_drop(tally: &mut Tally, why: Dropped, detail: &str) {
    tally.drop(why, 1);
    if tally.first_drop.is_none() {
        let words = format!(
            "stampede: {} to {}: a batch was dropped ({}: {detail}); the run goes on, later drops are counted and said at its end",
            tally.format,
            tally.url,
            why.words()
        );
        eprintln!("{words}");
        tally.first_drop = Some(words);
    }
}

async fn send_all(queue: Arc<Queue>, endpoint: Endpoint, format: Arc<dyn Format>, o: Options) {
    let mut conn = Conn::new(endpoint);
    loop {
        let taken = {
            let mut q = queue.lock();
            let b = q.batches.pop_front();
            q.in_flight = b.is_some();
            (b, q.closed)
        };
        let batch = match taken {
            (Some(b), _) => b,
            (None, true) => return,
            (None, false) => {
                queue.ready.notified().await;
                continue;
            }
        };
        let body = Bytes::from(format.encode(&batch));
        let mut last = (Dropped::Unreachable, String::new());
        let mut sent = false;
        for attempt in 0..o.tries.max(1) {
            if attempt > 0 {
                // A newer batch says all this one did (the metrics are cumulative): it goes
                // instead of a retry, so a failing endpoint never holds the queue up.
                if !queue.lock().batches.is_empty() {
                    break;
                }
                tokio::time::sleep(o.backoff * 2u32.saturating_pow(attempt - 1)).await;
            }
            match tokio::time::timeout(o.timeout, conn.post(format.headers(), body.clone())).await {
                Err(_) => {
                    conn.reset();
                    last = (
                        Dropped::TimedOut,
                        format!("no answer within {} ms", o.timeout.as_millis()),
                    );
                }
                Ok(Ok((status, _))) if status.is_success() => {
                    sent = true;
                    break;
                }
                Ok(Ok((status, answer))) => {
                    let line = first_line(&answer);
                    let detail = format!("{status}: {line}");
                    if status.as_u16() == 429 || status.is_server_error() {
                        last = (Dropped::Failing, detail);
                    } else {
                        last = (Dropped::Refused, detail);
                        break;
                    }
                }
                Ok(Err(e)) => {
                    conn.reset();
                    last = (Dropped::Unreachable, e);
                }
            }
        }
        let mut q = queue.lock();
        q.in_flight = false;
        if sent {
            q.tally.sent += 1;
        } else {
            say_drop(&mut q.tally, last.0, &last.1);
        }
    }
}

/// The answer's first line, cut short: what a refusal says.
fn first_line(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let line = text
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim();
    let mut out: String = line.chars().take(200).collect();
    if out.len() < line.len() {
        out.push('…');
    }
    if out.is_empty() {
        out.push_str("(no body)");
    }
    out
}

type SendRequest = hyper::client::conn::http1::SendRequest<Full<Bytes>>;

/// One kept-alive HTTP/1.1 connection to the endpoint, made again after it fails.
struct Conn {
    endpoint: Endpoint,
    sender: Option<SendRequest>,
    tls: Option<tokio_rustls::TlsConnector>,
}

impl Conn {
    fn new(endpoint: Endpoint) -> Conn {
        let tls = endpoint.tls.then(|| {
            let provider = Arc::new(rustls::crypto::ring::default_provider());
            let roots =
                rustls::RootCertStore::from_iter(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
            let mut config = rustls::ClientConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .expect("ring supports the default protocol versions")
                .with_root_certificates(roots)
                .with_no_client_auth();
            config.alpn_protocols = vec![b"http/1.1".to_vec()];
            tokio_rustls::TlsConnector::from(Arc::new(config))
        });
        Conn {
            endpoint,
            sender: None,
            tls,
        }
    }

    fn reset(&mut self) {
        self.sender = None;
    }

    async fn connect(&self) -> Result<SendRequest, String> {
        let e = &self.endpoint;
        let tcp = TcpStream::connect((e.host.as_str(), e.port))
            .await
            .map_err(|err| format!("cannot connect to {}:{}: {err}", e.host, e.port))?;
        let _ = tcp.set_nodelay(true);
        match &self.tls {
            None => handshake(TokioIo::new(tcp)).await,
            Some(connector) => {
                let name = rustls::pki_types::ServerName::try_from(e.host.clone())
                    .map_err(|err| format!("{} is not a TLS server name: {err}", e.host))?;
                let stream = connector
                    .connect(name, tcp)
                    .await
                    .map_err(|err| format!("TLS with {}: {err}", e.host))?;
                handshake(TokioIo::new(stream)).await
            }
        }
    }

    /// One POST of `body`: the answer's status and body, or why there is none.
    async fn post(
        &mut self,
        headers: &[(&'static str, &'static str)],
        body: Bytes,
    ) -> Result<(http::StatusCode, Bytes), String> {
        let mut sender = match self.sender.take() {
            Some(s) if !s.is_closed() => s,
            _ => self.connect().await?,
        };
        sender.ready().await.map_err(|e| e.to_string())?;
        let e = &self.endpoint;
        let path = e.uri.path_and_query().map(|p| p.as_str()).unwrap_or("/");
        let authority = e.uri.authority().map(|a| a.as_str()).unwrap_or(&e.host);
        let mut req = Request::post(path).header(http::header::HOST, authority);
        for (name, value) in headers {
            req = req.header(*name, *value);
        }
        for (name, value) in &e.headers {
            req = req.header(name, value);
        }
        req = req.header(http::header::USER_AGENT, "stampede");
        let req = req.body(Full::new(body)).map_err(|e| e.to_string())?;
        let answer = sender
            .send_request(req)
            .await
            .map_err(|e| format!("the request failed: {e}"))?;
        let status = answer.status();
        let body = answer
            .into_body()
            .collect()
            .await
            .map_err(|e| format!("the answer broke off: {e}"))?
            .to_bytes();
        self.sender = Some(sender);
        Ok((status, body))
    }
}

async fn handshake<T>(io: TokioIo<T>) -> Result<SendRequest, String>
where
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (sender, conn) = hyper::client::conn::http1::handshake(io)
        .await
        .map_err(|e| format!("HTTP handshake: {e}"))?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    Ok(sender)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};

    struct Plain;
    impl Format for Plain {
        fn name(&self) -> &'static str {
            "test"
        }
        fn headers(&self) -> &'static [(&'static str, &'static str)] {
            &[("Content-Type", "text/plain")]
        }
        fn encode(&self, batch: &Batch) -> Vec<u8> {
            batch.at_ms.to_string().into_bytes()
        }
    }

    /// A loopback endpoint answering every POST with `status` after `delay`, counting them and
    /// keeping the bodies' order.
    async fn endpoint(
        status: u16,
        delay: Duration,
    ) -> (String, Arc<AtomicU64>, Arc<Mutex<Vec<String>>>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/api/v1/write", listener.local_addr().unwrap());
        let count = Arc::new(AtomicU64::new(0));
        let bodies = Arc::new(Mutex::new(Vec::new()));
        let (c, b) = (count.clone(), bodies.clone());
        tokio::spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    return;
                };
                let (c, b) = (c.clone(), b.clone());
                tokio::spawn(async move {
                    let service =
                        hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
                            let (c, b) = (c.clone(), b.clone());
                            async move {
                                let body = req.into_body().collect().await?.to_bytes();
                                c.fetch_add(1, Ordering::SeqCst);
                                b.lock()
                                    .unwrap()
                                    .push(String::from_utf8_lossy(&body).into_owned());
                                tokio::time::sleep(delay).await;
                                let answer = http::Response::builder()
                                    .status(status)
                                    .body(Full::new(Bytes::from(
                                        "out of order sample\nsecond line",
                                    )))
                                    .unwrap();
                                Ok::<_, hyper::Error>(answer)
                            }
                        });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(tcp), service)
                        .await;
                });
            }
        });
        (url, count, bodies)
    }

    fn batch(at_ms: i64) -> Arc<Batch> {
        Arc::new(Batch {
            at_ms,
            ..Batch::default()
        })
    }

    fn fast() -> Options {
        Options {
            queue: 4,
            timeout: Duration::from_millis(300),
            tries: 3,
            backoff: Duration::from_millis(10),
        }
    }

    #[tokio::test]
    async fn batches_arrive_in_order_once_each() {
        let (url, count, bodies) = endpoint(204, Duration::ZERO).await;
        let s = Sender::start(Endpoint::parse(&url, &[]).unwrap(), Arc::new(Plain), fast());
        for at in 1..=3 {
            s.send(batch(at));
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let tally = s.finish(Duration::from_secs(5)).await;
        assert_eq!((tally.sent, tally.dropped_total()), (3, 0), "{tally}");
        assert_eq!(count.load(Ordering::SeqCst), 3);
        assert_eq!(*bodies.lock().unwrap(), ["1", "2", "3"]);
    }

    #[tokio::test]
    async fn a_refusal_is_final_and_says_the_answer_s_first_line() {
        let (url, count, _) = endpoint(400, Duration::ZERO).await;
        let s = Sender::start(Endpoint::parse(&url, &[]).unwrap(), Arc::new(Plain), fast());
        s.send(batch(1));
        tokio::time::sleep(Duration::from_millis(100)).await;
        s.send(batch(2));
        let tally = s.finish(Duration::from_secs(5)).await;
        assert_eq!(count.load(Ordering::SeqCst), 2, "a 400 is not tried again");
        assert_eq!(tally.dropped(Dropped::Refused), 2);
        let first = tally.first_drop.clone().unwrap();
        assert!(
            first.contains("400 Bad Request: out of order sample"),
            "{first}"
        );
        assert!(!first.contains("second line"), "{first}");
        assert!(
            tally
                .to_string()
                .ends_with("0 batches sent, 2 dropped (refused 2)"),
            "{tally}"
        );
    }

    #[tokio::test]
    async fn a_5xx_is_tried_again_then_dropped() {
        let (url, count, _) = endpoint(503, Duration::ZERO).await;
        let s = Sender::start(Endpoint::parse(&url, &[]).unwrap(), Arc::new(Plain), fast());
        s.send(batch(1));
        let tally = s.finish(Duration::from_secs(5)).await;
        assert_eq!(count.load(Ordering::SeqCst), 3, "three tries");
        assert_eq!(tally.dropped(Dropped::Failing), 1, "{tally}");
    }

    #[tokio::test]
    async fn a_failed_batch_is_not_tried_again_while_a_newer_one_waits() {
        let (url, count, bodies) = endpoint(503, Duration::ZERO).await;
        let s = Sender::start(Endpoint::parse(&url, &[]).unwrap(), Arc::new(Plain), fast());
        s.send(batch(1));
        s.send(batch(2));
        let tally = s.finish(Duration::from_secs(5)).await;
        assert_eq!(*bodies.lock().unwrap(), ["1", "2", "2", "2"]);
        assert_eq!(count.load(Ordering::SeqCst), 4);
        assert_eq!(tally.dropped(Dropped::Failing), 2, "{tally}");
    }

    #[tokio::test]
    async fn a_silent_endpoint_never_holds_the_sender_up_and_the_end_waits_a_bounded_time() {
        let (url, _, _) = endpoint(204, Duration::from_secs(3600)).await;
        let s = Sender::start(Endpoint::parse(&url, &[]).unwrap(), Arc::new(Plain), fast());
        let begun = std::time::Instant::now();
        for at in 1..=100 {
            s.send(batch(at));
        }
        assert!(
            begun.elapsed() < Duration::from_millis(50),
            "send never waits"
        );
        let tally = s.finish(Duration::from_millis(500)).await;
        assert!(
            begun.elapsed() < Duration::from_secs(2),
            "{:?}",
            begun.elapsed()
        );
        assert_eq!(tally.sent, 0);
        assert_eq!(tally.dropped_total(), 100, "{tally}");
        assert!(tally.dropped(Dropped::QueueFull) >= 95, "{tally}");
    }

    #[tokio::test]
    async fn nobody_listening_is_unreachable() {
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let url = format!("http://127.0.0.1:{port}/x");
        let s = Sender::start(Endpoint::parse(&url, &[]).unwrap(), Arc::new(Plain), fast());
        s.send(batch(1));
        let tally = s.finish(Duration::from_secs(5)).await;
        assert_eq!(tally.dropped(Dropped::Unreachable), 1, "{tally}");
        assert!(tally.first_drop.unwrap().contains("cannot connect"));
    }

    #[test]
    fn bad_urls_and_headers_are_said() {
        assert!(Endpoint::parse("ftp://x/", &[]).is_err());
        assert!(Endpoint::parse("http:///x", &[]).is_err());
        assert!(Endpoint::parse("not a url", &[]).is_err());
        assert!(Endpoint::parse("http://h/", &["NoColon".into()]).is_err());
        let e = Endpoint::parse("https://h:9/p", &["Authorization: Bearer x".into()]).unwrap();
        assert_eq!((e.host.as_str(), e.port, e.tls), ("h", 9, true));
        assert_eq!(e.headers[0].1, "Bearer x");
    }
}
