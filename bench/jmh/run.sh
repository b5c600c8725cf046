#!/usr/bin/env bash
# Builds bench/jmh/target/benchmarks.jar and runs it with the GC profiler (bytes/op).
# Any arguments go to JMH, e.g.:
#   bash bench/jmh/run.sh                      # every benchmark
#   bash bench/jmh/run.sh 'RequestMapBench.*read' -f 1 -wi 1 -i 2
#   bash bench/jmh/run.sh -rf json -rff /tmp/jmh.json
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
mvn -q -f "$here/pom.xml" package
exec java -jar "$here/target/benchmarks.jar" -prof gc "$@"
