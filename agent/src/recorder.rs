//! A worker's measurements: one `Snapshot` owned by its thread, written without locks and swapped out
//! once per interval.
use std::borrow::Cow;
use std::cell::RefCell;
use std::time::Duration;

use shared::metrics::{ErrorClass, Snapshot};
use shared::status::StatusSet;

use control::system;

#[derive(Debug)]
pub struct Recorder {
    snap: RefCell<Snapshot>,
    cpu_mark: std::cell::Cell<u64>,
    /// The statuses that count as served; others are kept out of the latency.
    ok: StatusSet,
    /// Requests counted as sent that turned out stale after the interval holding them was swapped
    /// out: taken off the next ones counted, so the step's total stays exact.
    owed: std::cell::Cell<u64>,
    /// The open schedule has ended: replies from now on are the drain's.
    draining: std::cell::Cell<bool>,
}

fn us(d: Duration) -> u64 {
    d.as_micros().min(u128::from(u64::MAX)) as u64
}

impl Recorder {
    pub fn new(ok: StatusSet) -> Self {
        Recorder {
            snap: RefCell::new(Snapshot::default()),
            cpu_mark: std::cell::Cell::new(system::thread_cpu_ns()),
            ok,
            owed: std::cell::Cell::new(0),
            draining: std::cell::Cell::new(false),
        }
    }

    /// The open schedule has ended: every reply after this is counted as drained (a flag read per
    /// reply, no clock; set at the schedule's end by `worker::drain_from_the_end`).
    pub fn drain_begins(&self) {
        self.draining.set(true);
    }

    /// Runs `f` on the current interval's snapshot. Never held across an await.
    pub fn with<R>(&self, f: impl FnOnce(&mut Snapshot) -> R) -> R {
        f(&mut self.snap.borrow_mut())
    }

    /// Counts an error. Its words are the client's, kept by [`Recorder::note`] where it saw the
    /// failure; a class nobody described yet gets its general words.
    pub fn error(&self, class: ErrorClass) {
        self.with(|s| {
            s.counters.record_error(class);
            s.messages
                .keep(class, || Cow::Borrowed(general_words(class)));
        });
    }

    /// A failure that kept a due request from being written at all.
    pub fn unsent(&self, class: ErrorClass) {
        self.error(class);
        self.with(|s| s.counters.unsent += 1);
    }

    /// Keeps `words()` as the first message of `class` in this interval, if it has none; `words`
    /// runs only then, so a failure costs no allocation once its class has its message.
    pub fn note(&self, class: ErrorClass, words: impl FnOnce() -> Cow<'static, str>) {
        self.with(|s| s.messages.keep(class, words));
    }

    pub fn lag(&self, d: Duration) {
        self.with(|s| s.hist.lag.saturating_record(us(d)));
    }

    pub fn wait(&self, d: Duration, waited: bool) {
        self.with(|s| {
            s.hist.wait.saturating_record(us(d));
            s.counters.waited += u64::from(waited);
        });
    }

    pub fn connected(&self, d: Duration) {
        self.with(|s| {
            s.counters.connections += 1;
            s.hist.connect.saturating_record(us(d));
        });
    }

    /// A TLS handshake done, in full or `resumed` from an earlier session of the worker's.
    pub fn tls_handshake(&self, resumed: bool) {
        self.with(|s| {
            if resumed {
                s.counters.tls_resumed += 1;
            } else {
                s.counters.tls_full += 1;
            }
        });
    }

    /// A request handed to the connection: counted as it leaves, not when its reply (or timeout)
    /// comes, so the live rate is what is being sent now and the step's total is all of it by its end.
    pub fn sent(&self) {
        if self.owed.get() > 0 {
            self.owed.set(self.owed.get() - 1);
        } else {
            self.with(|s| s.counters.requests += 1);
        }
    }

    /// Takes back a [`Recorder::sent`] for a request no attempt got to the server (it is counted
    /// unsent instead). A resend is not counted again, so this is the rare way back, and it may have
    /// to come off an interval still to be counted (`owed`).
    pub fn unsend(&self) {
        self.with(|s| match s.counters.requests.checked_sub(1) {
            Some(n) => s.counters.requests = n,
            None => self.owed.set(self.owed.get() + 1),
        });
    }

