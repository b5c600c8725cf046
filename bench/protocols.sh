#!/usr/bin/env bash
# TLS and HTTP/2 throughput, the third part of `make bench` (DESIGN.md section 7): each donkey
# variant against raw Vert.x (bench/java/donkey/bench/RawVertx.java) with the same protocol
# settings, in the same run. Tests:
#   tls-json    GET /json over HTTP/1.1 on TLS, not pipelined, on CONNECTIONS connections whose
#               handshakes were done before the measured window: h2load --h1 -m1 with
#               --warm-up-time TLS_SETTLE (its connections are made and handshaken at the start
#               of that warm-up; a run that makes a connection inside the window fails), after
#               a WARMUP-second h2load run on connections of its own. Handshakes are the
#               handshake test's; wrk, whose runs each open their connections anew, measured a
#               storm of CONNECTIONS handshakes here more than request throughput
#   handshake   a new TLS connection with a full handshake per request: HS_CLIENTS
#               `openssl s_time -new -www /json` side by side (each connects, handshakes
#               without resuming a session, sends GET /json as HTTP/1.0, reads the answer up to
#               the close, and again), so req/s is handshakes per second. Not wrk with
#               `Connection: close`: it keeps each connection's TLS session and resumes it
#   h2c         GET /plaintext over cleartext HTTP/2 (prior knowledge), h2load, H2_CONNECTIONS
#               connections with H2_STREAMS concurrent streams each
#   h2          the same over TLS, HTTP/2 negotiated by ALPN
# The tls-json and handshake tests run against servers started with TLS only (HTTP/1.1 on it,
# donkey's default for :ssl?); h2c and h2 against servers started with :h2? and :h2c? on. The
# TLS key is an RSA 2048 one made with openssl at start (target/bench/tls, never committed);
# every server runs on one TLS engine, TLS_ENGINE, with TLS 1.3 and 1.2 and the same cipher
# suites: the JDK's (Netty told OpenSSL is unavailable, -Dio.netty.handler.ssl.noOpenSsl=true:
# the :dev profile puts netty-tcnative on the bench's classpath, and donkey's :ssl-provider
# :auto would take it while raw Vert.x stays on the JDK's) or OpenSSL's (raw Vert.x given
# OpenSSLEngineOptions). Each server is checked to run on it (check_engine).
# raw-vertx takes the key as PemKeyCertOptions (the PEM paths, as Vert.x documents it);
# raw-vertx-km as a key manager built once from the same files (RawVertx#keyManager). The
# table's ratios and targets are to raw-vertx, with a column of ratios to raw-vertx-km.
#
# As bench/run.sh: each server pinned to CPU 0 with one event loop, the load generator to
# CPU 1; RUNS rounds interleaved across variants, a fresh JVM per (configuration, variant,
# round), a WARMUP-second run before each measured one; the table shows medians and the range
# of the 1-minute load average over the rounds. Exits non-zero when a request failed (warm-ups
# included), a server did not start or answered wrongly, or h2load did not get HTTP/2.
#
# Environment (defaults in brackets), beside run.sh's RUNS DURATION WARMUP CONNECTIONS PORT
# JAVA JVM_OPTS SKIP_BUILD:
#   PROTO_TESTS ["handshake tls-json h2c h2"] (run in that order)  TLS_PORT [PORT+1]
#   HS_WARMUP [10] s: the handshake test's warm-up (see below)
#   TLS_SETTLE [3] s: the measured tls-json run's own warm-up, in which its connections are made
#   TLS_ENGINE [jdk]: jdk or openssl, every server's TLS engine (above)
#   H2_WARMUP [10] s: the warm-up of the first HTTP/2 test of a server (see below)
#   TLS_VARIANTS ["raw-vertx raw-vertx-km donkey-nb"] (tls-json, handshake)
#   H2_VARIANTS ["raw-vertx donkey-nb donkey-sync"] (h2c, h2)
#   HS_CLIENTS [32]  H2_CONNECTIONS [32]  H2_STREAMS [100]
# Quick smoke run: RUNS=1 DURATION=3 WARMUP=3 HS_WARMUP=3 H2_WARMUP=3 bash bench/protocols.sh
# Output: the table on stdout; runs and server logs under target/bench/results/<stamp>-protocols/.
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

