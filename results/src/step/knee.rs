//! The knee of a run (`summary.knee`): the first step at which the server stopped coping, and why —
//! its latency turned up, its served rate flattened, its failures started, or its CPU reached its
//! limit — or at which the generator, not the server, was the limit; and of a mix of named requests,
//! the one whose service degraded most there ([`KneeRequest`]).
use serde::{Deserialize, Serialize};

use crate::step::{KEPT_UP_RATIO, ProbeRole, StepResult, human, human_ms, judged};
use crate::verdict::{self, CPU_LIMIT_PCT, LAG_SHARE, THREAD_LIMIT_PCT};

/// Why the knee is where it is. When several hold at the knee's step, `cause` is the first of
/// these in this order and the others are in [`Knee::also`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum KneeCause {
    /// The generator could not keep its schedule (its fds, ports or CPU): the step says nothing of
    /// the server, so this is the generator's knee, not the server's.
    GeneratorBound,
    /// More than 1 % of the requests due failed.
    Failures,
    /// p99 rose to several times its low-load level, and above an absolute floor.
    Latency,
    /// The served rate stopped rising with the offered load.
    Plateau,
    /// The server's own monitor saw its CPU at the limit of what it may use.
    ServerCpu,
}

impl KneeCause {
    /// The cause as run.json and the report name it.
    pub fn name(self) -> &'static str {
        match self {
            KneeCause::GeneratorBound => "generator_bound",
            KneeCause::Failures => "failures",
            KneeCause::Latency => "latency",
            KneeCause::Plateau => "plateau",
            KneeCause::ServerCpu => "server_cpu",
        }
    }

    /// The cause for people, as the ranking, the charts and stdout say it: `server CPU`.
    pub fn words(self) -> &'static str {
        match self {
            KneeCause::GeneratorBound => "generator bound",
            KneeCause::Failures => "failures",
            KneeCause::Latency => "latency",
            KneeCause::Plateau => "plateau",
            KneeCause::ServerCpu => "server CPU",
        }
    }

    /// Whether a knee of this cause is the server's (a generator-bound one is not).
    pub fn is_servers(self) -> bool {
        self != KneeCause::GeneratorBound
    }
}

/// The knee: where, why, and the numbers that show it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Knee {
    /// The knee's step (run.json's `step`) and its value (conn/s, req/s or connections).
    pub step: u32,
    pub step_value: f64,
    pub demanded_rate: Option<f64>,
    pub cause: KneeCause,
    /// The other causes that held at the same step, in [`KneeCause`]'s order.
    #[serde(default)]
    pub also: Vec<KneeCause>,
    /// False for a generator-bound knee: the server's own knee lies beyond what was offered.
    pub servers: bool,
    /// p99 at low load (the lowest of the steps before the knee; null at the first step) and at the
    /// knee, and their ratio.
    pub low_p99_ms: Option<f64>,
    pub p99_ms: f64,
    pub p99_lower_bound: bool,
    pub p99_ratio: Option<f64>,
    /// Served per second at the knee and at the step before it (null at the first step).
    pub ok_rate: f64,
    pub prev_ok_rate: Option<f64>,
    pub failed_pct: f64,
    /// The server's own monitor at the knee: its name, its CPU in % of one core and in % of the
    /// cores it may use, those cores, and the requests served per core-second of its CPU. Null
    /// without an own-server monitor.
    pub monitor: Option<String>,
    pub server_cpu_pct: Option<f64>,
    pub server_cpu_util_pct: Option<f64>,
    pub server_cores: Option<f64>,
    /// Its busiest thread's share of a core (a single-threaded server's limit is one core).
    #[serde(default)]
    pub server_thread_max_pct: Option<f64>,
    pub ok_per_core_s: Option<f64>,
    /// Of a mix of named requests, the one whose latency or failures degraded most at the knee
    /// against the step before it; absent for unnamed requests, a generator's knee, a knee where no
    /// name degraded on its own (and in older files).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<KneeRequest>,
}

/// The named request that broke first: its numbers at the step before the knee and at the knee.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct KneeRequest {
    pub name: String,
    /// What degraded most: [`KneeCause::Failures`] or [`KneeCause::Latency`].
    pub by: KneeCause,
    /// Its p99 at the step before the knee (null at the first step, or if it served nothing
    /// there) and at the knee, and their ratio: the factor it degraded by.
    pub low_p99_ms: Option<f64>,
    pub p99_ms: f64,
    pub p99_lower_bound: bool,
    pub p99_ratio: Option<f64>,
    /// Its failed share of its requests due at the step before the knee and at the knee.
    pub prev_failed_pct: Option<f64>,
    pub failed_pct: f64,
}

/// A named request's p99 at or above this many times its level at the step before the knee (and
/// at or above [`LATENCY_FLOOR_MS`]) degraded. Lower than [`LATENCY_RATIO`]: the step already made
/// the knee; this only picks among its names, and a loaded machine's jitter stays under 2x.
pub const NAMED_RATIO: f64 = 2.0;

