//! The monitor role's control session (`stampede-agent --monitor`). What it watches is fixed on its own
//! command line; a coordinator can only greet it, ping it and read it. After a hello that passes the
//! same door as a load agent's ([`Rules::admit`]: version, token) it answers with its role and
//! [`MonitorInfo`], then sends a [`Sample`] every second until the link ends. Every load command is
//! refused naming its role, and nothing a coordinator sends is ever run: no message carries anything
//! this session executes, and a sample carries names (a thread's, an interface's), never a command
//! line or an environment.
use std::sync::Arc;
use std::time::Duration;

use control::admission::{HELLO_WITHIN, Rules, Seated};
use control::link::log_refused;
use control::link::{AgentEnd, Closed, Link, LinkTx, Side};
use control::session::{
    Arrival, DEAD_MAN, DeadMan, SessionError, refusal, stamp_arrivals, unix_ns_now,
};
use control::system;
use proto::pb::agent_message::Kind as Up;
use proto::pb::coordinator_message::Kind as Down;
use proto::{PROTOCOL_VERSION, from_agent, pb};
use shared::refusal::RefusalKind;
use tokio::sync::mpsc;
use tokio::time::{Instant, MissedTickBehavior};
use tokio_util::sync::CancellationToken;

use crate::sensor::{MAX_NAMED, Sensor};
use crate::{MonitorInfo, Sample, Watch};

/// How often a monitor samples: the coordinator's 1 s series and its step windows assume this.
pub const SAMPLE_EVERY: Duration = Duration::from_secs(1);

/// The refusal of every load command.
pub const NO_LOAD: &str = "this is a monitor: it runs no load";

/// What the session reads: the sensor in service, a scripted one in tests. Synchronous and cheap
/// (a few small /proc reads), but run on a blocking thread since a read of /proc may stall.
pub trait Sampler: Send + Sync + 'static {
    /// Who this monitor is; `name` (`--name`) defaults to the hostname.
    fn info(&self, name: Option<String>) -> MonitorInfo;
    /// One reading; an error is logged and the second skipped.
    fn sample(&mut self) -> Result<Sample, String>;
}

impl Sampler for Sensor {
    fn info(&self, name: Option<String>) -> MonitorInfo {
        Sensor::info(self, name)
    }

    fn sample(&mut self) -> Result<Sample, String> {
        Sensor::sample(self).map_err(|e| e.to_string())
    }
}

/// Opens the sensor of `watch` anew for each session.
pub fn opener(watch: Watch) -> Open {
    opener_allowing(watch, MAX_NAMED)
}

/// [`opener`], a process name allowed to match up to `most` processes.
pub fn opener_allowing(watch: Watch, most: usize) -> Open {
    Arc::new(move || {
        Sensor::open_allowing(&watch, most)
            .map(|p| Box::new(p) as Box<dyn Sampler>)
            .map_err(|e| e.to_string())
    })
}

/// Opens a fresh sampler for each session: a pid gone since the last one is refused at the hello, in
/// the sensor's words, and a session's interval gauges never span two sessions.
pub type Open = Arc<dyn Fn() -> Result<Box<dyn Sampler>, String> + Send + Sync>;

/// A monitor's fixed configuration: its name and how to open what it watches.
#[derive(Clone)]
pub struct Monitor {
    pub name: Option<String>,
    pub open: Open,
}

impl std::fmt::Debug for Monitor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Monitor")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// Serves one coordinator until its link ends, it falls silent for [`DEAD_MAN`], or `shutdown`.
pub async fn serve(
    monitor: Arc<Monitor>,
    rules: Arc<Rules>,
    link: AgentEnd,
    peer: String,
    shutdown: CancellationToken,
) -> Result<(), SessionError> {
    let Link { tx: out, rx } = link;
    let mut s = Session {
        monitor,
        rules,
        peer,
        out,
        sampler: None,
        info: None,
        failing: None,
        seated: None,
    };
    match s.stream(stamp_arrivals(rx), shutdown).await {
        // Nobody reads the samples any more: the coordinator is gone, which is a monitor's goodbye.
        Err(SessionError::Closed) => Ok(()),
        other => other,
    }
}

