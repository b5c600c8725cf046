#!/usr/bin/env bash
# Compressed JSON throughput, a part of `make bench`: donkey against raw Vert.x
# (bench/java/donkey/bench/RawVertx.java) with Vert.x's compression on in both, in the same run.
# Tests, each GET with `Accept-Encoding: gzip` (pipeline.lua's gzip shape), not pipelined:
#   json        the TechEmpower JSON body ({"message":"Hello, World!"}, built per request)
#   json-100k   a 100 KB JSON document (RawVertx.JSON_100K, the same bytes for every server)
# Every server compresses every body with gzip at level 6 (raw Vert.x's default level and no
# size threshold; donkey :compression? true, :compression-min-size 0), so both small and large
# bodies measure the compressing path. Each server is checked to answer gzip that inflates to
# what it sends uncompressed.
#
# As bench/run.sh: each server pinned to CPU 0 with one event loop, wrk to CPU 1; RUNS rounds
# interleaved across variants, a fresh JVM per (variant, round), a WARMUP-second run of each
# test before its measured DURATION seconds. The table shows medians, ranges, and each
# variant's ratio to raw Vert.x's median. Exits non-zero when a request failed (warm-ups
# included), a server did not start, or an answer was wrong.
#
# Environment (defaults in brackets), beside run.sh's RUNS DURATION WARMUP CONNECTIONS PORT
# JAVA JVM_OPTS SKIP_BUILD: COMP_VARIANTS ["raw-vertx donkey-nb donkey-sync"]
#   COMP_TESTS ["json json-100k"]
# Quick smoke run: RUNS=1 DURATION=3 WARMUP=2 bash bench/compression.sh
# Output: the table on stdout; runs and server logs under target/bench/results/<stamp>-compression/.
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

COMP_VARIANTS="${COMP_VARIANTS:-raw-vertx donkey-nb donkey-sync}"
COMP_TESTS="${COMP_TESTS:-json json-100k}"
for _t in $COMP_TESTS; do
  case "$_t" in json|json-100k) ;; *) die "unknown test $_t (COMP_TESTS: json json-100k)" ;; esac
done

STAMP="$(date -u +%Y%m%dT%H%M%SZ)"
LOGS="$RESULTS/$STAMP-compression"
mkdir -p "$LOGS"
RUNS_TSV="$LOGS/runs.tsv"

ensure_tools
ensure_built
if [ "$JSON_MODE" = auto ] && [ -s "$RESULTS/json-mode" ]; then
  JSON_MODE_RESOLVED="$(cat "$RESULTS/json-mode")"
else
  resolve_json_mode "$LOGS"
fi
# shellcheck disable=SC2206
select_variants $COMP_VARIANTS

# check_gzip VARIANT: each test answers 200 with Content-Encoding: gzip, and the body inflates
# to the bytes the same server sends a client that accepts no coding.
check_gzip() {
  local v="$1" t ok=0 plain zipped
  for t in $COMP_TESTS; do
    plain="$LOGS/check-$v-$t.plain"; zipped="$LOGS/check-$v-$t.gz"
    curl -s --max-time 5 -o "$plain" "http://127.0.0.1:$PORT/$t" || true
    curl -s --max-time 5 -H 'Accept-Encoding: gzip' -D "$zipped.headers" -o "$zipped" \
      "http://127.0.0.1:$PORT/$t" || true
    if ! grep -qi '^content-encoding: gzip' "$zipped.headers" 2>/dev/null; then
      log "$v /$t: not gzip"; ok=1; continue
    fi
    if ! gzip -dc "$zipped" 2>/dev/null | cmp -s - "$plain"; then
      log "$v /$t: the gzip body does not inflate to the plain one"; ok=1
    fi
  done
  return $ok
}

tsv_row "$RUNS_TSV" round variant test rps p99_us errors
failed=0
for round in $(seq 1 "$RUNS"); do
  for v in "${ACTIVE[@]}"; do
    log "round $round/$RUNS: $v"
    if ! start_server "$v" "$LOGS/server-$v-$round.log" -Ddonkey.bench.compression=true; then
      log "$v did not start"; failed=1; continue
    fi
    check_gzip "$v" || failed=1
    for t in $COMP_TESTS; do
      r="$(wrk_run "$WARMUP" "$t" "$LOGS/wrk-$v-$t-$round-warmup.txt" "$CONNECTIONS" gzip)"
      e="$(errors_of "$r")"; [ "$e" = 0 ] || { log "$v /$t warm-up: $e errors"; failed=1; }
      r="$(wrk_run "$DURATION" "$t" "$LOGS/wrk-$v-$t-$round.txt" "$CONNECTIONS" gzip)"
      e="$(errors_of "$r")"; [ "$e" = 0 ] || { log "$v /$t: $e errors"; failed=1; }
      tsv_row "$RUNS_TSV" "$round" "$v" "$t" "$(field rps "$r")" "$(field p99_us "$r")" "$e"
      log "  /$t $(krps "$(field rps "$r")") req/s"
    done
    stop_server
  done
done

python3 - "$RUNS_TSV" <<'EOF'
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
        p99 = statistics.median(vals(v, t, "p99_us")) / 1000
        errs = int(sum(vals(v, t, "errors")))
        print("| %s | %s | %.0f (%.0f..%.0f) | %s | %.1f | %d |" % (t, v, m, min(rps), max(rps), ratio, p99, errs))
EOF
log "runs and logs in $LOGS"
exit $failed
