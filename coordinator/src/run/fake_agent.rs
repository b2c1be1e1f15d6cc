//! A scripted agent over an in-process `Link`, for the control plane's paused-time tests: it answers
//! hello, configure, pings, prepare and start as its script says, and logs what it was sent and when.
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use control::link::{AgentEnd, CoordinatorEnd};
use proto::pb;
use proto::pb::agent_message::Kind as Up;
use proto::pb::coordinator_message::Kind as Down;
use tokio::time::Instant;

use crate::fleet::unix_ns;

/// What the agent does with a `PrepareStep`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Prepare {
    Ack,
    /// Acknowledges it after this long.
    AckAfter(Duration),
    /// Never answers it (pings still are).
    Ignore,
    /// Drops its link.
    Close,
}

/// What the agent does once a step is started.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Start {
    /// Runs the step's length and reports; an abort makes it report at once, aborted.
    Run,
    /// Falls silent after this long: answers nothing more, keeps its link open.
    SilentAfter(Duration),
    /// Drops its link after this long.
    CloseAfter(Duration),
    /// Keeps answering pings but never reports, abort or not.
    Hang,
    /// Reports after this long, aborted on its own (as a SIGTERM drains an agent).
    DrainAfter(Duration),
}

/// A script: per step index, what to do at prepare and at start (`Ack` and `Run` otherwise).
#[derive(Debug, Clone, Default)]
pub struct Script {
    prepare: HashMap<u32, Prepare>,
    start: HashMap<u32, Start>,
    /// How long an abort takes to be answered.
    abort_delay: Duration,
    /// Per step index, the counters of an interval report sent 1 s after its start (its
    /// histograms empty).
    claims: HashMap<u32, pb::Counters>,
    /// The wall time its step reports say, if not the step's length.
    wall: Option<Duration>,
}

impl Script {
    pub fn prepare(mut self, step: u32, what: Prepare) -> Script {
        self.prepare.insert(step, what);
        self
    }

    pub fn start(mut self, step: u32, what: Start) -> Script {
        self.start.insert(step, what);
        self
    }

    /// One second into step `step`, reports an interval with these counters (empty histograms).
    pub fn claim(mut self, step: u32, counters: pb::Counters) -> Script {
        self.claims.insert(step, counters);
        self
    }

    /// Every step report says its workers ran this long.
    pub fn wall(mut self, wall: Duration) -> Script {
        self.wall = Some(wall);
        self
    }

    pub fn abort_delay(mut self, d: Duration) -> Script {
        self.abort_delay = d;
        self
    }
}

/// What the agent was sent (pings left out), and when.
pub type Log = Arc<Mutex<Vec<(Instant, Down)>>>;

/// Spawns a scripted agent; returns the coordinator's end of its link and its log.
pub fn spawn(script: Script) -> (CoordinatorEnd, Log) {
    let (coordinator, agent) = control::link::pair();
    let log = Log::default();
    tokio::spawn(play(agent, script, log.clone()));
    (coordinator, log)
}

/// The running step: when its report is due, and whether it is already aborted.
struct Running {
    step: u32,
    due: Instant,
    aborted: bool,
    act: Start,
}

async fn play(mut link: AgentEnd, script: Script, log: Log) {
    let mut length = Duration::ZERO;
    let mut running: Option<Running> = None;
    // A late acknowledgement, and when it is due.
    let mut later: Option<(Instant, Up)> = None;
    loop {
        let wake = running.as_ref().map(|r| r.due);
        let msg = tokio::select! {
            msg = link.rx.recv() => msg,
            _ = sleep_until(later.as_ref().map(|l| l.0)) => {
                let (_, answer) = later.take().expect("woken for a late answer");
                if send(&link, answer).await.is_err() {
                    return;
                }
                continue;
            }
            _ = sleep_until(wake) => {
                let r = running.take().expect("woken for a running step");
                match r.act {
                    Start::SilentAfter(_) => return silent(link).await,
                    Start::CloseAfter(_) => return,
                    Start::Run | Start::DrainAfter(_) | Start::Hang => {
                        let aborted = r.aborted || matches!(r.act, Start::DrainAfter(_));
                        if send(&link, report(r.step, script.wall.unwrap_or(length), aborted)).await.is_err() {
                            return;
                        }
                    }
                }
                continue;
            }
        };
        let Ok(pb::CoordinatorMessage { kind: Some(kind) }) = msg else {
            return;
        };
        if !matches!(kind, Down::Ping(_)) {
            log.lock().unwrap().push((Instant::now(), kind.clone()));
        }
        let answer = match kind {
            Down::Hello(_) => Some(hello()),
            Down::Configure(_) => Some(ack("configure", 0)),
            // Feeder rows are spooled without an answer.
            Down::FeedRows(_) | Down::FeedEnd(_) => None,
            Down::Ping(p) => Some(Up::Pong(pb::Pong {
                id: p.id,
                agent_unix_nanos: unix_ns(SystemTime::now()),
            })),
            Down::PrepareStep(p) => {
                length = Duration::from_millis(p.duration_ms);
                match script.prepare.get(&p.step).copied().unwrap_or(Prepare::Ack) {
                    Prepare::Ack => Some(ack("prepare", p.step)),
                    Prepare::AckAfter(d) => {
                        later = Some((Instant::now() + d, ack("prepare", p.step)));
                        None
                    }
                    Prepare::Ignore => None,
                    Prepare::Close => return,
                }
            }
            Down::StartStep(s) => {
                let act = script.start.get(&s.step).copied().unwrap_or(Start::Run);
                let after = match act {
                    Start::Run => Some(length),
                    Start::SilentAfter(d) | Start::CloseAfter(d) | Start::DrainAfter(d) => Some(d),
                    // No report is ever due.
                    Start::Hang => None,
                };
                if let Some(c) = script.claims.get(&s.step) {
                    let empty = shared::histogram::encode(&shared::histogram::new());
                    let interval = Up::Interval(pb::IntervalReport {
                        step: s.step,
                        length_us: 1_000_000,
                        counters: Some(c.clone()),
                        latency: empty.clone(),
                        connect: empty.clone(),
                        ttfb: empty.clone(),
                        lag: empty.clone(),
                        wait: empty.clone(),
                        censored: empty.clone(),
                        unexpected: empty,
                        ..Default::default()
                    });
                    later = Some((Instant::now() + Duration::from_secs(1), interval));
                }
                running = after.map(|after| Running {
                    step: s.step,
                    due: Instant::now() + after,
                    aborted: false,
                    act,
                });
                None
            }
            Down::Abort(_) => {
                if let Some(r) = running.as_mut() {
                    r.aborted = true;
                    r.due = r.due.min(Instant::now() + script.abort_delay);
                }
                None
            }
            Down::SampleNow(_) => None,
        };
        if let Some(answer) = answer
            && send(&link, answer).await.is_err()
        {
            return;
        }
    }
}