impl Session {
    async fn stream(
        &mut self,
        mut inbound: mpsc::Receiver<Arrival>,
        shutdown: CancellationToken,
    ) -> Result<(), SessionError> {
        let mut ticks = tokio::time::interval(SAMPLE_EVERY);
        // A late sample (a slow read) does not bring a burst: the next stays on the second.
        ticks.set_missed_tick_behavior(MissedTickBehavior::Skip);
        let opened = Instant::now();
        let hello_by = self.rules.hello_by(opened);
        // As a load agent's: silence judged from what arrived, after a grace if this process stalled.
        let mut dead_man = DeadMan::new(opened);
        loop {
            let (waited_since, due) = (Instant::now(), dead_man.deadline());
            tokio::select! {
                biased;
                () = shutdown.cancelled() => return Ok(()),
                arrival = inbound.recv() => {
                    dead_man.woke(waited_since, due);
                    match arrival {
                        Some((at, Ok(m))) => {
                            dead_man.heard(at);
                            if self.handle(m).await? {
                                // Sampling starts with the hello: the first sample now, then every
                                // second; a step's end asks for one now, and the seconds go on from it.
                                ticks.reset_immediately();
                            }
                        }
                        Some((_, Err(Closed::Broken(words)))) => {
                            return Err(SessionError::Broken(words));
                        }
                        Some((_, Err(_))) | None => return Ok(()),
                    }
                }
                _ = ticks.tick(), if self.sampler.is_some() => {
                    dead_man.woke(waited_since, due);
                    self.sample().await?
                }
                // As a load agent: a coordinator that pings every 500 ms and is silent this long is gone.
                () = tokio::time::sleep_until(due) => {
                    dead_man.woke(waited_since, due);
                    if dead_man.silent() {
                        return Err(SessionError::Silent(DEAD_MAN));
                    }
                }
                () = tokio::time::sleep_until(hello_by.unwrap_or(opened)), if self.seated.is_none() && hello_by.is_some() => {
                    let e = SessionError::NoHello(HELLO_WITHIN);
                    log_refused(Side::Agent, &self.peer, &e);
                    return Err(e);
                }
            }
        }
    }
}

struct Session {
    monitor: Arc<Monitor>,
    rules: Arc<Rules>,
    peer: String,
    out: LinkTx<pb::AgentMessage>,
    /// Open once greeted; `None` while on a blocking thread for a sample, and before the hello.
    sampler: Option<Box<dyn Sampler>>,
    info: Option<pb::MonitorInfo>,
    /// The agent's seat, held from the first valid hello to the session's end.
    seated: Option<Seated>,
    /// The last sample error logged, so a watched process gone is said once, not every second.
    failing: Option<String>,
}

impl Session {
    async fn send(&self, kind: Up) -> Result<(), SessionError> {
        self.out
            .send(from_agent(kind))
            .await
            .map_err(|_| SessionError::Closed)
    }

    /// Answers one message; true when a sample is due now: the hello that starts the samples, or a
    /// coordinator's `SampleNow` at a step's end.
    async fn handle(&mut self, msg: pb::CoordinatorMessage) -> Result<bool, SessionError> {
        let greeted = self.info.is_some();
        let reply = match msg.kind {
            None => refusal(RefusalKind::Other, "empty message"),
            Some(Down::Hello(h)) => return self.on_hello(&h).await,
            // Nothing is answered before a valid hello (as a load agent).
            Some(Down::Ping(_)) if !greeted => None,
            Some(Down::Ping(p)) => Some(Up::Pong(pb::Pong {
                id: p.id,
                agent_unix_nanos: unix_ns_now(),
            })),
            Some(_) if !greeted => {
                let e = SessionError::Auth("say hello first");
                log_refused(Side::Agent, &self.peer, &e);
                if let Some(kind) = refusal(e.refusal_kind(), e.to_string()) {
                    self.send(kind).await?;
                }
                return Err(e);
            }
            Some(Down::Configure(_) | Down::PrepareStep(_) | Down::StartStep(_)) => {
                refusal(RefusalKind::Setup, NO_LOAD)
            }
            // Nothing runs here, so there is nothing to abort.
            Some(Down::Abort(_)) => None,
            // Feeder rows go to load agents only (after a configure a monitor refused).
            Some(Down::FeedRows(_) | Down::FeedEnd(_)) => None,
            Some(Down::SampleNow(_)) => return Ok(true),
        };
        if let Some(kind) = reply {
            self.send(kind).await?;
        }
        Ok(false)
    }

