//! Whatever request reaches the live address (a method, a target in any form, headers, a token
//! right, wrong or missing), its route is decided without a panic and it is admitted only with the
//! token: `coordinator::live::fuzz_route` says what it checks.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| coordinator::live::fuzz_route(data));