/// p99 at or above this many times its low-load level is a latency knee (with [`LATENCY_FLOOR_MS`]).
/// A server that queues rises by far more (tens to thousands of times); a loaded machine's jitter
/// moves a p99 by less than 2x, so 4x is a rise nobody mistakes for noise.
pub const LATENCY_RATIO: f64 = 4.0;
/// ... and at or above this many ms: a sub-millisecond p99 that triples (0.1 → 0.3 ms) is a context
/// switch or a timer tick on a shared machine, not a queue (a scheduler period alone is several
/// ms, and one request in a hundred meets one), so under 10 ms no rise is a latency knee.
pub const LATENCY_FLOOR_MS: f64 = 10.0;
/// The served rate rising by less than this share of the offered load's rise (relatively, step
/// over step) has flattened: a server below its capacity serves each added request, so its gain
/// is near 1; at its capacity near 0. Half is far from both, so noise in either does not cross it.
pub const PLATEAU_GAIN: f64 = 0.5;

/// The knee of a run, from its steps in any order (a search probes out of order): the lowest step
/// value at which a cause held ([`causes`]) and held again at the next step value, or at the last
/// one (a single step out of line, an outlier, is not a knee). Steps that say nothing of the server
/// (a lost agent's share, interrupted, a search's warm-up) are left out.
pub fn find(steps: &[StepResult]) -> Option<Knee> {
    let mut ramp: Vec<&StepResult> = steps.iter().filter(|r| counted(r)).collect();
    if ramp.iter().all(|r| r.ok == 0) {
        // Nothing answered at any step (a wrong port, a server down): no service to degrade.
        return None;
    }
    ramp.sort_by(|a, b| a.step_value.total_cmp(&b.step_value));
    let all: Vec<Vec<KneeCause>> = (0..ramp.len()).map(|i| causes(&ramp, i)).collect();
    let i = (0..ramp.len())
        .find(|&i| !all[i].is_empty() && all.get(i + 1).is_none_or(|next| !next.is_empty()))?;
    Some(knee(&ramp, i, &all[i]))
}

/// A step that says something of the server's service: judged, whole, not a search's warm-up, and
/// not the generator's (its fds, ports or CPU, or an agent's own --max-rate pacing it): a limit of
/// the load tool's is never the server's knee.
fn counted(r: &StepResult) -> bool {
    judged(r)
        && !r.generator_bound
        && !r.aborted
        && r.due > 0
        && r.probe.as_ref().is_none_or(|p| p.role != ProbeRole::Warmup)
}

/// The causes that hold at `ramp[i]` (sorted by step value), in [`KneeCause`]'s order.
pub fn causes(ramp: &[&StepResult], i: usize) -> Vec<KneeCause> {
    let r = ramp[i];
    let mut out = Vec::new();
    if r.failed_pct > verdict::FAILING_PCT {
        out.push(KneeCause::Failures);
    }
    let low = low_p99(&ramp[..i]);
    if low.is_some_and(|low| {
        has_latency(r)
            && r.latency_ms.p99 >= LATENCY_RATIO * low
            && r.latency_ms.p99 >= LATENCY_FLOOR_MS
    }) {
        // Half of it the generator's own lateness could account for (find-max's rule for a
        // breach): the rise says nothing certain of the server, so it makes no knee.
        if r.generator.lag_p99_ms < LAG_SHARE * r.latency_ms.p99 {
            out.push(KneeCause::Latency);
        }
    }
    if flattened(previous(&ramp[..i]), r) {
        out.push(KneeCause::Plateau);
    }
    // A resource reading explains a degraded service, never makes one: node's busiest thread at
    // 92 % with p99 8 ms was put as its knee.
    if !out.is_empty() && server_at_limit(r) {
        out.push(KneeCause::ServerCpu);
    }
    out
}

/// Whether a step's latency is a measurement (it served or gave up something).
fn has_latency(r: &StepResult) -> bool {
    r.latency_ms.max > 0.0 || r.latency_ms.censored
}

/// The p99 at low load: the lowest of the steps below (each one whose generator kept its
/// schedule). The lowest rather than the first, so a cold first step does not raise the bar.
fn low_p99(below: &[&StepResult]) -> Option<f64> {
    below
        .iter()
        .filter(|r| has_latency(r) && r.latency_ms.p99 > 0.0)
        .map(|r| r.latency_ms.p99)
        .min_by(f64::total_cmp)
}

/// The step below that the served rate's gain is measured from: the nearest whose generator kept
/// its schedule.
fn previous<'a>(below: &[&'a StepResult]) -> Option<&'a StepResult> {
    below.last().copied()
}

/// What a step offered: its demanded rate, or for the closed model its connections.
fn offered(r: &StepResult) -> f64 {
    r.demanded_rate.unwrap_or(r.step_value)
}

