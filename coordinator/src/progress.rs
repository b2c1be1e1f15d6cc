//! What people see: the plan in one line at the start, a live line per step on stderr while it runs,
//! and the table of steps at the end. What is said while a run goes on is written to stderr by a
//! thread of its own ([`say`]): a terminal paused with Ctrl-S blocks that thread, never the task
//! that keeps the agents alive; lines that do not fit its queue are dropped and counted.
use std::io::{IsTerminal, Write};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{SyncSender, TrySendError};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use results::quantity::{self, Quantity};
use results::step::{LatencyStats, StepResult, human_ms};
use shared::plan::{HttpVersion, LoadModel, Plan, Scheme, StepLimit, TlsSessions};

/// How many pieces of text wait for a blocked stderr before more are dropped.
const QUEUED: usize = 256;

/// Text for a writer that may block, written by a thread of its own; sending never waits.
pub struct Writer {
    tx: SyncSender<String>,
    /// Queued and not yet written; dropped for want of room and not yet said.
    pending: Arc<AtomicU64>,
    dropped: Arc<AtomicU64>,
}

impl Writer {
    pub fn new(mut out: impl Write + Send + 'static, capacity: usize) -> Writer {
        let (tx, rx) = std::sync::mpsc::sync_channel::<String>(capacity);
        let pending = Arc::new(AtomicU64::new(0));
        let dropped = Arc::new(AtomicU64::new(0));
        let (left, lost) = (pending.clone(), dropped.clone());
        std::thread::spawn(move || {
            for text in rx {
                let n = lost.swap(0, Ordering::Relaxed);
                if n > 0 {
                    let _ = writeln!(
                        out,
                        "\nstampede: {n} lines for stderr were dropped while it was blocked"
                    );
                }
                let _ = out.write_all(text.as_bytes()).and_then(|()| out.flush());
                left.fetch_sub(1, Ordering::Relaxed);
            }
        });
        Writer {
            tx,
            pending,
            dropped,
        }
    }

    /// Queues `text`; when the queue is full (its writer blocked), drops it and counts it. Whether
    /// it was queued.
    pub fn send(&self, text: String) -> bool {
        self.pending.fetch_add(1, Ordering::Relaxed);
        match self.tx.try_send(text) {
            Ok(()) => true,
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
                self.pending.fetch_sub(1, Ordering::Relaxed);
                self.dropped.fetch_add(1, Ordering::Relaxed);
                false
            }
        }
    }

    /// Waits until what was queued is written, for at most `limit` (a blocked writer is not waited
    /// for past it).
    pub fn flush(&self, limit: Duration) {
        let end = Instant::now() + limit;
        while self.pending.load(Ordering::Relaxed) > 0 && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

fn stderr() -> &'static Writer {
    static STDERR: OnceLock<Writer> = OnceLock::new();
    STDERR.get_or_init(|| Writer::new(std::io::stderr(), QUEUED))
}

/// Says a line on stderr without waiting for it to be written.
pub fn say(line: String) {
    stderr().send(line + "\n");
}

/// Writes what [`say`] queued before the process says more on stderr itself (at most a second's
/// wait: a blocked stderr is not waited for).
pub fn flush() {
    stderr().flush(Duration::from_secs(1));
}

/// A `tracing` writer over [`say`]'s thread: one event, one piece of text, sent when it is dropped.
#[derive(Default)]
pub struct LogLine(Vec<u8>);

