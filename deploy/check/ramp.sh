#!/usr/bin/env bash
# The exact-arguments check's ramp: start the real agents with the words a deployment artifact gives them,
# a coordinator, and `stampede serve`, run a short ramp, and require every step trusted (valid, or degraded by this machine's own load,
# never invalid). Run it inside a
# network namespace of its own (`unshare --net --mount`, as deploy/check.sh does): there the only
# interface is loopback, so an artifact's 0.0.0.0 listen stays as written (and its TLS rules apply as
# beyond loopback) while no packet leaves the machine.
#
# Usage: ramp.sh WORK BIN AGENT_ARGV... [-- COORDINATOR_ARGV]
#   WORK              a fresh directory (logs, results; pki/ and token in it, from `stampede certs init`;
#                     hosts, if there, bound over /etc/hosts: the namespace's names; agent-N.root/run
#                     and coordinator.root/run, if there, bound over /run for that process alone (in
#                     a mount namespace of its own): the files its pod's Secret volumes mount there)
#   BIN               the directory of stampede and stampede-agent
#   AGENT_ARGV        files of NUL-separated words, one agent each (deploy/check/exec_args.py's output)
#   COORDINATOR_ARGV  a file of the coordinator's words; without it, one is made: dialing the agents'
#                     --listen port, or listening on the port their --join names
# The words are used as they are but for: the program (argv[0], replaced by BIN's binary of that name),
# --allow-target (moved to 127.0.0.1, where the target is) and the host of --join and of the target URL
# (moved to 127.0.0.1, the ports kept); of a given coordinator's, --expect-agents (the agents started
# here: one per port on loopback) and --step-duration (1s: the check is of the wiring, not the ramp).
# Names an artifact dials are resolved by WORK/hosts.
# Environment: RAMP_STRACE=1 runs each agent under `strace -f`, its system calls in WORK/agent-N.strace.
set -euo pipefail

# Internal: one process's own /run (ramp.sh --with-run DIR COMMAND...), in the mount namespace made for it.
if [ "${1:-}" = --with-run ]; then
    mount --bind "$2" /run
    shift 2
    exec "$@"
fi

die() {
    echo "ramp.sh: $*" >&2
    exit 1
}

