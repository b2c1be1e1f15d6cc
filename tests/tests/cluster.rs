//! A real cluster in containers (deploy/docker-compose.yml): a coordinator, three agents and the reference
//! target, with the control and load networks apart. Agents are killed, cut off from their coordinator,
//! and orphaned, and the run must say so and stop the load. Runs when a Docker daemon answers; otherwise each
//! test prints why it is skipped (under CI=true a missing daemon is a failure).
//!
//! The clusters take turns (`docker::exclusive`): the 2 s deadlines below are about the agents, not about
//! two clusters competing for the cores.
use std::collections::HashMap;
use std::net::IpAddr;
use std::time::{Duration, Instant};

use serde_json::Value;
use tests::docker::{self, Cluster, Plan};

const AGENTS: usize = 3;

/// An agent stops all load within this long of losing its coordinator (the contract).
const STOP_WITHIN: Duration = Duration::from_secs(2);

/// How long a run may take beyond its planned steps: connecting, 100 ms per step start, drains, and one
/// `--timeout` (5 s) for a lost agent's step.
const RUN_SLACK: Duration = Duration::from_secs(12);

fn planned(steps: &str, step: Duration) -> Duration {
    step * steps.split(',').count() as u32
}

fn steps(run: &Value) -> &Vec<Value> {
    run["steps"]
        .as_array()
        .unwrap_or_else(|| panic!("run.json has no steps: {run}"))
}

fn agents(step: &Value) -> &Vec<Value> {
    step["agents"]
        .as_array()
        .unwrap_or_else(|| panic!("step has no agents: {step}"))
}

fn name(agent: &Value) -> &str {
    agent["agent"].as_str().unwrap_or("")
}

/// Whether an agent entry of run.json is the container with this control address (or container id).
fn is(agent: &Value, ip: IpAddr, id: &str) -> bool {
    let n = name(agent);
    n.contains(&ip.to_string()) || n.contains(&id[..12])
}

/// Starts the coordinator, waits for its exit within the planned time plus slack, and returns run.json.
fn finish(c: &Cluster, coordinator: &str, started: Instant, total: Duration) -> Value {
    let left = (total + RUN_SLACK).saturating_sub(started.elapsed());
    let code = c.wait_exit(coordinator, left);
    assert!(
        code.is_some(),
        "the run did not end on time (planned {total:?} + {RUN_SLACK:?} slack)\n{}\n{}",
        c.logs(coordinator),
        c.logs_of("agent")
    );
    assert_eq!(
        code,
        Some(0),
        "the coordinator failed\n{}\n{}",
        c.logs(coordinator),
        c.logs_of("agent")
    );
    c.run_json(coordinator)
        .unwrap_or_else(|| panic!("no /results/run.json\n{}", c.logs(coordinator)))
}

/// A run in which one agent was lost during step 2 (index 1): that step is degraded and names it, the
/// steps after it ran on the other agents, and step 1 had all of them.
fn assert_lost_in_step_2(run: &Value, victim_ip: IpAddr, victim_id: &str) {
    let steps = steps(run);
    assert_eq!(steps.len(), 4, "every step ran: {run}");
    assert_eq!(agents(&steps[0]).len(), AGENTS, "step 1: {}", steps[0]);

    let hit = &steps[1];
    assert_eq!(hit["trust"], "degraded", "step 2: {hit}");
    let lost: Vec<&Value> = agents(hit).iter().filter(|a| a["lost"] == true).collect();
    assert_eq!(lost.len(), 1, "one agent lost in step 2: {hit}");
    assert!(
        is(lost[0], victim_ip, victim_id),
        "the lost agent is {victim_ip} ({victim_id:.12}): {hit}"
    );
    let reasons = hit["reasons"].to_string();
    assert!(
        reasons.contains(name(lost[0])),
        "step 2's reasons name the lost agent {}: {reasons}",
        name(lost[0])
    );

    for later in &steps[2..] {
        let a = agents(later);
        assert_eq!(a.len(), AGENTS - 1, "later steps run on the rest: {later}");
        assert!(
            a.iter()
                .all(|a| !is(a, victim_ip, victim_id) && a["lost"] == false),
            "the lost agent is not in later steps: {later}"
        );
    }
}

fn count(map: &HashMap<IpAddr, u64>, ip: IpAddr) -> u64 {
    map.get(&ip).copied().unwrap_or(0)
}

