#!/usr/bin/env bash
# bench/shootout.sh: the seeds' shoot-out on one machine. Five hello-world servers (Go net/http, Node's
# http, Python aiohttp, an Erlang gen_tcp server, nginx), each pinned to one core, ramped autobench-style
# with stampede on the other core, every server watched by its own paired monitor. Then the run is checked
# against what we did not write: each server's CPU from the kernel (/proc/PID/stat, read here before and
# after), nginx's request count (stub_status), and compare.html as Chromium draws it (one CPU line and
# one memory line per server). See docs/guide/comparing.md.
#
#   bench/shootout.sh                         # 100..1500 conn/s by 200, 10 requests each, 5 s steps
#   STEP=2s HIGH=500 bench/shootout.sh        # a quick check that everything works
#
# Settings (environment variables):
#   LOW=100 HIGH=1500 STEP_RATE=200 NUM_CALL=10 STEP=5s   the ramp (autobench's flags)
#   SERVERS="go node aiohttp erlang nginx"                which servers
#   SERVER_CPU=1 GEN_CPU=0      the core the servers share (each alone in its own steps) and stampede's
#   OUT                         results directory (default bench-results/shootout-<UTC time>/)
#   STAMPEDE                    a stampede binary to use instead of building the release one
#   AIOHTTP=3.10.11             the aiohttp pinned into a throwaway virtual environment under OUT
# Needs: go (golang-go), node (nodejs), erl (erlang-base), nginx (nginx-light), python3-venv, chromium.
# shellcheck disable=SC2329 # the start_* functions are called by name ("start_$s"), cleanup by the trap
set -euo pipefail

die() { echo "shootout.sh: $*" >&2; exit 2; }
say() { echo "$*" >&2; }

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
LOW=${LOW:-100}
HIGH=${HIGH:-1500}
STEP_RATE=${STEP_RATE:-200}
NUM_CALL=${NUM_CALL:-10}
STEP=${STEP:-5s}
SERVERS=${SERVERS:-go node aiohttp erlang nginx}
SERVER_CPU=${SERVER_CPU:-1}
GEN_CPU=${GEN_CPU:-0}
AIOHTTP=${AIOHTTP:-3.10.11}
OUT=${OUT:-$ROOT/bench-results/shootout-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
SRV=$OUT/servers
mkdir -p "$SRV"

if [[ -z ${STAMPEDE:-} ]]; then
    (cd "$ROOT" && cargo build --release --quiet --bin stampede)
    STAMPEDE=$ROOT/target/release/stampede
fi

declare -A PORT=([go]=18091 [node]=18092 [aiohttp]=18093 [erlang]=18094 [nginx]=18095)
declare -A PID=()
STUB_PORT=18096

# The servers stop with the script, and are gone (their ports free) when it exits.
cleanup() {
    for p in "${PID[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${PID[@]}"; do wait "$p" 2>/dev/null || true; done
}
trap cleanup EXIT

# Called in the background (`pinned cmd &`): exec makes $! the server itself, not a subshell.
pinned() { exec taskset -c "$SERVER_CPU" "$@"; }

start_go() {
    command -v go >/dev/null || die "no go (apt-get install golang-go)"
    mkdir -p "$SRV/go"
    cat >"$SRV/go/main.go" <<'EOF'
package main

import (
	"net/http"
	"os"
)

func main() {
	http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("hello\n")) })
	http.ListenAndServe("127.0.0.1:"+os.Args[1], nil)
}
EOF
    (cd "$SRV/go" && GOCACHE=$SRV/go/cache GO111MODULE=off GOFLAGS=-mod=mod go build -o hello main.go)
    GOMAXPROCS=1 pinned "$SRV/go/hello" "${PORT[go]}" &
    PID[go]=$!
}

start_node() {
    command -v node >/dev/null || die "no node (apt-get install nodejs)"
    printf '%s\n' "require('http').createServer((req, res) => res.end('hello\n')).listen(${PORT[node]}, '127.0.0.1');" \
        >"$SRV/node.js"
    pinned node "$SRV/node.js" &
    PID[node]=$!
}