[ $# -ge 3 ] || die "usage: ramp.sh WORK BIN AGENT_ARGV... [-- COORDINATOR_ARGV]"
work="$1" bin="$2"
shift 2
agent_files=()
coordinator_file=
while [ $# -gt 0 ]; do
    if [ "$1" = -- ]; then
        [ $# -eq 2 ] || die "one COORDINATOR_ARGV after --"
        coordinator_file="$2"
        break
    fi
    agent_files+=("$1")
    shift
done

pids=()
# Every process this started ends with it: SIGTERM (an agent drains), then SIGKILL after 5 s. A traced
# agent is strace's child, and strace does not pass SIGTERM on: the children of each process too.
cleanup() {
    local p c
    for p in "${pids[@]}"; do
        for c in $(ps -o pid= --ppid "$p" 2>/dev/null); do pids+=("$c"); done
    done
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    for _ in $(seq 1 50); do
        local alive=false
        for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && alive=true; done
        $alive || break
        sleep 0.1
    done
    for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
}
trap cleanup EXIT

ip link set lo up
if [ -f "$work/hosts" ]; then
    mount --bind "$work/hosts" /etc/hosts
fi

# Runs a command with DIR bound over /run if DIR exists. Called in the background (`with_run ... &`):
# it execs, so the process id $! names is the command's own, and cleanup's kill reaches it.
with_run() {
    local dir="$1"
    shift
    if [ -d "$dir" ]; then
        exec unshare --mount -- "$0" --with-run "$dir" "$@"
    else
        exec "$@"
    fi
}

# Waits for a --ready-file (bounded: 20 s), naming the log of a process that exits or never gets ready.
ready() {
    local file="$1" pid="$2" log="$3"
    for _ in $(seq 1 200); do
        [ -s "$file" ] && { sed -n 's/.*"listen":"\([^"]*\)".*/\1/p' "$file"; return; }
        kill -0 "$pid" 2>/dev/null || die "$(basename "$log" .log) exited before it was ready:"$'\n'"$(cat "$log")"
        sleep 0.1
    done
    die "$(basename "$log" .log) not ready after 20 s:"$'\n'"$(cat "$log")"
}

# Reads a NUL-separated argv file into the array named by $2, rewritten as the header says.
read_words() {
    local -n into="$2"
    local w prev=
    into=()
    while IFS= read -r -d '' w; do
        if [ ${#into[@]} -eq 0 ]; then
            w="$bin/$(basename "$w")"
        elif [ "$prev" = --allow-target ]; then
            w=127.0.0.1
        elif [ "$prev" = --join ]; then
            w="127.0.0.1:${w##*:}"
        fi
        into+=("$w")
        prev="$w"
    done <"$1"
    [ ${#into[@]} -gt 0 ] || die "$1 holds no words"
}

# The value after FLAG in the words of the array named by $1 (empty if absent).
flag() {
    local -n words="$1"
    local i
    for ((i = 1; i < ${#words[@]}; i++)); do
        if [ "${words[i - 1]}" = "$2" ]; then
            echo "${words[i]}"
            return
        fi
    done
}

"$bin/stampede" serve --listen 127.0.0.1:0 --ready-file "$work/target.ready" >"$work/target.log" 2>&1 &
pids+=($!)
target=$(ready "$work/target.ready" "$!" "$work/target.log")

# Agents that --join need their coordinator first; listening ones are started, then dialed.
join_port=
listen_ports=()
n=0
for f in "${agent_files[@]}"; do
    n=$((n + 1))
    declare -a "agent$n"
    read_words "$f" "agent$n"
    j=$(flag "agent$n" --join)
    if [ -n "$j" ]; then
        join_port="${j##*:}"
    else
        l=$(flag "agent$n" --listen)
        [ -n "$l" ] || die "agent $n ($f) neither listens nor joins"
        listen_ports+=("${l##*:}")
    fi
done

start_agent() {
    local -n words="agent$1"
    local log="$work/agent-$1.log"
    local trace=()
    if [ -n "${RAMP_STRACE:-}" ]; then
        trace=(strace -f -qq -o "$work/agent-$1.strace")
    fi
    if [ -z "$(flag "agent$1" --join)" ]; then
        with_run "$work/agent-$1.root/run" "${trace[@]}" "${words[@]}" --ready-file "$work/agent-$1.ready" >"$log" 2>&1 &
        pids+=($!)
        ready "$work/agent-$1.ready" "$!" "$log" >/dev/null
    else
        with_run "$work/agent-$1.root/run" "${trace[@]}" "${words[@]}" >"$log" 2>&1 &
        pids+=($!)
    fi
}

results="$work/results"
if [ -n "$coordinator_file" ]; then
    read_words "$coordinator_file" coordinator
    # The target URL (the first word after `run` that is one) moved to the loopback target.
    for i in "${!coordinator[@]}"; do
        case "${coordinator[i]}" in http://* | https://*)
            coordinator[i]="http://$target/"
            break
            ;;
        esac
    done
    # The artifact's results directory (a volume in a container) is WORK's here.
    for i in "${!coordinator[@]}"; do
        case "${coordinator[i]}" in
            --out) coordinator[i + 1]="$results" ;;
            --expect-agents) coordinator[i + 1]="$n" ;;
            --step-duration) coordinator[i + 1]=1s ;;
        esac
    done
else
    pki="$work/pki"
    coordinator=("$bin/stampede" run "http://$target/" --model requests --steps "20,40" --step-duration 1s
        --token-file "$work/token" --tls-cert "$pki/coordinator.crt" --tls-key "$pki/coordinator.key"
        --tls-ca "$pki/ca.crt" --out "$results" --quiet)
    if [ -n "$join_port" ]; then
        coordinator+=(--listen "127.0.0.1:$join_port" --expect-agents "$n" --wait-agents 20s)
    else
        agents=
        for p in "${listen_ports[@]}"; do agents="${agents:+$agents,}127.0.0.1:$p"; done
        coordinator+=(--agents "$agents")
    fi
fi

# Agents started after the coordinator: those that join, and dialed ones it waits for (--expect-agents),
# a second later, as a fleet that is still starting.
late=false
if [ -n "$join_port" ] || [ -n "$(flag coordinator --expect-agents)" ]; then
    late=true
fi
if ! $late; then
    for ((i = 1; i <= n; i++)); do start_agent "$i"; done
fi
coordinator_log="$work/coordinator.log"
with_run "$work/coordinator.root/run" "${coordinator[@]}" >"$coordinator_log" 2>&1 &
coordinator_pid=$!
pids+=("$coordinator_pid")
if $late; then
    [ -n "$join_port" ] || sleep 1
    for ((i = 1; i <= n; i++)); do start_agent "$i"; done
fi
# Bounded: the coordinator's own deadlines end a run; past 120 s something hangs.
for _ in $(seq 1 1200); do
    kill -0 "$coordinator_pid" 2>/dev/null || break
    sleep 0.1
done
kill -0 "$coordinator_pid" 2>/dev/null && die "the coordinator still runs after 120 s:"$'\n'"$(cat "$coordinator_log")"
rc=0
wait "$coordinator_pid" || rc=$?
if [ "$rc" -ne 0 ]; then
    for ((i = 1; i <= n; i++)); do echo "--- agent $i: ${agent_files[i - 1]}" >&2 && cat "$work/agent-$i.log" >&2; done
    die "the coordinator exited $rc:"$'\n'"$(cat "$coordinator_log")"
fi
python3 - "$results/run.json" "$n" <<'EOF'
import json, sys
run = json.load(open(sys.argv[1]))
want = int(sys.argv[2])
problems = []
if run["status"] != "completed":
    problems.append(f"status {run['status']}")
if len(run["agents"]) != want:
    problems.append(f"{len(run['agents'])} agents, not {want}")
if not run["steps"]:
    problems.append("no step")
for s in run["steps"]:
    # degraded is the generator judging its own machine (a busy CI host's timer lag), not the artifact.
    if s["trust"] == "invalid" or s["ok"] == 0:
        problems.append(f"step {s['step']}: trust {s['trust']}, {s['ok']} ok ({'; '.join(s.get('reasons', []))})")
if problems:
    sys.exit(f"ramp.sh: {sys.argv[1]}: " + "; ".join(problems))
trust = ", ".join(s["trust"] for s in run["steps"])
print(f"ramp.sh: {len(run['steps'])} steps ({trust}) over {want} agent(s) with mutual TLS and the token")
EOF
