//! Whether this agent can carry a step: its worker threads' CPU (an open-model rate no thread could
//! dispatch), file descriptors (RLIMIT_NOFILE) and local ports (the ephemeral range × source addresses,
//! per destination, TIME_WAIT included). A step that certainly cannot be carried is refused before any
//! load, naming the numbers; one that only might not (if the target stalls, or TIME_WAIT carries over
//! from the step before, or the rate is near what a thread can do) is accepted with a warning.
//!
//! The agent checks when it prepares a step; the coordinator runs the same check on the capabilities
//! every agent announced in its hello, so a plan no agent could carry is refused before any load at all.
use std::time::Duration;

use shared::plan::{LoadModel, StepShare};
use shared::warning::{Warning, WarningKind};

use crate::system;

/// Descriptors kept for the process around the connections: the control connection, the coordinator's
/// files when the agent is embedded (run.json and report.html rewritten, steps.tsv, a step's spill and
/// hlog, the .hgrm), a monitor's /proc readings, stdio. About 25 are open in such a coordinator.
pub const FD_RESERVE: u64 = 100;
/// And per worker thread, open before its first connection: its runtime's two epoll instances, its
/// eventfd and signal socket, the open loop's timerfd (5 measured per thread, at 2 to 64 threads).
pub const FD_PER_THREAD: u64 = 5;

/// Descriptors kept back from `fd_limit` in a process of `threads` worker threads: [`FD_RESERVE`]
/// and [`FD_PER_THREAD`] each, or a quarter of a limit too small for that.
pub fn reserved_fds(fd_limit: u64, threads: u64) -> u64 {
    FD_RESERVE
        .saturating_add(FD_PER_THREAD.saturating_mul(threads))
        .min(fd_limit / 4)
}

/// Descriptors the worker threads' connections may use: the limit minus [`reserved_fds`]. The
/// engine holds its threads to it at run time (`socket::hold`), so the check and the load agree.
pub fn usable_fds(fd_limit: u64, threads: u64) -> u64 {
    fd_limit - reserved_fds(fd_limit, threads)
}

/// How long a closed connection's local port stays in TIME_WAIT on Linux (TCP_TIMEWAIT_LEN, fixed).
pub const TIME_WAIT: Duration = Duration::from_secs(60);
/// With tcp_tw_reuse (and TCP timestamps, on by default) connect() may take a TIME_WAIT port once its
/// last timestamp is a second old.
const TW_REUSE_AFTER: Duration = Duration::from_secs(1);

/// The least of a worker thread's CPU a new connection can cost: socket, connect, write, read and close
/// are five system calls, and the handshake's kernel work runs on the thread's core too. Nothing
/// measured comes near: about 80 µs per connection here (12,500 per CPU-second, docs/benchmarks.md),
/// wrk's about 50 µs. So a rate over this floor is certainly not dispatched, whatever the machine.
const CONNECTION_FLOOR: Duration = Duration::from_nanos(1_000);
/// The least a request on an open connection can cost: a write and a read system call. Measured:
/// about 8.6 µs (116,000 per CPU-second).
const REQUEST_FLOOR: Duration = Duration::from_nanos(200);
/// Costs five times below the ones measured here, on a faster machine: a rate over what they allow
/// is warned about (the generator will likely fall behind; its verdict will then say so).
const CONNECTION_LIKELY: Duration = Duration::from_micros(16);
const REQUEST_LIKELY: Duration = Duration::from_nanos(1_700);

/// net.ipv4.tcp_tw_reuse: may a new outgoing connection take a port still in TIME_WAIT?
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TwReuse {
    Off,
    On,
    /// 2, the kernel's default: only for connections with a loopback source or destination.
    LoopbackOnly,
}

impl TwReuse {
    pub fn from_sysctl(v: u32) -> Option<TwReuse> {
        match v {
            0 => Some(TwReuse::Off),
            1 => Some(TwReuse::On),
            2 => Some(TwReuse::LoopbackOnly),
            _ => None,
        }
    }

    pub fn sysctl(self) -> u32 {
        match self {
            TwReuse::Off => 0,
            TwReuse::On => 1,
            TwReuse::LoopbackOnly => 2,
        }
    }

