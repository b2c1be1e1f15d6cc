//! How the coordinator's per-step merge scales with the number of agents.
//!
//! ```sh
//! cargo run --release -p coordinator --example merge_scale                # 10, 100, 1000 agents
//! cargo run --release -p coordinator --example merge_scale -- --compare   # and the old path, before it
//! cargo run --release -p coordinator --example merge_scale -- --agents 10,100 --intervals 5
//! cargo run --release -p coordinator --example merge_scale -- --agents 100,1000 --names 0,5,20,50
//! ```
//!
//! `--names` gives each report that many named requests (a mix's rows: counters, a served and a
//! failed latency each), the agent's samples dealt among them in turn, and the finish writes each
//! name's .hlog as well: the cost of per-name histograms to the fleet's merge. The old path
//! (`--baseline`) knows no names and runs at 0 names only.
//!
//! Each agent count runs in its own child process, so its peak RSS is its own. A child builds, per 1 s
//! interval, one real `IntervalReport` per agent (a few thousand log-normal latencies and matching
//! ttfb/connect/lag/wait samples recorded into the one histogram shape, serialized as the agent does),
//! prost-encodes it as an `AgentMessage`, then times decoding it (as the gRPC layer would) and merging
//! it, and at the end the step's finish: summary and .hlog. Only the coordinator's side is timed and
//! counted in CPU; building the reports is not (the child holds one interval's messages at a time,
//! as the network would deliver them; they count in its peak RSS).
//!
//! `--baseline` runs the merge as `run_step` did it before `StepMerge` (every report decoded into five
//! full histograms added into the total and a full `Snapshot` per agent, the .hlog decoding every
//! agent's histograms of an interval at once); `--compare` runs both. The `digest` column hashes the
//! step's run.json entry, the .hlog bytes and the progress p99s: both paths must print the same one.
use std::hash::{Hash, Hasher};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant, SystemTime};

use coordinator::merge::{StepMerge, StepTotals};
use coordinator::output;
use prost::Message;
use proto::pb;
use results::step::{self, StepResult};
use shared::metrics::{Interval, Snapshot};
use shared::plan::LoadModel;
use shared::rng::Rng;

struct Args {
    agents: Vec<usize>,
    names: Vec<usize>,
    intervals: u32,
    samples: u32,
    baseline: bool,
    compare: bool,
    child: bool,
}

fn parse_args() -> Args {
    let mut a = Args {
        agents: vec![10, 100, 1000],
        names: vec![0],
        intervals: 10,
        samples: 3000,
        baseline: false,
        compare: false,
        child: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || {
            it.next()
                .unwrap_or_else(|| usage(&format!("{flag} needs a value")))
        };
        match flag.as_str() {
            "--agents" => {
                a.agents = value()
                    .split(',')
                    .map(|n| {
                        n.parse()
                            .unwrap_or_else(|_| usage("--agents takes numbers"))
                    })
                    .collect()
            }
            "--names" => {
                a.names = value()
                    .split(',')
                    .map(|n| {
                        n.parse()
                            .ok()
                            .filter(|&n| n <= usize::from(u16::MAX))
                            .unwrap_or_else(|| usage("--names takes numbers up to 65535"))
                    })
                    .collect()
            }
            "--intervals" => a.intervals = value().parse().unwrap_or_else(|_| usage("--intervals")),
            "--samples" => a.samples = value().parse().unwrap_or_else(|_| usage("--samples")),
            "--baseline" => a.baseline = true,
            "--compare" => a.compare = true,
            "--child" => a.child = true,
            "--bench" => {} // passed by `cargo bench`
            other => usage(&format!("unknown argument {other}")),
        }
    }
    a
}

fn usage(why: &str) -> ! {
    eprintln!(
        "merge_scale: {why}\nusage: merge_scale [--agents 10,100,1000] [--names 0,20] [--intervals 10] [--samples 3000] [--baseline | --compare]"
    );
    std::process::exit(2)
}

fn main() {
    let args = parse_args();
    if args.child {
        child(&args);
        return;
    }
    parent(&args);
}

/// What one child reports, one `key=value` line.
#[derive(Default, Clone)]
struct Row {
    agents: usize,
    names: usize,
    baseline: bool,
    merge_median_ms: f64,
    merge_max_ms: f64,
    merge_cpu_median_ms: f64,
    decode_median_ms: f64,
    finish_ms: f64,
    cpu_s: f64,
    peak_rss_mb: f64,
    report_kb: f64,
    digest: String,
}