/// The cluster comes up as the compose file says, and a 2-step ramp over three agents adds up: run.json
/// lists the three agents, their requests sum to each step's, and the target saw them from each agent.
#[test]
fn three_agents_run_a_ramp_and_add_up() {
    if !docker::available("three_agents_run_a_ramp_and_add_up") {
        return;
    }
    let _one = docker::exclusive();
    let (ramp, step) = ("150,300", Duration::from_secs(3));
    let c = Cluster::up(Plan::new(AGENTS, ramp, "3s"));
    let ids = c.ids("agent");
    assert_eq!(ids.len(), AGENTS);
    let control: Vec<IpAddr> = ids.iter().map(|id| c.ip(id, "control")).collect();
    let load: Vec<IpAddr> = ids.iter().map(|id| c.ip(id, "load")).collect();

    // Service discovery, as the coordinator's dns://agent:7700 will see it, and the split networks.
    let mut expected = control.clone();
    expected.sort();
    assert_eq!(
        c.resolve("control", "agent"),
        expected,
        "`agent` resolves to every agent"
    );
    assert_eq!(
        c.resolve("load", "target").len(),
        1,
        "agents resolve the target"
    );
    assert!(
        c.resolve("control", "target").is_empty(),
        "the target is not on the control network"
    );
    assert_eq!(c.stats()["requests"], 0, "the target starts at zero");

    let started = Instant::now();
    let coordinator = c.start_coordinator();
    let run = finish(&c, &coordinator, started, planned(ramp, step));

    let steps = steps(&run);
    assert_eq!(steps.len(), 2, "{run}");
    let mut total = 0;
    for s in steps {
        let a = agents(s);
        assert_eq!(a.len(), AGENTS, "three agents: {s}");
        for (ip, id) in control.iter().zip(&ids) {
            assert!(
                a.iter().any(|a| is(a, *ip, id)),
                "agent {ip} is in the step: {s}"
            );
        }
        let sum: u64 = a.iter().map(|a| a["requests"].as_u64().unwrap_or(0)).sum();
        assert_eq!(
            Some(sum),
            s["requests"].as_u64(),
            "agents' requests add up to the step's: {s}"
        );
        assert!(a.iter().all(|a| a["lost"] == false), "nobody lost: {s}");
        assert!(sum > 0, "the step sent requests: {s}");
        total += sum;
    }
    let by_client = c.by_client();
    for ip in &load {
        assert!(
            count(&by_client, *ip) > 0,
            "the target saw agent {ip}: {by_client:?}"
        );
    }
    let seen: u64 = load.iter().map(|ip| count(&by_client, *ip)).sum();
    assert_eq!(
        seen, total,
        "the target counted what the agents sent: {by_client:?}"
    );
}

