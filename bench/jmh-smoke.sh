#!/usr/bin/env bash
# One short iteration of every benchmark of bench/jmh and bench/jmh-ring, in one JVM each: a
# benchmark the code has broken (a failing setup or self-check, an exception) fails here, in
# `make test`, instead of going unseen until someone measures. The figures mean nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
bash .ci/install-deps
mvn -q -B -f bench/jmh/pom.xml package
# -U: a lookup that failed before the Debian packages were installed is not cached as final
mvn -q -B -U -f bench/jmh-ring/pom.xml package
for jar in bench/jmh/target/benchmarks.jar bench/jmh-ring/target/benchmarks-ring.jar; do
  java -Djmh.ignoreLock=true -jar "$jar" -f 0 -wi 0 -i 1 -r 100ms -foe true
done
