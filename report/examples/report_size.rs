//! How big and how slow a large report is: 100 steps of 10 agents each (`fixture::large`),
//! rendered, and a comparison of 5 runs of 20 steps; prints bytes and milliseconds. Goal: under
//! 300 KB and 1 s each (tests/report.rs and compare_page's tests hold the sizes). `cargo run --release -p report --example report_size [OUT.html]`
// The tests' fixture, of which this example needs only `large`.
#[path = "../tests/fixture/mod.rs"]
#[allow(dead_code)]
mod fixture;

use std::time::Instant;

use report::{render_compare, render_run};
use results::compare::{Labelled, Threshold, compare};

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
    // Five runs of twenty steps, each a little slower than the one before.
    let runs: Vec<Labelled> = (0..5)
        .map(|i| {
            let mut run = fixture::large(20, 1).run;
            for s in &mut run.steps {
                s.latency_ms.p99 *= 1.0 + 0.1 * i as f64;
            }
            Labelled {
                label: format!("run-{i}"),
                source: format!("results/run-{i}"),
                run,
            }
        })
        .collect();
    let c = compare(runs, None, Threshold::default()).expect("five distinct labels");
    let start = Instant::now();
    let compared = render_compare(&c);
    let took_compare = start.elapsed();
    println!(
        "compare of 5 runs x 20 steps: {} bytes ({:.1} KB), rendered in {:.1} ms",
        compared.len(),
        compared.len() as f64 / 1024.0,
        took_compare.as_secs_f64() * 1000.0
    );
    if let Some(out) = std::env::args().nth(1) {
        std::fs::write(&out, &page).expect("the output file is writable");
        println!("written to {out}");
    }
}
