//! A worker's measurements: one `Snapshot` owned by its thread, written without locks and swapped out
//! once per interval.
use std::borrow::Cow;
use std::cell::RefCell;
use std::time::Duration;

use shared::metrics::{ErrorClass, NameStats, Snapshot};
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
    /// Whether the requests are named: each then has its row (`Snapshot::names`); unnamed ones
    /// cost nothing more.
    named: bool,
}

/// Which request of the workload a measurement belongs to (its index), where one was chosen: a
/// connection that failed before any request was chosen for it is the step's alone.
pub type Name = Option<u16>;

/// The row of request `name` in `s`, made on its first use.
fn row(s: &mut Snapshot, name: u16) -> &mut NameStats {
    let i = usize::from(name);
    if s.names.len() <= i {
        s.names.resize_with(i + 1, NameStats::default);
    }
    &mut s.names[i]
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
            named: false,
        }
    }

    /// A recorder that keeps a row per named request as well.
    pub fn named(ok: StatusSet, named: bool) -> Self {
        Recorder {
            named,
            ..Recorder::new(ok)
        }
    }

    /// Runs `f` on request `name`'s row (when the requests are named) of the current interval.
    pub fn on_name(&self, name: u16, f: impl FnOnce(&mut NameStats)) {
        self.with(|s| self.on_row(s, Some(name), f));
    }

    /// Runs `f` on request `name`'s row, when the requests are named and one was chosen.
    fn on_row(&self, s: &mut Snapshot, name: Name, f: impl FnOnce(&mut NameStats)) {
        if let (true, Some(name)) = (self.named, name) {
            f(row(s, name));
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
    pub fn error(&self, name: Name, class: ErrorClass) {
        self.with(|s| {
            s.counters.record_error(class);
            self.on_row(s, name, |r| r.counters.errors[class.index()] += 1);
            s.messages
                .keep(class, || Cow::Borrowed(general_words(class)));
        });
    }

    /// A failure that kept a due request from being written at all.
    pub fn unsent(&self, name: Name, class: ErrorClass) {
        self.error(name, class);
        self.with(|s| {
            s.counters.unsent += 1;
            self.on_row(s, name, |r| r.counters.unsent += 1);
        });
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
    pub fn sent(&self, name: u16) {
        self.with(|s| {
            if self.owed.get() > 0 {
                self.owed.set(self.owed.get() - 1);
            } else {
                s.counters.requests += 1;
            }
            self.on_row(s, Some(name), |r| r.counters.requests += 1);
        });
    }

    /// Takes back a [`Recorder::sent`] for a request no attempt got to the server (it is counted
    /// unsent instead). A resend is not counted again, so this is the rare way back, and it may have
    /// to come off an interval still to be counted (`owed`).
    pub fn unsend(&self, name: u16) {
        self.with(|s| {
            match s.counters.requests.checked_sub(1) {
                Some(n) => s.counters.requests = n,
                None => self.owed.set(self.owed.get() + 1),
            }
            // A name's row is never checked against an earlier interval's: taken back where it
            // can be, else left (one request of a rare resend).
            self.on_row(s, Some(name), |r| {
                r.counters.requests = r.counters.requests.saturating_sub(1)
            });
        });
    }

    pub fn replied(&self, name: u16, status: u16, ttfb: Duration, latency: Duration) {
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
            self.on_row(s, Some(name), |r| {
                r.counters.replies += 1;
                r.counters.record_status(status);
                if ok {
                    r.counters.ok += 1;
                    r.latency.saturating_record(us(latency));
                } else {
                    r.failed.saturating_record(us(latency));
                }
            });
        });
    }

    /// A due request given up without a reply (timed out, expired in the queue, dropped at the
    /// step's end): its age then is a lower bound of its latency, and it enters the latency as one,
    /// so the percentiles are not those of the survivors only.
    pub fn given_up(&self, name: Name, age: Duration) {
        self.with(|s| {
            s.counters.given_up += 1;
            s.hist.latency.saturating_record(us(age));
            s.hist.censored.saturating_record(us(age));
            self.on_row(s, name, |r| {
                r.counters.given_up += 1;
                r.latency.saturating_record(us(age));
            });
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
        rec.error(None, ErrorClass::Other);
        rec.unsent(None, ErrorClass::ClientTimeout);
        rec.replied(0, 999, Duration::ZERO, Duration::ZERO);
        let s = rec.swap();
        assert_eq!(s.counters.error(ErrorClass::Other), 2);
        assert_eq!(s.messages.get(ErrorClass::Other), Some("not an HTTP reply"));
        assert_eq!(
            s.messages.get(ErrorClass::ClientTimeout),
            Some("no complete reply within --timeout")
        );
        assert!(rec.swap().messages.is_empty());
        rec.replied(0, 999, Duration::ZERO, Duration::ZERO);
        assert_eq!(
            rec.swap().messages.get(ErrorClass::Other),
            Some("reply status 999 is outside 100-599: not an HTTP status")
        );
    }

    #[test]
    fn a_named_request_has_its_row_and_its_failures_apart_from_its_served_replies() {
        let rec = Recorder::named(StatusSet::default(), true);
        rec.sent(2);
        rec.replied(2, 200, Duration::ZERO, Duration::from_millis(900));
        rec.sent(2);
        rec.replied(2, 503, Duration::ZERO, Duration::from_millis(1));
        rec.sent(0);
        rec.given_up(Some(0), Duration::from_secs(3));
        rec.unsent(Some(0), ErrorClass::ConnRefused);
        // A failure before any request was chosen is the step's alone.
        rec.unsent(None, ErrorClass::ConnRefused);
        let s = rec.swap();
        assert_eq!(s.counters.requests, 3);
        assert_eq!(s.counters.unsent, 2);
        assert_eq!(s.names.len(), 3);
        let (login, search) = (&s.names[0].counters, &s.names[2].counters);
        assert_eq!((login.requests, login.given_up, login.unsent), (1, 1, 1));
        assert_eq!(login.error(ErrorClass::ConnRefused), 1);
        assert_eq!((search.requests, search.replies, search.ok), (2, 2, 1));
        assert_eq!(search.status, [0, 1, 0, 0, 1]);
        assert_eq!(s.names[2].latency.len(), 1);
        assert!(s.names[2].latency.min() >= 899_000);
        assert!(s.names[2].failed.max() <= 1_001);
        assert_eq!(
            s.names[0].latency.len(),
            1,
            "a given-up request is a lower bound there"
        );
        assert_eq!(s.names[1].counters, Default::default());
        // Unnamed, no rows at all.
        let plain = Recorder::default();
        plain.sent(0);
        plain.replied(0, 200, Duration::ZERO, Duration::ZERO);
        assert!(plain.swap().names.is_empty());
    }

    #[test]
    fn a_stale_request_taken_back_after_a_swap_still_counts_once() {
        let rec = Recorder::default();
        rec.sent(0);
        let first = rec.swap();
        // It turned out stale after its interval left; it is resent in the next one.
        rec.unsend(0);
        rec.sent(0);
        rec.sent(0);
        let second = rec.swap();
        assert_eq!(first.counters.requests + second.counters.requests, 2);
    }
}
