#!/usr/bin/env bash
# TLS engines: donkey's HTTPS on the JDK's engine against the same server on OpenSSL's
# (BoringSSL, netty-tcnative-boringssl-static from the :dev profile).
#
# Server: bench/src/donkey/bench/tls-engines.clj, HTTPS only, one event loop, a sync Ring
# handler, an ECDSA P-256 certificate (made here by keytool), TLS 1.3 as negotiated by wrk.
# Pinned to CPU 0 (`taskset -c 0 java -XX:ActiveProcessorCount=1`); wrk pinned to CPU 1.
# Two tests per server:
#   json        GET /json on CONNECTIONS keep-alive connections: HTTPS throughput, req/s
#   handshake   GET /plaintext with `Connection: close` on HS_CONNECTIONS connections: each
#               request is a new TCP connection and a TLS handshake, so req/s is handshakes
#               per second. wrk resumes each connection's TLS 1.3 session (a pre-shared key
#               with a fresh key exchange; the server signs no certificate): these are
#               resumed handshakes. Full ones: bench/protocols.sh's handshake test
# RUNS rounds, the engines interleaved (jdk openssl jdk openssl ...), a fresh JVM per engine per
# round, a WARMUP-second wrk run before each measured one; the table gives medians, min..max and
# the OpenSSL/JDK ratio of the medians. Each measured run records the load average. Exits
# non-zero when a request failed (non-2xx or socket error, warm-ups included) or a server did
# not start on the engine it was asked for.
#
# Environment (defaults in brackets):
#   RUNS [5]  DURATION [10] s  WARMUP [3] s  CONNECTIONS [256]  HS_CONNECTIONS [32]
#   PORT [18493]  JAVA [java]  JVM_OPTS ["-Xms1g -Xmx1g"]  SKIP_BUILD [0]
#   SMOKE [0]: 1 for a quick check that both engines serve (RUNS=1 DURATION=2 WARMUP=1)
# Output: the table on stdout; runs and server logs under target/bench/results/tls-<stamp>/.
set -euo pipefail
# its own port, so that it can run beside bench/run.sh
export PORT="${PORT:-18493}"
if [ "${SMOKE:-0}" = 1 ]; then
  export RUNS=1 DURATION=2 WARMUP=1
fi
# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

HS_CONNECTIONS="${HS_CONNECTIONS:-32}"
check_int HS_CONNECTIONS 10000
ENGINES="jdk openssl"
STAMP="$(date -u +%Y%m%dT%H%M%SZ)"
LOGS="$RESULTS/tls-$STAMP"
mkdir -p "$LOGS"
RUNS_TSV="$LOGS/runs.tsv"
KEYSTORE="$OUT/tls-engines/server.p12"
STOREPASS="bench-only"

ensure_tools
ensure_built

if [ ! -s "$KEYSTORE" ]; then
  mkdir -p "$(dirname "$KEYSTORE")"
  keytool -genkeypair -alias server -keyalg EC -groupname secp256r1 -sigalg SHA256withECDSA \
    -dname CN=127.0.0.1 -ext SAN=IP:127.0.0.1,DNS:localhost -validity 3650 \
    -storetype PKCS12 -keystore "$KEYSTORE" -storepass "$STOREPASS" >/dev/null 2>&1 \
    || die "keytool could not make $KEYSTORE"
fi

