//! URL parsing never panics; an accepted URL has a host and a path that starts with '/'.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(url) = shared::plan::Url::parse(text) {
            assert!(!url.host().is_empty());
            assert!(url.path().starts_with('/'));
            assert!(url.port() > 0);
            let _ = shared::plan::parse_header(text);
        }
    }
});
