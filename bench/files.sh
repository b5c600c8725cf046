#!/usr/bin/env bash
# Static files, a part of `make bench`: donkey.static against raw Vert.x's sendFile
# (bench/java/donkey/bench/RawVertx.java), in the same run. Tests, each GET, not pipelined:
#   files/1k.bin   a 1 KiB file
#   files/1m.bin   a 1 MiB file
# raw-vertx answers with `sendFile` and its Server and Date lines; donkey-nb serves the
# directory with `donkey.static/files-route` on a :non-blocking route, donkey-sync with
# `files-handler` inside a plain sync Ring handler. donkey's answers carry what raw Vert.x's do
# not (ETag, Last-Modified, Accept-Ranges), which it reads from the file per request. Each
# server is checked to send the files' exact bytes. The files are random bytes made at start
# under target/bench/files.
#
# As bench/compression.sh: pinned server and load generator, RUNS interleaved rounds, a fresh
# JVM per (variant, round), WARMUP then DURATION seconds per test; the table shows medians,
# ranges and ratios to raw Vert.x. Exits non-zero when a request failed, a server did not
# start, or an answer was wrong.
#
# Environment (defaults in brackets), beside run.sh's RUNS DURATION WARMUP CONNECTIONS PORT
# JAVA JVM_OPTS SKIP_BUILD: FILE_VARIANTS ["raw-vertx donkey-nb donkey-sync"]
# Quick smoke run: RUNS=1 DURATION=3 WARMUP=2 bash bench/files.sh
# Output: the table on stdout; runs and server logs under target/bench/results/<stamp>-files/.
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

FILE_VARIANTS="${FILE_VARIANTS:-raw-vertx donkey-nb donkey-sync}"
FILE_TESTS="files/1k.bin files/1m.bin"

suite_logs files
FILES_DIR="$OUT/files"
mkdir -p "$FILES_DIR"
head -c 1024 /dev/urandom >"$FILES_DIR/1k.bin"
head -c 1048576 /dev/urandom >"$FILES_DIR/1m.bin"

ensure_tools
ensure_built
# shellcheck disable=SC2206
select_variants $FILE_VARIANTS

# check_files VARIANT: each file comes back whole, byte for byte.
check_files() {
  local v="$1" t ok=0
  for t in $FILE_TESTS; do
    if ! curl -s --max-time 10 "http://127.0.0.1:$PORT/$t" | cmp -s - "$FILES_DIR/${t#files/}"; then
      log "$v /$t: not the file's bytes"; ok=1
    fi
  done
  return $ok
}

failed=0
# shellcheck disable=SC2086
interleaved_runs "$RUNS_TSV" "-Ddonkey.bench.files=$FILES_DIR" "" check_files $FILE_TESTS || failed=1
ratio_table "$RUNS_TSV"
log "runs and logs in $LOGS"
exit $failed