fn run_child(args: &Args, agents: usize, names: usize, baseline: bool) -> Row {
    let mut cmd = Command::new(std::env::current_exe().expect("own path"));
    cmd.args([
        "--child",
        "--agents",
        &agents.to_string(),
        "--names",
        &names.to_string(),
        "--intervals",
        &args.intervals.to_string(),
        "--samples",
        &args.samples.to_string(),
    ]);
    if baseline {
        cmd.arg("--baseline");
    }
    let out = cmd.output().expect("run the child");
    if !out.status.success() {
        eprintln!("{}", String::from_utf8_lossy(&out.stderr));
        panic!(
            "child for {agents} agents x {names} names failed: {}",
            out.status
        );
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().last().unwrap_or_default();
    let get = |k: &str| -> String {
        line.split_whitespace()
            .find_map(|kv| kv.strip_prefix(&format!("{k}=")))
            .unwrap_or_default()
            .to_string()
    };
    let f = |k: &str| get(k).parse::<f64>().unwrap_or(f64::NAN);
    Row {
        agents,
        names,
        baseline,
        merge_median_ms: f("merge_median_ms"),
        merge_max_ms: f("merge_max_ms"),
        merge_cpu_median_ms: f("merge_cpu_median_ms"),
        decode_median_ms: f("decode_median_ms"),
        finish_ms: f("finish_ms"),
        cpu_s: f("cpu_s"),
        peak_rss_mb: f("peak_rss_mb"),
        report_kb: f("report_kb"),
        digest: get("digest"),
    }
}

fn parent(args: &Args) {
    let paths: &[bool] = match (args.baseline, args.compare) {
        (_, true) => &[true, false],
        (true, false) => &[true],
        (false, false) => &[false],
    };
    let mut rows: Vec<Row> = Vec::new();
    for &baseline in paths {
        for &names in &args.names {
            if baseline && names > 0 {
                continue;
            }
            for &n in &args.agents {
                rows.push(run_child(args, n, names, baseline));
            }
        }
    }
    println!(
        "{} intervals of 1 s; per agent and interval {} latency samples, one report of {:.1} KB",
        args.intervals,
        args.samples,
        rows.first().map_or(f64::NAN, |r| r.report_kb)
    );
    let head = [
        "path",
        "agents",
        "merge p50",
        "merge max",
        "merge cpu",
        "decode",
        "finish",
        "cpu",
        "peak RSS",
        "growth",
        "digest",
        "names",
    ];
    let units = [
        "", "", "ms", "ms", "ms p50", "ms p50", "ms", "s", "MB", "cpu/RSS", "", "",
    ];
    let line = |cells: &[String]| {
        println!(
            "{:<9} {:>6} {:>6} {:>10} {:>10} {:>10} {:>8} {:>9} {:>7} {:>9} {:>12} {:>17}",
            cells[0],
            cells[1],
            cells[11],
            cells[2],
            cells[3],
            cells[4],
            cells[5],
            cells[6],
            cells[7],
            cells[8],
            cells[9],
            cells[10]
        )
    };
    line(&head.map(String::from));
    line(&units.map(String::from));
    let mut prev: Option<&Row> = None;
    for r in &rows {
        let growth = match prev {
            Some(p) if p.baseline == r.baseline && p.names == r.names => format!(
                "x{:.1}/x{:.1}",
                r.merge_cpu_median_ms / p.merge_cpu_median_ms,
                r.peak_rss_mb / p.peak_rss_mb
            ),
            _ => "-".to_string(),
        };
        line(&[
            if r.baseline { "baseline" } else { "StepMerge" }.to_string(),
            r.agents.to_string(),
            format!("{:.2}", r.merge_median_ms),
            format!("{:.2}", r.merge_max_ms),
            format!("{:.2}", r.merge_cpu_median_ms),
            format!("{:.2}", r.decode_median_ms),
            format!("{:.0}", r.finish_ms),
            format!("{:.2}", r.cpu_s),
            format!("{:.1}", r.peak_rss_mb),
            growth,
            r.digest.clone(),
            r.names.to_string(),
        ]);
        prev = Some(r);
    }
    println!(
        "merge: one interval's reports from all agents (decoded messages in, merged, progress p99 out), \
         wall clock, median and max over intervals; merge cpu: the same in getrusage CPU time (robust to a \
         busy machine); decode: prost-decoding those messages (the gRPC layer's share); finish: summary and \
         .hlog; cpu: decode + merge + finish in all; peak RSS: the child's VmHWM; growth: against the row \
         above; digest: run.json's step, the .hlog and the progress p99s, hashed"
    );
    if args.compare {
        for r in rows.iter().filter(|r| !r.baseline) {
            let before = rows
                .iter()
                .find(|b| b.baseline && b.agents == r.agents && b.names == r.names);
            if let Some(b) = before.filter(|b| b.digest != r.digest) {
                eprintln!(
                    "merge_scale: {} agents: the outputs differ (baseline {}, StepMerge {})",
                    r.agents, b.digest, r.digest
                );
                std::process::exit(1);
            }
        }
        println!("baseline and StepMerge wrote the same results at every agent count");
    }
}

/// The coordinator-side work, old or new, behind one interface so both are timed the same way.
trait Merge {
    /// Merges one report; when it completes its interval, also computes the progress line's p99.
    fn interval(&mut self, agent: usize, report: pb::IntervalReport);
    /// The step's summary (after writing its .hlog into `dir`) and the progress p99s seen.
    fn finish(self: Box<Self>, step: &StepShape, dir: &Path) -> (StepResult, Vec<u64>);
}

/// `run_step`'s use of `StepMerge`, with the progress line always computed (a terminal is watching).
struct Current {
    merge: StepMerge,
    agents: usize,
    /// The mix's request names, for their .hlog files.
    names: Vec<String>,
    p99s: Vec<u64>,
}

impl Merge for Current {
    fn interval(&mut self, agent: usize, report: pb::IntervalReport) {
        let m = self.merge.interval(agent, report).expect("a valid report");
        if m.reports == self.agents && !m.tail {
            let p = self
                .merge
                .progress(m.seq, |_| {})
                .expect("the spill reads back")
                .expect("the interval just merged");
            self.p99s.push(p.p99_us);
        }
    }

    fn finish(self: Box<Self>, step: &StepShape, dir: &Path) -> (StepResult, Vec<u64>) {
        let StepTotals {
            total,
            series,
            agents,
            hlog,
        } = self.merge.finish().expect("the spill reads back");
        let mut input = step_input(&total, &series, step);
        input.agents = agents
            .iter()
            .enumerate()
            .map(|(i, a)| agent_input(step, i, a.counters, a.cpu_ns, a.latency_ms))
            .collect();
        let result = step::summarize(&input);
        output::write_hlog(dir, 1, started(), hlog.intervals(), &step.names).expect("hlog written");
        output::write_name_hlogs(dir, 1, started(), &self.names, |r| hlog.name_intervals(r))
            .expect("the names' hlogs written");
        (result, self.p99s)
    }
}

fn agent_input(
    step: &StepShape,
    i: usize,
    counters: shared::metrics::Counters,
    cpu_ns: u64,
    latency_ms: step::LatencyStats,
) -> step::AgentInput {
    step::AgentInput {
        name: step.names[i].clone(),
        threads: 2,
        cores: 2,
        wall: Duration::from_secs(u64::from(step.intervals)),
        counters,
        cpu_ns,
        latency_ms,
        start_delay: None,
        lost: false,
        clock_offset_ns: 0,
        rtt: Duration::from_micros(300),
    }
}

/// The step's fixed facts, for the summary.
struct StepShape {
    intervals: u32,
    names: Vec<String>,
}

fn child(args: &Args) {
    let n = args.agents[0];
    let names = args.names[0];
    let shape = StepShape {
        intervals: args.intervals,
        names: (0..n)
            .map(|i| format!("10.0.{}.{}:7777", i / 250, i % 250))
            .collect(),
    };
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::create_dir_all(dir.path().join("hlog")).expect("hlog dir");
    let mut merge: Box<dyn Merge> = if args.baseline {
        Box::new(baseline::Baseline::new(n))
    } else {
        Box::new(Current {
            merge: StepMerge::new(n, dir.path())
                .expect("a spill file")
                .with_names(names),
            agents: n,
            names: (0..names).map(|k| format!("request-{k}")).collect(),
            p99s: Vec::new(),
        })
    };
    let mut gen_hist = shared::metrics::Histograms::default();
    let mut gen_names = vec![shared::metrics::NameStats::default(); names];
    let mut merge_ms = Vec::new();
    let mut decode_ms = Vec::new();
    let mut merge_cpu_ms = Vec::new();
    let mut cpu = Duration::ZERO;
    let mut report_bytes = 0usize;
    for seq in 0..args.intervals {
        // The network's side: every agent's report of this interval, as bytes on the wire.
        let wire: Vec<Vec<u8>> = (0..n)
            .map(|agent| encoded_report(&mut gen_hist, &mut gen_names, agent, seq, args.samples))
            .collect();
        report_bytes += wire.iter().map(Vec::len).sum::<usize>();

        let cpu0 = cpu_time();
        let t0 = Instant::now();
        let decoded: Vec<pb::IntervalReport> = wire
            .iter()
            .map(
                |b| match pb::AgentMessage::decode(&b[..]).expect("decodes").kind {
                    Some(pb::agent_message::Kind::Interval(r)) => r,
                    _ => unreachable!("an interval report"),
                },
            )
            .collect();
        drop(wire);
        let t1 = Instant::now();
        let cpu1 = cpu_time();
        for (agent, r) in decoded.into_iter().enumerate() {
            merge.interval(agent, r);
        }
        let t2 = Instant::now();
        let cpu2 = cpu_time();
        cpu += cpu2 - cpu0;
        decode_ms.push((t1 - t0).as_secs_f64() * 1e3);
        merge_ms.push((t2 - t1).as_secs_f64() * 1e3);
        merge_cpu_ms.push((cpu2 - cpu1).as_secs_f64() * 1e3);
    }
    let cpu0 = cpu_time();
    let t0 = Instant::now();
    let (result, p99s) = merge.finish(&shape, dir.path());
    let finish_ms = t0.elapsed().as_secs_f64() * 1e3;
    cpu += cpu_time() - cpu0;
    let peak_rss_mb = vm_kb("VmHWM") / 1024.0;
    let mut h = std::collections::hash_map::DefaultHasher::new();
    serde_json::to_string(&result).expect("json").hash(&mut h);
    p99s.hash(&mut h);
    std::fs::read(dir.path().join("hlog/step-001.hlog"))
        .expect("hlog written")
        .hash(&mut h);
    for k in 0..names {
        std::fs::read(output::name_hlog_path(
            dir.path(),
            1,
            &format!("request-{k}"),
        ))
        .expect("a name's hlog written")
        .hash(&mut h);
    }
    let med = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    println!(
        "merge_median_ms={:.3} merge_max_ms={:.3} merge_cpu_median_ms={:.3} decode_median_ms={:.3} \
         finish_ms={:.3} cpu_s={:.3} peak_rss_mb={peak_rss_mb:.1} report_kb={:.2} digest={:016x}",
        med(&mut merge_ms),
        merge_ms.iter().copied().fold(0.0, f64::max),
        med(&mut merge_cpu_ms),
        med(&mut decode_ms),
        finish_ms,
        cpu.as_secs_f64(),
        report_bytes as f64 / 1024.0 / (n as f64 * f64::from(args.intervals)),
        h.finish()
    );
}

/// One agent's interval as it leaves the agent: recorded into histograms, converted, prost-encoded.
fn encoded_report(
    h: &mut shared::metrics::Histograms,
    names: &mut Vec<shared::metrics::NameStats>,
    agent: usize,
    seq: u32,
    samples: u32,
) -> Vec<u8> {
    let mut rng = Rng::new((agent as u64) << 32 | u64::from(seq));
    for x in [
        &mut h.latency,
        &mut h.ttfb,
        &mut h.connect,
        &mut h.lag,
        &mut h.wait,
    ] {
        x.reset();
    }
    for n in names.iter_mut() {
        n.counters = Default::default();
        n.latency.reset();
        n.failed.reset();
    }
    // Agents differ a little (their network path), so the merge spans more buckets than one agent's.
    let median_us = 4_000.0 * (1.0 + (agent % 7) as f64 * 0.15);
    let mut s = Snapshot::default();
    for k in 0..samples {
        // Each name a little slower than the one before, so their histograms differ.
        let name = (!names.is_empty()).then(|| k as usize % names.len());
        let slower = 1.0 + name.map_or(0.0, |n| n as f64 * 0.05);
        let latency = lognormal(&mut rng, median_us * slower, 0.5);
        let status = if k % 500 == 0 { 503 } else { 200 };
        if let Some(n) = name.map(|n| &mut names[n]) {
            n.counters.requests += 1;
            n.counters.replies += 1;
            n.counters.status[usize::from(status / 100 - 1)] += 1;
            if status == 200 {
                n.counters.ok += 1;
                n.latency.saturating_record(latency as u64);
            } else {
                n.failed.saturating_record(latency as u64);
            }
        }
        h.latency.saturating_record(latency as u64);
        h.ttfb
            .saturating_record((latency * (0.6 + 0.3 * rng.next_f64())) as u64);
        h.lag
            .saturating_record(lognormal(&mut rng, 40.0, 1.0) as u64);
        if k % 20 == 0 {
            h.connect
                .saturating_record(lognormal(&mut rng, 300.0, 0.4) as u64);
        }
        if k % 10 == 0 {
            h.wait
                .saturating_record(lognormal(&mut rng, 1_000.0, 0.8) as u64);
            s.counters.waited += 1;
        }
        s.counters.record_status(status);
    }
    let samples = u64::from(samples);
    s.counters.requests = samples;
    s.counters.replies = samples;
    s.counters.connections = samples / 20;
    s.counters.bytes_in = samples * 1_200;
    s.counters.bytes_out = samples * 150;
    s.cpu_ns = 300_000_000;
    // Lent to the report and taken back: a clone would copy ~190 KB a histogram, 42 of them at 20
    // names, for every agent (the generator's cost, untimed, but it made a run of 1,000 agents slow).
    s.hist = std::mem::take(h);
    s.names = std::mem::take(names);
    let interval = Interval {
        step: 0,
        seq,
        offset: Duration::from_secs(u64::from(seq)),
        length: Duration::from_secs(1),
        tail: false,
        snapshot: s,
    };
    let bytes =
        proto::from_agent(pb::agent_message::Kind::Interval((&interval).into())).encode_to_vec();
    *h = interval.snapshot.hist;
    *names = interval.snapshot.names;
    bytes
}

fn lognormal(rng: &mut Rng, median: f64, sigma: f64) -> f64 {
    // Box-Muller; 1 - u keeps ln away from 0.
    let z = (-2.0 * (1.0 - rng.next_f64()).ln()).sqrt()
        * (2.0 * std::f64::consts::PI * rng.next_f64()).cos();
    median * (sigma * z).exp()
}

fn cpu_time() -> Duration {
    let mut u = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage fills the struct it is given; RUSAGE_SELF is always valid. The child is one
    // thread, so this is the merge's CPU time (and not a noisy neighbour's, unlike the wall clock).
    let u = unsafe {
        libc::getrusage(libc::RUSAGE_SELF, u.as_mut_ptr());
        u.assume_init()
    };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(u.ru_utime) + tv(u.ru_stime)
}

fn vm_kb(key: &str) -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(f64::NAN)
}

