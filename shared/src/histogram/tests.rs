//! Tests of the histogram shape and its V2 codec (`histogram.rs`): round trips, the encoded sum,
//! bad bytes.
use super::*;
use proptest::prelude::*;

#[test]
fn the_resolution_is_hdrhistogram_s_own_bucket_width() {
    let h = new();
    let mut v = 1;
    while v < HIGHEST_US {
        for at in [v, v + v / 3, 2 * v - 1] {
            assert_eq!(resolution_us(at), h.equivalent_range(at), "{at} us");
        }
        v *= 2;
    }
    assert_eq!(resolution_us(0), 1);
    assert_eq!(resolution_us(100), 1);
    assert_eq!(resolution_us(5_000), 4);
}

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

/// `prior` plus the encoded histogram, the reference way (decode, then add).
fn via_decode(prior: &Histogram<u64>, bytes: &[u8]) -> Histogram<u64> {
    let mut h = prior.clone();
    add(&mut h, &decode(bytes).unwrap());
    h
}

/// The same, both ways the merge adds encoded bytes (straight into a histogram, and through a
/// `Sum`); they must agree with each other before they are compared with the reference.
fn via_encoded(prior: &Histogram<u64>, bytes: &[u8]) -> Histogram<u64> {
    let e = Encoded::parse(bytes.to_vec()).unwrap();
    let mut h = prior.clone();
    e.add_to(&mut h);
    let mut sum = Sum::new();
    sum.add(&e);
    let mut via_sum = prior.clone();
    sum.add_into(&mut via_sum);
    assert_same(&h, &via_sum);
    h
}

/// Equal as hdrhistogram compares them (shape, total, min, max, every count), and as encoded.
fn assert_same(a: &Histogram<u64>, b: &Histogram<u64>) {
    assert_eq!(a, b);
    assert_eq!((a.len(), a.min(), a.max()), (b.len(), b.min(), b.max()));
    assert_eq!(encode(a), encode(b));
}

/// A plain V2 encoding written by hand: header, then zig-zag LEB128-64b9B numbers as given
/// (counts, or negative runs of zeros), so non-canonical encodings can be tried.
fn v2(low: u64, high: u64, sigfig: u32, numbers: &[i64]) -> Vec<u8> {
    let mut payload = Vec::new();
    for &n in numbers {
        let mut zz = ((n << 1) ^ (n >> 63)) as u64;
        for k in 0..9 {
            if k == 8 {
                payload.push(zz as u8);
                break;
            }
            let b = (zz & 0x7f) as u8;
            zz >>= 7;
            if zz == 0 {
                payload.push(b);
                break;
            }
            payload.push(b | 0x80);
        }
    }
    let mut out = Vec::new();
    out.extend(V2_COOKIE.to_be_bytes());
    out.extend((payload.len() as u32).to_be_bytes());
    out.extend(0u32.to_be_bytes());
    out.extend(sigfig.to_be_bytes());
    out.extend(low.to_be_bytes());
    out.extend(high.to_be_bytes());
    out.extend(1.0f64.to_bits().to_be_bytes());
    out.extend(payload);
    out
}

#[test]
fn every_canonical_bucket_maps_to_its_own_index() {
    // Exhaustive over the one shape: recording each bucket's value fills every bucket exactly
    // once, in order, and hdrhistogram reports the same highest value for it as `Shape` does.
    let shape = Shape::new(LOWEST_US, HIGHEST_US, SIGFIG).unwrap();
    let mut h = new();
    assert_eq!(shape.len, h.distinct_values());
    for i in 0..shape.len {
        h.record(shape.value_for(i)).unwrap();
    }
    assert_eq!(h.len(), shape.len as u64);
    let mut seen = 0;
    for (i, v) in h.iter_recorded().enumerate() {
        assert_eq!(v.count_at_value(), 1, "bucket {i}");
        assert_eq!(
            v.value_iterated_to(),
            shape.highest_equivalent(shape.value_for(i))
        );
        assert_eq!(shape.index_for(shape.value_for(i)), Some(i));
        assert_eq!(shape.index_for(v.value_iterated_to()), Some(i));
        seen += 1;
    }
    assert_eq!(seen, shape.len);
}

#[test]
fn encoded_adds_what_it_recorded() {
    let mut h = new();
    for v in [0u64, 1, 10, 2_047, 2_048, 100_000, HIGHEST_US] {
        h.record_n(v, 3).unwrap();
    }
    let mut prior = new();
    prior.record(5_000).unwrap();
    for p in [new(), prior] {
        assert_same(&via_decode(&p, &encode(&h)), &via_encoded(&p, &encode(&h)));
    }
    assert_same(&via_decode(&new(), b""), &via_encoded(&new(), b""));
}

