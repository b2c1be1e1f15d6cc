//! Which server monitor watches which target: `--monitor-target NAME=KIND:WHAT` parsed and checked
//! against the targets, and the one rule both kinds of monitor are paired by, in-process and remote:
//! a monitor named as a target is that target's own server; any other watches what is behind them
//! all (a database, the host) and stays on every target.
use monitor::Watch;
use monitor::step::{StepServer, Watches};

const FLAG: &str = "--monitor-target";

/// A pairing that cannot be: what was wrong, naming the part (a value, to the configuration).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct PairingError(pub String);

/// An in-process monitor paired with a target: named `target`, it watches `watch`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Paired {
    pub target: String,
    pub watch: Watch,
}

/// One `--monitor-target NAME=KIND:WHAT`: `process:COMM`, `pid:PID` or `cgroup:PATH`.
pub fn parse(text: &str) -> Result<Paired, PairingError> {
    let bad = |why: &str| Err(PairingError(format!("{FLAG} '{text}': {why}")));
    let Some((target, what)) = text.split_once('=') else {
        return bad("give NAME=process:COMM, NAME=pid:PID or NAME=cgroup:PATH, NAME a target's");
    };
    if target.is_empty() {
        return bad("the target's NAME is empty (NAME as in stampede run NAME=URL)");
    }
    let Some((kind, value)) = what.split_once(':') else {
        return bad("after NAME=, give process:COMM, pid:PID or cgroup:PATH");
    };
    let watch = match kind {
        "process" => Watch::Process(value.to_string()),
        "pid" => match value.parse::<u32>() {
            Ok(pid) => Watch::Pid(pid),
            Err(_) => return bad(&format!("pid '{value}' is not a process id")),
        },
        "cgroup" => Watch::Cgroup(value.into()),
        _ => {
            return bad(&format!(
                "'{kind}' is not what a monitor watches: process, pid or cgroup"
            ));
        }
    };
    check_watch(&watch).map_err(|why| PairingError(format!("{FLAG} '{text}': {why}")))?;
    Ok(Paired {
        target: target.to_string(),
        watch,
    })
}

/// A watch as `--monitor-target` spells it after `NAME=`.
pub fn spelled(watch: &Watch) -> String {
    match watch {
        Watch::Pid(pid) => format!("pid:{pid}"),
        Watch::Process(name) => format!("process:{name}"),
        Watch::Cgroup(path) => format!("cgroup:{}", path.display()),
        Watch::Container(id) => format!("container:{id}"),
    }
}

/// What can be told wrong of a watch before it is opened (the probe says the rest when it opens it).
pub fn check_watch(watch: &Watch) -> Result<(), String> {
    match watch {
        Watch::Pid(0) => Err("a process id is 1 or more".into()),
        Watch::Process(name) if name.is_empty() || name.contains('/') => Err(format!(
            "'{name}': give a process name as ps -o comm shows it (no '/')"
        )),
        Watch::Cgroup(path) if !path.is_absolute() => Err(format!(
            "{}: give the cgroup's absolute directory, e.g. /sys/fs/cgroup/system.slice/nginx.service",
            path.display()
        )),
        _ => Ok(()),
    }
}

/// Every pairing names a target of the run, and no target has two.
pub fn check(paired: &[Paired], labels: &[Option<String>]) -> Result<(), PairingError> {
    for (i, p) in paired.iter().enumerate() {
        if !labels
            .iter()
            .any(|l| l.as_deref() == Some(p.target.as_str()))
        {
            let named: Vec<&str> = labels.iter().filter_map(|l| l.as_deref()).collect();
            let targets = match named.as_slice() {
                [] => "the target has no name: give it one, NAME=URL".to_string(),
                _ => format!("the targets are {}", named.join(", ")),
            };
            return Err(PairingError(format!(
                "{FLAG} {}=…: names no target ({targets})",
                p.target
            )));
        }
        if let Some(twin) = paired[..i].iter().find(|q| q.target == p.target) {
            return Err(PairingError(format!(
                "{FLAG}: two monitors for target {}, {} and {}: give one per target (another one's server is its own target's, or a --monitor-pid/--monitor-process/--monitor-cgroup beside them all)",
                p.target, twin.watch, p.watch
            )));
        }
    }
    Ok(())
}

/// The targets of a run, as monitors are paired with them.
#[derive(Debug, Clone, Default)]
pub struct Pairing {
    labels: Vec<String>,
}

