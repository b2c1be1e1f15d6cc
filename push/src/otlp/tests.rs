//! The OTLP body read back by a protobuf wire reader written here from the encoding's rules (tags,
//! wire types, packed fields), not by the prost types that wrote it: a wrong field number or wire
//! type fails here even where a round trip through our own messages would agree with itself.
use super::*;
use crate::{Resource, Series};

/// One field as it is on the wire.
#[derive(Debug, Clone, PartialEq)]
enum Wire<'a> {
    Varint(u64),
    Fixed64(u64),
    Bytes(&'a [u8]),
}

fn varint(buf: &mut &[u8]) -> u64 {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let b = buf[0];
        *buf = &buf[1..];
        v |= u64::from(b & 0x7f) << shift;
        if b < 0x80 {
            return v;
        }
    }
    panic!("a varint longer than 10 bytes")
}

/// Every (field number, value) of one message, in order.
fn fields(mut buf: &[u8]) -> Vec<(u64, Wire<'_>)> {
    let mut out = Vec::new();
    while !buf.is_empty() {
        let key = varint(&mut buf);
        let value = match key & 7 {
            0 => Wire::Varint(varint(&mut buf)),
            1 => {
                let (v, rest) = buf.split_at(8);
                buf = rest;
                Wire::Fixed64(u64::from_le_bytes(v.try_into().unwrap()))
            }
            2 => {
                let n = varint(&mut buf) as usize;
                let (v, rest) = buf.split_at(n);
                buf = rest;
                Wire::Bytes(v)
            }
            t => panic!("wire type {t} is not one OTLP's fields use"),
        };
        out.push((key >> 3, value));
    }
    out
}

/// The values of field `n`.
fn all(msg: &[u8], n: u64) -> Vec<Wire<'_>> {
    fields(msg)
        .into_iter()
        .filter(|(f, _)| *f == n)
        .map(|(_, v)| v)
        .collect()
}

fn bytes(msg: &[u8], n: u64) -> Vec<&[u8]> {
    all(msg, n)
        .into_iter()
        .map(|w| match w {
            Wire::Bytes(b) => b,
            other => panic!("field {n} is {other:?}, not length-delimited"),
        })
        .collect()
}

fn one(msg: &[u8], n: u64) -> &[u8] {
    let b = bytes(msg, n);
    assert_eq!(b.len(), 1, "field {n} once");
    b[0]
}

fn string(msg: &[u8], n: u64) -> String {
    String::from_utf8(one(msg, n).to_vec()).unwrap()
}

fn fixed64(msg: &[u8], n: u64) -> u64 {
    match all(msg, n).as_slice() {
        [Wire::Fixed64(v)] => *v,
        other => panic!("field {n}: {other:?}, not one fixed64"),
    }
}

fn varint_field(msg: &[u8], n: u64) -> u64 {
    match all(msg, n).as_slice() {
        [Wire::Varint(v)] => *v,
        other => panic!("field {n}: {other:?}, not one varint"),
    }
}

