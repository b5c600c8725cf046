#!/usr/bin/env bash
# Start-up and memory bench, a part of `make bench`: what a server costs before and beside its
# throughput. Each server pinned to CPU 0 with the same JVM flags (lib.sh: `taskset -c 0 java
# -XX:ActiveProcessorCount=1 $JVM_OPTS`), this script and its client on CPU 1.
#
# Per (round, server), a fresh JVM, rounds interleaved (A B C A B C ...):
#   start-up   from the exec of java to the first 200 from /plaintext (lib.sh start_server);
#   idle       after 100 requests on 100 connections, closed: RSS (VmRSS), live heap (the
#              total of `jcmd PID GC.class_histogram`, which runs a full GC first) and Metaspace
#              used (`jcmd PID GC.heap_info`);
#   per idle connection  FP_CONNECTIONS keep-alive connections, each after one request
#              (bench/idle_http.py), opened and closed once (so the pools and code a connection
#              needs are in the baseline), then opened again and held: the differences in live
#              heap and RSS over the baseline, per connection.
# clj-vertx (bench/src/donkey/bench/clj_vertx.clj) is the smallest Clojure server on Vert.x,
# loaded from source: Clojure's own share, the floor of any Clojure server on Vert.x.
# Besides the servers as `make bench` runs them (the app loaded from source, donkey from the
# classes its jar ships), the README's start-up recipe: donkey-nb-aot is the same app compiled
# ahead of time with direct linking into a jar (build_aot), donkey-nb-aot-cds adds an AppCDS
# archive from one training run (JDK 17's -XX:ArchiveClassesAtExit), donkey-nb-aot-j25 the JDK's
# AOT cache instead (JDK 25's -XX:AOTCacheOutput; skipped without JAVA25).
# The heap is fixed (-Xms = -Xmx), so RSS counts the heap pages touched so far as well as
# native memory. The tables show medians over rounds, and each ratio is a server's median over
# raw Vert.x's in the same run. Exits non-zero when a server failed to start or a connection
# failed; a missed target is reported in the table, not as a failure.
#
# Environment (defaults in brackets; lib.sh has the shared ones):
#   RUNS [5]  FP_CONNECTIONS [10000]
#   FP_VARIANTS ["raw-vertx clj-vertx donkey-nb donkey-sync jetty donkey-nb-aot donkey-nb-aot-cds donkey-nb-aot-j25"]
#   PORT [18480]  JVM_OPTS ["-Xms1g -Xmx1g"]  SKIP_BUILD [0]: 1 reuses target/bench/bench.cp
# Quick smoke run: RUNS=1 FP_CONNECTIONS=1000 bash bench/footprint.sh
# Output: the tables on stdout; every server log and measurement under
# target/bench/results/<stamp>-footprint/.
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

FP_CONNECTIONS="${FP_CONNECTIONS:-10000}"
FP_VARIANTS="${FP_VARIANTS:-raw-vertx clj-vertx donkey-nb donkey-sync jetty donkey-nb-aot donkey-nb-aot-cds donkey-nb-aot-j25}"
check_int FP_CONNECTIONS 20000

ensure_tools
command -v jcmd >/dev/null 2>&1 || die "jcmd (the JDK) is needed to measure the heap"
ensure_built
pin_self
suite_logs footprint
json_mode_as_run
# shellcheck disable=SC2086
select_variants $FP_VARIANTS
TSV="$LOGS/footprint.tsv"
tsv_row "$TSV" round variant startup_s idle_rss_kb idle_heap_kb metaspace_kb conn_heap_b conn_rss_b errors
IDLE="$ROOT/bench/idle_http.py"

# metaspace_kb PID: Metaspace used, KiB, as GC.heap_info prints it ("Metaspace used 27724K, ...")
metaspace_kb() { jcmd "$1" GC.heap_info 2>/dev/null | awk '$1 == "Metaspace" {gsub(/[K,]/, "", $3); print $3; exit}'; }

failed=0
CLIENT=""