impl Write for LogLine {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for LogLine {
    fn drop(&mut self) {
        if !self.0.is_empty() {
            stderr().send(String::from_utf8_lossy(&self.0).into_owned());
        }
    }
}

pub struct Progress {
    /// Side by side: the target whose steps this shows, named before each of its lines.
    label: Option<String>,
    quiet: bool,
    live: bool,
    started: Instant,
    /// The plan's scheduled time, for the run's elapsed/total.
    total: Duration,
}

/// The numbers of one interval as the progress line shows them.
pub struct Tick {
    /// Counted from 1.
    pub number: u32,
    /// The run's steps, when known beforehand (a search's are not).
    pub steps: Option<usize>,
    /// A search's probe: what it is for.
    pub role: Option<&'static str>,
    /// Into the step, and its scheduled length.
    pub elapsed: Duration,
    pub length: Duration,
    pub demanded: Option<f64>,
    pub value: f64,
    /// Requests sent per second over the step so far (counted as they leave, as the table's).
    pub sent: f64,
    /// Replies with an expected status per second, over the last interval.
    pub served: f64,
    pub p99_ms: f64,
    /// Of the requests due in the step so far.
    pub failed_pct: f64,
}

/// A duration as people say it: `200 ms`, `10 s`, `1.5 s`, `2 min 30 s`, `1 h 5 min`.
pub fn span(d: Duration) -> String {
    let secs = d.as_secs_f64();
    if secs < 1.0 {
        format!("{} ms", d.as_millis())
    } else if secs < 120.0 {
        let s = format!("{secs:.1}");
        format!("{} s", s.strip_suffix(".0").unwrap_or(&s))
    } else if secs < 3600.0 {
        let s = secs.round() as u64;
        match s % 60 {
            0 => format!("{} min", s / 60),
            r => format!("{} min {r} s", s / 60),
        }
    } else {
        let m = (secs / 60.0).round() as u64;
        format!("{} h {} min", m / 60, m % 60)
    }
}

/// The resolved plan in one line, printed before any load: what will run, for how long, and where
/// the results go, e.g. `plan: requests model, 4 steps 1000..10000 req/s, 10 s each, ~40 s in all;
/// results in stampede-results/20261130T201500Z`.
/// A warmup before the first step is said after the steps: `, 5 s warmup first (not counted)`.
/// `over`: who runs it ([`over`]).
pub fn plan_line(
    plan: &Plan,
    warmup: Option<Duration>,
    over: &str,
    total: Duration,
    dir: &Path,
) -> String {
    let n = plan.steps().len();
    // As they were given: 10, 2.5 (not the rates' 10.0).
    let values: Vec<String> = plan.steps().iter().map(|v| format!("{v}")).collect();
    let values = match values.as_slice() {
        [a, .., b] if n > 3 => format!("{a}..{b}"),
        _ => values.join(","),
    };
    let unit = match (plan.model(), multiplexed(plan)) {
        (LoadModel::Connections, m) => {
            let calls = match plan.num_call().get() {
                1 => String::new(),
                n => format!(" x {n} requests"),
            };
            let streams = m.map_or(String::new(), |(streams, http)| {
                format!(", {streams} per connection ({http})")
            });
            format!("conn/s{calls}{streams}")
        }
        (LoadModel::Requests, None) => "req/s".to_string(),
        (LoadModel::Requests, Some((streams, http))) => format!(
            "req/s over at most {} connections × {streams} ({http})",
            plan.max_connections()
        ),
        (LoadModel::Concurrency, None) => "connections".to_string(),
        (LoadModel::Concurrency, Some((streams, http))) => {
            format!("connections × {streams} ({http})")
        }
    };
    let each = match (plan.limit(), plan.max_requests()) {
        (StepLimit::Duration(d), Some(n)) => {
            // -n is the step's count, shared by its connections (and agents), not each one's.
            format!(
                "{n} requests per step, shared by its connections (or {}, if that comes first)",
                span(d)
            )
        }
        (StepLimit::Duration(d), None) => format!("{} each", span(d)),
        (StepLimit::Connections(c), _) => format!("{c} connections each"),
    };
    let warmup = warmup.filter(|w| !w.is_zero()).map_or(String::new(), |w| {
        format!(", {} warmup first (not counted)", span(w))
    });
    let tls = tls_sessions(plan).map_or(String::new(), |t| format!(", {t}"));
    format!(
        "plan: {} model, {n} step{} {values} {unit}, {each}{warmup}{tls}, {over}, ~{} in all; results in {}",
        plan.model().name(),
        if n == 1 { "" } else { "s" },
        span(total),
        dir.display()
    )
}

/// What a search's line adds over TLS: `; every TLS connection a full handshake (--tls-sessions
/// fresh)`; empty over plain TCP.
pub fn over_tls(plan: &Plan) -> String {
    tls_sessions(plan).map_or(String::new(), |t| format!("; {t}"))
}

/// How a TLS target's handshakes go, said because a resumed handshake costs the server a fraction
/// of a full one: a connection rate means something else with each. None over plain TCP.
fn tls_sessions(plan: &Plan) -> Option<&'static str> {
    let w = plan.workload();
    (w.origin().scheme() == Scheme::Https).then_some(match w.tls_sessions() {
        TlsSessions::Fresh => "every TLS connection a full handshake (--tls-sessions fresh)",
        TlsSessions::Resume => {
            "TLS sessions resumed within each agent thread (--tls-sessions resume)"
        }
    })
}

