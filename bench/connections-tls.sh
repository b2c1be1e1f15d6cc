#!/usr/bin/env bash
# bench/connections-tls.sh: bench/connections.sh over TLS. A new TLS connection per request at the same
# rate for stampede, oha and httperf against one nginx worker (TLS 1.3 only, TLS_AES_128_GCM_SHA256,
# X25519, a key this script makes: ECDSA P-256 or RSA-2048), HTTP/1.1. Two blocks per rate:
#   full     every connection a full handshake: nginx keeps no sessions (no cache, no tickets), and the
#            clients are told not to resume (stampede --tls-sessions fresh, httperf --ssl-no-reuse)
#   resumed  nginx with a session cache and tickets; stampede --tls-sessions resume, httperf --ssl (it
#            reuses its session by default), oha as it is (it has no switch; the check shows what it does)
# Before each block a short run per tool against an nginx that logs $ssl_session_reused, $ssl_protocol,
# $ssl_cipher and $ssl_curve checks what each tool really did; then REPS interleaved measured runs (log
# off), one strace -f -c run and one perf record run per tool (the client's crypto share).
#
#   bench/connections-tls.sh                                  # RATES="500 1000", KEY=ec: about 10 minutes
#   REPS=1 DURATION=2 RATES=1000 bench/connections-tls.sh     # a quick check
#   KEY=rsa MODES=full bench/connections-tls.sh               # RSA-2048, full handshakes only
#
# Settings (environment variables), besides bench/connections.sh's (RATES, REPS, DURATION, CALLS,
# TRACE_DURATION, OUT, STAMPEDE, PAUSE, SERVER_CPU, GEN_CPU, OHA_CONNS, STAMPEDE_BENCH_NO_OHA):
#   KEY=ec             ec (ECDSA P-256) or rsa (RSA-2048)
#   MODES="full resumed"
#   PORT=19443         nginx's TLS port on 127.0.0.1;  STATUS_PORT=19180 its plain stub_status
#   PERF=1             set PERF=0 to skip the perf record runs
NAME=connections-tls.sh
PORT=${PORT:-19443}
STATUS_PORT=${STATUS_PORT:-19180}
RATES=${RATES:-500 1000}
KEY=${KEY:-ec}
MODES=${MODES:-full resumed}
WANT_PERF=${PERF:-1}
SUFFIX=connections-tls-$KEY
# Checked before the shared part makes OUT or builds anything.
bad() { echo "$NAME: $*" >&2; exit 2; }
[[ $KEY == ec || $KEY == rsa ]] || bad "KEY must be ec or rsa (got '$KEY')"
[[ -n ${MODES// /} ]] || bad "MODES is empty (full resumed)"
for m in $MODES; do [[ $m == full || $m == resumed ]] || bad "unknown mode '$m' in MODES (full resumed)"; done
[[ $WANT_PERF == 0 || $WANT_PERF == 1 ]] || bad "PERF must be 0 or 1 (got '$WANT_PERF')"
# shellcheck source=bench/lib-connections.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib-connections.sh"
command -v openssl >/dev/null || die "openssl not found (apt-get install -y openssl)"
if [[ $WANT_PERF == 1 ]] && ! command -v perf >/dev/null; then
    say "note: perf not found (apt-get install -y linux-perf): no profiles"
    WANT_PERF=0
fi
(( PORT != STATUS_PORT )) || die "PORT and STATUS_PORT must differ"

# ------------------------------------------------------------------ the key and certificate

case $KEY in
ec) openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj /CN=127.0.0.1 \
        -addext subjectAltName=IP:127.0.0.1 -keyout "$TMP/key.pem" -out "$TMP/cert.pem" 2>"$TMP/openssl.err" ;;
rsa) openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=127.0.0.1 \
        -addext subjectAltName=IP:127.0.0.1 -keyout "$TMP/key.pem" -out "$TMP/cert.pem" 2>"$TMP/openssl.err" ;;
esac || die "openssl could not make the key: $(cat "$TMP/openssl.err")"
cp "$TMP/cert.pem" "$OUT/cert.pem"
CERT_INFO=$(openssl x509 -in "$TMP/cert.pem" -noout -text | grep -m1 -E 'Public Key Algorithm|NIST CURVE|Public-Key' | sed 's/^ *//')

# tls_server MODE LOG: nginx's TLS server block; LOG "off" or a file for the check.
tls_server() {
    local sessions
    if [[ $1 == full ]]; then
        sessions="ssl_session_tickets off;
        ssl_session_cache off;"
    else
        sessions="ssl_session_tickets on;
        ssl_session_cache shared:SSL:20m;
        ssl_session_timeout 1h;"
    fi
    local log="access_log off;"
    [[ $2 != off ]] && log="access_log $2 reuse;"
    cat <<EOS
    server {
        listen 127.0.0.1:$PORT ssl backlog=4096;
        ssl_certificate $TMP/cert.pem;
        ssl_certificate_key $TMP/key.pem;
        ssl_protocols TLSv1.3;
        ssl_conf_command Ciphersuites TLS_AES_128_GCM_SHA256;
        ssl_ecdh_curve X25519;
        $sessions
        $log
        location / { return 200 "hello\n"; }
    }
EOS
}

URL=https://127.0.0.1:$PORT/
OHA_EXTRA=(--insecure)
# tools_for MODE: the TLS flags of each tool in that mode
tools_for() {
    if [[ $1 == full ]]; then
        STAMPEDE_EXTRA=(--insecure --tls-sessions fresh)
        HTTPERF_EXTRA=(--ssl --ssl-no-reuse)
    else
        STAMPEDE_EXTRA=(--insecure --tls-sessions resume)
        HTTPERF_EXTRA=(--ssl)
    fi
}

OHA_TLS=-
if [[ -n $OHA ]]; then
    # oha 1.x builds rustls by default ("native-tls" is a feature) and installs aws-lc-rs as rustls'
    # provider (src/tls_config.rs). Say what this binary holds: aws-lc's or ring's symbols, or libssl.
    oha_syms=$(strings "$OHA" 2>/dev/null | grep -o -E 'aws_lc_0_[0-9]+_[0-9]+|ring_core_0_[0-9]+_[0-9]+' | head -n1 || true)
    case $oha_syms in
    aws_lc*) OHA_TLS="rustls with aws-lc-rs (symbols $oha_syms*)" ;;
    ring_core*) OHA_TLS="rustls with ring (symbols $oha_syms*)" ;;
    *) if ldd "$OHA" 2>/dev/null | grep -q libssl; then
           OHA_TLS="native-tls (OpenSSL, $(ldd "$OHA" | awk '/libssl/ { print $1; exit }'))"
       fi ;;
    esac
