#!/usr/bin/env bash
# Builds the donkey-vs-Ring JMH harness and runs it with the GC profiler (-prof gc gives
# gc.alloc.rate.norm = bytes allocated per operation). Results go to results/.
# Usage: bench/jmh-ring/run.sh [extra JMH args, e.g. a benchmark regex like QueryParams]
set -euo pipefail
cd "$(dirname "$0")"
# Ring's side comes from Debian's Maven-layout folder: install what a fresh machine lacks.
need=()
for pkg in libring-core-clojure libring-codec-clojure libring-json-clojure libcheshire-clojure \
           libtigris-clojure maven; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
done
if [ ${#need[@]} -gt 0 ]; then
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -q >/dev/null
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q "${need[@]}" >/dev/null
fi
# -U: a lookup that failed before the packages were installed is not cached as final
mvn -q -B -U package
mkdir -p results
stamp=$(date -u +%Y%m%dT%H%M%SZ)
java -jar target/benchmarks-ring.jar -prof gc \
  -rf json -rff "results/jmh-$stamp.json" "$@" 2>&1 | tee "results/jmh-$stamp.txt"
echo "results: results/jmh-$stamp.json results/jmh-$stamp.txt"
