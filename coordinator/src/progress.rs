//! What people see: a live line per step on stderr while it runs, and the table of steps at the end.
use std::io::{IsTerminal, Write};

use shared::report::StepResult;

pub struct Progress {
    quiet: bool,
    live: bool,
}

/// The numbers of one interval as the progress line shows them.
pub struct Tick {
    pub step: u32,
    pub steps: usize,
    pub elapsed_s: f64,
    pub demanded: Option<f64>,
    pub value: f64,
    pub achieved: f64,
    pub replies: f64,
    pub p99_ms: f64,
    pub errors: u64,
}

fn rate(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

impl Progress {
    pub fn new(quiet: bool) -> Progress {
        Progress {
            quiet,
            live: std::io::stderr().is_terminal(),
        }
    }

    /// Whether [`Progress::tick`] shows anything, so its numbers are worth computing.
    pub fn wants_ticks(&self) -> bool {
        !self.quiet && self.live
    }

    /// Rewrites the current step's line in a terminal; elsewhere (logs, CI) prints nothing per interval.
    pub fn tick(&self, t: &Tick) {
        if !self.wants_ticks() {
            return;
        }
        let demanded = t.demanded.map_or(format!("{} conns", t.value), |d| {
            format!("{} req/s", rate(d))
        });
        eprint!(
            "\r\x1b[2Kstep {}/{} {:>5.1}s  demanded {demanded}  sent {} req/s  replies {}/s  p99 {:.1} ms  errors {}",
            t.step + 1,
            t.steps,
            t.elapsed_s,
            rate(t.achieved),
            rate(t.replies),
            t.p99_ms,
            t.errors
        );
        let _ = std::io::stderr().flush();
    }

    pub fn step_done(&self, r: &StepResult, steps: usize) {
        if self.quiet {
            return;
        }
        if self.live {
            eprint!("\r\x1b[2K");
        }
        let demanded = r
            .demanded_rate
            .map_or(format!("{} conns", r.step_value), |d| {
                format!("{} req/s", rate(d))
            });
        let errors: u64 = r.errors.0.iter().map(|(_, v)| v).sum();
        eprintln!(
            "step {}/{}  demanded {demanded}  sent {} req/s  replies {}/s  p99 {:.1} ms  errors {}  {}{}",
            r.step + 1,
            steps,
            rate(r.achieved_request_rate),
            rate(r.reply_rate.avg),
            r.latency_ms.p99,
            errors,
            r.verdict.name(),
            if r.reasons.is_empty() {
                String::new()
            } else {
                format!(": {}", r.reasons.join("; "))
            }
        );
    }
}

/// The end-of-run table for stdout.
pub fn table(results: &[StepResult]) -> String {
    let head = [
        "step",
        "demanded",
        "sent/s",
        "replies/s",
        "p50 ms",
        "p90 ms",
        "p99 ms",
        "max ms",
        "errors",
        "gen cpu",
        "lag p99",
        "verdict",
    ];
    let mut rows: Vec<Vec<String>> = vec![head.iter().map(|s| s.to_string()).collect()];
    for r in results {
        rows.push(vec![
            (r.step + 1).to_string(),
            r.demanded_rate.map_or(format!("{}c", r.step_value), rate),
            rate(r.achieved_request_rate),
            rate(r.reply_rate.avg),
            format!("{:.2}", r.latency_ms.p50),
            format!("{:.2}", r.latency_ms.p90),
            format!("{:.2}", r.latency_ms.p99),
            format!("{:.2}", r.latency_ms.max),
            format!("{:.2}%", r.errors_pct),
            format!("{:.0}%", r.generator.cpu_pct),
            format!("{:.2}", r.generator.lag_p99_ms),
            r.verdict.name().to_string(),
        ]);
    }
    let widths: Vec<usize> = (0..head.len())
        .map(|c| rows.iter().map(|r| r[c].len()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for row in &rows {
        let line: Vec<String> = row
            .iter()
            .enumerate()
            .map(|(c, v)| {
                if c == head.len() - 1 {
                    v.clone()
                } else {
                    format!("{v:>w$}", w = widths[c])
                }
            })
            .collect();
        out.push_str(line.join("  ").trim_end());
        out.push('\n');
    }
    for r in results {
        for reason in &r.reasons {
            out.push_str(&format!(
                "step {}: {}: {reason}\n",
                r.step + 1,
                r.verdict.name()
            ));
        }
        for note in &r.notes {
            out.push_str(&format!("step {}: note: {note}\n", r.step + 1));
        }
    }
    out
}
