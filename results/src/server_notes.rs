//! Notes that explain a step by its server's resources: a CPU at its limit, a listen queue that
//! overflowed, one thread at 100 % of a core, a throttled container. They are notes only: a step's
//! trust is the generator judging itself, and what the server did never changes it.
use crate::step::{StepResult, human};
use monitor::step::StepServer;
use shared::metrics::ErrorClass;

// The limits are the verdict rules' (the knee reads them too).
pub use crate::verdict::{CPU_LIMIT_PCT, THREAD_LIMIT_PCT};
/// Throttling below this share of a step's enforcement periods is not worth a note.
pub const THROTTLED_NOTE_PCT: f64 = 1.0;

/// The notes of `step` from its monitors' views of it; `earlier` are the run's steps before it (to
/// say from which step a CPU has been at its limit).
pub fn notes(step: &StepResult, earlier: &[StepResult]) -> Vec<String> {
    let several = step.server_monitors.len() > 1;
    let mut notes = Vec::new();
    for m in &step.server_monitors {
        let who = if several {
            format!("{}: ", m.monitor)
        } else {
            String::new()
        };
        for note in server_notes(m, step, earlier) {
            notes.push(format!("{who}{note}"));
        }
    }
    notes
}

fn server_notes(m: &StepServer, step: &StepResult, earlier: &[StepResult]) -> Vec<String> {
    let mut notes = Vec::new();
    if m.partial {
        notes.push(format!(
            "the server monitor {} saw {} s of the step's {} s: its counts miss the rest",
            m.monitor,
            human(m.counted_s),
            human(step.duration_s)
        ));
    }
    if let Some(t) = &m.target {
        let at_limit = t.cpu_util_pct >= CPU_LIMIT_PCT;
        if at_limit {
            let cores = match t.usable_cores {
                1.0 => "its 1 core".to_string(),
                c => format!("its {} cores", human(c)),
            };
            let since = limit_since(&m.monitor, step.number, earlier);
            let from = if since < step.number {
                format!(" from step {since}")
            } else {
                String::new()
            };
            notes.push(format!(
                "server CPU {} % of {cores}{from}",
                human(t.cpu_util_pct)
            ));
        }
        if let Some(thread) = t
            .thread_max_pct
            .filter(|p| *p >= THREAD_LIMIT_PCT && !at_limit)
        {
            let name = t
                .busiest_thread
                .as_deref()
                .map_or(String::new(), |n| format!(" ({n})"));
            notes.push(format!(
                "busiest server thread{name} at {} % of a core: one thread is the limit, not the cores",
                human(thread.min(100.0))
            ));
        }
        if let Some(throttled) = t.throttled_pct.filter(|p| *p >= THROTTLED_NOTE_PCT) {
            notes.push(format!(
                "container throttled {} % of the step: its CPU quota was the limit",
                human(throttled)
            ));
        }
        if let Some(killed) = t.oom_kills.filter(|k| *k > 0) {
            notes.push(format!(
                "the kernel killed {killed} of the server's processes for want of memory (OOM)"
            ));
        }
    }
    let dropped = m.tcp.listen_overflows.max(m.tcp.listen_drops);
    if dropped > 0 {
        let what = if m.tcp.listen_overflows > 0 {
            format!("listen queue overflowed {} times", human(dropped as f64))
        } else {
            format!("listeners dropped {} SYNs", human(dropped as f64))
        };
        let why = if step.errors.get(ErrorClass::ConnectTimeout.name()) > 0 {
            ": the connect timeouts are SYNs the server dropped"
        } else {
            ""
        };
        notes.push(format!("{what}{why}"));
    }
    notes
}

/// The first step of the run of steps, ending with step `number`, in which the monitor's server was
/// at its CPU limit.
fn limit_since(monitor: &str, number: u32, earlier: &[StepResult]) -> u32 {
    let at_limit = |r: &StepResult| {
        r.server_monitors
            .iter()
            .find(|m| m.monitor == monitor)
            .and_then(|m| m.target.as_ref())
            .is_some_and(|t| t.cpu_util_pct >= CPU_LIMIT_PCT)
    };
    earlier
        .iter()
        .rev()
        .take_while(|r| at_limit(r))
        .last()
        .map_or(number, |r| r.number)
}

#[cfg(test)]
mod tests;