    /// Unknown loopback-ness (`None`) is taken as the friendlier case: only the agent, which has
    /// resolved the target, may refuse on it.
    fn applies(self, loopback: Option<bool>) -> bool {
        match self {
            TwReuse::Off => false,
            TwReuse::On => true,
            TwReuse::LoopbackOnly => loopback.unwrap_or(true),
        }
    }
}

/// The socket limits of one agent's machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MachineLimits {
    /// RLIMIT_NOFILE's soft limit, after the agent raised it to the hard limit.
    pub fd_limit: u64,
    /// net.ipv4.ip_local_port_range, both ends included.
    pub port_range: (u32, u32),
    pub tw_reuse: TwReuse,
    /// Worker threads that can run at once: the agent's threads, at most its cores (each thread at
    /// most a core). 0 when not known, and then the CPU is not checked.
    pub workers: u32,
    /// The agent's worker threads, each holding descriptors of its own (see [`reserved_fds`]).
    pub threads: u32,
}

/// How the agent reaches the target, as far as its sockets are concerned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    pub timeout: Duration,
    pub connect_timeout: Duration,
    /// `--source-addrs` listed; 0 means the kernel's one choice.
    pub sources: usize,
    /// Whether the target is on loopback (where tcp_tw_reuse = 2 applies); `None` when not known yet
    /// (the coordinator does not resolve host names).
    pub loopback: Option<bool>,
    /// The server closes each connection of the connections model first (its last request says
    /// `Connection: close`), so the TIME_WAIT is the server's and the ports are free again at once.
    pub server_closes: bool,
}

impl MachineLimits {
    /// This machine's limits, for an agent of `threads` worker threads.
    pub fn of_this_machine(threads: usize) -> MachineLimits {
        MachineLimits {
            workers: threads.min(system::cores()) as u32,
            threads: threads as u32,
            fd_limit: system::raise_fd_limit(),
            port_range: system::port_range(),
            // Unreadable: assume the kernel's default.
            tw_reuse: system::tcp_tw_reuse()
                .and_then(TwReuse::from_sysctl)
                .unwrap_or(TwReuse::LoopbackOnly),
        }
    }

    /// What an agent announced in its hello, or `None` if it did not say (an fd limit of 0).
    pub fn from_capabilities(c: &proto::pb::Capabilities) -> Option<MachineLimits> {
        if c.fd_limit == 0 || c.port_range_low == 0 || c.port_range_low > c.port_range_high {
            return None;
        }
        Some(MachineLimits {
            fd_limit: c.fd_limit,
            port_range: (c.port_range_low, c.port_range_high),
            // An agent that did not say is given the benefit of the doubt; it checks again itself.
            tw_reuse: c
                .tcp_tw_reuse
                .and_then(TwReuse::from_sysctl)
                .unwrap_or(TwReuse::On),
            workers: c.threads.min(c.cores),
            threads: c.threads,
        })
    }

    /// Descriptors kept back: see [`reserved_fds`].
    pub fn reserved_fds(&self) -> u64 {
        reserved_fds(self.fd_limit, u64::from(self.threads))
    }

    /// Connections this agent can hold open at once, as far as descriptors go: see [`usable_fds`].
    pub fn usable_fds(&self) -> u64 {
        usable_fds(self.fd_limit, u64::from(self.threads))
    }

    /// Local ports for connections to one destination: the ephemeral range once per source address.
    pub fn ports(&self, sources: usize) -> u64 {
        let (lo, hi) = self.port_range;
        u64::from(hi.saturating_sub(lo) + 1) * sources.max(1) as u64
    }

    fn fds_text(&self) -> String {
        format!(
            "RLIMIT_NOFILE {} minus {} reserved",
            self.fd_limit,
            self.reserved_fds()
        )
    }

    fn ports_text(&self, sources: usize) -> String {
        let n = sources.max(1);
        format!(
            "ip_local_port_range {}-{} × {n} source address{}",
            self.port_range.0,
            self.port_range.1,
            if n == 1 { "" } else { "es" }
        )
    }

