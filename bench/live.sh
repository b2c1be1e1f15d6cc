#!/usr/bin/env bash
# bench/live.sh: what `--live` costs the coordinator (issue 24). The same ramp over AGENTS agents on
# loopback, run without --live ("off") and with it ("live": READERS stream readers of /events standing
# for the browsers' pages, one real headless Chromium on the page, and a real Prometheus scraping
# /metrics every second), the two taking turns. The coordinator's CPU is read from /proc/PID/stat
# over the ramp (steps x duration - 1 s from the first step's start in events.ndjson; events.ndjson is
# written either way, so the difference is serving); each reader timestamps every interval as it arrives
# against the interval's merged_unix_ms. See docs/benchmarks.md, "The live page and /metrics".
#
#   bench/live.sh                                   # 3 repetitions of each, 100 agents, 3 x 15 s steps
#   REPS=1 AGENTS=4 STEP_DURATION=3 bench/live.sh   # a quick check that everything works
#
# Settings (environment variables):
#   REPS=3                 repetitions of each mode (off, live, off, live, ...)
#   AGENTS=100             stampede-agent processes on 127.0.0.1 (--threads 1 each)
#   STEPS=200,400,600      the ramp, requests/s over all agents (--model requests), kept small: the
#   STEP_DURATION=15       coordinator is measured, not the target; seconds per step
#   READERS=5              curl -sN readers of /events in the live runs
#   CHROMIUM=1             also one headless Chromium on the live page (0: none; skipped if missing)
#   PORT=18310             the target (stampede serve --threads 1); --live on PORT+1, Prometheus PORT+2
#   STAMPEDE, AGENT        binaries (default: target/release/stampede and stampede-agent, built if missing)
#   KEEP=                  a directory to keep the runs, the readers' delays and the logs in
set -euo pipefail

die() { echo "live.sh: $*" >&2; exit 2; }
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
HELPER=$ROOT/bench/live.py
REPS=${REPS:-3}
AGENTS=${AGENTS:-100}
STEPS=${STEPS:-200,400,600}
STEP_DURATION=${STEP_DURATION:-15}
READERS=${READERS:-5}
CHROMIUM=${CHROMIUM:-1}
PORT=${PORT:-18310}
is_uint() { [[ $1 =~ ^[0-9]+$ ]]; }
for v in REPS AGENTS STEP_DURATION READERS CHROMIUM PORT; do
    is_uint "${!v}" || die "$v must be a non-negative integer (got '${!v}')"
done
[[ $STEPS =~ ^[0-9]+(,[0-9]+)*$ ]] || die "STEPS is a comma-separated list of rates (got '$STEPS')"
(( REPS >= 1 && REPS <= 20 && AGENTS >= 1 && AGENTS <= 500 && STEP_DURATION >= 2 && STEP_DURATION <= 600 )) ||
    die "1 <= REPS <= 20, 1 <= AGENTS <= 500, 2 <= STEP_DURATION <= 600, please"
(( READERS <= 30 )) || die "READERS <= 30 (the live server seats 32 viewers from one address)"
LIVE_PORT=$((PORT + 1))
PROM_PORT=$((PORT + 2))
NSTEPS=$(tr ',' '\n' <<<"$STEPS" | wc -l)
RAMP_S=$((NSTEPS * STEP_DURATION))
# The CPU is read over a window of the ramp, from its first step's start, clear of its end.
WINDOW_S=$((RAMP_S - 1))
# Every wait is bounded: a run gets its ramp plus a minute.
RUN_TIMEOUT=$((RAMP_S + 60))
for tool in curl python3 prometheus pgrep ss timeout setsid /usr/bin/time; do
    command -v "$tool" >/dev/null ||
        die "needs $tool (apt-get install curl python3 prometheus procps iproute2 coreutils util-linux time)"
done
if (( CHROMIUM )) && ! command -v chromium >/dev/null; then
    echo "live.sh: no chromium on PATH: the live runs have no real browser, only the $READERS readers" >&2
    CHROMIUM=0
fi
STAMPEDE=${STAMPEDE:-$ROOT/target/release/stampede}
AGENT=${AGENT:-$ROOT/target/release/stampede-agent}
if [[ ! -x $STAMPEDE || ! -x $AGENT ]]; then
    (cd "$ROOT" && cargo build --release -q -p coordinator -p agent) || die "cannot build stampede"
