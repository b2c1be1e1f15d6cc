//! `--otlp`: a batch as OTLP/HTTP's protobuf body, so an OpenTelemetry Collector (or any OTLP
//! metrics receiver: Prometheus' `/api/v1/otlp`, Grafana Cloud, Datadog's agent) takes the run
//! without a scrape. The messages are written out by hand below (prost derives, no protoc): only the
//! fields stampede sends, each with the number the official `opentelemetry-proto` definitions give
//! it, so a receiver's generated classes read them (tests/otlp/receiver.py decodes them with PyPI's).
//!
//! The mapping: one `ResourceMetrics` (the batch's resource), one scope (`stampede` and its
//! version); a counter is a monotonic cumulative `Sum`, a gauge a `Gauge`, a histogram an
//! explicit-bucket cumulative `Histogram` (the grid's edges as `explicit_bounds`, in seconds); the
//! family's labels are each point's attributes. Every cumulative point starts at the run's start, so
//! a step's counters read as run.json's figures at the batch's moment.

use crate::{Batch, Family, Format, Kind, Value};

/// The path an OTLP/HTTP receiver takes metrics on, after its base URL.
pub const METRICS_PATH: &str = "/v1/metrics";

/// How `--otlp URL` is read, as OpenTelemetry's SDKs read their endpoint variables: a URL whose path
/// already ends in `/v1/metrics` (`OTEL_EXPORTER_OTLP_METRICS_ENDPOINT`'s form) is used as it is;
/// any other is a base (`OTEL_EXPORTER_OTLP_ENDPOINT`'s form: `http://collector:4318`, or
/// `https://host/otlp` behind a proxy) and gets `/v1/metrics` appended to its path. A query string
/// stays after the path.
pub fn metrics_url(url: &str) -> String {
    let (before_query, query) = match url.find(['?', '#']) {
        Some(i) => url.split_at(i),
        None => (url, ""),
    };
    let path_part = before_query.trim_end_matches('/');
    if path_part.ends_with(METRICS_PATH) {
        return url.to_string();
    }
    format!("{path_part}{METRICS_PATH}{query}")
}

/// OTLP over HTTP in protobuf: `POST …/v1/metrics` of an `ExportMetricsServiceRequest`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Otlp;

impl Otlp {
    /// The batch as the request's message, before it is encoded.
    fn request(&self, batch: &Batch) -> pb::ExportMetricsServiceRequest {
        let time = unix_nano(batch.at_ms);
        // Every cumulative point counts from the run's start.
        let start = unix_nano(batch.start_ms);
        let metrics = batch
            .families
            .iter()
            .filter(|f| !f.series.is_empty())
            .map(|f| metric(f, start, time))
            .collect();
        pb::ExportMetricsServiceRequest {
            resource_metrics: vec![pb::ResourceMetrics {
                resource: Some(pb::Resource {
                    attributes: attributes(&batch.resource.attributes),
                }),
                scope_metrics: vec![pb::ScopeMetrics {
                    scope: Some(pb::InstrumentationScope {
                        name: SCOPE.to_string(),
                        version: env!("CARGO_PKG_VERSION").to_string(),
                    }),
                    metrics,
                }],
            }],
        }
    }
}

