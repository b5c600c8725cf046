# shellcheck shell=bash
# Shared by the bench scripts (sourced, not run): settings, build, starting/stopping pinned
# servers, and (run.sh, compare.sh) the start-up / warm-up / steady-state measurement of
# one fresh JVM. See run.sh for the environment variables.

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT" || exit 1

RUNS="${RUNS:-5}"
DURATION="${DURATION:-10}"
WARMUP="${WARMUP:-3}"
CONNECTIONS="${CONNECTIONS:-256}"
PIPELINE="${PIPELINE:-16}"
WRK_THREADS="${WRK_THREADS:-1}"
TESTS="${TESTS:-plaintext json}"
JSON_MODE="${JSON_MODE:-auto}"
PORT="${PORT:-18480}"
JAVA="${JAVA:-java}"
JAVA25="${JAVA25:-/usr/lib/jvm/temurin-25-jdk-amd64/bin/java}"
JVM_OPTS="${JVM_OPTS:--Xms1g -Xmx1g}"
SKIP_BUILD="${SKIP_BUILD:-0}"
SERVER_CPU="${SERVER_CPU:-0}"
LOAD_CPU="${LOAD_CPU:-1}"

OUT="$ROOT/target/bench"
# shellcheck disable=SC2034  # used by the scripts that source this file
RESULTS="$OUT/results"