impl Pairing {
    pub fn new(labels: impl IntoIterator<Item = Option<String>>) -> Pairing {
        Pairing {
            labels: labels.into_iter().flatten().collect(),
        }
    }

    /// Whose server monitor `name` watches, seen from the target labelled `target`: its own
    /// (`Target`), all of theirs (`Shared`), or another target's (`None`: not this target's to
    /// carry).
    pub fn watches(&self, target: Option<&str>, name: &str) -> Option<Watches> {
        if !self.labels.iter().any(|l| l == name) {
            Some(Watches::Shared)
        } else if target == Some(name) {
            Some(Watches::Target)
        } else {
            None
        }
    }

    /// The monitor paired with the target labelled `target`, among those named.
    pub fn paired<'a>(&self, target: Option<&str>, names: &'a [String]) -> Option<&'a str> {
        names
            .iter()
            .find(|n| self.watches(target, n) == Some(Watches::Target))
            .map(String::as_str)
    }

    /// A step's monitor views, each marked whose it is, those of another target's server left out.
    /// A run of one target with no monitor paired keeps the rule from before pairing: its only
    /// monitor of processes or a cgroup watches its server (its columns keep their suffix).
    pub fn mark(&self, target: Option<&str>, views: Vec<StepServer>) -> Vec<StepServer> {
        let mut kept: Vec<StepServer> = views
            .into_iter()
            .filter_map(|mut v| {
                v.watches = self.watches(target, &v.monitor)?;
                Some(v)
            })
            .collect();
        let one_target = self.labels.len() <= 1;
        let paired = kept.iter().any(|v| v.watches == Watches::Target);
        if one_target
            && !paired
            && let [only] = kept.as_mut_slice()
            && only.target.is_some()
        {
            only.watches = Watches::Target;
        }
        kept
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(labels: &[&str]) -> Vec<Option<String>> {
        labels.iter().map(|l| Some(l.to_string())).collect()
    }

    #[test]
    fn a_pairing_is_a_target_s_name_then_what_its_monitor_watches() {
        let p = parse("go=process:server-go").unwrap();
        assert_eq!(
            (p.target.as_str(), p.watch),
            ("go", Watch::Process("server-go".into()))
        );
        assert_eq!(parse("node=pid:4242").unwrap().watch, Watch::Pid(4242));
        assert_eq!(
            parse("db=cgroup:/sys/fs/cgroup/db.slice").unwrap().watch,
            Watch::Cgroup("/sys/fs/cgroup/db.slice".into())
        );
        // A name may hold a colon after the first (a cgroup path seldom does, a process can).
        assert_eq!(
            parse("x=process:a:b").unwrap().watch,
            Watch::Process("a:b".into())
        );
    }

    #[test]
    fn a_pairing_that_is_not_one_is_refused_naming_its_part() {
        for (text, part) in [
            ("go", "give NAME=process:COMM"),
            ("=pid:1", "NAME is empty"),
            ("go=4242", "give process:COMM, pid:PID or cgroup:PATH"),
            ("go=pid:x", "pid 'x' is not a process id"),
            ("go=pid:0", "a process id is 1 or more"),
            ("go=process:/usr/bin/go", "no '/'"),
            ("go=cgroup:sys/fs", "absolute directory"),
            (
                "go=container:abc",
                "'container' is not what a monitor watches",
            ),
        ] {
            let e = parse(text).unwrap_err().to_string();
            assert!(
                e.starts_with(&format!("--monitor-target '{text}': ")),
                "{e}"
            );
            assert!(e.contains(part), "{text}: {e}");
            assert!(matches!(parse(text), Err(PairingError(_))));
        }
    }

    #[test]
    fn a_pairing_must_name_a_target_and_a_target_has_one() {
        let go = parse("go=pid:1").unwrap();
        let node = parse("node=pid:2").unwrap();
        assert!(check(&[go.clone(), node.clone()], &named(&["go", "node"])).is_ok());
        let e = check(&[parse("rust=pid:3").unwrap()], &named(&["go", "node"])).unwrap_err();
        assert_eq!(
            e.to_string(),
            "--monitor-target rust=…: names no target (the targets are go, node)"
        );
        let e = check(std::slice::from_ref(&go), &[None]).unwrap_err();
        assert!(e.to_string().contains("the target has no name"), "{e}");
        let e = check(
            &[go, node, parse("go=process:go").unwrap()],
            &named(&["go", "node"]),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.starts_with("--monitor-target: two monitors for target go, pid 1 and process go"),
            "{e}"
        );
    }

    fn view(name: &str, target: bool) -> StepServer {
        let mut v: StepServer = serde_json::from_value(serde_json::json!({
            "monitor": name, "counted_s": 1.0, "rated_s": 1.0, "partial": false, "samples": 1,
            "target": null,
            "host": {"cpu_pct": null, "softirq_pct": null, "steal_pct": null, "iowait_pct": null,
                     "busiest_core": null, "busiest_core_pct": null, "run_queue": null,
                     "mem_available_bytes": null},
            "net": [], "tcp": monitor::TcpCounters::default(), "monitor_cpu_pct": 0.0,
            "series": []
        }))
        .unwrap();
        if target {
            let gauge = monitor::step::Gauge::default();
            v.target = Some(monitor::step::TargetStep {
                cpu_pct: 1.0,
                cpu_user_pct: 1.0,
                cpu_system_pct: 0.0,
                cpu_util_pct: 1.0,
                usable_cores: 1.0,
                thread_max_pct: None,
                busiest_thread: None,
                memory_bytes: gauge,
                threads: gauge,
                open_fds: gauge,
                processes: gauge,
                voluntary_switches: 0,
                involuntary_switches: 0,
                throttled_pct: None,
                memory_peak_bytes: None,
                oom_kills: None,
            });
        }
        v
    }

    fn marks(p: &Pairing, target: Option<&str>, views: Vec<StepServer>) -> Vec<(String, Watches)> {
        p.mark(target, views)
            .into_iter()
            .map(|v| (v.monitor, v.watches))
            .collect()
    }

    #[test]
    fn a_target_s_step_carries_its_own_server_and_the_shared_ones_not_another_s() {
        let p = Pairing::new(named(&["go", "node"]));
        let views = || vec![view("go", true), view("node", true), view("db", true)];
        assert_eq!(
            marks(&p, Some("go"), views()),
            [
                ("go".to_string(), Watches::Target),
                ("db".to_string(), Watches::Shared)
            ]
        );
        assert_eq!(
            marks(&p, Some("node"), views()),
            [
                ("node".to_string(), Watches::Target),
                ("db".to_string(), Watches::Shared)
            ]
        );
        let names = ["go".to_string(), "db".to_string()];
        assert_eq!(p.paired(Some("go"), &names), Some("go"));
        assert_eq!(p.paired(Some("node"), &names), None);
    }

    #[test]
    fn side_by_side_an_unpaired_monitor_is_nobody_s_own() {
        // A database behind both targets: its CPU is no target's knee.
        let p = Pairing::new(named(&["go", "node"]));
        assert_eq!(
            marks(&p, Some("go"), vec![view("db", true)]),
            [("db".to_string(), Watches::Shared)]
        );
    }

    #[test]
    fn one_target_s_only_monitor_of_processes_is_its_server_as_before_pairing() {
        let p = Pairing::new([None]);
        assert_eq!(
            marks(&p, None, vec![view("server", true)]),
            [("server".to_string(), Watches::Target)]
        );
        // The host alone, or one of two: nobody's own.
        assert_eq!(
            marks(&p, None, vec![view("host", false)]),
            [("host".to_string(), Watches::Shared)]
        );
        assert_eq!(
            marks(&p, None, vec![view("a", true), view("b", true)]),
            [
                ("a".to_string(), Watches::Shared),
                ("b".to_string(), Watches::Shared)
            ]
        );
        // Named as the one target: paired, whatever else watches.
        let p = Pairing::new(named(&["web"]));
        assert_eq!(
            marks(&p, Some("web"), vec![view("db", true), view("web", true)]),
            [
                ("db".to_string(), Watches::Shared),
                ("web".to_string(), Watches::Target)
            ]
        );
    }
}

