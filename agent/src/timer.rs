//! A precise sleep for the open loop. tokio's timer wheel ticks once per millisecond, so every arrival
//! would leave up to 1-2 ms late and the lag the generator reports would be its own timer's. A
//! per-worker timerfd armed at the exact nanosecond wakes the worker through epoll instead.
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use tokio::io::unix::AsyncFd;
use tokio::time::Instant;

pub struct Timer {
    fd: Option<AsyncFd<OwnedFd>>,
}

fn monotonic_now() -> libc::timespec {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes only into the timespec we pass.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts
}

impl Timer {
    /// A timerfd on this thread's runtime; if the kernel refuses one, tokio's timer is used instead.
    pub fn new() -> Timer {
        // SAFETY: timerfd_create has no memory arguments; a non-negative result is a new fd we own.
        let raw = unsafe {
            libc::timerfd_create(
                libc::CLOCK_MONOTONIC,
                libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
            )
        };
        let fd = (raw >= 0)
            // SAFETY: `raw` is a freshly created descriptor that nothing else owns.
            .then(|| unsafe { OwnedFd::from_raw_fd(raw) })
            // SAFETY: an OwnedFd stays open and keeps its descriptor until the AsyncFd drops it.
            .and_then(|fd| {
                unsafe { AsyncFd::register_with_interest(fd, tokio::io::Interest::READABLE) }.ok()
            });
        Timer { fd }
    }

    /// Returns at `deadline` (or at once if it has passed).
    pub async fn sleep_until(&self, deadline: Instant) {
        let now = Instant::now();
        if deadline <= now {
            return;
        }
        let Some(fd) = &self.fd else {
            return tokio::time::sleep_until(deadline).await;
        };
        // std's Instant is CLOCK_MONOTONIC on Linux: carry the remaining time over to that clock.
        let ahead = deadline - now;
        let base = monotonic_now();
        let total_ns = base.tv_nsec as u64 + u64::from(ahead.subsec_nanos());
        let value = libc::timespec {
            tv_sec: base.tv_sec
                + ahead.as_secs() as libc::time_t
                + (total_ns / 1_000_000_000) as libc::time_t,
            tv_nsec: (total_ns % 1_000_000_000) as libc::c_long,
        };
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: value,
        };
        // SAFETY: the fd is a live timerfd we own; `spec` outlives the call; no old value is requested.
        let rc = unsafe {
            libc::timerfd_settime(
                fd.as_raw_fd(),
                libc::TFD_TIMER_ABSTIME,
                &spec,
                std::ptr::null_mut(),
            )
        };
        if rc != 0 {
            return tokio::time::sleep_until(deadline).await;
        }
        loop {
            let Ok(mut ready) = fd.readable().await else {
                return tokio::time::sleep_until(deadline).await;
            };
            // The expiry is not read: the next timerfd_settime re-arms the timer whatever it
            // counted, and edge-triggered epoll reports each expiry once, so one read(2) per
            // arrival is saved. The readiness is cleared instead; the clock says whether this
            // was our expiry or an earlier arming's, left over by a sleep that was dropped.
            ready.clear_ready();
            if Instant::now() >= deadline {
                return;
            }
        }
    }
}

impl Default for Timer {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::future::Future;
    use std::time::Duration;

    #[tokio::test(flavor = "current_thread")]
    async fn wakes_at_the_deadline_not_a_tick_later() {
        let timer = Timer::new();
        assert!(timer.fd.is_some(), "timerfd is available on Linux");
        let mut worst = Duration::ZERO;
        for i in 0..50u64 {
            let deadline = Instant::now() + Duration::from_micros(300 + i * 37);
            timer.sleep_until(deadline).await;
            let now = Instant::now();
            assert!(now >= deadline, "woke early");
            worst = worst.max(now - deadline);
        }
        // Generous for a loaded 2-core box; tokio's own timer is late by up to a full tick.
        assert!(
            worst < Duration::from_millis(20),
            "worst lateness {worst:?}"
        );
    }

    #[tokio::test(flavor = "current_thread")]
    async fn an_expiry_left_by_a_dropped_sleep_does_not_end_the_next_one_early() {
        let timer = Timer::new();
        // Armed for 1 ms, polled once, then dropped before it fires.
        let mut dropped = Box::pin(timer.sleep_until(Instant::now() + Duration::from_millis(1)));
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        assert!(dropped.as_mut().poll(&mut cx).is_pending());
        drop(dropped);
        // Its expiry happens meanwhile and reaches the reactor during this yield-filled wait.
        let until = Instant::now() + Duration::from_millis(5);
        while Instant::now() < until {
            tokio::task::yield_now().await;
        }
        for _ in 0..3 {
            let deadline = Instant::now() + Duration::from_millis(20);
            timer.sleep_until(deadline).await;
            assert!(Instant::now() >= deadline, "woke before its deadline");
        }
    }

    #[tokio::test(flavor = "current_thread")]
    async fn past_deadline_returns_at_once() {
        let timer = Timer::new();
        timer
            .sleep_until(Instant::now() - Duration::from_millis(5))
            .await;
    }
}
