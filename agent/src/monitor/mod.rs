//! The server monitor: what it reads of the target and the host (`probe`), and the monitor role's
//! session, which streams those readings to a coordinator and refuses every load command (`session`).
pub mod probe;
pub mod session;

pub use probe::{Probe, ProbeError};
