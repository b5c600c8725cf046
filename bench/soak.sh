#!/usr/bin/env bash
# Soak test (`make soak`): a donkey server under a steady, mixed load for minutes, checked for
# lost requests and memory growth. Not part of `make test`.
#
# Server: bench/soak/donkey/soak_server.clj (one sync Ring handler: /small 13 B, /large a 1 MiB
# InputStream, /fail throws -> 500, /upload 64 KiB bodies, half Content-Length, half chunked),
# in its own JVM with a fixed, pre-touched heap (-Xms = -Xmx, -XX:+AlwaysPreTouch), so its RSS
# moves only with native memory (direct buffers, threads, metaspace, code) and a heap leak shows
# in the live heap measured after a full GC.
# Load: bench/soak/loadgen (Go, standard library only), open-loop at SOAK_RATE req/s on
# SOAK_CONNECTIONS keep-alive connections, latency from each request's scheduled time.
#
# Steps: build (kernel compiled into target/soak/classes, sources snapshotted, so concurrent
# edits do not disturb a run) -> start the server -> warm-up (SOAK_WARMUP s, same load) -> full
# GC, live heap -> the soak (SOAK_SECONDS, RSS sampled every 10 s) -> full GC, live heap -> stop
# the server (SIGTERM, graceful) -> summary of the server log.
#
# Exits non-zero when any request was lost, not sent on schedule or answered wrongly, when the
# server's RSS grew more than SOAK_RSS_MAX_GROWTH_MB from the start to the end of the soak, or
# when its live heap after a full GC grew more than SOAK_HEAP_MAX_GROWTH_MB.
#
# Environment [defaults]:
#   SOAK_SECONDS [300]  SOAK_RATE [1000] req/s  SOAK_CONNECTIONS [500]  SOAK_WARMUP [15] s
#   SOAK_MIX ["small=75,large=5,fail=5,upload=15"]  SOAK_TIMEOUT [10s] per request
#   SOAK_HEAP [512m]  SOAK_RSS_MAX_GROWTH_MB [96]  SOAK_HEAP_MAX_GROWTH_MB [24]
#   SOAK_JVM_OPTS [""] extra JVM options for the server  JAVA [java]
# Output: stdout; logs, the server log and summary.json under target/soak/<stamp>/.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

SOAK_SECONDS="${SOAK_SECONDS:-300}"
SOAK_RATE="${SOAK_RATE:-1000}"
SOAK_CONNECTIONS="${SOAK_CONNECTIONS:-500}"
SOAK_WARMUP="${SOAK_WARMUP:-15}"
SOAK_MIX="${SOAK_MIX:-small=75,large=5,fail=5,upload=15}"
SOAK_TIMEOUT="${SOAK_TIMEOUT:-10s}"
SOAK_HEAP="${SOAK_HEAP:-512m}"
SOAK_RSS_MAX_GROWTH_MB="${SOAK_RSS_MAX_GROWTH_MB:-96}"
SOAK_HEAP_MAX_GROWTH_MB="${SOAK_HEAP_MAX_GROWTH_MB:-24}"
SOAK_JVM_OPTS="${SOAK_JVM_OPTS:-}"
JAVA="${JAVA:-java}"

OUT="$ROOT/target/soak"
STAMP="$(date -u +%Y%m%dT%H%M%SZ)"
LOGS="$OUT/$STAMP"
mkdir -p "$LOGS"

log() { printf '[soak %s] %s\n' "$(date +%H:%M:%S)" "$*"; }
die() { log "ERROR: $*" >&2; exit 2; }

for v in SOAK_SECONDS:86400 SOAK_RATE:100000 SOAK_CONNECTIONS:20000 SOAK_WARMUP:3600 \
         SOAK_RSS_MAX_GROWTH_MB:100000 SOAK_HEAP_MAX_GROWTH_MB:100000; do
  name="${v%%:*}"; max="${v#*:}"
  [[ "${!name}" =~ ^[0-9]+$ ]] && [ "${!name}" -le "$max" ] || die "$name must be an integer in 0..$max, got '${!name}'"