/// Notes for each `--monitor-target NAME=process:COMM` whose processes do not all listen on their
/// target's port: a name matches every process of it on the host (`process:nginx` every nginx), and
/// one that serves another port is watched as the target's server all the same. `ports` gives each
/// target's label and port, for targets on this host (a monitor in this process watches this host).
/// Said once, before the run; nothing where `/proc` cannot tell.
pub fn not_listening(paired: &[Paired], ports: &[(String, u16)]) -> Vec<String> {
    let mut notes = Vec::new();
    for p in paired {
        let Watch::Process(name) = &p.watch else {
            continue;
        };
        let Some((_, port)) = ports.iter().find(|(label, _)| *label == p.target) else {
            continue;
        };
        let named = listen::named(name);
        if named.is_empty() {
            continue;
        }
        let listening = listen::pids_on(*port);
        let idle: Vec<u32> = named
            .iter()
            .copied()
            .filter(|pid| !listening.contains(pid))
            .collect();
        if idle.is_empty() {
            continue;
        }
        let pids = |v: &[u32]| v.iter().map(u32::to_string).collect::<Vec<_>>().join(", ");
        notes.push(if idle.len() == named.len() {
            format!(
                "{FLAG} {}=process:{name}: no process named {name} listens on port {port}, the target's (pids {}): it may be another {name}; name the server by pid:PID or cgroup:PATH",
                p.target,
                pids(&idle)
            )
        } else {
            format!(
                "{FLAG} {}=process:{name}: {} of the {} processes named {name} do not listen on port {port}, the target's (pids {}), and are watched as its server too; name it by pid:PID or cgroup:PATH",
                p.target,
                idle.len(),
                named.len(),
                pids(&idle)
            )
        });
    }
    notes
}

