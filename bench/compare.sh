#!/usr/bin/env bash
# bench/compare.sh: stampede against wrk, oha and httperf, one nginx worker on loopback, interleaved
# repetitions, requests counted by nginx, CPU taken from the OS. See docs/benchmarks.md.
#
#   bench/compare.sh                      # 5 repetitions x 10 s per run, about 9 minutes
#   REPS=1 DURATION=3 bench/compare.sh    # a quick check that everything works
#
# Settings (environment variables):
#   REPS=5            repetitions of every case; the tools take turns within each repetition
#   DURATION=10       seconds per run
#   CONNS=50          connections (closed loop) or connection-pool size (open loop)
#   RATE              open-loop requests/s; default RATE_FRACTION (0.8) x stampede's median closed-loop rate
#   CONN_RATE         connections/s for the new-connection case; default CONN_FRACTION (0.5) x the rate
#                     wrk -H 'Connection: close' reaches in a calibration run
#   CASES="closed open conn"   which cases to run
#   PORT=18080        nginx's port on 127.0.0.1
#   OUT               results directory (default bench-results/<UTC time>/)
#   STAMPEDE          a stampede binary to use instead of building one
#   PAUSE=1           seconds between runs
#   SERVER_CPU=0 GEN_CPU=1     CPUs for nginx and for the generators
#   STAMPEDE_BENCH_NO_OHA      set to leave oha out (neither installed nor run)
set -euo pipefail

die() { echo "compare.sh: $*" >&2; exit 2; }
say() { echo "$*" >&2; }

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
HELPER=$ROOT/bench/compare.py
PYTHON=${PYTHON:-python3}

REPS=${REPS:-5}
DURATION=${DURATION:-10}
CONNS=${CONNS:-50}
PORT=${PORT:-18080}
PAUSE=${PAUSE:-1}
SERVER_CPU=${SERVER_CPU:-0}
GEN_CPU=${GEN_CPU:-1}
CASES=${CASES:-closed open conn}
RATE=${RATE:-}
CONN_RATE=${CONN_RATE:-}
RATE_FRACTION=${RATE_FRACTION:-0.8}   # default RATE: this share of stampede's closed-loop rate
CONN_FRACTION=${CONN_FRACTION:-0.5}   # default CONN_RATE: this share of wrk's Connection: close rate
# (0.5, not 0.8: wrk's close rate is the server's limit, and an open-loop generator driven near the knee
# piles up connections whenever the server or its own core hiccups; see docs/benchmarks.md)

is_uint() { [[ $1 =~ ^[0-9]+$ ]] && (( $1 > 0 )); }
for v in REPS DURATION CONNS PORT; do is_uint "${!v}" || die "$v must be a positive integer (got '${!v}')"; done
[[ $PAUSE =~ ^[0-9]+([.][0-9]+)?$ ]] || die "PAUSE must be a number of seconds (got '$PAUSE')"
[[ -z $RATE ]] || is_uint "$RATE" || die "RATE must be a positive integer (got '$RATE')"
[[ -z $CONN_RATE ]] || is_uint "$CONN_RATE" || die "CONN_RATE must be a positive integer (got '$CONN_RATE')"
for c in $CASES; do [[ $c == closed || $c == open || $c == conn ]] || die "unknown case '$c' in CASES (closed open conn)"; done
(( REPS <= 100 && DURATION <= 3600 )) || die "REPS <= 100 and DURATION <= 3600, please"