log() { printf '[bench %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

check_int() {  # check_int NAME MAX
  [[ "${!1}" =~ ^[0-9]+$ ]] && [ "${!1}" -ge 1 ] && [ "${!1}" -le "$2" ] \
    || die "$1 must be an integer in 1..$2, got '${!1}'"
}
for _v in RUNS:20 DURATION:120 WARMUP:60 CONNECTIONS:10000 PIPELINE:256 WRK_THREADS:64 PORT:65535; do
  check_int "${_v%%:*}" "${_v#*:}"
done

# ---------------------------------------------------------------------------------- setup
ensure_tools() {
  local need=()
  # the build (a script run on its own, without make's deps step, still builds)
  command -v lein >/dev/null 2>&1 || need+=(leiningen)
  command -v wrk >/dev/null 2>&1 || need+=(wrk)
  command -v taskset >/dev/null 2>&1 || need+=(util-linux)
  command -v curl >/dev/null 2>&1 || need+=(curl)
  command -v python3 >/dev/null 2>&1 || need+=(python3)
  command -v ss >/dev/null 2>&1 || need+=(iproute2)
  # bench/protocols.sh: h2load for HTTP/2, openssl for its test key
  command -v h2load >/dev/null 2>&1 || need+=(nghttp2-client)
  command -v openssl >/dev/null 2>&1 || need+=(openssl)
  dpkg -s libring-jetty-adapter-clojure >/dev/null 2>&1 || need+=(libring-jetty-adapter-clojure)
  if [ ${#need[@]} -gt 0 ]; then
    log "installing: ${need[*]}"
    local sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -q >/dev/null
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q "${need[@]}" >/dev/null
  fi
  [ "$(nproc)" -ge 2 ] || log "WARNING: fewer than 2 cores; server and load generator share a CPU"
}

# build [DIR]: compiles the kernel and bench/java of the tree at DIR (default: this one) into
# DIR/target/bench/classes and writes the classpath the servers start with
# (DIR/target/bench/bench.cp), so lein is not in the measured process.
build() {
  local dir="${1:-$ROOT}"
  local out="$dir/target/bench"
  mkdir -p "$out"
  # from scratch: lein recompiles only the sources newer than their classes, so a class that
  # moved or changed a field's type would leave the others compiled against its old shape
  rm -rf "$out/classes"
  # javac, then the namespaces project.clj's :aot names, as the jar ships them (a tree without
  # :aot compiles none and runs from source, as its jar did; there `lein compile` alone would
  # skip javac too)
  log "building in $dir: lein with-profile +bench do javac, compile; lein with-profile +bench classpath"
  (cd "$dir" && lein with-profile +bench do javac, compile) >"$out/javac.log" 2>&1 \
    || { cat "$out/javac.log" >&2; die "compile failed in $dir"; }
  [ -d "$out/classes/donkey/kernel" ] || { cat "$out/javac.log" >&2; die "no kernel classes in $out/classes"; }
  (cd "$dir" && lein with-profile +bench classpath) 2>"$out/classpath.err" | tail -n 1 >"$out/lein.cp"
  [ -s "$out/lein.cp" ] || { cat "$out/classpath.err" >&2; die "lein classpath failed in $dir"; }
  # Debian's jars name /usr/share/java/clojure.jar (Clojure 1.11) and friends in their manifest
  # Class-Path; the JVM searches those right after the jar naming them, ahead of the Maven
  # Central jars lein resolved. bench/classpath.py swaps in copies without that attribute.
  python3 "$ROOT/bench/classpath.py" "$out/lein.cp" "$dir" "$out/lib" "$out/snapshot" >"$out/bench.cp" 2>"$out/classpath.log"
}

# built [DIR]: DIR's tree (default: this one) has a classpath and the kernel classes it names
built() {
  local out="${1:-$ROOT}/target/bench"
  [ -s "$out/bench.cp" ] && [ -d "$out/classes/donkey/kernel" ]
}

ensure_built() {
  if [ "$SKIP_BUILD" != 1 ] || ! built; then build "$ROOT"; fi
  CP="$(cat "$OUT/bench.cp")"
}

# ------------------------------------------------------------------------------ servers
SERVER_PID=""
SLOT_PID=()  # measure_round's JVMs, by slot; an entry is emptied when its JVM is stopped
cleanup() {
  local p
  # measure_round's other live JVMs
  for p in "${SLOT_PID[@]}"; do [ -z "$p" ] || kill "$p" 2>/dev/null || true; done
  if [ -n "$SERVER_PID" ] && kill -0 "$SERVER_PID" 2>/dev/null; then
    kill "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

java_of() {  # the java binary a variant runs on
  case "$1" in
    donkey-vt|donkey-sync-j25|donkey-nb-aot-j25) echo "$JAVA25" ;;
    *) echo "$JAVA" ;;
  esac
}

main_of() {  # the main class and arguments of a variant
  case "$1" in
    raw-vertx) echo "donkey.bench.RawVertx $PORT" ;;
    # bench/protocols.sh: raw Vert.x with its TLS key manager built once (RawVertx#keyManager);
    # the -D lands among the JVM options, ahead of the main class
    raw-vertx-km) echo "-Ddonkey.bench.keyManager=true donkey.bench.RawVertx $PORT" ;;
    raw-vertx-ws) echo "donkey.bench.RawVertxWebSocket $PORT" ;;
    donkey-ws-nb|donkey-ws-sync) echo "clojure.main -m donkey.bench.ws-app ${1#donkey-ws-} $PORT" ;;
    donkey-sync-j25) echo "clojure.main -m donkey.bench.app donkey-sync $PORT" ;;
    # bench/metrics.sh: the same app with :metrics on a Prometheus registry
    donkey-nb-metrics|donkey-sync-metrics)
      echo "-Ddonkey.bench.metrics=true clojure.main -m donkey.bench.app ${1%-metrics} $PORT" ;;
    donkey-nb|donkey-sync|donkey-vt|jetty) echo "clojure.main -m donkey.bench.app $1 $PORT" ;;
    # bench/footprint.sh: the smallest Clojure server on Vert.x, Clojure's own share
    clj-vertx) echo "clojure.main -m donkey.bench.clj-vertx $PORT" ;;
    # bench/footprint.sh: the app compiled ahead of time (AOT_CP, its build_aot), then with an
    # AppCDS archive of its classes (JDK 17) or the JDK's AOT cache (JDK 25) from a training
    # run; the later -cp wins over start_server's
    donkey-nb-aot) echo "-cp ${AOT_CP:-} clojure.main -m donkey.bench.app donkey-nb $PORT" ;;
    donkey-nb-aot-cds) echo "-XX:SharedArchiveFile=${AOT_DIR:-}/app.jsa -cp ${AOT_CP:-} clojure.main -m donkey.bench.app donkey-nb $PORT" ;;
    donkey-nb-aot-j25) echo "-XX:AOTCache=${AOT_DIR:-}/app.aot -cp ${AOT_CP:-} clojure.main -m donkey.bench.app donkey-nb $PORT" ;;
    *) return 1 ;;
  esac
}

available() {  # available VARIANT: known, and its JVM is installed
  main_of "$1" >/dev/null || die "unknown variant $1"
  local java; java="$(java_of "$1")"
  command -v "$java" >/dev/null 2>&1
}