/// One family as one OTLP metric: its cumulative points from `start`, every point of `time` (ns).
fn metric(f: &Family, start: u64, time: u64) -> pb::Metric {
    let data = match f.kind {
        Kind::Counter => {
            // Integers where every value is one (counts always are), so a receiver keeps them
            // as int64 rather than doubles.
            let whole = f.series.iter().all(|s| match s.value {
                Value::Number(v) => is_int(v),
                Value::Histogram { .. } => false,
            });
            pb::metric::Data::Sum(pb::Sum {
                data_points: f
                    .series
                    .iter()
                    .filter_map(|s| number(s, start, time, whole))
                    .collect(),
                aggregation_temporality: pb::CUMULATIVE,
                is_monotonic: true,
            })
        }
        // A gauge is a value now: OTLP ignores a gauge point's start, so none is sent.
        Kind::Gauge => pb::metric::Data::Gauge(pb::Gauge {
            data_points: f
                .series
                .iter()
                .filter_map(|s| number(s, 0, time, false))
                .collect(),
        }),
        Kind::Histogram => pb::metric::Data::Histogram(pb::Histogram {
            data_points: f
                .series
                .iter()
                .filter_map(|s| match &s.value {
                    Value::Histogram {
                        bounds,
                        counts,
                        count,
                        sum,
                    } => Some(pb::HistogramDataPoint {
                        attributes: attributes(&s.labels),
                        start_time_unix_nano: start,
                        time_unix_nano: time,
                        count: *count,
                        sum: Some(*sum),
                        bucket_counts: counts.clone(),
                        explicit_bounds: bounds.clone(),
                    }),
                    Value::Number(_) => None,
                })
                .collect(),
            aggregation_temporality: pb::CUMULATIVE,
        }),
    };
    pb::Metric {
        name: f.name.clone(),
        description: f.help.clone(),
        unit: ucum(&f.unit).to_string(),
        data: Some(data),
    }
}

impl Format for Otlp {
    fn name(&self) -> &'static str {
        "OTLP"
    }

    fn headers(&self) -> &'static [(&'static str, &'static str)] {
        &[("Content-Type", "application/x-protobuf")]
    }

    fn encode(&self, batch: &Batch) -> Vec<u8> {
        prost::Message::encode_to_vec(&self.request(batch))
    }
}

/// The instrumentation scope every metric is under.
pub const SCOPE: &str = "stampede";

/// A `/metrics` unit as OTLP writes units (UCUM): seconds are `s`, a ratio is the unit `1`.
fn ucum(unit: &str) -> &str {
    match unit {
        "seconds" => "s",
        "ratio" => "1",
        other => other,
    }
}

fn unix_nano(ms: i64) -> u64 {
    u64::try_from(ms).unwrap_or(0).saturating_mul(1_000_000)
}

fn is_int(v: f64) -> bool {
    // 2^63 as a double: the first value past i64.
    v.fract() == 0.0 && v.abs() < 9_223_372_036_854_775_808.0
}

fn number(s: &crate::Series, start: u64, time: u64, int: bool) -> Option<pb::NumberDataPoint> {
    let Value::Number(v) = s.value else {
        return None;
    };
    Some(pb::NumberDataPoint {
        attributes: attributes(&s.labels),
        start_time_unix_nano: start,
        time_unix_nano: time,
        value: Some(if int {
            pb::number_data_point::Value::AsInt(v as i64)
        } else {
            pb::number_data_point::Value::AsDouble(v)
        }),
    })
}

fn attributes(pairs: &[(String, String)]) -> Vec<pb::KeyValue> {
    pairs
        .iter()
        .map(|(k, v)| pb::KeyValue {
            key: k.clone(),
            value: Some(pb::AnyValue {
                value: Some(pb::any_value::Value::StringValue(v.clone())),
            }),
        })
        .collect()
}