# start_tls ENGINE LOGFILE: the server pinned to SERVER_CPU, once it answers over HTTPS
start_tls() {
  local engine="$1" logfile="$2" i
  for i in $(seq 1 50); do port_busy || break; sleep 0.2; done
  port_busy && die "port $PORT is in use (set PORT=...)"
  # shellcheck disable=SC2086
  taskset -c "$SERVER_CPU" "$JAVA" -XX:ActiveProcessorCount=1 $JVM_OPTS -cp "$CP" \
    clojure.main -m donkey.bench.tls-engines "$engine" "$PORT" "$KEYSTORE" "$STOREPASS" \
    >"$logfile" 2>&1 &
  SERVER_PID=$!
  for i in $(seq 1 600); do
    if ! kill -0 "$SERVER_PID" 2>/dev/null; then cat "$logfile" >&2; SERVER_PID=""; return 1; fi
    curl -sk -o /dev/null --max-time 1 "https://127.0.0.1:$PORT/plaintext" && break
    sleep 0.1
  done
  grep -q "engine $engine," "$logfile" || { log "$engine: not served on that engine: $(cat "$logfile")"; return 1; }
  [ "$(curl -sk --max-time 5 "https://127.0.0.1:$PORT/json")" = '{"message":"Hello, World!"}' ] \
    || { log "$engine: /json answered wrongly"; return 1; }
}

# wrk_run OUTFILE TEST SECONDS: one wrk run of TEST; prints "rps errors". wrk asks for
# https://localhost (the certificate's name; 127.0.0.1 here): given an IP address it sends
# that as its TLS server name, and its requests then got no answer from the JDK engine.
wrk_run() {
  local out="$1" test="$2" secs="$3"
  case "$test" in
    json) taskset -c "$LOAD_CPU" wrk -t1 -c"$CONNECTIONS" -d"${secs}s" --timeout 10s \
            "https://localhost:$PORT/json" >"$out" 2>&1 || true ;;
    handshake) taskset -c "$LOAD_CPU" wrk -t1 -c"$HS_CONNECTIONS" -d"${secs}s" --timeout 10s -H "Connection: close" \
                 "https://localhost:$PORT/plaintext" >"$out" 2>&1 || true ;;
  esac
  awk '/Requests\/sec/ {rps=$2}
       /Non-2xx/ {err+=$NF}
       /Socket errors/ {gsub(/,/, ""); for (i=1; i<=NF; i++) if ($i ~ /^[0-9]+$/) err+=$i}
       END {printf "%s %d\n", (rps == "" ? 0 : rps), err}' "$out"
}

failed=0
printf 'round\tengine\ttest\trps\terrors\twarmup_errors\tloadavg\n' >"$RUNS_TSV"
log "uptime: $(uptime)"
log "${RUNS} rounds x ($ENGINES) x (json handshake): warm-up ${WARMUP}s, measured ${DURATION}s," \
    "json on $CONNECTIONS connections, handshakes on $HS_CONNECTIONS"
for round in $(seq 1 "$RUNS"); do
  for engine in $ENGINES; do
    slog="$LOGS/server-$engine-r$round.log"
    log "round $round: $engine"
    if ! start_tls "$engine" "$slog"; then
      log "$engine failed to start; log: $slog"; failed=1; stop_server; continue
    fi
    for test in json handshake; do
      read -r _ werr < <(wrk_run "$LOGS/warmup-$engine-$test-r$round.txt" "$test" "$WARMUP")
      load="$(cut -d' ' -f1-3 /proc/loadavg)"
      read -r rps err < <(wrk_run "$LOGS/wrk-$engine-$test-r$round.txt" "$test" "$DURATION")
      printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$round" "$engine" "$test" "$rps" "$err" "$werr" "$load" >>"$RUNS_TSV"
      log "  $test: $rps req/s, errors $err (warm-up $werr), load $load"
      if [ "$err" != 0 ] || [ "$werr" != 0 ] || [ "${rps%%.*}" = 0 ]; then failed=1; fi
    done
    stop_server
  done
done
log "uptime: $(uptime)"

python3 - "$RUNS_TSV" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
med = {}
print("| test | engine | median req/s | min..max | errors | runs |")
print("| --- | --- | ---: | --- | ---: | ---: |")
for test in ("json", "handshake"):
    for engine in ("jdk", "openssl"):
        r = [x for x in rows if x["test"] == test and x["engine"] == engine]
        if not r:
            continue
        v = [float(x["rps"]) for x in r]
        med[(test, engine)] = statistics.median(v)
        errs = sum(int(x["errors"]) + int(x["warmup_errors"]) for x in r)
        print(f"| {test} | {engine} | {med[(test, engine)]:,.0f} | {min(v):,.0f}..{max(v):,.0f} | {errs} | {len(v)} |")
for test in ("json", "handshake"):
    if (test, "jdk") in med and (test, "openssl") in med and med[(test, "jdk")] > 0:
        print(f"{test}: OpenSSL/JDK = {med[(test, 'openssl')] / med[(test, 'jdk')]:.2f}")
PY
log "runs: $RUNS_TSV"
exit $failed
