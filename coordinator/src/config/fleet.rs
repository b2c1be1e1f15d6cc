//! The fleet of a run: the agents (dialed, joining, weighted), the token and TLS they are met with,
//! and the server monitors, dialed, joining or in-process, each paired with its target (`pairing`).
pub mod pairing;

use std::path::{Path, PathBuf};
use std::time::Duration;

use shared::plan::PlanError;

use super::{ConfigError, RunConfig, Settings, parse_duration, read_file};
use crate::cli::RunArgs;

/// Where the agents are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AgentSpec {
    /// `host:port`: one agent.
    Addr(String),
    /// `dns://name:port`: one agent per A/AAAA record.
    Dns(String),
}

/// Parses `--agents`: a comma list, `@file` (one per line, `#` comments), or `dns://name:port` entries.
pub fn parse_agents(arg: &str) -> Result<Vec<AgentSpec>, ConfigError> {
    parse_peers("--agents", arg)
}

/// Parses a list of peers given as `flag` (`--agents`, `--monitors`): the same grammar for both.
fn parse_peers(flag: &str, arg: &str) -> Result<Vec<AgentSpec>, ConfigError> {
    let what = flag.trim_start_matches('-');
    let file = if flag == "--monitors" {
        "monitors file"
    } else {
        "agents file"
    };
    let text = match arg.strip_prefix('@') {
        Some(path) => String::from_utf8(read_file(file, Path::new(path))?)
            .map_err(|_| ConfigError::File(format!("{what} file {path} is not UTF-8 text")))?,
        None => arg.replace(',', "\n"),
    };
    let mut out = Vec::new();
    let mut seen: Vec<(usize, String)> = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let bad = |why: &str| ConfigError::Peers(format!("{flag} entry {} '{line}': {why}", i + 1));
        let (spec, hostport) = match line.strip_prefix("dns://") {
            Some(rest) => (AgentSpec::Dns(rest.to_string()), rest),
            None if line.contains("://") => return Err(bad("use host:port or dns://name:port")),
            None => (AgentSpec::Addr(line.to_string()), line),
        };
        let (host, port) = hostport
            .rsplit_once(':')
            .ok_or_else(|| bad("it lacks a :port"))?;
        if host.is_empty() || port.parse::<u16>().map_or(true, |p| p == 0) {
            return Err(bad("expected host:port with a port from 1 to 65535"));
        }
        // Dialed twice, one agent would refuse the second session as another coordinator's.
        if let Some((first, _)) = seen.iter().find(|(_, l)| l.eq_ignore_ascii_case(line)) {
            return Err(ConfigError::Peers(format!(
                "{flag} names {line} twice (entries {first} and {}): list each {} once",
                i + 1,
                &what[..what.len() - 1]
            )));
        }
        seen.push((i + 1, line.to_string()));
        out.push(spec);
    }
    if out.is_empty() {
        return Err(ConfigError::Peers(format!(
            "{flag} names no {}",
            &what[..what.len() - 1]
        )));
    }
    Ok(out)
}

/// Agents that dial in (`stampede-agent --join`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinSpec {
    pub listen: std::net::SocketAddr,
    /// Load agents to join, and monitors beside them.
    pub expect: usize,
    pub monitors: usize,
    pub wait: Duration,
    /// Where to say the join port is bound (`--ready-file`).
    pub ready_file: Option<PathBuf>,
}

/// `--agents` with `--expect-agents N`: look the agents up again (a `dns://` name's records grow as a
/// fleet starts) and dial them until N answer, within `wait`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DialWait {
    pub expect: usize,
    pub wait: Duration,
}

/// The fleet's part of one target's configuration: where the agents and monitors are, how they are
/// met (token, TLS) and weighed.
pub struct Fleet {
    pub agents: Vec<AgentSpec>,
    pub token: Option<String>,
    pub tls: Option<control::mtls::TlsFiles>,
    pub join: Option<JoinSpec>,
    pub monitors: Vec<AgentSpec>,
    pub monitor: Option<monitor::Watch>,
    pub paired: Vec<pairing::Paired>,
    pub dial_wait: Option<DialWait>,
    pub agent_weights: Option<Vec<(String, u64)>>,
}