/// Who a run is over, for its plan line: `the embedded agent`, `3 agents`, `3 agents and 1 monitor`:
/// a cluster that came up with fewer agents than meant is seen before any load.
/// `embedded`: the one agent is the coordinator's own.
pub fn over(agents: usize, embedded: bool, monitors: usize) -> String {
    let load = match agents {
        1 if embedded => "the embedded agent".to_string(),
        1 => "1 agent".to_string(),
        n => format!("{n} agents"),
    };
    match monitors {
        0 => format!("over {load}"),
        1 => format!("over {load} and 1 monitor"),
        n => format!("over {load} and {n} monitors"),
    }
}

/// What a search's line adds when its probes go over HTTP/2 (`; over HTTP/2, 10 streams per
/// connection`); empty over HTTP/1.1, the line as it always was.
pub fn over_http2(plan: &Plan) -> String {
    multiplexed(plan).map_or(String::new(), |(streams, http)| {
        format!("; over {http}, {streams} per connection")
    })
}

/// A connection's streams and its protocol, `("10 streams", "HTTP/2")`, when it may carry more than
/// one request at once or is HTTP/2: the plan line then counts connections × streams. None for
/// HTTP/1.1's one request at a time, the line as it always was.
fn multiplexed(plan: &Plan) -> Option<(String, &'static str)> {
    let w = plan.workload();
    let http = match w.http() {
        HttpVersion::Http2 => "HTTP/2",
        // Over TCP auto is HTTP/1.1 (config refuses it more than one stream there).
        HttpVersion::Auto if w.streams().get() > 1 => "HTTP/2 if ALPN agrees it",
        HttpVersion::Auto | HttpVersion::Http1 => return None,
    };
    let streams = match w.streams().get() {
        1 => "1 stream".to_string(),
        n => format!("{n} streams"),
    };
    Some((streams, http))
}

/// What a side-by-side run does, in one line after each target's plan line: `side by side: nginx,
/// app, each step on every target in turn, ~1 min 20 s in all; comparison in results/x`.
pub fn side_line(labels: &[&str], total: Duration, dir: &Path, search: bool) -> String {
    let (each, total) = if search {
        // A search's length is not known beforehand: its deadline bounds them all.
        (
            "searched, one probe on every target in turn",
            format!("deadline {}", span(total)),
        )
    } else {
        (
            "each step on every target in turn",
            format!("~{} in all", span(total)),
        )
    };
    format!(
        "side by side: {}, {each}, {total}; comparison in {}",
        labels.join(", "),
        dir.display()
    )
}

/// The terminal's width in columns: the window size of stderr, else `COLUMNS`, else 80.
fn terminal_width() -> usize {
    // SAFETY: TIOCGWINSZ writes a `winsize` into the struct we own; fd 2 is stderr.
    let mut ws: libc::winsize = unsafe { std::mem::zeroed() };
    if unsafe { libc::ioctl(2, libc::TIOCGWINSZ, &mut ws) } == 0 && ws.ws_col > 0 {
        return usize::from(ws.ws_col);
    }
    std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.trim().parse().ok())
        .filter(|&c| c > 0)
        .unwrap_or(80)
}

/// Cut to `width - 1` characters: a line as wide as the terminal wraps in some of them, and a
/// wrapped line is not rewritten by `\r` but repeated on a new one each second.
fn fit(line: &str, width: usize) -> &str {
    let room = width.saturating_sub(1).max(1);
    match line.char_indices().nth(room) {
        Some((at, _)) => &line[..at],
        None => line,
    }
}

/// The live line's text, before it is fitted to the terminal.
fn live_line(t: &Tick, run_elapsed: Duration, run_total: Duration) -> String {
    let demanded = t.demanded.map_or(format!("{} conns", t.value), |d| {
        format!("{} req/s", rate(d))
    });
    format!(
        "{} {}/{}  run {}/{}  demanded {demanded}  sent {}/s  served {}/s  p99 {:.1} ms  failed {}%",
        numbered(t.number, t.steps, t.role),
        clock(t.elapsed),
        clock(t.length),
        clock(run_elapsed),
        clock(run_total),
        rate(t.sent),
        rate(t.served),
        t.p99_ms,
        pct(t.failed_pct)
    )
}

