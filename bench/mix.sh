#!/usr/bin/env bash
# bench/mix.sh: what a weighted mix of named requests costs stampede's generator, against one URL and
# against wrk running the same mix from a Lua script (issue 38, "Performance"). One nginx worker on
# loopback, the four cases interleaved in every repetition, requests counted by nginx, CPU taken from
# the OS; the answer is requests per CPU-second of the generator and two ratios:
#
#   b/a  stampede's mix against stampede's one URL      (goal: >= 0.90)
#   b/d  stampede's mix against wrk's Lua mix           (goal: >= 1.0)
#
#   bench/mix.sh                         # 5 repetitions x 10 s per case, about 4 minutes
#   REPS=3 DURATION=5 bench/mix.sh       # quicker
#
# The cases, each on the generator's CPU alone, in a closed loop over CONNS keep-alive connections
# (wrk has no open loop, and a closed loop is the like-for-like comparison):
#   a  stampede, one URL
#   b  stampede, a plan file's 5-request mix ([[request]] with weights 4:3:2:1:1, one a POST with a body)
#   c  wrk, one URL
#   d  wrk, the same 5 requests from a Lua script whose request() takes them in a fixed cycle of their
#      weights (the cheapest pick wrk's Lua allows: no random number per request)
# With MODEL=requests RATE=N, a and b run stampede's open loop at N req/s instead (c and d stay closed):
# then b/a compares the two at the same rate, and b/d is no longer like for like (said in the output).
#
# Settings (environment variables):
#   REPS=5  DURATION=10  CONNS=50  PORT=18090  PAUSE=1
#   MODEL=concurrency (or requests, with RATE)   RATE (open-loop req/s for a and b)
#   SERVER_CPU=0 GEN_CPU=1                        CPUs for nginx and for the generators
#   STAMPEDE                                      a stampede binary instead of building one
#   INSTR=1                                       also count instructions per request under valgrind
#                                                 (cachegrind, no cache simulation), robust where CPU time
#                                                 is not (a busy machine), as a marginal cost between two
#                                                 runs so that start-up and exit cancel out: wrk (c, d) for
#                                                 INSTR_SHORT=2 and INSTR_LONG=6 seconds; stampede (a, b)
#                                                 for INSTR_LONG seconds in its open loop at INSTR_RATES=
#                                                 "500 2000" req/s, so that its once-a-second work (the
#                                                 interval's histograms, per name too) cancels out as well:
#                                                 under valgrind it sends a few thousand requests a second,
#                                                 over which that work would weigh 30 times what it does
#   CASES_ONLY=1                                  with INSTR=1: skip the CPU-time runs
#   OUT                                           results directory (default bench-results/mix-<UTC time>/)
set -euo pipefail

die() { echo "mix.sh: $*" >&2; exit 2; }
say() { echo "$*" >&2; }

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PYTHON=${PYTHON:-python3}
HELPER=$ROOT/bench/compare.py

REPS=${REPS:-5}
DURATION=${DURATION:-10}
CONNS=${CONNS:-50}
PORT=${PORT:-18090}
PAUSE=${PAUSE:-1}
MODEL=${MODEL:-concurrency}
RATE=${RATE:-}
SERVER_CPU=${SERVER_CPU:-0}
GEN_CPU=${GEN_CPU:-1}

INSTR=${INSTR:-}
INSTR_SHORT=${INSTR_SHORT:-2}
INSTR_LONG=${INSTR_LONG:-6}
INSTR_RATES=${INSTR_RATES:-500 2000}
CASES_ONLY=${CASES_ONLY:-}

is_uint() { [[ $1 =~ ^[0-9]+$ ]] && (( $1 > 0 )); }
for v in REPS DURATION CONNS PORT INSTR_SHORT INSTR_LONG; do is_uint "${!v}" || die "$v must be a positive integer (got '${!v}')"; done
[[ $PAUSE =~ ^[0-9]+([.][0-9]+)?$ ]] || die "PAUSE must be a number of seconds (got '$PAUSE')"
case $MODEL in
concurrency) [[ -z $RATE ]] || die "RATE is for MODEL=requests (the closed loop has no rate)" ;;
requests) is_uint "$RATE" || die "MODEL=requests needs RATE, a positive integer (got '$RATE')" ;;
*) die "MODEL must be concurrency or requests (got '$MODEL')" ;;
esac
(( REPS <= 100 && DURATION <= 3600 )) || die "REPS <= 100 and DURATION <= 3600, please"
(( INSTR_SHORT < INSTR_LONG && INSTR_LONG <= 600 )) || die "INSTR_SHORT < INSTR_LONG <= 600, please"
[[ -z $INSTR ]] || command -v valgrind >/dev/null || die "INSTR=1 needs valgrind (apt-get install valgrind)"

