//! stampede's control plane, the part both sides of it share: the link a session runs over and its
//! gRPC ends (`dial`, `listener`), the fleet's mutual TLS (`mtls`) and certificate roles (`role`), who
//! is admitted to a session (`admission`, with the join proof), what an agent-side session of either
//! role shares (`session`), and the limits a step is checked against on both sides (`policy`, this
//! agent's; `machine`, its machine's sockets, descriptors and threads; `system`, the facts they read).
pub mod admission;
pub mod dial;
pub mod link;
pub mod listener;
pub mod machine;
pub mod mtls;
pub mod policy;
pub mod role;
pub mod session;
pub mod system;

pub use link::{AgentEnd, Closed, CoordinatorEnd, Link, LinkRx, LinkTx, Side};

/// Installs the one rustls crypto provider stampede uses, before any TLS is set up, so feature
/// unification can never leave rustls to pick (and panic).
pub fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}
