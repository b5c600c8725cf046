#!/usr/bin/env bash
# Compressed JSON throughput, a part of `make bench`: donkey against raw Vert.x
# (bench/java/donkey/bench/RawVertx.java) with Vert.x's compression on in both, in the same run.
# Tests, each GET with `Accept-Encoding: gzip` (pipeline.lua's gzip shape), not pipelined:
#   json        the TechEmpower JSON body ({"message":"Hello, World!"}, built per request)
#   json-100k   a 100 KB JSON document (RawVertx.Json100k.BYTES, the same bytes for every server)
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

suite_logs compression

ensure_tools
ensure_built
json_mode_as_run
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

failed=0
# shellcheck disable=SC2086
interleaved_runs "$RUNS_TSV" -Ddonkey.bench.compression=true gzip check_gzip $COMP_TESTS || failed=1
ratio_table "$RUNS_TSV"
log "runs and logs in $LOGS"
exit $failed
