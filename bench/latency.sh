#!/usr/bin/env bash
# Fixed-rate latency run, the second half of `make bench`: GET /json at a constant request
# rate (by default half of raw Vert.x's peak JSON throughput from the last bench/run.sh, or
# from a quick measurement when there is none) against raw-vertx, donkey-nb, donkey-sync and
# jetty, one at a time, each pinned to CPU 0 as in run.sh, after a LAT_WARMUP-second wrk
# warm-up. donkey-sync (a plain Ring handler, the drop-in case) is the donkey figure the
# target is judged on; donkey-nb shows what the worker hand-off costs the tail.
#
# The fixed-rate load is one oha run on one set of connections. oha records every request
# (its --db-url SQLite file), and the percentiles are computed here over a window of the
# steady state that lies between two of oha's own pauses (below). Before it, after the wrk
# warm-up, an oha run of LAT_PRIME seconds at the same rate on connections of its own primes
# the server, uncounted: a full-throttle warm-up leaves the paths of a paced load (a loop
# that parks between requests, a worker hand-off that carries one request, connections
# opening and closing) to the JIT, which then compiled them inside the measured run. Without
# it the switch from wrk's connections to oha's stalled every server for 0.3-0.8 s (its
# backlog up to 1.8 s, draining for up to 10 s, into the window), and late compilations
# showed as one-second ramps in the window; with 6 s of priming the measured run's opening
# stall was 17-98 ms for raw Vert.x, 20-142 ms for donkey-nb and 23-297 ms for donkey-sync
# (2026-11-25, 36 runs). The slowest request due in the measured run's first second is reported on its own,
# in the "open" column, not hidden. (Until 2026-11-24 the measured window was the whole of a
# second oha run, whose opening stall, 20 to 130 ms, was most of its p99 for every server.)
#
# The load generator is oha (crates.io) with -q and --latency-correction: requests leave on a
# fixed schedule and each latency counts from the moment its request was due, so a stall shows
# up in the tail instead of slowing the load down (wrk cannot hold a rate; vegeta, tried first,
# topped out near 30k req/s on one core). It is pinned to CPU 1 and installed into
# target/bench/oha with `cargo install` when missing. A generator that cannot keep up shows as
# an achieved rate under the target; the table flags such rows, which measure the generator.
#
# oha pauses each time its count of requests reaches a power of two (its store of results
# doubles: 2^18 costs 15-80 ms, 2^19 30-165 ms, 2^20 60-350 ms, measured 2026-11-25 from the
# gaps in its own send times; the spread is the page faults of the new store), and with
# --latency-correction the requests due meanwhile count the pause against the server. It shows
# in every server's timeline at the same count, whatever the rate: 13.1 s at 40,000 req/s,
# 10.4 s at 50,308, 8.6 and 17.2 s at 61,000 (2^19/rate, 2^20/rate). The window is therefore
# the requests from the 2^k-th to the 2^(k+1)-th, for the smallest k whose 2^k-th request is due
# at least max(LAT_SETTLE, LAT_DURATION + LAT_DRAIN + 0.1) s into the run, less LAT_DRAIN s
# after the pause and 0.1 s before the next; the run lasts until just past the 2^(k+1)-th
# request. LAT_DRAIN is the time the backlog of the generator's pause takes to drain: at 61k
# req/s a 350 ms pause left requests queued for 0.4-0.9 s after it for raw Vert.x and 0.9-1.7 s
# for donkey-sync (a server with a fifth of its core to spare drains a backlog at about a
# quarter of the rate it built up). (Until 2026-11-24 the window was a fixed last 15 s, which
# held one or two of these pauses; until the morning of 2026-11-25 it began 0.3 s after the
# pause, then 0.8 s, and in the two seven-round bench runs of that morning the draining backlog
# of the 2^20 pause set the p99 of 3 of 12 runs: raw Vert.x 98.5 ms, donkey-sync 180.1 ms.)
#
# While oha measures, bench/cpu_sampler.py (on the load CPU) samples the server's CPU time
# every 100 ms: the whole process, its event loop, its JIT compilers and its VM thread (where
# the collector's pauses run). Each run's timeline gets those columns, and the table lists every
# standing queue in the window (100 ms buckets whose median request waited over 5 ms) with what
# the server's core did meanwhile, so a slow run can be told apart: the JIT or a collection
# competing with the loop, or the core given to something outside the JVM.
#
# Each server is run LAT_RUNS times, interleaved (A B C A B C ...), a fresh JVM each time, as
# the throughput bench does: a single run's p99 depends on the JVM start and the second of the
# shared host it lands on (the same code gave p99 ratios to raw Vert.x from 0.62x to 2.99x in
# one-run-per-server runs on 2026-11-24).
#
# Prints one table: server, target and achieved rate, p50/p99/p99.9/max latency of the
# measured window and the slowest request of the first second ("open"), each the median over
# the runs, errors summed over them, and each run's p99; then each server's p99 against raw
# Vert.x's (ratio of the medians, and run by run).
# Exits non-zero when any request failed or a server misbehaved.
#
# Environment (defaults in brackets; see run.sh for the shared ones):
#   RATE [half the peak]  RATE_FRACTION [0.5]  LAT_DURATION [8] s (the least measured)
#   LAT_WARMUP [5] s  LAT_SETTLE [5] s (the least not measured)  LAT_CONNECTIONS [64]
#   LAT_PRIME [6] s (0: none)  LAT_DRAIN [2.5] s  LAT_RUNS [3]  LAT_VARIANTS ["raw-vertx donkey-nb donkey-sync jetty"]  OHA_VERSION [1.16.0]
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

