#!/usr/bin/env bash
# bench/http2.sh: stampede's HTTP/2 client against nghttp2's h2load (and oha, when it is on PATH), one
# nginx worker serving h2c on loopback, the tools taking turns, requests counted by nginx's
# stub_status, CPU taken from the OS (/usr/bin/time). See docs/benchmarks.md, "HTTP/2".
#
#   bench/http2.sh                       # 3 repetitions x 10 s per run
#   REPS=1 DURATION=3 bench/http2.sh     # a quick check that everything works
#
# Settings (environment variables):
#   REPS=3 DURATION=10    repetitions, seconds per run
#   CONNS=50 STREAMS=10   connections, and streams each carries at once
#   RATE=20000            the open loop's requests/s (h2load: RATE / CONNS per client)
#   PORT=18090            nginx's h2c port on 127.0.0.1 (stub_status on PORT+1, HTTP/1.1)
#   STAMPEDE              a stampede binary (default: target/release/stampede, built if missing)
#   SERVER_CPU=0 GEN_CPU=1   CPUs for nginx and for the generators
set -euo pipefail

die() { echo "http2.sh: $*" >&2; exit 2; }
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
REPS=${REPS:-3}
DURATION=${DURATION:-10}
CONNS=${CONNS:-50}
STREAMS=${STREAMS:-10}
RATE=${RATE:-20000}
PORT=${PORT:-18090}
SERVER_CPU=${SERVER_CPU:-0}
GEN_CPU=${GEN_CPU:-1}
is_uint() { [[ $1 =~ ^[0-9]+$ ]] && (( $1 > 0 )); }
for v in REPS DURATION CONNS STREAMS RATE PORT; do
    is_uint "${!v}" || die "$v must be a positive integer (got '${!v}')"
done
(( REPS <= 20 && DURATION <= 600 )) || die "REPS <= 20 and DURATION <= 600, please"
for tool in nginx h2load taskset curl /usr/bin/time; do
    command -v "$tool" >/dev/null || die "needs $tool (apt-get install nginx-light nghttp2-client util-linux curl time)"
done
STAMPEDE=${STAMPEDE:-$ROOT/target/release/stampede}
if [[ ! -x $STAMPEDE ]]; then
    (cd "$ROOT" && cargo build --release -q -p coordinator) || die "cannot build stampede"
fi

WORK=$(mktemp -d)
cleanup() { [[ -f $WORK/nginx.pid ]] && kill "$(cat "$WORK/nginx.pid")" 2>/dev/null; rm -rf "$WORK"; }
trap cleanup EXIT
STATUS=$((PORT + 1))
cat >"$WORK/nginx.conf" <<EOF
worker_processes 1; daemon on; pid $WORK/nginx.pid; error_log $WORK/error.log;
events { worker_connections 4096; }
http { access_log off; client_body_temp_path $WORK/b; proxy_temp_path $WORK/p;
  fastcgi_temp_path $WORK/f; uwsgi_temp_path $WORK/u; scgi_temp_path $WORK/s;
  server { listen 127.0.0.1:$STATUS; location = /nginx_status { stub_status; }
    # The same reply over HTTP/1.1, for the open loop's lag against the HTTP/1.1 client's.
    location / { return 200 "hello\n"; } }
  # h2load does not reconnect after a GOAWAY: nginx's default keepalive_requests would end its run.
  server { listen 127.0.0.1:$PORT http2; keepalive_requests 100000000;
    http2_max_concurrent_streams $STREAMS; location / { return 200 "hello\n"; } } }
EOF
taskset -c "$SERVER_CPU" nginx -c "$WORK/nginx.conf" -p "$WORK"
for _ in $(seq 50); do curl -fs "127.0.0.1:$STATUS/nginx_status" >/dev/null && break; sleep 0.1; done
URL=http://127.0.0.1:$PORT/
handled() { curl -fs "127.0.0.1:$STATUS/nginx_status" | awk 'NR == 3 { print $3 }'; }