OUT=${OUT:-$ROOT/bench-results/$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$OUT/raw"
OUT=$(cd "$OUT" && pwd)
RAW=$OUT/runs.jsonl
CALIB=$OUT/calibration.jsonl
: >"$RAW"
: >"$CALIB"

# ------------------------------------------------------------------ tools

need_pkgs=()
command -v nginx >/dev/null || [[ -x /usr/sbin/nginx ]] || need_pkgs+=(nginx-light)
command -v wrk >/dev/null || need_pkgs+=(wrk)
command -v httperf >/dev/null || need_pkgs+=(httperf)
[[ -x /usr/bin/time ]] || need_pkgs+=(time)
command -v taskset >/dev/null || need_pkgs+=(util-linux)
command -v "$PYTHON" >/dev/null || need_pkgs+=(python3)
if (( ${#need_pkgs[@]} )); then
    sudo=()
    (( EUID == 0 )) || sudo=(sudo)
    say "installing ${need_pkgs[*]}"
    "${sudo[@]}" apt-get install -y "${need_pkgs[@]}" ||
        { "${sudo[@]}" apt-get update && "${sudo[@]}" apt-get install -y "${need_pkgs[@]}"; } ||
        die "could not install ${need_pkgs[*]}; install them and run again"
fi
NGINX=$(command -v nginx || echo /usr/sbin/nginx)

OHA=
if [[ -n ${STAMPEDE_BENCH_NO_OHA:-} ]]; then
    say "note: STAMPEDE_BENCH_NO_OHA is set: oha left out"
elif command -v oha >/dev/null; then
    OHA=$(command -v oha)
elif [[ -x ${CARGO_HOME:-$HOME/.cargo}/bin/oha ]]; then
    OHA=${CARGO_HOME:-$HOME/.cargo}/bin/oha
else
    say "oha not found: cargo install oha --locked (a few minutes; log in $OUT/oha-install.log)"
    if command -v cargo >/dev/null &&
        timeout 3600 cargo install oha --locked >"$OUT/oha-install.log" 2>&1 &&
        [[ -x ${CARGO_HOME:-$HOME/.cargo}/bin/oha ]]; then
        OHA=${CARGO_HOME:-$HOME/.cargo}/bin/oha
    else
        say "note: oha could not be installed (see $OUT/oha-install.log): oha is left out"
    fi
fi

with_oha=()
[[ -n $OHA ]] && with_oha=(oha)

if [[ -n ${STAMPEDE:-} ]]; then
    [[ -x $STAMPEDE ]] || die "STAMPEDE=$STAMPEDE is not an executable"
else
    say "building stampede (cargo build --release --bin stampede)"
    (cd "$ROOT" && cargo build --release --bin stampede) || die "cargo build failed"
    target_dir=$(cd "$ROOT" && cargo metadata --no-deps --format-version 1 |
        "$PYTHON" -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
    STAMPEDE=$target_dir/release/stampede
fi

# ------------------------------------------------------------------ nginx

TMP=$(mktemp -d "${TMPDIR:-/tmp}/stampede-bench.XXXXXX")
NGINX_WRAPPER=   # the `timeout` that bounds nginx's life even if this script is killed with SIGKILL
NGINX_PIDS=()    # master and worker

cleanup() {
    local rc=$? pid i
    trap - EXIT INT TERM
    if [[ -n $NGINX_WRAPPER ]]; then
        kill -TERM "$NGINX_WRAPPER" 2>/dev/null || true   # timeout forwards it to nginx: fast shutdown
        for pid in "${NGINX_PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
        for (( i = 0; i < 50; i++ )); do
            kill -0 "$NGINX_WRAPPER" 2>/dev/null || break
            sleep 0.1
        done
        for pid in "$NGINX_WRAPPER" "${NGINX_PIDS[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
        wait "$NGINX_WRAPPER" 2>/dev/null || true
        cp "$TMP/error.log" "$OUT/nginx-error.log" 2>/dev/null || true
    fi
    rm -rf "$TMP"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; then
    die "something already listens on 127.0.0.1:$PORT; choose another PORT"
fi

# File descriptors: ask for 65536; settle for the hard limit when we may not raise it.
ulimit -Hn 65536 2>/dev/null || true
NOFILE=$(ulimit -Hn)
[[ $NOFILE == unlimited ]] && NOFILE=65536
(( NOFILE > 65536 )) && NOFILE=65536
ulimit -n "$NOFILE"
(( NOFILE >= 65536 )) || say "note: open-file limit is $NOFILE (hard limit), nginx gets worker_rlimit_nofile $NOFILE"

mkdir -p "$TMP/tmp"
cat >"$TMP/nginx.conf" <<EOF
worker_processes 1;
daemon off;
master_process on;
pid $TMP/nginx.pid;
error_log $TMP/error.log warn;
worker_rlimit_nofile $NOFILE;
events {
    worker_connections 20000;
}
http {
    access_log off;
    keepalive_requests 1000000;
    keepalive_timeout 75s;
    default_type text/plain;
    client_body_temp_path $TMP/tmp/body;
    proxy_temp_path $TMP/tmp/proxy;
    fastcgi_temp_path $TMP/tmp/fastcgi;
    uwsgi_temp_path $TMP/tmp/uwsgi;
    scgi_temp_path $TMP/tmp/scgi;
    server {
        listen 127.0.0.1:$PORT backlog=4096;
        location = /nginx_status { stub_status; }
        location / { return 200 "hello\n"; }
    }
}
EOF

RUNS_PER_REP=0
for c in $CASES; do
    case $c in closed) RUNS_PER_REP=$((RUNS_PER_REP + 3)) ;; conn) RUNS_PER_REP=$((RUNS_PER_REP + 5 + ${#with_oha[@]})) ;; open) RUNS_PER_REP=$((RUNS_PER_REP + 2)) ;; esac
done
# Upper bound on the whole run (every run hitting its own time limit), so nginx cannot outlive us.
RUN_LIMIT=$((2 * DURATION + 20))
NGINX_LIFE=$(( (REPS * RUNS_PER_REP + 2) * (RUN_LIMIT + 10) + 300 ))

taskset -c "$SERVER_CPU" timeout -k 5 "$NGINX_LIFE" "$NGINX" -p "$TMP" -c "$TMP/nginx.conf" -e "$TMP/error.log" \
    </dev/null >"$TMP/nginx.out" 2>&1 &
NGINX_WRAPPER=$!

scrape() { "$PYTHON" "$HELPER" scrape "$PORT"; }
for (( i = 0; i < 100; i++ )); do
    kill -0 "$NGINX_WRAPPER" 2>/dev/null || { cat "$TMP/nginx.out" "$TMP/error.log" >&2 2>/dev/null; die "nginx did not start"; }
    [[ -s $TMP/nginx.pid ]] && scrape >/dev/null 2>&1 && break
    sleep 0.1
done
scrape >/dev/null || die "nginx did not answer on 127.0.0.1:$PORT"
master=$(<"$TMP/nginx.pid")
mapfile -t workers < <(ps -o pid= --ppid "$master" | tr -d ' ')
NGINX_PIDS=("$master" "${workers[@]}")
URL=http://127.0.0.1:$PORT/

# ------------------------------------------------------------------ machine facts

first_line() { { "$@" 2>&1 || true; } | head -n1; }
{
    printf 'date\t%s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)"
    printf 'nproc\t%s\n' "$(nproc)"
    printf 'cpu\t%s\n' "$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n1)"
    printf 'kernel\t%s\n' "$(uname -srm)"
    printf 'governor\t%s\n' "$(cat /sys/devices/system/cpu/cpu0/cpufreq/scaling_governor 2>/dev/null || echo -)"
    printf 'loadavg at start\t%s\n' "$(cut -d' ' -f1-3 /proc/loadavg)"
    printf 'pinning\tnginx on CPU %s, generators on CPU %s\n' "$SERVER_CPU" "$GEN_CPU"
    printf 'open files\t%s\n' "$NOFILE"
    printf 'tcp_tw_reuse\t%s\n' "$(cat /proc/sys/net/ipv4/tcp_tw_reuse 2>/dev/null || echo -)"
    printf 'port range\t%s\n' "$(tr '\t' ' ' </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo -)"
    printf 'stampede\t%s (%s, commit %s)\n' "$(first_line "$STAMPEDE" --version)" "$STAMPEDE" \
        "$(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo -)"
    printf 'nginx\t%s\n' "$(first_line "$NGINX" -v)"
    printf 'wrk\t%s\n' "$(first_line wrk -v | sed 's/ Copyright.*//')"
    printf 'httperf\t%s\n' "$({ timeout 5 httperf --version --server 127.0.0.1 --port "$PORT" --uri /nginx_status \
        --num-conns 1 2>/dev/null || true; } | grep -m1 -o 'httperf-[0-9.]*' || echo -)"
    printf 'oha\t%s\n' "$([[ -n $OHA ]] && first_line "$OHA" --version || echo 'not used')"
    printf 'settings\tREPS=%s DURATION=%ss CONNS=%s PAUSE=%ss CASES=%s\n' "$REPS" "$DURATION" "$CONNS" "$PAUSE" "${CASES// /,}"
} >"$OUT/machine.tsv"
sed 's/\t/: /' "$OUT/machine.tsv" >&2

est=$(( REPS * RUNS_PER_REP * (DURATION + 2) ))
say ""
say "$REPS rep(s) x $RUNS_PER_REP runs of ${DURATION}s (plus calibration when RATE/CONN_RATE are unset): about $((est / 60 + 1)) min; results in $OUT"

# ------------------------------------------------------------------ one run

# run_one RAWFILE CASE TOOL REP POSITION TARGET_RATE -- COMMAND...
# Runs COMMAND on the generator CPU under /usr/bin/time and a time limit, with a stub_status scrape on
# either side, and records it. "@DIR@" in COMMAND is replaced by the run's own directory.
run_one() {
    local raw=$1 case=$2 tool=$3 rep=$4 pos=$5 rate=$6
    shift 7
    local dir=$OUT/raw/$case-$rep-$tool
    [[ $raw == "$CALIB" ]] && dir=$OUT/raw/calibration-$case-$tool
    mkdir -p "$dir"
    local args=() a
    for a in "$@"; do args+=("${a//@DIR@/$dir}"); done
    printf '%q ' "${args[@]}" >"$dir/cmd"
    sleep "$PAUSE"
    local before after rc=0
    before=$(scrape)
    taskset -c "$GEN_CPU" /usr/bin/time -o "$dir/time" -f '%e %U %S %M' \
        timeout --foreground -k 5 "$RUN_LIMIT" "${args[@]}" >"$dir/stdout" 2>"$dir/stderr" || rc=$?
    after=$(scrape)
    local json=
    [[ $tool == oha ]] && json=$dir/stdout
    [[ $tool == stampede* ]] && json=$dir/stampede/run.json
    "$PYTHON" "$HELPER" record --raw "$raw" --case "$case" --tool "$tool" --rep "$rep" --position "$pos" \
        --rc "$rc" ${rate:+--target-rate "$rate"} --cmd "$(<"$dir/cmd")" --stdout "$dir/stdout" \
        ${json:+--json "$json"} --time-file "$dir/time" --before "$before" --after "$after"
}

# The command lines, one function per case and tool: cmd_CASE_TOOL RATE prints nothing, sets CMD.
cmd_closed_stampede() { CMD=("$STAMPEDE" run "$URL" --model concurrency --steps "$CONNS" --step-duration "${DURATION}s" --threads 1 --out @DIR@/stampede --quiet); }
cmd_closed_wrk() { CMD=(wrk -t1 -c"$CONNS" -d"${DURATION}s" --latency "$URL"); }
cmd_closed_oha() { CMD=("$OHA" -c "$CONNS" -z "${DURATION}s" --worker-threads 1 --no-tui --output-format json "$URL"); }
cmd_open_stampede() { CMD=("$STAMPEDE" run "$URL" --model requests --steps "$1" --max-connections "$CONNS" --step-duration "${DURATION}s" --threads 1 --out @DIR@/stampede --quiet); }
cmd_open_oha() { CMD=("$OHA" -q "$1" -c "$CONNS" -z "${DURATION}s" --worker-threads 1 --latency-correction --no-tui --output-format json "$URL"); }
cmd_conn_stampede() { CMD=("$STAMPEDE" run "$URL" -H 'Connection: close' --model connections --num-call 1 --steps "$1" --step-duration "${DURATION}s" --threads 1 --out @DIR@/stampede --quiet); }
cmd_conn_stampede-closed() { CMD=("$STAMPEDE" run "$URL" -H 'Connection: close' --model concurrency --steps "$CONNS" --step-duration "${DURATION}s" --threads 1 --out @DIR@/stampede --quiet); }
cmd_conn_wrk() { CMD=(wrk -t1 -c"$CONNS" -d"${DURATION}s" --latency -H 'Connection: close' "$URL"); }
# The same open loop as stampede's at the same rate: oha without keep-alive (it paces with tokio's 1 ms timer).
cmd_conn_oha() { CMD=("$OHA" -q "$1" -c "$CONNS" -z "${DURATION}s" --worker-threads 1 --disable-keepalive --latency-correction --no-tui --output-format json "$URL"); }
# wrk's closed loop on one connection: the load at which its target and it sleep between connections,
# as an open loop's do at half the server's rate (see docs/benchmarks.md).
cmd_conn_wrk-1conn() { CMD=(wrk -t1 -c1 -d"${DURATION}s" --latency -H 'Connection: close' "$URL"); }
cmd_conn_httperf() { CMD=(httperf --server 127.0.0.1 --port "$PORT" --uri / --rate "$1" --num-conns $(( $1 * DURATION )) --num-calls 1 --timeout 5 --add-header 'Connection: close\n'); }

# run_case CASE RATE TOOL... : REPS repetitions, tools interleaved, order rotated by one each repetition.
run_case() {
    local case=$1 rate=$2
    shift 2
    local tools=("$@") n=$# rep k tool
    for (( rep = 1; rep <= REPS; rep++ )); do
        for (( k = 0; k < n; k++ )); do
            tool=${tools[$(( (k + rep - 1) % n ))]}
            "cmd_${case}_${tool}" "$rate"
            run_one "$RAW" "$case" "$tool" "$rep" "$((k + 1))" "$rate" -- "${CMD[@]}"
        done
    done
}

median_of() { "$PYTHON" "$HELPER" median --raw "$1" "$2" "$3" "$4"; }
share() { "$PYTHON" -c "import sys; print(max(1, int(float(sys.argv[1]) * float(sys.argv[2]))))" "$1" "$2"; }

# ------------------------------------------------------------------ the cases

for c in $CASES; do
    case $c in
    closed)
        say ""
        say "== closed: $CONNS keep-alive connections, closed loop =="
        run_case closed "" stampede wrk "${with_oha[@]}"
        ;;
    open)
        rate=$RATE
        if [[ -z $rate ]]; then
            m=$(median_of "$RAW" closed stampede req_s)
            if [[ -z $m ]]; then
                say "calibration: stampede closed loop, to choose the open-loop rate"
                cmd_closed_stampede
                run_one "$CALIB" closed stampede 0 0 "" -- "${CMD[@]}"
                m=$(median_of "$CALIB" closed stampede req_s)
            fi
            [[ -n $m ]] || die "could not measure a closed-loop rate; set RATE"
            rate=$(share "$m" "$RATE_FRACTION")
            say "open-loop rate: $rate req/s (${RATE_FRACTION} x stampede's closed-loop median $m req/s)"
        fi
        say ""
        say "== open: $rate req/s over a keep-alive pool of at most $CONNS =="
        run_case open "$rate" stampede "${with_oha[@]}"
        ;;
    conn)
        rate=$CONN_RATE
        if [[ -z $rate ]]; then
            say "calibration: wrk -c$CONNS with Connection: close, to choose the connection rate"
            cmd_conn_wrk
            run_one "$CALIB" conn wrk 0 0 "" -- "${CMD[@]}"
            m=$(median_of "$CALIB" conn wrk conn_s)
            [[ -n $m ]] || die "could not measure a connection rate; set CONN_RATE"
            rate=$(share "$m" "$CONN_FRACTION")
            say "connection rate: $rate conn/s (${CONN_FRACTION} x wrk's $m conn/s with Connection: close)"
        fi
        say ""
        say "== conn: a new connection per request; stampede, httperf (and oha) at $rate conn/s, wrk closed loops =="
        run_case conn "$rate" stampede stampede-closed wrk wrk-1conn httperf "${with_oha[@]}"
        ;;
    esac
done

say ""
"$PYTHON" "$HELPER" report --raw "$RAW" --machine "$OUT/machine.tsv" --outdir "$OUT" --conns "$CONNS"
say "raw results: $OUT/runs.jsonl, $OUT/runs.tsv; tool outputs: $OUT/raw/"