# build_aot: AOT_DIR/app.jar, the bench app compiled with direct linking beside the classes
# `build` made (donkey's own as its jar ships them: already compiled, so not compiled again);
# AOT_CP, that jar and the bench's other jars (AppCDS archives classes from jars only); then a
# training run per archive: start, GET /plaintext and /json, stop.
AOT_DIR="$OUT/aot"
build_aot() {
  local jars snap
  snap="$(tr ':' '\n' <"$OUT/bench.cp" | grep -v '\.jar$' | paste -sd:)"
  jars="$(tr ':' '\n' <"$OUT/bench.cp" | grep '\.jar$' | paste -sd:)"
  rm -rf "$AOT_DIR"; mkdir -p "$AOT_DIR/classes"
  cp -r "$(tr ':' '\n' <"$OUT/bench.cp" | grep 'target_bench_classes$')/." "$AOT_DIR/classes/"
  log "compiling donkey.bench.app ahead of time (direct linking) into $AOT_DIR/app.jar"
  "$JAVA" -cp "$AOT_DIR/classes:$snap:$jars" -Dclojure.compile.path="$AOT_DIR/classes" \
    -Dclojure.compiler.direct-linking=true clojure.main -e "(compile 'donkey.bench.app)" \
    >"$LOGS/aot-compile.log" 2>&1 || { cat "$LOGS/aot-compile.log" >&2; die "AOT compile failed"; }
  # compile also wrote clojure.core.specs.alpha, which its jar ships as source: not ours to ship
  rm -rf "$AOT_DIR/classes/clojure"
  (cd "$AOT_DIR/classes" && jar cf "$AOT_DIR/app.jar" .)
  AOT_CP="$AOT_DIR/app.jar:$jars"
}

train() {  # train VARIANT JVM-OPTION: one run of the AOT app with the option that writes an archive
  local v="$1" opt="$2" java
  java="$(java_of "$v")"
  log "training run for $v ($opt)"
  if JAVA="$java" start_server donkey-nb-aot "$LOGS/train-$v.log" "$opt"; then
    curl -s -o /dev/null "http://127.0.0.1:$PORT/plaintext"; curl -s -o /dev/null "http://127.0.0.1:$PORT/json"
    stop_server
  else
    stop_server; log "$v: the training run failed; log: $LOGS/train-$v.log"; failed=1
  fi
}
trap 'cleanup; [ -z "$CLIENT" ] || kill "$CLIENT" 2>/dev/null || true' EXIT

measure() {  # measure ROUND VARIANT
  local round="$1" v="$2" log_file="$LOGS/server-$2-r$1.log" out="$LOGS/idle-$2-r$1.txt"
  local startup rss heap meta h0 r0 h1 r1 hper=-1 rper=-1 errors=0 i
  if ! start_server "$v" "$log_file"; then
    log "$v failed to start; log: $log_file"; failed=1; stop_server
    tsv_row "$TSV" "$round" "$v" -1 -1 -1 -1 -1 -1 1; return
  fi
  startup="$(us_to_s "$STARTUP_US")"
  python3 "$IDLE" "$PORT" 100 --close >"$LOGS/first-$v-r$round.txt" 2>&1 || { errors=1; failed=1; }
  wait_closed
  heap="$(live_heap_kb "$SERVER_PID")"; meta="$(metaspace_kb "$SERVER_PID")"; rss="$(rss_kb "$SERVER_PID")"
  python3 "$IDLE" "$PORT" "$FP_CONNECTIONS" --close >"$LOGS/warm-$v-r$round.txt" 2>&1 || { errors=1; failed=1; }
  wait_closed
  h0="$(live_heap_kb "$SERVER_PID")"; r0="$(rss_kb "$SERVER_PID")"
  python3 "$IDLE" "$PORT" "$FP_CONNECTIONS" >"$out" 2>&1 &
  CLIENT=$!
  for i in $(seq 1 1200); do
    grep -q '^OPEN ' "$out" 2>/dev/null && break
    kill -0 "$CLIENT" 2>/dev/null || break
    sleep 0.1
  done
  if grep -q "^OPEN $FP_CONNECTIONS\$" "$out"; then
    sleep 2  # every connection's request has been answered and its buffers released
    h1="$(live_heap_kb "$SERVER_PID")"; r1="$(rss_kb "$SERVER_PID")"
    hper=$(( (h1 - h0) * 1024 / FP_CONNECTIONS )); rper=$(( (r1 - r0) * 1024 / FP_CONNECTIONS ))
  else
    log "$v: the idle connections did not all open: $(tail -n 2 "$out")"; errors=1; failed=1
  fi
  kill -TERM "$CLIENT" 2>/dev/null || true
  wait "$CLIENT" || { errors=1; failed=1; }
  CLIENT=""
  log "  $v: start-up $startup s; idle RSS $rss KiB, live heap $heap KiB, Metaspace $meta KiB;" \
      "per connection $hper B heap, $rper B RSS; load average $(loadavg)"
  check_reflection "$v" "$log_file" || failed=1
  stop_server
  tsv_row "$TSV" "$round" "$v" "$startup" "${rss:--1}" "${heap:--1}" "${meta:--1}" "$hper" "$rper" "$errors"
}

