//! stampede's load agent: worker threads that send HTTP load on a schedule, measure it without locks,
//! and report 1 s intervals over a control session that a coordinator drives.
pub mod capacity;
pub mod client;
pub mod daemon;
pub mod engine;
pub mod link;
pub mod monitor;
pub mod policy;
pub mod recorder;
pub mod response;
pub mod session;
pub mod socket;
pub mod system;
pub mod timer;
pub mod tls;
pub mod worker;

pub use engine::Engine;
pub use link::{CoordinatorEnd, Link};
pub use session::{embedded, serve};

/// Installs the one rustls crypto provider stampede uses, before any TLS is set up, so feature
/// unification can never leave rustls to pick (and panic).
pub fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}