fi

WORK=$(mktemp -d)
PIDS=()       # the target, the agents and Prometheus, killed by the trap
RUN_PIDS=()   # a run's processes (the coordinator, its readers), killed by the trap mid-run
CHROME_PID=   # Chromium's process group (setsid), killed whole
cleanup() {
    local p
    [[ -n $CHROME_PID ]] && { kill -- "-$CHROME_PID" 2>/dev/null || true; }
    for p in "${RUN_PIDS[@]}" "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    if [[ -n ${KEEP:-} ]]; then
        mkdir -p "$KEEP" && cp -r "$WORK"/. "$KEEP"/ && echo "live.sh: kept in $KEEP" >&2
    fi
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Polls `$@` every 0.1 s for at most $1 seconds.
wait_for() {
    local secs=$1; shift
    local i
    for (( i = 0; i < secs * 10; i++ )); do
        "$@" >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    return 1
}

# The target, and the agents.
"$STAMPEDE" serve --listen "127.0.0.1:$PORT" --threads 1 --ready-file "$WORK/serve.json" \
    >"$WORK/serve.log" 2>&1 &
PIDS+=($!)
python3 "$HELPER" ready "$WORK/serve.json" 30 >/dev/null || die "stampede serve did not start: $(cat "$WORK/serve.log")"
mkdir "$WORK/agents"
for (( i = 1; i <= AGENTS; i++ )); do
    "$AGENT" --listen 127.0.0.1:0 --threads 1 --ready-file "$WORK/agents/$i.json" \
        >"$WORK/agents/$i.log" 2>&1 &
    PIDS+=($!)
done
mapfile -t ready_files < <(for (( i = 1; i <= AGENTS; i++ )); do echo "$WORK/agents/$i.json"; done)
python3 "$HELPER" ready "${ready_files[@]}" 120 >"$WORK/agents.txt" ||
    die "not all $AGENTS agents started (first log: $(head -c 500 "$WORK/agents/1.log"))"
echo "live.sh: $AGENTS agents and the target on 127.0.0.1:$PORT are up" >&2

# Prometheus, of our own: a 1 s scrape of the live address, which only the live runs serve.
mkdir "$WORK/prometheus"
cat >"$WORK/prometheus/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: stampede
    static_configs:
      - targets: ['127.0.0.1:$LIVE_PORT']
EOF
prometheus --config.file="$WORK/prometheus/prometheus.yml" --storage.tsdb.path="$WORK/prometheus/data" \
    --web.listen-address="127.0.0.1:$PROM_PORT" >"$WORK/prometheus/log" 2>&1 &
PIDS+=($!)
wait_for 60 curl -fs "127.0.0.1:$PROM_PORT/-/ready" ||
    die "prometheus is not ready on 127.0.0.1:$PROM_PORT: $(tail -5 "$WORK/prometheus/log")"

RESULTS=$WORK/results
: >"$RESULTS"
# One run: appends "<mode> <rep> <window cpu s> <window wall s> <life cpu s> <life wall s>" to RESULTS.
run_one() {
    local mode=$1 rep=$2
    local out=$WORK/run-$mode-$rep
    local args=(run "http://127.0.0.1:$PORT/" --agents "@$WORK/agents.txt" --model requests
        --steps "$STEPS" --step-duration "${STEP_DURATION}s" --quiet --force --out "$out")
    [[ $mode == live ]] && args+=(--live "127.0.0.1:$LIVE_PORT" --live-keep 2s)
    /usr/bin/time -f "%U %S %e" -o "$WORK/time" "$STAMPEDE" "${args[@]}" >"$WORK/run-$mode-$rep.log" 2>&1 &
    local timer=$!
    RUN_PIDS=("$timer")
    local coord=
    wait_for 10 pgrep -P "$timer" || die "$mode run $rep: the coordinator did not start"
    coord=$(pgrep -P "$timer")
    RUN_PIDS+=("$coord")
    python3 "$HELPER" cpu "$coord" "$out/events.ndjson" "$WINDOW_S" "$RUN_TIMEOUT" >"$WORK/cpu" &
    local sampler=$!
    RUN_PIDS+=("$sampler")
    local readers=()
    if [[ $mode == live ]]; then
        wait_for 30 curl -fs -o /dev/null "127.0.0.1:$LIVE_PORT/metrics" ||
            die "live run $rep: nothing serves 127.0.0.1:$LIVE_PORT ($(cat "$WORK/run-$mode-$rep.log"))"
        local r
        for (( r = 1; r <= READERS; r++ )); do
            # The server ends each stream whole when it stops (curl 0); 18 (a partial file) was an older cut.
            { timeout "$RUN_TIMEOUT" curl -sN "127.0.0.1:$LIVE_PORT/events" || [[ $? == 18 ]]; } |
                python3 "$HELPER" reader "$WORK/delays-$rep-$r" &
            readers+=($!)
            RUN_PIDS+=($!)
        done
        if (( CHROMIUM )); then
            setsid chromium --headless --no-sandbox --disable-gpu --remote-debugging-port=0 \
                --user-data-dir="$WORK/chromium-$rep" "http://127.0.0.1:$LIVE_PORT/" >"$WORK/chromium-$rep.log" 2>&1 &
            CHROME_PID=$!
        fi
        # Who is connected, a few seconds in: the readers, Chromium's page and its stream, Prometheus.
        sleep 5
        echo "live.sh: live run $rep, 5 s in: $(ss -Htn state established "( sport = :$LIVE_PORT )" | wc -l)" \
            "connections to the live address; /metrics $(curl -s -o /dev/null -w '%{size_download} bytes in %{time_total} s' \
            "127.0.0.1:$LIVE_PORT/metrics")" >&2
    fi
    wait "$sampler" || die "$mode run $rep: the CPU sampler failed ($(cat "$WORK/run-$mode-$rep.log"))"
    wait "$timer" || die "$mode run $rep failed: $(cat "$WORK/run-$mode-$rep.log")"
    if [[ -n $CHROME_PID ]]; then
        kill -- "-$CHROME_PID" 2>/dev/null || true
        CHROME_PID=
    fi
    local p
    for p in "${readers[@]}"; do wait "$p" || die "live run $rep: a reader failed"; done
    local user sys wall
    read -r user sys wall <"$WORK/time"
    RUN_PIDS=()
    echo "$mode $rep $(cat "$WORK/cpu") $(python3 -c "print(f'{$user + $sys:.2f}')") $wall" >>"$RESULTS"
    echo "live.sh: $(tail -1 "$RESULTS")" >&2
    sleep 1
}

echo "live.sh: $REPS x (off, live), steps $STEPS req/s x ${STEP_DURATION} s, $AGENTS agents, $READERS readers," \
    "chromium $CHROMIUM, prometheus 1 s" >&2
for (( rep = 1; rep <= REPS; rep++ )); do
    run_one off "$rep"
    run_one live "$rep"
done

# Prometheus's own view: its successful scrapes of /metrics (up == 1) over the bench.
prom_query() {
    curl -fsG "127.0.0.1:$PROM_PORT/api/v1/query" --data-urlencode "query=$1" |
        python3 -c 'import json, sys; r = json.load(sys.stdin)["data"]["result"]; print(r[0]["value"][1] if r else 0)'
}
scrapes=$(prom_query 'sum(sum_over_time(up{job="stampede"}[1h]))') || die "prometheus's API did not answer"
samples=$(prom_query 'max(max_over_time(scrape_samples_scraped{job="stampede"}[1h]))') ||
    die "prometheus's API did not answer"

echo
echo "coordinator: $AGENTS agents on loopback, steps $STEPS req/s x ${STEP_DURATION} s; live: $READERS /events" \
    "readers, $CHROMIUM Chromium, Prometheus every 1 s ($scrapes good scrapes in all, up to $samples" \
    "samples a scrape)"
printf '%s\n' "results (mode rep window-cpu-s window-wall-s life-cpu-s life-wall-s):"
cat "$RESULTS"
mapfile -t delay_files < <(ls "$WORK"/delays-* 2>/dev/null)
python3 "$HELPER" summary "$RESULTS" "${delay_files[@]}"