async fn sleep_until(wake: Option<Instant>) {
    match wake {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Reads and drops everything, answering nothing, until the coordinator goes.
async fn silent(mut link: AgentEnd) {
    while link.rx.recv().await.is_ok() {}
}

async fn send(link: &AgentEnd, kind: Up) -> Result<(), control::link::Closed> {
    link.tx.send(pb::AgentMessage { kind: Some(kind) }).await
}

fn hello() -> Up {
    Up::HelloReply(pb::HelloReply {
        protocol_version: proto::PROTOCOL_VERSION,
        agent_version: "scripted".into(),
        capabilities: Some(pb::Capabilities {
            cores: 1,
            threads: 1,
            hostname: "fake".into(),
            ..Default::default()
        }),
        ..Default::default()
    })
}

fn ack(what: &str, step: u32) -> Up {
    Up::Ack(pb::Ack {
        what: what.into(),
        step,
        warnings: Vec::new(),
    })
}

fn report(step: u32, wall: Duration, aborted: bool) -> Up {
    Up::StepReport(pb::StepReport {
        step,
        began_unix_nanos: 0,
        wall_us: wall.as_micros() as u64,
        aborted,
        intervals: 0,
    })
}

/// Spawns a scripted monitor: it greets as a monitor named `name`, answers pings, refuses load, and
/// sends a sample every second (on the wall clock, whose time is what the step's window is on) until
/// `lost_after` has passed, when it drops its link.
pub fn spawn_monitor(name: &str, lost_after: Option<Duration>) -> CoordinatorEnd {
    let (coordinator, mut link) = control::link::pair();
    let name = name.to_string();
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        let gone = lost_after.map(|d| Instant::now() + d);
        let mut greeted = false;
        let mut n = 0u64;
        loop {
            let msg = tokio::select! {
                msg = link.rx.recv() => msg,
                _ = tick.tick(), if greeted => {
                    n += 1;
                    if send(&link, Up::MonitorSample(monitor_sample(n))).await.is_err() {
                        return;
                    }
                    continue;
                }
                _ = sleep_until(gone) => return,
            };
            let Ok(pb::CoordinatorMessage { kind: Some(kind) }) = msg else {
                return;
            };
            let answer = match kind {
                Down::Hello(_) => {
                    greeted = true;
                    monitor_hello(&name)
                }
                Down::Ping(p) => Up::Pong(pb::Pong {
                    id: p.id,
                    agent_unix_nanos: unix_ns(SystemTime::now()),
                }),
                Down::Abort(_) => continue,
                // As a real monitor: a sample now, and its seconds go on from it.
                Down::SampleNow(_) => {
                    tick.reset();
                    n += 1;
                    Up::MonitorSample(monitor_sample(n))
                }
                _ => Up::Refusal(pb::Refusal::from(&shared::refusal::Refusal::new(
                    shared::refusal::RefusalKind::Setup,
                    "this is a monitor: it runs no load",
                ))),
            };
            if send(&link, answer).await.is_err() {
                return;
            }
        }
    });
    coordinator
}

fn monitor_hello(name: &str) -> Up {
    let info = monitor::MonitorInfo {
        name: name.into(),
        hostname: "fake".into(),
        watching: "pid 1".into(),
        cores: monitor::Cores {
            online: 1,
            cpuset: None,
            quota: None,
        },
        machine_id: "0123456789abcdef".into(),
    };
    Up::HelloReply(pb::HelloReply {
        protocol_version: proto::PROTOCOL_VERSION,
        agent_version: "scripted".into(),
        role: pb::Role::Monitor.into(),
        monitor: Some((&info).into()),
        ..Default::default()
    })
}

/// The `n`-th sample: a host-only reading whose counters grow by one a sample.
fn monitor_sample(n: u64) -> pb::MonitorSample {
    let sample = monitor::Sample {
        at_unix_ns: unix_ns(SystemTime::now()),
        target: None,
        host: monitor::HostSample {
            cpu: monitor::CpuStates {
                user_ns: n * 100,
                idle_ns: n * 300,
                ..Default::default()
            },
            cores: Vec::new(),
            busiest_core_pct: None,
            run_queue: 1,
            mem_available_bytes: 1 << 30,
            mem_total_bytes: 2 << 30,
        },
        net_scope: monitor::NetScope::Host,
        net: Vec::new(),
        tcp: monitor::TcpCounters {
            listen_drops: n,
            ..Default::default()
        },
        monitor_cpu_ns: n,
    };
    (&sample).into()
}