/// Whether the served rate stopped rising with the offered load from `prev` to `r`: its relative
/// gain under [`PLATEAU_GAIN`] of the offered load's, and (for a model with a rate to keep up with)
/// short of what was offered. A server that serves a steady 95 % of every step has not flattened;
/// one whose served rate stands still while the offer rises has.
fn flattened(prev: Option<&StepResult>, r: &StepResult) -> bool {
    let Some(prev) = prev else { return false };
    let (o0, o1) = (offered(prev), offered(r));
    if prev.ok_rate <= 0.0 || o0 <= 0.0 || o1 <= o0 {
        return false;
    }
    let offered_gain = o1 / o0 - 1.0;
    let served_gain = r.ok_rate / prev.ok_rate - 1.0;
    let short = r
        .demanded_rate
        .is_none_or(|d| r.ok_rate < KEPT_UP_RATIO * d);
    served_gain < PLATEAU_GAIN * offered_gain && short
}

/// Whether the step's own server monitor saw its CPU at its limit: of the cores it may use, or one
/// thread at a whole core (a single-threaded server can go no faster on more cores).
/// A busy thread is the server's limit only when it carries at least this share of the server's
/// CPU: node's event loop, one nginx worker of one; not one of a Go server's schedulers at 90 %
/// while the process uses 2 of its 4 cores.
pub const THREAD_SHARE: f64 = 0.5;

fn server_at_limit(r: &StepResult) -> bool {
    r.own_server()
        .and_then(|m| m.target.as_ref())
        .is_some_and(|t| {
            t.cpu_util_pct >= CPU_LIMIT_PCT
                || t.thread_max_pct
                    .is_some_and(|p| p >= THREAD_LIMIT_PCT && p >= THREAD_SHARE * t.cpu_pct)
        })
}

fn knee(ramp: &[&StepResult], i: usize, causes: &[KneeCause]) -> Knee {
    let r = ramp[i];
    let low = low_p99(&ramp[..i]);
    let target = r.own_server().and_then(|m| m.target.as_ref());
    Knee {
        step: r.number,
        step_value: r.step_value,
        demanded_rate: r.demanded_rate,
        cause: causes[0],
        also: causes[1..].to_vec(),
        servers: causes[0].is_servers(),
        low_p99_ms: low,
        p99_ms: r.latency_ms.p99,
        p99_lower_bound: r.latency_ms.lower_bounds.contains("p99"),
        p99_ratio: low.map(|low| round1(r.latency_ms.p99 / low)),
        ok_rate: r.ok_rate,
        prev_ok_rate: previous(&ramp[..i]).map(|p| p.ok_rate),
        failed_pct: r.failed_pct,
        monitor: r.own_server().map(|m| m.monitor.clone()),
        server_cpu_pct: target.map(|t| t.cpu_pct),
        server_cpu_util_pct: target.map(|t| t.cpu_util_pct),
        server_cores: target.map(|t| t.usable_cores),
        server_thread_max_pct: target.and_then(|t| t.thread_max_pct),
        ok_per_core_s: r.ok_per_core_s,
        request: causes[0]
            .is_servers()
            .then(|| degraded_request(previous(&ramp[..i]), r, causes))
            .flatten(),
    }
}

/// Of the knee step's named requests, the one whose service degraded most against `prev` (the step
/// before the knee): by its failures when the knee is one of failures (the largest rise of its
/// failed share above [`verdict::FAILING_PCT`]), else by its latency (the largest p99 factor of at
/// least [`NAMED_RATIO`], at or above [`LATENCY_FLOOR_MS`]); the other when the first finds none.
fn degraded_request(
    prev: Option<&StepResult>,
    r: &StepResult,
    causes: &[KneeCause],
) -> Option<KneeRequest> {
    let rows: Vec<KneeRequest> = r
        .per_request
        .iter()
        .filter(|n| n.requests + n.unsent > 0)
        .map(|n| {
            let before = prev.and_then(|p| p.per_request.iter().find(|b| b.name == n.name));
            let low = before
                .filter(|b| b.ok > 0 && b.latency_ms.p99 > 0.0)
                .map(|b| b.latency_ms.p99);
            let has_latency = n.ok > 0 || n.given_up > 0;
            KneeRequest {
                name: n.name.clone(),
                by: KneeCause::Latency,
                low_p99_ms: low,
                p99_ms: n.latency_ms.p99,
                // Its given-up ages are not kept apart from its latencies.
                p99_lower_bound: n.given_up > 0,
                p99_ratio: low
                    .filter(|_| has_latency)
                    .map(|low| round1(n.latency_ms.p99 / low)),
                prev_failed_pct: before.map(|b| b.failed_pct),
                failed_pct: n.failed_pct,
            }
        })
        .collect();
    let failures = || {
        rows.iter()
            .filter(|n| n.failed_pct > verdict::FAILING_PCT)
            .map(|n| (n, n.failed_pct - n.prev_failed_pct.unwrap_or(0.0)))
            .filter(|(_, rise)| *rise > 0.0)
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .map(|(n, _)| KneeRequest {
                by: KneeCause::Failures,
                ..n.clone()
            })
    };
    let latency = || {
        rows.iter()
            .filter(|n| n.p99_ms >= LATENCY_FLOOR_MS)
            .filter_map(|n| Some((n, n.p99_ratio?)))
            .filter(|(_, ratio)| *ratio >= NAMED_RATIO)
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .map(|(n, _)| n.clone())
    };
    if causes.first() == Some(&KneeCause::Failures) {
        failures().or_else(latency)
    } else {
        latency().or_else(failures)
    }
}

