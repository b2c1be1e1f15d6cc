#!/bin/sh
# More connections to one destination than one source address has ports: N (default 30000) keep-alive
# connections from two `stampede-agent --threads 1` processes on this machine to one nginx address, once
# without --source-addrs and once with them (default 127.0.0.1-127.0.0.3). Without, the machine runs out
# of local ports near ip_local_port_range's size: the rest fail as addr-unavailable, or are still
# connecting (connect() slows down searching a full port range) when the step ends.
#
#   bench/source-addrs.sh                 # needs nginx (apt-get install -y nginx-light)
#   N=40000 SOURCE_ADDRS=127.0.0.1-127.0.0.4 bench/source-addrs.sh
#
# Two agents and three nginx workers, because each process needs a descriptor per connection and a box's
# hard RLIMIT_NOFILE may be below N (20000 where this was written). nginx's limit_req queues requests
# (10000/s), so each connection waits about N/10000 s per reply: mostly idle. Loopback only.
set -eu

N=${N:-30000}
SOURCE_ADDRS=${SOURCE_ADDRS:-127.0.0.1-127.0.0.3}
STEP=${STEP:-15s}
here=$(cd "$(dirname "$0")/.." && pwd)
if [ -z "${BIN:-}" ]; then
    (cd "$here" && cargo build --release --quiet --bins)
    BIN=${CARGO_TARGET_DIR:-$here/target}/release
fi
command -v nginx >/dev/null || { echo "nginx is needed: apt-get install -y nginx-light" >&2; exit 2; }
work=$(mktemp -d)
chmod 755 "$work"
pids=
cleanup() {
    # Only the processes this script started, by their id.
    for p in $pids; do kill "$p" 2>/dev/null || true; done
    [ -f "$work/nginx.pid" ] && kill "$(cat "$work/nginx.pid")" 2>/dev/null || true
    sleep 1
    rm -rf "$work"
}
trap cleanup EXIT INT TERM

port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
mkdir -p "$work/www" "$work/tmp"
echo ok >"$work/www/index.html"
per_worker=$(( N / 3 + 1000 ))
cat >"$work/nginx.conf" <<EOF
worker_processes 3;
worker_rlimit_nofile $(( per_worker + 1000 ));
pid $work/nginx.pid;
error_log $work/error.log warn;
events { worker_connections $per_worker; }
http {
  access_log off;
  client_body_temp_path $work/tmp/body;
  proxy_temp_path $work/tmp/proxy;
  fastcgi_temp_path $work/tmp/fastcgi;
  uwsgi_temp_path $work/tmp/uwsgi;
  scgi_temp_path $work/tmp/scgi;
  keepalive_timeout 300s;
  keepalive_requests 1000000;
  limit_req_zone \$server_name zone=slow:1m rate=10000r/s;
  server {
    listen 127.0.0.1:$port reuseport backlog=4096;
    server_name bench;
    root $work/www;
    # A static file, not 'return': return answers before limit_req could queue the request.
    location / { limit_req zone=slow burst=1000000; }
  }
}
EOF
nginx -e "$work/error.log" -c "$work/nginx.conf"
sleep 1

agents=
for i in 1 2; do
    STAMPEDE_LOG=warn "$BIN/stampede-agent" --listen 127.0.0.1:0 --threads 1 --ready-file "$work/agent-$i.ready" 2>"$work/agent-$i.err" &
    pids="$pids $!"
    j=0
    while [ $j -lt 100 ] && [ ! -e "$work/agent-$i.ready" ]; do sleep 0.1; j=$((j + 1)); done
    a=$(sed -n 's/.*"listen":"\([^"]*\)".*/\1/p' "$work/agent-$i.ready" 2>/dev/null)
    agents="${agents:+$agents,}$a"
done
# shellcheck disable=SC3045 # dash, busybox sh and bash all have ulimit -n
echo "$N connections to 127.0.0.1:$port from agents $agents; fd limit $(ulimit -n); ports $(tr '\t' '-' </proc/sys/net/ipv4/ip_local_port_range)"

# Without source addresses first, on a clean port space; then a pause past TIME_WAIT (60 s), so the second
# run does not inherit the first one's closed ports.
first=1
for sources in "" "$SOURCE_ADDRS"; do
    [ -n "$first" ] || sleep 61
    first=
    out="$work/run-${sources:-none}"
    set -- --agents "$agents" --model concurrency --steps "$N" --step-duration "$STEP" --timeout 10s --quiet --out "$out"
    if [ -n "$sources" ]; then set -- "$@" --source-addrs "$sources"; fi
    "$BIN/stampede" run "http://127.0.0.1:$port/" "$@" >"$work/run.out" 2>"$work/run.err" &
    run=$!
    most=0
    by_source=
    while kill -0 "$run" 2>/dev/null; do
        now=$(ss -Htn state established dst "127.0.0.1:$port" | wc -l)
        if [ "$now" -gt "$most" ]; then
            most=$now
            by_source=$(ss -Htn state established dst "127.0.0.1:$port" |
                awk '{ split($3, a, ":"); n[a[1]]++ } END { for (s in n) printf "%s=%d ", s, n[s] }')
        fi
        sleep 1
    done
    wait "$run" || { echo "run failed:" >&2; cat "$work/run.err" >&2; continue; }
    echo "--source-addrs ${sources:-(none)}: at most $most established ($by_source)"
    python3 -c '
import json, sys
s = json.load(open(sys.argv[1]))["steps"][0]
print("  connections opened %d, addr-unavailable %d, trust %s %s" % (
    s["connections"], s["errors"]["addr-unavailable"], s["trust"], s["reasons"]))
' "$out/run.json"
    sleep 5
done
