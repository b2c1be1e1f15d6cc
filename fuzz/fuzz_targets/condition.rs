//! Threshold expressions (--stop-on, --fail-on) never panic; an accepted one displays as text that parses
//! back to it, and an error's column lies inside the input (or just past its end).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        match results::condition::parse(text) {
            Ok(c) => assert_eq!(results::condition::parse(&c.to_string()), Ok(c)),
            Err(e) => {
                assert!(e.column >= 1 && e.column <= text.chars().count() + 1);
                let _ = e.pointer();
            }
        }
    }
});