/// The summary's input that does not depend on the merge path.
fn step_input<'a>(
    total: &'a Snapshot,
    series: &'a [step::IntervalSample],
    step: &StepShape,
) -> step::StepInput<'a> {
    let secs = Duration::from_secs(u64::from(step.intervals));
    step::StepInput {
        number: 1,
        model: LoadModel::Requests,
        value: 3000.0 * step.names.len() as f64,
        demanded_rate: Some(3000.0 * step.names.len() as f64),
        duration: secs,
        total,
        series,
        agents: Vec::new(),
        aborted: false,
        mark_lost: true,
        start_skew: None,
        ok_status: &OK_STATUS,
        baseline_p50_ms: None,
    }
}

static OK_STATUS: std::sync::LazyLock<shared::status::StatusSet> =
    std::sync::LazyLock::new(shared::status::StatusSet::default);

/// Fixed, so the .hlog's bytes (which carry the start time) are comparable between runs.
fn started() -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000)
}

/// The merge exactly as `run_step` did it before `StepMerge`: each report decoded into five full
/// histograms and added into the total and a full `Snapshot` per agent; the interval's latency bytes
/// kept for progress and the .hlog, decoded again for both.
mod baseline {
    use std::collections::BTreeMap;
    use std::fs;
    use std::path::Path;
    use std::time::Duration;