/// `step 3/8`, a search's `probe 3 (bisect)`, or a planned run's warmup (number 0).
fn numbered(number: u32, steps: Option<usize>, role: Option<&str>) -> String {
    match (steps, role) {
        _ if number == 0 => "warmup (not counted)".to_string(),
        (_, Some(role)) => format!("probe {number} ({role})"),
        (Some(steps), None) => format!("step {number}/{steps}"),
        (None, None) => format!("step {number}"),
    }
}

/// Elapsed and total times on the live line: `12s`, `3m05s`, `1h02m`.
fn clock(d: Duration) -> String {
    let s = d.as_secs();
    if s < 60 {
        format!("{s}s")
    } else if s < 3600 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else {
        format!("{}h{:02}m", s / 3600, s / 60 % 60)
    }
}

fn rate(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

impl Progress {
    pub fn new(quiet: bool, total: Duration) -> Progress {
        Progress {
            label: None,
            quiet,
            live: std::io::stderr().is_terminal(),
            started: Instant::now(),
            total,
        }
    }

    /// Names the target before each line (side by side, where the lines of several alternate).
    pub fn labelled(mut self, label: Option<&str>) -> Progress {
        self.label = label.map(String::from);
        self
    }

    pub fn label(&self) -> Option<&str> {
        self.label.as_deref()
    }

    /// `LABEL: ` before a line, or nothing.
    fn who(&self) -> String {
        self.label
            .as_ref()
            .map_or(String::new(), |l| format!("{l}: "))
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
        let line = self.who() + &live_line(t, self.started.elapsed(), self.total);
        stderr().send(format!("\r\x1b[2K{}", fit(&line, terminal_width())));
    }

    pub fn step_done(&self, r: &StepResult, steps: Option<usize>) {
        if self.quiet {
            return;
        }
        let clear = if self.live { "\r\x1b[2K" } else { "" };
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
        say(format!(
            "{clear}{}{}  demanded {demanded}  sent {} req/s  served {}/s  p99 {}  failed {}%  {judged}{}",
            self.who(),
            numbered(r.number, steps, r.probe.as_ref().map(|p| p.role.name())),
            rate(r.achieved_request_rate),
            rate(r.ok_rate),
            human_ms(r.latency_ms.p99, is_bound(&r.latency_ms, &quantity::P99_MS)),
            pct(r.failed_pct),
            r.probe.as_ref().map_or(String::new(), |p| format!(
                "  -> {}{}",
                p.class.name(),
                p.reason
                    .as_ref()
                    .map_or(String::new(), |why| format!(": {why}"))
            )),
        ));
    }
}

fn pct(v: f64) -> String {
    if v == 0.0 || v >= 10.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
}

/// Whether the step's value of a latency quantity is only a lower bound (a percentile among
/// requests given up).
fn is_bound(l: &LatencyStats, q: &Quantity) -> bool {
    q.bound.is_some_and(|b| l.lower_bounds.contains(b))
}

/// A latency cell: `≥` before a lower bound.
fn ms_cell(r: &StepResult, q: &Quantity) -> String {
    let at_least = if is_bound(&r.latency_ms, q) {
        "≥"
    } else {
        ""
    };
    format!("{at_least}{:.2}", q.of_step(r).unwrap_or(0.0))
}

/// A column's head: the quantity's label, and its unit when that is per second or ms.
fn column_head(q: &Quantity) -> String {
    match q.unit {
        "/s" => format!("{}/s", q.label),
        "ms" if q.bound.is_some() => format!("{} ms", q.label),
        _ => q.label.to_string(),
    }
}

/// The latencies the end-of-run table shows.
const TABLE_LATENCIES: [&Quantity; 4] = [
    &quantity::P50_MS,
    &quantity::P90_MS,
    &quantity::P99_MS,
    &quantity::MAX_MS,
];

/// The end-of-run table for stdout.
pub fn table(results: &[StepResult]) -> String {
    table_after(None, results, &[])
}

/// A row's name in the table and the lines under it: its number, or `warmup` (number 0).
fn row_name(r: &StepResult) -> String {
    if r.number == 0 {
        "warmup".to_string()
    } else {
        r.number.to_string()
    }
}

/// The end-of-run table for stdout, a planned run's warmup first when it had one: its row named
/// `warmup`, and a line under the table saying it is not counted.
/// `repeats`: the notes (by step number) not to say again.
pub fn table_after(
    warmup: Option<&StepResult>,
    results: &[StepResult],
    repeats: &[(u32, String)],
) -> String {
    let shown: Vec<&StepResult> = warmup.into_iter().chain(results).collect();
    let results = shown.as_slice();
    let mut head: Vec<String> = ["step".to_string(), "demanded".to_string()]
        .into_iter()
        .chain([&quantity::REQ_RATE, &quantity::OK_RATE].map(column_head))
        .chain(TABLE_LATENCIES.map(column_head))
        .chain(
            [
                &quantity::FAILED_PCT,
                &quantity::GEN_CPU_PCT,
                &quantity::LAG_P99_MS,
            ]
            .map(column_head),
        )
        .chain(["trust".to_string(), "server".to_string()])
        .collect();
    // A search's probes: what each was for and how it was classed, last (the widest cells).
    let search = results.iter().any(|r| r.probe.is_some());
    if search {
        head.extend(["role".to_string(), "class".to_string()]);
    }
    let mut rows: Vec<Vec<String>> = vec![head.clone()];
    for r in results {
        // No latency measured (nothing served, nothing given up): say so rather than print zeros.
        let none = r.ok == 0 && r.given_up == 0;
        let ms = |q: &Quantity| {
            if none { "-".to_string() } else { ms_cell(r, q) }
        };
        let value = |q: &Quantity| q.of_step(r).unwrap_or(0.0);
        let mut row = vec![
            row_name(r),
            r.demanded_rate.map_or(format!("{}c", r.step_value), rate),
            rate(value(&quantity::REQ_RATE)),
            rate(value(&quantity::OK_RATE)),
        ];
        row.extend(TABLE_LATENCIES.map(ms));
        row.extend([
            format!("{}%", pct(value(&quantity::FAILED_PCT))),
            format!("{:.0}%", value(&quantity::GEN_CPU_PCT)),
            format!("{:.2}", value(&quantity::LAG_P99_MS)),
            r.trust.name().to_string(),
            r.server.name().to_string(),
        ]);
        rows.push(row);
        if search {
            let row = rows.last_mut().expect("just pushed");
            let (role, class) = r
                .probe
                .as_ref()
                .map_or(("", ""), |p| (p.role.name(), p.class.name()));
            row.extend([role.to_string(), class.to_string()]);
        }
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
    if let Some(w) = warmup {
        out.push_str(&format!(
            "warmup: {} at the first step's value, not counted (not in steps.tsv, the answer or --fail-on)\n",
            span(Duration::from_secs_f64(w.duration_s))
        ));
    }
    for &r in results {
        let name = if r.number == 0 {
            "warmup".to_string()
        } else {
            format!("step {}", r.number)
        };
        for reason in &r.reasons {
            out.push_str(&format!("{name}: trust {}: {reason}\n", r.trust.name()));
        }
        for reason in &r.server_reasons {
            out.push_str(&format!("{name}: server {}: {reason}\n", r.server.name()));
        }
        if let Some(why) = r.probe.as_ref().and_then(|p| p.reason.as_ref()) {
            let p = r.probe.as_ref().expect("a reason is a probe's");
            out.push_str(&format!(
                "{name}: {} {}: {why}\n",
                p.role.name(),
                p.class.name()
            ));
        }
        // A warning about the generator is said once per run: its repeats stay in run.json.
        let repeat = |note: &String| {
            repeats
                .iter()
                .any(|(n, text)| *n == r.number && text == note)
        };
        for note in r.notes.iter().filter(|n| !repeat(n)) {
            out.push_str(&format!("{name}: note: {note}\n"));
        }
    }
    if let Some(last) = results.iter().rev().find(|r| !r.per_request.is_empty()) {
        out.push_str(&names_table(last));
    }
    out
}

/// At most this many names in the end-of-run table of names; the others are counted (all are in
/// requests.tsv).
const TABLE_NAMES: usize = 20;

/// A named mix's last step by name, for stdout under the step table: its served rate, failures and
/// latency (`≥` where the name had requests given up, whose ages are among its values).
fn names_table(r: &StepResult) -> String {
    let bound = |row: &results::step::per_request::RequestRow| {
        if row.given_up > 0 { "≥" } else { "" }
    };
    let mut rows: Vec<[String; 5]> = vec![[
        "request".into(),
        "served/s".into(),
        "failed".into(),
        "p50 ms".into(),
        "p99 ms".into(),
    ]];
    for row in r.per_request.iter().take(TABLE_NAMES) {
        // A name nothing was sent for (or nothing measured): no latency rather than zeros.
        let none = row.ok == 0 && row.given_up == 0;
        let ms = |v: f64| {
            if none {
                "-".to_string()
            } else {
                format!("{}{v:.2}", bound(row))
            }
        };
        rows.push([
            row.name.clone(),
            rate(row.ok_rate),
            format!("{}%", pct(row.failed_pct)),
            ms(row.latency_ms.p50),
            ms(row.latency_ms.p99),
        ]);
    }
    let widths: Vec<usize> = (0..5)
        .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = format!(
        "requests at step {} ({}):\n",
        row_name(r),
        r.demanded_rate.map_or(format!("{}c", r.step_value), rate)
    );
    for row in &rows {
        // The name left-aligned, the numbers right.
        let mut line = format!("  {:<w$}", row[0], w = widths[0]);
        for (c, v) in row.iter().enumerate().skip(1) {
            line.push_str(&format!("  {v:>w$}", w = widths[c]));
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    let more = r.per_request.len().saturating_sub(TABLE_NAMES);
    if more > 0 {
        out.push_str(&format!(
            "  and {more} more (requests.tsv has every name)\n"
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The plan line of `stampede run ARGS` (a 10 s run into `out`), from the flags as the binary
    /// resolves them.
    fn plan_line_of(args: &str) -> String {
        let argv = ["stampede", "run"]
            .into_iter()
            .chain(args.split_whitespace());
        let cli = crate::cli::parse_from(argv).unwrap();
        let crate::cli::Command::Run(a) = cli.command else {
            unreachable!("a run command line")
        };
        let cfg = crate::config::resolve(*a).unwrap();
        plan_line(
            &cfg.plan,
            None,
            "over 1 agent",
            Duration::from_secs(10),
            Path::new("out"),
        )
    }

    #[test]
    fn the_plan_line_said_nothing_of_how_many_agents_the_run_is_over() {
        assert_eq!(over(1, true, 0), "over the embedded agent");
        assert_eq!(over(1, false, 1), "over 1 agent and 1 monitor");
        assert_eq!(over(3, false, 2), "over 3 agents and 2 monitors");
        assert!(
            plan_line_of("http://h:1/ -c 5").contains(", 10 s each, over 1 agent, ~10 s in all")
        );
    }

    #[test]
    fn minus_n_read_as_requests_for_each_connection() {
        // Regression: `-n 1000 -c 10` said "1000 requests each" beside "10 connections", where the
        // step ends after 1000 requests in all.
        let line = plan_line_of("http://h:1/ -n 1000 -c 10");
        assert!(
            line.contains(
                "1 step 10 connections, 1000 requests per step, shared by its connections \
                 (or 10 s, if that comes first)"
            ),
            "{line}"
        );
        assert!(!line.contains("requests each"), "{line}");
    }

    #[test]
    fn a_search_over_http2_says_its_streams() {
        let plan = |args: &str| {
            let argv = ["stampede", "run"]
                .into_iter()
                .chain(args.split_whitespace());
            let crate::cli::Command::Run(a) = crate::cli::parse_from(argv).unwrap().command else {
                unreachable!("a run command line")
            };
            crate::config::resolve(*a).unwrap().plan
        };
        assert_eq!(
            over_http2(&plan("h2c://h:1/ -c 50 --streams 10")),
            "; over HTTP/2, 10 streams per connection"
        );
        assert_eq!(over_http2(&plan("http://h:1/ -c 50")), "");
    }

    #[test]
    fn the_plan_line_counts_connections_times_streams_over_http2() {
        for (args, says) in [
            (
                "h2c://h:1/ -c 50 --streams 10",
                "1 step 50 connections × 10 streams (HTTP/2), 10 s each",
            ),
            (
                "http://h:1/ --http2 --model concurrency --steps 5,10",
                "2 steps 5,10 connections × 1 stream (HTTP/2), 10 s each",
            ),
            (
                "http://h:1/ --http 2 --streams 8 --model requests --steps 100 --max-connections 20",
                "1 step 100 req/s over at most 20 connections × 8 streams (HTTP/2), 10 s each",
            ),
            (
                "https://h/ --http auto --streams 4 --model requests --steps 100",
                "100 req/s over at most 1000 connections × 4 streams (HTTP/2 if ALPN agrees it)",
            ),
            (
                "h2://h/ --streams 4 --steps 20 --num-call 10",
                "1 step 20 conn/s x 10 requests, 4 streams per connection (HTTP/2), 10 s each",
            ),
            // Over TLS, how its handshakes go.
            (
                "https://h/ --steps 20",
                "1 step 20 conn/s, 10 s each, every TLS connection a full handshake (--tls-sessions fresh), over 1 agent, ~",
            ),
            (
                "h2://h/ -c 5 --tls-sessions resume",
                "5 connections × 1 stream (HTTP/2), 10 s each, TLS sessions resumed within each agent thread (--tls-sessions resume), over 1 agent, ~",
            ),
            // HTTP/1.1's one request at a time reads as it always did.
            (
                "http://h:1/ -c 50",
                "1 step 50 connections, 10 s each, over 1 agent, ~",
            ),
            (
                "https://h/ --http auto --model requests --steps 100",
                "1 step 100 req/s, 10 s each",
            ),
            (
                "http://h:1/ --steps 20 --num-call 10",
                "1 step 20 conn/s x 10 requests, 10 s each",
            ),
        ] {
            let line = plan_line_of(args);
            assert!(line.contains(says), "{args}: {line}");
        }
    }

    /// A writer that blocks until told to go on (a terminal paused with Ctrl-S), then keeps all.
    struct Paused {
        go: std::sync::mpsc::Receiver<()>,
        /// Told each time a write begins, so a test knows the writer thread holds a line.
        entered: std::sync::mpsc::Sender<()>,
        kept: Arc<std::sync::Mutex<String>>,
    }

    impl Write for Paused {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            let _ = self.entered.send(());
            let _ = self.go.recv();
            self.kept
                .lock()
                .unwrap()
                .push_str(&String::from_utf8_lossy(buf));
            Ok(buf.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_blocked_stderr_stalled_the_task_that_wrote_progress() {
        let (go, gate) = std::sync::mpsc::channel();
        let (entered, writing) = std::sync::mpsc::channel();
        let kept = Arc::new(std::sync::Mutex::new(String::new()));
        let writer = Writer::new(
            Paused {
                go: gate,
                entered,
                kept: kept.clone(),
            },
            4,
        );
        // The writer thread takes the first line and blocks writing it, as on a paused terminal;
        // only then is the queue filled, so no drop is counted before the thread is blocked.
        assert!(writer.send("line 0\n".into()));
        writing.recv_timeout(Duration::from_secs(10)).unwrap();
        // Far more than the queue holds, while nothing is written: none of these waits.
        let sent = Instant::now();
        let queued = 1
            + (1..1000)
                .filter(|n| writer.send(format!("line {n}\n")))
                .count();
        assert!(sent.elapsed() < Duration::from_secs(5), "sending waited");
        assert!(queued <= 5, "{queued} queued");
        assert_eq!(writer.dropped(), 1000 - queued as u64);
        // The terminal goes on: what was queued is written, then the count of what was not.
        for _ in 0..100 {
            let _ = go.send(());
        }
        writer.flush(Duration::from_secs(5));
        writer.send("after\n".into());
        writer.flush(Duration::from_secs(5));
        let text = kept.lock().unwrap().clone();
        assert!(text.contains("line 0\n"), "{text}");
        let dropped = format!(
            "{} lines for stderr were dropped while it was blocked",
            1000 - queued
        );
        assert!(text.contains(&dropped), "{text}");
        assert!(text.ends_with("after\n"), "{text}");
    }

    fn tick() -> Tick {
        Tick {
            number: 2,
            steps: Some(4),
            role: None,
            elapsed: Duration::from_secs(3),
            length: Duration::from_secs(10),
            demanded: Some(1000.0),
            value: 1000.0,
            sent: 998.4,
            served: 997.0,
            p99_ms: 1.25,
            failed_pct: 0.0,
        }
    }

    #[test]
    fn live_line_wrapped_in_a_narrow_terminal() {
        let line = live_line(&tick(), Duration::from_secs(13), Duration::from_secs(40));
        assert!(line.len() > 60, "{line}");
        for width in [1, 20, 40, 60, 80] {
            let shown = fit(&line, width);
            assert!(shown.chars().count() < width.max(2), "{width}: {shown}");
            assert!(line.starts_with(shown));
        }
        assert_eq!(fit(&line, 500), line);
    }

    #[test]
    fn live_line_showed_no_elapsed_or_total() {
        let line = live_line(&tick(), Duration::from_secs(13), Duration::from_secs(40));
        assert!(line.starts_with("step 2/4 3s/10s  run 13s/40s  "), "{line}");
        assert!(line.contains("sent 998/s"), "{line}");
    }

    #[test]
    fn durations_read_as_people_say_them() {
        let ms = Duration::from_millis;
        assert_eq!(span(ms(200)), "200 ms");
        assert_eq!(span(ms(10_000)), "10 s");
        assert_eq!(span(ms(1_500)), "1.5 s");
        assert_eq!(span(ms(150_000)), "2 min 30 s");
        assert_eq!(span(ms(3_900_000)), "1 h 5 min");
        assert_eq!(clock(ms(185_000)), "3m05s");
    }

    #[test]
    fn the_end_of_run_table_keeps_its_columns_and_cells() {
        let golden = include_str!("../../results/tests/golden/run.json");
        let run = results::run_file::RunFile::parse(golden, std::path::Path::new("run.json"))
            .expect("the golden run parses");
        assert_eq!(table(&run.steps), include_str!("../tests/golden/table.txt"));
    }

    /// The golden run with a mix of `n` names at every step (name `i` served `i + 1` requests of
    /// 2 ms, the last given up at step 3 by name `n0`).
    fn named(n: usize) -> Vec<StepResult> {
        let golden = include_str!("../../results/tests/golden/run.json");
        let mut run = results::run_file::RunFile::parse(golden, std::path::Path::new("run.json"))
            .expect("the golden run parses");
        let names: Vec<String> = (0..n).map(|i| format!("n{i}")).collect();
        let weights = vec![1; n];
        for (k, step) in run.steps.iter_mut().enumerate() {
            let stats: Vec<shared::metrics::NameStats> = (0..n)
                .map(|i| {
                    let mut s = shared::metrics::NameStats::default();
                    let c = &mut s.counters;
                    c.requests = i as u64 + 1;
                    c.replies = c.requests;
                    c.ok = c.requests;
                    if i == 0 && k == 2 {
                        c.given_up = 1;
                        c.replies = 0;
                        c.ok = 0;
                    }
                    for _ in 0..=i {
                        s.latency.record(2000).unwrap();
                    }
                    s
                })
                .collect();
            step.per_request = results::step::per_request::rows(&names, &weights, &stats, 1.0);
        }
        run.steps
    }

    #[test]
    fn a_named_mix_ends_with_its_last_step_by_name() {
        let steps = named(3);
        let text = table(&steps);
        let plain = table(&named(0));
        assert!(
            text.starts_with(&plain),
            "the step table unchanged above it"
        );
        let names = &text[plain.len()..];
        let last = steps.last().unwrap();
        let lines: Vec<&str> = names.lines().collect();
        assert_eq!(
            lines[0],
            format!(
                "requests at step {} ({}):",
                last.number,
                last.demanded_rate.map_or(String::new(), rate)
            )
        );
        assert_eq!(
            lines[1].split_whitespace().collect::<Vec<_>>(),
            ["request", "served/s", "failed", "p50", "ms", "p99", "ms"]
        );
        assert_eq!(lines.len(), 5, "{names}");
        let cells: Vec<&str> = lines[4].split_whitespace().collect();
        assert_eq!(cells[..3], ["n2", "3.0", "0%"], "{names}");
        assert!(cells[3].starts_with("2.0"), "{names}");
    }

    #[test]
    fn a_given_up_request_makes_a_names_latency_a_lower_bound() {
        let steps = named(2);
        let text = table_after(None, &steps[..3], &[]);
        let row = text
            .lines()
            .find(|l| l.trim_start().starts_with("n0 "))
            .unwrap();
        assert!(row.contains("≥2.0"), "{text}");
        assert!(row.contains("100%"), "{text}");
    }

    #[test]
    fn past_twenty_names_the_others_are_counted() {
        let text = table(&named(23));
        let rows = text
            .lines()
            .filter(|l| l.trim_start().starts_with('n'))
            .count();
        assert_eq!(rows, 20, "{text}");
        assert!(
            text.ends_with("  and 3 more (requests.tsv has every name)\n"),
            "{text}"
        );
    }
}