LAT_DURATION="${LAT_DURATION:-8}"
LAT_WARMUP="${LAT_WARMUP:-5}"
LAT_CONNECTIONS="${LAT_CONNECTIONS:-64}"
LAT_RUNS="${LAT_RUNS:-3}"
LAT_SETTLE="${LAT_SETTLE:-5}"
LAT_DRAIN="${LAT_DRAIN:-2.5}"
LAT_PRIME="${LAT_PRIME:-6}"
LAT_VARIANTS="${LAT_VARIANTS:-raw-vertx donkey-nb donkey-sync jetty}"
RATE_FRACTION="${RATE_FRACTION:-0.5}"
OHA_VERSION="${OHA_VERSION:-1.16.0}"
check_int LAT_DURATION 120
check_int LAT_WARMUP 60
check_int LAT_CONNECTIONS 10000
check_int LAT_RUNS 20
[[ "$LAT_PRIME" =~ ^[0-9]+$ ]] && [ "$LAT_PRIME" -le 60 ] || die "LAT_PRIME must be an integer in 0..60"
[[ "$LAT_SETTLE" =~ ^[0-9]+$ ]] && [ "$LAT_SETTLE" -le 60 ] || die "LAT_SETTLE must be an integer in 0..60"
[[ "$LAT_DRAIN" =~ ^[0-9]+(\.[0-9]+)?$ ]] && python3 -c 'import sys; sys.exit(not float(sys.argv[1]) <= 30)' "$LAT_DRAIN" \
  || die "LAT_DRAIN must be a number of seconds in 0..30"

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
json_mode_as_run

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
# the measured window, between oha's pauses at its 2^k-th and 2^(k+1)-th request (see the top)
read -r win_start win_end run_secs < <(python3 -c '
import math, sys
rate, settle, duration, drain = (float(a) for a in sys.argv[1:5])
k = math.ceil(math.log2(max(settle, duration + drain + 0.1) * rate))
t1, t2 = 2 ** k / rate, 2 ** (k + 1) / rate
print(f"{t1 + drain:.3f} {t2 - 0.1:.3f} {math.ceil(t2 + 0.5)}")' "$rate" "$LAT_SETTLE" "$LAT_DURATION" "$LAT_DRAIN")
log "fixed rate: $rate req/s ($rate_from); ${LAT_WARMUP}s warm-up, ${LAT_PRIME}s priming, then ${run_secs}s of which ${win_start}..${win_end}s are measured"

# ------------------------------------------------------------------------------ attacks
# attack SECONDS OUTFILE: oha on LOAD_CPU at the fixed rate against /json; its JSON summary.
# -w waits for the requests still out at the deadline, so none is dropped from the figures.
# attack SECONDS OUT.json DB: one oha run; the summary JSON (errors) and every succeeded request
# (start, due time, end) in the SQLite file DB
attack() {
  rm -f "$3"
  taskset -c "$LOAD_CPU" "$OHA" --no-tui --output-format json -q "$rate" --latency-correction \
    -c "$LAT_CONNECTIONS" -z "${1}s" -w -t 10s --db-url "$3" "http://127.0.0.1:$PORT/json" \
    >"$2.out" 2>"$2.err" || return 1
  # oha appends a "Storing results" line after the JSON on stdout
  sed -n '/^{/,/^}/p' "$2.out" >"$2"
}

# shellcheck disable=SC2086  # a list of names
select_variants $LAT_VARIANTS
for round in $(seq 1 "$LAT_RUNS"); do
  for v in "${ACTIVE[@]}"; do
    run="$v-r$round"
    slog="$LOGS/server-$run.log"
    log "round $round/$LAT_RUNS: $v"
    if ! start_server "$v" "$slog"; then log "$v failed to start; log: $slog"; failed=1; continue; fi
    check_endpoints "$v" "$LOGS" json || { log "$v answers wrongly; log: $slog"; failed=1; }
    # warm-up at full throttle (wrk, closed loop), the quickest way to a JIT-compiled steady state
    werr="$(errors_of "$(wrk_run "$LAT_WARMUP" json "$LOGS/wrk-$run-warmup.txt")")"
    printf '%s\t%s\n' "$run" "$werr" >>"$LOGS/warmup-errors.tsv"
    # then the fixed rate on connections of its own, not counted: the paths a paced load takes
    # and a full-throttle one does not get compiled here rather than in the measured run
    if [ "$LAT_PRIME" -gt 0 ]; then
      attack "$LAT_PRIME" "$LOGS/$run-prime.json" "$LOGS/$run-prime.db" \
        || { log "$v: oha failed (priming)"; failed=1; }
      rm -f "$LOGS/$run-prime.db"
    fi
    # then run_secs at the fixed rate on one set of connections; only the window is counted.
    # The sampler's clock is matched to oha's by the wall time just before oha starts.
    date +%s.%N >"$LOGS/$run.t0"
    taskset -c "$LOAD_CPU" python3 "$ROOT/bench/cpu_sampler.py" "$SERVER_PID" "$LOGS/$run-cpu.txt" &
    sampler=$!
    attack "$run_secs" "$LOGS/$run.json" "$LOGS/$run.db" \
      || { log "$v: oha failed"; failed=1; }
    kill "$sampler" 2>/dev/null || true
    wait "$sampler" 2>/dev/null || true
    check_reflection "$v" "$slog" || failed=1
    stop_server
  done
done

# -------------------------------------------------------------------------------- table
python3 - "$LOGS" "$rate" "${ACTIVE[*]}" "$win_start" "$win_end" "$LAT_RUNS" <<'EOF' | tee "$LOGS/table.md" || failed=1
import json, math, os, sqlite3, statistics, sys
logs, rate, variants = sys.argv[1], int(sys.argv[2]), sys.argv[3].split()
win_start, win_end = float(sys.argv[4]), float(sys.argv[5])
runs = int(sys.argv[6])
duration = win_end - win_start

def summary(path):
    """oha's summary of the whole run: its failed requests (non-2xx and transport errors)."""
    with open(path) as f:
        d = json.load(f)
    codes = d.get("statusCodeDistribution") or {}
    bad = sum(n for c, n in codes.items() if not 200 <= int(c) < 300)
    bad += sum((d.get("errorDistribution") or {}).values())
    return bad

def requests(path):
    """(due, latency) of every succeeded request, due counted from the first one, in seconds."""
    db = sqlite3.connect(path)
    rows = db.execute("select coalesce(start_latency_correction, start), end from oha").fetchall()
    db.close()
    t0 = min(r[0] for r in rows)
    return [(due - t0, end - due) for due, end in rows]

def pct(sorted_values, p):
    """Nearest-rank percentile."""
    n = len(sorted_values)
    return sorted_values[max(0, min(n - 1, math.ceil(p * n) - 1))]

warmup_errors = {}
if os.path.exists(os.path.join(logs, "warmup-errors.tsv")):
    for line in open(os.path.join(logs, "warmup-errors.tsv")):
        name, n = line.split()
        # a failed or unreadable warm-up (-1) counts as one error
        warmup_errors[name] = int(n) if int(n) >= 0 else 1

def ms(s):
    return "-" if s is None else f"{s * 1e3:.2f} ms"

def cpu_profile(run):
    """{100 ms bucket of oha's clock: (total, loop, jit, vm) in cores} from the run's CPU
    samples, or {} when there are none. Each bucket gets the rates between the samples around
    it (samples every 100 ms, counters in 1/100 s ticks: a bucket's figure is good to about a
    tenth of a core)."""
    try:
        t0 = float(open(os.path.join(logs, run + ".t0")).read())
        samples = []
        for line in open(os.path.join(logs, run + "-cpu.txt")):
            f = line.split()
            samples.append((float(f[0]) - t0, [int(x) for x in f[1:5]]))
    except (OSError, ValueError, IndexError):
        return {}
    hz = os.sysconf("SC_CLK_TCK")
    prof = {}
    for (ta, a), (tb, b) in zip(samples, samples[1:]):
        if tb <= ta:
            continue
        rates = tuple(max(0.0, (y - x) / hz / (tb - ta)) for x, y in zip(a, b))
        for k in range(int(ta * 10), int(tb * 10) + 1):
            # the interval that covers most of the bucket wins
            lo, hi = max(ta, k / 10), min(tb, (k + 1) / 10)
            if hi - lo >= 0.05:
                prof[k] = rates
    return prof

def queues(buckets, prof):
    """The standing queues of the window: runs of 100 ms buckets whose median request waited
    over 5 ms, each as (from s, to s, worst median ms, mean total/loop/jit/vm cores or None)."""
    spans, cur = [], None
    for k in sorted(buckets):
        if not win_start <= k / 10 < win_end:
            continue
        b = sorted(buckets[k])
        p50 = b[len(b) // 2]
        if p50 > 0.005:
            if cur and cur[1] == k - 1:
                cur[1], cur[2] = k, max(cur[2], p50)
                cur[3].append(k)
            else:
                cur = [k, k, p50, [k]]
                spans.append(cur)
    out = []
    for a, z, worst, ks in spans:
        cpu = [prof[k] for k in ks if k in prof]
        mean = tuple(sum(c[i] for c in cpu) / len(cpu) for i in range(4)) if cpu else None
        out.append((a / 10, (z + 1) / 10, worst, mean))
    return out

def one_run(run):
    """The figures of one oha run, or None when it did not run; also writes its timeline."""
    try:
        bad = summary(os.path.join(logs, run + ".json"))
        if os.path.exists(os.path.join(logs, run + "-prime.json")):
            bad += summary(os.path.join(logs, run + "-prime.json"))
        reqs = requests(os.path.join(logs, run + ".db"))
    except (OSError, ValueError, sqlite3.Error):
        return None
    wbad = warmup_errors.get(run, 0)
    measured = sorted(lat for due, lat in reqs if win_start <= due < win_end)
    opening = [lat for due, lat in reqs if due < 1.0]
    prof = cpu_profile(run)
    buckets = {}
    for due, lat in reqs:
        buckets.setdefault(int(due * 10), []).append(lat)
    # keep a small per-100 ms profile of the run instead of the SQLite file (~50 MB)
    with open(os.path.join(logs, run + "-timeline.tsv"), "w") as out:
        out.write("second\trequests\tp50_ms\tmax_ms\tcpu_cores\tloop\tjit\tvm\n")
        for k in sorted(buckets):
            b = sorted(buckets[k])
            c = "\t".join(f"{x:.2f}" for x in prof[k]) if k in prof else "-\t-\t-\t-"
            out.write(f"{k / 10:.1f}\t{len(b)}\t{b[len(b) // 2] * 1e3:.2f}\t{b[-1] * 1e3:.2f}\t{c}\n")
    os.remove(os.path.join(logs, run + ".db"))
    if not measured:
        return {"errors": bad + wbad, "achieved": 0, "queues": []}
    return {"errors": bad + wbad, "achieved": len(measured) / duration,
            "p50": pct(measured, 0.5), "p99": pct(measured, 0.99), "p999": pct(measured, 0.999),
            "max": measured[-1], "open": max(opening) if opening else None,
            "queues": queues(buckets, prof)}

def med(values):
    values = [x for x in values if x is not None]
    return statistics.median(values) if values else None

print("| server | target req/s | achieved req/s | p50 | p99 | p99.9 | max | open | errors | p99 by run |")
print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
failed, short = False, False
p99s = {}
standing = []
for v in variants:
    rs = [one_run(f"{v}-r{r}") for r in range(1, runs + 1)]
    for r, x in enumerate(rs, 1):
        for q in (x or {}).get("queues", []):
            standing.append((f"{v}-r{r}",) + q)
    done = [r for r in rs if r is not None and r["achieved"] > 0]
    failed |= len(done) < runs
    errors = sum(r["errors"] for r in rs if r is not None)
    failed |= errors > 0
    if not done:
        print(f"| {v} | {rate:,} | - | - | - | - | - | - | {errors} | not run or nothing measured |")
        continue
    achieved = med([r["achieved"] for r in done])
    flag = ""
    if any(r["achieved"] < 0.98 * rate for r in done):
        flag, short = " (!)", True
    p99s[v] = [r["p99"] if r is not None and r["achieved"] > 0 else None for r in rs]
    by_run = ", ".join("-" if x is None else f"{x * 1e3:.2f}" for x in p99s[v])
    print(f"| {v} | {rate:,} | {achieved:,.0f}{flag} | {ms(med(r['p50'] for r in done))} | "
          f"{ms(med(r['p99'] for r in done))} | {ms(med(r['p999'] for r in done))} | "
          f"{ms(med(r['max'] for r in done))} | {ms(med(r['open'] for r in done))} | {errors} | "
          f"{by_run} ms |")
if "raw-vertx" in p99s:
    base = p99s["raw-vertx"]
    print()
    for v in variants:
        if v == "raw-vertx" or v not in p99s:
            continue
        pairs = [(a, b) for a, b in zip(p99s[v], base) if a is not None and b is not None]
        if not pairs:
            continue
        ratio = med(a for a, _ in pairs) / med(b for _, b in pairs)
        rounds = ", ".join(f"{a / b:.2f}" for a, b in pairs)
        print(f"{v} p99 / raw-vertx p99: {ratio:.2f} (ratio of the medians); run by run {rounds}")
print()
if standing:
    print(f"Standing queues in the window ({win_start:.2f}..{win_end:.2f} s; 100 ms buckets whose median")
    print("request waited over 5 ms), with the server's CPU meanwhile in cores: the whole JVM, its event")
    print("loop, its JIT compilers and its VM thread (collections). A JVM well under one core while")
    print("requests queue did not get its core.")
    print()
    for run, a, z, worst, cpu in standing:
        c = ("cpu -" if cpu is None else
             f"cpu {cpu[0]:.2f} (loop {cpu[1]:.2f}, jit {cpu[2]:.2f}, vm {cpu[3]:.2f})")
        print(f"- {run}: {a:.1f}..{z:.1f} s, median wait up to {worst * 1e3:.1f} ms; {c}")
else:
    print(f"No standing queue in the window ({win_start:.2f}..{win_end:.2f} s): no 100 ms bucket's median request waited over 5 ms.")
if short:
    print()
    print("(!) under 98% of the target: the rate was not held (the server, or the generator, could not keep up);")
    print("    its latencies include the queueing that followed")
sys.exit(1 if failed else 0)
EOF
{
  echo "GET /json at a fixed $rate req/s ($rate_from);"
  echo "oha $OHA_VERSION -q --latency-correction, $LAT_CONNECTIONS connections, on CPU $LOAD_CPU (open loop: latency counted from when each request was due);"
  echo "$LAT_RUNS runs per server, interleaved, each a fresh JVM on CPU $SERVER_CPU: ${LAT_WARMUP}s wrk warm-up ($CONNECTIONS connections, full throttle),"
  echo "${LAT_PRIME}s of oha at the rate on its own connections (priming, not counted), then one measured oha run"
  echo "of ${run_secs}s on one set of connections: percentiles over the requests due ${win_start}..${win_end}s into it, medians over the runs"
  echo "(between oha's own pauses at its 2^k-th and 2^(k+1)-th request: see bench/latency.sh);"
  echo "open = the slowest request due in the first second after oha's connections opened (not in the percentiles);"
  echo "errors = non-2xx + transport errors, the warm-up, the priming and the whole oha run included"
  echo "donkey JSON: $JSON_MODE_RESOLVED; raw results: $LOGS"
} | tee -a "$LOGS/table.md"
cp "$LOGS/table.md" "$RESULTS/latest-latency.md"

if [ "$failed" -ne 0 ]; then
  log "FAILED: some requests failed or a server misbehaved (logs in $LOGS)"
  exit 1
fi
