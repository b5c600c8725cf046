#!/usr/bin/env bash
# TechEmpower-style throughput bench, the first half of `make bench` (DESIGN.md section 7).
#
# Servers (bench/src/donkey/bench/app.clj, bench/java/donkey/bench/RawVertx.java):
#   raw-vertx    Vert.x 5 written directly, one event loop: the ceiling every ratio is taken to
#   donkey-nb    donkey route table, 3-arity :handler-mode :non-blocking handlers
#   donkey-sync  donkey, a plain sync Ring handler through run-server (the drop-in case)
#   donkey-vt    the same with :virtual-threads? true, on Temurin 25 (skipped when absent)
#   jetty        the same sync handler on Debian's ring-jetty-adapter 1.8.2 (Jetty 9.4)
#   donkey-sync-j25 (not in the default set) donkey-sync on Temurin 25, to tell the JVM's
#                share from the virtual threads' share
# Each server is pinned to CPU 0 (`taskset -c 0 java -XX:ActiveProcessorCount=1`, one event
# loop, the same JVM flags for every server); wrk is pinned to CPU 1, and so is this script (its
# curl polls and helpers). /plaintext is pipelined PIPELINE deep, /json is not pipelined.
#
# Each (variant, test) runs RUNS times, interleaved across variants (A B C A B C ...), a fresh
# JVM each time, so that the json warm-up is not pre-warmed by plaintext (bench/lib.sh,
# measure_jvm):
#   1. start-up: from the exec of java to the first 200 from /plaintext, polled with curl every
#      ~20 ms;
#   2. the endpoint check of the test (status, body, Content-Type, Date, Server: two curl
#      requests), right after that first 200, before any load;
#   3. warm-up: WARM_WINDOWS consecutive 1-second wrk windows in the minimal shape, each
#      window's req/s recorded;
#   4. steady-seeking: STEADY_WINDOW-second windows in the minimal shape until two consecutive
#      ones agree within STEADY_TOL percent (of the larger), or until the next window would take
#      this phase past STEADY_MAX seconds of load (not counting the warm-up); which of the two
#      ended it is reported;
#   5. for each request shape of SHAPES, in the same JVM, in SHAPES' order in round 1 and
#      rotated one place further each round after: a SETTLE-second run in that shape (its
#      connections are new); for a shape other than minimal, which can cost a deoptimization and
#      a recompile, STEADY_WINDOW-second windows until two agree or SHAPE_MAX seconds; then
#      MEASURE_WINDOWS DURATION-second windows measured, the shape's figure being their median.
#      The steady state is the figure of the minimal shape.
# With ALTERNATE=1 (the default) a round's JVMs of a test stay alive together on CPU 0: each
# runs steps 1-4 alone under load while the ones before it sit idle, then per shape each gets
# its settle and the measured windows go round the JVMs (window 1 of each, window 2 of each,
# starting one further on each time; bench/lib.sh, measure_round), and the variants' order
# rotates each round. The host's speed drifts over minutes by more than the gaps measured
# here; alternating puts every variant's windows in the same minute. ALTERNATE=0 measures
# each JVM alone and stops it before the next starts.
# Request shapes (bench/pipeline.lua): minimal (request line and Host: wrk's default request),
# techempower (Host, TechEmpower's Accept for the test, Connection: keep-alive), browser (the
# dozen-odd headers of a desktop Chrome page load, with a cookie of a few hundred bytes).
# The tables (medians over rounds; every ratio is to raw-vertx in the same run):
#   (a) start-up per variant: median over every start (RUNS x tests), min..max;
#   (b) warm-up per variant and test: mean req/s of the first 5 and the first 10 one-second
#       windows, the time from the first 200 to the end of the first window (warm-up, then
#       steady-seeking) at >= 90% of that JVM's steady state ("> N s" when none got there);
#   (c) steady state per variant, test and shape: req/s, min..max, p99, errors, and in how
#       many rounds the steady-seeking windows agreed (the others stopped at STEADY_MAX).
# Five rounds by default: on the 2-core VM this was built on, the same server moves by 20% and
# more from one JVM start to the next (JIT outcomes, other tenants), and a median of three
# moved with it. Exits non-zero when any request failed (non-2xx or socket error, in any
# window, warm-ups included), a server answered wrongly, or the app printed a reflection
# warning.
#
# Environment (defaults in brackets):
#   RUNS [5]  MEASURE_WINDOWS [3] x DURATION [5] s measured per shape  WARM_WINDOWS [10] one-second windows
#   ALTERNATE [1]: 1 alternates the measured windows between a round's live JVMs, 0 does not
#   STEADY_WINDOW [5] s  STEADY_TOL [3] percent  STEADY_MAX [60] s  SETTLE [5] s per shape  SHAPE_MAX [30] s
#   SHAPES ["minimal techempower browser"] (must include minimal)
#   CONNECTIONS [256]  PIPELINE [16]  WRK_THREADS [1]
#   VARIANTS ["raw-vertx donkey-nb donkey-sync donkey-vt jetty"]  TESTS ["plaintext json"]
#   JSON_MODE [auto]: kernel (donkey variants return the map, the kernel's JSON codec writes it),
#            app (the app serializes with Jackson), auto (kernel when a probe shows it works)
#   PORT [18480]  JAVA [java]  JAVA25 [/usr/lib/jvm/temurin-25-jdk-amd64/bin/java]
#   JVM_OPTS ["-Xms1g -Xmx1g"]  SKIP_BUILD [0]: 1 reuses target/bench/bench.cp
#   SERVER_CPU [0]  LOAD_CPU [1]
# With the defaults one JVM takes from about 1 to 3 minutes, and the whole run 50 of them.
# Quick smoke run:
#   RUNS=1 WARM_WINDOWS=3 STEADY_WINDOW=2 STEADY_MAX=4 DURATION=2 bash bench/run.sh
# Output: the tables on stdout and in target/bench/results/<stamp>/table.md (copied to
# target/bench/results/latest-throughput.md); every window in runs.tsv there (columns in
# bench/lib.sh, RUNS_COLUMNS), every wrk output and server log beside it; raw-vertx's steady
# json minimal median in target/bench/results/peak-json-rps, for bench/latency.sh.
set -euo pipefail
# a shape is measured in MEASURE_WINDOWS windows of DURATION seconds (bench/lib.sh)
DURATION="${DURATION:-5}"
# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