for tool in wrk taskset /usr/bin/time "$PYTHON"; do
    command -v "$tool" >/dev/null || die "$tool is needed (apt-get install wrk util-linux time python3)"
done
NGINX=$(command -v nginx || echo /usr/sbin/nginx)
[[ -x $NGINX ]] || die "nginx is needed (apt-get install nginx-light)"

if [[ -n ${STAMPEDE:-} ]]; then
    [[ -x $STAMPEDE ]] || die "STAMPEDE=$STAMPEDE is not an executable"
else
    say "building stampede (cargo build --release --bin stampede)"
    (cd "$ROOT" && cargo build --release --bin stampede) || die "cargo build failed"
    target_dir=$(cd "$ROOT" && cargo metadata --no-deps --format-version 1 |
        "$PYTHON" -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
    STAMPEDE=$target_dir/release/stampede
fi

OUT=${OUT:-$ROOT/bench-results/mix-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$OUT/raw"
OUT=$(cd "$OUT" && pwd)
RUNS=$OUT/runs.tsv
printf 'case\trep\trc\trequests\tcpu_s\twall_s\treq_per_cpu_s\n' >"$RUNS"

# ------------------------------------------------------------------ nginx

TMP=$(mktemp -d "${TMPDIR:-/tmp}/stampede-mix.XXXXXX")
NGINX_WRAPPER=

cleanup() {
    local rc=$? i
    trap - EXIT INT TERM
    if [[ -n $NGINX_WRAPPER ]]; then
        kill -TERM "$NGINX_WRAPPER" 2>/dev/null || true   # timeout forwards it to nginx
        for (( i = 0; i < 50; i++ )); do
            kill -0 "$NGINX_WRAPPER" 2>/dev/null || break
            sleep 0.1
        done
        kill -KILL "$NGINX_WRAPPER" 2>/dev/null || true
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

mkdir -p "$TMP/tmp"
cat >"$TMP/nginx.conf" <<EOF
worker_processes 1;
daemon off;
master_process on;
pid $TMP/nginx.pid;
error_log $TMP/error.log warn;
events { worker_connections 4096; }
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

RUN_LIMIT=$((2 * DURATION + 20))
NGINX_LIFE=$(( (REPS * 4 + 2) * (RUN_LIMIT + 10) + 120 ))
# Under valgrind a run's start and exit take seconds more.
INSTR_LIMIT=$((2 * INSTR_LONG + 60))
[[ -z $INSTR ]] || NGINX_LIFE=$(( NGINX_LIFE + 8 * (INSTR_LIMIT + 10) ))
taskset -c "$SERVER_CPU" timeout -k 5 "$NGINX_LIFE" "$NGINX" -p "$TMP" -c "$TMP/nginx.conf" -e "$TMP/error.log" \
    </dev/null >"$TMP/nginx.out" 2>&1 &
NGINX_WRAPPER=$!

scrape() { "$PYTHON" "$HELPER" scrape "$PORT" | cut -d' ' -f2; }
for (( i = 0; i < 100; i++ )); do
    kill -0 "$NGINX_WRAPPER" 2>/dev/null || { cat "$TMP/nginx.out" "$TMP/error.log" >&2 2>/dev/null; die "nginx did not start"; }
    [[ -s $TMP/nginx.pid ]] && scrape >/dev/null 2>&1 && break
    sleep 0.1
done
scrape >/dev/null || die "nginx did not answer on 127.0.0.1:$PORT"
URL=http://127.0.0.1:$PORT/

# ------------------------------------------------------------------ the mix, twice

# The five requests: name, weight, method, path, body. Both tools send exactly these.
# shellcheck disable=SC2016 # the login's ${user} is a template of stampede's, filled from the CSV
MIX=(
    "home 4 GET / -"
    "list 3 GET /items?page=2 -"
    "item 2 GET /items/42 -"
    "search 1 GET /search?q=stampede -"
    'login 1 POST /login user=${user}&password=secret'
)

# ---- the CSV variable -------------------------------------------------------------------------
# The issue's figure is "a 5-request weighted mix with one CSV variable": the login's body takes
# `${user}` from a CSV of users, each row in turn (stampede's `circular` feeder; the Lua script reads
# the same file into a table and takes its rows in turn).
USERS_CSV=$TMP/users.csv
{ echo user; for (( i = 1; i <= 1000; i++ )); do echo "user$i"; done; } >"$USERS_CSV"
CSV_NOTE="with one CSV variable (the login's \${user}, 1,000 users in turn)"
# -----------------------------------------------------------------------------------------------

{
    for m in "${MIX[@]}"; do
        read -r name weight method path body <<<"$m"
        printf '[[request]]\nname = "%s"\nweight = %s\nmethod = "%s"\nurl = "%s"\n' "$name" "$weight" "$method" "$path"
        if [[ $body != - ]]; then
            printf 'headers = ["Content-Type: application/x-www-form-urlencoded"]\nbody = "%s"\n' "$body"
        fi
        printf '\n'
    done
    printf '[[feeder]]\nname = "users"\nfile = "%s"\nmode = "circular"\n' "$USERS_CSV"
} >"$OUT/mix.toml"

{
    echo '-- The same five requests as mix.toml, each built once, sent in a fixed cycle of their weights.'
    echo 'local cycle = {}'
    echo 'local users, u = {}, 0'
    echo "local form = { [\"Content-Type\"] = \"application/x-www-form-urlencoded\" }"
    echo 'init = function(args)'
    echo "    for line in io.lines(\"$USERS_CSV\") do users[#users + 1] = line end"
    echo '    table.remove(users, 1) -- the header row'
    echo '    local reqs = {}'
    for m in "${MIX[@]}"; do
        read -r name weight method path body <<<"$m"
        if [[ $body == - ]]; then
            echo "    reqs[#reqs + 1] = { $weight, wrk.format(\"$method\", \"$path\") }"
        else
            # The body with the CSV's user: built per request, as stampede renders it.
            # shellcheck disable=SC2016 # the template's own spelling, replaced by Lua's
            lua_body=${body//'${user}'/\" .. users[u] .. \"}
            echo "    reqs[#reqs + 1] = { $weight, function() u = u % #users + 1; return wrk.format(\"$method\", \"$path\", form, \"$lua_body\") end }"
        fi
    done
    cat <<'EOF'
    -- A smooth weighted interleave (as stampede's mix deals them), one pass of the total weight.
    local total, current = 0, {}
    for i, r in ipairs(reqs) do total = total + r[1]; current[i] = 0 end
    for _ = 1, total do
        local best = 1
        for i, r in ipairs(reqs) do
            current[i] = current[i] + r[1]
            if current[i] > current[best] then best = i end
        end
        current[best] = current[best] - total
        cycle[#cycle + 1] = reqs[best][2]
    end
end
local k = 0
request = function()
    k = k % #cycle + 1
    local r = cycle[k]
    if type(r) == "function" then return r() end
    return r
end
EOF
} >"$OUT/mix.lua"

# ------------------------------------------------------------------ one run

stampede_load() {
    case $MODEL in
    concurrency) echo --model concurrency --steps "$CONNS" ;;
    requests) echo --model requests --steps "$RATE" --max-connections "$CONNS" ;;
    esac
}

# case_cmd CASE DIR [SECONDS]: sets CMD to case CASE's command line, writing into DIR.
case_cmd() {
    local dir=$2 DURATION=${3:-$DURATION}
    # shellcheck disable=SC2207
    local load=($(stampede_load))
    case $1 in
    a) CMD=("$STAMPEDE" run "$URL" "${load[@]}" --step-duration "${DURATION}s" --threads 1 --out "$dir/stampede" --quiet) ;;
    b) CMD=("$STAMPEDE" run "$OUT/mix.toml" "$URL" "${load[@]}" --step-duration "${DURATION}s" --threads 1 --out "$dir/stampede" --quiet) ;;
    c) CMD=(wrk -t1 -c"$CONNS" -d"${DURATION}s" "$URL") ;;
    d) CMD=(wrk -t1 -c"$CONNS" -d"${DURATION}s" -s "$OUT/mix.lua" "$URL") ;;
    esac
}