/// `42x`, `4.5x`: whole above 10, where a tenth says nothing.
fn ratio_words(r: f64) -> String {
    if r >= 10.0 {
        human(r.round())
    } else {
        format!("{r:.1}")
    }
}

fn round1(v: f64) -> f64 {
    (v * 10.0).round() / 10.0
}

impl KneeRequest {
    /// "search's p99 rose 40x (12 → 480 ms)", "12% of search failed (from 0 %)".
    pub fn words(&self) -> String {
        match (self.by, self.p99_ratio) {
            (KneeCause::Latency, Some(ratio)) => format!(
                "{}'s p99 rose {}x ({})",
                self.name,
                ratio_words(ratio),
                rise_ms(
                    self.low_p99_ms.unwrap_or(0.0),
                    self.p99_ms,
                    self.p99_lower_bound
                )
            ),
            _ => match self.prev_failed_pct {
                Some(prev) => format!(
                    "{}% of {} failed (from {}%)",
                    human(self.failed_pct),
                    self.name,
                    human(prev)
                ),
                None => format!("{}% of {} failed", human(self.failed_pct), self.name),
            },
        }
    }

    /// The headline's part: "search p99 ×40", "search 12% failed".
    pub fn headline(&self) -> String {
        match (self.by, self.p99_ratio) {
            (KneeCause::Latency, Some(r)) if r >= 10.0 => {
                format!("{} p99 ×{}", self.name, human(r.round()))
            }
            (KneeCause::Latency, Some(r)) => format!("{} p99 ×{r:.1}", self.name),
            _ => format!("{} {}% failed", self.name, human(self.failed_pct)),
        }
    }
}

/// "1.4 → 59 ms", "2.0 ms → 3.3 s": one unit said once.
fn rise_ms(low: f64, high: f64, high_bound: bool) -> String {
    let low = human_ms(low, false);
    let high = human_ms(high, high_bound);
    let low = match (low.strip_suffix(" ms"), high.ends_with(" ms")) {
        (Some(n), true) => n.to_string(),
        _ => low,
    };
    format!("{low} → {high}")
}

impl Knee {
    /// The answer's lead: "knee at 11,000 req/s: p99 rose 290x (6.5 ms → 1.9 s) as node's CPU
    /// reached 99.6 % of its 1 core; 10,640 requests per server core-second there" (the README's
    /// shoot-out). `at` is the knee's step value in words.
    pub fn sentence(&self, at: &str) -> String {
        if !self.servers {
            return format!(
                "knee at {at}: the generator, not the server, was the limit (not the server's knee)"
            );
        }
        let mut said: Vec<String> = self.request.iter().map(KneeRequest::words).collect();
        let mut cpu = String::new();
        for cause in std::iter::once(self.cause).chain(self.also.iter().copied()) {
            match cause {
                KneeCause::Failures => said.push(format!("{}% failed", human(self.failed_pct))),
                KneeCause::Latency => said.push(self.latency_words()),
                KneeCause::Plateau => said.push(self.plateau_words()),
                KneeCause::ServerCpu => cpu = self.cpu_words(),
                KneeCause::GeneratorBound => {}
            }
        }
        let mut s = format!("knee at {at}: ");
        if said.is_empty() {
            s.push_str(&cpu);
        } else {
            s.push_str(&said.join(", "));
            if !cpu.is_empty() {
                s.push_str(&format!(" as {cpu}"));
            }
        }
        if let Some(n) = self.ok_per_core_s {
            s.push_str(&format!(
                "; {} requests per server core-second there",
                human(n)
            ));
        }
        s
    }

    fn latency_words(&self) -> String {
        format!(
            "p99 rose {}x ({})",
            ratio_words(self.p99_ratio.unwrap_or(0.0)),
            rise_ms(
                self.low_p99_ms.unwrap_or(0.0),
                self.p99_ms,
                self.p99_lower_bound
            )
        )
    }

    fn plateau_words(&self) -> String {
        match self.prev_ok_rate {
            Some(prev) => format!(
                "the served rate flattened ({}/s, from {}/s a step before)",
                human(self.ok_rate),
                human(prev)
            ),
            None => format!("the served rate flattened at {}/s", human(self.ok_rate)),
        }
    }