start_aiohttp() {
    if [[ ! -x $SRV/venv/bin/python ]]; then
        python3 -m venv "$SRV/venv" || die "no python3 venv (apt-get install python3-venv)"
        "$SRV/venv/bin/pip" install --quiet "aiohttp==$AIOHTTP" || die "pip could not install aiohttp==$AIOHTTP"
    fi
    cat >"$SRV/aio.py" <<'EOF'
import sys
from aiohttp import web

async def hello(request):
    return web.Response(text="hello\n")

app = web.Application()
app.router.add_get("/", hello)
web.run_app(app, host="127.0.0.1", port=int(sys.argv[1]), access_log=None, print=None)
EOF
    pinned "$SRV/venv/bin/python" "$SRV/aio.py" "${PORT[aiohttp]}" &
    PID[aiohttp]=$!
}

start_erlang() {
    command -v erl >/dev/null || die "no erl (apt-get install erlang-base)"
    # gen_tcp with the VM's own HTTP packet parser, one process per connection, keep-alive.
    cat >"$SRV/hello.erl" <<'EOF'
-module(hello).
-export([start/1, accept/1, conn/1]).

start([Port]) ->
    {ok, L} = gen_tcp:listen(list_to_integer(atom_to_list(Port)),
        [binary, {packet, http_bin}, {active, false}, {reuseaddr, true}, {backlog, 1024},
         {ip, {127,0,0,1}}]),
    [spawn(?MODULE, accept, [L]) || _ <- lists:seq(1, 4)],
    receive stop -> ok end.

accept(L) ->
    {ok, S} = gen_tcp:accept(L),
    spawn(?MODULE, accept, [L]),
    conn(S).

conn(S) ->
    case gen_tcp:recv(S, 0) of
        {ok, {http_request, _, _, _}} -> headers(S);
        _ -> gen_tcp:close(S)
    end.

headers(S) ->
    case gen_tcp:recv(S, 0) of
        {ok, http_eoh} ->
            gen_tcp:send(S, <<"HTTP/1.1 200 OK\r\nContent-Length: 6\r\nContent-Type: text/plain\r\n\r\nhello\n">>),
            conn(S);
        {ok, {http_header, _, _, _, _}} -> headers(S);
        _ -> gen_tcp:close(S)
    end.
EOF
    if ! (cd "$SRV" && erlc hello.erl 2>/dev/null); then
        (cd "$SRV" && erl -noshell -eval 'compile:file("hello"), halt().')
    fi
    [[ -f $SRV/hello.beam ]] || die "the Erlang server did not compile"
    pinned erl +S 1 +A 1 -noshell -noinput -pa "$SRV" -s hello start "${PORT[erlang]}" &
    PID[erlang]=$!
}

start_nginx() {
    command -v nginx >/dev/null || die "no nginx (apt-get install nginx-light)"
    mkdir -p "$SRV/nginx"
    cat >"$SRV/nginx.conf" <<EOF
worker_processes 1; daemon off; pid $SRV/nginx.pid; error_log $SRV/nginx/error.log;
events { worker_connections 4096; }
http {
    access_log off; client_body_temp_path $SRV/nginx; proxy_temp_path $SRV/nginx;
    fastcgi_temp_path $SRV/nginx; uwsgi_temp_path $SRV/nginx; scgi_temp_path $SRV/nginx;
    keepalive_requests 100000;
    server { listen 127.0.0.1:${PORT[nginx]}; location / { return 200 "hello\n"; } }
    server { listen 127.0.0.1:$STUB_PORT; location / { stub_status; } }
}
EOF
    pinned nginx -c "$SRV/nginx.conf" -p "$SRV/nginx" &
    PID[nginx]=$!
}