# run_one CASE REP: one run on the generator's CPU, nginx's count on either side.
run_one() {
    local c=$1 rep=$2 dir=$OUT/raw/$1-$2 rc=0 before after
    mkdir -p "$dir"
    case_cmd "$c" "$dir"
    printf '%q ' "${CMD[@]}" >"$dir/cmd"
    sleep "$PAUSE"
    before=$(scrape)
    taskset -c "$GEN_CPU" /usr/bin/time -o "$dir/time" -f '%e %U %S' \
        timeout --foreground -k 5 "$RUN_LIMIT" "${CMD[@]}" >"$dir/stdout" 2>"$dir/stderr" || rc=$?
    after=$(scrape)
    # The closing scrape counts itself once: not the generator's.
    local requests=$((after - before - 1)) wall cpu
    read -r wall user sys < <(tail -n1 "$dir/time")
    cpu=$("$PYTHON" -c 'import sys; print(f"{float(sys.argv[1]) + float(sys.argv[2]):.2f}")' "$user" "$sys")
    local per
    per=$("$PYTHON" -c 'import sys; c = float(sys.argv[2]); print(f"{int(sys.argv[1]) / c:.0f}" if c > 0 else "nan")' "$requests" "$cpu")
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$c" "$rep" "$rc" "$requests" "$cpu" "$wall" "$per" >>"$RUNS"
    local failed=
    (( rc == 0 )) || failed=" (exit $rc: see $dir/stderr)"
    say "  $c rep $rep: $requests requests, ${cpu} CPU-s, $per req/CPU-s$failed"
}

