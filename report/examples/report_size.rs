//! How big and how slow a large report is: 100 steps of 10 agents each (`fixture::large`),
//! rendered; prints bytes and milliseconds. Goal: under 300 KB and 1 s (tests/report.rs holds the
//! size). `cargo run --release -p report --example report_size [OUT.html]`
// The tests' fixture, of which this example needs only `large`.
#[path = "../tests/fixture/mod.rs"]
#[allow(dead_code)]
mod fixture;

use std::time::Instant;

use report::render_run;

const STEPS: usize = 100;
const AGENTS: usize = 10;

fn main() {
    let r = fixture::large(STEPS, AGENTS);
    let start = Instant::now();
    let page = render_run(&r);
    let took = start.elapsed();
    println!(
        "{STEPS} steps x {AGENTS} agents: {} bytes ({:.1} KB), rendered in {:.1} ms",
        page.len(),
        page.len() as f64 / 1024.0,
        took.as_secs_f64() * 1000.0
    );
    if let Some(out) = std::env::args().nth(1) {
        std::fs::write(&out, &page).expect("the output file is writable");
        println!("written to {out}");
    }
}
