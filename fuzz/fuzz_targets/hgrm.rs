//! `.hgrm` text (a percentile distribution another tool wrote) never panics the reader; an accepted one
//! prints as text that reads back to the same rows, and an error's line lies inside the input.
#![no_main]
use libfuzzer_sys::fuzz_target;
use results::distribution::{Distribution, HgrmError};

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        match Distribution::parse_hgrm(1, text) {
            Ok(d) => {
                let back = Distribution::parse_hgrm(1, &d.to_hgrm()).expect("our own text reads back");
                let counts = |d: &Distribution| d.points.iter().map(|p| p.count).collect::<Vec<_>>();
                assert_eq!((back.total, counts(&back)), (d.total, counts(&d)));
            }
            Err(HgrmError::Line { line, .. }) => assert!(line >= 1 && line <= text.lines().count()),
            Err(_) => {}
        }
    }
});
