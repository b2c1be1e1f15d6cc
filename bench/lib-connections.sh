# shellcheck shell=bash
# bench/lib-connections.sh: what bench/connections.sh and bench/connections-tls.sh share, sourced by
# both (bash). The caller sets NAME (for messages), SUFFIX (OUT's default suffix), PORT, STATUS_PORT and
# RATES' default before sourcing; this file checks the settings, finds the tools, builds stampede when
# STAMPEDE is not given, and has nginx's life, the machine facts and the four kinds of run:
#   run_one    a measured run: CPU from GNU time, connections and requests from nginx's stub_status
#   trace_one  strace -f -c: system calls per connection nginx accepted
#   perf_one   perf record: the profile's shares (kernel, crypto, TLS library, the rest)
#   check_one  a run against an nginx that logs $ssl_session_reused: did the tool resume?
# The parsing and the tables are bench/connections.py's (which reuses bench/compare.py).
set -euo pipefail

die() { echo "$NAME: $*" >&2; exit 2; }
say() { echo "$*" >&2; }

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
HELPER=$ROOT/bench/connections.py
PYTHON=${PYTHON:-python3}

REPS=${REPS:-3}
DURATION=${DURATION:-10}
CALLS=${CALLS:-1}
PAUSE=${PAUSE:-1}
SERVER_CPU=${SERVER_CPU:-0}
GEN_CPU=${GEN_CPU:-1}
TRACE_DURATION=${TRACE_DURATION:-3}   # seconds of each strace / perf / check run
OHA_CONNS=${OHA_CONNS:-100}           # oha -c: the most connections it may have open at once

is_uint() { [[ $1 =~ ^[0-9]+$ ]] && (( $1 > 0 )); }
for v in REPS DURATION CALLS PORT STATUS_PORT TRACE_DURATION OHA_CONNS; do
    is_uint "${!v}" || die "$v must be a positive integer (got '${!v}')"