    use hdrhistogram::serialization::V2DeflateSerializer;
    use hdrhistogram::serialization::interval_log::{IntervalLogWriterBuilder, Tag};
    use proto::pb;
    use results::step::{self, IntervalSample, LatencyStats, StepResult};
    use shared::histogram::{self, Histogram};
    use shared::metrics::{Counters, Interval, Snapshot};

    use super::{Merge, StepShape, agent_input, started, step_input};

    #[derive(Default)]
    struct SeqAccum {
        offset: Duration,
        length: Duration,
        tail: bool,
        reports: usize,
        counters: Counters,
        latency: Vec<(usize, Vec<u8>)>,
    }

    pub struct Baseline {
        total: Snapshot,
        per_agent: Vec<Snapshot>,
        seqs: BTreeMap<u32, SeqAccum>,
        waiting: usize,
        p99s: Vec<u64>,
    }

    impl Baseline {
        pub fn new(n: usize) -> Baseline {
            Baseline {
                total: Snapshot::default(),
                per_agent: vec![Snapshot::default(); n],
                seqs: BTreeMap::new(),
                waiting: n,
                p99s: Vec::new(),
            }
        }
    }

    impl Merge for Baseline {
        fn interval(&mut self, i: usize, report: pb::IntervalReport) {
            let interval = Interval::try_from(&report).expect("valid report");
            self.total.add(&interval.snapshot);
            self.per_agent[i].add(&interval.snapshot);
            let seq = self.seqs.entry(interval.seq).or_default();
            seq.offset = interval.offset;
            seq.length = seq.length.max(interval.length);
            seq.tail |= interval.tail;
            seq.reports += 1;
            seq.counters.add(&interval.snapshot.counters);
            seq.latency.push((i, report.latency));
            if seq.reports == self.waiting && !seq.tail {
                // show_progress
                let mut merged = histogram::new();
                for (_, bytes) in &seq.latency {
                    if let Ok(h) = histogram::decode(bytes) {
                        histogram::add(&mut merged, &h);
                    }
                }
                self.p99s.push(merged.value_at_quantile(0.99));
            }
        }