# One run: "<tool> <case> <requests nginx handled> <generator CPU seconds> <wall seconds>".
measure() {
    local tool=$1 case=$2; shift 2
    local before after
    before=$(handled)
    /usr/bin/time -f "%U %S %e" -o "$WORK/time" taskset -c "$GEN_CPU" "$@" >"$WORK/out" 2>&1 ||
        { cat "$WORK/out" >&2; die "$tool $case failed"; }
    after=$(handled)
    read -r user sys wall <"$WORK/time"
    # Both stub_status reads count; the first is before the run, the second is this one.
    echo "$tool $case $((after - before - 1)) $(echo "$user + $sys" | bc -l) $wall"
    sleep 1
}

RESULTS=$WORK/results
: >"$RESULTS"
PER_CLIENT=$(echo "$RATE / $CONNS" | bc -l)
for rep in $(seq "$REPS"); do
    echo "repetition $rep of $REPS" >&2
    measure stampede closed "$STAMPEDE" run "$URL" --http 2 --model concurrency --steps "$CONNS" \
        --streams "$STREAMS" --step-duration "${DURATION}s" --threads 1 --quiet --force --out "$WORK/run" >>"$RESULTS"
    measure h2load closed h2load -c "$CONNS" -m "$STREAMS" -D "$DURATION" "$URL" >>"$RESULTS"
    if command -v oha >/dev/null; then
        measure oha closed oha --http2 -c "$CONNS" -p "$STREAMS" -z "${DURATION}s" --no-tui "$URL" >>"$RESULTS"
    fi
    measure stampede open "$STAMPEDE" run "$URL" --http 2 --model requests --steps "$RATE" \
        --max-connections "$CONNS" --streams "$STREAMS" --step-duration "${DURATION}s" --threads 1 \
        --quiet --force --out "$WORK/open" >>"$RESULTS"
    cp "$WORK/open/run.json" "$WORK/open-$rep.json"
    measure stampede open-h1 "$STAMPEDE" run "http://127.0.0.1:$STATUS/" --model requests --steps "$RATE" \
        --max-connections "$CONNS" --step-duration "${DURATION}s" --threads 1 \
        --quiet --force --out "$WORK/open-h1" >>"$RESULTS"
    cp "$WORK/open-h1/run.json" "$WORK/open-h1-$rep.json"
    measure h2load open h2load -c "$CONNS" -m "$STREAMS" --rps "$PER_CLIENT" -D "$DURATION" "$URL" >>"$RESULTS"
done

echo
printf '%-9s %-7s %12s %10s %14s %12s\n' tool case "requests/s" "gen CPU s" "req/CPU-s" "vs h2load"
awk '
    { key = $1 " " $2; req[key] += $3; cpu[key] += $4; wall[key] += $5; n[key]++ }
    END {
        for (k in req) { eff[k] = req[k] / cpu[k] }
        for (k in req) {
            split(k, p, " ")
            peer = "h2load " (p[2] == "open-h1" ? "open" : p[2])
            printf "%-9s %-7s %12.0f %10.2f %14.0f %11.2fx\n", p[1], p[2], req[k] / wall[k], cpu[k] / n[k], eff[k], eff[k] / eff[peer]
        }
    }' "$RESULTS" | sort -k2,2 -k1,1
echo
# The open loop's schedule: the rate it held and its lag, from stampede's own run.json, over HTTP/2
# and over HTTP/1.1 at the same rate (open-h1).
for f in "$WORK"/open-*.json; do
    python3 - "$f" "$RATE" <<'EOF'
import json, sys
step = json.load(open(sys.argv[1]))["steps"][0]
demanded = float(sys.argv[2])
held = step["achieved_request_rate"]
print(f"{sys.argv[1].rsplit('/', 1)[1]}: {held:.1f} req/s of {demanded:.0f} ({(held - demanded) / demanded * 100:+.3f} %), "
      f"lag p99 {step['generator']['lag_p99_ms']} ms, p99 {step['latency_ms']['p99']} ms, "
      f"waited {step['generator']['waited']}")
EOF
done
