//! Drives a run: greets and configures every agent, then for each step prepares it, starts it at one
//! instant, merges the streamed intervals, summarises and writes. This task alone owns the run's state;
//! agents' messages reach it through one channel.
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use agent::{Engine, Link};
use proto::pb::agent_message::Kind as Up;
use proto::pb::coordinator_message::Kind as Down;
use proto::{PROTOCOL_VERSION, pb, to_agent};
use shared::histogram;
use shared::metrics::{Interval, Snapshot};
use shared::report::{self, AgentInput, IntervalSample, StepInput, StepResult};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::config::{ConfigError, RunConfig};
use crate::output::{self, AgentInfo, HlogInterval, Output, OutputError};
use crate::progress::{Progress, Tick};

/// How far ahead of "now" a step's start instant is set, so every agent has it before it passes.
const START_LEAD: Duration = Duration::from_millis(100);
/// Extra time past a step's schedule and timeout before an agent counts as stuck.
const STEP_GRACE: Duration = Duration::from_secs(5);
/// How long an agent may take to answer hello, configure or prepare.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(15);

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("agent {agent} refused: {message}")]
    Refused { agent: String, message: String },
    #[error("agent {agent} disconnected while {doing}")]
    Lost { agent: String, doing: String },
    #[error("agent {agent} did not answer within {secs} s while {doing}")]
    Silent {
        agent: String,
        secs: u64,
        doing: String,
    },
    #[error("agent {agent} sent an invalid message: {why}")]
    Protocol { agent: String, why: String },
    #[error("{0}")]
    Output(#[from] OutputError),
    #[error("cannot start the embedded agent: {0}")]
    Engine(#[from] agent::engine::EngineError),
}

impl RunError {
    /// 2 for what the user must fix before running, 1 for a run that failed.
    pub fn exit_code(&self) -> u8 {
        match self {
            RunError::Config(_) => 2,
            _ => 1,
        }
    }
}

pub struct RunOutcome {
    pub dir: PathBuf,
    pub steps: Vec<StepResult>,
    pub aborted: bool,
}

struct AgentHandle {
    name: String,
    tx: mpsc::Sender<pb::CoordinatorMessage>,
    info: Option<AgentInfo>,
}

/// The agents of a run: their command senders, and one channel carrying everything they say.
struct Fleet {
    agents: Vec<AgentHandle>,
    events: mpsc::Receiver<(usize, Option<pb::AgentMessage>)>,
}

fn unix_ns(t: SystemTime) -> i64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i64)
}

impl Fleet {
    fn new(links: Vec<(String, Link)>) -> Fleet {
        let (tx, events) = mpsc::channel(256);
        let agents = links
            .into_iter()
            .enumerate()
            .map(|(i, (name, link))| {
                let Link { tx: cmd, mut rx } = link;
                let events = tx.clone();
                tokio::spawn(async move {
                    while let Some(msg) = rx.recv().await {
                        if events.send((i, Some(msg))).await.is_err() {
                            return;
                        }
                    }
                    let _ = events.send((i, None)).await;
                });
                AgentHandle {
                    name,
                    tx: cmd,
                    info: None,
                }
            })
            .collect();
        Fleet { agents, events }
    }

    async fn send(&self, i: usize, kind: Down, doing: &str) -> Result<(), RunError> {
        self.agents[i]
            .tx
            .send(to_agent(kind))
            .await
            .map_err(|_| RunError::Lost {
                agent: self.agents[i].name.clone(),
                doing: doing.to_string(),
            })
    }

    /// Waits for one answer from every agent; a refusal, a closed stream or silence is an error.
    async fn answers(&mut self, doing: &str) -> Result<Vec<Up>, RunError> {
        let mut got: Vec<Option<Up>> = (0..self.agents.len()).map(|_| None).collect();
        let deadline = Instant::now() + ANSWER_TIMEOUT;
        while let Some(waiting) = got.iter().position(Option::is_none) {
            let ev = tokio::time::timeout_at(deadline, self.events.recv())
                .await
                .map_err(|_| RunError::Silent {
                    agent: self.agents[waiting].name.clone(),
                    secs: ANSWER_TIMEOUT.as_secs(),
                    doing: doing.to_string(),
                })?;
            let (i, msg) = ev.unwrap_or((waiting, None));
            let agent = self.agents[i].name.clone();
            match msg.and_then(|m| m.kind) {
                None => {
                    return Err(RunError::Lost {
                        agent,
                        doing: doing.to_string(),
                    });
                }
                Some(Up::Refusal(r)) => {
                    return Err(RunError::Refused {
                        agent,
                        message: r.message,
                    });
                }
                Some(Up::Pong(_)) => {}
                Some(other) => got[i] = Some(other),
            }
        }
        Ok(got.into_iter().flatten().collect())
    }

