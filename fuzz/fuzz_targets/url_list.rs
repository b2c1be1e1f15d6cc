//! The URL-list parser never panics, and what it accepts parses again as the same requests (an
//! h2c:// or h2:// URL in its http(s) spelling, as the coordinator sends it).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(list) = shared::plan::parse_url_list(text) {
            for (method, url) in list {
                let url = shared::plan::http2_spelling(&url).unwrap_or(url);
                assert!(shared::plan::RequestSpec::try_new(&method, &url, Vec::new(), Vec::new()).is_ok());
            }
        }
    }
});