    pub fn replied(&self, status: u16, ttfb: Duration, latency: Duration) {
        let ok = self.ok.contains(status);
        if !(shared::status::LOWEST..=shared::status::HIGHEST).contains(&status) {
            // Counted as an `other` error by record_status.
            self.note(ErrorClass::Other, || {
                format!("reply status {status} is outside 100-599: not an HTTP status").into()
            });
        }
        let drained = u64::from(self.draining.get());
        self.with(|s| {
            s.counters.replies += 1;
            s.counters.drained += drained;
            s.counters.record_status(status);
            s.codes.record(status);
            s.hist.ttfb.saturating_record(us(ttfb));
            if ok {
                s.counters.ok += 1;
                s.hist.latency.saturating_record(us(latency));
            } else {
                s.hist.unexpected.saturating_record(us(latency));
            }
        });
    }

    /// A due request given up without a reply (timed out, expired in the queue, dropped at the
    /// step's end): its age then is a lower bound of its latency, and it enters the latency as one,
    /// so the percentiles are not those of the survivors only.
    pub fn given_up(&self, age: Duration) {
        self.with(|s| {
            s.counters.given_up += 1;
            s.hist.latency.saturating_record(us(age));
            s.hist.censored.saturating_record(us(age));
        });
    }

    pub fn bytes(&self, inbound: u64, outbound: u64) {
        self.with(|s| {
            s.counters.bytes_in += inbound;
            s.counters.bytes_out += outbound;
        });
    }

    /// Takes the interval's snapshot, with the thread's CPU time since the last swap. Call it on the
    /// worker's own thread: the CPU clock is per thread.
    pub fn swap(&self) -> Snapshot {
        let now = system::thread_cpu_ns();
        let mut snap = self.snap.replace(Snapshot::default());
        snap.cpu_ns = now.saturating_sub(self.cpu_mark.replace(now));
        snap
    }
}

/// What a class means when the failure left no more precise words (a worker's own judgement: an
/// arrival that expired in the queue, a fresh connection closed before it took the request).
fn general_words(class: ErrorClass) -> &'static str {
    match class {
        ErrorClass::ClientTimeout => "no complete reply within --timeout",
        ErrorClass::ConnectTimeout => "connection not established within --connect-timeout",
        ErrorClass::ConnRefused => "connection refused: is the target up?",
        ErrorClass::ConnReset => "the target closed the connection before a complete reply",
        ErrorClass::FdUnavailable => {
            "the generator is out of file descriptors: raise ulimit -n or add agents"
        }
        ErrorClass::AddrUnavailable => {
            "the generator is out of local ports, or lacks a --source-addrs address"
        }
        ErrorClass::Other => "the exchange failed",
    }
}

impl Default for Recorder {
    fn default() -> Self {
        Self::new(StatusSet::default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_keeps_the_clients_words_else_its_class_meaning_and_swap_empties_them() {
        let rec = Recorder::default();
        rec.note(ErrorClass::Other, || "not an HTTP reply".into());
        rec.error(ErrorClass::Other);
        rec.unsent(ErrorClass::ClientTimeout);
        rec.replied(999, Duration::ZERO, Duration::ZERO);
        let s = rec.swap();
        assert_eq!(s.counters.error(ErrorClass::Other), 2);
        assert_eq!(s.messages.get(ErrorClass::Other), Some("not an HTTP reply"));
        assert_eq!(
            s.messages.get(ErrorClass::ClientTimeout),
            Some("no complete reply within --timeout")
        );
        assert!(rec.swap().messages.is_empty());
        rec.replied(999, Duration::ZERO, Duration::ZERO);
        assert_eq!(
            rec.swap().messages.get(ErrorClass::Other),
            Some("reply status 999 is outside 100-599: not an HTTP status")
        );
    }

    #[test]
    fn a_stale_request_taken_back_after_a_swap_still_counts_once() {
        let rec = Recorder::default();
        rec.sent();
        let first = rec.swap();
        // It turned out stale after its interval left; it is resent in the next one.
        rec.unsend();
        rec.sent();
        rec.sent();
        let second = rec.swap();
        assert_eq!(first.counters.requests + second.counters.requests, 2);
    }
}
