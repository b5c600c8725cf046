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
# loop); wrk is pinned to CPU 1. /plaintext is pipelined PIPELINE deep, /json is not pipelined.
# Each (variant, test) is measured RUNS times, interleaved across variants (A B C A B C ...), a
# fresh JVM per round with a WARMUP-second wrk run before each measured one; the table shows
# medians. Five rounds by default: on the 2-core VM this was built on, the same server moves
# by 20% and more from one JVM start to the next (JIT outcomes, other tenants), and a median
# of three moved with it. Exits non-zero when any request failed (non-2xx or socket error, warm-ups included),
# a server answered wrongly, or the app printed a reflection warning.
#
# Environment (defaults in brackets):
#   RUNS [5]  DURATION [10] s  WARMUP [3] s  CONNECTIONS [256]  PIPELINE [16]  WRK_THREADS [1]
#   VARIANTS ["raw-vertx donkey-nb donkey-sync donkey-vt jetty"]  TESTS ["plaintext json"]
#   JSON_MODE [auto]: kernel (donkey variants return the map, the kernel's JSON codec writes it),
#            app (the app serializes with Jackson), auto (kernel when a probe shows it works)
#   PORT [18480]  JAVA [java]  JAVA25 [/usr/lib/jvm/temurin-25-jdk-amd64/bin/java]
#   JVM_OPTS ["-Xms1g -Xmx1g"]  SKIP_BUILD [0]: 1 reuses target/bench/bench.cp
# Quick smoke run: RUNS=1 DURATION=2 WARMUP=1 bash bench/run.sh
# Output: the table on stdout; every run and server log under target/bench/results/<stamp>/.
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

VARIANTS="${VARIANTS:-raw-vertx donkey-nb donkey-sync donkey-vt jetty}"
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

failed=0
printf 'round\tvariant\ttest\trps\tp99_us\terrors\twarmup_errors\tloadavg\n' >"$RUNS_TSV"
total=$(( RUNS * ${#ACTIVE[@]} ))
n=0
log "${RUNS} rounds x (${ACTIVE[*]}) x ($TESTS): warm-up ${WARMUP}s, measured ${DURATION}s," \
    "$CONNECTIONS connections, plaintext pipelined $PIPELINE deep"
for round in $(seq 1 "$RUNS"); do
  for v in "${ACTIVE[@]}"; do
    n=$((n + 1))
    slog="$LOGS/server-$v-r$round.log"
    log "[$n/$total] round $round: $v"
    if ! start_server "$v" "$slog"; then
      log "$v failed to start; log: $slog"; failed=1; stop_server
      for test in $TESTS; do printf '%s\t%s\t%s\t0\t-1\t-1\t-1\t-\n' "$round" "$v" "$test" >>"$RUNS_TSV"; done
      continue
    fi
    [ "$round" -gt 1 ] || head -n 1 "$slog" >&2
    check_endpoints "$v" "$LOGS" || { log "$v answers wrongly; log: $slog"; failed=1; }
    for test in $TESTS; do
      w="$(wrk_run "$WARMUP" "$test" "$LOGS/wrk-$v-$test-r$round-warmup.txt")"
      m="$(wrk_run "$DURATION" "$test" "$LOGS/wrk-$v-$test-r$round.txt")"
      werr="$(errors_of "$w")"; err="$(errors_of "$m")"
      rps="$(field rps "$m")"; p99="$(field p99_us "$m")"
      [ "$err" -eq 0 ] && [ "$werr" -eq 0 ] || failed=1
      load="$(cut -d' ' -f1 /proc/loadavg)"
      printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$round" "$v" "$test" "${rps:-0}" "${p99:--1}" "$err" "$werr" "$load" >>"$RUNS_TSV"
      log "    $test: ${rps:-?} req/s, p99 ${p99:-?} us, errors $err (warm-up $werr), load average $load"
    done
    check_reflection "$v" "$slog" || failed=1
    stop_server
  done
done

python3 - "$RUNS_TSV" "$LOGS/table.md" "$RESULTS/peak-json-rps" <<'EOF'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
order, tests = [], []
for r in rows:
    if r["variant"] not in order: order.append(r["variant"])
    if r["test"] not in tests: tests.append(r["test"])
stats = {}
for v in order:
    for t in tests:
        rs = [r for r in rows if r["variant"] == v and r["test"] == t]
        ok = [r for r in rs if int(r["errors"]) >= 0]
        rps = [float(r["rps"]) for r in ok]
        errs = sum(max(0, int(r["errors"])) + max(0, int(r["warmup_errors"])) for r in rs)
        stats[v, t] = dict(
            rps=statistics.median(rps) if rps else 0.0,
            p99=statistics.median(p99s) if (p99s := [float(r["p99_us"]) for r in ok if float(r["p99_us"]) > 0]) else -1,
            errors=str(errs) + ("" if len(ok) == len(rs) else f" ({len(rs) - len(ok)} runs failed)"),
            spread=(min(rps), max(rps)) if rps else (0.0, 0.0))
def lat(us):
    if us < 0: return "n/a"
    return f"{us / 1000:.2f} ms" if us >= 1000 else f"{us:.0f} us"
lines = ["| variant | test | req/s (median) | min..max | p99 latency | errors | vs raw Vert.x |",
         "| --- | --- | ---: | ---: | ---: | ---: | ---: |"]
for t in tests:
    base = stats.get(("raw-vertx", t), {}).get("rps", 0)
    for v in order:
        s = stats[v, t]
        ratio = f"{s['rps'] / base:.2f}" if base else "n/a"
        lines.append(f"| {v} | {t} | {s['rps']:,.0f} | {s['spread'][0]:,.0f}..{s['spread'][1]:,.0f} | "
                     f"{lat(s['p99'])} | {s['errors']} | {ratio} |")
text = "\n".join(lines)
print(text)
open(sys.argv[2], "w").write(text + "\n")
peak = stats.get(("raw-vertx", "json"), {}).get("rps", 0)
if peak > 0:
    open(sys.argv[3], "w").write(f"{peak:.0f}\n")
EOF
{
  echo "medians of $RUNS runs per (variant, test), interleaved; ${WARMUP}s warm-up + ${DURATION}s measured;"
  echo "$CONNECTIONS connections; wrk -t$WRK_THREADS on CPU $LOAD_CPU, server on CPU $SERVER_CPU;" \
       "plaintext pipelined $PIPELINE deep, json not pipelined; errors = non-2xx + socket errors, warm-ups included"
  echo "donkey JSON: $JSON_MODE_RESOLVED; every run: $RUNS_TSV"
} | tee -a "$LOGS/table.md"
cp "$LOGS/table.md" "$RESULTS/latest-throughput.md"

if [ "$failed" -ne 0 ]; then
  log "FAILED: some requests failed or a server misbehaved (logs in $LOGS)"
  exit 1
fi