VARIANTS="${VARIANTS:-raw-vertx donkey-nb donkey-sync donkey-vt jetty}"
SHAPES="${SHAPES:-minimal techempower browser}"
check_measure_settings
STAMP="$(date -u +%Y%m%dT%H%M%SZ)"
LOGS="$RESULTS/$STAMP"
mkdir -p "$LOGS"
RUNS_TSV="$LOGS/runs.tsv"

ensure_tools
ensure_built
resolve_json_mode "$LOGS"
echo "$JSON_MODE_RESOLVED" >"$RESULTS/json-mode"

# shellcheck disable=SC2086  # a list of names
select_variants $VARIANTS
pin_self  # after the build and the probe, which use both CPUs

failed=0
tsv_header "$RUNS_TSV"
n_tests="$(wc -w <<<"$TESTS")"
total=$(( RUNS * ${#ACTIVE[@]} * n_tests ))
n=0
log "${RUNS} rounds x (${ACTIVE[*]}) x ($TESTS), a fresh JVM each: ${WARM_WINDOWS} x 1s warm-up," \
    "steady-seeking ${STEADY_WINDOW}s windows (agree within ${STEADY_TOL}%, at most ${STEADY_MAX}s)," \
    "then per shape ($SHAPES, the order rotating each round) ${SETTLE}s settle (other shapes: then ${STEADY_WINDOW}s windows until two agree, at most ${SHAPE_MAX}s) + ${MEASURE_WINDOWS} x ${DURATION}s measured (median);" \
    "$CONNECTIONS connections, plaintext pipelined $PIPELINE deep"
for round in $(seq 1 "$RUNS"); do
  for test in $TESTS; do
    if [ "$ALTERNATE" = 1 ]; then
      # each variant takes each place (first started, longest idle) in turn
      rotated "$round" "${ACTIVE[@]}"
      R_LABELS=("${ROTATED[@]}"); R_VARIANTS=("${ROTATED[@]}"); R_CPS=()
      for v in "${ACTIVE[@]}"; do R_CPS+=("$CP"); done
      n=$((n + ${#ACTIVE[@]}))
      log "[$n/$total] round $round: ${R_LABELS[*]} $test, alive together"
      measure_round "$test" "$round" "$LOGS" "$RUNS_TSV" || failed=1
      continue
    fi
    for v in "${ACTIVE[@]}"; do
      n=$((n + 1))
      log "[$n/$total] round $round: $v $test"
      measure_jvm "$v" "$v" "$test" "$round" "$LOGS" "$RUNS_TSV" || failed=1
    done
  done
done

python3 "$ROOT/bench/warmup_tables.py" run "$RUNS_TSV" "$LOGS/table.md" "$RESULTS/peak-json-rps" raw-vertx
{
  echo
  echo "medians of $RUNS rounds, interleaved, a fresh JVM per (variant, test, round) on CPU $SERVER_CPU;" \
       "JVM flags: -XX:ActiveProcessorCount=1 $JVM_OPTS"
  if [ "$ALTERNATE" = 1 ]; then
    echo "a round's JVMs of a test alive together; measured windows alternate between them"
  fi
  echo "start-up: exec of java to the first 200 from /plaintext (curl every ~20 ms); then the endpoint check;" \
       "warm-up: $WARM_WINDOWS x 1s windows from there, minimal shape;"
  echo "steady-seeking: ${STEADY_WINDOW}s windows until two agree within ${STEADY_TOL}% or ${STEADY_MAX}s;" \
       "then per shape (the order rotating each round) ${SETTLE}s settle (other shapes: then settle windows until two agree, at most ${SHAPE_MAX}s) + ${MEASURE_WINDOWS} x ${DURATION}s measured (median); steady state = the minimal shape's figure"
  echo "$CONNECTIONS connections; wrk -t$WRK_THREADS on CPU $LOAD_CPU; plaintext pipelined $PIPELINE deep," \
       "json not pipelined; errors = non-2xx + socket errors, in every window, warm-ups included"
  echo "donkey JSON: $JSON_MODE_RESOLVED; every window: $RUNS_TSV"
} | tee -a "$LOGS/table.md"
cp "$LOGS/table.md" "$RESULTS/latest-throughput.md"

if [ "$failed" -ne 0 ]; then
  log "FAILED: some requests failed or a server misbehaved (logs in $LOGS)"
  exit 1
fi
