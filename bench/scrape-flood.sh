#!/usr/bin/env bash
# bench/scrape-flood.sh: what a /metrics scrape flood costs a run (issue 35, item 5). The same ramp
# with --live, quiet ("quiet") and with wrk hammering /metrics with the page's token from one address
# ("flood"), the two taking turns. For each run: the coordinator's CPU (user+sys, from /usr/bin/time),
# the generator's lag p99 per step and the steps' trust (from run.json), and what wrk got (requests,
# the share answered 429). The embedded agent shares the coordinator's process, so a flood that took
# the run's time would show as lag and as `degraded` steps. See docs/benchmarks.md, "A /metrics flood".
#
#   bench/scrape-flood.sh                          # 3 repetitions, 1000,2000,3000 req/s, 5 s steps
#   REPS=1 STEP_DURATION=2 bench/scrape-flood.sh   # a quick check that everything works
#
# Settings (environment variables):
#   REPS=3 STEPS=1000,2000,3000 STEP_DURATION=5   the ramp (--model requests, embedded agent)
#   CONNS=16                   wrk's connections to /metrics (one thread, one address)
#   PORT=18410                 the target (stampede serve --threads 1); --live on PORT+1
#   STAMPEDE                   the binary (default: target/release/stampede, built if missing)
set -euo pipefail

die() { echo "scrape-flood.sh: $*" >&2; exit 2; }
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
REPS=${REPS:-3}
STEPS=${STEPS:-1000,2000,3000}
STEP_DURATION=${STEP_DURATION:-5}
CONNS=${CONNS:-16}
PORT=${PORT:-18410}
for v in REPS STEP_DURATION CONNS PORT; do
    [[ ${!v} =~ ^[0-9]+$ ]] || die "$v must be a non-negative integer (got '${!v}')"
done
[[ $STEPS =~ ^[0-9]+(,[0-9]+)*$ ]] || die "STEPS is a comma-separated list of rates (got '$STEPS')"
(( REPS >= 1 && REPS <= 20 && STEP_DURATION >= 2 && STEP_DURATION <= 120 && CONNS >= 1 && CONNS <= 256 )) ||
    die "1 <= REPS <= 20, 2 <= STEP_DURATION <= 120, 1 <= CONNS <= 256, please"
for tool in wrk python3 timeout /usr/bin/time; do
    command -v "$tool" >/dev/null || die "needs $tool (apt-get install wrk python3 coreutils time)"
done
LIVE_PORT=$((PORT + 1))
NSTEPS=$(tr ',' '\n' <<<"$STEPS" | wc -l)
RAMP_S=$((NSTEPS * STEP_DURATION))
STAMPEDE=${STAMPEDE:-$ROOT/target/release/stampede}
if [[ ! -x $STAMPEDE ]]; then
    (cd "$ROOT" && cargo build --release -q --bin stampede) || die "cannot build stampede"
fi

WORK=$(mktemp -d)
PIDS=()
cleanup() {
    local p
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

"$STAMPEDE" serve --listen "127.0.0.1:$PORT" --threads 1 >"$WORK/serve.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 1 100); do
    (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && break
    sleep 0.1
done

# One run: $1 the mode (quiet|flood), $2 its directory. Prints one line of results.
run_once() {
    local mode=$1 dir=$2 flood_pid='' url=''
    /usr/bin/time -f '%U %S' -o "$dir.time" timeout $((RAMP_S + 60)) \
        "$STAMPEDE" run "http://127.0.0.1:$PORT/" --model requests --steps "$STEPS" \
        --step-duration "${STEP_DURATION}s" --live "127.0.0.1:$LIVE_PORT" --out "$dir" \
        >"$dir.out" 2>"$dir.err" &
    local run=$!
    # The page's address as the run says it on stderr (on loopback without a token, none in it).
    for _ in $(seq 1 300); do
        url=$(grep -o "http://127.0.0.1:$LIVE_PORT/[^ ]*" "$dir.err" 2>/dev/null | head -1 || true)
        [[ -n $url ]] && break
        sleep 0.1
    done
    [[ -n $url ]] || die "the run said no live address: $(head -c 400 "$dir.err")"
    if [[ $mode == flood ]]; then
        local metrics="${url%%\?*}metrics"
        [[ $url == *\?* ]] && metrics="$metrics?${url#*\?}"
        wrk -t1 -c"$CONNS" -d"${RAMP_S}s" "$metrics" >"$dir.wrk" 2>&1 &
        flood_pid=$!
    fi
    wait "$run" || die "the $mode run failed: $(tail -c 400 "$dir.err")"
    [[ -n $flood_pid ]] && { kill "$flood_pid" 2>/dev/null || true; wait "$flood_pid" 2>/dev/null || true; }
    python3 - "$mode" "$dir" <<'EOF'
import json, re, sys
mode, d = sys.argv[1], sys.argv[2]
run = json.load(open(d + "/run.json"))
user, sys_ = (float(x) for x in open(d + ".time").read().split()[-2:])
lags = [s["generator"]["lag_p99_ms"] for s in run["steps"]]
trust = [s["trust"] for s in run["steps"]]
flood = ""
try:
    w = open(d + ".wrk").read()
    total = int(re.search(r"(\d+) requests in", w).group(1))
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", w)
    n429 = int(non2xx.group(1)) if non2xx else 0
    flood = f"wrk {total} requests, {n429} answered 429 or other non-2xx"
except FileNotFoundError:
    pass
print(f"{mode:5}  cpu {user + sys_:5.2f} s  lag p99 by step {' '.join(f'{l:.2f}' for l in lags)} ms"
      f"  max {max(lags):.2f}  not valid {sum(t != 'valid' for t in trust)}/{len(trust)}  {flood}")
EOF
}

echo "scrape-flood.sh: $REPS x (quiet, flood), steps $STEPS req/s of ${STEP_DURATION} s, $CONNS wrk connections" >&2
for (( r = 1; r <= REPS; r++ )); do
    for mode in quiet flood; do
        run_once "$mode" "$WORK/$mode-$r"
    done
done
