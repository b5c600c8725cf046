#!/usr/bin/env bash
# TechEmpower's database tests (db, queries, fortunes, updates, cached queries) against a local
# PostgreSQL, each server against raw Vert.x with Vert.x's reactive PostgreSQL client in the
# same run:
#
#   raw-vertx-pg  TechEmpower's vertx entry's shape: a verticle per loop, one pipelined
#                 connection each (bench/tfb/raw, on Vert.x 5.0.12: see its pom)
#   donkey-sync   donkey.tfb.app sync: route handlers on the workers, JDBC and HikariCP
#   donkey-vt     the same on virtual threads (Java 25)
#   donkey-nb     non-blocking handlers, the JDBC calls handed to the workers (offload!)
#   jetty         the sync handlers on ring-jetty-adapter 1.8.2
#
# Placement on this 2-core machine: the server alone on SERVER_CPU [0]; PostgreSQL and wrk share
# LOAD_CPU [1]. The server's core is the one measured; the database's work per request is the
# same for every server, so it weighs on each the same, and a server that asks less of it (one
# round trip for many queries) gains, as it would in TechEmpower's runs.
#
# Per round and server: a fresh JVM, WARMUP seconds of each test's load, then DURATION seconds
# measured per test, in TFB_TESTS order; rounds interleave the servers. Prints req/s medians and
# ratios to raw-vertx-pg; exit 1 on any non-2xx or socket error.
#
# Environment: RUNS [3], WARMUP [5], DURATION [10], CONNECTIONS [256], SERVERS, TFB_TESTS,
# TFB_DB_PORT [55433] and TFB_PG_DIR [/tmp/donkey-tfb-bench-pg]: a cluster of this script's
# own, started pinned to LOAD_CPU and stopped at the end; SKIP_BUILD=1 reuses the last build.
set -euo pipefail
RUNS="${RUNS:-3}"
WARMUP="${WARMUP:-5}"
# shellcheck source=../lib.sh
source "$(dirname "$0")/../lib.sh"

SERVERS="${SERVERS:-raw-vertx-pg donkey-nb donkey-sync donkey-vt jetty}"
TFB_TESTS="${TFB_TESTS:-db queries-1 queries-5 queries-10 queries-15 queries-20 fortunes updates-1 updates-5 updates-10 updates-15 updates-20 cached-1 cached-10 cached-20 cached-50 cached-100}"
export TFB_DB_PORT="${TFB_DB_PORT:-55433}"
export TFB_PG_DIR="${TFB_PG_DIR:-/tmp/donkey-tfb-bench-pg}"
check_int RUNS 100
check_int WARMUP 600
check_int DURATION 600

path_of() {  # the request path of a test name
  case "$1" in
    db) echo "db" ;;
    fortunes) echo "fortunes" ;;
    queries-*) echo "queries?queries=${1#queries-}" ;;
    updates-*) echo "updates?queries=${1#updates-}" ;;
    cached-*) echo "cached-queries?count=${1#cached-}" ;;
    *) die "unknown test $1" ;;
  esac
}

java_of() {
  case "$1" in
    donkey-vt) echo "$JAVA25" ;;
    *) echo "$JAVA" ;;
  esac
}

main_of() {
  case "$1" in
    raw-vertx-pg) echo "donkey.bench.tfb.RawVertxTfb $PORT" ;;
    donkey-nb|donkey-sync|donkey-vt) echo "clojure.main -m donkey.tfb.app ${1#donkey-} $PORT" ;;
    jetty) echo "clojure.main -m donkey.tfb.app jetty $PORT" ;;
    *) return 1 ;;
  esac
}

cp_of() {  # the classpath of a server: raw Vert.x's own project, or the app's
  if [ "$1" = raw-vertx-pg ]; then echo "$RAW_CP"; else echo "$TFB_CP"; fi
}

