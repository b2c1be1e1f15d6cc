//! The setup request a connection runs once before its first request of the mix, and the values its
//! reply hands that connection's later requests (`${var}` of the setup's extractions).
use shared::plan::Extraction;

use super::target::Template;

/// The setup as a worker sends it: its request (rendered per connection when it has variables) and
/// what to take from its reply.
#[derive(Debug)]
pub struct Setup {
    pub(super) template: Template,
    pub(super) extract: Vec<Extraction>,
}

impl Setup {
    pub fn new(template: Template, extract: Vec<Extraction>) -> Setup {
        Setup { template, extract }
    }
}
