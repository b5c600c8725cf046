#!/usr/bin/env bash
# WebSocket bench, the last part of `make bench` (DESIGN.md section 7): raw Vert.x's own
# WebSocket server against donkey's, each pinned to CPU 0 with one event loop
# (`taskset -c 0 java -XX:ActiveProcessorCount=1`), the load client on CPU 1.
#
# Servers (bench/java/donkey/bench/RawVertxWebSocket.java, bench/src/donkey/bench/ws_app.clj):
#   raw-vertx-ws    Vert.x 5's ServerWebSocket, text in as a String and out as one
#   donkey-ws-nb    a `:handler-mode :non-blocking` route answers the upgrade; the listener
#                   runs on the event loop
#   donkey-ws-sync  a plain sync Ring handler answers it; the listener runs on a worker
# Load client: bench/wsload (Go, gorilla/websocket, versions pinned in go.mod/go.sum), built
# into target/bench/bin; talks to 127.0.0.1 only.
#
# Parts:
#   echo       WS_CONNECTIONS connections, each with one WS_SIZE-byte text message in flight;
#              messages/s over DURATION s after WARMUP s. RUNS rounds interleaved across the
#              servers (A B C A B C ...), a fresh JVM each; the table shows medians, and each
#              ratio is the median of a server over raw Vert.x's median in the same run.
#              Server CPU is the server's CPU seconds per second in the measured window (1.00:
#              its core was saturated); client CPU the same for the client (near 1.00: the
#              client, not the server, may be the limit). Messages per server CPU-second is
#              the server's cost per message, which other load on the machine moves less.
#   broadcast  WS_FANOUT connections; one of them asks for a broadcast and the server sends the
#              WS_SIZE-byte message to all of them; time until every connection has read it.
#              One unmeasured broadcast, then WS_BROADCASTS measured; the figure of a round is
#              their median, the table shows the median over FANOUT_RUNS rounds.
#   memory     in the same JVM, once the broadcast's connections are closed: live heap (the
#              total of `jcmd PID GC.class_histogram`, which runs a full GC first) and RSS
#              (VmRSS); WS_FANOUT idle sockets opened; the same again; the differences per
#              socket. Heap is fixed (-Xms = -Xmx), so RSS
#              moves with native memory and the heap pages first touched.
# Exits non-zero when a message was lost or wrong, a connection failed, or a server
# misbehaved; a missed target is reported in the table, not as a failure.
#
# Environment (defaults in brackets; lib.sh has the shared ones):
#   RUNS [5] echo rounds  DURATION [10] s  WARMUP [3] s  WS_CONNECTIONS [256]  WS_SIZE [64]
#   WS_FANOUT [10000]  WS_BROADCASTS [5]  FANOUT_RUNS [3]  WS_PARTS ["echo fanout"]
#   WS_VARIANTS ["raw-vertx-ws donkey-ws-nb donkey-ws-sync"]  PORT [18480]
#   JVM_OPTS ["-Xms1g -Xmx1g"]  SKIP_BUILD [0]: 1 reuses target/bench/bench.cp
# Quick smoke run: RUNS=1 DURATION=2 WARMUP=1 FANOUT_RUNS=1 WS_FANOUT=1000 WS_BROADCASTS=2 bash bench/websocket.sh
# Output: the tables on stdout; every run and server log under target/bench/results/<stamp>-ws/.
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

WS_CONNECTIONS="${WS_CONNECTIONS:-256}"
WS_SIZE="${WS_SIZE:-64}"
WS_FANOUT="${WS_FANOUT:-10000}"
WS_BROADCASTS="${WS_BROADCASTS:-5}"
FANOUT_RUNS="${FANOUT_RUNS:-3}"
WS_PARTS="${WS_PARTS:-echo fanout}"
WS_VARIANTS="${WS_VARIANTS:-raw-vertx-ws donkey-ws-nb donkey-ws-sync}"
for _v in WS_CONNECTIONS:10000 WS_SIZE:65536 WS_FANOUT:20000 WS_BROADCASTS:100 FANOUT_RUNS:20; do
  check_int "${_v%%:*}" "${_v#*:}"
