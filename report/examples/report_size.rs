//! How big and how slow a large report is: 100 steps of 10 agents each (the fixture's steps and
//! agent cloned and renumbered, ten 1 s samples a step), rendered; prints bytes and milliseconds.
//! Goal: under 300 KB and 1 s. `cargo run --release -p report --example report_size [OUT.html]`
#[path = "../tests/fixture/mod.rs"]
mod fixture;

use std::time::Instant;

use report::{RunReport, render_run};

const STEPS: usize = 100;
const AGENTS: usize = 10;

fn large() -> RunReport {
    let mut run = fixture::report().run;
    let template = run.steps.clone();
    let agent = run.agents[0].clone();
    run.agents = (0..AGENTS)
        .map(|a| {
            let mut info = agent.clone();
            info.name = format!("10.0.0.{}:7700", a + 11);
            info
        })
        .collect();
    run.steps = (0..STEPS)
        .map(|i| {
            let mut s = template[i % template.len()].clone();
            s.number = i as u32 + 1;
            s.step_value = 100.0 * (i + 1) as f64;
            s.demanded_rate = Some(s.step_value);
            s.duration_s = 10.0;
            let r = s.ok_rate * (1.0 + i as f64 / 10.0);
            s.reply_rate_series = (0..10).map(|k| r * (0.98 + 0.004 * k as f64)).collect();
            let one = s.agents[0].clone();
            s.agents = (0..AGENTS)
                .map(|a| {
                    let mut share = one.clone();
                    share.agent = run.agents[a].name.clone();
                    share.requests /= AGENTS as u64;
                    share
                })
                .collect();
            s
        })
        .collect();
    let distributions = fixture::distribution(&run);
    RunReport { run, distributions }
}

fn main() {
    let r = large();
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