PROTO_TESTS="${PROTO_TESTS:-handshake tls-json h2c h2}"
HS_WARMUP="${HS_WARMUP:-10}"
TLS_SETTLE="${TLS_SETTLE:-3}"
TLS_ENGINE="${TLS_ENGINE:-jdk}"
H2_WARMUP="${H2_WARMUP:-10}"
TLS_PORT="${TLS_PORT:-$((PORT + 1))}"
TLS_VARIANTS="${TLS_VARIANTS:-raw-vertx raw-vertx-km donkey-nb}"
H2_VARIANTS="${H2_VARIANTS:-raw-vertx donkey-nb donkey-sync}"
HS_CLIENTS="${HS_CLIENTS:-32}"
H2_CONNECTIONS="${H2_CONNECTIONS:-32}"
H2_STREAMS="${H2_STREAMS:-100}"
for _v in TLS_PORT:65535 HS_WARMUP:120 TLS_SETTLE:60 H2_WARMUP:120 HS_CLIENTS:256 H2_CONNECTIONS:10000 H2_STREAMS:10000; do
  check_int "${_v%%:*}" "${_v#*:}"
done
[ "$TLS_PORT" != "$PORT" ] || die "TLS_PORT must differ from PORT"
case "$TLS_ENGINE" in jdk|openssl) ;; *) die "TLS_ENGINE must be jdk or openssl, got '$TLS_ENGINE'" ;; esac

STAMP="$(date -u +%Y%m%dT%H%M%SZ)"
LOGS="$RESULTS/$STAMP-protocols"
mkdir -p "$LOGS"
RUNS_TSV="$LOGS/runs.tsv"
TLS_DIR="$OUT/tls"

ensure_tools
command -v h2load >/dev/null 2>&1 || die "h2load not found (Debian package nghttp2-client)"
command -v openssl >/dev/null 2>&1 || die "openssl not found"
ensure_built
json_mode_as_run

# A self-signed RSA 2048 certificate for 127.0.0.1, made anew for each run: the clients do not
# verify it, and no private key is kept in the repository. openssl writes the unencrypted
# PKCS#8 key donkey's :ssl-key reads.
mkdir -p "$TLS_DIR"
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=localhost \
  -addext subjectAltName=DNS:localhost,IP:127.0.0.1 \
  -keyout "$TLS_DIR/key.pem" -out "$TLS_DIR/cert.pem" >"$LOGS/openssl.log" 2>&1 \
  || { cat "$LOGS/openssl.log" >&2; die "openssl could not make the test key"; }

# The JVM options that turn a configuration on, read by RawVertx and by the bench app alike;
# the engine's by RawVertx and by Netty (donkey's :ssl-provider :auto asks Netty for OpenSSL).
config_opts() {
  local tls=(-Ddonkey.bench.tlsPort="$TLS_PORT" -Ddonkey.bench.cert="$TLS_DIR/cert.pem"
             -Ddonkey.bench.key="$TLS_DIR/key.pem")
  if [ "$TLS_ENGINE" = jdk ]; then tls+=(-Dio.netty.handler.ssl.noOpenSsl=true)
  else tls+=(-Ddonkey.bench.tlsEngine=openssl); fi
  case "$1" in
    tls) echo "${tls[*]}" ;;
    h2) echo "${tls[*]} -Ddonkey.bench.h2=true -Ddonkey.bench.h2c=true" ;;
  esac
}

tests_of() {  # the tests of a configuration that PROTO_TESTS asks for
  local t out=()
  for t in $PROTO_TESTS; do
    case "$t" in
      tls-json|handshake) [ "$1" = tls ] && out+=("$t") ;;
      h2c|h2) [ "$1" = h2 ] && out+=("$t") ;;
      *) die "unknown test $t (PROTO_TESTS: tls-json handshake h2c h2)" ;;
    esac
  done
  echo "${out[*]:-}"
}

tls_port_busy() { ss -ltnH "sport = :$TLS_PORT" 2>/dev/null | grep -q .; }

# check_engine VARIANT: the server's TLS context is on TLS_ENGINE: the live Netty server
# contexts (a class histogram, after a full GC) are JdkSslServerContext on the JDK's engine and
# [ReferenceCounted]OpenSslServerContext on OpenSSL's; Vert.x keeps the listener's for its life.
check_engine() {
  local out jcmd jdk openssl
  # the jcmd of the JDK the variant runs on
  jcmd="$(dirname "$(readlink -f "$(command -v "$(java_of "$1")")")")/jcmd"
  out="$("$jcmd" "$SERVER_PID" GC.class_histogram 2>&1)" || { log "$1: jcmd failed: $out"; return 1; }
  jdk="$(awk '$4 == "io.netty.handler.ssl.JdkSslServerContext"' <<<"$out" | wc -l)"
  openssl="$(awk '$4 ~ /^io\.netty\.handler\.ssl\.(ReferenceCounted)?OpenSslServerContext$/' <<<"$out" | wc -l)"
  case "$TLS_ENGINE:$jdk:$openssl" in
    jdk:1:0|openssl:0:[12]) return 0 ;;
  esac
  log "$1: not a TLS context on $TLS_ENGINE's engine alone (server contexts: JDK $jdk, OpenSSL $openssl)"
  return 1
}