    async fn on_hello(&mut self, h: &pb::Hello) -> Result<bool, SessionError> {
        // The first hello takes the agent's seat; a later one is only checked again.
        let admitted = match &self.seated {
            None => self.rules.admit(h).map(Some),
            Some(_) => self.rules.check(h).map(|()| None),
        };
        if let Err(e) = admitted.map(|seated| self.seated = self.seated.take().or(seated)) {
            log_refused(Side::Agent, &self.peer, &e);
            if let Some(kind) = refusal(e.refusal_kind(), e.to_string()) {
                self.send(kind).await?;
            }
            return Err(e);
        }
        // A second hello is answered again; the samples go on as they were.
        if let Some(info) = &self.info {
            self.send(Up::HelloReply(hello_reply(info.clone()))).await?;
            return Ok(false);
        }
        let open = self.monitor.open.clone();
        let opened = tokio::task::spawn_blocking(move || open())
            .await
            .unwrap_or_else(|e| Err(format!("opening the probe failed: {e}")));
        let sampler = match opened {
            Ok(s) => s,
            Err(why) => {
                let e = SessionError::Watch(why);
                if let Some(kind) = refusal(e.refusal_kind(), e.to_string()) {
                    self.send(kind).await?;
                }
                return Err(e);
            }
        };
        let info = pb::MonitorInfo::from(&sampler.info(self.monitor.name.clone()));
        tracing::info!(peer = %self.peer, watching = %info.watching, "Monitoring for a coordinator");
        self.sampler = Some(sampler);
        self.info = Some(info.clone());
        self.send(Up::HelloReply(hello_reply(info))).await?;
        Ok(true)
    }

    /// Takes one reading on a blocking thread and sends it; a failed reading is logged and skipped.
    async fn sample(&mut self) -> Result<(), SessionError> {
        let Some(mut sampler) = self.sampler.take() else {
            return Ok(());
        };
        let (sampler, reading) = match tokio::task::spawn_blocking(move || {
            let reading = sampler.sample();
            (sampler, reading)
        })
        .await
        {
            Ok(done) => done,
            // The sampler panicked on its thread: it is gone with it, and so is this session.
            Err(e) => return Err(SessionError::Watch(format!("the probe failed: {e}"))),
        };
        self.sampler = Some(sampler);
        match reading {
            Ok(sample) => {
                if self.failing.take().is_some() {
                    tracing::info!("Sampling again");
                }
                self.send(Up::MonitorSample((&sample).into())).await
            }
            Err(why) => {
                if self.failing.as_deref() != Some(why.as_str()) {
                    tracing::warn!(error = %why, "A sample failed; skipped");
                    self.failing = Some(why);
                }
                Ok(())
            }
        }
    }
}

