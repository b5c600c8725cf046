#!/usr/bin/env bash
# Builds the donkey-vs-Ring JMH harness and runs it with the GC profiler (-prof gc gives
# gc.alloc.rate.norm = bytes allocated per operation). Results go to results/.
# Usage: bench/jmh-ring/run.sh [extra JMH args, e.g. a benchmark regex like QueryParams]
set -euo pipefail
cd "$(dirname "$0")"
mvn -q -B package
mkdir -p results
stamp=$(date -u +%Y%m%dT%H%M%SZ)
java -jar target/benchmarks-ring.jar -prof gc \
  -rf json -rff "results/jmh-$stamp.json" "$@" 2>&1 | tee "results/jmh-$stamp.txt"
echo "results: results/jmh-$stamp.json results/jmh-$stamp.txt"