done
[ "$WS_SIZE" -ge 32 ] || die "WS_SIZE must be at least 32"

STAMP="$(date -u +%Y%m%dT%H%M%SZ)"
LOGS="$RESULTS/$STAMP-ws"
mkdir -p "$LOGS"
WSLOAD="$OUT/bin/wsload"

# ------------------------------------------------------------------------------------ setup
ensure_go() {
  GO="$(command -v go || true)"
  [ -n "$GO" ] || [ ! -x /usr/local/go/bin/go ] || GO=/usr/local/go/bin/go
  if [ -z "$GO" ]; then
    log "installing Debian's golang-go for the load client (bench/wsload)"
    local sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
    { $sudo apt-get update -q && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q golang-go; } >/dev/null \
      || die "go is needed for the load client (bench/wsload)"
    GO="$(command -v go)"
  fi
}

build_wsload() {
  mkdir -p "$OUT/bin"
  log "building the load client: $("$GO" version) -> $WSLOAD"
  # -mod=readonly: go.sum must already pin every module, nothing is resolved anew
  (cd "$ROOT/bench/wsload" && GOTOOLCHAIN=local GOFLAGS=-mod=readonly "$GO" build -o "$WSLOAD" .) \
    >"$LOGS/go-build.log" 2>&1 || { cat "$LOGS/go-build.log" >&2; die "building bench/wsload failed"; }
}

# Each side holds WS_FANOUT sockets, plus the JVM's own files.
raise_fd_limit() {
  local want=$(( WS_FANOUT + 4096 ))
  if [ "$(ulimit -n)" != unlimited ] && [ "$(ulimit -n)" -lt "$want" ]; then
    ulimit -n "$want" 2>/dev/null || die "ulimit -n is $(ulimit -n) and cannot be raised to $want (WS_FANOUT=$WS_FANOUT)"
  fi
}

ensure_tools
ensure_go
command -v jcmd >/dev/null 2>&1 || die "jcmd (the JDK) is needed to measure the heap"
raise_fd_limit
ensure_built
build_wsload
# shellcheck disable=SC2086  # a list of names
select_variants $WS_VARIANTS

# cpu_ticks PID: user + system clock ticks the process has used
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
HZ="$(getconf CLK_TCK)"

# wsload MODE PATH [options...]: the client, pinned to LOAD_CPU, on one OS thread (taskset
# execs it, so `wsload ... &` leaves its pid in CLIENT_PID)
CLIENT_PID=""
wsload() {
  local mode="$1" path="$2"; shift 2
  GOMAXPROCS=1 taskset -c "$LOAD_CPU" "$WSLOAD" "$mode" -url "ws://127.0.0.1:$PORT$path" "$@"
}
wsload_bg() {  # wsload_bg OUTFILE MODE PATH [options...]: wsload in the background
  local out="$1" mode="$2" path="$3"; shift 3
  GOMAXPROCS=1 taskset -c "$LOAD_CPU" "$WSLOAD" "$mode" -url "ws://127.0.0.1:$PORT$path" "$@" >"$out" 2>&1 &
  CLIENT_PID=$!
}
trap 'if [ -n "$CLIENT_PID" ]; then kill "$CLIENT_PID" 2>/dev/null || true; fi; cleanup' EXIT

field_of() { { grep "^RESULT " "$2" 2>/dev/null || true; } | tail -n 1 | tr " " "\n" | sed -n "s/^$1=//p"; }


failed=0
ECHO_TSV="$LOGS/echo.tsv"
FAN_TSV="$LOGS/fanout.tsv"
printf 'round\tvariant\tmps\tserver_cpu\tclient_cpu\terrors\tloadavg\n' >"$ECHO_TSV"
printf 'round\tvariant\tbroadcast_ms\tbroadcast_min_ms\tbroadcast_max_ms\theap_per_conn\trss_per_conn\terrors\tloadavg\n' >"$FAN_TSV"