#[test]
fn a_sum_of_many_equals_adding_each_decoded() {
    let mut reference = new();
    let mut sum = Sum::new();
    let mut foreign = Histogram::<u64>::new_with_bounds(1_000, HIGHEST_US * 2, 1).unwrap();
    foreign.record_n(HIGHEST_US * 2, 2).unwrap(); // clamped into the canonical range
    foreign.record_n(5_555, 3).unwrap();
    for k in 0..5u64 {
        let mut h = new();
        for v in [k, 100 + k, 30_000 * (k + 1), u64::MAX / 2] {
            h.saturating_record_n(v, k + 1);
        }
        let bytes = if k == 2 { encode(&foreign) } else { encode(&h) };
        add(&mut reference, &decode(&bytes).unwrap());
        sum.add(&Encoded::parse(bytes).unwrap());
    }
    assert_same(&sum.to_histogram(), &reference);
    sum.clear();
    assert_same(&sum.to_histogram(), &new());
}

#[test]
fn non_minimal_encodings_add_like_decode() {
    // Explicit zeros, split runs, runs past the end and trailing bytes are all valid V2.
    let len = Shape::new(1, HIGHEST_US, 3).unwrap().len as i64;
    for numbers in [
        vec![0, 0, 5, -1, -1, 7, 0],
        vec![-3, 2, -100, 1, -(len * 4)],
        vec![1; 40],
        vec![-(len - 1), 9],
        vec![],
    ] {
        let mut bytes = v2(1, HIGHEST_US, 3, &numbers);
        assert_same(&via_decode(&new(), &bytes), &via_encoded(&new(), &bytes));
        bytes.extend([0xff, 0xff]);
        assert_same(&via_decode(&new(), &bytes), &via_encoded(&new(), &bytes));
    }
}

#[test]
fn compressed_encoding_adds_like_decode() {
    use hdrhistogram::serialization::V2DeflateSerializer;
    let mut h = Histogram::<u64>::new_with_bounds(10, 1_000_000, 2).unwrap();
    for v in [10u64, 999, 50_000, 1_000_000] {
        h.record_n(v, 4).unwrap();
    }
    let mut bytes = Vec::new();
    V2DeflateSerializer::new()
        .serialize(&h, &mut bytes)
        .unwrap();
    assert_same(&via_decode(&new(), &bytes), &via_encoded(&new(), &bytes));
    // What a holder keeps is plain V2 that parses again to the same counts.
    let kept = Encoded::parse(bytes.clone()).unwrap().as_bytes().to_vec();
    assert_eq!(be_u32(&kept, 0).unwrap(), V2_COOKIE);
    assert_same(&via_decode(&new(), &bytes), &via_encoded(&new(), &kept));
}

#[test]
fn merger_takes_owned_or_borrowed_alike() {
    let enc = |v: u64| {
        let mut h = new();
        h.record_n(v, 3).unwrap();
        Encoded::parse(encode(&h)).unwrap()
    };
    let all = [enc(100), enc(20_000), enc(7)];
    let mut m = Merger::default();
    let borrowed = m.merge(&all).clone();
    let owned = m.merge(all.iter().cloned()).clone();
    assert_same(&borrowed, &owned);
    assert_eq!(borrowed.len(), 9);
}

#[test]
fn malformed_encodings_are_errors_like_decode() {
    let len = Shape::new(1, HIGHEST_US, 3).unwrap().len as i64;
    let good = v2(1, HIGHEST_US, 3, &[3, -10, 4]);
    let mut truncated_counts = good.clone();
    truncated_counts.pop();
    let mut unterminated = v2(1, HIGHEST_US, 3, &[]);
    unterminated.extend([0x80, 0x80]);
    unterminated[4..8].copy_from_slice(&2u32.to_be_bytes());
    let mut claims_more = good.clone();
    claims_more[4..8].copy_from_slice(&u32::MAX.to_be_bytes());
    let mut bad_ratio = good.clone();
    bad_ratio[32..40].copy_from_slice(&2.0f64.to_bits().to_be_bytes());
    let mut offset = good.clone();
    offset[8..12].copy_from_slice(&1u32.to_be_bytes());
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("garbage", b"not a histogram at all".to_vec()),
        ("short cookie", vec![0x1c, 0x84]),
        ("short header", good[..30].to_vec()),
        ("truncated counts", truncated_counts),
        ("unterminated number", unterminated),
        ("length beyond the bytes", claims_more),
        ("ratio", bad_ratio),
        ("normalizing offset", offset),
        (
            "count past the last bucket",
            v2(1, HIGHEST_US, 3, &[-len, 1]),
        ),
        ("zero run of i64::MIN", v2(1, HIGHEST_US, 3, &[i64::MIN, 1])),
        ("lowest is zero", v2(0, HIGHEST_US, 3, &[1])),
        ("high below twice low", v2(100, 150, 3, &[1])),
        ("six digits", v2(1, HIGHEST_US, 6, &[1])),
        ("beyond stampede's range", v2(1, HIGHEST_US * 3, 3, &[1])),
    ];
    for (what, bytes) in cases {
        assert!(
            Encoded::parse(bytes.clone()).is_err(),
            "{what} was accepted"
        );
        // The reference refuses it too; but it would panic on i64::MIN in a debug build, and it
        // allocates the claimed length (4 GiB here) before finding the bytes short.
        if what != "zero run of i64::MIN" && what != "length beyond the bytes" {
            assert!(decode(&bytes).is_err(), "decode accepted {what}");
        }
    }
    assert!(matches!(
        Encoded::parse(v2(1, HIGHEST_US * 3, 3, &[1])),
        Err(CodecError::Range { .. })
    ));
}