impl Fleet {
    /// The fleet `s` asks for, each part checked in turn (the first refusal is the one said).
    pub fn of(s: &Settings) -> Result<Fleet, ConfigError> {
        let args = &s.given;
        let agents = match &args.agents {
            Some(a) => parse_agents(a)?,
            None => Vec::new(),
        };
        let token = token(args)?;
        let tls = control::mtls::TlsFiles::from_flags(
            args.tls_cert.clone(),
            args.tls_key.clone(),
            args.tls_ca.clone(),
        )
        .map_err(|e| ConfigError::Conflict(e.to_string()))?;
        let join = join(s, token.as_deref(), tls.as_ref())?;
        let monitors = match &args.monitors {
            Some(m) => parse_peers("--monitors", m)?,
            None => Vec::new(),
        };
        let monitor = embedded_monitor(args)?;
        let paired = args
            .monitor_target
            .iter()
            .map(|t| pairing::parse(t).map_err(|e| ConfigError::Value(e.to_string())))
            .collect::<Result<Vec<_>, _>>()?;
        let dial_wait = dial_wait(s)?;
        let agent_weights = weights(args, &agents)?;
        Ok(Fleet {
            agents,
            token,
            tls,
            join,
            monitors,
            monitor,
            paired,
            dial_wait,
            agent_weights,
        })
    }
}

/// The token to present to agents: --token-file's first line, else STAMPEDE_TOKEN.
fn token(args: &RunArgs) -> Result<Option<String>, ConfigError> {
    Ok(match &args.token_file {
        Some(path) => {
            let raw = read_file("token file", path)?;
            let t = String::from_utf8(raw)
                .map_err(|_| {
                    ConfigError::File(format!("token file {} is not UTF-8 text", path.display()))
                })?
                .trim()
                .to_string();
            if t.is_empty() {
                return Err(ConfigError::File(format!(
                    "token file {} is empty",
                    path.display()
                )));
            }
            Some(t)
        }
        None => std::env::var("STAMPEDE_TOKEN")
            .ok()
            .filter(|t| !t.trim().is_empty())
            .map(|t| t.trim().to_string()),
    })
}

/// `--listen` + `--expect-agents` and/or `--expect-monitors`: accepting agents and monitors that
/// join (monitors alone: the embedded agent sends the load), refused beyond loopback unless
/// authenticated and encrypted.
fn join(
    s: &Settings,
    token: Option<&str>,
    tls: Option<&control::mtls::TlsFiles>,
) -> Result<Option<JoinSpec>, ConfigError> {
    let args = &s.given;
    let monitors = args.expect_monitors.unwrap_or(0);
    let agents = match args.expect_agents {
        None if args.listen.is_some() && monitors > 0 => Some(0),
        None if args.listen.is_some() => {
            return Err(ConfigError::Conflict(
                "--listen needs --expect-agents N (agents that join) or --expect-monitors N (monitors that join, beside the embedded agent)".into(),
            ));
        }
        given => given,
    };
    Ok(match (args.listen, agents) {
        (Some(listen), Some(expect)) => {
            if expect == 0 && args.expect_agents.is_some() {
                return Err(PlanError::NotPositive {
                    what: "--expect-agents",
                    value: "0".into(),
                }
                .into());
            }
            if !listen.ip().is_loopback() && token.is_none() {
                return Err(ConfigError::Exposed(format!(
                    "refusing to listen on {listen} without a token: add --token-file FILE (or set STAMPEDE_TOKEN)"
                )));
            }
            if !listen.ip().is_loopback() && tls.is_none() {
                return Err(ConfigError::Exposed(format!(
                    "refusing to listen on {listen} in plain text: add --tls-cert, --tls-key and --tls-ca \
                     (make them with `stampede certs init`)"
                )));
            }
            let wait = parse_duration("--wait-agents", &s.wait_agents.0)?;
            Some(JoinSpec {
                listen,
                expect,
                monitors,
                wait,
                ready_file: args.ready_file.clone(),
            })
        }
        // Dialed agents waited for: `dial_wait`.
        (None, Some(_)) if args.agents.is_some() => None,
        (None, Some(_)) => {
            return Err(ConfigError::Conflict(
                "--expect-agents goes with --listen ADDR or --agents".into(),
            ));
        }
        // Only the join port is a port of `run`'s to be ready on.
        _ if args.ready_file.is_some() => {
            return Err(ConfigError::Conflict(
                "--ready-file goes with --listen ADDR".into(),
            ));
        }
        _ => None,
    })
}