select_variants() {  # select_variants VARIANT...: ACTIVE=(those whose JVM is installed); dies if none
  ACTIVE=()
  local v
  for v in "$@"; do
    if available "$v"; then ACTIVE+=("$v"); else log "skipping $v: $(java_of "$v") not found"; fi
  done
  [ ${#ACTIVE[@]} -gt 0 ] || die "no variant to run"
}

port_busy() { ss -ltnH "sport = :$PORT" 2>/dev/null | grep -q .; }

now_us() { echo "${EPOCHREALTIME//[.,]/}"; }  # wall clock in microseconds, without a fork

# start_server VARIANT LOGFILE [JVM opts...]: starts the server pinned to SERVER_CPU and waits
# until GET /plaintext answers 200, polling with curl every ~20 ms; returns 1 if it dies or does
# not answer within 60 s. Sets READY_US (the wall clock at that first 200) and STARTUP_US (from
# just before the exec of taskset, which execs java, to READY_US).
start_server() {
  local variant="$1" logfile="$2"; shift 2
  local java; java="$(java_of "$variant")"
  local main; main="$(main_of "$variant")" || die "unknown variant $variant"
  local i t0 code
  for i in $(seq 1 50); do port_busy || break; sleep 0.2; done
  port_busy && die "port $PORT is in use (set PORT=...)"
  READY_US=""; STARTUP_US=""
  t0="$(now_us)"
  # shellcheck disable=SC2086
  taskset -c "$SERVER_CPU" "$java" -XX:ActiveProcessorCount=1 $JVM_OPTS "$@" \
    -Ddonkey.bench.json="${JSON_MODE_RESOLVED:-app}" -cp "$CP" $main >"$logfile" 2>&1 &
  SERVER_PID=$!
  while [ $(( $(now_us) - t0 )) -lt 60000000 ]; do  # a cold Clojure start on a busy machine is slow
    if ! kill -0 "$SERVER_PID" 2>/dev/null; then
      cat "$logfile" >&2; SERVER_PID=""; return 1
    fi
    code="$(curl -s -o /dev/null -w '%{http_code}' --max-time 1 "http://127.0.0.1:$PORT/plaintext" || true)"
    if [ "$code" = 200 ]; then
      READY_US="$(now_us)"; STARTUP_US=$(( READY_US - t0 )); return 0
    fi
    sleep 0.02
  done
  log "$variant did not answer 200 within 60 s"; return 1
}

stop_server() {
  [ -n "$SERVER_PID" ] || return 0
  kill "$SERVER_PID" 2>/dev/null || true
  local i
  for i in $(seq 1 150); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$SERVER_PID" 2>/dev/null; then kill -9 "$SERVER_PID" 2>/dev/null || true; fi
  wait "$SERVER_PID" 2>/dev/null || true
  SERVER_PID=""
}

# check_endpoints VARIANT DIR [TESTS]: each endpoint answers 200 with the exact body, the
# right Content-Type, and Date and Server headers. Logs each problem; returns 1 if any.
check_endpoints() {
  local variant="$1" dir="$2" tests="${3:-$TESTS}" ok=0 test body headers want ctype
  for test in $tests; do
    headers="$dir/check-$variant-$test.headers"
    body="$(curl -s --max-time 5 -D "$headers" "http://127.0.0.1:$PORT/$test")" || body="(no answer)"
    case "$test" in
      plaintext) want='Hello, World!'; ctype='text/plain' ;;
      json) want='{"message":"Hello, World!"}'; ctype='application/json' ;;
    esac
    grep -qiE '^HTTP/1\.1 200' "$headers" 2>/dev/null || { log "$variant /$test: not 200"; ok=1; }
    [ "$body" = "$want" ] || { log "$variant /$test: body '$body'"; ok=1; }
    grep -qi "^content-type: $ctype" "$headers" 2>/dev/null || { log "$variant /$test: Content-Type"; ok=1; }
    grep -qi '^date: ' "$headers" 2>/dev/null || { log "$variant /$test: no Date header"; ok=1; }
    grep -qi '^server: ' "$headers" 2>/dev/null || { log "$variant /$test: no Server header"; ok=1; }
  done
  return $ok
}

# resolve_json_mode DIR: sets JSON_MODE_RESOLVED. `auto` asks a donkey-sync server started in
# kernel mode whether the kernel serializes a map :body (its JSON codec); else `app`.
resolve_json_mode() {
  JSON_MODE_RESOLVED="$JSON_MODE"
  if [ "$JSON_MODE" = auto ]; then
    JSON_MODE_RESOLVED=kernel
    if start_server donkey-sync "$1/probe-json.log" \
        && [ "$(curl -s --max-time 5 "http://127.0.0.1:$PORT/json")" = '{"message":"Hello, World!"}' ]; then
      JSON_MODE_RESOLVED=kernel
    else
      JSON_MODE_RESOLVED=app
    fi
    stop_server
  fi
  case "$JSON_MODE_RESOLVED" in
    kernel) log "JSON: donkey variants return the map; the kernel's JSON codec serializes it" ;;
    app) log "JSON: donkey variants serialize in the app with a Jackson ObjectMapper" ;;
    *) die "JSON_MODE must be auto, kernel or app" ;;
  esac
}

