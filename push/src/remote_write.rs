//! Prometheus remote write 1.0 (`--prometheus-remote-write`): a batch as one snappy-compressed
//! `prometheus.WriteRequest`, the messages written by hand for prost (no protoc) from
//! prometheus/prompb's `remote.proto` and `types.proto`, only the fields 1.0 sends.
//!
//! The series are the ones a scrape of `/metrics` makes: a counter `NAME_total`, a histogram's
//! cumulative `NAME_bucket{le=…}` (the `le` written as `/metrics` writes it), `NAME_sum` and
//! `NAME_count`, a gauge `NAME`. The resource's attributes are labels on every series: `job` for
//! `service.name`, and for a `stampede.` key the rest of the key (`stampede.run` → `run`); a
//! series' own label of the same name wins. Labels are sorted by name, as the receiver asks, and
//! every sample carries the batch's one timestamp.
use prost::Message;

use crate::{Batch, Family, Format, Kind, Value};

/// `prometheus.WriteRequest`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct WriteRequest {
    #[prost(message, repeated, tag = "1")]
    pub timeseries: Vec<TimeSeries>,
    #[prost(message, repeated, tag = "3")]
    pub metadata: Vec<MetricMetadata>,
}

/// `prometheus.TimeSeries`: labels sorted by name, samples in time order.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TimeSeries {
    #[prost(message, repeated, tag = "1")]
    pub labels: Vec<Label>,
    #[prost(message, repeated, tag = "2")]
    pub samples: Vec<Sample>,
}

#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, prost::Message)]
pub struct Label {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(string, tag = "2")]
    pub value: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Sample {
    #[prost(double, tag = "1")]
    pub value: f64,
    /// Milliseconds since the Unix epoch.
    #[prost(int64, tag = "2")]
    pub timestamp: i64,
}

/// `prometheus.MetricMetadata`: a family's type, help and unit.
#[derive(Clone, PartialEq, prost::Message)]
pub struct MetricMetadata {
    /// `MetricType`: 1 counter, 2 gauge, 3 histogram.
    #[prost(int32, tag = "1")]
    pub r#type: i32,
    #[prost(string, tag = "2")]
    pub metric_family_name: String,
    #[prost(string, tag = "4")]
    pub help: String,
    #[prost(string, tag = "5")]
    pub unit: String,
}

/// The remote write 1.0 format.
#[derive(Debug, Clone, Copy, Default)]
pub struct RemoteWrite;

impl Format for RemoteWrite {
    fn name(&self) -> &'static str {
        "remote write"
    }

    fn headers(&self) -> &'static [(&'static str, &'static str)] {
        &[
            ("Content-Type", "application/x-protobuf"),
            ("Content-Encoding", "snappy"),
            ("X-Prometheus-Remote-Write-Version", "0.1.0"),
        ]
    }

    fn encode(&self, batch: &Batch) -> Vec<u8> {
        let raw = write_request(batch).encode_to_vec();
        snap::raw::Encoder::new()
            .compress_vec(&raw)
            .expect("a batch is far below snappy's 4 GiB limit")
    }
}

/// A resource attribute's label name: `service.name` is `job`; `stampede.X` is `X`; any other
/// character than a letter, digit or `_` becomes `_`.
pub fn label_name(key: &str) -> String {
    let key = match key {
        "service.name" => "job",
        k => k.strip_prefix("stampede.").unwrap_or(k),
    };
    key.chars()
        .map(|c| match c {
            'a'..='z' | 'A'..='Z' | '0'..='9' | '_' => c,
            _ => '_',
        })
        .collect()
}

/// `le` as `/metrics` writes it (prometheus-client's shortest round-trip form).
pub fn le(bound: f64) -> String {
    if bound == f64::INFINITY {
        "+Inf".to_string()
    } else {
        dtoa::Buffer::new().format(bound).to_string()
    }
}

/// The batch as a `WriteRequest`, uncompressed.
pub fn write_request(batch: &Batch) -> WriteRequest {
    let resource: Vec<Label> = batch
        .resource
        .attributes
        .iter()
        .map(|(k, v)| Label {
            name: label_name(k),
            value: v.clone(),
        })
        .collect();
    let mut out = WriteRequest::default();
    for f in &batch.families {
        out.metadata.push(MetricMetadata {
            r#type: match f.kind {
                Kind::Counter => 1,
                Kind::Gauge => 2,
                Kind::Histogram => 3,
            },
            metric_family_name: f.name.clone(),
            help: f.help.clone(),
            unit: f.unit.clone(),
        });
        family(f, &resource, batch.at_ms, &mut out.timeseries);
    }
    out
}