    async fn hello(&mut self) -> Result<(), RunError> {
        for i in 0..self.agents.len() {
            let hello = pb::Hello {
                protocol_version: PROTOCOL_VERSION,
                coordinator_version: shared::VERSION.to_string(),
                token: String::new(),
            };
            self.send(i, Down::Hello(hello), "greeting it").await?;
        }
        for (i, answer) in self.answers("greeting it").await?.into_iter().enumerate() {
            let agent = self.agents[i].name.clone();
            let Up::HelloReply(h) = answer else {
                return Err(RunError::Protocol {
                    agent,
                    why: "expected a hello reply".into(),
                });
            };
            let caps = h.capabilities.unwrap_or_default();
            self.agents[i].info = Some(AgentInfo {
                name: agent,
                version: h.agent_version,
                hostname: caps.hostname,
                cores: caps.cores,
                threads: caps.threads.max(1),
                fd_limit: caps.fd_limit,
                port_range: [caps.port_range_low, caps.port_range_high],
            });
        }
        Ok(())
    }

    async fn expect_acks(&mut self, doing: &str) -> Result<(), RunError> {
        for (i, answer) in self.answers(doing).await?.into_iter().enumerate() {
            if !matches!(answer, Up::Ack(_)) {
                return Err(RunError::Protocol {
                    agent: self.agents[i].name.clone(),
                    why: format!("expected an acknowledgement while {doing}"),
                });
            }
        }
        Ok(())
    }

    fn infos(&self) -> Vec<AgentInfo> {
        self.agents.iter().filter_map(|a| a.info.clone()).collect()
    }

    fn threads(&self, i: usize) -> u32 {
        self.agents[i].info.as_ref().map_or(1, |a| a.threads)
    }
}

/// Runs the plan on the embedded agent. Ctrl-C (the `shutdown` token) aborts the running step, which is
/// still written, marked aborted.
pub async fn run(cfg: RunConfig, shutdown: CancellationToken) -> Result<RunOutcome, RunError> {
    output::prepare_dir(&cfg.out)?;
    let engine = Arc::new(Engine::start(cfg.threads)?);
    // The embedded agent stops when its link is dropped at the end of the run, like a remote one would.
    let link = agent::embedded(engine, CancellationToken::new());
    let mut fleet = Fleet::new(vec![("embedded".to_string(), link)]);
    fleet.hello().await?;
    for i in 0..fleet.agents.len() {
        fleet
            .send(
                i,
                Down::Configure((&cfg.plan.workload).into()),
                "configuring it",
            )
            .await?;
    }
    fleet.expect_acks("configuring it").await?;

    let mut out = Output::create(&cfg, &fleet.infos())?;
    let progress = Progress::new(cfg.quiet);
    let mut results = Vec::new();
    let mut aborted = false;
    let outcome = async {
        for index in 0..cfg.plan.steps.len() {
            if shutdown.is_cancelled() {
                aborted = true;
                break;
            }
            let r = run_step(&mut fleet, &cfg, index, &shutdown, &progress, &mut out).await?;
            aborted |= r.aborted;
            results.push(r);
            if aborted {
                break;
            }
        }
        Ok::<_, RunError>(())
    }
    .await;
    match outcome {
        Ok(()) => out.finish(if aborted { "aborted" } else { "completed" })?,
        Err(e) => {
            let _ = out.finish("failed");
            return Err(e);
        }
    }
    Ok(RunOutcome {
        dir: out.dir().to_path_buf(),
        steps: results,
        aborted,
    })
}

/// One interval of the fleet: what the series and progress need, and each agent's encoded latency.
#[derive(Default)]
struct SeqAccum {
    offset: Duration,
    length: Duration,
    tail: bool,
    reports: usize,
    counters: shared::metrics::Counters,
    latency: Vec<(usize, Vec<u8>)>,
}

