#!/bin/sh
# A run's length against its plan, with and without a server monitor. Against `stampede serve` on
# loopback, each case is a ramp of STEPS steps of STEP; the embedded monitor watches the target by its
# pid (--monitor-pid). The table gives the plan line's estimate ("~X in all"), the wall time of the
# whole command (the process's start and its files included) and the gap per step: (wall - planned
# schedule) / steps. Then `stampede demo`, which starts its own target and monitor, the same way.
#
#   bench/monitored.sh                  # 3 steps of 2 s, and 5 steps of 1 s
#   STEPS=10 STEP=1s bench/monitored.sh
#
# Environment: STEPS, STEP (one case instead of the two), BIN (directory of the binaries; default:
# build this checkout's, release). Loopback only; every run is a bounded ramp.
set -eu

here=$(cd "$(dirname "$0")/.." && pwd)
if [ -z "${BIN:-}" ]; then
    (cd "$here" && cargo build --release --quiet --bins)
    BIN=${CARGO_TARGET_DIR:-$here/target}/release
fi
work=$(mktemp -d)
target_pid=
cleanup() {
    # Only the process this script started, by its id.
    [ -n "$target_pid" ] && kill "$target_pid" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT INT TERM

# The address a process wrote to its --ready-file once bound; wait for it (bounded: 10 s).
ready_of() {
    i=0
    while [ $i -lt 100 ]; do
        a=$(sed -n 's/.*"listen":"\([^"]*\)".*/\1/p' "$1" 2>/dev/null || true)
        if [ -n "$a" ]; then echo "$a"; return 0; fi
        sleep 0.1
        i=$((i + 1))
    done
    echo "not ready: $(cat "$2")" >&2
    return 1
}

now() { date +%s.%N; }

"$BIN/stampede" serve --listen 127.0.0.1:0 --ready-file "$work/target.ready" 2>"$work/target.err" &
target_pid=$!
target=$(ready_of "$work/target.ready" "$work/target.err")
echo "target http://$target/; binaries $BIN"
printf '%-8s %-10s %-14s %10s %10s %12s\n' steps monitor plan_line scheduled wall gap/step

# One case: steps, step length in seconds, and whether a monitor watches.
case_of() {
    n=$1 secs=$2 mon=$3
    rates=$(seq -s, 10 10 $((n * 10)))
    out="$work/run-$n-$secs-$mon"
    set -- run "http://$target/" --steps "$rates" --step-duration "${secs}s" --out "$out"
    if [ "$mon" = yes ]; then set -- "$@" --monitor-pid "$target_pid"; fi
    t0=$(now)
    "$BIN/stampede" "$@" >/dev/null 2>"$out.err"
    t1=$(now)
    plan=$(sed -n 's/.*, ~\(.*\) in all;.*/\1/p' "$out.err" | head -1)
    awk -v n="$n" -v s="$secs" -v m="$mon" -v p="$plan" -v a="$t0" -v b="$t1" 'BEGIN {
        wall = b - a; sched = n * s
        printf "%-8s %-10s %-14s %9.1fs %9.2fs %11.2fs\n", n "x" s "s", m, "~" p, sched, wall, (wall - sched) / n
    }'
}

if [ -n "${STEPS:-}" ]; then
    secs=${STEP:-1s}
    secs=${secs%s}
    case_of "$STEPS" "$secs" no
    case_of "$STEPS" "$secs" yes
else
    for c in "3 2" "5 1"; do
        # shellcheck disable=SC2086 # two words on purpose
        case_of $c no
        # shellcheck disable=SC2086
        case_of $c yes
    done
fi

# The demo: its own target and monitor, a ramp past the knee.
t0=$(now)
"$BIN/stampede" demo --out "$work/demo" >/dev/null 2>"$work/demo.err"
t1=$(now)
plan=$(sed -n 's/.*~\([^;]*\) in all.*/\1/p' "$work/demo.err" | head -1)
awk -v p="$plan" -v a="$t0" -v b="$t1" 'BEGIN { printf "demo: plan line ~%s, wall %.2fs\n", p, b - a }'
