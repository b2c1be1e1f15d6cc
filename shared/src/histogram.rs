//! Latency histograms: one shape everywhere (microseconds, 1 us to 1 h, 3 significant digits) so any two
//! can be added, and the V2 codec they travel in.
pub use hdrhistogram::Histogram;
use hdrhistogram::serialization::{Deserializer, Serializer, V2Serializer};

/// Highest trackable value: one hour in microseconds. Larger values saturate.
pub const HIGHEST_US: u64 = 3_600_000_000;

#[derive(Debug, thiserror::Error)]
pub enum CodecError {
    #[error("histogram does not decode: {0}")]
    Decode(String),
    #[error(
        "histogram tracks values up to {found} us, more than the {HIGHEST_US} us stampede records"
    )]
    Range { found: u64 },
}

/// A new, empty histogram of the one shape stampede uses.
pub fn new() -> Histogram<u64> {
    Histogram::new_with_bounds(1, HIGHEST_US, 3).expect("constant bounds are valid")
}

/// Serializes with the standard HdrHistogram V2 encoding (no compression).
pub fn encode(h: &Histogram<u64>) -> Vec<u8> {
    let mut out = Vec::with_capacity(64);
    V2Serializer::new()
        .serialize(h, &mut out)
        .expect("writing to a Vec cannot fail");
    out
}

/// Decodes V2 bytes (as sent by an agent) into a histogram that can be added to one from [`new`].
pub fn decode(bytes: &[u8]) -> Result<Histogram<u64>, CodecError> {
    if bytes.is_empty() {
        return Ok(new());
    }
    let h: Histogram<u64> = Deserializer::new()
        .deserialize(&mut std::io::Cursor::new(bytes))
        .map_err(|e| CodecError::Decode(format!("{e:?}")))?;
    if h.high() > HIGHEST_US * 2 {
        return Err(CodecError::Range { found: h.high() });
    }
    if h.low() == 1 && h.high() == HIGHEST_US && h.sigfig() == 3 {
        return Ok(h);
    }
    // Re-home into the canonical shape so that `add` can never fail later.
    let mut canon = new();
    for v in h.iter_recorded() {
        canon.saturating_record_n(v.value_iterated_to(), v.count_at_value());
    }
    Ok(canon)
}

/// Adds `from` into `into`; both come from [`new`] or [`decode`], so the shapes match.
pub fn add(into: &mut Histogram<u64>, from: &Histogram<u64>) {
    into.add(from).expect("histograms share one shape");
}

/// A value in microseconds as milliseconds.
pub fn us_to_ms(us: u64) -> f64 {
    us as f64 / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn roundtrip_keeps_counts_and_percentiles() {
        let mut h = new();
        for v in [1u64, 10, 100, 1_000, 20_000, 500_000] {
            h.record(v).unwrap();
        }
        let back = decode(&encode(&h)).unwrap();
        assert_eq!(back.len(), h.len());
        assert_eq!(back.value_at_quantile(0.99), h.value_at_quantile(0.99));
        assert_eq!(back.max(), h.max());
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        assert!(decode(b"not a histogram at all").is_err());
        assert!(decode(&[0x1c, 0x84, 0x93, 0x13, 0, 0, 0, 0xff]).is_err());
    }

    proptest! {
        // The lossless-merge property: adding per-agent histograms equals recording every sample in one.
        #[test]
        fn merged_equals_one_histogram_fed_all_samples(
            parts in proptest::collection::vec(proptest::collection::vec(1u64..5_000_000, 0..200), 1..6)
        ) {
            let mut all = new();
            let mut merged = new();
            for part in &parts {
                let mut h = new();
                for v in part {
                    h.record(*v).unwrap();
                    all.record(*v).unwrap();
                }
                let shipped = decode(&encode(&h)).unwrap();
                add(&mut merged, &shipped);
            }
            prop_assert_eq!(merged.len(), all.len());
            for q in [0.5, 0.9, 0.99, 0.999, 1.0] {
                prop_assert_eq!(merged.value_at_quantile(q), all.value_at_quantile(q));
            }
            prop_assert_eq!(merged.max(), all.max());
            prop_assert_eq!(merged.min(), all.min());
        }

        #[test]
        fn merge_is_associative(a in proptest::collection::vec(1u64..1_000_000, 0..60),
                                b in proptest::collection::vec(1u64..1_000_000, 0..60),
                                c in proptest::collection::vec(1u64..1_000_000, 0..60)) {
            let h = |v: &[u64]| { let mut h = new(); for x in v { h.record(*x).unwrap(); } h };
            let (ha, hb, hc) = (h(&a), h(&b), h(&c));
            let mut left = ha.clone();
            add(&mut left, &hb);
            add(&mut left, &hc);
            let mut bc = hb.clone();
            add(&mut bc, &hc);
            let mut right = ha.clone();
            add(&mut right, &bc);
            prop_assert_eq!(encode(&left), encode(&right));
        }

        #[test]
        fn merge_is_commutative(a in proptest::collection::vec(1u64..1_000_000, 0..100),
                                b in proptest::collection::vec(1u64..1_000_000, 0..100)) {
            let mut ha = new();
            let mut hb = new();
            for v in &a { ha.record(*v).unwrap(); }
            for v in &b { hb.record(*v).unwrap(); }
            let mut ab = ha.clone();
            add(&mut ab, &hb);
            let mut ba = hb.clone();
            add(&mut ba, &ha);
            prop_assert_eq!(encode(&ab), encode(&ba));
        }
    }
}