#[test]
fn one_reused_deflater_writes_what_the_library_does() {
    // Empty, one value, dense, and a histogram large enough to need more than one deflate block,
    // in one sequence through the same Deflater: a reset compressor starts from nothing.
    let mut hs = vec![new()];
    let mut one = new();
    one.record(20_000).unwrap();
    hs.push(one);
    let mut dense = new();
    let mut rng = crate::rng::Rng::new(7);
    for _ in 0..50_000 {
        dense.saturating_record(1 + rng.below(3_000_000) as u64);
    }
    hs.push(dense);
    let mut wide = new();
    for v in (1..HIGHEST_US).step_by(997) {
        wide.saturating_record(v);
    }
    hs.push(wide);
    let mut ours = Deflater::default();
    for (i, h) in hs.iter().chain(hs.iter().rev()).enumerate() {
        let (mut a, mut b) = (Vec::new(), Vec::new());
        let n = ours.serialize(h, &mut a).unwrap();
        hdrhistogram::serialization::V2DeflateSerializer::new()
            .serialize(h, &mut b)
            .unwrap();
        assert_eq!(n, a.len());
        assert!(
            a == b,
            "histogram {i}: {} bytes against {}",
            a.len(),
            b.len()
        );
        let back = Encoded::parse(a).unwrap();
        let mut h2 = new();
        back.add_to(&mut h2);
        assert_same(h, &h2);
    }
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

    // The merge path's property: adding the encoded bytes straight into an accumulator equals
    // decoding them and adding the histogram, for any shape an agent might send (the canonical
    // one, and others that `decode` re-homes), onto an empty or a non-empty accumulator.
    #[test]
    fn encoded_add_equals_decode_then_add(
        canonical in proptest::bool::weighted(0.3),
        low in prop_oneof![Just(1u64), 1u64..64, 1u64..2_000_000],
        high_pick in 0u64..=HIGHEST_US * 2,
        sigfig in 0u8..=5,
        values in proptest::collection::vec((any::<u64>(), 1u64..5_000), 0..300),
        prior in proptest::collection::vec(1u64..10_000_000, 0..20),
    ) {
        let (low, high, sigfig) = if canonical {
            (LOWEST_US, HIGHEST_US, SIGFIG)
        } else {
            (low, high_pick.max(2 * low), sigfig)
        };
        let mut h = Histogram::<u64>::new_with_bounds(low, high, sigfig).unwrap();
        for (v, n) in &values {
            h.saturating_record_n(v % (high + 1), *n);
        }
        let mut acc = new();
        for v in &prior {
            acc.record(*v).unwrap();
        }
        let bytes = encode(&h);
        let a = via_decode(&acc, &bytes);
        let b = via_encoded(&acc, &bytes);
        prop_assert_eq!(&a, &b);
        prop_assert_eq!((a.len(), a.min(), a.max()), (b.len(), b.min(), b.max()));
        prop_assert_eq!(encode(&a), encode(&b));
    }

    #[test]
    fn random_bytes_are_refused_or_added_like_decode(
        bytes in proptest::collection::vec(any::<u8>(), 0..120),
        numbers in proptest::collection::vec(-30_000i64..30_000, 0..40),
    ) {
        // Arbitrary bytes, and arbitrary numbers behind a valid header.
        for b in [bytes, v2(1, HIGHEST_US, 3, &numbers)] {
            match (decode(&b), Encoded::parse(b.clone())) {
                (Ok(h), Ok(e)) => {
                    let mut acc = new();
                    e.add_to(&mut acc);
                    prop_assert_eq!(&acc, &h);
                }
                (Err(_), Err(_)) => {}
                (d, e) => prop_assert!(false, "decode {:?} but parse {:?}", d.is_ok(), e.is_ok()),
            }
        }
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
