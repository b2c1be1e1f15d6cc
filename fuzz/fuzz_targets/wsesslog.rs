//! httperf's session log (`--wsesslog`): the parser never panics, and what it accepts becomes
//! sessions whose every request index names one of the distinct requests it found.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(log) = shared::plan::parse_wsesslog(text) {
            let total: usize = log.iter().map(|s| s.requests()).sum();
            if let Ok((requests, sessions)) =
                shared::plan::Sessions::from_log(&log, std::time::Duration::from_millis(1))
            {
                assert!(!requests.is_empty() && requests.len() <= total);
                let named: usize = sessions.list().iter().map(|s| s.requests()).sum();
                assert_eq!(named, total);
                for s in sessions.list() {
                    for b in s.bursts() {
                        assert!(b.requests().iter().all(|i| usize::from(*i) < requests.len()));
                    }
                }
            }
        }
    }
});