/// `--expect-agents N` with `--agents`: the run starts once N agents answer (`--wait-agents` at most).
fn dial_wait(s: &Settings) -> Result<Option<DialWait>, ConfigError> {
    let args = &s.given;
    let (Some(expect), None, Some(_)) = (args.expect_agents, args.listen, &args.agents) else {
        return Ok(None);
    };
    if expect == 0 {
        return Err(PlanError::NotPositive {
            what: "--expect-agents",
            value: "0".into(),
        }
        .into());
    }
    let wait = parse_duration("--wait-agents", &s.wait_agents.0)?;
    Ok(Some(DialWait { expect, wait }))
}

/// What the in-process monitor watches (`--monitor-pid`, `--monitor-process`, `--monitor-cgroup`),
/// checked for what can be told before it is opened; the probe says the rest when it opens it.
fn embedded_monitor(args: &RunArgs) -> Result<Option<monitor::Watch>, ConfigError> {
    use monitor::Watch;
    let (flag, watch) = match (
        args.monitor_pid,
        &args.monitor_process,
        &args.monitor_cgroup,
    ) {
        (Some(pid), ..) => ("--monitor-pid", Watch::Pid(pid)),
        (_, Some(name), _) => ("--monitor-process", Watch::Process(name.clone())),
        (.., Some(path)) => ("--monitor-cgroup", Watch::Cgroup(path.clone())),
        _ => return Ok(None),
    };
    // A pid's words name no value of their own; the others' do.
    let shown = match &watch {
        Watch::Pid(pid) => format!(" {pid}:"),
        _ => String::new(),
    };
    pairing::check_watch(&watch)
        .map(|()| Some(watch))
        .map_err(|why| ConfigError::Value(format!("{flag}{shown} {why}")))
}

/// `--agent-weights`, keyed by agent: each one `--agents` lists, by its name there. The old form,
/// one weight per agent in `--agents` order, is taken only where that order is the fleet's (agents
/// listed one by one); agents found by `dns://` or that join `--listen` are known only at the run.
fn weights(
    args: &RunArgs,
    agents: &[AgentSpec],
) -> Result<Option<Vec<(String, u64)>>, ConfigError> {
    use crate::cli::AgentWeights;
    let Some(given) = &args.agent_weights else {
        return Ok(None);
    };
    let refuse = |m: String| Err(ConfigError::Peers(m));
    if args.listen.is_some() {
        return refuse(
            "--agent-weights weighs the agents --agents lists; agents that join --listen are known only once they join"
                .into(),
        );
    }
    if agents.is_empty() {
        return refuse(
            "--agent-weights weighs the agents --agents lists; without --agents the embedded agent sends all the load"
                .into(),
        );
    }
    if agents.iter().any(|a| matches!(a, AgentSpec::Dns(_))) {
        return refuse(
            "--agent-weights needs agents listed one by one, not dns:// (whose records are known only at the run)"
                .into(),
        );
    }
    let names: Vec<&str> = agents
        .iter()
        .map(|a| match a {
            AgentSpec::Addr(n) | AgentSpec::Dns(n) => n.as_str(),
        })
        .collect();
    let keyed: Vec<(String, u64)> = match given {
        AgentWeights::InOrder(w) if w.len() != names.len() => {
            return refuse(format!(
                "--agent-weights: {} weights for {} agents; give one per agent, keyed by it: {}",
                w.len(),
                names.len(),
                names
                    .iter()
                    .map(|n| format!("{n}=1"))
                    .collect::<Vec<_>>()
                    .join(",")
            ));
        }
        AgentWeights::InOrder(w) => names
            .iter()
            .map(|n| n.to_string())
            .zip(w.iter().copied())
            .collect(),
        AgentWeights::ByAgent(w) => w.clone(),
    };
    by_agent(&keyed, &names).map(Some)
}