start_or_fail() {  # start_or_fail VARIANT LOG: starts the server; logs and returns 1 if it cannot
  if ! start_server "$1" "$2"; then
    log "$1 failed to start; log: $2"; failed=1; stop_server; return 1
  fi
}

# ------------------------------------------------------------------------------------- echo
echo_round() {  # echo_round ROUND VARIANT
  local round="$1" v="$2" out="$LOGS/echo-$2-r$1.txt" c0 c1 mps err ccpu scpu load
  start_or_fail "$v" "$LOGS/server-echo-$v-r$round.log" \
    || { printf '%s\t%s\t0\t0\t0\t-1\t-\n' "$round" "$v" >>"$ECHO_TSV"; return; }
  wsload_bg "$out" echo /echo -c "$WS_CONNECTIONS" -size "$WS_SIZE" -warmup "${WARMUP}s" -duration "${DURATION}s"
  # the server's CPU over the client's measured window (its connections open in well under 1 s)
  sleep "$WARMUP"; c0="$(cpu_ticks "$SERVER_PID")"
  sleep "$DURATION"; c1="$(cpu_ticks "$SERVER_PID")"
  wait "$CLIENT_PID" || failed=1
  CLIENT_PID=""
  mps="$(field_of mps "$out")"; err="$(field_of errors "$out")"; ccpu="$(field_of client_cpu "$out")"
  [ -n "$mps" ] || { log "$v: the echo client failed: $(tail -n 3 "$out")"; failed=1; }
  [ "${err:--1}" = 0 ] || failed=1
  scpu="$(awk -v a="$c0" -v b="$c1" -v hz="$HZ" -v d="$DURATION" 'BEGIN {printf "%.2f", (b - a) / hz / d}')"
  load="$(loadavg)"
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$round" "$v" "${mps:-0}" "$scpu" "${ccpu:-0}" "${err:--1}" "$load" >>"$ECHO_TSV"
  log "    echo: ${mps:-?} msgs/s, server CPU $scpu, client CPU ${ccpu:-?}, errors ${err:-?}, load average $load"
  check_reflection "$v" "$LOGS/server-echo-$v-r$round.log" || failed=1
  stop_server
}

# ---------------------------------------------------------------------- broadcast and memory

