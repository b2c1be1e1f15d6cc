//! The histogram decoder (bytes from the network) never panics, and what it accepts can be merged. The
//! merge's decoder-free path (`Encoded`, `Sum`) accepts the same bytes and adds the same counts.
#![no_main]
use libfuzzer_sys::fuzz_target;
use shared::histogram::{self, Encoded, Sum};

fuzz_target!(|data: &[u8]| {
    let decoded = histogram::decode(data);
    let encoded = Encoded::parse(data.to_vec());
    if let Ok(h) = &decoded {
        let mut total = histogram::new();
        histogram::add(&mut total, h);
        let _ = total.value_at_quantile(0.99);
    }
    match (decoded, encoded) {
        (Ok(h), Ok(e)) => {
            let mut direct = histogram::new();
            e.add_to(&mut direct);
            let mut sum = Sum::new();
            sum.add(&e);
            assert!(direct == h, "Encoded::add_to differs from decode");
            assert!(sum.to_histogram() == h, "Sum differs from decode");
        }
        (Err(_), Err(_)) => {}
        // A compressed histogram whose inflated counts are longer than its shape can hold is refused
        // on purpose (decode would inflate whatever it claims).
        (Ok(_), Err(_)) if data.get(..4) == Some(&[0x1c, 0x84, 0x93, 0x14][..]) => {}
        (d, e) => panic!(
            "decode {} but Encoded::parse {}",
            if d.is_ok() { "accepts" } else { "refuses" },
            if e.is_ok() { "accepts" } else { "refuses" }
        ),
    }
});
