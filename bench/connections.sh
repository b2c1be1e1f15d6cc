#!/usr/bin/env bash
# bench/connections.sh: the new-connection path at its floor. stampede, oha and httperf each open a new
# connection per request at the same rate against one nginx worker on loopback (nginx on CPU 0, the
# generator on CPU 1); nginx's stub_status counts the connections and requests, GNU time the generator's
# CPU; then one strace -f -c run per tool gives the system calls per connection. See docs/benchmarks.md.
# The TLS twin is bench/connections-tls.sh; idle keep-alive memory is bench/idle-connections.sh.
#
#   bench/connections.sh                                # RATES="2000 5000", 3 reps x 10 s: about 5 minutes
#   REPS=1 DURATION=2 RATES=2000 bench/connections.sh   # a quick check
#   CALLS=10 bench/connections.sh                       # 10 requests per connection (oha left out: it cannot)
#   bench/connections.sh growth                         # stampede alone at 1000-20000 conn/s, 1 and 10 calls;
#                                                       #   the table and OUT/growth.svg (same as GROWTH=1)
#
# Settings (environment variables):
#   RATES="2000 5000"  connections/s; each rate is one comparison block
#   REPS=3 DURATION=10 repetitions (tools interleaved, order rotated) and seconds per run
#   CALLS=1            requests per connection (stampede --num-call, httperf --num-calls; oha only at 1)
#   TRACE_DURATION=3   seconds of each strace run
#   GROWTH_RATES="1000 5000 10000 20000" GROWTH_CALLS="1 10"   the growth mode's rates and calls
#   PORT=19180         nginx on 127.0.0.1:PORT (stub_status there too)
#   OUT                results (default bench-results/<UTC time>-connections/)
#   STAMPEDE           a stampede binary (default: cargo build --release --bin stampede in this checkout)
#   PAUSE=1            seconds between runs;  SERVER_CPU=0 GEN_CPU=1;  OHA_CONNS=100 (oha -c)
#   STAMPEDE_BENCH_NO_OHA   set to leave oha out
NAME=connections.sh
GROWTH=${GROWTH:-}
case ${1:-} in
growth) GROWTH=1 ;;
"") ;;
*) echo "$NAME: unknown argument '$1' (the only one is 'growth')" >&2; exit 2 ;;
esac
PORT=${PORT:-19180}
STATUS_PORT=$PORT
RATES=${RATES:-2000 5000}
GROWTH_RATES=${GROWTH_RATES:-1000 5000 10000 20000}
GROWTH_CALLS=${GROWTH_CALLS:-1 10}
SUFFIX=connections
[[ -n $GROWTH ]] && SUFFIX=connections-growth
# shellcheck source=bench/lib-connections.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib-connections.sh"
for r in $GROWTH_RATES $GROWTH_CALLS; do is_uint "$r" || die "GROWTH_RATES and GROWTH_CALLS must be positive integers (got '$r')"; done

URL=http://127.0.0.1:$PORT/
STAMPEDE_EXTRA=()
OHA_EXTRA=()
HTTPERF_EXTRA=()

if [[ -n $GROWTH ]]; then
    RATES=$GROWTH_RATES   # for the machine facts' settings line
    n_runs=$(( $(wc -w <<<"$GROWTH_RATES") * $(wc -w <<<"$GROWTH_CALLS") * REPS ))
    nginx_start $(( n_runs * (RUN_LIMIT + 5) + 120 ))
    machine_facts mode "growth: stampede alone, GROWTH_RATES=${GROWTH_RATES// /,} GROWTH_CALLS=${GROWTH_CALLS// /,}"
    say ""
    say "$n_runs runs of ${DURATION}s: about $(( n_runs * (DURATION + 3) / 60 + 1 )) min; results in $OUT"
    for calls in $GROWTH_CALLS; do
        CALLS=$calls
        for rate in $GROWTH_RATES; do
            for (( rep = 1; rep <= REPS; rep++ )); do
                cmd_stampede "$rate" "$DURATION"
                run_one "growth-c$calls-$rate" stampede "$rep" 1 "$rate"
            done
        done
    done
    say ""
    "$PYTHON" "$HELPER" growth --raw "$RAW" --machine "$OUT/machine.tsv" --outdir "$OUT"
    say "raw results: $OUT/runs.jsonl, $OUT/growth.tsv; tool outputs: $OUT/raw/"
    exit 0
fi

n_rates=$(wc -w <<<"$RATES")
n_runs=$(( n_rates * ${#GEN_TOOLS[@]} * REPS ))
nginx_start $(( n_runs * (RUN_LIMIT + 5) + n_rates * ${#GEN_TOOLS[@]} * (TRACE_LIMIT + 5) + 120 ))
machine_facts mode "plain HTTP/1.1, $CALLS request(s) per connection"
say ""
say "$n_runs runs of ${DURATION}s and $(( n_rates * ${#GEN_TOOLS[@]} )) strace runs of ${TRACE_DURATION}s: about $(( (n_runs * (DURATION + 3) + n_rates * ${#GEN_TOOLS[@]} * (TRACE_DURATION + 6)) / 60 + 1 )) min; results in $OUT"

titles=()
for rate in $RATES; do
    block=plain-c$CALLS-$rate
    say ""
    say "== $block: $rate new connections/s, $CALLS request(s) each: ${GEN_TOOLS[*]} =="
    measure "$block" "$rate"
    titles+=(--title "$block=plain HTTP/1.1, $rate conn/s asked of every tool, $CALLS request(s) per connection")
done

say ""
"$PYTHON" "$HELPER" report --raw "$RAW" --syscalls "$SYSCALLS" --machine "$OUT/machine.tsv" --outdir "$OUT" "${titles[@]}"
say "raw results: $OUT/runs.jsonl, $OUT/runs.tsv, $OUT/syscalls.jsonl; tool outputs: $OUT/raw/"