fanout_round() {  # fanout_round ROUND VARIANT
  local round="$1" v="$2" bout="$LOGS/broadcast-$2-r$1.txt" iout="$LOGS/idle-$2-r$1.txt"
  local bms bmin bmax berr h0 h1 r0 r1 hper rper load errors=0 client i
  start_or_fail "$v" "$LOGS/server-fanout-$v-r$round.log" \
    || { printf '%s\t%s\t-1\t-1\t-1\t-1\t-1\t-1\t-\n' "$round" "$v" >>"$FAN_TSV"; return; }
  wsload broadcast /broadcast -c "$WS_FANOUT" -size "$WS_SIZE" -rounds "$WS_BROADCASTS" >"$bout" 2>&1 \
    || { log "$v: broadcast failed: $(tail -n 3 "$bout")"; failed=1; errors=1; }
  bms="$(field_of median_ms "$bout")"; bmin="$(field_of min_ms "$bout")"; bmax="$(field_of max_ms "$bout")"
  berr="$(field_of errors "$bout")"
  log "    broadcast to $WS_FANOUT: median ${bms:-?} ms (${bmin:-?}..${bmax:-?}), errors ${berr:-?}, load average $(loadavg)"
  # memory: the broadcast opened and closed WS_FANOUT sockets already, so the baseline has the
  # pools and code a socket needs, and the difference is what open sockets hold
  wait_closed
  h0="$(live_heap_kb "$SERVER_PID")"; r0="$(rss_kb "$SERVER_PID")"
  wsload_bg "$iout" idle /idle -c "$WS_FANOUT" -hold 300s
  client=$CLIENT_PID
  for i in $(seq 1 1200); do
    grep -q '^OPEN ' "$iout" 2>/dev/null && break
    kill -0 "$client" 2>/dev/null || break
    sleep 0.1
  done
  hper=-1; rper=-1
  if grep -q '^OPEN ' "$iout"; then
    sleep 2  # every on-open has run
    h1="$(live_heap_kb "$SERVER_PID")"; r1="$(rss_kb "$SERVER_PID")"
    if [ -n "$h0" ] && [ -n "$h1" ]; then hper=$(( (h1 - h0) * 1024 / WS_FANOUT )); else log "$v: jcmd failed"; failed=1; fi
    rper=$(( (r1 - r0) * 1024 / WS_FANOUT ))
    kill -TERM "$client" 2>/dev/null || true
  else
    log "$v: the idle sockets did not all open: $(tail -n 3 "$iout")"; failed=1; errors=1
    kill -TERM "$client" 2>/dev/null || true
  fi
  wait "$client" || { failed=1; errors=1; }
  CLIENT_PID=""
  load="$(loadavg)"
  log "    memory: heap $h0 -> ${h1:-?} KiB, RSS $r0 -> ${r1:-?} KiB: $hper B heap, $rper B RSS per idle socket, load average $load"
  [ "${berr:--1}" = 0 ] || errors=1
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$round" "$v" "${bms:--1}" "${bmin:--1}" "${bmax:--1}" \
    "$hper" "$rper" "$errors" "$load" >>"$FAN_TSV"
  check_reflection "$v" "$LOGS/server-fanout-$v-r$round.log" || failed=1
  stop_server
}

for part in $WS_PARTS; do
  case "$part" in
    echo)
      log "echo: $RUNS rounds x (${ACTIVE[*]}): $WS_CONNECTIONS connections, $WS_SIZE-byte text," \
          "warm-up ${WARMUP}s, measured ${DURATION}s"
      for round in $(seq 1 "$RUNS"); do
        for v in "${ACTIVE[@]}"; do log "[echo $round/$RUNS] $v"; echo_round "$round" "$v"; done
      done ;;
    fanout)
      log "broadcast and memory: $FANOUT_RUNS rounds x (${ACTIVE[*]}): $WS_FANOUT sockets," \
          "$WS_BROADCASTS broadcasts per round"
      for round in $(seq 1 "$FANOUT_RUNS"); do
        for v in "${ACTIVE[@]}"; do log "[fan-out $round/$FANOUT_RUNS] $v"; fanout_round "$round" "$v"; done
      done ;;
    *) die "unknown part $part (WS_PARTS: echo fanout)" ;;
  esac
done

python3 - "$ECHO_TSV" "$FAN_TSV" "$LOGS/table.md" "$WS_FANOUT" <<'EOF'
import csv, statistics, sys
echo = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
fan = list(csv.DictReader(open(sys.argv[2]), delimiter="\t"))
fanout = int(sys.argv[4])
RAW = "raw-vertx-ws"
TARGET = {"donkey-ws-nb": 0.90, "donkey-ws-sync": 0.75}
def order(rows):
    seen = []
    for r in rows:
        if r["variant"] not in seen: seen.append(r["variant"])
    return seen