# suite_logs NAME: STAMP, LOGS (target/bench/results/<stamp>-NAME, made) and RUNS_TSV for a
# suite's run.
suite_logs() {
  STAMP="$(date -u +%Y%m%dT%H%M%SZ)"
  LOGS="$RESULTS/$STAMP-$1"
  mkdir -p "$LOGS"
  RUNS_TSV="$LOGS/runs.tsv"
}

# json_mode_as_run: JSON_MODE_RESOLVED as the last bench/run.sh chose it (JSON_MODE auto),
# else worked out anew (resolve_json_mode, logs under $LOGS).
json_mode_as_run() {
  if [ "$JSON_MODE" = auto ] && [ -s "$RESULTS/json-mode" ]; then
    JSON_MODE_RESOLVED="$(cat "$RESULTS/json-mode")"
    log "JSON: $JSON_MODE_RESOLVED (as in the last bench/run.sh)"
  else
    resolve_json_mode "$LOGS"
  fi
}

# check_reflection VARIANT LOGFILE: a reflection warning from the bench app (donkey/bench/)
# fails the run; one from elsewhere (src/, edited by others) is reported only.
check_reflection() {
  local mine others
  mine="$(grep -c 'Reflection warning, donkey/bench/' "$2" || true)"
  others="$(grep 'Reflection warning' "$2" | grep -vc 'donkey/bench/' || true)"
  [ "$others" -eq 0 ] || log "$1: $others reflection warning(s) outside the bench app, in $2"
  if [ "$mine" -ne 0 ]; then log "$1: reflection warnings in the bench app, in $2"; return 1; fi
}

# -------------------------------------------------------------------------------- memory
# (bench/websocket.sh, bench/footprint.sh)

# live_heap_kb PID: the bytes of live objects (KiB); the class histogram runs a full GC first
live_heap_kb() {
  jcmd "$1" GC.class_histogram 2>/dev/null | awk '$1 == "Total" {printf "%d", $3 / 1024}'
}
rss_kb() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }

# open_on_port: the server's TCP connections on PORT that its process still holds (any state
# but the listener's and TIME-WAIT, which the kernel alone keeps)
open_on_port() { ss -tanH "( sport = :$PORT )" 2>/dev/null | awk '$1 != "LISTEN" && $1 != "TIME-WAIT"' | wc -l; }

# wait_closed: until the server has closed every connection on PORT (30 s at most), then 1 s
# more for what its close handlers release
wait_closed() {
  local i
  for i in $(seq 1 300); do [ "$(open_on_port)" -eq 0 ] && { sleep 1; return 0; }; sleep 0.1; done
  log "WARNING: $(open_on_port) connections still open after 30 s"
}

# ----------------------------------------------------------------------------------- wrk
depth_of() { if [ "$1" = plaintext ]; then echo "$PIPELINE"; else echo 1; fi; }

# wrk_run SECONDS TEST OUTFILE [CONNECTIONS] [SHAPE]: one wrk run pinned to LOAD_CPU; prints
# the fields of its RESULT line (bench/pipeline.lua), nothing if wrk failed. SHAPE is a request
# shape of pipeline.lua (minimal, techempower, browser); without it, Host and Accept: */*.
wrk_run() {
  local secs="$1" test="$2" outfile="$3" conns="${4:-$CONNECTIONS}" shape="${5:-}"
  taskset -c "$LOAD_CPU" wrk -t"$WRK_THREADS" -c"$conns" -d"${secs}s" --timeout 5s \
    -s "$ROOT/bench/pipeline.lua" "http://127.0.0.1:$PORT/$test" -- "$(depth_of "$test")" ${shape:+"$shape"} \
    >"$outfile" 2>&1 || true
  grep '^RESULT ' "$outfile" | tail -n 1 | sed 's/^RESULT //' || true
}

field() {  # field NAME "k=v k=v ...": the value of NAME, empty if absent
  local kv
  for kv in $2; do if [ "${kv%%=*}" = "$1" ]; then echo "${kv#*=}"; return; fi; done
  echo ""
}

errors_of() {  # errors_of "RESULT fields": non-2xx plus socket errors; -1 when wrk failed
  local r="$1"
  if [ -z "$r" ]; then echo -1; return; fi
  echo $(( $(field non2xx "$r") + $(field connect "$r") + $(field read "$r") + $(field write "$r") + $(field timeout "$r") ))
}