done
[ "$SOAK_SECONDS" -ge 1 ] && [ "$SOAK_RATE" -ge 1 ] && [ "$SOAK_CONNECTIONS" -ge 1 ] \
  || die "SOAK_SECONDS, SOAK_RATE and SOAK_CONNECTIONS must be at least 1"
if ! command -v go >/dev/null 2>&1; then
  log "installing Debian's golang-go for the load generator (bench/soak/loadgen)"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  { $SUDO apt-get update -q && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q golang-go; } >/dev/null \
    || die "go is needed for the load generator (bench/soak/loadgen)"
fi
command -v jcmd >/dev/null 2>&1 || die "jcmd (the JDK) is needed to measure the live heap"

# 500 connections on each side, plus the JVM's own files.
want_fds=$(( SOAK_CONNECTIONS * 2 + 1024 ))
if [ "$(ulimit -n)" != unlimited ] && [ "$(ulimit -n)" -lt "$want_fds" ]; then
  ulimit -n "$want_fds" 2>/dev/null || log "WARNING: ulimit -n is $(ulimit -n); $want_fds wanted"
fi

# ------------------------------------------------------------------------------------ build
log "building into $OUT (log: $LOGS/build.log)"
{
  # The runtime classpath without the :dev profile (no Debian jars, whose manifests would put
  # Debian's Clojure ahead of Maven Central's) and without the project's own directories.
  lein with-profile -dev,+debian classpath 2>&1 | tail -n 1 >"$OUT/lein.cp"
  tr ':' '\n' <"$OUT/lein.cp" | grep -v "^$ROOT/" | grep -v '^$' | paste -sd: - >"$OUT/deps.cp"
  [ -s "$OUT/deps.cp" ] || { echo "lein classpath printed nothing"; exit 1; }
  rm -rf "$OUT/classes" "$OUT/src"
  mkdir -p "$OUT/classes" "$OUT/src/donkey" "$OUT/bin"
  find java-src -name '*.java' >"$OUT/java-sources.txt"
  javac --release 17 -nowarn -cp "$(cat "$OUT/deps.cp")" -d "$OUT/classes" @"$OUT/java-sources.txt"
  cp -r src/. "$OUT/src/"
  cp bench/soak/donkey/soak_server.clj "$OUT/src/donkey/"
  (cd bench/soak/loadgen && GOTOOLCHAIN=local go build -o "$OUT/bin/soak-loadgen" .)
} >"$LOGS/build.log" 2>&1 || { cat "$LOGS/build.log" >&2; die "build failed"; }