fn family(f: &Family, resource: &[Label], at_ms: i64, out: &mut Vec<TimeSeries>) {
    for s in &f.series {
        let series = |name: String, extra: Option<(&str, String)>, value: f64| {
            let mut labels: Vec<Label> = s
                .labels
                .iter()
                .map(|(n, v)| Label {
                    name: n.clone(),
                    value: v.clone(),
                })
                .chain(extra.map(|(n, v)| Label {
                    name: n.to_string(),
                    value: v,
                }))
                .collect();
            for r in resource {
                if !labels.iter().any(|l| l.name == r.name) {
                    labels.push(r.clone());
                }
            }
            labels.push(Label {
                name: "__name__".to_string(),
                value: name,
            });
            labels.sort();
            TimeSeries {
                labels,
                samples: vec![Sample {
                    value,
                    timestamp: at_ms,
                }],
            }
        };
        match (&s.value, f.kind) {
            (Value::Number(v), Kind::Counter) => {
                out.push(series(format!("{}_total", f.name), None, *v));
            }
            (Value::Number(v), _) => out.push(series(f.name.clone(), None, *v)),
            (Value::Histogram { count, sum, .. }, _) => {
                let mut cumulative = 0u64;
                for (bound, n) in s.value.buckets() {
                    cumulative += n;
                    out.push(series(
                        format!("{}_bucket", f.name),
                        Some(("le", le(bound))),
                        cumulative as f64,
                    ));
                }
                out.push(series(format!("{}_sum", f.name), None, *sum));
                out.push(series(format!("{}_count", f.name), None, *count as f64));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Resource, Series};

    fn batch() -> Batch {
        Batch {
            at_ms: 1_700_000_000_123,
            start_ms: 1_700_000_000_000,
            resource: Resource {
                attributes: vec![
                    ("service.name".into(), "stampede".into()),
                    ("stampede.run".into(), "2026-01-01T00:00:00.000Z".into()),
                ],
            },
            families: vec![
                Family {
                    name: "stampede_requests".into(),
                    help: "Requests".into(),
                    unit: String::new(),
                    kind: Kind::Counter,
                    series: vec![Series {
                        labels: vec![("step".into(), "1".into())],
                        value: Value::Number(42.0),
                    }],
                },
                Family {
                    name: "stampede_latency_seconds".into(),
                    help: "Latency".into(),
                    unit: "seconds".into(),
                    kind: Kind::Histogram,
                    series: vec![Series {
                        labels: vec![("step".into(), "1".into())],
                        value: Value::Histogram {
                            bounds: vec![0.001, 0.002],
                            counts: vec![0, 3, 0],
                            count: 3,
                            sum: 0.005,
                        },
                    }],
                },
            ],
        }
    }

    fn names(w: &WriteRequest) -> Vec<String> {
        w.timeseries
            .iter()
            .map(|t| {
                let labels: Vec<String> = t
                    .labels
                    .iter()
                    .map(|l| format!("{}={}", l.name, l.value))
                    .collect();
                format!("{} {}", labels.join(","), t.samples[0].value)
            })
            .collect()
    }

    #[test]
    fn counters_end_in_total_histograms_are_cumulative_and_resource_labels_are_on_every_series() {
        let w = write_request(&batch());
        assert_eq!(
            names(&w),
            [
                "__name__=stampede_requests_total,job=stampede,run=2026-01-01T00:00:00.000Z,step=1 42",
                "__name__=stampede_latency_seconds_bucket,job=stampede,le=0.001,run=2026-01-01T00:00:00.000Z,step=1 0",
                "__name__=stampede_latency_seconds_bucket,job=stampede,le=0.002,run=2026-01-01T00:00:00.000Z,step=1 3",
                "__name__=stampede_latency_seconds_bucket,job=stampede,le=+Inf,run=2026-01-01T00:00:00.000Z,step=1 3",
                "__name__=stampede_latency_seconds_sum,job=stampede,run=2026-01-01T00:00:00.000Z,step=1 0.005",
                "__name__=stampede_latency_seconds_count,job=stampede,run=2026-01-01T00:00:00.000Z,step=1 3",
            ]
        );
        assert!(
            w.timeseries
                .iter()
                .all(|t| t.samples.len() == 1 && t.samples[0].timestamp == 1_700_000_000_123)
        );
        assert_eq!(w.metadata.len(), 2);
        assert_eq!(w.metadata[1].r#type, 3);
    }

    #[test]
    fn the_body_is_snappy_block_compressed_protobuf() {
        let body = RemoteWrite.encode(&batch());
        let raw = snap::raw::Decoder::new().decompress_vec(&body).unwrap();
        assert_eq!(
            WriteRequest::decode(raw.as_slice()).unwrap(),
            write_request(&batch())
        );
    }

    #[test]
    fn resource_keys_become_label_names() {
        assert_eq!(label_name("service.name"), "job");
        assert_eq!(label_name("stampede.run"), "run");
        assert_eq!(label_name("stampede.target.url"), "target_url");
        assert_eq!(label_name("host-name"), "host_name");
    }
}