# ------------------------------------------- start-up, warm-up and steady state of one fresh JVM
# Used by run.sh and compare.sh; the settings are described in run.sh's header. Each script sets
# SHAPES itself.
WARM_WINDOWS="${WARM_WINDOWS:-10}"
STEADY_WINDOW="${STEADY_WINDOW:-5}"
STEADY_TOL="${STEADY_TOL:-3}"
STEADY_MAX="${STEADY_MAX:-60}"
# A shape whose headers the JIT has not seen yet (Connection, Accept, cookies) can send it
# through a deoptimization and a recompile before it runs at speed, which on one core takes
# longer than a fixed settle run: after SETTLE seconds on new connections, such a shape gets
# STEADY_WINDOW-second windows until two agree within STEADY_TOL or SHAPE_MAX seconds passed.
SETTLE="${SETTLE:-5}"
SHAPE_MAX="${SHAPE_MAX:-30}"
# One window's req/s swings by a tenth or more on a shared host with no JIT activity at all; a
# shape's figure is the median of MEASURE_WINDOWS consecutive DURATION-second windows.
MEASURE_WINDOWS="${MEASURE_WINDOWS:-3}"
# 1: a round's JVMs stay alive and their measured windows alternate (measure_round); 0: each
# JVM is measured alone and stopped before the next starts (measure_jvm).
ALTERNATE="${ALTERNATE:-1}"

check_measure_settings() {
  local v s
  for v in WARM_WINDOWS:600 STEADY_WINDOW:600 STEADY_MAX:3600 SETTLE:60 SHAPE_MAX:3600 MEASURE_WINDOWS:20; do
    check_int "${v%%:*}" "${v#*:}"
  done
  if ! [[ "$STEADY_TOL" =~ ^[0-9]+(\.[0-9]+)?$ ]] \
      || ! awk -v t="$STEADY_TOL" 'BEGIN { exit !(t > 0 && t < 100) }'; then
    die "STEADY_TOL must be a percentage above 0 and below 100, got '$STEADY_TOL'"
  fi
  for s in $SHAPES; do
    case "$s" in minimal|techempower|browser) ;; *) die "unknown request shape '$s' in SHAPES" ;; esac
  done
  [[ " $SHAPES " == *" minimal "* ]] || die "SHAPES must include minimal: its figure is the steady state"
  case "$ALTERNATE" in 0|1) ;; *) die "ALTERNATE must be 0 or 1, got '$ALTERNATE'" ;; esac
}

# pin_self: the calling script (and so its curl polls, wrk, awk and python) on LOAD_CPU, off the
# server's CPU; the server itself is started with its own taskset.
pin_self() { taskset -pc "$LOAD_CPU" $$ >/dev/null; }

# runs.tsv: one row per window of load, and one per JVM start (phase startup, its time in
# seconds). seconds: the window's length as wrk measured it; t_end: seconds from the server's
# first 200 to the end of the window; note: on the last steady window, agreed or max; on a
# start that failed, start-failed.
# server_cpu, load_cpu: how busy SERVER_CPU and LOAD_CPU were over the window's wrk run, in
# percent; steal: the share of both CPUs' time the hypervisor took (all from /proc/stat; -1 where
# it cannot be read). A load_cpu near 100 marks a window that measured the load generator too.
RUNS_COLUMNS="round variant test phase shape window seconds rps p99_us errors loadavg t_end note server_cpu load_cpu steal"
tsv_header() { tr ' ' '\t' <<<"$RUNS_COLUMNS" >"$1"; }
tsv_row() { local file="$1"; shift; (IFS=$'\t'; echo "$*") >>"$file"; }  # tsv_row FILE FIELD...
us_to_s() { printf '%d.%06d' $(( $1 / 1000000 )) $(( $1 % 1000000 )); }  # a non-negative count of us
loadavg() { cut -d' ' -f1 /proc/loadavg; }
# host_cpu_ticks: "cpuN busy total steal" per CPU, in jiffies, from /proc/stat (guest time is in user).
host_cpu_ticks() {
  awk '$1 ~ /^cpu[0-9]+$/ { b = $2 + $3 + $4 + $7 + $8; print $1, b, b + $5 + $6 + $9, $9 }' /proc/stat 2>/dev/null || true
}
# host_cpu_window BEFORE AFTER: "server_cpu load_cpu steal" in percent between two host_cpu_ticks.
host_cpu_window() {
  awk -v s="cpu$SERVER_CPU" -v l="cpu$LOAD_CPU" -v before="$1" -v after="$2" '
    function parse(text, into,   n, i, f, lines) {
      n = split(text, lines, "\n")
      for (i = 1; i <= n; i++) if (split(lines[i], f, " ") == 4) { into[f[1], "b"] = f[2]; into[f[1], "t"] = f[3]; into[f[1], "s"] = f[4] }
    }
    function pct(cpu, k,   dt) {
      dt = a[cpu, "t"] - b[cpu, "t"]
      return (dt > 0) ? sprintf("%.0f", 100 * (a[cpu, k] - b[cpu, k]) / dt) : -1
    }
    BEGIN {
      parse(before, b); parse(after, a)
      dt = (a[s, "t"] - b[s, "t"]) + (a[l, "t"] - b[l, "t"])
      st = (dt > 0) ? sprintf("%.1f", 100 * ((a[s, "s"] - b[s, "s"]) + (a[l, "s"] - b[l, "s"])) / dt) : -1
      print pct(s, "b"), pct(l, "b"), st
    }'
}

