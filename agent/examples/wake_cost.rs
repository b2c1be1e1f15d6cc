//! What one precise wake-up costs the generator: the price an open loop pays per arrival when arrivals
//! are further apart than its wake gap, and a closed loop does not pay (it is woken by replies).
//!
//! ```sh
//! cargo run --release -p agent --example wake_cost                 # 20,000 wake-ups 111 µs apart
//! cargo run --release -p agent --example wake_cost -- 5000 1000    # COUNT GAP_US
//! taskset -c 1 target/release/examples/wake_cost                   # pinned, as in bench/compare.sh
//! ```
//!
//! Three ways to wait for a deadline GAP µs ahead, COUNT times each, and the CPU (user + system, from
//! getrusage) each costs per wake-up: the open loop's own timer (`agent::timer::Timer`, a timerfd in the
//! worker's tokio runtime), a plain `clock_nanosleep` (`std::thread::sleep`, no runtime at all), and a
//! busy wait, the floor any sleep is measured against. On the development VM (a Firecracker guest, where
//! arming the timer and taking its interrupt leave the guest) a wake-up cost 16–28 µs of CPU whichever
//! way it slept (three runs at each of 111 µs and 1 ms); see docs/benchmarks.md, "Why an open loop costs more per connection".
use std::time::{Duration, Instant};

use agent::timer::Timer;

fn cpu() -> Duration {
    let mut ru = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage fills the struct we pass; it is zeroed, so valid whatever the call writes.
    let ru = unsafe {
        libc::getrusage(libc::RUSAGE_SELF, ru.as_mut_ptr());
        ru.assume_init()
    };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// Prints the CPU spent since `cpu0` and the lateness summed over `count` wake-ups, per wake-up.
fn report(name: &str, count: u32, cpu0: Duration, late: Duration) {
    println!(
        "{name:<16} {:>6.1} µs CPU per wake-up, {:>6.1} µs late on average",
        ((cpu() - cpu0) / count).as_secs_f64() * 1e6,
        (late / count).as_secs_f64() * 1e6
    );
}

/// Runs `wait` for `count` deadlines `gap` apart.
fn measure(name: &str, count: u32, gap: Duration, mut wait: impl FnMut(Instant)) {
    let (cpu0, start) = (cpu(), Instant::now());
    let mut late = Duration::ZERO;
    for i in 1..=count {
        let deadline = start + gap * i;
        wait(deadline);
        late += Instant::now().saturating_duration_since(deadline);
    }
    report(name, count, cpu0, late);
}

fn main() {
    let mut args = std::env::args().skip(1);
    let mut number = |default: u64| {
        args.next()
            .map(|a| {
                a.parse().unwrap_or_else(|_| {
                    eprintln!("usage: wake_cost [COUNT] [GAP_US]");
                    std::process::exit(2)
                })
            })
            .unwrap_or(default)
    };
    let count = number(20_000).clamp(1, 10_000_000) as u32;
    let gap = Duration::from_micros(number(111).clamp(1, 1_000_000));
    println!("{count} wake-ups, {} µs apart", gap.as_micros());

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a current-thread runtime");
    let local = tokio::task::LocalSet::new();
    local.block_on(&rt, async {
        let timer = Timer::new();
        let (cpu0, start) = (cpu(), tokio::time::Instant::now());
        let mut late = Duration::ZERO;
        for i in 1..=count {
            let deadline = start + gap * i;
            timer.sleep_until(deadline).await;
            late += tokio::time::Instant::now().saturating_duration_since(deadline);
        }
        report("open-loop timer", count, cpu0, late);
    });
    measure("clock_nanosleep", count, gap, |d| {
        std::thread::sleep(d.saturating_duration_since(Instant::now()))
    });
    measure("busy wait", count, gap, |d| {
        while Instant::now() < d {
            std::hint::spin_loop();
        }
    });
}