# instr_one CASE SECONDS [RATE]: one run under cachegrind (stampede's open loop at RATE when given);
# appends its instructions and nginx's count.
instr_one() {
    local c=$1 secs=$2 rate=${3:-} dir=$OUT/raw/instr-$1-$2${3:+-at-$3} rc=0 before after
    mkdir -p "$dir"
    if [[ -n $rate ]]; then
        MODEL=requests RATE=$rate case_cmd "$c" "$dir" "$secs"
    else
        case_cmd "$c" "$dir" "$secs"
    fi
    CMD=(valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file="$dir/cachegrind.out" "${CMD[@]}")
    printf '%q ' "${CMD[@]}" >"$dir/cmd"
    sleep "$PAUSE"
    before=$(scrape)
    taskset -c "$GEN_CPU" timeout --foreground -k 5 "$INSTR_LIMIT" "${CMD[@]}" >"$dir/stdout" 2>"$dir/stderr" || rc=$?
    after=$(scrape)
    local instr
    instr=$(sed -n 's/^summary: \([0-9]*\).*/\1/p' "$dir/cachegrind.out" 2>/dev/null || true)
    printf '%s\t%s\t%s\t%s\t%s\n' "$c" "$secs${rate:+@$rate}" "$rc" "$((after - before - 1))" "${instr:-nan}" >>"$INSTR_RUNS"
    local failed=
    (( rc == 0 )) || failed=" (exit $rc: see $dir/stderr)"
    say "  $c ${secs}s${rate:+ at $rate req/s} under valgrind: $((after - before - 1)) requests, ${instr:-?} instructions$failed"
}

say "mix.sh: $REPS rep(s) x 4 cases x ${DURATION}s, model $MODEL${RATE:+ at $RATE req/s}, $CONNS connections; $CSV_NOTE"
say "results in $OUT"
CASES=(a b c d)
if [[ -n $INSTR && -n $CASES_ONLY ]]; then REPS=0; fi
for (( rep = 1; rep <= REPS; rep++ )); do
    # The order rotates by one each repetition, so no case always follows the same one.
    for (( k = 0; k < 4; k++ )); do
        run_one "${CASES[$(( (k + rep - 1) % 4 ))]}" "$rep"
    done
done

if [[ -n $INSTR ]]; then
    INSTR_RUNS=$OUT/instructions.tsv
    printf 'case\tseconds\trc\trequests\tinstructions\n' >"$INSTR_RUNS"
    read -r rate1 rate2 <<<"$INSTR_RATES"
    if ! is_uint "${rate1:-x}" || ! is_uint "${rate2:-x}" || (( rate1 >= rate2 )); then
        die "INSTR_RATES must be two rates, the lower first (got '$INSTR_RATES')"
    fi
    say "instructions under cachegrind: stampede ${INSTR_LONG}s at $rate1 and $rate2 req/s; wrk ${INSTR_SHORT}s and ${INSTR_LONG}s"
    for c in a b; do
        instr_one "$c" "$INSTR_LONG" "$rate1"
        instr_one "$c" "$INSTR_LONG" "$rate2"
    done
    for c in c d; do
        instr_one "$c" "$INSTR_SHORT"
        instr_one "$c" "$INSTR_LONG"
    done
