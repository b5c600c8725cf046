#!/usr/bin/env bash
# Fixed-rate latency run, the second half of `make bench`: GET /json at a constant request
# rate (by default half of raw Vert.x's peak JSON throughput from the last bench/run.sh, or
# from a quick measurement when there is none) against raw-vertx, donkey-sync and jetty, one at
# a time, each pinned to CPU 0 as in run.sh, after a LAT_WARMUP-second wrk warm-up and
# LAT_SETTLE seconds at the fixed rate that are not counted.
#
# The load generator is oha (crates.io) with -q and --latency-correction: requests leave on a
# fixed schedule and each latency counts from the moment its request was due, so a stall shows
# up in the tail instead of slowing the load down (wrk cannot hold a rate; vegeta, tried first,
# topped out near 30k req/s on one core). It is pinned to CPU 1 and installed into
# target/bench/oha with `cargo install` when missing. A generator that cannot keep up shows as
# an achieved rate under the target; the table flags such rows, which measure the generator.
#
# Prints one table: server, target and achieved rate, p50/p99/p99.9/max latency, errors.
# Exits non-zero when any request failed or a server misbehaved.
#
# Environment (defaults in brackets; see run.sh for the shared ones):
#   RATE [half the peak]  RATE_FRACTION [0.5]  LAT_DURATION [15] s  LAT_WARMUP [5] s
#   LAT_SETTLE [5] s  LAT_CONNECTIONS [64]  LAT_VARIANTS ["raw-vertx donkey-sync jetty"]  OHA_VERSION [1.16.0]
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

LAT_DURATION="${LAT_DURATION:-15}"
LAT_WARMUP="${LAT_WARMUP:-5}"
LAT_CONNECTIONS="${LAT_CONNECTIONS:-64}"
LAT_SETTLE="${LAT_SETTLE:-5}"
LAT_VARIANTS="${LAT_VARIANTS:-raw-vertx donkey-sync jetty}"
RATE_FRACTION="${RATE_FRACTION:-0.5}"
OHA_VERSION="${OHA_VERSION:-1.16.0}"
check_int LAT_DURATION 120
check_int LAT_WARMUP 60
check_int LAT_CONNECTIONS 10000
[[ "$LAT_SETTLE" =~ ^[0-9]+$ ]] && [ "$LAT_SETTLE" -le 60 ] || die "LAT_SETTLE must be an integer in 0..60"

STAMP="$(date -u +%Y%m%dT%H%M%SZ)"
LOGS="$RESULTS/latency-$STAMP"
mkdir -p "$LOGS"

ensure_oha() {
  OHA="$OUT/oha/bin/oha"
  if [ -x "$OHA" ]; then return 0; fi
  if command -v oha >/dev/null 2>&1; then OHA="$(command -v oha)"; return 0; fi
  if ! command -v cargo >/dev/null 2>&1; then
    if [ -x "$HOME/.cargo/bin/cargo" ]; then
      PATH="$PATH:$HOME/.cargo/bin"
    else
      log "installing cargo (Debian) to build oha"
      local sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
      $sudo apt-get update -q >/dev/null
      DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q cargo >/dev/null
    fi
  fi
  log "installing oha $OHA_VERSION into $OUT/oha (cargo install from crates.io; a few minutes)"
  cargo install oha --version "$OHA_VERSION" --locked --root "$OUT/oha" >"$LOGS/cargo-install.log" 2>&1 \
    || { tail -n 30 "$LOGS/cargo-install.log" >&2; die "cargo install oha failed"; }
  [ -x "$OHA" ] || die "oha not found in $OUT/oha/bin after cargo install"
}

ensure_tools
ensure_oha
ensure_built
if [ "$JSON_MODE" = auto ] && [ -s "$RESULTS/json-mode" ]; then
  JSON_MODE_RESOLVED="$(cat "$RESULTS/json-mode")"
  log "JSON: $JSON_MODE_RESOLVED (as in the last bench/run.sh)"
else
  resolve_json_mode "$LOGS"
fi

failed=0

# ----------------------------------------------------------------------------- the rate
if [ -n "${RATE:-}" ]; then
  [[ "$RATE" =~ ^[0-9]+$ ]] && [ "$RATE" -ge 1 ] || die "RATE must be a positive integer"
  rate="$RATE"; rate_from="RATE=$RATE"
else
  if [ -s "$RESULTS/peak-json-rps" ]; then
    peak="$(cat "$RESULTS/peak-json-rps")"
    peak_from="raw-vertx's median /json rate in the last bench/run.sh"
  else
    log "no peak from bench/run.sh: measuring raw-vertx /json (3 s warm-up, 5 s)"
    start_server raw-vertx "$LOGS/server-raw-vertx-peak.log" || die "raw-vertx failed to start"
    wrk_run 3 json "$LOGS/wrk-peak-warmup.txt" >/dev/null
    r="$(wrk_run 5 json "$LOGS/wrk-peak.txt")"
    stop_server
    peak="$(field rps "$r")"; peak="${peak%.*}"
    [ -n "$peak" ] && [ "$peak" -gt 0 ] || die "could not measure raw-vertx's peak"
    peak_from="a quick raw-vertx /json measurement"
  fi
  rate="$(python3 -c "import sys; print(max(1, int(float(sys.argv[1]) * float(sys.argv[2]))))" "$peak" "$RATE_FRACTION")"
  rate_from="$RATE_FRACTION x $peak req/s, $peak_from"