/// A monitor's hello reply: its role and who it is. The capabilities say the machine (cores,
/// hostname) and no worker threads, so nothing reads it as a load agent with room to spare.
fn hello_reply(info: pb::MonitorInfo) -> pb::HelloReply {
    pb::HelloReply {
        protocol_version: PROTOCOL_VERSION,
        agent_version: shared::VERSION.to_string(),
        capabilities: Some(pb::Capabilities {
            cores: system::cores() as u32,
            threads: 0,
            hostname: system::hostname(),
            ..Default::default()
        }),
        role: pb::Role::Monitor as i32,
        monitor: Some(info),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use crate::{Cores, CpuStates, HostSample, NetScope, TcpCounters};
    use tokio::task::JoinHandle;

    use super::*;
    use control::link::{self, LinkRx};

    /// A sampler that counts its readings, fails the ones scripted to, and records every call.
    struct Scripted {
        taken: Arc<Mutex<u64>>,
        fail: fn(u64) -> bool,
    }

    impl Sampler for Scripted {
        fn info(&self, name: Option<String>) -> MonitorInfo {
            MonitorInfo {
                name: name.unwrap_or_else(|| "scripted-host".into()),
                hostname: "scripted-host".into(),
                watching: "pid 4242".into(),
                cores: Cores {
                    online: 2,
                    cpuset: None,
                    quota: None,
                },
                machine_id: "m1".into(),
            }
        }

        fn sample(&mut self) -> Result<Sample, String> {
            let mut taken = self.taken.lock().unwrap();
            *taken += 1;
            let n = *taken;
            if (self.fail)(n) {
                return Err(format!("reading {n} failed"));
            }
            Ok(Sample {
                at_unix_ns: n as i64,
                target: None,
                host: HostSample {
                    cpu: CpuStates {
                        user_ns: n * 1_000,
                        ..CpuStates::default()
                    },
                    cores: Vec::new(),
                    busiest_core_pct: None,
                    run_queue: 1,
                    mem_available_bytes: 1,
                    mem_total_bytes: 2,
                },
                net_scope: NetScope::Host,
                net: Vec::new(),
                tcp: TcpCounters::default(),
                monitor_cpu_ns: n,
            })
        }
    }

    struct Coordinator {
        tx: LinkTx<pb::CoordinatorMessage>,
        rx: LinkRx<pb::AgentMessage>,
        session: JoinHandle<Result<(), SessionError>>,
        taken: Arc<Mutex<u64>>,
    }

    fn session_with(rules: Rules, open: Open, taken: Arc<Mutex<u64>>) -> Coordinator {
        let (Link { tx, rx }, agent) = link::pair();
        let monitor = Arc::new(Monitor {
            name: Some("web1".into()),
            open,
        });
        let session = tokio::spawn(serve(
            monitor,
            Arc::new(rules),
            agent,
            "test".into(),
            CancellationToken::new(),
        ));
        Coordinator {
            tx,
            rx,
            session,
            taken,
        }
    }

    fn session(fail: fn(u64) -> bool) -> Coordinator {
        session_at(Rules::default(), fail)
    }

    /// A session with `rules` and the scripted sampler.
    fn session_at(rules: Rules, fail: fn(u64) -> bool) -> Coordinator {
        let taken = Arc::new(Mutex::new(0));
        let counter = taken.clone();
        let open: Open = Arc::new(move || {
            Ok(Box::new(Scripted {
                taken: counter.clone(),
                fail,
            }) as Box<dyn Sampler>)
        });
        session_with(rules, open, taken)
    }

    fn never(_: u64) -> bool {
        false
    }

    fn hello(token: &str) -> Down {
        Down::Hello(pb::Hello {
            protocol_version: PROTOCOL_VERSION,
            coordinator_version: "test".into(),
            token: token.into(),
            ..Default::default()
        })
    }

    impl Coordinator {
        async fn send(&self, kind: Down) {
            self.tx.send(proto::to_agent(kind)).await.unwrap();
        }

        async fn next(&mut self) -> Up {
            self.rx.recv().await.unwrap().kind.unwrap()
        }

        /// The next message that is neither a heartbeat's answer nor a sample.
        async fn answer(&mut self) -> Up {
            loop {
                match self.next().await {
                    Up::Pong(_) | Up::MonitorSample(_) => continue,
                    other => return other,
                }
            }
        }

        async fn refused(&mut self) -> String {
            match self.answer().await {
                Up::Refusal(r) => r.message,
                other => panic!("expected a refusal, read {other:?}"),
            }
        }

        async fn greet(&mut self) -> pb::HelloReply {
            self.send(hello("")).await;
            match self.answer().await {
                Up::HelloReply(r) => r,
                other => panic!("expected the hello reply, read {other:?}"),
            }
        }

        /// The next sample, and when it came; heartbeats' answers are skipped.
        async fn sample(&mut self) -> (Instant, pb::MonitorSample) {
            loop {
                match self.next().await {
                    Up::Pong(_) => continue,
                    Up::MonitorSample(s) => return (Instant::now(), s),
                    other => panic!("expected a sample, read {other:?}"),
                }
            }
        }

        fn heartbeat(&self) -> JoinHandle<()> {
            let tx = self.tx.clone();
            tokio::spawn(async move {
                for id in 0.. {
                    let ping = proto::to_agent(Down::Ping(pb::Ping { id }));
                    if tx.send(ping).await.is_err() {
                        return;
                    }
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
            })
        }

        async fn ended(mut self) -> Result<(), SessionError> {
            while self.rx.recv().await.is_ok() {}
            self.session.await.unwrap()
        }
    }

    #[tokio::test(start_paused = true)]
    async fn the_hello_says_monitor_and_a_sample_follows_every_second() {
        let mut c = session(never);
        let _beat = c.heartbeat();
        let greeted = Instant::now();
        let reply = c.greet().await;
        assert_eq!(reply.role, pb::Role::Monitor as i32);
        assert_eq!(reply.capabilities.unwrap().threads, 0);
        let info = MonitorInfo::try_from(reply.monitor.as_ref().unwrap()).unwrap();
        assert_eq!(
            (info.name.as_str(), info.watching.as_str()),
            ("web1", "pid 4242")
        );
        for n in 1..=5u64 {
            let (at, s) = c.sample().await;
            assert_eq!(at - greeted, SAMPLE_EVERY * (n as u32 - 1), "sample {n}");
            let s = Sample::try_from(&s).unwrap();
            assert_eq!((s.at_unix_ns, s.host.cpu.user_ns), (n as i64, n * 1_000));
        }
    }

    #[tokio::test(start_paused = true)]
    async fn nothing_is_sampled_before_the_hello() {
        let mut c = session(never);
        let _beat = c.heartbeat();
        tokio::time::sleep(Duration::from_secs(3)).await;
        assert_eq!(*c.taken.lock().unwrap(), 0);
        c.greet().await;
        c.sample().await;
    }

    #[tokio::test(start_paused = true)]
    async fn a_monitor_answered_pings_before_a_hello_and_waited_for_one_forever() {
        // As on the monitor's listener, where anyone may connect.
        let door = Rules {
            door: Some(control::listener::Admission::unlisted()),
            ..Rules::default()
        };
        let mut c = session_at(door, never);
        let _beat = c.heartbeat();
        let opened = Instant::now();
        // Nothing is answered, not even the heartbeats, and the stream closes at the hello deadline.
        let first = tokio::time::timeout(Duration::from_secs(60), c.rx.recv()).await;
        assert!(matches!(first, Ok(Err(_))), "{first:?}");
        assert_eq!(opened.elapsed(), HELLO_WITHIN);
        // A command before the hello is refused, and ends the stream too.
        let mut c = session(never);
        c.send(Down::Configure(pb::Configure::default())).await;
        assert_eq!(c.refused().await, "say hello first");
        assert!(matches!(c.ended().await, Err(SessionError::Auth(_))));
    }

    #[tokio::test(start_paused = true)]
    async fn every_load_command_is_refused_naming_the_role_and_sampling_goes_on() {
        let mut c = session(never);
        let _beat = c.heartbeat();
        c.greet().await;
        let load = [
            Down::Configure(pb::Configure::default()),
            Down::PrepareStep(pb::PrepareStep::default()),
            Down::StartStep(pb::StartStep::default()),
        ];
        for command in load {
            c.send(command).await;
            assert_eq!(c.refused().await, NO_LOAD);
        }
        // An abort has nothing to stop and is not answered; the next answer is the empty message's.
        c.send(Down::Abort(pb::Abort::default())).await;
        c.tx.send(pb::CoordinatorMessage { kind: None })
            .await
            .unwrap();
        assert_eq!(c.refused().await, "empty message");
        let (_, first) = c.sample().await;
        let (_, second) = c.sample().await;
        assert!(second.at_unix_nanos > first.at_unix_nanos);
        assert!(!c.session.is_finished());
    }

    #[tokio::test(start_paused = true)]
    async fn a_monitor_not_run_for_2s_while_pings_queue_in_its_link_is_not_ended() {
        // Regression, as for a load agent: a monitor back from a 2 s stop found its deadline passed
        // before its reader delivered the pings of the stop, and ended a live coordinator's session.
        let mut c = session(never);
        c.greet().await;
        // Stopped while it waits for the next second, as it is nearly all the time.
        c.sample().await;
        let stopped = Instant::now();
        tokio::time::advance(Duration::from_secs(2)).await;
        tokio::time::sleep(Duration::from_millis(1)).await;
        for id in 0..4 {
            let sent =
                c.tx.send(proto::to_agent(Down::Ping(pb::Ping { id })))
                    .await;
            assert!(
                sent.is_ok(),
                "the session ended: {:?}",
                (&mut c.session).await
            );
        }
        let _beat = c.heartbeat();
        while stopped.elapsed() < Duration::from_secs(6) {
            c.sample().await;
        }
        assert!(!c.session.is_finished(), "{:?}", c.session.await);
    }

    #[tokio::test(start_paused = true)]
    async fn the_session_ends_with_its_link_or_its_coordinators_silence() {
        let mut c = session(never);
        c.greet().await;
        let Coordinator {
            tx,
            rx,
            session: task,
            ..
        } = c;
        drop(tx);
        drop(rx);
        assert!(task.await.unwrap().is_ok(), "a link that ends is a goodbye");

        let mut c = session(never);
        c.greet().await;
        let greeted = Instant::now();
        assert!(matches!(
            c.ended().await,
            Err(SessionError::Silent(DEAD_MAN))
        ));
        assert_eq!(greeted.elapsed(), DEAD_MAN);

        let mut c = session(never);
        let _beat = c.heartbeat();
        c.greet().await;
        c.tx.clone()
            .close(Closed::Broken("message too large".into()))
            .await;
        match c.ended().await {
            Err(SessionError::Broken(words)) => assert_eq!(words, "message too large"),
            other => panic!("{other:?}"),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_failed_reading_is_skipped_and_the_next_second_is_sampled() {
        let mut c = session(|n| n == 2);
        let _beat = c.heartbeat();
        let greeted = Instant::now();
        c.greet().await;
        let (_, first) = c.sample().await;
        let (at, next) = c.sample().await;
        assert_eq!((first.at_unix_nanos, next.at_unix_nanos), (1, 3));
        assert_eq!(at - greeted, SAMPLE_EVERY * 2);
    }

    #[tokio::test(start_paused = true)]
    async fn the_door_is_a_load_agents_and_a_watch_it_cannot_open_is_refused_at_the_hello() {
        let rules = || Rules {
            token: Some("s3cret".into()),
            ..Rules::default()
        };
        let open_never: Open = Arc::new(|| panic!("opened before the token was checked"));
        let taken = Arc::new(Mutex::new(0));
        for (token, words) in [
            ("", "this agent requires a token"),
            ("guess", "the token does not match"),
        ] {
            let mut c = session_with(rules(), open_never.clone(), taken.clone());
            c.send(hello(token)).await;
            assert!(c.refused().await.starts_with(words));
            assert!(matches!(c.ended().await, Err(SessionError::Auth(_))));
        }
        let mut c = session_with(rules(), open_never.clone(), taken.clone());
        c.send(Down::Hello(pb::Hello {
            protocol_version: PROTOCOL_VERSION + 1,
            token: "s3cret".into(),
            ..Default::default()
        }))
        .await;
        assert!(c.refused().await.contains("protocol version"));

        let gone: Open = Arc::new(|| Err("no process has pid 4242: is it running?".into()));
        let mut c = session_with(rules(), gone, taken);
        c.send(hello("s3cret")).await;
        assert_eq!(
            c.refused().await,
            "this monitor cannot watch what it was started for: no process has pid 4242: is it running?"
        );
        assert!(matches!(c.ended().await, Err(SessionError::Watch(_))));
    }
}