fi

n_rates=$(wc -w <<<"$RATES")
n_modes=$(wc -w <<<"$MODES")
n_tools=${#GEN_TOOLS[@]}
n_runs=$(( n_rates * n_modes * n_tools * REPS ))
n_short=$(( n_rates * n_modes * n_tools * (2 + WANT_PERF) ))
machine_facts tls "TLS 1.3 only, TLS_AES_128_GCM_SHA256, X25519, key $KEY ($CERT_INFO), HTTP/1.1" \
    'oha TLS stack' "$OHA_TLS" \
    'openssl' "$(openssl version)" \
    'httperf TLS' "OpenSSL ($(ldd "$(command -v httperf)" | awk '/libssl/ { print $1; exit }')); its --ssl-ciphers sets only the TLS 1.2 list, so it gets the one TLS 1.3 suite nginx offers"
say ""
say "$n_runs runs of ${DURATION}s and $n_short runs of ${TRACE_DURATION}s (check, strace$( ((WANT_PERF)) && echo ', perf')): about $(( (n_runs * (DURATION + 3) + n_short * (TRACE_DURATION + 6)) / 60 + 1 )) min; results in $OUT"

titles=()
for mode in $MODES; do
    tools_for "$mode"
    for rate in $RATES; do
        block=tls-$KEY-$mode-c$CALLS-$rate
        say ""
        say "== $block: $rate new TLS connections/s ($mode handshakes), $CALLS request(s) each: ${GEN_TOOLS[*]} =="
        # The check: what each tool did, from nginx's own log.
        nginx_start $(( n_tools * (TRACE_LIMIT + 5) + 60 )) "$(tls_server "$mode" "$TMP/reuse.log")"
        for tool in "${GEN_TOOLS[@]}"; do
            "cmd_$tool" "$rate" "$TRACE_DURATION"
            check_one "$block" "$tool" "$rate" "$TMP/reuse.log"
        done
        nginx_stop
        # The measured runs, the system calls and the profiles, with the log off.
        nginx_start $(( n_tools * REPS * (RUN_LIMIT + 5) + n_tools * 2 * (TRACE_LIMIT + 130) + 60 )) "$(tls_server "$mode" off)"
        measure "$block" "$rate"
        if [[ $WANT_PERF == 1 ]]; then
            for tool in "${GEN_TOOLS[@]}"; do
                "cmd_$tool" "$rate" "$TRACE_DURATION"
                perf_one "$block" "$tool" "$rate"
            done
        fi
        nginx_stop
        titles+=(--title "$block=TLS 1.3 $mode handshakes ($KEY key), $rate conn/s asked of every tool, $CALLS request(s) per connection")
    done
done

say ""
"$PYTHON" "$HELPER" report --tls --raw "$RAW" --syscalls "$SYSCALLS" --perf "$PERF" --checks "$CHECKS" \
    --machine "$OUT/machine.tsv" --outdir "$OUT" "${titles[@]}"
say "oha's TLS stack: $OHA_TLS"
say "raw results: $OUT/runs.jsonl, $OUT/runs.tsv, $OUT/syscalls.jsonl, $OUT/perf.jsonl, $OUT/checks.jsonl; tool outputs: $OUT/raw/"
