#!/bin/sh
# Agent-side memory of idle keep-alive connections. For each connection count N, a fresh
# `stampede-agent --threads 1` holds N connections (concurrency model) to `stampede serve --delay 1s`, so
# every connection spends almost all its time idle, waiting for a reply. Its RSS is sampled every 0.5 s;
# the table gives the idle agent's RSS, the highest RSS while holding N, VmHWM, and
#   KiB per connection = (RSS(N) - RSS(idle)) / N.
#
#   bench/idle-connections.sh                    # N = 1000 and 10000, 10 s steps
#   bench/idle-connections.sh 1000 10000 20000   # any counts (each needs N descriptors on both sides)
#   SOURCE_ADDRS=127.0.0.1-127.0.0.3 bench/idle-connections.sh 30000
#
# Environment: STEP (step duration, default 10s), DELAY (target delay, default 1s), SOURCE_ADDRS (passed
# as --source-addrs), BIN (directory of release binaries; default: build this checkout's).
# Loopback only. The target runs in its own process; its memory is not counted.
set -eu

STEP=${STEP:-10s}
DELAY=${DELAY:-1s}
if [ $# -eq 0 ]; then set -- 1000 10000; fi
here=$(cd "$(dirname "$0")/.." && pwd)
if [ -z "${BIN:-}" ]; then
    (cd "$here" && cargo build --release --quiet --bins)
    BIN=${CARGO_TARGET_DIR:-$here/target}/release
fi
work=$(mktemp -d)
target_pid=
agent_pid=
cleanup() {
    # Only the processes this script started, by their id.
    [ -n "$agent_pid" ] && kill "$agent_pid" 2>/dev/null || true
    [ -n "$target_pid" ] && kill "$target_pid" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT INT TERM

kib() { # field of /proc/PID/status, in KiB (0 once the process is gone)
    awk -v f="$2:" '$1 == f { print $2; found = 1 } END { if (!found) print 0 }' "/proc/$1/status" 2>/dev/null || echo 0
}

# The address a process wrote to its --ready-file once bound; wait for it (bounded: 10 s).
ready_of() { # ready file, the process's stderr (shown if it never gets ready)
    i=0
    while [ $i -lt 100 ]; do
        a=$(sed -n 's/.*"listen":"\([^"]*\)".*/\1/p' "$1" 2>/dev/null)
        if [ -n "$a" ]; then echo "$a"; return 0; fi
        sleep 0.1
        i=$((i + 1))
    done
    echo "not ready: $(cat "$2")" >&2
    return 1
}

"$BIN/stampede" serve --listen 127.0.0.1:0 --delay "$DELAY" --ready-file "$work/target.ready" 2>"$work/target.err" &
target_pid=$!
target=$(ready_of "$work/target.ready" "$work/target.err")
echo "target http://$target/ (delay $DELAY), step $STEP, source addresses ${SOURCE_ADDRS:-none, the kernel chooses}"
# shellcheck disable=SC3045 # dash, busybox sh and bash all have ulimit -n
echo "fd limit here: $(ulimit -n); ip_local_port_range: $(cat /proc/sys/net/ipv4/ip_local_port_range | tr '\t' '-'); tcp_tw_reuse: $(cat /proc/sys/net/ipv4/tcp_tw_reuse)"
printf '%8s %10s %12s %12s %10s %12s %10s %s\n' N idle_KiB held_KiB VmHWM_KiB KiB/conn connections replies/s verdict

for n in "$@"; do
    rm -f "$work/agent.ready"
    STAMPEDE_LOG=warn "$BIN/stampede-agent" --listen 127.0.0.1:0 --threads 1 --ready-file "$work/agent.ready" 2>"$work/agent.err" &
    agent_pid=$!
    agent=$(ready_of "$work/agent.ready" "$work/agent.err")
    sleep 1
    idle=$(kib "$agent_pid" VmRSS)
    out="$work/run-$n"
    set -- --model concurrency --steps "$n" --step-duration "$STEP" --threads 1 --quiet --out "$out"
    if [ -n "${SOURCE_ADDRS:-}" ]; then set -- "$@" --source-addrs "$SOURCE_ADDRS"; fi
    "$BIN/stampede" run "http://$target/" --agents "$agent" "$@" >"$work/run.out" 2>"$work/run.err" &
    run_pid=$!
    held=0
    # Bounded by the run itself: its step, a timeout and the coordinator's own deadlines.
    while kill -0 "$run_pid" 2>/dev/null; do
        r=$(kib "$agent_pid" VmRSS)
        [ "$r" -gt "$held" ] && held=$r
        sleep 0.5
    done
    rc=0
    wait "$run_pid" || rc=$?
    hwm=$(kib "$agent_pid" VmHWM)
    kill "$agent_pid" 2>/dev/null || true
    wait "$agent_pid" 2>/dev/null || true
    agent_pid=
    if [ "$rc" -ne 0 ]; then
        echo "run with N=$n failed (exit $rc):" >&2
        cat "$work/run.err" >&2
        continue
    fi
    facts=$(python3 -c '
import json, sys
s = json.load(open(sys.argv[1]))["steps"][0]
print(s["connections"], round(s["reply_rate"]["avg"]), s["trust"])
' "$out/run.json")
    # shellcheck disable=SC2086 # split on purpose: three words, each a number or a verdict
    set -- $facts
    per=$(awk -v h="$held" -v i="$idle" -v n="$n" 'BEGIN { printf "%.1f", (h - i) / n }')
    printf '%8s %10s %12s %12s %10s %12s %10s %s\n' "$n" "$idle" "$held" "$hwm" "$per" "$1" "$2" "$3"
    grep -h "warning" "$work/run.err" || true
done