fi
log "fixed rate: $rate req/s ($rate_from); ${LAT_WARMUP}s warm-up, ${LAT_DURATION}s measured"

# ------------------------------------------------------------------------------ attacks
# attack SECONDS OUTFILE: oha on LOAD_CPU at the fixed rate against /json; its JSON summary.
# -w waits for the requests still out at the deadline, so none is dropped from the figures.
attack() {
  taskset -c "$LOAD_CPU" "$OHA" --no-tui --output-format json -q "$rate" --latency-correction \
    -c "$LAT_CONNECTIONS" -z "${1}s" -w -t 10s "http://127.0.0.1:$PORT/json" >"$2" 2>"$2.err"
}

for v in $LAT_VARIANTS; do
  if ! available "$v"; then log "skipping $v: $(java_of "$v") not found"; continue; fi
  slog="$LOGS/server-$v.log"
  log "$v"
  if ! start_server "$v" "$slog"; then log "$v failed to start; log: $slog"; failed=1; continue; fi
  check_endpoints "$v" "$LOGS" json || { log "$v answers wrongly; log: $slog"; failed=1; }
  # warm-up at full throttle (wrk, closed loop), the quickest way to a JIT-compiled steady state
  werr="$(errors_of "$(wrk_run "$LAT_WARMUP" json "$LOGS/wrk-$v-warmup.txt")")"
  printf '%s\t%s\n' "$v" "$werr" >>"$LOGS/warmup-errors.tsv"
  # then LAT_SETTLE seconds at the fixed rate, not counted: the switch from wrk's connections to
  # oha's costs donkey a one-off stall of tens of ms that would otherwise dominate its p99
  if [ "$LAT_SETTLE" -gt 0 ]; then
    attack "$LAT_SETTLE" "$LOGS/$v-settle.json" || { log "$v: oha failed (settle)"; failed=1; }
  fi
  attack "$LAT_DURATION" "$LOGS/$v.json" || { log "$v: oha failed"; failed=1; }
  check_reflection "$v" "$slog" || failed=1
  stop_server
done

# -------------------------------------------------------------------------------- table
python3 - "$LOGS" "$rate" "$LAT_VARIANTS" <<'EOF' | tee "$LOGS/table.md" || failed=1
import json, os, sys
logs, rate, variants = sys.argv[1], int(sys.argv[2]), sys.argv[3].split()

def load(path):
    with open(path) as f:
        d = json.load(f)
    codes = d.get("statusCodeDistribution") or {}
    bad = sum(n for c, n in codes.items() if not 200 <= int(c) < 300)
    bad += sum((d.get("errorDistribution") or {}).values())
    return d, bad

warmup_errors = {}
if os.path.exists(os.path.join(logs, "warmup-errors.tsv")):
    for line in open(os.path.join(logs, "warmup-errors.tsv")):
        name, n = line.split()
        warmup_errors[name] = int(n)

def ms(s):
    return "-" if s is None else f"{s * 1e3:.2f} ms"

print("| server | target req/s | achieved req/s | p50 | p99 | p99.9 | max | errors |")
print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
failed, short = False, False
for v in variants:
    try:
        d, bad = load(os.path.join(logs, v + ".json"))
        if os.path.exists(os.path.join(logs, v + "-settle.json")):
            bad += load(os.path.join(logs, v + "-settle.json"))[1]
        wbad = max(0, warmup_errors.get(v, 0)) if warmup_errors.get(v, 0) >= 0 else 1
    except (OSError, ValueError):
        print(f"| {v} | {rate:,} | - | - | - | - | - | not run |")
        failed = True
        continue
    s, p = d["summary"], d["latencyPercentiles"]
    achieved = s["requestsPerSec"]
    flag = ""
    if achieved < 0.98 * rate:
        flag, short = " (!)", True
    errors = bad + wbad
    failed |= errors > 0
    print(f"| {v} | {rate:,} | {achieved:,.0f}{flag} | {ms(p.get('p50'))} | {ms(p.get('p99'))} | "
          f"{ms(p.get('p99.9'))} | {ms(s.get('slowest'))} | {errors} |")
if short:
    print()
    print("(!) under 98% of the target: the rate was not held (the server, or the generator, could not keep up);")
    print("    its latencies include the queueing that followed")
sys.exit(1 if failed else 0)
EOF
{
  echo "GET /json at a fixed $rate req/s ($rate_from);"
  echo "oha $OHA_VERSION -q --latency-correction, $LAT_CONNECTIONS connections, on CPU $LOAD_CPU (open loop: latency counted from when each request was due);"
  echo "fresh JVM on CPU $SERVER_CPU per server: ${LAT_WARMUP}s wrk warm-up ($CONNECTIONS connections, full throttle), ${LAT_SETTLE}s at the"
  echo "fixed rate not counted, then ${LAT_DURATION}s measured;"
  echo "errors = non-2xx + transport errors, warm-up included"
  echo "donkey JSON: $JSON_MODE_RESOLVED; raw results: $LOGS"
} | tee -a "$LOGS/table.md"
cp "$LOGS/table.md" "$RESULTS/latest-latency.md"

if [ "$failed" -ne 0 ]; then
  log "FAILED: some requests failed or a server misbehaved (logs in $LOGS)"
  exit 1
fi