    /// Checks one step share: `Err` with the numbers when the step certainly cannot be carried, else
    /// the warnings (possibly none) for what might not be.
    pub fn check_step(&self, share: &StepShare, route: &Route) -> Result<Vec<Warning>, String> {
        let rate = arrival_rate(share);
        let c = Step {
            n: share.step() + 1,
            share,
            route,
            rate,
            // The longest a connection lives when the target stops answering: a connect that times
            // out, or a connect and a first request that times out (after which it is closed).
            life: route.connect_timeout + route.timeout,
            fds: self.usable_fds(),
            ports: self.ports(route.sources),
        };
        let mut warnings = Vec::new();
        if let Some(refusal) = self.check_dispatch(share, rate, &mut warnings) {
            return Err(refusal);
        }
        match share.model() {
            LoadModel::Concurrency => self.check_held(&c)?,
            LoadModel::Requests => self.check_pool(&c, &mut warnings),
            LoadModel::Connections => self.check_opened(&c, &mut warnings)?,
        }
        Ok(warnings)
    }

    /// The concurrency model: every connection is opened at the start and held, no doubt about it.
    fn check_held(&self, c: &Step<'_>) -> Result<(), String> {
        let (n, fds, ports) = (c.n, c.fds, c.ports);
        let need = u64::from(c.share.connections());
        if need > fds {
            return Err(format!(
                "step {n} needs {need} concurrent connections but this agent can open {fds} ({}); {FD_ADVICE}",
                self.fds_text()
            ));
        }
        if need > ports {
            return Err(format!(
                "step {n} needs {need} concurrent connections to one destination but this agent has {ports} local ports for it ({}); {PORT_ADVICE}",
                self.ports_text(c.route.sources)
            ));
        }
        Ok(())
    }

    /// The requests model: the pool only grows while arrivals find every connection busy: to its cap
    /// if the target stalls, never past the requests that can be in flight.
    fn check_pool(&self, c: &Step<'_>, warnings: &mut Vec<Warning>) {
        let (n, fds, ports, rate, life) = (c.n, c.fds, c.ports, c.rate, c.life);
        // The pool only grows while arrivals find every connection busy: to its cap if the
        // target stalls, never past the requests that can be in flight.
        let cap = u64::from(c.share.max_connections().get());
        let worst = cap.min(ceil(rate * life.as_secs_f64()));
        let why = format!(
            "if the target stops answering ({} requests/s × {} s of connect timeout plus timeout, at most --max-connections {cap})",
            num(rate),
            num(life.as_secs_f64())
        );
        if worst > fds {
            warnings.push(Warning::new(WarningKind::FdUnavailable, format!(
                "step {n} may need up to {worst} concurrent connections {why}, more than the {fds} this agent can open ({}); the rest would fail as fd-unavailable",
                self.fds_text()
            )));
        }
        if worst > ports {
            warnings.push(Warning::new(WarningKind::AddrUnavailable, format!(
                "step {n} may need up to {worst} concurrent connections to one destination {why}, more than the {ports} local ports this agent has ({}); the rest would fail as addr-unavailable",
                self.ports_text(c.route.sources)
            )));
        }
    }

    /// The connections model: a connection per arrival, closed after its calls; when the client
    /// closes first, its port stays in TIME_WAIT on this side.
    fn check_opened(&self, c: &Step<'_>, warnings: &mut Vec<Warning>) -> Result<(), String> {
        let (n, fds, ports, rate, life, route) = (c.n, c.fds, c.ports, c.rate, c.life, c.route);
        let worst = ceil(rate * life.as_secs_f64());
        let why = format!(
            "if the target stops answering ({} connections/s × {} s of connect timeout plus timeout)",
            num(rate),
            num(life.as_secs_f64())
        );
        if worst > fds {
            warnings.push(Warning::new(WarningKind::FdUnavailable, format!(
                "step {n} may hold up to {worst} connections open {why}, more than the {fds} this agent can open ({}); the rest would fail as fd-unavailable",
                self.fds_text()
            )));
        }
        if route.server_closes {
            if worst > ports {
                warnings.push(Warning::new(WarningKind::AddrUnavailable, format!(
                    "step {n} may hold up to {worst} connections to one destination open {why}, more than the {ports} local ports this agent has ({}); the rest would fail as addr-unavailable: {PORT_ADVICE}",
                    self.ports_text(route.sources)
                )));
            }
            return Ok(());
        }
        // The client closes each connection first (the user's own Connection header said
        // so), so its port stays in TIME_WAIT on this side unless tcp_tw_reuse lets
        // connect() take it back.
        let reuse = self.tw_reuse.applies(route.loopback);
        let hold = if reuse { TW_REUSE_AFTER } else { TIME_WAIT };
        let sysctl = format!("net.ipv4.tcp_tw_reuse is {}", self.tw_reuse.sysctl());
        let within = c.share.scheduled_duration().min(hold);
        let certain = ceil(rate * within.as_secs_f64());
        if certain > ports {
            return Err(format!(
                "step {n} opens {} connections/s on this agent and each closed one keeps its local port for {} s ({}; {sysctl}), so within {} s it needs {certain} local ports to one destination but has {ports} ({}); add --source-addrs, {}use keep-alive (--num-call, or the requests model), or add agents",
                num(rate),
                num(hold.as_secs_f64()),
                if reuse {
                    "until tcp_tw_reuse may take it back"
                } else {
                    "TIME_WAIT"
                },
                num(within.as_secs_f64()),
                self.ports_text(route.sources),
                if reuse {
                    ""
                } else {
                    "set net.ipv4.tcp_tw_reuse=1, "
                },
            ));
        }
        // A step longer than the hold, or ports still held from the step before (steps follow
        // each other without a pause), with the target stalled on top.
        let risky = ceil(rate * hold.as_secs_f64()) + worst;
        if risky > ports {
            warnings.push(Warning::new(WarningKind::AddrUnavailable, format!(
                "step {n} may need {risky} local ports to one destination: {} for the connections closed in the last {} s ({}; {sysctl}), the step before's included, plus {worst} open if the target stops answering; this agent has {ports} ({}), and connections past them would fail as addr-unavailable: {PORT_ADVICE}",
                risky - worst,
                num(hold.as_secs_f64()),
                if reuse { "until tcp_tw_reuse may take them back" } else { "TIME_WAIT" },
                self.ports_text(route.sources)
            )));
        }
        Ok(())
    }
}