        fn finish(self: Box<Self>, step: &StepShape, dir: &Path) -> (StepResult, Vec<u64>) {
            let series: Vec<IntervalSample> = self
                .seqs
                .values()
                .filter(|s| !s.tail)
                .map(|s| IntervalSample {
                    length: s.length,
                    replies: s.counters.replies,
                })
                .collect();
            let mut input = step_input(&self.total, &series, step);
            // What summarize did with `total: &per_agent[i]` before it took statistics.
            input.agents = (0..step.names.len())
                .map(|i| {
                    let a = &self.per_agent[i];
                    agent_input(
                        step,
                        i,
                        a.counters,
                        a.cpu_ns,
                        LatencyStats::of(&a.hist.latency),
                    )
                })
                .collect();
            let result = step::summarize(&input);
            let hlog: Vec<HlogInterval> = self
                .seqs
                .into_values()
                .map(|s| HlogInterval {
                    offset: s.offset,
                    length: s.length,
                    per_agent: s
                        .latency
                        .into_iter()
                        .map(|(i, bytes)| (step.names[i].clone(), bytes))
                        .collect(),
                })
                .collect();
            write_hlog(dir, &hlog);
            (result, self.p99s)
        }
    }

    /// output.rs's `HlogInterval` as it was.
    struct HlogInterval {
        offset: Duration,
        length: Duration,
        per_agent: Vec<(String, Vec<u8>)>,
    }