/// docs/guide/deploying.md's own lines, with whichever Compose is installed (v1's `docker-compose` here):
/// `up coordinator` once recreated the coordinator's dependencies at their default scale under v1,
/// removing agents 2 and 3, and the run went over one agent without a word. The coordinator now waits for
/// the agents it expects, says how many the run is over, and every step has all three.
#[test]
fn the_guide_s_compose_commands_ran_the_ramp_over_one_agent_of_three() {
    if !docker::available("the_guide_s_compose_commands_ran_the_ramp_over_one_agent_of_three") {
        return;
    }
    let _one = docker::exclusive();
    let (ramp, step) = ("100,200", Duration::from_secs(2));
    let c = Cluster::prepared(Plan::new(AGENTS, ramp, "2s"));
    let ups: Vec<Vec<String>> = docker::guide_lines()
        .into_iter()
        .filter(|w| w.first().is_some_and(|w| w == "up"))
        .collect();
    assert_eq!(ups.len(), 2, "the guide's two `up` lines: {ups:?}");
    let scale = format!("agent={AGENTS}");
    assert!(
        ups[0].contains(&scale),
        "the guide scales to {AGENTS}: {:?}",
        ups[0]
    );
    let run = |words: &[String], limit: Duration| {
        let mut child = c.spawn_as_written(words);
        let deadline = Instant::now() + limit;
        while child.try_wait().unwrap().is_none() {
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!("{words:?} did not end within {limit:?}");
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        let o = child.wait_with_output().unwrap();
        let said = format!("{}{}", tests::text(&o.stdout), tests::text(&o.stderr));
        assert!(o.status.success(), "{words:?}: {said}");
        said
    };
    run(&ups[0], Duration::from_secs(60));
    c.wait_up();
    let started = Instant::now();
    run(&ups[1], planned(ramp, step) + RUN_SLACK);
    let coordinator = c.ids("coordinator").pop().expect("a coordinator container");
    let run = finish(&c, &coordinator, started, planned(ramp, step));
    assert_eq!(c.ids("agent").len(), AGENTS, "the agents are still there");
    let logs = c.logs(&coordinator);
    assert!(
        logs.contains(&format!("over {AGENTS} agents")),
        "the plan line says how many: {logs}"
    );
    for s in steps(&run) {
        assert_eq!(agents(s).len(), AGENTS, "every agent in every step: {s}");
    }
}

/// `docker kill` of an agent mid-step: the step is degraded and names it, the run goes on with two agents
/// and ends on time.
#[test]
fn killed_agent_degrades_its_step_and_the_run_goes_on() {
    if !docker::available("killed_agent_degrades_its_step_and_the_run_goes_on") {
        return;
    }
    let _one = docker::exclusive();
    let (ramp, step) = ("150,300,450,600", Duration::from_secs(3));
    let c = Cluster::up(Plan::new(AGENTS, ramp, "3s"));
    let victim = c.ids("agent")[1].clone();
    let victim_ip = c.ip(&victim, "control");

    let started = Instant::now();
    let coordinator = c.start_coordinator();
    c.wait_steps(&coordinator, 1, step + RUN_SLACK);
    std::thread::sleep(step / 2);
    c.kill(&victim);

    let run = finish(&c, &coordinator, started, planned(ramp, step));
    assert_lost_in_step_2(&run, victim_ip, &victim);
}

/// An agent cut off from the control network (it still reaches the target) stops its load within 2 s; the
/// coordinator degrades the step and goes on without it.
#[test]
fn agent_cut_off_from_its_coordinator_stops_its_load() {
    if !docker::available("agent_cut_off_from_its_coordinator_stops_its_load") {
        return;
    }
    let _one = docker::exclusive();
    // Long steps, cut early in step 2: the agent's own schedule would otherwise end the load for it.
    let (ramp, step) = ("150,300,450,600", Duration::from_secs(6));
    let c = Cluster::up(Plan::new(AGENTS, ramp, "6s"));
    let ids = c.ids("agent");
    let victim = ids[1].clone();
    let victim_ip = c.ip(&victim, "control");
    let victim_load = c.ip(&victim, "load");
    let others: Vec<IpAddr> = [&ids[0], &ids[2]]
        .iter()
        .map(|id| c.ip(id, "load"))
        .collect();

    let started = Instant::now();
    let coordinator = c.start_coordinator();
    c.wait_steps(&coordinator, 1, step + RUN_SLACK);
    std::thread::sleep(Duration::from_millis(500));
    let before = c.by_client();
    c.disconnect("control", &victim);
    let cut = Instant::now();
    assert!(
        count(&before, victim_load) > 0,
        "the victim was sending: {before:?}"
    );

    std::thread::sleep(STOP_WITHIN.saturating_sub(cut.elapsed()));
    let at_deadline = c.by_client();
    std::thread::sleep(Duration::from_millis(1500));
    let after = c.by_client();
    assert!(
        cut.elapsed() < step,
        "the check ran inside step 2 ({:?} after the cut)",
        cut.elapsed()
    );
    assert_eq!(
        count(&after, victim_load),
        count(&at_deadline, victim_load),
        "the cut-off agent {victim_load} still sends {} s after losing its coordinator: {at_deadline:?} -> {after:?}",
        STOP_WITHIN.as_secs()
    );
    assert!(
        others
            .iter()
            .any(|ip| count(&after, *ip) > count(&at_deadline, *ip)),
        "the other agents were still in step 2 during the check: {at_deadline:?} -> {after:?}"
    );

    let run = finish(&c, &coordinator, started, planned(ramp, step));
    assert_lost_in_step_2(&run, victim_ip, &victim);
}

/// Killing the coordinator mid-step: every agent stops its load within 2 s.
#[test]
fn agents_stop_when_the_coordinator_dies() {
    if !docker::available("agents_stop_when_the_coordinator_dies") {
        return;
    }
    let _one = docker::exclusive();
    let step = Duration::from_secs(6);
    let c = Cluster::up(Plan::new(AGENTS, "150,300,450,600", "6s"));
    let load: Vec<IpAddr> = c.ids("agent").iter().map(|id| c.ip(id, "load")).collect();

    let coordinator = c.start_coordinator();
    c.wait_steps(&coordinator, 1, step + RUN_SLACK);
    std::thread::sleep(Duration::from_millis(500));
    let before = c.by_client();
    std::thread::sleep(Duration::from_millis(300));
    let just_before = c.by_client();
    c.kill(&coordinator);
    let killed = Instant::now();
    for ip in &load {
        assert!(
            count(&just_before, *ip) > count(&before, *ip),
            "agent {ip} was sending in step 2 when the coordinator died: {before:?} -> {just_before:?}"
        );
    }

    std::thread::sleep(STOP_WITHIN.saturating_sub(killed.elapsed()));
    let at_deadline = c.by_client();
    std::thread::sleep(Duration::from_millis(1500));
    let after = c.by_client();
    assert!(
        killed.elapsed() < step,
        "the check ran inside step 2's schedule ({:?} after the kill)",
        killed.elapsed()
    );
    for ip in &load {
        assert_eq!(
            count(&after, *ip),
            count(&at_deadline, *ip),
            "agent {ip} still sends {} s after its coordinator died: {at_deadline:?} -> {after:?}\n{}",
            STOP_WITHIN.as_secs(),
            c.logs_of("agent")
        );
    }
}
