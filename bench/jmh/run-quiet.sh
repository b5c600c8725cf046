#!/usr/bin/env bash
# For a shared, busy box: builds benchmarks.jar once, then runs the benchmarks one group (an
# eager/lazy pair) at a time, each only after the machine has been idle for a while, and runs
# a group again (up to 3 tries) when other processes took CPU during it. JMH settings are the
# ones in the annotations. Results: bench/jmh/results/quiet/<group>.{json,txt,idle}.
#   bash bench/jmh/run-quiet.sh                       # every group
#   bash bench/jmh/run-quiet.sh b_read c_assocRead    # some groups
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="$here/results/quiet"
mkdir -p "$out"
groups=("$@")
[ ${#groups[@]} -eq 0 ] && groups=(a_build b_read c_assocRead d_route e_headers f_kernelRead f_kernelRoute)

mvn -q -f "$here/pom.xml" package || exit 1

# percentage of CPU time idle over the next $1 seconds, whole machine
idle() {
  local a b c d e f g h t1 i1 t2 i2
  read -r _ a b c d e f g h _ < /proc/stat; t1=$((a+b+c+d+e+f+g+h)); i1=$d
  sleep "$1"
  read -r _ a b c d e f g h _ < /proc/stat; t2=$((a+b+c+d+e+f+g+h)); i2=$d
  echo $(( 100 * (i2 - i1) / (t2 - t1) ))
}

wait_quiet() { # 30 s at >= 92% idle, or give up waiting after 30 min
  local ok=0 start; start=$(date +%s)
  while [ $ok -lt 6 ] && [ $(( $(date +%s) - start )) -lt 1800 ]; do
    if [ "$(idle 5)" -ge 92 ]; then ok=$((ok + 1)); else ok=0; fi
  done
}

for g in "${groups[@]}"; do
  for try in 1 2 3; do
    wait_quiet
    ( while true; do echo "$(date -u +%H:%M:%S) $(idle 2)"; done ) > "$out/$g.idle" &
    mon=$!
    java -jar "$here/target/benchmarks.jar" -prof gc -rf json -rff "$out/$g.json" \
      "RequestMapBench\.${g}_" > "$out/$g.txt" 2>&1
    kill "$mon"; wait "$mon" 2>/dev/null
    # JMH alone keeps one of the two cores busy (~50% idle; JIT threads dip it to ~40%).
    # Anything under 30% means someone else was running.
    low=$(awk '$2 < 30' "$out/$g.idle" | wc -l)
    echo "$(date -u +%H:%M:%S) $g try $try: $low busy samples"
    [ "$low" -eq 0 ] && break
  done
done