    /// output.rs's `write_hlog` as it was.
    fn write_hlog(dir: &Path, intervals: &[HlogInterval]) {
        let path = dir.join("hlog").join("step-001.hlog");
        let started = started();
        let mut buf = Vec::new();
        let mut serializer = V2DeflateSerializer::new();
        {
            let mut w = IntervalLogWriterBuilder::new()
                .add_comment(&format!(
                    "stampede {} step 1: latency in microseconds",
                    shared::VERSION
                ))
                .add_comment("untagged lines: all agents merged; Tag= lines: one agent each")
                .with_start_time(started)
                .with_base_time(started)
                .with_max_value_divisor(1000.0)
                .begin_log_with(&mut buf, &mut serializer)
                .expect("log header");
            for i in intervals {
                let decoded: Vec<(&String, Histogram<u64>)> = i
                    .per_agent
                    .iter()
                    .filter_map(|(agent, bytes)| histogram::decode(bytes).ok().map(|h| (agent, h)))
                    .collect();
                let mut merged = histogram::new();
                for (_, h) in &decoded {
                    histogram::add(&mut merged, h);
                }
                w.write_histogram(&merged, i.offset, i.length, None)
                    .expect("merged line");
                for (agent, h) in &decoded {
                    let tag = agent.replace([',', ' ', '\t'], "_");
                    w.write_histogram(h, i.offset, i.length, Tag::new(&tag))
                        .expect("agent line");
                }
            }
        }
        fs::write(&path, buf).expect("hlog written");
    }
}