const FD_ADVICE: &str = "raise ulimit -n or add agents";
const PORT_ADVICE: &str = "add --source-addrs, widen net.ipv4.ip_local_port_range, or add agents";

/// One step as the capacity checks see it.
struct Step<'a> {
    /// Counted from 1, as people read it.
    n: u32,
    share: &'a StepShare,
    route: &'a Route,
    /// Arrivals per second on this agent.
    rate: f64,
    life: Duration,
    fds: u64,
    ports: u64,
}

impl MachineLimits {
    /// Whether the worker threads can dispatch an open model's rate at all: `Some` refusal when even
    /// the floor costs need more CPU than the threads have; a warning when likely costs do.
    fn check_dispatch(
        &self,
        share: &StepShare,
        rate: f64,
        warnings: &mut Vec<Warning>,
    ) -> Option<String> {
        let (what, per_arrival, floor, likely) = match share.model() {
            LoadModel::Concurrency => return None,
            LoadModel::Connections => {
                let calls = f64::from(share.num_call().get());
                (
                    "new connections/s",
                    format!(
                        "a connection and {} request{}",
                        num(calls),
                        if calls == 1.0 { "" } else { "s" }
                    ),
                    CONNECTION_FLOOR.as_secs_f64() + calls * REQUEST_FLOOR.as_secs_f64(),
                    CONNECTION_LIKELY.as_secs_f64() + calls * REQUEST_LIKELY.as_secs_f64(),
                )
            }
            LoadModel::Requests => (
                "requests/s",
                "a request".to_string(),
                REQUEST_FLOOR.as_secs_f64(),
                REQUEST_LIKELY.as_secs_f64(),
            ),
        };
        if self.workers == 0 {
            return None;
        }
        let n = share.step() + 1;
        let workers = f64::from(self.workers);
        let threads = format!(
            "{} worker thread{}",
            self.workers,
            if self.workers == 1 { "" } else { "s" }
        );
        let most = (workers / floor).floor();
        if rate > most {
            return Some(format!(
                "step {n} needs {} {what} from this agent but its {threads} can dispatch at most {} (each takes at least {} µs of a thread's CPU for {per_arrival}; it was measured at tens of times that); lower the rate (a typo?) or add agents",
                num(rate),
                num(most),
                num(floor * 1e6),
            ));
        }
        let likely_most = (workers / likely).floor();
        if rate > likely_most {
            warnings.push(Warning::new(WarningKind::Dispatch, format!(
                "step {n} needs {} {what} from this agent, more than its {threads} will likely dispatch ({} at {} µs of a thread's CPU for {per_arrival}, five times faster than measured); it may fall behind its schedule",
                num(rate),
                num(likely_most),
                num(likely * 1e6),
            )));
        }
        None
    }
}

