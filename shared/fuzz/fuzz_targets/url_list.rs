//! The URL-list parser never panics, and what it accepts parses again as the same requests.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(list) = shared::plan::parse_url_list(text) {
            for (method, url) in list {
                assert!(shared::plan::RequestSpec::try_new(&method, &url, Vec::new(), Vec::new()).is_ok());
            }
        }
    }
});
