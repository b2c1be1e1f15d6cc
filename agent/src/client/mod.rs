//! The client side of one worker: a target compiled once per run, connections whose bytes are
//! counted as they pass, one protocol exchange over them, and every failure mapped to one error class
//! and described in words (made only when its class has no message yet in the interval).
//!
//! The client is written for the hot path, as wrk's is: a request is one write of bytes prepared before
//! the step, a reply is read into one buffer owned by its connection and parsed in place, and nothing
//! is allocated, spawned or sent between tasks per request. A general client (hyper) costs a task, a
//! channel and a rebuilt header map per request, which made the generator the heavier side of the
//! benchmark against nginx.
//!
//! The seam the workers use is `Conn::open / send / linger` and `SendError`. Below it the concerns stay
//! apart so a second protocol can sit beside `http1` on the same transport and the same failure words:
//! - `target`: the workload compiled once (address, request templates, TLS connector);
//! - `tls`: the rustls client config for the target (`--insecure`, SNI, ALPN);
//! - `transport`: TCP or TLS, counted, opened within the connect timeout;
//! - `http1`: the HTTP/1.1 exchange (`Conn`);
//! - `http2`: the HTTP/2 exchange (`Session`), its streams shared by several loops, with frames, HPACK
//!   and the connection's state of its own (`http2/`);
//! - `failure`: error classes and their words.
mod failure;
mod http1;
mod http2;
mod target;
#[cfg(test)]
mod testing;
mod tls;
mod transport;

pub use failure::SendError;
pub use http1::Conn;
#[doc(hidden)]
pub use http2::conn::fuzz_frames;
pub use http2::{Session, Tries};
pub use target::{Endpoint, PrepareError, Template};