/// Who listens where, from `/proc` (Linux): the listening TCP sockets of a port and the processes
/// that hold them.
mod listen {
    use std::collections::HashSet;
    use std::fs;

    /// The processes whose `comm` is `name` (as `process:NAME` matches them).
    pub fn named(name: &str) -> Vec<u32> {
        let Ok(dir) = fs::read_dir("/proc") else {
            return Vec::new();
        };
        let mut pids: Vec<u32> = dir
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
            .filter(|pid| {
                fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim_end() == name)
            })
            .collect();
        pids.sort_unstable();
        pids
    }

    /// The processes holding a TCP socket that listens on `port` (any address, v4 or v6).
    pub fn pids_on(port: u16) -> HashSet<u32> {
        let inodes: HashSet<String> = ["/proc/net/tcp", "/proc/net/tcp6"]
            .iter()
            .filter_map(|f| fs::read_to_string(f).ok())
            .flat_map(|text| listening_inodes(&text, port))
            .collect();
        if inodes.is_empty() {
            return HashSet::new();
        }
        let Ok(dir) = fs::read_dir("/proc") else {
            return HashSet::new();
        };
        dir.flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
            .filter(|pid| {
                fs::read_dir(format!("/proc/{pid}/fd")).is_ok_and(|fds| {
                    fds.flatten().any(|fd| {
                        fs::read_link(fd.path()).is_ok_and(|l| {
                            l.to_str()
                                .and_then(|s| s.strip_prefix("socket:["))
                                .and_then(|s| s.strip_suffix(']'))
                                .is_some_and(|inode| inodes.contains(inode))
                        })
                    })
                })
            })
            .collect()
    }

    /// The inodes of the sockets in a `/proc/net/tcp` table that listen (state 0A) on `port`.
    pub fn listening_inodes(table: &str, port: u16) -> Vec<String> {
        table
            .lines()
            .skip(1)
            .filter_map(|line| {
                let f: Vec<&str> = line.split_whitespace().collect();
                let local_port = f.get(1)?.rsplit_once(':')?.1;
                let listens = f.get(3) == Some(&"0A");
                (listens && u16::from_str_radix(local_port, 16).ok()? == port)
                    .then(|| f.get(9).map(|s| s.to_string()))
                    .flatten()
            })
            .collect()
    }

    #[cfg(test)]
    mod tests {
        #[test]
        fn a_listening_socket_is_found_by_its_port_and_one_connected_is_not() {
            let table = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n   0: 0100007F:1F92 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 4242 1 0\n   1: 0100007F:1F92 0100007F:C350 01 00000000:00000000 00:00000000 00000000     0        0 4343 1 0\n";
            assert_eq!(super::listening_inodes(table, 8082), ["4242"]);
            assert!(super::listening_inodes(table, 80).is_empty());
        }

        #[test]
        fn this_process_is_found_listening_on_its_own_port() {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let port = l.local_addr().unwrap().port();
            assert!(super::pids_on(port).contains(&std::process::id()));
        }
    }
}