    fn cpu_words(&self) -> String {
        let who = self.monitor.as_deref().unwrap_or("the server");
        let thread = self
            .server_thread_max_pct
            .filter(|p| *p >= THREAD_LIMIT_PCT);
        match (self.server_cpu_util_pct, self.server_cores) {
            (Some(util), Some(cores)) if util >= CPU_LIMIT_PCT || thread.is_none() => {
                let cores = if cores == 1.0 {
                    "its 1 core".to_string()
                } else {
                    format!("its {} cores", human(cores))
                };
                format!("{who}'s CPU reached {} % of {cores}", human(util))
            }
            _ => format!(
                "{who}'s busiest thread reached {} % of a core",
                human(thread.unwrap_or(0.0))
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::step::headline::Finding;
    use crate::step::summarize_run;

    /// A ramp of requests-model steps at `values`, each serving what it was offered with p99 2 ms,
    /// from the golden run's first step.
    fn ramp(values: &[f64]) -> Vec<StepResult> {
        let golden = include_str!("../../tests/golden/run.json");
        let run =
            crate::run_file::RunFile::parse(golden, std::path::Path::new("run.json")).unwrap();
        values
            .iter()
            .enumerate()
            .map(|(i, v)| {
                let mut r = run.steps[0].clone();
                r.number = i as u32 + 1;
                r.step_value = *v;
                r.demanded_rate = Some(*v);
                r.due = (*v * r.duration_s) as u64;
                (r.requests, r.replies, r.ok) = (r.due, r.due, r.due);
                r.ok_rate = *v;
                r.latency_ms.p99 = 2.0;
                r.latency_ms.max = 3.0;
                r
            })
            .collect()
    }

    fn p99s(steps: &mut [StepResult], p99: &[f64]) {
        for (r, p) in steps.iter_mut().zip(p99) {
            r.latency_ms.p99 = *p;
            r.latency_ms.max = r.latency_ms.max.max(*p);
        }
    }

    /// The step's own server: `name` at `util` % of `cores`.
    fn watched(r: &mut StepResult, name: &str, util: f64, cores: f64) {
        crate::quantity::observed(r, vec![crate::example_server(name, util, cores)]);
    }

    #[test]
    fn a_latency_knee_is_a_p99_several_times_its_low_load_level_and_says_the_cpu_behind_it() {
        let mut steps = ramp(&[7_000.0, 9_000.0, 11_000.0, 13_000.0, 15_000.0]);
        p99s(&mut steps, &[1.5, 1.4, 59.0, 120.0, 300.0]);
        for (r, cpu) in steps.iter_mut().zip([60.0, 78.0, 97.0, 99.0, 99.0]) {
            watched(r, "node", cpu, 1.0);
        }
        steps[4].ok_rate = 14_801.0;
        // Node's run of issue 22: it served every step, but its knee is not beyond the ramp, and
        // "kept up to" is the last step before the knee (it read "kept up to 15,000 req/s (p99
        // 300 ms)" beside a knee at 11,000).
        let s = summarize_run(&steps);
        assert_eq!(s.kept_up_to, Some(9_000.0));
        assert!(
            s.answer.ends_with(
                "kept up to 9,000 req/s (p99 1.4 ms); at 11,000 req/s it served 11,000/s with p99 59 ms"
            ),
            "{}",
            s.answer
        );
        assert_eq!(
            s.headline,
            "kept up to 9,000 req/s (p99 1.4 ms); broke at 11,000: p99 ×42 (59 ms), CPU 97 % of 1 core"
        );
        let k = find(&steps).unwrap();
        assert_eq!((k.step, k.step_value), (3, 11_000.0));
        assert_eq!(k.cause, KneeCause::Latency);
        assert_eq!(k.also, [KneeCause::ServerCpu]);
        assert!(k.servers);
        assert_eq!((k.low_p99_ms, k.p99_ratio), (Some(1.4), Some(42.1)));
        assert_eq!(k.server_cpu_util_pct, Some(97.0));
        // 11,000/s on 0.97 of a core.
        assert_eq!(k.ok_per_core_s, Some(11_340.206), "as the step has it");
        let s = summarize_run(&steps);
        assert!(
            s.answer.starts_with(
                "knee at 11,000 req/s: p99 rose 42x (1.4 → 59 ms) as node's CPU reached 97 % of its 1 core; 11,340 requests per server core-second there; it still served 14,801/s at 15,000 req/s; kept up to"
            ),
            "{}",
            s.answer
        );
    }

    #[test]
    fn a_plateau_knee_is_a_served_rate_that_stops_rising_with_the_offer() {
        let mut steps = ramp(&[100.0, 200.0, 300.0, 400.0, 500.0]);
        for (r, ok) in steps.iter_mut().zip([100.0, 200.0, 300.0, 310.0, 312.0]) {
            r.ok_rate = ok;
        }
        let k = find(&steps).unwrap();
        assert_eq!(
            (k.step_value, k.cause, k.also.as_slice()),
            (400.0, KneeCause::Plateau, &[][..])
        );
        assert_eq!(k.prev_ok_rate, Some(300.0));
        assert!(
            summarize_run(&steps).answer.starts_with(
                "knee at 400 req/s: the served rate flattened (310/s, from 300/s a step before); it still served 312/s at 500 req/s; "
            ),
            "{}",
            summarize_run(&steps).answer
        );
        // A server that serves a steady share short of every step has not flattened.
        for r in &mut steps {
            r.ok_rate = 0.95 * r.step_value;
        }
        assert_eq!(find(&steps), None);
    }

    #[test]
    fn a_closed_model_plateau_is_throughput_that_stops_rising_with_the_connections() {
        let mut steps = ramp(&[10.0, 20.0, 40.0, 80.0]);
        for (r, ok) in steps.iter_mut().zip([1_000.0, 2_000.0, 2_100.0, 2_100.0]) {
            r.model = "concurrency".into();
            r.demanded_rate = None;
            r.ok_rate = ok;
        }
        let k = find(&steps).unwrap();
        assert_eq!((k.step_value, k.cause), (40.0, KneeCause::Plateau));
    }

    #[test]
    fn a_failures_knee_is_more_than_one_percent_failed() {
        let mut steps = ramp(&[100.0, 200.0, 300.0, 400.0]);
        for (r, pct) in steps.iter_mut().zip([0.0, 0.9, 5.0, 8.0]) {
            r.failed_pct = pct;
        }
        let k = find(&steps).unwrap();
        assert_eq!(
            (k.step_value, k.cause, k.failed_pct),
            (300.0, KneeCause::Failures, 5.0)
        );
        assert!(
            summarize_run(&steps)
                .answer
                .starts_with("knee at 300 req/s: 5% failed; ")
        );
    }

    #[test]
    fn a_cpu_at_its_limit_explains_a_knee_but_never_makes_one() {
        // go at 95 % of its 2 cores while every step is served at p99 2 ms: no knee (node's
        // busiest thread at 92 % with p99 8 ms was put as its knee in the shoot-out).
        let mut steps = ramp(&[100.0, 200.0, 300.0, 400.0]);
        for (r, cpu) in steps.iter_mut().zip([40.0, 60.0, 95.0, 97.0]) {
            watched(r, "go", cpu, 2.0);
        }
        assert_eq!(find(&steps), None);
        let s = summarize_run(&steps);
        assert_eq!(s.finding, Some(Finding::BeyondRamp));
        // Its latency degrades at 300: the knee, and the CPU said behind it.
        p99s(&mut steps, &[2.0, 2.0, 40.0, 90.0]);
        let k = find(&steps).unwrap();
        assert_eq!((k.step_value, k.cause), (300.0, KneeCause::Latency));
        assert_eq!(k.also, [KneeCause::ServerCpu]);
        assert_eq!((k.server_cpu_pct, k.server_cores), (Some(190.0), Some(2.0)));
        assert_eq!(
            summarize_run(&steps).headline,
            "kept up to 200 req/s (p99 2.0 ms); broke at 300: p99 ×20 (40 ms), CPU 95 % of 2 cores"
        );
        // One thread at a whole core, for a single-threaded server, explains it alike.
        for r in &mut steps {
            watched(r, "node", 50.0, 2.0);
        }
        for r in &mut steps[1..] {
            r.server_monitors[0].target.as_mut().unwrap().thread_max_pct = Some(99.0);
        }
        let k = find(&steps).unwrap();
        assert_eq!(
            (k.step_value, k.also.clone()),
            (300.0, vec![KneeCause::ServerCpu])
        );
        assert!(
            summarize_run(&steps)
                .headline
                .ends_with("busiest thread 99 %")
        );
        // One busy thread of many is not the limit: a Go server at half of 4 cores, one of its
        // schedulers at 95 % of a core.
        for r in &mut steps {
            watched(r, "go", 50.0, 4.0);
            r.server_monitors[0].target.as_mut().unwrap().thread_max_pct = Some(95.0);
        }
        assert_eq!(find(&steps).map(|k| k.also), Some(vec![]));
    }

    #[test]
    fn the_generator_s_limit_is_never_the_knee() {
        let mut steps = ramp(&[100.0, 200.0, 300.0, 400.0]);
        for r in &mut steps[2..] {
            r.generator_bound = true;
        }
        p99s(&mut steps, &[2.0, 2.0, 50.0, 90.0]);
        assert_eq!(find(&steps), None);
        let s = summarize_run(&steps);
        assert_eq!(s.finding, Some(Finding::GeneratorLimit));
        assert_eq!(
            s.headline,
            "kept up to 200 req/s (p99 2.0 ms); at 300 the generator was the limit, not the server"
        );
    }

    /// A p99 that rose with the generator's own lag (a loaded generator box) makes no knee when
    /// the lag is half of it; below that share the rise is the server's.
    #[test]
    fn a_latency_rise_half_of_it_the_generators_lag_makes_no_knee() {
        let mut steps = ramp(&[100.0, 200.0, 300.0, 400.0]);
        p99s(&mut steps, &[2.0, 2.0, 40.0, 60.0]);
        for r in &mut steps[2..] {
            r.generator.lag_p99_ms = 35.0;
        }
        assert_eq!(find(&steps), None);
        for r in &mut steps[2..] {
            r.generator.lag_p99_ms = 8.0;
        }
        let k = find(&steps).unwrap();
        assert_eq!((k.step_value, k.cause), (300.0, KneeCause::Latency));
        assert!(k.servers);
    }

    #[test]
    fn sub_millisecond_jitter_is_not_a_knee() {
        // 0.1 → 0.3 ms is 3x, and 0.1 → 0.5 ms 5x: under the floor either way.
        let mut steps = ramp(&[100.0, 200.0, 300.0, 400.0, 500.0]);
        p99s(&mut steps, &[0.1, 0.1, 0.3, 0.5, 0.5]);
        assert_eq!(find(&steps), None);
        assert!(
            summarize_run(&steps)
                .answer
                .starts_with("kept up to 500 req/s")
        );
    }

    #[test]
    fn one_step_out_of_line_is_not_a_knee_but_the_last_step_may_be() {
        let mut steps = ramp(&[100.0, 200.0, 300.0, 400.0, 500.0]);
        p99s(&mut steps, &[2.0, 2.0, 40.0, 2.0, 2.0]);
        assert_eq!(find(&steps), None, "an outlier in the middle");
        steps[0].failed_pct = 3.0;
        assert_eq!(
            find(&steps),
            None,
            "a failure blip, then an outlier, neither held"
        );
        // The last step has no next to confirm it: what it shows is all the run can say.
        p99s(&mut steps, &[2.0, 2.0, 2.0, 2.0, 40.0]);
        steps[0].failed_pct = 0.0;
        let k = find(&steps).unwrap();
        assert_eq!((k.step_value, k.cause), (500.0, KneeCause::Latency));
    }

    #[test]
    fn a_search_s_probes_are_taken_in_order_of_their_value_and_its_warmup_left_out() {
        let mut steps = ramp(&[100.0, 800.0, 400.0, 200.0, 300.0]);
        p99s(&mut steps, &[30.0, 900.0, 400.0, 2.0, 2.5]);
        steps[0].probe = Some(crate::step::ProbeMark {
            role: ProbeRole::Warmup,
            class: crate::step::Mark::Pass,
            reason: None,
        });
        let k = find(&steps).unwrap();
        // Low load is 2 ms (the cold warm-up's 30 ms is not), so 400 is the knee.
        assert_eq!((k.step, k.step_value, k.low_p99_ms), (3, 400.0, Some(2.0)));
    }

    #[test]
    fn a_summary_written_before_the_knee_reads_as_none() {
        let json = serde_json::json!({
            "kept_up_to": 400.0, "kept_up_step": 4, "kept_up_p99_ms": 4.5, "beyond": null,
            "peak_ok_rate": 401.0, "plateau_from": 400.0, "untrusted_steps": [],
            "answer": "kept up to 400 req/s"
        });
        let s: crate::step::RunSummary = serde_json::from_value(json).unwrap();
        assert_eq!(s.knee, None);
        let k = find(&ramp(&[100.0, 200.0])).map(|k| serde_json::to_value(k).unwrap());
        assert_eq!(k, None);
    }

    /// Gives each step rows of named requests: `(name, p99 ms, failed %)` per step.
    fn named(steps: &mut [StepResult], names: &[(&str, &[f64], &[f64])]) {
        for (i, r) in steps.iter_mut().enumerate() {
            r.per_request = names
                .iter()
                .map(|(name, p99, failed)| crate::step::per_request::RequestRow {
                    name: name.to_string(),
                    weight: 1,
                    requests: 100,
                    replies: 100,
                    ok: 100,
                    failed: failed[i] as u64,
                    failed_pct: failed[i],
                    given_up: 0,
                    unsent: 0,
                    ok_rate: 100.0,
                    status: crate::step::Counts(Vec::new()),
                    errors: crate::step::Counts(Vec::new()),
                    latency_ms: crate::step::LatencyStats {
                        p99: p99[i],
                        max: p99[i],
                        ..Default::default()
                    },
                    failed_latency_ms: Default::default(),
                })
                .collect();
        }
    }

    /// Node's latency knee at 11,000 req/s of the first test, with three named requests.
    fn node_ramp() -> Vec<StepResult> {
        let mut steps = ramp(&[7_000.0, 9_000.0, 11_000.0, 13_000.0, 15_000.0]);
        p99s(&mut steps, &[1.5, 1.4, 59.0, 120.0, 300.0]);
        for (r, cpu) in steps.iter_mut().zip([60.0, 78.0, 97.0, 99.0, 99.0]) {
            watched(r, "node", cpu, 1.0);
        }
        steps
    }

    #[test]
    fn the_knee_names_the_one_request_of_three_that_degraded() {
        let mut steps = node_ramp();
        let none = [0.0; 5];
        named(
            &mut steps,
            &[
                ("login", &[1.2, 1.3, 1.5, 1.4, 1.6], &none),
                ("search", &[2.0, 1.9, 76.0, 300.0, 900.0], &none),
                // Busier too, but under the floor: jitter, not a degradation.
                ("items", &[0.5, 0.5, 3.0, 3.0, 3.0], &none),
            ],
        );
        let k = find(&steps).unwrap();
        let r = k.request.as_ref().expect("a request named");
        assert_eq!((r.name.as_str(), r.by), ("search", KneeCause::Latency));
        assert_eq!(
            (r.low_p99_ms, r.p99_ms, r.p99_ratio),
            (Some(1.9), 76.0, Some(40.0))
        );
        let s = summarize_run(&steps);
        assert_eq!(
            s.headline,
            "kept up to 9,000 req/s (p99 1.4 ms); broke at 11,000: search p99 ×40, p99 ×42 (59 ms), CPU 97 % of 1 core"
        );
        assert!(
            s.answer.starts_with(
                "knee at 11,000 req/s: search's p99 rose 40x (1.9 → 76 ms), p99 rose 42x (1.4 → 59 ms) as node's CPU reached 97 % of its 1 core"
            ),
            "{}",
            s.answer
        );
        // run.json carries it, and a summary without it reads as none.
        let json = serde_json::to_value(&k).unwrap();
        assert_eq!(json["request"]["name"], "search");
        assert_eq!(json["request"]["p99_ratio"], 40.0);
        let mut old = json.clone();
        old.as_object_mut().unwrap().remove("request");
        assert_eq!(serde_json::from_value::<Knee>(old).unwrap().request, None);
    }

    #[test]
    fn a_failures_knee_names_the_request_whose_failures_rose_most() {
        let mut steps = ramp(&[100.0, 200.0, 300.0, 400.0]);
        for (r, f) in steps.iter_mut().zip([0.0, 0.0, 10.0, 20.0]) {
            r.failed_pct = f;
        }
        named(
            &mut steps,
            &[
                ("login", &[2.0; 4], &[0.0, 0.0, 0.5, 0.5]),
                // Slower too, but the knee is one of failures.
                ("search", &[2.0, 2.0, 40.0, 80.0], &[0.0, 0.0, 2.0, 2.0]),
                ("items", &[2.0; 4], &[0.0, 0.0, 28.0, 58.0]),
            ],
        );
        let k = find(&steps).unwrap();
        assert_eq!(k.cause, KneeCause::Failures);
        let r = k.request.unwrap();
        assert_eq!((r.name.as_str(), r.by), ("items", KneeCause::Failures));
        assert_eq!((r.prev_failed_pct, r.failed_pct), (Some(0.0), 28.0));
        let s = summarize_run(&steps);
        assert!(
            s.headline
                .ends_with("broke at 300: items 28% failed, 10% failed"),
            "{}",
            s.headline
        );
        assert!(
            s.answer
                .starts_with("knee at 300 req/s: 28% of items failed (from 0%), 10% failed"),
            "{}",
            s.answer
        );
    }

    #[test]
    fn no_request_is_named_where_none_degraded_on_its_own_or_the_requests_are_unnamed() {
        let mut steps = node_ramp();
        assert_eq!(find(&steps).unwrap().request, None, "unnamed");
        let flat = [1.0; 5];
        named(
            &mut steps,
            &[
                ("a", &flat, &[0.0; 5]),
                ("b", &[1.0, 1.0, 1.8, 2.0, 2.0], &[0.0; 5]),
            ],
        );
        assert_eq!(find(&steps).unwrap().request, None);
    }

    #[test]
    fn a_long_name_leaves_the_headline_but_stays_in_the_answer() {
        let mut steps = node_ramp();
        let long = "a".repeat(shared::plan::MAX_NAME_LEN);
        named(
            &mut steps,
            &[(&long, &[2.0, 2.0, 80.0, 90.0, 95.0], &[0.0; 5])],
        );
        let s = summarize_run(&steps);
        assert!(s.headline.chars().count() <= crate::step::headline::MAX_CHARS);
        assert!(!s.headline.contains(&long), "{}", s.headline);
        assert!(s.headline.contains("p99 ×42 (59 ms)"), "{}", s.headline);
        assert!(
            s.answer.contains(&format!("{long}'s p99 rose 40x")),
            "{}",
            s.answer
        );
    }
}