done
[[ $PAUSE =~ ^[0-9]+([.][0-9]+)?$ ]] || die "PAUSE must be a number of seconds (got '$PAUSE')"
[[ -n ${RATES// /} ]] || die "RATES is empty"
for r in $RATES; do is_uint "$r" || die "RATES must be positive integers (got '$r' in '$RATES')"; done
(( REPS <= 100 && DURATION <= 3600 && TRACE_DURATION <= 60 && CALLS <= 1000 )) ||
    die "REPS <= 100, DURATION <= 3600, TRACE_DURATION <= 60 and CALLS <= 1000, please"

OUT=${OUT:-$ROOT/bench-results/$(date -u +%Y%m%dT%H%M%SZ)-$SUFFIX}
mkdir -p "$OUT/raw"
OUT=$(cd "$OUT" && pwd)
RAW=$OUT/runs.jsonl
SYSCALLS=$OUT/syscalls.jsonl
PERF=$OUT/perf.jsonl
CHECKS=$OUT/checks.jsonl
: >"$RAW"
: >"$SYSCALLS"
: >"$PERF"
: >"$CHECKS"

# ------------------------------------------------------------------ tools

missing=()
NGINX=$(command -v nginx || echo /usr/sbin/nginx)
[[ -x $NGINX ]] || missing+=(nginx-light)
command -v httperf >/dev/null || missing+=(httperf)
command -v strace >/dev/null || missing+=(strace)
command -v taskset >/dev/null || missing+=(util-linux)
[[ -x /usr/bin/time ]] || missing+=(time)
command -v "$PYTHON" >/dev/null || missing+=(python3)
(( ${#missing[@]} == 0 )) || die "missing: ${missing[*]}; install them (apt-get install -y ${missing[*]}) and run again"

OHA=
OHA_NOTE='not used'   # why oha is not in the table, for the machine facts
if [[ -n ${STAMPEDE_BENCH_NO_OHA:-} ]]; then
    OHA_NOTE='left out: STAMPEDE_BENCH_NO_OHA is set'
    say "note: $OHA_NOTE"
elif command -v oha >/dev/null; then
    OHA=$(command -v oha)
elif [[ -x ${CARGO_HOME:-$HOME/.cargo}/bin/oha ]]; then
    OHA=${CARGO_HOME:-$HOME/.cargo}/bin/oha
else
    OHA_NOTE='left out: not found on PATH or in ~/.cargo/bin (cargo install oha --locked)'
    say "note: oha $OHA_NOTE"
fi
if [[ -n $OHA ]] && (( CALLS > 1 )); then
    OHA_NOTE="left out: CALLS=$CALLS, and oha cannot send several requests on a connection and then close it (--disable-keepalive is one request each)"
    say "note: oha $OHA_NOTE"
    OHA=
fi
GEN_TOOLS=(stampede)
[[ -n $OHA ]] && GEN_TOOLS+=(oha)
GEN_TOOLS+=(httperf)

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

TMP=$(mktemp -d "${TMPDIR:-/tmp}/stampede-conn-bench.XXXXXX")
NGINX_WRAPPER=   # the `timeout` that bounds nginx's life even if this script is killed with SIGKILL
NGINX_PIDS=()    # master and worker

nginx_stop() {
    local pid i
    [[ -n $NGINX_WRAPPER ]] || return 0
    kill -TERM "$NGINX_WRAPPER" 2>/dev/null || true   # timeout forwards it to nginx: fast shutdown
    for pid in "${NGINX_PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    for (( i = 0; i < 50; i++ )); do
        kill -0 "$NGINX_WRAPPER" 2>/dev/null || break
        sleep 0.1
    done
    for pid in "$NGINX_WRAPPER" "${NGINX_PIDS[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
    wait "$NGINX_WRAPPER" 2>/dev/null || true
    cat "$TMP/error.log" >>"$OUT/nginx-error.log" 2>/dev/null || true
    : >"$TMP/error.log"
    NGINX_WRAPPER=
    NGINX_PIDS=()
}

cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    nginx_stop
    rm -rf "$TMP"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
port_free "$PORT" || die "something already listens on 127.0.0.1:$PORT; choose another PORT"
port_free "$STATUS_PORT" || die "something already listens on 127.0.0.1:$STATUS_PORT; choose another STATUS_PORT"

# File descriptors: ask for 65536; settle for the hard limit when we may not raise it.
ulimit -Hn 65536 2>/dev/null || true
NOFILE=$(ulimit -Hn)
[[ $NOFILE == unlimited ]] && NOFILE=65536
(( NOFILE > 65536 )) && NOFILE=65536
ulimit -n "$NOFILE"
mkdir -p "$TMP/tmp"

scrape() { "$PYTHON" "$HELPER" scrape "$STATUS_PORT"; }

# nginx_start LIFE_SECONDS [SERVER_BLOCKS]: one worker on SERVER_CPU, stub_status (and the plain target)
# on STATUS_PORT, plus the caller's server blocks; nginx lives at most LIFE_SECONDS.
nginx_start() {
    local life=$1 servers=${2:-} i
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
    log_format reuse '\$ssl_session_reused \$ssl_protocol \$ssl_cipher \$ssl_curve';
    keepalive_requests 1000000;
    keepalive_timeout 75s;
    default_type text/plain;
    client_body_temp_path $TMP/tmp/body;
    proxy_temp_path $TMP/tmp/proxy;
    fastcgi_temp_path $TMP/tmp/fastcgi;
    uwsgi_temp_path $TMP/tmp/uwsgi;
    scgi_temp_path $TMP/tmp/scgi;
    server {
        listen 127.0.0.1:$STATUS_PORT backlog=4096;
        location = /nginx_status { stub_status; }
        location / { return 200 "hello\n"; }
    }
$servers
}
EOF
    cp "$TMP/nginx.conf" "$OUT/nginx.conf"
    "$NGINX" -t -q -p "$TMP" -c "$TMP/nginx.conf" -e "$TMP/error.log" 2>"$TMP/nginx-t.err" ||
        die "nginx refuses the configuration ($OUT/nginx.conf): $(cat "$TMP/nginx-t.err")"
    rm -f "$TMP/nginx.pid"
    taskset -c "$SERVER_CPU" timeout -k 5 "$life" "$NGINX" -p "$TMP" -c "$TMP/nginx.conf" -e "$TMP/error.log" \
        </dev/null >"$TMP/nginx.out" 2>&1 &
    NGINX_WRAPPER=$!
    for (( i = 0; i < 100; i++ )); do
        kill -0 "$NGINX_WRAPPER" 2>/dev/null || { cat "$TMP/nginx.out" "$TMP/error.log" >&2 2>/dev/null; die "nginx did not start"; }
        [[ -s $TMP/nginx.pid ]] && scrape >/dev/null 2>&1 && break
        sleep 0.1
    done
    scrape >/dev/null || die "nginx did not answer on 127.0.0.1:$STATUS_PORT"
    local master
    master=$(<"$TMP/nginx.pid")
    mapfile -t workers < <(ps -o pid= --ppid "$master" | tr -d ' ')
    NGINX_PIDS=("$master" "${workers[@]}")
}

# ------------------------------------------------------------------ machine facts

first_line() { { "$@" 2>&1 || true; } | head -n1; }
# machine_facts [KEY VALUE]...: written to OUT/machine.tsv and shown
machine_facts() {
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
        printf 'httperf\t%s\n' "$(dpkg-query -W -f '${Version}' httperf 2>/dev/null || echo -)"
        printf 'oha\t%s\n' "$([[ -n $OHA ]] && first_line "$OHA" --version || echo "$OHA_NOTE")"
        printf 'strace\t%s\n' "$(first_line strace -V)"
        while (( $# >= 2 )); do printf '%s\t%s\n' "$1" "$2"; shift 2; done
        printf 'settings\tRATES=%s REPS=%s DURATION=%ss CALLS=%s TRACE_DURATION=%ss PAUSE=%ss OHA_CONNS=%s\n' \
            "${RATES// /,}" "$REPS" "$DURATION" "$CALLS" "$TRACE_DURATION" "$PAUSE" "$OHA_CONNS"
    } >"$OUT/machine.tsv"
    sed 's/\t/: /' "$OUT/machine.tsv" >&2
}

# ------------------------------------------------------------------ the runs

RUN_LIMIT=$((2 * DURATION + 20))
TRACE_LIMIT=$((4 * TRACE_DURATION + 30))   # strace slows a tool down; its stragglers drain for longer

# The command lines: cmd_TOOL RATE SECONDS sets CMD. "@DIR@" becomes the run's own directory.
# STAMPEDE_EXTRA, OHA_EXTRA, HTTPERF_EXTRA (arrays) and URL come from the caller (TLS flags).
# With one request per connection, oha and httperf send `Connection: close` as stampede does by itself
# on a connection's last request, so nginx closes first and keeps the TIME_WAIT for every tool.
cmd_stampede() {
    CMD=("$STAMPEDE" run "$URL" --model connections --num-call "$CALLS" --steps "$1" --step-duration "${2}s"
        --threads 1 --quiet --out @DIR@/stampede "${STAMPEDE_EXTRA[@]}")
}
cmd_oha() {
    CMD=("$OHA" -q "$1" -c "$OHA_CONNS" -z "${2}s" --worker-threads 1 --disable-keepalive --latency-correction
        --no-tui --output-format json -H 'Connection: close' "${OHA_EXTRA[@]}" "$URL")
}
cmd_httperf() {
    CMD=(httperf --server 127.0.0.1 --port "$PORT" --uri / --rate "$1" --num-conns $(( $1 * $2 ))
        --num-calls "$CALLS" --timeout 5 "${HTTPERF_EXTRA[@]}")
    if (( CALLS == 1 )); then CMD+=(--add-header 'Connection: close\n'); fi
}

# new_dir NAME: a fresh directory for one run; the command, with @DIR@ replaced, in ARGS and DIR/cmd
new_dir() {
    DIR=$OUT/raw/$1
    rm -rf "$DIR"
    mkdir -p "$DIR"
    ARGS=()
    local a
    for a in "${CMD[@]}"; do ARGS+=("${a//@DIR@/$DIR}"); done
    printf '%q ' "${ARGS[@]}" >"$DIR/cmd"
}

# run_one BLOCK TOOL REP POSITION RATE: the measured run of CMD, pinned, timed, bounded.
run_one() {
    local block=$1 tool=$2 rep=$3 pos=$4 rate=$5 before after rc=0
    new_dir "$block-$rep-$tool"
    sleep "$PAUSE"
    before=$(scrape)
    taskset -c "$GEN_CPU" /usr/bin/time -o "$DIR/time" -f '%e %U %S %M' \
        timeout --foreground -k 5 "$RUN_LIMIT" "${ARGS[@]}" >"$DIR/stdout" 2>"$DIR/stderr" || rc=$?
    after=$(scrape)
    "$PYTHON" "$HELPER" record --raw "$RAW" --block "$block" --tool "$tool" --rep "$rep" --position "$pos" \
        --rate "$rate" --calls "$CALLS" --rc "$rc" --dir "$DIR" --before "$before" --after "$after"
}

# trace_one BLOCK TOOL RATE: CMD under strace -f -c; calls per connection nginx accepted.
trace_one() {
    local block=$1 tool=$2 rate=$3 before after rc=0
    new_dir "$block-strace-$tool"
    sleep "$PAUSE"
    before=$(scrape)
    taskset -c "$GEN_CPU" timeout --foreground -k 5 "$TRACE_LIMIT" strace -f -c -o "$DIR/strace.txt" \
        "${ARGS[@]}" >"$DIR/stdout" 2>"$DIR/stderr" || rc=$?
    after=$(scrape)
    "$PYTHON" "$HELPER" syscalls --raw "$SYSCALLS" --block "$block" --tool "$tool" --rate "$rate" --rc "$rc" \
        --file "$DIR/strace.txt" --before "$before" --after "$after"
}

# perf_one BLOCK TOOL RATE: CMD under perf record; the profile summed by dso and symbol.
perf_one() {
    local block=$1 tool=$2 rate=$3 rc=0
    new_dir "$block-perf-$tool"
    sleep "$PAUSE"
    timeout --foreground -k 5 "$TRACE_LIMIT" perf record -q -o "$DIR/perf.data" -- \
        taskset -c "$GEN_CPU" "${ARGS[@]}" >"$DIR/stdout" 2>"$DIR/stderr" || rc=$?
    timeout 120 perf report -i "$DIR/perf.data" --stdio --sort dso,sym --percent-limit 0.01 \
        >"$DIR/perf.txt" 2>"$DIR/perf-report.err" || say "note: perf report failed for $tool (see $DIR/perf-report.err)"
    rm -f "$DIR/perf.data"
    "$PYTHON" "$HELPER" perf --raw "$PERF" --block "$block" --tool "$tool" --rate "$rate" --rc "$rc" \
        --file "$DIR/perf.txt"
}

# check_one BLOCK TOOL RATE LOG: CMD against an nginx writing LOG; the share of resumed sessions.
check_one() {
    local block=$1 tool=$2 rate=$3 log=$4 rc=0
    new_dir "$block-check-$tool"
    : >"$log"
    sleep "$PAUSE"
    taskset -c "$GEN_CPU" timeout --foreground -k 5 "$TRACE_LIMIT" "${ARGS[@]}" >"$DIR/stdout" 2>"$DIR/stderr" || rc=$?
    sleep 0.5   # nginx writes its log line as each request ends
    cp "$log" "$DIR/access.log"
    "$PYTHON" "$HELPER" reused --raw "$CHECKS" --block "$block" --tool "$tool" --rate "$rate" --rc "$rc" \
        --file "$DIR/access.log"
}

# measure BLOCK RATE: REPS interleaved repetitions of every tool (order rotated by one each repetition),
# then one strace run per tool.
measure() {
    local block=$1 rate=$2 n=${#GEN_TOOLS[@]} rep k tool
    for (( rep = 1; rep <= REPS; rep++ )); do
        for (( k = 0; k < n; k++ )); do
            tool=${GEN_TOOLS[$(( (k + rep - 1) % n ))]}
            "cmd_$tool" "$rate" "$DURATION"
            run_one "$block" "$tool" "$rep" "$((k + 1))" "$rate"
        done
    done
    for tool in "${GEN_TOOLS[@]}"; do
        "cmd_$tool" "$rate" "$TRACE_DURATION"
        trace_one "$block" "$tool" "$rate"
    done
}
