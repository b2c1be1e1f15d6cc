//! Asking a Prometheus one instant query (`GET /api/v1/query`) over plain HTTP/1.1, and reading its
//! JSON answer into series: the only I/O of `--server-prometheus`, kept apart so that what a step's
//! answers mean is tested without a network. Every call is bounded in time; an answer is never
//! trusted to be well formed.
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Limited};
use serde::Deserialize;
use tokio::net::TcpStream;

/// How long one query may take, connection included.
pub const QUERY_TIMEOUT: Duration = Duration::from_secs(3);
/// The most of an answer read: a query that should give one series gives a few hundred bytes.
const MAX_ANSWER: usize = 1 << 20;

/// Where a Prometheus answers: `http://host:port/prefix` (the prefix of a Prometheus behind a path,
/// `--web.route-prefix`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub host: String,
    pub port: u16,
    pub prefix: String,
}

/// Why a query got no answer, or one that is not a Prometheus's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QueryError {
    #[error("cannot reach it: {0}")]
    Unreachable(String),
    #[error("no answer in {} s", QUERY_TIMEOUT.as_secs())]
    Timeout,
    /// The Prometheus said the query is wrong or failed (its errorType and error).
    #[error("it answered {kind}: {error}")]
    Refused { kind: String, error: String },
    #[error("its answer is not a Prometheus query answer: {0}")]
    Garbled(String),
}

impl QueryError {
    /// The Prometheus itself is not there (as against a query it refused): said once a run.
    pub fn unreachable(&self) -> bool {
        matches!(self, QueryError::Unreachable(_) | QueryError::Timeout)
    }
}

/// One series of an answer: its labels and its value (a `NaN`, a `+Inf` kept as Prometheus said).
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub labels: Vec<(String, String)>,
    pub value: f64,
}

impl Endpoint {
    /// `http://host:port[/prefix]`; https and credentials are not taken (a managed Prometheus behind
    /// them is reached through a local proxy, e.g. `kubectl port-forward`).
    pub fn parse(text: &str) -> Result<Endpoint, String> {
        let uri: hyper::Uri = text
            .parse()
            .map_err(|e| format!("'{text}' is not a URL ({e})"))?;
        match uri.scheme_str() {
            Some("http") => {}
            Some(other) => {
                return Err(format!(
                    "'{text}': {other}:// is not taken, only http:// (reach a Prometheus behind TLS or a login through a local proxy, e.g. kubectl port-forward)"
                ));
            }
            None => return Err(format!("'{text}': give http://HOST:PORT")),
        }
        if text.contains('@') || uri.query().is_some() {
            return Err(format!(
                "'{text}': give http://HOST:PORT[/PREFIX], no user or query"
            ));
        }
        let host = uri
            .host()
            .filter(|h| !h.is_empty())
            .ok_or(format!("'{text}': no host, give http://HOST:PORT"))?;
        Ok(Endpoint {
            host: host
                .trim_start_matches('[')
                .trim_end_matches(']')
                .to_string(),
            port: uri.port_u16().unwrap_or(80),
            prefix: uri.path().trim_end_matches('/').to_string(),
        })
    }

    /// `query` evaluated at `at_unix_s`: its series.
    pub async fn query(&self, query: &str, at_unix_s: f64) -> Result<Vec<Series>, QueryError> {
        match tokio::time::timeout(QUERY_TIMEOUT, self.get(query, at_unix_s)).await {
            Ok(answer) => answer,
            Err(_) => Err(QueryError::Timeout),
        }
    }

    async fn get(&self, query: &str, at_unix_s: f64) -> Result<Vec<Series>, QueryError> {
        let unreachable = |e: &dyn std::fmt::Display| QueryError::Unreachable(e.to_string());
        let stream = TcpStream::connect((self.host.as_str(), self.port))
            .await
            .map_err(|e| unreachable(&e))?;
        let io = hyper_util::rt::TokioIo::new(stream);
        let (mut send, conn) = hyper::client::conn::http1::handshake::<_, Empty<Bytes>>(io)
            .await
            .map_err(|e| unreachable(&e))?;
        let driver = tokio::spawn(conn);
        let path = format!(
            "{}/api/v1/query?query={}&time={at_unix_s:.3}",
            self.prefix,
            encode(query)
        );
        let authority = match self.host.contains(':') {
            true => format!("[{}]:{}", self.host, self.port),
            false => format!("{}:{}", self.host, self.port),
        };
        let request = hyper::Request::get(path)
            .header(hyper::header::HOST, authority)
            .header(hyper::header::USER_AGENT, "stampede")
            .body(Empty::new())
            .map_err(|e| QueryError::Garbled(e.to_string()))?;
        let reply = send
            .send_request(request)
            .await
            .map_err(|e| unreachable(&e));
        let reply = match reply {
            Ok(r) => r,
            Err(e) => {
                driver.abort();
                return Err(e);
            }
        };
        let status = reply.status();
        let body = Limited::new(reply.into_body(), MAX_ANSWER).collect().await;
        driver.abort();
        let body = body
            .map_err(|e| QueryError::Garbled(format!("HTTP {status}: {e}")))?
            .to_bytes();
        answer(status.as_u16(), &body)
    }
}