fi

# ------------------------------------------------------------------ the answer

(( REPS == 0 )) || "$PYTHON" - "$RUNS" "$MODEL" "$CSV_NOTE" <<'EOF' | tee "$OUT/summary.txt"
import csv, statistics, sys
runs, model, note = sys.argv[1], sys.argv[2], sys.argv[3]
rows = list(csv.DictReader(open(runs), delimiter="\t"))
bad = [r for r in rows if r["rc"] != "0"]
by = {}
for r in rows:
    if r["rc"] == "0":
        by.setdefault(r["case"], {})[r["rep"]] = float(r["req_per_cpu_s"])
label = {"a": "stampede, one URL", "b": "stampede, 5-request mix", "c": "wrk, one URL", "d": "wrk, Lua 5-request mix"}
print(f"requests per CPU-second of the generator ({model}; {note})")
print(f"{'case':<30} {'min':>9} {'median':>9} {'max':>9}  runs")
for c in "abcd":
    v = sorted(by.get(c, {}).values())
    if v:
        print(f"{c}  {label[c]:<27} {v[0]:>9.0f} {statistics.median(v):>9.0f} {v[-1]:>9.0f}  {len(v)}")
def ratio(x, y, goal):
    # Ratios of the same repetition (side by side), then their min and median.
    reps = sorted(set(by.get(x, {})) & set(by.get(y, {})))
    v = sorted(by[x][r] / by[y][r] for r in reps)
    if not v:
        return f"{x}/{y}: no pair of runs"
    med = statistics.median(v)
    return f"{x}/{y}: min {v[0]:.3f}  median {med:.3f}  (goal >= {goal}: {'met' if med >= goal else 'NOT met'})"
print(ratio("b", "a", 0.90) + "   the mix's cost against one URL")
print(ratio("b", "d", 1.0) + "   stampede's mix against wrk's Lua mix")
print(ratio("d", "c", 0.0).split("  (goal")[0] + "   wrk's own cost of its Lua mix")
if model != "concurrency":
    print("note: stampede ran an open loop, wrk a closed one: b/d is not like for like")
if bad:
    print(f"note: {len(bad)} run(s) failed and are left out: " + ", ".join(f"{r['case']}-{r['rep']} (exit {r['rc']})" for r in bad))
EOF

[[ -z $INSTR ]] || "$PYTHON" - "$INSTR_RUNS" "$CSV_NOTE" <<'EOF' | tee -a "$OUT/summary.txt"
import csv, sys
rows = [r for r in csv.DictReader(open(sys.argv[1]), delimiter="\t")]
per = {}
for c in "abcd":
    runs = sorted((int(r["requests"]), int(r["requests"]), float(r["instructions"]))
                  for r in rows if r["case"] == c and r["rc"] == "0" and r["instructions"] != "nan")
    if len(runs) == 2 and runs[1][1] > runs[0][1]:
        (_, r1, i1), (_, r2, i2) = runs
        per[c] = (i2 - i1) / (r2 - r1)
label = {"a": "stampede, one URL", "b": "stampede, 5-request mix", "c": "wrk, one URL", "d": "wrk, Lua 5-request mix"}
print(f"instructions per request, marginal between two runs (stampede: two rates, wrk: two lengths; {sys.argv[2]})")
for c in "abcd":
    print(f"{c}  {label[c]:<27} " + (f"{per[c]:>9.0f}" if c in per else "        -  (a run failed)"))
def ratio(x, y, goal):
    if x in per and y in per:
        v = per[y] / per[x]
        return f"{x}/{y} in requests per instruction: {v:.3f} (goal >= {goal}: {'met' if v >= goal else 'NOT met'})"
    return f"{x}/{y}: -"
print(ratio("b", "a", 0.90))
print(ratio("b", "d", 1.0) + "  (stampede's open loop at a low rate, wrk's closed loop: not like for like)")
EOF