build_tfb() {
  mkdir -p "$OUT/tfb"
  log "building: lein with-profile +bench,+tfb javac; classpath; mvn package (bench/tfb/raw)"
  lein with-profile +bench,+tfb javac >"$OUT/tfb/javac.log" 2>&1 || { cat "$OUT/tfb/javac.log" >&2; die "lein javac failed"; }
  lein with-profile +bench,+tfb classpath 2>"$OUT/tfb/classpath.log" | tail -n 1 >"$OUT/tfb/lein.cp"
  [ -s "$OUT/tfb/lein.cp" ] || { cat "$OUT/tfb/classpath.log" >&2; die "lein classpath failed"; }
  # Debian's jars without their manifests' Class-Path (see build in ../lib.sh)
  python3 "$ROOT/bench/classpath.py" "$OUT/tfb/lein.cp" "$ROOT" "$OUT/tfb/lib" "$OUT/tfb/snapshot" \
    >"$OUT/tfb/tfb.cp" 2>"$OUT/tfb/classpath.py.log"
  mvn -q -f bench/tfb/raw/pom.xml package dependency:build-classpath \
    -Dmdep.outputFile="$ROOT/bench/tfb/raw/target/deps.cp" >"$OUT/tfb/mvn.log" 2>&1 \
    || { cat "$OUT/tfb/mvn.log" >&2; die "mvn package failed in bench/tfb/raw"; }
  echo "$ROOT/bench/tfb/raw/target/classes:$(cat bench/tfb/raw/target/deps.cp)" >"$OUT/tfb/raw.cp"
}

cleanup() {
  stop_server
  bash "$ROOT/bench/tfb/pg.sh" stop >/dev/null 2>&1 || true
}

ensure_tools
[ "$SKIP_BUILD" = 1 ] || build_tfb
TFB_CP="$(cat "$OUT/tfb/tfb.cp")"
RAW_CP="$(cat "$OUT/tfb/raw.cp")"
suite_logs tfb
select_variants $SERVERS
taskset -c "$LOAD_CPU" bash bench/tfb/pg.sh start
pin_self

TSV="$LOGS/tfb.tsv"
printf 'round\tserver\ttest\trps\terrors\tp99_us\n' >"$TSV"
failed=0
for round in $(seq 1 "$RUNS"); do
  order=("${ACTIVE[@]}")
  # alternate the order of the donkey servers each round; raw Vert.x first
  if [ $(( round % 2 )) -eq 0 ]; then
    order=("${ACTIVE[0]}"); for (( i=${#ACTIVE[@]}-1; i>=1; i-- )); do order+=("${ACTIVE[$i]}"); done
  fi
  for server in "${order[@]}"; do
    log "round $round/$RUNS: $server"
    CP="$(cp_of "$server")"
    start_server "$server" "$LOGS/$server-$round.log" -Ddonkey.tfb.event-loops=1 -Dtfb.eventLoops=1 \
      || die "$server did not start"
    for test in $TFB_TESTS; do
      wrk_run "$WARMUP" "$(path_of "$test")" "$LOGS/$server-$round-$test-warm.wrk" >/dev/null
    done
    for test in $TFB_TESTS; do
      r="$(wrk_run "$DURATION" "$(path_of "$test")" "$LOGS/$server-$round-$test.wrk")"
      e="$(errors_of "$r")"
      [ "$e" = 0 ] || { log "$server $test: $e errors"; failed=1; }
      tsv_row "$TSV" "$round" "$server" "$test" "$(field rps "$r")" "$e" "$(field p99_us "$r")"
      log "    $test: $(field rps "$r") req/s, errors $e"
    done
    stop_server
  done
done

python3 - "$TSV" "$SERVERS" <<'EOF'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
servers = [s for s in sys.argv[2].split() if any(r["server"] == s for r in rows)]
tests = list(dict.fromkeys(r["test"] for r in rows))
def med(s, t):
    v = [float(r["rps"]) for r in rows if r["server"] == s and r["test"] == t and r["rps"]]
    return statistics.median(v) if v else 0.0
base = servers[0]
print("| test | " + " | ".join(servers) + " | " + " | ".join(f"{s} / {base}" for s in servers[1:]) + " |")
print("| --- |" + " ---: |" * (2 * len(servers) - 1))
for t in tests:
    b = med(base, t)
    cells = [f"{med(s, t):,.0f}" for s in servers]
    ratios = [f"{med(s, t) / b:.2f}" if b else "-" for s in servers[1:]]
    print(f"| {t} | " + " | ".join(cells) + " | " + " | ".join(ratios) + " |")
EOF
log "req/s, medians of $RUNS round(s); every window: $TSV"
exit "$failed"