# load_window PHASE SHAPE INDEX SECONDS: one wrk run against the JVM measure_jvm is measuring;
# sets W_* for emit_window; returns 1 when a request failed or wrk did.
load_window() {
  W_PHASE="$1"; W_SHAPE="$2"; W_INDEX="$3"
  local secs="$4" r dur ticks
  ticks="$(host_cpu_ticks)"
  r="$(wrk_run "$secs" "$M_TEST" "$M_DIR/wrk-$M_LABEL-$M_TEST-r$M_ROUND-$W_PHASE-$W_SHAPE-$W_INDEX.txt" \
       "$CONNECTIONS" "$W_SHAPE")"
  W_CPU="$(host_cpu_window "$ticks" "$(host_cpu_ticks)")"; W_CPU="${W_CPU:--1 -1 -1}"
  W_TEND="$(us_to_s $(( $(now_us) - READY_US )))"
  W_ERR="$(errors_of "$r")"; W_RPS="$(field rps "$r")"; W_P99="$(field p99_us "$r")"
  dur="$(field duration_us "$r")"
  if [ -n "$dur" ]; then W_SECS="$(us_to_s "$dur")"; else W_SECS="$secs"; fi
  W_RPS="${W_RPS:-0}"; W_P99="${W_P99:--1}"
  [ "$W_ERR" -eq 0 ]
}

emit_window() {  # emit_window NOTE: the row of the last load_window
  tsv_row "$M_TSV" "$M_ROUND" "$M_LABEL" "$M_TEST" "$W_PHASE" "$W_SHAPE" "$W_INDEX" "$W_SECS" \
    "$W_RPS" "$W_P99" "$W_ERR" "$(loadavg)" "$W_TEND" "$1" $W_CPU
}

agree() {  # agree A B: A and B (req/s) differ by at most STEADY_TOL percent of the larger
  awk -v a="$1" -v b="$2" -v t="$STEADY_TOL" \
    'BEGIN { m = (a > b) ? a : b; d = a - b; if (d < 0) d = -d; exit !(m > 0 && d <= m * t / 100) }'
}

krps() { awk -v r="$1" 'BEGIN { printf "%.0fk", r / 1000 }'; }

# jvm_warm LABEL VARIANT TEST ROUND DIR TSV: steps 1-4 of measure_jvm on a fresh JVM of VARIANT
# (classpath $CP, port $PORT), rows appended to TSV; leaves it running (SERVER_PID, READY_US)
# and sets M_* for the windows that follow. Returns 1 when it did not start (nothing left
# running), 2 when it answered wrongly or a request failed (still running).
jvm_warm() {
  M_LABEL="$1"; M_TEST="$3"; M_ROUND="$4"; M_DIR="$5"; M_TSV="$6"
  M_LOG="$M_DIR/server-$M_LABEL-$M_TEST-r$M_ROUND.log"
  local variant="$2" bad=0 i total prev note warm=""
  if ! start_server "$variant" "$M_LOG"; then
    log "    $M_LABEL failed to start; log: $M_LOG"; stop_server
    tsv_row "$M_TSV" "$M_ROUND" "$M_LABEL" "$M_TEST" startup - 0 0 0 -1 -1 "$(loadavg)" 0 start-failed -1 -1 -1
    return 1
  fi
  tsv_row "$M_TSV" "$M_ROUND" "$M_LABEL" "$M_TEST" startup - 0 "$(us_to_s "$STARTUP_US")" 0 -1 0 "$(loadavg)" 0 - -1 -1 -1
  check_endpoints "$variant" "$M_DIR" "$M_TEST" || { log "    $M_LABEL answers wrongly; log: $M_LOG"; bad=2; }
  for i in $(seq 1 "$WARM_WINDOWS"); do
    load_window warmup minimal "$i" 1 || bad=2
    emit_window -
    warm+=" $(krps "$W_RPS")"
  done
  log "    $M_TEST: start-up $(us_to_s "$STARTUP_US" | cut -c1-5) s; warm-up req/s by second:$warm"
  i=0; total=0; prev=""
  while :; do
    i=$((i + 1))
    load_window steady minimal "$i" "$STEADY_WINDOW" || bad=2
    total=$((total + STEADY_WINDOW))
    note=-
    if [ -n "$prev" ] && agree "$prev" "$W_RPS"; then note=agreed
    elif [ $((total + STEADY_WINDOW)) -gt "$STEADY_MAX" ]; then note=max
    fi
    emit_window "$note"
    [ "$note" = - ] || break
    prev="$W_RPS"
  done
  log "    $M_TEST: steady-seeking: $i window(s) of ${STEADY_WINDOW}s, ended by $note at ${W_TEND%????}s after the first 200"
  return $bad
}