/// A packed repeated 8-byte field (fixed64 or double) as its words.
fn packed64(msg: &[u8], n: u64) -> Vec<u64> {
    one(msg, n)
        .chunks(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

/// KeyValue list (each `key = 1`, `value = 2` an AnyValue whose `string_value = 1`).
fn string_attributes(kvs: Vec<&[u8]>) -> Vec<(String, String)> {
    kvs.into_iter()
        .map(|kv| (string(kv, 1), string(one(kv, 2), 1)))
        .collect()
}

fn pairs(p: &[(&str, &str)]) -> Vec<(String, String)> {
    p.iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

const START_MS: i64 = 1_765_000_000_000;
const AT_MS: i64 = 1_765_000_012_500;

fn batch() -> Batch {
    Batch {
        at_ms: AT_MS,
        start_ms: START_MS,
        resource: Resource {
            attributes: pairs(&[("service.name", "stampede"), ("stampede.run", "r1")]),
        },
        families: vec![
            Family {
                name: "stampede_requests".into(),
                help: "Requests sent in the step".into(),
                unit: String::new(),
                kind: Kind::Counter,
                series: vec![
                    Series {
                        labels: pairs(&[("step", "1")]),
                        value: Value::Number(300.0),
                    },
                    Series {
                        labels: pairs(&[("step", "2")]),
                        value: Value::Number(600.0),
                    },
                ],
            },
            Family {
                name: "stampede_generator_cpu_ratio".into(),
                help: "CPU".into(),
                unit: "ratio".into(),
                kind: Kind::Gauge,
                series: vec![Series {
                    labels: vec![],
                    value: Value::Number(0.25),
                }],
            },
            Family {
                name: "stampede_latency".into(),
                help: "The step's latency".into(),
                unit: "seconds".into(),
                kind: Kind::Histogram,
                series: vec![Series {
                    labels: pairs(&[("target", "a"), ("step", "1")]),
                    value: Value::Histogram {
                        bounds: vec![0.001, 0.002],
                        counts: vec![3, 5, 1],
                        count: 9,
                        sum: 0.0125,
                    },
                }],
            },
            // No series: no metric (a metric without points says nothing).
            Family {
                name: "stampede_request_requests".into(),
                help: String::new(),
                unit: String::new(),
                kind: Kind::Counter,
                series: vec![],
            },
        ],
    }
}

/// The request's one ResourceMetrics' one ScopeMetrics' metrics, after checking the resource and
/// the scope.
fn metrics(body: &[u8]) -> Vec<&[u8]> {
    let rm = one(body, 1);
    let resource = one(rm, 1);
    assert_eq!(
        string_attributes(bytes(resource, 1)),
        pairs(&[("service.name", "stampede"), ("stampede.run", "r1")])
    );
    let sm = one(rm, 2);
    let scope = one(sm, 1);
    assert_eq!(string(scope, 1), "stampede");
    assert_eq!(string(scope, 2), env!("CARGO_PKG_VERSION"));
    bytes(sm, 2)
}

#[test]
fn counters_are_monotonic_cumulative_sums_of_int64_points_from_the_runs_start() {
    let body = Otlp.encode(&batch());
    let ms = metrics(&body);
    assert_eq!(ms.len(), 3, "the empty family is left out");
    let m = ms[0];
    assert_eq!(string(m, 1), "stampede_requests");
    assert_eq!(string(m, 2), "Requests sent in the step");
    assert!(all(m, 3).is_empty(), "no unit: the field is absent");
    let sum = one(m, 7);
    assert_eq!(
        varint_field(sum, 2),
        2,
        "AGGREGATION_TEMPORALITY_CUMULATIVE"
    );
    assert_eq!(varint_field(sum, 3), 1, "is_monotonic");
    let points = bytes(sum, 1);
    assert_eq!(points.len(), 2);
    for (p, (step, v)) in points.iter().zip([("1", 300), ("2", 600)]) {
        assert_eq!(string_attributes(bytes(p, 7)), pairs(&[("step", step)]));
        assert_eq!(fixed64(p, 2), 1_765_000_000_000_000_000);
        assert_eq!(fixed64(p, 3), 1_765_000_012_500_000_000);
        // as_int: sfixed64, field 6.
        assert_eq!(fixed64(p, 6), v);
        assert!(all(p, 4).is_empty(), "not as_double");
    }
}

#[test]
fn gauges_are_double_points_at_the_batchs_moment() {
    let body = Otlp.encode(&batch());
    let m = metrics(&body)[1];
    assert_eq!(string(m, 1), "stampede_generator_cpu_ratio");
    assert_eq!(string(m, 3), "1", "a ratio's UCUM unit");
    let gauge = one(m, 5);
    let p = one(gauge, 1);
    assert!(bytes(p, 7).is_empty());
    assert!(all(p, 2).is_empty(), "a gauge has no start");
    assert_eq!(fixed64(p, 3), 1_765_000_012_500_000_000);
    assert_eq!(f64::from_bits(fixed64(p, 4)), 0.25);
}

#[test]
fn histograms_are_explicit_buckets_in_seconds_with_count_and_sum() {
    let body = Otlp.encode(&batch());
    let m = metrics(&body)[2];
    assert_eq!(string(m, 1), "stampede_latency");
    assert_eq!(string(m, 3), "s");
    let h = one(m, 9);
    assert_eq!(varint_field(h, 2), 2, "cumulative");
    let p = one(h, 1);
    assert_eq!(
        string_attributes(bytes(p, 9)),
        pairs(&[("target", "a"), ("step", "1")])
    );
    assert_eq!(fixed64(p, 2), 1_765_000_000_000_000_000);
    assert_eq!(fixed64(p, 3), 1_765_000_012_500_000_000);
    assert_eq!(fixed64(p, 4), 9, "count");
    assert_eq!(f64::from_bits(fixed64(p, 5)), 0.0125, "sum");
    assert_eq!(packed64(p, 6), vec![3, 5, 1], "bucket_counts, packed");
    let bounds: Vec<f64> = packed64(p, 7).into_iter().map(f64::from_bits).collect();
    assert_eq!(bounds, vec![0.001, 0.002], "explicit_bounds, packed");
}

#[test]
fn a_counter_with_a_fraction_is_sent_as_doubles() {
    let mut b = batch();
    b.families[0].series[1].value = Value::Number(600.5);
    let body = Otlp.encode(&b);
    let sum = one(metrics(&body)[0], 7);
    let values: Vec<f64> = bytes(sum, 1)
        .iter()
        .map(|p| {
            assert!(all(p, 6).is_empty(), "no as_int beside as_double");
            f64::from_bits(fixed64(p, 4))
        })
        .collect();
    assert_eq!(values, vec![300.0, 600.5]);
}

#[test]
fn an_empty_batch_is_its_resource_and_scope_byte_for_byte() {
    let b = Batch {
        at_ms: AT_MS,
        start_ms: START_MS,
        resource: Resource {
            attributes: pairs(&[("k", "v")]),
        },
        families: vec![],
    };
    let body = Otlp.encode(&b);
    let version = env!("CARGO_PKG_VERSION").as_bytes();
    // KeyValue{key "k", value AnyValue{string_value "v"}}
    let kv = [0x0a, 1, b'k', 0x12, 3, 0x0a, 1, b'v'];
    let resource = [&[0x0a, kv.len() as u8][..], &kv].concat();
    let scope = [
        &[0x0a, 8][..],
        b"stampede",
        &[0x12, version.len() as u8],
        version,
    ]
    .concat();
    let scope_metrics = [&[0x0a, scope.len() as u8][..], &scope].concat();
    let rm = [
        &[0x0a, resource.len() as u8][..],
        &resource,
        &[0x12, scope_metrics.len() as u8],
        &scope_metrics,
    ]
    .concat();
    let expected = [&[0x0a, rm.len() as u8][..], &rm].concat();
    assert_eq!(body, expected);
}

#[test]
fn the_headers_say_protobuf() {
    let otlp = Otlp;
    assert_eq!(otlp.name(), "OTLP");
    assert_eq!(
        otlp.headers(),
        &[("Content-Type", "application/x-protobuf")]
    );
}

#[test]
fn a_base_url_gets_v1_metrics_and_a_full_one_is_kept() {
    for (given, used) in [
        ("http://127.0.0.1:4318", "http://127.0.0.1:4318/v1/metrics"),
        ("http://127.0.0.1:4318/", "http://127.0.0.1:4318/v1/metrics"),
        ("https://host/otlp", "https://host/otlp/v1/metrics"),
        ("https://host/otlp/", "https://host/otlp/v1/metrics"),
        ("http://c:4318/v1/metrics", "http://c:4318/v1/metrics"),
        ("http://c:4318/v1/metrics/", "http://c:4318/v1/metrics/"),
        ("http://c/p?tenant=a", "http://c/p/v1/metrics?tenant=a"),
        (
            "http://c/v1/metrics?tenant=a",
            "http://c/v1/metrics?tenant=a",
        ),
    ] {
        assert_eq!(metrics_url(given), used, "{given}");
    }
}

#[test]
fn times_before_the_epoch_are_zero_not_a_wrap() {
    assert_eq!(unix_nano(-5), 0);
    assert_eq!(unix_nano(1), 1_000_000);
}
