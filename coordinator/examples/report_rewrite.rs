//! What rewriting report.html costs a run after each step: the time between one step's end and the
//! next step's start that the report takes, as the run grows to 100 steps of 10 agents.
//!
//! ```sh
//! cargo run --release -p coordinator --example report_rewrite                  # 100 steps, 10 agents
//! cargo run --release -p coordinator --example report_rewrite -- --steps 300 --agents 100
//! ```
//!
//! The steps are the golden run's (`results/tests/golden/run.json`, a real demo run), cloned in turn
//! with their step number and value moved on and their agent entry repeated under new names; each
//! has its `.hgrm` (a latency histogram spread over 1 ms to 1 s). After each step, as `Output` does:
//! its .hgrm and run.json are written (not timed: the run did it before the report existed), then
//! report.html is rendered from the directory and replaced (timed: `output::write_report`, what
//! `Output` calls).
use std::path::Path;
use std::time::{Duration, Instant};

use coordinator::output;
use results::distribution::Distribution;
use results::run_file::RunFile;

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map(|v| {
            v.parse()
                .unwrap_or_else(|_| panic!("{name} takes a number"))
        })
        .unwrap_or(default)
}

fn main() {
    let steps = arg("--steps", 100);
    let agents = arg("--agents", 10);
    let golden = Path::new(env!("CARGO_MANIFEST_DIR")).join("../results/tests/golden/run.json");
    let text = std::fs::read_to_string(&golden).expect("the golden run.json");
    let template = RunFile::parse(&text, &golden).expect("the golden run.json parses");
    let dir = tempfile::tempdir().expect("a temporary directory");
    std::fs::create_dir(dir.path().join("hlog")).expect("hlog/");
    let mut latency = shared::histogram::new();
    for i in 0..10_000u64 {
        // 1 ms to 1 s, denser at the low end, as a latency distribution is.
        latency
            .record(1000 + i * i / 100)
            .expect("in the histogram's range");
    }
    let mut run = template.clone();
    run.steps.clear();
    run.agents = (0..agents)
        .map(|i| {
            let mut a = template.agents[0].clone();
            a.name = format!("agent-{i}");
            a
        })
        .collect();
    let mut times: Vec<Duration> = Vec::with_capacity(steps);
    for n in 0..steps {
        let mut step = template.steps[n % template.steps.len()].clone();
        step.number = n as u32 + 1;
        step.step_value = 100.0 * (n + 1) as f64;
        let one = step.agents[0].clone();
        step.agents = (0..agents)
            .map(|i| {
                let mut a = one.clone();
                a.agent = format!("agent-{i}");
                a
            })
            .collect();
        output::write_hgrm(dir.path(), &Distribution::of(step.number, &latency))
            .expect(".hgrm written");
        run.steps.push(step);
        std::fs::write(dir.path().join("run.json"), run.to_json()).expect("run.json written");
        let began = Instant::now();
        output::write_report(dir.path()).expect("report.html written");
        times.push(began.elapsed());
    }
    let size = std::fs::metadata(dir.path().join("report.html"))
        .expect("report.html")
        .len();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!("{steps} steps x {agents} agents: report.html rewritten after each step");
    let mut marks = vec![1, 10, 50, 100, steps];
    marks.dedup();
    for at in marks {
        if at <= steps {
            println!("  after step {at:>4}: {:8.2} ms", ms(times[at - 1]));
        }
    }
    let total: Duration = times.iter().sum();
    println!(
        "  whole run: {:.0} ms of report writing; last report {} KB",
        ms(total),
        size / 1024
    );
}