/// The weights `keyed` by agent, each checked against the agents `names` (every one weighed once,
/// none unknown, none zero), in the order and spelling of `--agents`.
fn by_agent(keyed: &[(String, u64)], names: &[&str]) -> Result<Vec<(String, u64)>, ConfigError> {
    let refuse = |m: String| Err(ConfigError::Peers(m));
    for (i, (agent, w)) in keyed.iter().enumerate() {
        if !names.iter().any(|n| n.eq_ignore_ascii_case(agent)) {
            return refuse(format!(
                "--agent-weights names {agent}, which --agents does not list ({})",
                names.join(",")
            ));
        }
        if keyed[..i]
            .iter()
            .any(|(a, _)| a.eq_ignore_ascii_case(agent))
        {
            return refuse(format!("--agent-weights weighs {agent} twice"));
        }
        if *w == 0 {
            return refuse(format!(
                "--agent-weights {agent}={w}: a weight is a positive whole number"
            ));
        }
    }
    if let Some(missing) = names
        .iter()
        .find(|n| !keyed.iter().any(|(a, _)| a.eq_ignore_ascii_case(n)))
    {
        return refuse(format!(
            "--agent-weights gives no weight for {missing}: give one per agent --agents lists"
        ));
    }
    // Named as the fleet names them: by the entry in --agents.
    Ok(names
        .iter()
        .map(|n| {
            let w = keyed
                .iter()
                .find(|(a, _)| a.eq_ignore_ascii_case(n))
                .map_or(1, |(_, w)| *w);
            (n.to_string(), w)
        })
        .collect())
}