# shape_settle SHAPE: step 5's settle on the JVM of M_*: a SETTLE-second run, then for a shape
# other than minimal STEADY_WINDOW-second windows until two agree or SHAPE_MAX seconds passed.
# Returns 1 when a request failed.
shape_settle() {
  local shape="$1" bad=0 i=1 total=0 prev=""
  load_window settle "$shape" 1 "$SETTLE" || bad=1
  emit_window -
  if [ "$shape" != minimal ]; then
    while [ $((total + STEADY_WINDOW)) -le "$SHAPE_MAX" ]; do
      i=$((i + 1))
      load_window settle "$shape" "$i" "$STEADY_WINDOW" || bad=1
      total=$((total + STEADY_WINDOW))
      if [ -n "$prev" ] && agree "$prev" "$W_RPS"; then emit_window agreed; break; fi
      emit_window -
      prev="$W_RPS"
    done
  fi
  return $bad
}

# measure_jvm LABEL VARIANT TEST ROUND DIR TSV: starts VARIANT on the classpath $CP in a fresh
# JVM and measures TEST on it alone, appending rows to TSV (logs in DIR, named after LABEL):
#   1. start-up: from the exec of java to the first 200 from /plaintext (start_server);
#   2. check_endpoints for TEST (a couple of curl requests), right after that first 200;
#   3. warm-up: WARM_WINDOWS consecutive 1-second wrk windows, minimal shape;
#   4. steady-seeking: STEADY_WINDOW-second windows, minimal shape, until two consecutive ones
#      agree within STEADY_TOL percent (note agreed) or the next window would take this phase
#      past STEADY_MAX seconds (note max); at least one window;
#   5. for each shape of SHAPES, in SHAPES' order rotated left by ROUND-1 (rotated), so that
#      over the rounds each shape is measured in each place (a shape measured after another
#      has come out lower against raw Vert.x: bench/RESULTS.md): a SETTLE-second run (phase
#      settle, new connections); for a shape other than minimal, STEADY_WINDOW-second settle
#      windows until two agree (note agreed) or the next would pass SHAPE_MAX seconds; then
#      MEASURE_WINDOWS windows of DURATION seconds measured (phase measure; the shape's figure
#      is their median).
# Returns 1 when the server did not start, answered wrongly, a request failed in any window,
# or the bench app printed a reflection warning.
measure_jvm() {
  R_LABELS=("$1"); R_VARIANTS=("$2"); R_CPS=("$CP")
  measure_round "$3" "$4" "$5" "$6"
}

