#!/usr/bin/env bash
# A 1 GiB upload to a blocking handler streaming it to disk, in a server JVM capped at 128 MiB
# of heap; prints throughput and the heap in use before and during the upload.
set -euo pipefail
cd "$(dirname "$0")/.."
lein javac >/dev/null
CP=$(lein classpath 2>/dev/null | tail -1)
exec java -Xmx128m -cp "$CP" clojure.main bench/upload/upload_check.clj
