//! The histogram decoder (bytes from the network) never panics, and what it accepts can be merged.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(h) = shared::histogram::decode(data) {
        let mut total = shared::histogram::new();
        shared::histogram::add(&mut total, &h);
        let _ = total.value_at_quantile(0.99);
    }
});