# rotated ROUND ITEM...: ROTATED=(the items, rotated left by ROUND-1), so that over the rounds
# each item takes each place in a round's order
rotated() {
  local r=$(( ($1 - 1) % ($# - 1) )); shift
  ROTATED=("${@:r+1}" "${@:1:r}")
}

# measure_round TEST ROUND DIR TSV: measure_jvm's steps for one fresh JVM per entry of R_LABELS
# (variant in R_VARIANTS, classpath in R_CPS), all alive together on SERVER_CPU, the k-th on
# port PORT+k. Steps 1-4 run for each JVM in turn, alone under load while the ones before it
# sit idle. Then, per shape, each JVM gets its settle, and the measured windows go round the
# JVMs: window w of every JVM, then window w+1, starting one JVM further on each time. A
# JVM's figure is measured within the same minute as the others', so a change in the host's
# speed over the run (other tenants, thermal limits) falls on all of them alike instead of on
# whichever JVM ran at the time. Returns 1 as measure_jvm does, for any of the JVMs.
# (measure_jvm is this with one JVM.)
measure_round() {
  local test="$1" round="$2" dir="$3" tsv="$4" base="$PORT" bad=0 rc k j w shape
  local -a live=() ready=() measured=()
  for k in "${!R_LABELS[@]}"; do
    PORT=$((base + k)); CP="${R_CPS[k]}"
    log "  ${R_LABELS[k]} (port $PORT)"
    rc=0; jvm_warm "${R_LABELS[k]}" "${R_VARIANTS[k]}" "$test" "$round" "$dir" "$tsv" || rc=$?
    [ "$rc" -eq 0 ] || bad=1
    if [ "$rc" -ne 1 ]; then SLOT_PID[k]="$SERVER_PID"; ready[k]="$READY_US"; live+=("$k"); fi
    SERVER_PID=""
  done
  # slot K's JVM becomes the one load_window and stop_server act on
  use_slot() {
    PORT=$((base + $1)); M_LABEL="${R_LABELS[$1]}"; READY_US="${ready[$1]}"; SERVER_PID="${SLOT_PID[$1]}"
    M_LOG="$dir/server-$M_LABEL-$test-r$round.log"
  }
  # shellcheck disable=SC2086 # SHAPES is a list of words
  rotated "$round" $SHAPES
  for shape in "${ROTATED[@]}"; do
    for k in "${live[@]}"; do use_slot "$k"; shape_settle "$shape" || bad=1; measured[k]=""; done
    for w in $(seq 1 "$MEASURE_WINDOWS"); do
      for j in "${!live[@]}"; do
        k="${live[$(( (j + w - 1) % ${#live[@]} ))]}"
        use_slot "$k"
        load_window measure "$shape" "$w" "$DURATION" || bad=1
        emit_window -
        measured[k]+=" $(krps "$W_RPS")"
      done
    done
    for k in "${live[@]}"; do
      log "    ${R_LABELS[k]} $test $shape: req/s by window:${measured[k]}; load average $(loadavg)"
    done
  done
  for k in "${live[@]}"; do
    use_slot "$k"
    check_reflection "$M_LABEL" "$M_LOG" || bad=1
    stop_server
    SLOT_PID[k]=""
  done
  SERVER_PID=""; PORT="$base"
  return $bad
}

# ----------------------------------- interleaved rounds of plain wrk runs (compression, files)
# interleaved_runs TSV JVM_OPT SHAPE CHECK TEST...: RUNS rounds over ACTIVE, a fresh JVM per
# (variant, round) started with JVM_OPT; CHECK VARIANT (a function) checks its answers; per
# TEST a WARMUP-second wrk run, then DURATION seconds measured, unpipelined, in request SHAPE,
# each a row of TSV. Returns 1 when a server did not start, a check failed or a request failed
# (warm-ups included).
interleaved_runs() {
  local tsv="$1" jvm_opt="$2" shape="$3" check="$4"; shift 4
  local round v t r e failed=0
  tsv_row "$tsv" round variant test rps p99_us errors
  for round in $(seq 1 "$RUNS"); do
    for v in "${ACTIVE[@]}"; do
      log "round $round/$RUNS: $v"
      if ! start_server "$v" "$LOGS/server-$v-$round.log" "$jvm_opt"; then
        log "$v did not start"; failed=1; continue
      fi
      "$check" "$v" || failed=1
      for t in "$@"; do
        r="$(wrk_run "$WARMUP" "$t" "$LOGS/wrk-$v-${t//\//_}-$round-warmup.txt" "$CONNECTIONS" "$shape")"
        e="$(errors_of "$r")"; [ "$e" = 0 ] || { log "$v /$t warm-up: $e errors"; failed=1; }
        r="$(wrk_run "$DURATION" "$t" "$LOGS/wrk-$v-${t//\//_}-$round.txt" "$CONNECTIONS" "$shape")"
        e="$(errors_of "$r")"; [ "$e" = 0 ] || { log "$v /$t: $e errors"; failed=1; }
        tsv_row "$tsv" "$round" "$v" "$t" "$(field rps "$r")" "$(field p99_us "$r")" "$e"
        log "  /$t $(krps "$(field rps "$r")") req/s"
      done
      stop_server
    done
  done
  return $failed
}

# ratio_table TSV: per test and variant, median req/s (min..max), the ratio to raw-vertx's
# median, p99 and errors, as a Markdown table.
ratio_table() {
  python3 - "$1" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
tests = list(dict.fromkeys(r["test"] for r in rows))
variants = list(dict.fromkeys(r["variant"] for r in rows))
def vals(v, t, k): return [float(r[k]) for r in rows if r["variant"] == v and r["test"] == t and r[k]]
print("| test | server | req/s, median (min..max) | vs raw Vert.x | p99 ms | errors |")
print("| --- | --- | ---: | ---: | ---: | ---: |")
for t in tests:
    raw = vals("raw-vertx", t, "rps")
    base = statistics.median(raw) if raw else None
    for v in variants:
        rps = vals(v, t, "rps")
        if not rps: continue
        m = statistics.median(rps)
        ratio = "%.2f" % (m / base) if base else "-"
        p99 = statistics.median(vals(v, t, "p99_us") or [0]) / 1000
        errs = int(sum(vals(v, t, "errors")))
        print("| %s | %s | %.0f (%.0f..%.0f) | %s | %.1f | %d |" % (t, v, m, min(rps), max(rps), ratio, p99, errs))
PY
}