/// A query string as a URL's query value: everything but the unreserved characters escaped.
fn encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len() * 2);
    for b in text.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(b as char)
            }
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

#[derive(Deserialize)]
struct Answer {
    status: String,
    #[serde(default)]
    data: Option<Data>,
    #[serde(default, rename = "errorType")]
    error_type: Option<String>,
    #[serde(default)]
    error: Option<String>,
}

#[derive(Deserialize)]
#[serde(tag = "resultType", content = "result", rename_all = "lowercase")]
enum Data {
    Vector(Vec<VectorSeries>),
    Scalar((f64, String)),
    Matrix(serde::de::IgnoredAny),
    String(serde::de::IgnoredAny),
}

#[derive(Deserialize)]
struct VectorSeries {
    metric: std::collections::BTreeMap<String, String>,
    value: (f64, String),
}

/// The series of an answer with HTTP status `status` and body `body`.
pub fn answer(status: u16, body: &[u8]) -> Result<Vec<Series>, QueryError> {
    let short = |b: &[u8]| String::from_utf8_lossy(&b[..b.len().min(200)]).into_owned();
    let parsed: Answer = serde_json::from_slice(body)
        .map_err(|e| QueryError::Garbled(format!("HTTP {status}, {e}: {}", short(body))))?;
    if parsed.status != "success" {
        return Err(QueryError::Refused {
            kind: parsed
                .error_type
                .unwrap_or_else(|| format!("HTTP {status}")),
            error: parsed.error.unwrap_or_default(),
        });
    }
    let number = |text: &str| {
        text.parse::<f64>()
            .map_err(|_| QueryError::Garbled(format!("the value '{text}' is not a number")))
    };
    match parsed.data {
        Some(Data::Vector(series)) => series
            .into_iter()
            .map(|s| {
                Ok(Series {
                    labels: s.metric.into_iter().collect(),
                    value: number(&s.value.1)?,
                })
            })
            .collect(),
        Some(Data::Scalar((_, v))) => Ok(vec![Series {
            labels: Vec::new(),
            value: number(&v)?,
        }]),
        Some(Data::Matrix(_) | Data::String(_)) => Err(QueryError::Garbled(
            "a range vector or a string where an instant vector or a scalar was asked for (wrap the range in rate(), avg_over_time(), …)".into(),
        )),
        None => Err(QueryError::Garbled("no data".into())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_endpoint_is_http_host_port_and_a_prefix() {
        let e = Endpoint::parse("http://127.0.0.1:9090").unwrap();
        assert_eq!(
            (e.host.as_str(), e.port, e.prefix.as_str()),
            ("127.0.0.1", 9090, "")
        );
        let e = Endpoint::parse("http://prom.example/monitoring/prometheus/").unwrap();
        assert_eq!((e.port, e.prefix.as_str()), (80, "/monitoring/prometheus"));
        let e = Endpoint::parse("http://[::1]:9090").unwrap();
        assert_eq!(e.host, "::1");
        for (bad, says) in [
            ("https://p:9090", "only http://"),
            ("p:9090", "http://"),
            ("http://u:p@p:9090", "no user"),
            ("http://p:9090/?x=1", "no user or query"),
            ("not a url", "is not a URL"),
        ] {
            let e = Endpoint::parse(bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }

    #[test]
    fn a_query_is_escaped_whole() {
        assert_eq!(
            encode(r#"sum(rate(x{a="b c"}[5s]))"#),
            "sum%28rate%28x%7Ba%3D%22b%20c%22%7D%5B5s%5D%29%29"
        );
    }

    #[test]
    fn answers_as_prometheus_writes_them() {
        let vector = br#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{"instance":"h:9100","job":"node"},"value":[1796567185.4,"1.5"]}]}}"#;
        let got = answer(200, vector).unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].value, 1.5);
        assert_eq!(got[0].labels[0], ("instance".into(), "h:9100".into()));
        let scalar =
            br#"{"status":"success","data":{"resultType":"scalar","result":[1796567185.4,"NaN"]}}"#;
        assert!(answer(200, scalar).unwrap()[0].value.is_nan());
        let empty = br#"{"status":"success","data":{"resultType":"vector","result":[]}}"#;
        assert!(answer(200, empty).unwrap().is_empty());
        let refused = br#"{"status":"error","errorType":"bad_data","error":"invalid parameter \"query\": 1:44: parse error: unclosed left parenthesis"}"#;
        let e = answer(400, refused).unwrap_err();
        assert!(matches!(e, QueryError::Refused { .. }) && !e.unreachable());
        assert!(
            e.to_string()
                .starts_with("it answered bad_data: invalid parameter"),
            "{e}"
        );
        let matrix = br#"{"status":"success","data":{"resultType":"matrix","result":[]}}"#;
        assert!(
            answer(200, matrix)
                .unwrap_err()
                .to_string()
                .contains("wrap the range")
        );
        assert!(matches!(
            answer(502, b"<html>bad gateway"),
            Err(QueryError::Garbled(_))
        ));
    }
}