# The count nginx has read so far (stub_status's third number on its third line); this read is one.
nginx_requests() { curl -fsS "http://127.0.0.1:$STUB_PORT/" | awk 'NR==3 {print $3}'; }

# Every process of a server: the started one and its children (nginx's worker, erl's beam).
processes() {
    local p=$1
    echo "$p"
    for c in $(pgrep -P "$p" 2>/dev/null); do processes "$c"; done
}

# user + system CPU ticks of a server's processes, from /proc/PID/stat (fields 14 and 15).
cpu_ticks() {
    local total=0
    for p in $(processes "$1"); do
        local t
        t=$(sed 's/.*) //' "/proc/$p/stat" 2>/dev/null | awk '{print $12 + $13}') || t=0
        total=$((total + ${t:-0}))
    done
    echo "$total"
}

targets=()
monitors=()
for s in $SERVERS; do
    [[ -n ${PORT[$s]:-} ]] || die "unknown server $s (go node aiohttp erlang nginx)"
    "start_$s"
done
for s in $SERVERS; do
    for _ in $(seq 100); do
        curl -fsS -o /dev/null "http://127.0.0.1:${PORT[$s]}/" 2>/dev/null && break
        sleep 0.1
    done
    curl -fsS -o /dev/null "http://127.0.0.1:${PORT[$s]}/" || die "$s does not answer on ${PORT[$s]}"
    kill -0 "${PID[$s]}" || die "$s exited"
    targets+=("$s=http://127.0.0.1:${PORT[$s]}/")
    monitors+=(--monitor-target "$s=pid:${PID[$s]}")
done

declare -A BEFORE=()
for s in $SERVERS; do BEFORE[$s]=$(cpu_ticks "${PID[$s]}"); done
[[ " $SERVERS " == *" nginx "* ]] && NGINX_BEFORE=$(nginx_requests)

say "== stampede run (${targets[*]}) on core $GEN_CPU, servers on core $SERVER_CPU"
set +e
taskset -c "$GEN_CPU" "$STAMPEDE" run "${targets[@]}" \
    --low_rate "$LOW" --high_rate "$HIGH" --rate_step "$STEP_RATE" --num_call "$NUM_CALL" \
    --step-duration "$STEP" --timeout 2s "${monitors[@]}" --out "$OUT/run" | tee "$OUT/stdout.txt"
code=${PIPESTATUS[0]}
set -e
say "stampede exited $code"

for s in $SERVERS; do echo "$s $(($(cpu_ticks "${PID[$s]}") - BEFORE[$s]))"; done >"$OUT/kernel_cpu_ticks.txt"
if [[ " $SERVERS " == *" nginx "* ]]; then
    NGINX_AFTER=$(nginx_requests)
    # The two reads of stub_status are requests nginx counted too.
    echo $((NGINX_AFTER - NGINX_BEFORE - 1)) >"$OUT/nginx_requests.txt"
fi

if command -v chromium >/dev/null; then
    chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --force-device-scale-factor=1 \
        --no-first-run --disable-background-networking --disable-component-update --disable-sync \
        --host-resolver-rules='MAP * ~NOTFOUND' --user-data-dir="$OUT/profile" --virtual-time-budget=5000 \
        --dump-dom "file://$OUT/run/compare.html" >"$OUT/compare.dom.html" 2>/dev/null
    chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --force-device-scale-factor=1 \
        --no-first-run --disable-background-networking --disable-component-update --disable-sync \
        --host-resolver-rules='MAP * ~NOTFOUND' --user-data-dir="$OUT/profile" --window-size=1200,1400 \
        --screenshot="$OUT/compare.png" "file://$OUT/run/compare.html" >/dev/null 2>&1
    rm -rf "$OUT/profile"
else
    say "no chromium: the page is not checked"
fi

# shellcheck disable=SC2086 # split on purpose: one argument per server
CLK_TCK=$(getconf CLK_TCK) python3 "$ROOT/bench/shootout.py" "$OUT" $SERVERS
exit "$code"
