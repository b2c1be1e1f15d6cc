//! What TLS adds to a step: its handshakes, in full and resumed (`--tls-sessions`), and the note
//! that says which the server did.
use shared::metrics::Counters;

/// A step's TLS handshakes. A resumed one skips the certificate and the key exchange's signature,
/// the server's dearest work, so a connection rate means something else with each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct TlsStep {
    /// Handshakes done in full (a HelloRetryRequest's too).
    pub full: u64,
    /// Handshakes that resumed a session an earlier connection of the same agent thread made.
    pub resumed: u64,
}

impl TlsStep {
    /// From the step's counters: `None` when no TLS connection was made (a plain target).
    pub fn of(c: &Counters) -> Option<TlsStep> {
        (c.tls_full + c.tls_resumed > 0).then_some(TlsStep {
            full: c.tls_full,
            resumed: c.tls_resumed,
        })
    }

    /// What a reader should know of them, in words: how many of the step's handshakes the server
    /// did in full.
    pub(super) fn note(&self) -> String {
        let all = self.full + self.resumed;
        if self.resumed == 0 {
            format!("TLS: all {all} handshakes in full (--tls-sessions fresh)")
        } else {
            format!(
                "TLS: {} of {all} handshakes resumed an earlier session (--tls-sessions resume), {} in full: a resumed handshake costs the server far less",
                self.resumed, self.full
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handshakes_make_the_block_and_its_note_and_a_plain_step_has_none() {
        let mut c = Counters::default();
        assert_eq!(TlsStep::of(&c), None, "no TLS connection");
        c.tls_full = 900;
        let fresh = TlsStep::of(&c).unwrap();
        assert_eq!(
            fresh,
            TlsStep {
                full: 900,
                resumed: 0
            }
        );
        assert_eq!(
            fresh.note(),
            "TLS: all 900 handshakes in full (--tls-sessions fresh)"
        );
        c.tls_full = 2;
        c.tls_resumed = 898;
        assert!(
            TlsStep::of(&c)
                .unwrap()
                .note()
                .starts_with("TLS: 898 of 900 handshakes resumed an earlier session"),
        );
    }
}
