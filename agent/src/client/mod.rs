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
//! The seam the workers use is `Connection`: `slots`, `open`, `send` (a request and its intended time)
//! and `linger`, whichever protocol is under it. Below it the concerns stay apart, both protocols on
//! the same transport and the same failure words:
//! - `connection`: the seam, and each protocol's waits and resends behind it;
//! - `target`: the workload compiled once (address, request templates, TLS connector);
//! - `render`: a request with `${var}` rendered per send; `setup`: the request a connection runs first;
//! - `tls`: the rustls client config for the target (`--insecure`, SNI, ALPN);
//! - `transport`: TCP or TLS, counted, opened within the connect timeout;
//! - `http1`: the HTTP/1.1 exchange (`Conn`);
//! - `http2`: the HTTP/2 exchange (`http2::Conn`), its streams shared by several slots, with frames,
//!   HPACK and the connection's state of its own (`http2/`), and the `preflight` a configure runs on
//!   the prepared target: whether it speaks the HTTP/2 asked for, before any load;
//! - `failure`: error classes and their words.
mod connection;
mod failure;
mod http1;
mod http2;
mod render;
mod setup;
mod target;
#[cfg(test)]
mod testing;
mod tls;
mod transport;

pub use connection::{Connection, Request, Sent, Unsent};
#[doc(hidden)]
pub use http2::conn::fuzz_frames;
pub use http2::preflight;
pub use render::{Fill, Recipe, Vars};
pub use target::{Endpoint, PrepareError, Template};