# start_server waits for the plain listener only; the TLS one may bind a moment later.
wait_tls() {
  local i
  for i in $(seq 1 100); do
    curl -sk -o /dev/null --max-time 1 "https://127.0.0.1:$TLS_PORT/plaintext" && return 0
    sleep 0.1
  done
  log "$1: the TLS listener did not answer within 10 s"; return 1
}

# check_protocols VARIANT CONFIG: /json and /plaintext answer over the configuration's
# protocols, in the protocol asked for (curl's %{http_version}).
check_protocols() {
  local v="$1" config="$2" ok=0 got
  check_one() {  # check_one WHAT WANT_VERSION WANT_BODY curl-args...
    local what="$1" want_v="$2" want_body="$3"; shift 3
    got="$(curl -s --max-time 5 -w '\n%{http_code} %{http_version}' "$@" || true)"
    if [ "$got" != "$want_body"$'\n'"200 $want_v" ]; then
      log "$v $what: wanted 200, HTTP/$want_v, '$want_body'; got '${got//$'\n'/ | }'"; ok=1
    fi
  }
  local json='{"message":"Hello, World!"}' hello='Hello, World!'
  check_one "https /json" 1.1 "$json" -k --http1.1 "https://127.0.0.1:$TLS_PORT/json"
  if [ "$config" = h2 ]; then
    check_one "h2 /plaintext" 2 "$hello" -k --http2 "https://127.0.0.1:$TLS_PORT/plaintext"
    check_one "h2c /plaintext" 2 "$hello" --http2-prior-knowledge "http://127.0.0.1:$PORT/plaintext"
  fi
  return $ok
}

# handshake_run SECONDS OUTFILE: HS_CLIENTS s_time processes pinned to LOAD_CPU for SECONDS;
# the rate is the connections made over the wall time from the first start to the last exit
# (each finishes the connection under way when its time is up).
handshake_run() {
  local secs="$1" outfile="$2" i pids=() t0
  t0="$(date +%s%N)"
  for i in $(seq 1 "$HS_CLIENTS"); do
    taskset -c "$LOAD_CPU" openssl s_time -connect "127.0.0.1:$TLS_PORT" -new -www /json \
      -time "$secs" >"$outfile.$i" 2>&1 &
    pids+=($!)
  done
  for i in "${pids[@]}"; do wait "$i" || true; done
  python3 "$ROOT/bench/protocols.py" stime "$outfile" "$HS_CLIENTS" "$t0" "$(date +%s%N)"
  for i in $(seq 1 "$HS_CLIENTS"); do rm -f "$outfile.$i"; done
}

# h2load_run SECONDS TEST OUTFILE [SETTLE]: one h2load run pinned to LOAD_CPU; with SETTLE,
# SETTLE seconds of h2load's own warm-up (--warm-up-time) first, in which it makes its
# connections, and the run fails if it made one in the SECONDS measured after.
h2load_run() {
  local secs="$1" test="$2" outfile="$3" settle="${4:-}" args
  case "$test" in
    h2c) args=(-c"$H2_CONNECTIONS" -m"$H2_STREAMS" "http://127.0.0.1:$PORT/plaintext") ;;
    h2) args=(-c"$H2_CONNECTIONS" -m"$H2_STREAMS" "https://127.0.0.1:$TLS_PORT/plaintext") ;;
    tls-json) args=(--h1 -c"$CONNECTIONS" -m1 "https://127.0.0.1:$TLS_PORT/json") ;;
  esac
  taskset -c "$LOAD_CPU" h2load -t1 -D"$secs" ${settle:+--warm-up-time="$settle"} "${args[@]}" \
    >"$outfile" 2>&1 || true
  python3 "$ROOT/bench/protocols.py" h2load "$outfile" "$test" ${settle:+window}
}

# measure SECONDS TEST OUTFILE [SETTLE]: prints "rps=N errors=N"; errors -1 when the run
# failed as a whole (not one answer, h2load did not get the protocol asked for, or a tls-json
# connection was made in the measured window). SETTLE: tls-json's own warm-up (h2load_run).
measure() {
  case "$2" in
    handshake) handshake_run "$1" "$3" ;;
    h2c|h2|tls-json) h2load_run "$@" ;;
  esac
}

# The handshake test runs first on a fresh JVM and warms up longer: a full handshake's
# crypto (RSA signature, X25519) runs interpreted for the first few thousand handshakes,
# slow enough that tls-json's CONNECTIONS handshakes, at the start of each run, took seconds.
# The first HTTP/2 test of a server warms up longer too: after 3 s the JIT had not finished
# with the stream path, and the first test of a round measured a donkey variant at 0.7x of
# the same server in the test after it.
warmup_of() {  # warmup_of TEST FIRST_OF_SERVER(0/1)
  case "$1" in
    handshake) echo "$HS_WARMUP" ;;
    h2c|h2) if [ "$2" = 1 ]; then echo "$H2_WARMUP"; else echo "$WARMUP"; fi ;;
    *) echo "$WARMUP" ;;
  esac
}