def med(xs): return statistics.median(xs) if xs else None
out = []
if echo:
    out += ["| variant | echo msgs/s (median) | min..max | server CPU | client CPU | msgs per server CPU-s | errors | vs raw Vert.x | per CPU-s vs raw | target |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
    stats = {}
    for v in order(echo):
        rs = [r for r in echo if r["variant"] == v]
        ok = [r for r in rs if int(r["errors"]) >= 0 and float(r["mps"]) > 0]
        mps = [float(r["mps"]) for r in ok]
        stats[v] = dict(m=med(mps) or 0, lo=min(mps, default=0), hi=max(mps, default=0),
                        s=med([float(r["server_cpu"]) for r in ok]) or 0,
                        c=med([float(r["client_cpu"]) for r in ok]) or 0,
                        eff=med([float(r["mps"]) / float(r["server_cpu"]) for r in ok if float(r["server_cpu"]) > 0]) or 0,
                        e=sum(max(0, int(r["errors"])) for r in rs) + (len(rs) - len(ok)))
    base = stats.get(RAW, {}).get("m", 0)
    base_eff = stats.get(RAW, {}).get("eff", 0)
    for v, s in stats.items():
        ratio = s["m"] / base if base else None
        eff = f"{s['eff'] / base_eff:.2f}" if base_eff else "n/a"
        t = TARGET.get(v)
        verdict = "" if t is None or ratio is None else (f">= {t:.2f}: " + ("met" if ratio >= t else "missed"))
        out.append(f"| {v} | {s['m']:,.0f} | {s['lo']:,.0f}..{s['hi']:,.0f} | {s['s']:.2f} | {s['c']:.2f} | "
                   f"{s['eff']:,.0f} | {s['e']} | {'n/a' if ratio is None else f'{ratio:.2f}'} | {eff} | {verdict} |")
    out.append("")
if fan:
    out += [f"| variant | broadcast to {fanout:,} (median ms) | min..max | vs raw | heap per idle socket | "
            "RSS per idle socket | heap vs raw | errors |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    stats = {}
    for v in order(fan):
        rs = [r for r in fan if r["variant"] == v]
        b = [float(r["broadcast_ms"]) for r in rs if float(r["broadcast_ms"]) > 0]
        h = [int(r["heap_per_conn"]) for r in rs if int(r["heap_per_conn"]) >= 0]
        m = [int(r["rss_per_conn"]) for r in rs if int(r["rss_per_conn"]) != -1]
        stats[v] = dict(b=med(b), lo=min(b, default=0), hi=max(b, default=0), h=med(h), r=med(m),
                        e=sum(int(r["errors"]) != 0 for r in rs))
    base = stats.get(RAW, {})
    def ratio(v, k):
        return f"{stats[v][k] / base[k]:.2f}" if base.get(k) and stats[v][k] is not None else "n/a"
    def num(x, unit=""): return "n/a" if x is None else f"{x:,.0f}{unit}"
    for v, s in stats.items():
        b = "n/a" if s["b"] is None else f"{s['b']:.1f}"
        out.append(f"| {v} | {b} | {s['lo']:.1f}..{s['hi']:.1f} | "
                   f"{ratio(v, 'b')} | {num(s['h'], ' B')} | {num(s['r'], ' B')} | {ratio(v, 'h')} | {s['e']} |")
text = "\n".join(out)
print(text)
open(sys.argv[3], "w").write(text + "\n")
EOF
{
  echo "echo: medians of $RUNS interleaved rounds, $WS_CONNECTIONS connections x 1 message of $WS_SIZE B in flight," \
       "${WARMUP}s warm-up + ${DURATION}s measured; broadcast and memory: $FANOUT_RUNS rounds of $WS_FANOUT sockets," \
       "$WS_BROADCASTS broadcasts each; server on CPU $SERVER_CPU (one event loop, $JVM_OPTS), client on CPU $LOAD_CPU"
  echo "targets: echo donkey-ws-nb >= 0.90 x raw, donkey-ws-sync >= 0.75 x raw; heap per idle socket <= 1.2 x raw"
  echo "every run: $ECHO_TSV, $FAN_TSV"
} | tee -a "$LOGS/table.md"
cp "$LOGS/table.md" "$RESULTS/latest-websocket.md"

if [ "$failed" -ne 0 ]; then
  log "FAILED: a connection or message failed, or a server misbehaved (logs in $LOGS)"
  exit 1
fi