if [[ " ${ACTIVE[*]} " == *" donkey-nb-aot"* ]]; then
  build_aot
  [[ " ${ACTIVE[*]} " != *" donkey-nb-aot-cds "* ]] || train donkey-nb-aot-cds "-XX:ArchiveClassesAtExit=$AOT_DIR/app.jsa"
  [[ " ${ACTIVE[*]} " != *" donkey-nb-aot-j25 "* ]] || train donkey-nb-aot-j25 "-XX:AOTCacheOutput=$AOT_DIR/app.aot"
fi
log "footprint: ${ACTIVE[*]}; $RUNS rounds; $FP_CONNECTIONS idle connections; logs in $LOGS"
for round in $(seq 1 "$RUNS"); do
  for v in "${ACTIVE[@]}"; do
    log "round $round/$RUNS: $v"
    measure "$round" "$v"
  done
done

python3 - "$TSV" "$FP_CONNECTIONS" <<'PY'
import csv, statistics, sys
rows = [r for r in csv.DictReader(open(sys.argv[1]), delimiter="\t") if float(r["startup_s"]) >= 0]
variants = list(dict.fromkeys(r["variant"] for r in rows))
def med(v, k):
    xs = [float(r[k]) for r in rows if r["variant"] == v and float(r[k]) >= 0]
    return (statistics.median(xs), min(xs), max(xs)) if xs else None
def ratio(v, k):
    a, b = med(v, k), med("raw-vertx", k)
    return "%.2f" % (a[0] / b[0]) if a and b and b[0] > 0 else "-"
print("\nStart-up and idle memory (medians over rounds; ratios to raw-vertx):\n")
print("| server | start-up s (min..max) | vs raw | idle RSS MiB | live heap MiB | Metaspace MiB | heap + Metaspace vs raw |")
print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
# the classes an archive maps (AppCDS, the JDK's AOT cache) are not counted in Metaspace used
archived = lambda v: v.endswith("-cds") or v.endswith("-j25")
def heap_meta(v):
    xs = [float(r["idle_heap_kb"]) + float(r["metaspace_kb"]) for r in rows
          if r["variant"] == v and float(r["idle_heap_kb"]) >= 0 and float(r["metaspace_kb"]) >= 0]
    return statistics.median(xs) if xs else None
for v in variants:
    s, rss, heap, meta = med(v, "startup_s"), med(v, "idle_rss_kb"), med(v, "idle_heap_kb"), med(v, "metaspace_kb")
    hm, hm_raw = heap_meta(v), heap_meta("raw-vertx")
    meta_cell = "archived" if archived(v) else ("%.1f" % (meta[0] / 1024) if meta else "-")
    hm_ratio = "-" if archived(v) or not hm or not hm_raw else "%.2f" % (hm / hm_raw)
    print("| %s | %.2f (%.2f..%.2f) | %s | %.1f | %.1f | %s | %s |" % (
        v, s[0], s[1], s[2], ratio(v, "startup_s"), rss[0] / 1024, heap[0] / 1024, meta_cell, hm_ratio))
print("\nPer idle keep-alive connection, %s connections (medians over rounds; ratios to raw-vertx):\n" % sys.argv[2])
print("| server | live heap B | vs raw | RSS B | vs raw |")
print("| --- | ---: | ---: | ---: | ---: |")
for v in variants:
    h, r = med(v, "conn_heap_b"), med(v, "conn_rss_b")
    if not h or not r: continue
    print("| %s | %.0f | %s | %.0f | %s |" % (v, h[0], ratio(v, "conn_heap_b"), r[0], ratio(v, "conn_rss_b")))
PY
errors="$(awk -F'\t' 'NR > 1 && $9 != 0' "$TSV" | wc -l)"
log "errors: $errors rounds with a failure; logs in $LOGS"
exit $failed