async fn run_step(
    fleet: &mut Fleet,
    cfg: &RunConfig,
    index: usize,
    shutdown: &CancellationToken,
    progress: &Progress,
    out: &mut Output,
) -> Result<StepResult, RunError> {
    let plan = &cfg.plan;
    let share = plan.step_share(index, cfg.seed.wrapping_add(index as u64));
    let n = fleet.agents.len();
    let doing = format!("preparing step {}", index + 1);
    for i in 0..n {
        fleet
            .send(i, Down::PrepareStep((&share).into()), &doing)
            .await?;
    }
    fleet.expect_acks(&doing).await?;

    let started = SystemTime::now() + START_LEAD;
    let start_unix_nanos = unix_ns(started);
    let doing = format!("running step {}", index + 1);
    for i in 0..n {
        let start = pb::StartStep {
            step: share.step,
            start_unix_nanos,
        };
        fleet.send(i, Down::StartStep(start), &doing).await?;
    }
    let timeout = plan.workload.timeout;
    let mut deadline =
        Instant::now() + START_LEAD + share.scheduled_duration() + timeout + STEP_GRACE;

    let mut total = Snapshot::default();
    let mut per_agent: Vec<Snapshot> = vec![Snapshot::default(); n];
    let mut seqs: BTreeMap<u32, SeqAccum> = BTreeMap::new();
    let mut reports: Vec<Option<pb::StepReport>> = vec![None; n];
    let mut abort_sent = false;
    let mut aborted = false;
    let demanded = plan.demanded_request_rate(plan.steps[index]);

    while let Some(waiting) = reports.iter().position(Option::is_none) {
        tokio::select! {
            ev = fleet.events.recv() => {
                let (i, msg) = ev.unwrap_or((waiting, None));
                let agent = fleet.agents[i].name.clone();
                match msg.and_then(|m| m.kind) {
                    None => return Err(RunError::Lost { agent, doing }),
                    Some(Up::Refusal(r)) => return Err(RunError::Refused { agent, message: r.message }),
                    Some(Up::Interval(report)) => {
                        let interval = Interval::try_from(&report).map_err(|e| RunError::Protocol {
                            agent: agent.clone(),
                            why: e.to_string(),
                        })?;
                        total.add(&interval.snapshot);
                        per_agent[i].add(&interval.snapshot);
                        let seq = seqs.entry(interval.seq).or_default();
                        seq.offset = interval.offset;
                        seq.length = seq.length.max(interval.length);
                        seq.tail |= interval.tail;
                        seq.reports += 1;
                        seq.counters.add(&interval.snapshot.counters);
                        seq.latency.push((i, report.latency));
                        if seq.reports == n && !seq.tail {
                            let mut merged = histogram::new();
                            for (_, bytes) in &seq.latency {
                                // Already decoded once above, so this cannot fail.
                                if let Ok(h) = histogram::decode(bytes) {
                                    histogram::add(&mut merged, &h);
                                }
                            }
                            let secs = seq.length.as_secs_f64().max(1e-9);
                            progress.tick(&Tick {
                                step: share.step,
                                steps: plan.steps.len(),
                                elapsed_s: (seq.offset + seq.length).as_secs_f64(),
                                demanded,
                                value: plan.steps[index],
                                achieved: seq.counters.requests as f64 / secs,
                                replies: seq.counters.replies as f64 / secs,
                                p99_ms: histogram::us_to_ms(merged.value_at_quantile(0.99)),
                                errors: total.counters.errors_total(),
                            });
                        }
                    }
                    Some(Up::StepReport(r)) => reports[i] = Some(r),
                    Some(_) => {}
                }
            }
            _ = tokio::time::sleep_until(deadline) => {
                if abort_sent {
                    return Err(RunError::Silent {
                        agent: fleet.agents[waiting].name.clone(),
                        secs: (share.scheduled_duration() + timeout + STEP_GRACE).as_secs(),
                        doing,
                    });
                }
                // Past its deadline: stop it, and give it one more timeout to report what it has.
                abort_all(fleet, "step deadline passed").await;
                abort_sent = true;
                aborted = true;
                deadline = Instant::now() + timeout + STEP_GRACE;
            }
            _ = shutdown.cancelled(), if !abort_sent => {
                abort_all(fleet, "interrupted").await;
                abort_sent = true;
                aborted = true;
                deadline = Instant::now() + timeout + STEP_GRACE;
            }
        }
    }
    let reports: Vec<pb::StepReport> = reports.into_iter().flatten().collect();
    aborted |= reports.iter().any(|r| r.aborted);

    let series: Vec<IntervalSample> = seqs
        .values()
        .filter(|s| !s.tail)
        .map(|s| IntervalSample {
            length: s.length,
            replies: s.counters.replies,
        })
        .collect();
    let agents = (0..n)
        .map(|i| AgentInput {
            name: fleet.agents[i].name.clone(),
            threads: fleet.threads(i),
            wall: Duration::from_micros(reports[i].wall_us),
            total: &per_agent[i],
            start_delay: (reports[i].first_send_unix_nanos > 0).then(|| {
                Duration::from_nanos(
                    (reports[i].first_send_unix_nanos - start_unix_nanos).max(0) as u64
                )
            }),
            lost: false,
        })
        .collect();
    // An aborted step is summarised over the time it actually ran.
    let duration = if aborted {
        reports
            .iter()
            .map(|r| Duration::from_micros(r.wall_us))
            .max()
            .unwrap_or_default()
            .min(share.scheduled_duration())
    } else {
        share.scheduled_duration()
    };
    let result = report::summarize(&StepInput {
        step: share.step,
        model: plan.model,
        value: plan.steps[index],
        demanded_rate: demanded,
        duration,
        total: &total,
        series: &series,
        agents,
        aborted,
    });
    progress.step_done(&result, plan.steps.len());
    let hlog: Vec<HlogInterval> = seqs
        .into_values()
        .map(|s| HlogInterval {
            offset: s.offset,
            length: s.length,
            per_agent: s
                .latency
                .into_iter()
                .map(|(i, bytes)| (fleet.agents[i].name.clone(), bytes))
                .collect(),
        })
        .collect();
    out.write_step(&result, started, &hlog)?;
    Ok(result)
}

async fn abort_all(fleet: &Fleet, reason: &str) {
    for i in 0..fleet.agents.len() {
        let _ = fleet
            .send(
                i,
                Down::Abort(pb::Abort {
                    reason: reason.to_string(),
                }),
                "aborting",
            )
            .await;
    }
}