/// The OTLP messages, the fields stampede fills only; each tag is the official definitions' number
/// (opentelemetry-proto's `collector/metrics/v1/metrics_service.proto`, `metrics/v1/metrics.proto`,
/// `common/v1/common.proto`, `resource/v1/resource.proto`). A field left out is one a receiver reads
/// as absent, as proto3 allows.
mod pb {
    /// `AggregationTemporality.AGGREGATION_TEMPORALITY_CUMULATIVE`.
    pub const CUMULATIVE: i32 = 2;

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ExportMetricsServiceRequest {
        #[prost(message, repeated, tag = "1")]
        pub resource_metrics: Vec<ResourceMetrics>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ResourceMetrics {
        #[prost(message, optional, tag = "1")]
        pub resource: Option<Resource>,
        #[prost(message, repeated, tag = "2")]
        pub scope_metrics: Vec<ScopeMetrics>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Resource {
        #[prost(message, repeated, tag = "1")]
        pub attributes: Vec<KeyValue>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ScopeMetrics {
        #[prost(message, optional, tag = "1")]
        pub scope: Option<InstrumentationScope>,
        #[prost(message, repeated, tag = "2")]
        pub metrics: Vec<Metric>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct InstrumentationScope {
        #[prost(string, tag = "1")]
        pub name: String,
        #[prost(string, tag = "2")]
        pub version: String,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct KeyValue {
        #[prost(string, tag = "1")]
        pub key: String,
        #[prost(message, optional, tag = "2")]
        pub value: Option<AnyValue>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct AnyValue {
        #[prost(oneof = "any_value::Value", tags = "1")]
        pub value: Option<any_value::Value>,
    }

    pub mod any_value {
        #[derive(Clone, PartialEq, prost::Oneof)]
        pub enum Value {
            #[prost(string, tag = "1")]
            StringValue(String),
        }
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Metric {
        #[prost(string, tag = "1")]
        pub name: String,
        #[prost(string, tag = "2")]
        pub description: String,
        #[prost(string, tag = "3")]
        pub unit: String,
        #[prost(oneof = "metric::Data", tags = "5, 7, 9")]
        pub data: Option<metric::Data>,
    }

    pub mod metric {
        #[derive(Clone, PartialEq, prost::Oneof)]
        pub enum Data {
            #[prost(message, tag = "5")]
            Gauge(super::Gauge),
            #[prost(message, tag = "7")]
            Sum(super::Sum),
            #[prost(message, tag = "9")]
            Histogram(super::Histogram),
        }
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Gauge {
        #[prost(message, repeated, tag = "1")]
        pub data_points: Vec<NumberDataPoint>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Sum {
        #[prost(message, repeated, tag = "1")]
        pub data_points: Vec<NumberDataPoint>,
        /// An `AggregationTemporality`, a varint as an enum is.
        #[prost(int32, tag = "2")]
        pub aggregation_temporality: i32,
        #[prost(bool, tag = "3")]
        pub is_monotonic: bool,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Histogram {
        #[prost(message, repeated, tag = "1")]
        pub data_points: Vec<HistogramDataPoint>,
        #[prost(int32, tag = "2")]
        pub aggregation_temporality: i32,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct NumberDataPoint {
        #[prost(message, repeated, tag = "7")]
        pub attributes: Vec<KeyValue>,
        #[prost(fixed64, tag = "2")]
        pub start_time_unix_nano: u64,
        #[prost(fixed64, tag = "3")]
        pub time_unix_nano: u64,
        #[prost(oneof = "number_data_point::Value", tags = "4, 6")]
        pub value: Option<number_data_point::Value>,
    }

    pub mod number_data_point {
        #[derive(Clone, PartialEq, prost::Oneof)]
        pub enum Value {
            #[prost(double, tag = "4")]
            AsDouble(f64),
            #[prost(sfixed64, tag = "6")]
            AsInt(i64),
        }
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct HistogramDataPoint {
        #[prost(message, repeated, tag = "9")]
        pub attributes: Vec<KeyValue>,
        #[prost(fixed64, tag = "2")]
        pub start_time_unix_nano: u64,
        #[prost(fixed64, tag = "3")]
        pub time_unix_nano: u64,
        #[prost(fixed64, tag = "4")]
        pub count: u64,
        /// `optional double sum`: present (a sum of latencies is never negative).
        #[prost(double, optional, tag = "5")]
        pub sum: Option<f64>,
        #[prost(fixed64, repeated, tag = "6")]
        pub bucket_counts: Vec<u64>,
        #[prost(double, repeated, tag = "7")]
        pub explicit_bounds: Vec<f64>,
    }
}

#[cfg(test)]
mod tests;