# ----------------------------------------------------------------------------------- server
SERVER_PID=""
cleanup() {
  if [ -n "$SERVER_PID" ] && kill -0 "$SERVER_PID" 2>/dev/null; then
    kill -TERM "$SERVER_PID" 2>/dev/null || true
    for _ in $(seq 1 150); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

SLOG="$LOGS/server.log"
# shellcheck disable=SC2086
"$JAVA" -Xms"$SOAK_HEAP" -Xmx"$SOAK_HEAP" -XX:+AlwaysPreTouch $SOAK_JVM_OPTS \
  -Djava.util.logging.config.file="$ROOT/bench/soak/logging.properties" \
  -cp "$OUT/classes:$OUT/src:$(cat "$OUT/deps.cp")" \
  clojure.main -m donkey.soak-server >"$SLOG" 2>&1 &
SERVER_PID=$!

PORT=""
for _ in $(seq 1 600); do
  PORT="$(sed -n 's/^soak-server listening on \([0-9]*\) pid .*/\1/p' "$SLOG" | head -n 1)"
  [ -n "$PORT" ] && break
  kill -0 "$SERVER_PID" 2>/dev/null || { cat "$SLOG" >&2; die "the server exited during start-up"; }
  sleep 0.1
done
[ -n "$PORT" ] || { cat "$SLOG" >&2; die "the server did not start within 60 s"; }
if grep -q "Reflection warning" "$SLOG"; then grep "Reflection warning" "$SLOG" >&2; die "reflection warnings"; fi

rss_kb() { awk '/^VmRSS:/ {print $2}' "/proc/$SERVER_PID/status" 2>/dev/null || echo 0; }

# Live heap after a full GC, in KiB (jcmd GC.run, then the "used" figure of GC.heap_info).
live_heap_kb() {
  jcmd "$SERVER_PID" GC.run >/dev/null 2>&1 || true
  sleep 1
  jcmd "$SERVER_PID" GC.heap_info 2>/dev/null \
    | sed -n 's/.*total [0-9]*K, used \([0-9]*\)K.*/\1/p' | head -n 1 || true
}

log "server pid $SERVER_PID on 127.0.0.1:$PORT, heap $SOAK_HEAP; RSS after start-up $(( $(rss_kb) / 1024 )) MiB"

LOADGEN=("$OUT/bin/soak-loadgen" -addr "127.0.0.1:$PORT" -rate "$SOAK_RATE"
         -connections "$SOAK_CONNECTIONS" -mix "$SOAK_MIX" -timeout "$SOAK_TIMEOUT" -pid "$SERVER_PID")

rc=0
if [ "$SOAK_WARMUP" -gt 0 ]; then
  log "warm-up: $SOAK_WARMUP s at the same load"
  "${LOADGEN[@]}" -seconds "$SOAK_WARMUP" -every 5s -rss-max-growth-mb 0 -label warm-up \
    >"$LOGS/warmup.log" 2>&1 || { cat "$LOGS/warmup.log"; log "the warm-up failed"; rc=1; }
  grep -E '^\[warm-up\] +(sent|latency)|^ +sent|^ +latency' "$LOGS/warmup.log" | sed 's/^/    /' || true
fi

heap_start="$(live_heap_kb)"
log "live heap after a full GC: ${heap_start:-?} KiB; soak: $SOAK_SECONDS s at $SOAK_RATE req/s on $SOAK_CONNECTIONS connections"
set +e
"${LOADGEN[@]}" -seconds "$SOAK_SECONDS" -every 10s -rss-max-growth-mb "$SOAK_RSS_MAX_GROWTH_MB" \
  -json "$LOGS/summary.json" | tee "$LOGS/soak.log"
lg=${PIPESTATUS[0]}
set -e
[ "$lg" -eq 0 ] || rc=1

heap_end="$(live_heap_kb)"
if [ -n "$heap_start" ] && [ -n "$heap_end" ]; then
  growth=$(( (heap_end - heap_start) / 1024 ))
  log "live heap after a full GC: start $(( heap_start / 1024 )) MiB, end $(( heap_end / 1024 )) MiB (growth $growth MiB, limit $SOAK_HEAP_MAX_GROWTH_MB)"
  if [ "$growth" -gt "$SOAK_HEAP_MAX_GROWTH_MB" ]; then
    log "FAIL: the live heap grew $growth MiB"; rc=1
  fi
else
  log "WARNING: could not read the live heap with jcmd"
fi
log "server RSS after the soak: $(( $(rss_kb) / 1024 )) MiB"

kill -0 "$SERVER_PID" 2>/dev/null || { log "FAIL: the server died"; rc=1; }
cleanup
SERVER_PID=""

# What the server logged, grouped by level and message with numbers blanked; the deliberate
# /fail errors are expected (one per /fail request).
log "server log ($SLOG), by message:"
sed -n 's/^[0-9:.]* \([A-Z]*\) [^:]*: \(.*\)$/\1 \2/p' "$SLOG" \
  | sed -E 's/[0-9]+/N/g' | sort | uniq -c | sort -rn | head -n 15 | sed 's/^/    /'
unexpected="$(grep -E ' (SEVERE|WARNING) ' "$SLOG" | grep -vc 'handler failed for GET /fail' || true)"
if [ "${unexpected:-0}" -gt 0 ]; then
  log "NOTE: $unexpected SEVERE/WARNING lines other than the deliberate /fail errors"
fi

if [ "$rc" -eq 0 ]; then log "PASS"; else log "FAIL (see above; logs in $LOGS)"; fi
exit "$rc"
