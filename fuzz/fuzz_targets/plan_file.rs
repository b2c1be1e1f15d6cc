//! The TOML plan parser never panics, and every error it reports names a line and column.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        if let Err(message) = coordinator::config::parse_plan(text) {
            assert!(!message.is_empty());
        }
    }
});
