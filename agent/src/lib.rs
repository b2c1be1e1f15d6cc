//! stampede's load agent: worker threads that send HTTP load on a schedule, measure it without locks,
//! and report 1 s intervals over a control session that a coordinator drives.
pub mod client;
pub mod daemon;
pub mod engine;
pub mod feeder;
pub mod recorder;
pub mod response;
pub mod session;
pub mod socket;
pub mod timer;
pub mod worker;

pub use engine::Engine;
pub use session::{embedded, serve};
