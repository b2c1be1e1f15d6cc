//! The server monitor's measuring side: what it reads of the target and the host (`probe`). The
//! monitor role's session, which streams these samples, is beside it.
pub mod probe;

pub use probe::host::machine_id;
pub use probe::{Probe, ProbeError};
