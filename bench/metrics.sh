#!/usr/bin/env bash
# The cost of metrics, a part of `make bench`: donkey with :metrics on a Prometheus registry
# against the same donkey without, and raw Vert.x (bench/java/donkey/bench/RawVertx.java), in
# the same run. Tests, with TechEmpower's request headers: JSON (GET /json, not pipelined) and
# plaintext (GET /plaintext, pipelined as bench/run.sh pipelines it, where the per-request cost
# of metrics weighs most: a timer record, the in-flight gauge, the socket byte counts). The
# metrics variant of the route table is checked to count what it served (its /metrics scrape).
#
# As bench/run.sh: each server pinned to CPU 0 with one event loop, wrk to CPU 1; RUNS rounds
# interleaved across variants, a fresh JVM per (variant, round), a WARMUP-second run of each
# test before its measured DURATION seconds. Prints the table of bench/compression.sh, then
# each mode's ratio of metrics on to off (medians). Exits non-zero when a request failed
# (warm-ups included), a server did not start, or a check failed.
#
# Environment (defaults in brackets), beside run.sh's RUNS DURATION WARMUP CONNECTIONS PORT
# JAVA JVM_OPTS SKIP_BUILD: METRICS_VARIANTS ["raw-vertx donkey-nb donkey-nb-metrics
#   donkey-sync donkey-sync-metrics"] METRICS_TESTS ["json plaintext"]
# Quick smoke run: RUNS=1 DURATION=3 WARMUP=2 bash bench/metrics.sh
# Output: the tables on stdout; runs and server logs under target/bench/results/<stamp>-metrics/.
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

METRICS_VARIANTS="${METRICS_VARIANTS:-raw-vertx donkey-nb donkey-nb-metrics donkey-sync donkey-sync-metrics}"
METRICS_TESTS="${METRICS_TESTS:-json plaintext}"
for _t in $METRICS_TESTS; do
  case "$_t" in json|plaintext) ;; *) die "unknown test $_t (METRICS_TESTS: json plaintext)" ;; esac
done

suite_logs metrics

ensure_tools
ensure_built
json_mode_as_run
# shellcheck disable=SC2206
select_variants $METRICS_VARIANTS

# check_counted VARIANT: every test answers 200; donkey-nb-metrics's scrape then counts its
# /json requests.
check_counted() {
  local v="$1" t ok=0
  for t in $METRICS_TESTS; do
    [ "$(curl -s --max-time 5 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/$t")" = 200 ] \
      || { log "$v /$t: not 200"; ok=1; }
  done
  if [ "$v" = donkey-nb-metrics ]; then
    curl -s --max-time 5 "http://127.0.0.1:$PORT/metrics" >"$LOGS/check-$v.metrics" || true
    grep -q '^donkey_requests_seconds_count{.*route="/json".*} [1-9]' "$LOGS/check-$v.metrics" \
      || { log "$v: /metrics does not count the /json request"; ok=1; }
  fi
  return $ok
}

failed=0
# shellcheck disable=SC2086
interleaved_runs "$RUNS_TSV" -Ddonkey.bench.suite=metrics techempower check_counted $METRICS_TESTS \
  || failed=1
ratio_table "$RUNS_TSV"
echo
python3 - "$RUNS_TSV" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
def med(v, t):
    xs = [float(r["rps"]) for r in rows if r["variant"] == v and r["test"] == t and r["rps"]]
    return statistics.median(xs) if xs else None
print("| test | mode | metrics on / off (medians) |")
print("| --- | --- | ---: |")
for t in dict.fromkeys(r["test"] for r in rows):
    for mode in ("donkey-nb", "donkey-sync"):
        on, off = med(mode + "-metrics", t), med(mode, t)
        if on and off:
            print("| %s | %s | %.2f |" % (t, mode, on / off))
PY
log "runs and logs in $LOGS"
exit $failed
