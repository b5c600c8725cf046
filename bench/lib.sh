# Shared by bench/run.sh, bench/latency.sh and bench/websocket.sh (sourced, not run): settings, build, and
# starting/stopping one pinned server at a time. See run.sh for the environment variables.

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

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

# Compiles the kernel and bench/java into target/bench/classes and writes the classpath the
# servers start with (target/bench/bench.cp), so lein is not in the measured process.
build() {
  mkdir -p "$OUT"
  log "building: lein with-profile +bench javac; lein with-profile +bench classpath"
  lein with-profile +bench javac >"$OUT/javac.log" 2>&1 || { cat "$OUT/javac.log" >&2; die "javac failed"; }
  lein with-profile +bench classpath 2>"$OUT/classpath.err" | tail -n 1 >"$OUT/lein.cp"
  [ -s "$OUT/lein.cp" ] || { cat "$OUT/classpath.err" >&2; die "lein classpath failed"; }
  # Debian's jars name /usr/share/java/clojure.jar (Clojure 1.11) and friends in their manifest
  # Class-Path; the JVM searches those right after the jar naming them, ahead of the Maven
  # Central jars lein resolved. bench/classpath.py swaps in copies without that attribute.
  python3 "$ROOT/bench/classpath.py" "$OUT/lein.cp" "$ROOT" "$OUT/lib" "$OUT/snapshot" >"$OUT/bench.cp" 2>"$OUT/classpath.log"
}

ensure_built() {
  if [ "$SKIP_BUILD" != 1 ] || [ ! -s "$OUT/bench.cp" ]; then build; fi
  CP="$(cat "$OUT/bench.cp")"
}

# ------------------------------------------------------------------------------ servers
SERVER_PID=""
cleanup() {
  if [ -n "$SERVER_PID" ] && kill -0 "$SERVER_PID" 2>/dev/null; then
    kill "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

java_of() {  # the java binary a variant runs on
  case "$1" in
    donkey-vt|donkey-sync-j25) echo "$JAVA25" ;;
    *) echo "$JAVA" ;;
  esac
}

main_of() {  # the main class and arguments of a variant
  case "$1" in
    raw-vertx) echo "donkey.bench.RawVertx $PORT" ;;
    raw-vertx-ws) echo "donkey.bench.RawVertxWebSocket $PORT" ;;
    donkey-ws-nb|donkey-ws-sync) echo "clojure.main -m donkey.bench.ws-app ${1#donkey-ws-} $PORT" ;;
    donkey-sync-j25) echo "clojure.main -m donkey.bench.app donkey-sync $PORT" ;;
    donkey-nb|donkey-sync|donkey-vt|jetty) echo "clojure.main -m donkey.bench.app $1 $PORT" ;;
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

# start_server VARIANT LOGFILE [JVM opts...]: starts the server pinned to SERVER_CPU and waits
# until it answers; returns 1 if it dies or does not answer within 60 s.
start_server() {
  local variant="$1" logfile="$2"; shift 2
  local java; java="$(java_of "$variant")"
  local main; main="$(main_of "$variant")" || die "unknown variant $variant"
  local i
  for i in $(seq 1 50); do port_busy || break; sleep 0.2; done
  port_busy && die "port $PORT is in use (set PORT=...)"
  # shellcheck disable=SC2086
  taskset -c "$SERVER_CPU" "$java" -XX:ActiveProcessorCount=1 $JVM_OPTS "$@" \
    -Ddonkey.bench.json="${JSON_MODE_RESOLVED:-app}" -cp "$CP" $main >"$logfile" 2>&1 &
  SERVER_PID=$!
  for i in $(seq 1 600); do  # a cold Clojure start on a busy machine is slow
    if ! kill -0 "$SERVER_PID" 2>/dev/null; then
      cat "$logfile" >&2; SERVER_PID=""; return 1
    fi
    curl -s -o /dev/null --max-time 1 "http://127.0.0.1:$PORT/plaintext" && return 0
    sleep 0.1
  done
  log "$variant did not answer within 60 s"; return 1
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

# check_reflection VARIANT LOGFILE: a reflection warning from the bench app (donkey/bench/)
# fails the run; one from elsewhere (src/, edited by others) is reported only.
check_reflection() {
  local mine others
  mine="$(grep -c 'Reflection warning, donkey/bench/' "$2" || true)"
  others="$(grep 'Reflection warning' "$2" | grep -vc 'donkey/bench/' || true)"
  [ "$others" -eq 0 ] || log "$1: $others reflection warning(s) outside the bench app, in $2"
  if [ "$mine" -ne 0 ]; then log "$1: reflection warnings in the bench app, in $2"; return 1; fi
}

# ----------------------------------------------------------------------------------- wrk
depth_of() { if [ "$1" = plaintext ]; then echo "$PIPELINE"; else echo 1; fi; }

# wrk_run SECONDS TEST OUTFILE [CONNECTIONS]: one wrk run pinned to LOAD_CPU; prints the
# fields of its RESULT line (bench/pipeline.lua), nothing if wrk failed.
wrk_run() {
  local secs="$1" test="$2" outfile="$3" conns="${4:-$CONNECTIONS}"
  taskset -c "$LOAD_CPU" wrk -t"$WRK_THREADS" -c"$conns" -d"${secs}s" --timeout 5s \
    -s "$ROOT/bench/pipeline.lua" "http://127.0.0.1:$PORT/$test" -- "$(depth_of "$test")" \
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