/// Arrivals per second this agent's share sends: new connections (connections model) or requests
/// (requests model); 0 for the closed model.
pub fn arrival_rate(share: &StepShare) -> f64 {
    let fraction = share.slice().fraction();
    match share.model() {
        LoadModel::Connections | LoadModel::Requests => share.rate() * fraction,
        LoadModel::Concurrency => 0.0,
    }
}

fn ceil(v: f64) -> u64 {
    // Rates are at most 1e9/s and steps at most 24 h, so this never saturates in practice.
    v.ceil() as u64
}

/// A number as people write it: 5, 0.5, 1234.
fn num(v: f64) -> String {
    if v.fract() == 0.0 || v >= 100.0 {
        format!("{v:.0}")
    } else {
        format!("{}", (v * 100.0).round() / 100.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shared::plan::{Arrival, Slice, StepLimit};

    fn share(model: LoadModel, rate: f64, connections: u32, max: u32, secs: u64) -> StepShare {
        share_of(model, rate, connections, max, secs, 1, Slice::WHOLE)
    }

    fn share_of(
        model: LoadModel,
        rate: f64,
        connections: u32,
        max: u32,
        secs: u64,
        num_call: u32,
        slice: Slice,
    ) -> StepShare {
        let limit = StepLimit::Duration(Duration::from_secs(secs));
        StepShare::try_new(
            2,
            model,
            rate,
            slice,
            connections,
            num_call,
            max,
            limit,
            Arrival::Uniform,
            0,
        )
        .unwrap()
    }

    fn cap(fd_limit: u64, tw_reuse: TwReuse) -> MachineLimits {
        MachineLimits {
            fd_limit,
            port_range: (32768, 60999),
            tw_reuse,
            workers: 2,
            threads: 2,
        }
    }

    fn route(sources: usize, loopback: Option<bool>) -> Route {
        Route {
            timeout: Duration::from_secs(5),
            connect_timeout: Duration::from_secs(5),
            sources,
            loopback,
            // As with a user's own `Connection: keep-alive`: the client closes, TIME_WAIT is ours.
            server_closes: false,
        }
    }

    #[test]
    fn reserve_and_ports_arithmetic() {
        let c = cap(65536, TwReuse::Off);
        // 100 for the process, 5 for each of the 2 worker threads.
        assert_eq!((c.reserved_fds(), c.usable_fds()), (110, 65426));
        // A 64-core machine's default 64 threads hold 320 of their own before any connection.
        let many = MachineLimits {
            threads: 64,
            ..c.clone()
        };
        assert_eq!(many.reserved_fds(), 420);
        // A small limit keeps a quarter back, not more than it has.
        assert_eq!(cap(256, TwReuse::Off).usable_fds(), 192);
        assert_eq!(cap(64, TwReuse::Off).usable_fds(), 48);
        assert_eq!(c.ports(0), 28232);
        assert_eq!(c.ports(1), 28232);
        assert_eq!(c.ports(3), 84696);
    }

    #[test]
    fn concurrency_over_the_fd_limit_is_refused_with_the_numbers() {
        let e = cap(65536, TwReuse::Off)
            .check_step(
                &share(LoadModel::Concurrency, 0.0, 70000, 1, 10),
                &route(3, Some(true)),
            )
            .unwrap_err();
        assert_eq!(
            e,
            "step 3 needs 70000 concurrent connections but this agent can open 65426 (RLIMIT_NOFILE 65536 minus 110 reserved); raise ulimit -n or add agents"
        );
        // Exactly the usable count is carried.
        assert_eq!(
            cap(65536, TwReuse::Off).check_step(
                &share(LoadModel::Concurrency, 0.0, 65426, 1, 10),
                &route(3, Some(true))
            ),
            Ok(vec![])
        );
    }

    #[test]
    fn concurrency_over_the_port_range_needs_more_source_addresses() {
        let c = cap(1_000_000, TwReuse::LoopbackOnly);
        let s = share(LoadModel::Concurrency, 0.0, 30000, 1, 10);
        let e = c.check_step(&s, &route(0, Some(true))).unwrap_err();
        assert_eq!(
            e,
            "step 3 needs 30000 concurrent connections to one destination but this agent has 28232 local ports for it (ip_local_port_range 32768-60999 × 1 source address); add --source-addrs, widen net.ipv4.ip_local_port_range, or add agents"
        );
        // Two source addresses double the ports.
        assert_eq!(c.check_step(&s, &route(2, Some(true))), Ok(vec![]));
    }

    #[test]
    fn no_time_wait_when_the_server_closes_first() {
        // The default: the last request says Connection: close, so 3000 conn/s for 10 s leave no
        // ports behind; only a stalled target (30000 open) is a risk.
        let s = share(LoadModel::Connections, 3000.0, 0, 1, 10);
        let off = cap(1_000_000, TwReuse::Off);
        let closes = Route {
            server_closes: true,
            ..route(1, Some(false))
        };
        let w = off.check_step(&s, &closes).unwrap();
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].text.starts_with("step 3 may hold up to 30000 connections to one destination open if the target stops answering"), "{w:?}");
        let calm = share(LoadModel::Connections, 100.0, 0, 1, 10);
        assert_eq!(off.check_step(&calm, &closes), Ok(vec![]));
    }

    #[test]
    fn time_wait_refuses_a_connection_rate_the_ports_cannot_carry() {
        // 3000 conn/s for 10 s, no reuse: 30000 ports in TIME_WAIT before the step ends.
        let s = share(LoadModel::Connections, 3000.0, 0, 1, 10);
        let off = cap(1_000_000, TwReuse::Off);
        let e = off.check_step(&s, &route(1, Some(false))).unwrap_err();
        assert!(e.starts_with("step 3 opens 3000 connections/s on this agent and each closed one keeps its local port for 60 s (TIME_WAIT; net.ipv4.tcp_tw_reuse is 0), so within 10 s it needs 30000 local ports to one destination but has 28232 (ip_local_port_range 32768-60999 × 1 source address); add --source-addrs, set net.ipv4.tcp_tw_reuse=1,"), "{e}");
        // Two sources carry the step, but a longer one (or the next) would not: a warning.
        let w = off.check_step(&s, &route(2, Some(false))).unwrap();
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].text.contains("may need 210000 local ports"), "{w:?}");
        assert_eq!(w[0].kind, WarningKind::AddrUnavailable);
        // The default (2) reuses TIME_WAIT ports on loopback only.
        let lo = cap(1_000_000, TwReuse::LoopbackOnly);
        let w = lo.check_step(&s, &route(1, Some(true))).unwrap();
        // Still a risk: 3000 conn/s into a stalled target hold 30000 ports open.
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].text.starts_with("step 3 may need 33000 local ports to one destination: 3000 for the connections closed in the last 1 s (until tcp_tw_reuse may take them back; net.ipv4.tcp_tw_reuse is 2), the step before's included, plus 30000 open if the target stops answering; this agent has 28232"), "{w:?}");
        assert!(lo.check_step(&s, &route(1, Some(false))).is_err());
        // Not knowing (a coordinator before resolution) is not a reason to refuse.
        assert!(lo.check_step(&s, &route(1, None)).is_ok());
        // A short step is judged on its own length.
        let short = share(LoadModel::Connections, 3000.0, 0, 1, 5);
        let w = off.check_step(&short, &route(1, Some(false))).unwrap();
        assert!(w[0].text.contains("may need 210000 local ports"), "{w:?}");
    }

    #[test]
    fn a_stalled_target_is_a_risk_not_a_refusal() {
        let c = cap(1024, TwReuse::On);
        // 200 conn/s × 10 s of timeouts = 2000 open connections if the target stops answering.
        let w = c
            .check_step(
                &share(LoadModel::Connections, 200.0, 0, 1, 10),
                &route(1, Some(true)),
            )
            .unwrap();
        assert_eq!(w.len(), 1, "{w:?}");
        assert_eq!(w[0].kind, WarningKind::FdUnavailable);
        assert_eq!(
            w[0].text,
            "step 3 may hold up to 2000 connections open if the target stops answering (200 connections/s × 10 s of connect timeout plus timeout), more than the 914 this agent can open (RLIMIT_NOFILE 1024 minus 110 reserved); the rest would fail as fd-unavailable"
        );
        // The requests model's pool is capped by --max-connections.
        let s = share(LoadModel::Requests, 200.0, 0, 900, 10);
        assert_eq!(c.check_step(&s, &route(1, Some(true))), Ok(vec![]));
        let s = share(LoadModel::Requests, 200.0, 0, 5000, 10);
        let w = c.check_step(&s, &route(1, Some(true))).unwrap();
        assert!(w[0].text.starts_with("step 3 may need up to 2000 concurrent connections if the target stops answering (200 requests/s × 10 s of connect timeout plus timeout, at most --max-connections 5000)"), "{w:?}");
        // A slow rate is no risk at all.
        let s = share(LoadModel::Connections, 10.0, 0, 1, 10);
        assert_eq!(
            cap(65536, TwReuse::Off).check_step(&s, &route(1, Some(false))),
            Ok(vec![])
        );
    }

    #[test]
    fn a_rate_no_worker_thread_could_dispatch_is_refused_before_any_load() {
        // `--steps 100000000`, a typo: 100 million new connections a second on two threads.
        let c = cap(1_000_000, TwReuse::LoopbackOnly);
        let closes = Route {
            server_closes: true,
            ..route(1, Some(true))
        };
        let typo = share(LoadModel::Connections, 1e8, 0, 1, 10);
        assert_eq!(
            c.check_step(&typo, &closes).unwrap_err(),
            "step 3 needs 100000000 new connections/s from this agent but its 2 worker threads can dispatch at most 1666666 (each takes at least 1.2 µs of a thread's CPU for a connection and 1 request; it was measured at tens of times that); lower the rate (a typo?) or add agents"
        );
        // Keep-alive calls cost less than connections; requests less still.
        let calls = share_of(
            LoadModel::Connections,
            700_000.0,
            0,
            1,
            10,
            10,
            Slice::WHOLE,
        );
        assert!(c.check_step(&calls, &closes).unwrap_err().contains("at most 666666 (each takes at least 3 µs of a thread's CPU for a connection and 10 requests"));
        let requests = share(LoadModel::Requests, 2e7, 0, 100, 10);
        assert!(c.check_step(&requests, &closes).unwrap_err().starts_with("step 3 needs 20000000 requests/s from this agent but its 2 worker threads can dispatch at most 10000000"));
        // Just under the floor runs, with a warning: it is far above what a thread was measured doing.
        let near = share(LoadModel::Requests, 1e7, 0, 100, 10);
        let w = c.check_step(&near, &closes).unwrap();
        assert_eq!(
            w.iter().map(|w| w.kind).collect::<Vec<_>>(),
            [WarningKind::Dispatch]
        );
        assert_eq!(
            w.iter().map(|w| w.text.as_str()).collect::<Vec<_>>(),
            [
                "step 3 needs 10000000 requests/s from this agent, more than its 2 worker threads will likely dispatch (1176470 at 1.7 µs of a thread's CPU for a request, five times faster than measured); it may fall behind its schedule"
            ]
        );
        // An ordinary rate is neither; nor is any rate when the threads are not known.
        let ordinary = share(LoadModel::Connections, 2_000.0, 0, 1, 10);
        assert_eq!(c.check_step(&ordinary, &closes), Ok(vec![]));
        let unknown = MachineLimits { workers: 0, ..c };
        assert!(unknown.check_step(&typo, &closes).is_ok());
    }

    #[test]
    fn an_agent_share_counts_only_its_slices() {
        let half = Slice::among(&[1, 1])[0].clone();
        let s = share_of(LoadModel::Connections, 1000.0, 0, 1, 10, 1, half);
        assert_eq!(arrival_rate(&s), 500.0);
    }

    #[test]
    fn capabilities_convert_and_unknown_ones_are_skipped() {
        let mut caps = proto::pb::Capabilities {
            fd_limit: 256,
            port_range_low: 32768,
            port_range_high: 60999,
            tcp_tw_reuse: Some(0),
            cores: 2,
            threads: 2,
            ..Default::default()
        };
        assert_eq!(
            MachineLimits::from_capabilities(&caps),
            Some(cap(256, TwReuse::Off))
        );
        caps.tcp_tw_reuse = None;
        assert_eq!(
            MachineLimits::from_capabilities(&caps).unwrap().tw_reuse,
            TwReuse::On
        );
        caps.fd_limit = 0;
        assert_eq!(MachineLimits::from_capabilities(&caps), None);
        let this = MachineLimits::of_this_machine(1);
        assert!(this.fd_limit >= 256 && this.ports(1) > 0, "{this:?}");
        assert_eq!(this.workers, 1);
        caps.fd_limit = 256;
        caps.threads = 8;
        assert_eq!(MachineLimits::from_capabilities(&caps).unwrap().workers, 2);
    }
}
