//! What people see: a live line per step on stderr while it runs, and the table of steps at the end.
use std::io::{IsTerminal, Write};

use shared::report::{LatencyStats, StepResult, human_ms};

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
        let mut judged = format!("trust {}", r.trust.name());
        if !r.reasons.is_empty() {
            judged.push_str(&format!(" ({})", r.reasons.join("; ")));
        }
        judged.push_str(&format!(", server {}", r.server.name()));
        if !r.server_reasons.is_empty() {
            judged.push_str(&format!(" ({})", r.server_reasons.join("; ")));
        }
        eprintln!(
            "step {}/{}  demanded {demanded}  sent {} req/s  served {}/s  p99 {}  failed {}%  {judged}",
            r.step + 1,
            steps,
            rate(r.achieved_request_rate),
            rate(r.ok_rate),
            human_ms(r.latency_ms.p99, r.latency_ms.lower_bounds.contains("p99")),
            pct(r.failed_pct),
        );
    }
}

fn pct(v: f64) -> String {
    if v == 0.0 || v >= 10.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
}

/// A latency cell: `≥` before a lower bound (a percentile among requests given up).
fn ms_cell(l: &LatencyStats, name: &str, v: f64) -> String {
    let at_least = if l.lower_bounds.contains(name) {
        "≥"
    } else {
        ""
    };
    format!("{at_least}{v:.2}")
}

/// The end-of-run table for stdout.
pub fn table(results: &[StepResult]) -> String {
    let head = [
        "step", "demanded", "sent/s", "served/s", "p50 ms", "p90 ms", "p99 ms", "max ms", "failed",
        "gen cpu", "lag p99", "trust", "server",
    ];
    let mut rows: Vec<Vec<String>> = vec![head.iter().map(|s| s.to_string()).collect()];
    for r in results {
        let l = &r.latency_ms;
        rows.push(vec![
            (r.step + 1).to_string(),
            r.demanded_rate.map_or(format!("{}c", r.step_value), rate),
            rate(r.achieved_request_rate),
            rate(r.ok_rate),
            ms_cell(l, "p50", l.p50),
            ms_cell(l, "p90", l.p90),
            ms_cell(l, "p99", l.p99),
            ms_cell(l, "max", l.max),
            format!("{}%", pct(r.failed_pct)),
            format!("{:.0}%", r.generator.cpu_pct),
            format!("{:.2}", r.generator.lag_p99_ms),
            r.trust.name().to_string(),
            r.server.name().to_string(),
        ]);
    }
    let widths: Vec<usize> = (0..head.len())
        .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
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
                "step {}: trust {}: {reason}\n",
                r.step + 1,
                r.trust.name()
            ));
        }
        for reason in &r.server_reasons {
            out.push_str(&format!(
                "step {}: server {}: {reason}\n",
                r.step + 1,
                r.server.name()
            ));
        }
        for note in &r.notes {
            out.push_str(&format!("step {}: note: {note}\n", r.step + 1));
        }
    }
    out
}