failed=0
printf 'round\tconfig\tvariant\ttest\trps\terrors\twarmup_errors\tloadavg\n' >"$RUNS_TSV"
plan=()
for config in tls h2; do
  tests="$(tests_of "$config")"
  [ -n "$tests" ] || continue
  if [ "$config" = tls ]; then vs="$TLS_VARIANTS"; else vs="$H2_VARIANTS"; fi
  # shellcheck disable=SC2086  # a list of names
  select_variants $vs
  for v in "${ACTIVE[@]}"; do plan+=("$config $v $tests"); done
done
[ ${#plan[@]} -gt 0 ] || die "nothing to run"
total=$(( RUNS * ${#plan[@]} ))
n=0
log "${RUNS} rounds x ${#plan[@]} servers ($PROTO_TESTS): warm-up ${WARMUP}s, measured ${DURATION}s;" \
    "TLS port $TLS_PORT; tls-json on $CONNECTIONS connections made in a ${TLS_SETTLE}s settle;" \
    "h2load -c$H2_CONNECTIONS -m$H2_STREAMS; handshakes from $HS_CLIENTS clients"
for round in $(seq 1 "$RUNS"); do
  for entry in "${plan[@]}"; do
    read -r config v tests <<<"$entry"
    n=$((n + 1))
    slog="$LOGS/server-$config-$v-r$round.log"
    log "[$n/$total] round $round: $v ($config)"
    for _ in $(seq 1 50); do tls_port_busy || break; sleep 0.2; done
    tls_port_busy && die "TLS port $TLS_PORT is in use (set TLS_PORT=...)"
    # shellcheck disable=SC2046  # JVM options, split on purpose
    if ! start_server "$v" "$slog" $(config_opts "$config") || ! wait_tls "$v"; then
      log "$v ($config) failed to start; log: $slog"; failed=1; stop_server
      for test in $tests; do
        printf '%s\t%s\t%s\t%s\t0\t-1\t-1\t-\n' "$round" "$config" "$v" "$test" >>"$RUNS_TSV"
      done
      continue
    fi
    [ "$round" -gt 1 ] || head -n 1 "$slog" >&2
    check_protocols "$v" "$config" || { log "$v answers wrongly; log: $slog"; failed=1; }
    check_engine "$v" || failed=1
    first=1
    for test in $tests; do
      w="$(measure "$(warmup_of "$test" "$first")" "$test" "$LOGS/$test-$v-r$round-warmup.txt")"
      first=0
      settle=""; [ "$test" != tls-json ] || settle="$TLS_SETTLE"
      m="$(measure "$DURATION" "$test" "$LOGS/$test-$v-r$round.txt" ${settle:+"$settle"})"
      werr="$(field errors "$w")"; err="$(field errors "$m")"; rps="$(field rps "$m")"
      [ "$err" -eq 0 ] && [ "$werr" -eq 0 ] || failed=1
      load="$(cut -d' ' -f1 /proc/loadavg)"
      printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$round" "$config" "$v" "$test" "${rps:-0}" \
        "$err" "$werr" "$load" >>"$RUNS_TSV"
      log "    $test: ${rps:-?} req/s, errors $err (warm-up $werr), load average $load"
    done
    check_reflection "$v" "$slog" || failed=1
    stop_server
  done
done

python3 "$ROOT/bench/protocols.py" table "$RUNS_TSV" "$LOGS/table.md"
{
  echo "TLS engine: $TLS_ENGINE (every server, checked); medians of $RUNS runs per (variant, test), interleaved; ${WARMUP}s warm-up (handshake ${HS_WARMUP}s, a server's first HTTP/2 test ${H2_WARMUP}s) + ${DURATION}s measured;"
  echo "load on CPU $LOAD_CPU, server on CPU $SERVER_CPU; h2load --h1 -t1 -c$CONNECTIONS -m1 --warm-up-time=$TLS_SETTLE (tls-json," \
       "connections made before the window); $HS_CLIENTS openssl s_time -new (handshake); h2load -t1 -c$H2_CONNECTIONS -m$H2_STREAMS (h2c, h2);"
  echo "load avg = the 1-minute load average after each measured run (min..max); every run: $RUNS_TSV"
} | tee -a "$LOGS/table.md"
cp "$LOGS/table.md" "$RESULTS/latest-protocols.md"

if [ "$failed" -ne 0 ]; then
  log "FAILED: some requests failed or a server misbehaved (logs in $LOGS)"
  exit 1
fi