/// Checks the monitors paired with targets against the targets, and tells every target's run who they are.
pub fn paired_with(runs: &mut [RunConfig]) -> Result<(), ConfigError> {
    let labels: Vec<Option<String>> = runs.iter().map(|c| c.label.clone()).collect();
    pairing::check(&runs[0].paired, &labels).map_err(|e| ConfigError::Value(e.to_string()))?;
    let pairing = pairing::Pairing::new(labels);
    // A monitor in this process watches this host: only a target here can be checked.
    let ports: Vec<(String, u16)> = runs
        .iter()
        .filter_map(|c| {
            let origin = c.plan.workload().origin();
            let local = origin
                .host()
                .parse::<std::net::IpAddr>()
                .is_ok_and(|ip| ip.is_loopback())
                || origin.host() == "localhost";
            Some((c.label.clone()?, origin.port())).filter(|_| local)
        })
        .collect();
    let notes = pairing::not_listening(&runs[0].paired, &ports);
    runs[0].notes.extend(notes);
    for cfg in runs {
        cfg.pairing = pairing.clone();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{DurationText, Steps};
    use crate::config::tests::{args, command_line, runs_of, with_plan};
    use crate::config::{Runs, resolve};

    #[test]
    fn agent_lists_parse_and_bad_entries_are_named() {
        assert_eq!(
            parse_agents("a:1,dns://agent:7700").unwrap(),
            vec![
                AgentSpec::Addr("a:1".into()),
                AgentSpec::Dns("agent:7700".into())
            ]
        );
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("agents");
        std::fs::write(&f, "# fleet\n10.0.0.1:7700\n\n[::1]:7700 # local\n").unwrap();
        let parsed = parse_agents(&format!("@{}", f.display())).unwrap();
        assert_eq!(
            parsed,
            vec![
                AgentSpec::Addr("10.0.0.1:7700".into()),
                AgentSpec::Addr("[::1]:7700".into())
            ]
        );
        assert!(
            parse_agents("a:1,nohost")
                .unwrap_err()
                .to_string()
                .contains("entry 2 'nohost'")
        );
        assert!(parse_agents("http://a:1").is_err());
        assert!(parse_agents("a:0").is_err());
        assert!(parse_agents(" , ").is_err());
    }

    #[test]
    fn waiting_for_agents_beyond_loopback_needs_a_token() {
        let mut a = args("http://127.0.0.1:1/");
        a.steps = Some(Steps(vec![1.0]));
        a.listen = Some("0.0.0.0:7800".parse().unwrap());
        a.expect_agents = Some(2);
        a.token_file = None;
        // The token may also come from the environment; only check when it does not.
        if std::env::var_os("STAMPEDE_TOKEN").is_none() {
            let e = resolve(a).unwrap_err().to_string();
            assert!(e.contains("without a token: add --token-file FILE"), "{e}");
        }
    }

    #[test]
    fn expect_agents_with_dialed_agents_waits_for_them() {
        let mut a = args("http://127.0.0.1:1/");
        a.steps = Some(Steps(vec![1.0]));
        a.agents = Some("dns://agents.internal:7700".into());
        a.expect_agents = Some(3);
        a.wait_agents = Some(DurationText("90s".into()));
        let cfg = resolve(a.clone()).unwrap();
        assert_eq!(
            cfg.dial_wait,
            Some(DialWait {
                expect: 3,
                wait: Duration::from_secs(90)
            })
        );
        assert_eq!(cfg.join, None);
        a.expect_agents = Some(0);
        let e = resolve(a.clone()).unwrap_err().to_string();
        assert!(e.contains("--expect-agents"), "{e}");
        a.agents = None;
        a.expect_agents = Some(3);
        let e = resolve(a).unwrap_err().to_string();
        assert!(
            e.contains("--expect-agents goes with --listen ADDR or --agents"),
            "{e}"
        );
    }

    #[test]
    fn a_join_port_waits_for_agents_or_monitors() {
        let mut a = args("http://127.0.0.1:1/");
        a.steps = Some(Steps(vec![1.0]));
        a.listen = Some("127.0.0.1:7800".parse().unwrap());
        let e = resolve(a.clone()).unwrap_err().to_string();
        assert!(
            e.contains("--expect-agents N") && e.contains("--expect-monitors N"),
            "{e}"
        );
        a.expect_monitors = Some(1);
        let run = resolve(a).unwrap();
        let join = run.join.expect("a join port");
        assert_eq!((join.expect, join.monitors), (0, 1));
    }

    #[test]
    fn a_ready_file_goes_with_a_join_port() {
        let mut a = args("http://127.0.0.1:1/");
        a.steps = Some(Steps(vec![1.0]));
        a.ready_file = Some("ready.json".into());
        let e = resolve(a.clone()).unwrap_err().to_string();
        assert!(e.contains("--ready-file goes with --listen ADDR"), "{e}");
        a.listen = Some("127.0.0.1:0".parse().unwrap());
        a.expect_agents = Some(1);
        let join = resolve(a).unwrap().join.expect("a join port");
        assert_eq!(join.ready_file, Some("ready.json".into()));
    }

    #[test]
    fn agent_weights_went_by_position_in_the_fleet() {
        let weights = |line: &str| {
            let argv = std::iter::once("stampede").chain(line.split_whitespace());
            let cli = crate::cli::parse_from(argv).unwrap();
            let crate::cli::Command::Run(a) = cli.command else {
                unreachable!()
            };
            resolve(*a).map(|c| c.agent_weights)
        };
        let both = vec![("a:1".to_string(), 1), ("b:2".to_string(), 3)];
        assert_eq!(
            weights("run http://h:1/ --steps 1 --agents a:1,b:2 --agent-weights b:2=3,a:1=1")
                .unwrap(),
            Some(both.clone())
        );
        // The old form where the order is the fleet's: agents listed one by one.
        assert_eq!(
            weights("run http://h:1/ --steps 1 --agents a:1,b:2 --agent-weights 1,3").unwrap(),
            Some(both)
        );
        for (line, words) in [
            (
                "--agents a:1,b:2 --agent-weights a:1=1",
                "no weight for b:2",
            ),
            (
                "--agents a:1,b:2 --agent-weights a:1=1,c:3=1,b:2=1",
                "names c:3, which --agents does not list",
            ),
            (
                "--agents a:1,b:2 --agent-weights 1,2,3",
                "3 weights for 2 agents",
            ),
            (
                "--agents a:1,b:2 --agent-weights a:1=0,b:2=1",
                "a weight is a positive whole number",
            ),
            ("--agents dns://agents:7700 --agent-weights 1", "not dns://"),
            ("--agent-weights 1", "without --agents the embedded agent"),
            (
                "--listen 127.0.0.1:0 --expect-agents 2 --agent-weights 1,2",
                "agents that join --listen are known only once they join",
            ),
        ] {
            let e = weights(&format!("run http://h:1/ --steps 1 {line}")).unwrap_err();
            assert!(matches!(e, ConfigError::Peers(_)), "{line}: {e:?}");
            assert!(e.to_string().contains(words), "{line}: {e}");
        }
        // The plan file's table, keyed by agent.
        let (_d, got) = with_plan(
            "url = \"http://h:1/\"\nsteps = [1]\nagents = \"a:1,b:2\"\nagent_weights = { \"b:2\" = 5, \"a:1\" = 2 }\n",
            "",
        );
        assert_eq!(
            got.unwrap().agent_weights,
            Some(vec![("a:1".to_string(), 2), ("b:2".to_string(), 5)])
        );
        let e = command_line("run http://h:1/ --steps 1 --agents a:1,b:2 --agent-weights a:1=1,2")
            .unwrap_err();
        assert!(
            e.contains("mixes AGENT=WEIGHT entries with bare weights"),
            "{e}"
        );
    }

    #[test]
    fn the_same_agent_listed_twice_was_refused_as_serving_another_coordinator() {
        let e = parse_agents("a:1,b:2,a:1").unwrap_err();
        assert!(matches!(e, ConfigError::Peers(_)), "{e:?}");
        assert_eq!(
            e.to_string(),
            "--agents names a:1 twice (entries 1 and 3): list each agent once"
        );
        let e = parse_peers("--monitors", "m:1,m:1").unwrap_err();
        assert!(e.to_string().contains("list each monitor once"), "{e}");
    }

    #[test]
    fn monitors_are_paired_with_targets_by_name_from_flags_or_a_plan_file() {
        let Runs::Side(side) = runs_of(
            "run go=http://h:1/ node=http://h:2/ --steps 1 --monitor-target go=pid:7 --monitor-target node=process:node",
        )
        .unwrap() else {
            panic!("two targets")
        };
        for cfg in &side.runs {
            assert_eq!(
                cfg.paired.len(),
                2,
                "every target's run has every in-process monitor"
            );
            let target = cfg.label.as_deref();
            let own = cfg.pairing.watches(target, target.unwrap());
            assert_eq!(own, Some(monitor::step::Watches::Target));
        }
        let e =
            runs_of("run go=http://h:1/ node=http://h:2/ --steps 1 --monitor-target rust=pid:7")
                .err()
                .unwrap();
        assert!(
            e.contains("names no target (the targets are go, node)"),
            "{e}"
        );
        // One target, named: paired; unnamed: nothing to pair with.
        assert!(command_line("run web=http://h:1/ --steps 1 --monitor-target web=pid:7").is_ok());
        let e = command_line("run http://h:1/ --steps 1 --monitor-target web=pid:7").unwrap_err();
        assert!(e.contains("the target has no name"), "{e}");
        let dir = tempfile::tempdir().unwrap();
        let plan = dir.path().join("p.toml");
        std::fs::write(
            &plan,
            "url = \"http://h:1/\"\nsteps = [1]\nlabel = \"web\"\nmonitor_target = [\"web=process:nginx\"]\n",
        )
        .unwrap();
        let c = command_line(&format!("run {}", plan.display())).unwrap();
        assert_eq!(c.paired[0].watch, monitor::Watch::Process("nginx".into()));
    }
}
