//! Whatever bytes an HTTP/2 server sends stampede's client (frames, HPACK blocks, cut anywhere),
//! nothing panics and the stream accounting holds: `agent::client::fuzz_frames` says what it checks.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| agent::client::fuzz_frames(data));
