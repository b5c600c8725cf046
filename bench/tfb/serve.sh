#!/usr/bin/env bash
# Serves TechEmpower's application on donkey (donkey.tfb.app) in the foreground, for people and
# tools (TechEmpower's verifier among them) to check:
#
#   bash bench/tfb/serve.sh MODE PORT
#
# MODE: sync (JDBC on donkey's workers), vt (the same on virtual threads), nb (non-blocking
# handlers on Vert.x's reactive PostgreSQL client). Every route answers on 127.0.0.1:PORT:
# /plaintext /json /db /queries?queries=N /fortunes /updates?queries=N /cached-queries?count=N.
# The database is started first when it does not answer (bench/tfb/pg.sh start; hello_world,
# benchmarkdbuser/benchmarkdbpass on 127.0.0.1, port TFB_DB_PORT [5432]) and left running.
#
# Environment: TFB_DB_PORT [5432]; JAVA [java on PATH; for vt, a JDK 21+ from /usr/lib/jvm
# when PATH's is older]; JAVA_OPTS [-Xms1g -Xmx1g], more JVM flags; TFB_CP, a classpath to use
# instead of lein's for the :tfb profile (.ci/classpath +tfb, kept in target/tfb/ until
# project.clj changes).
set -euo pipefail
cd "$(dirname "$0")/../.."

die() { echo "serve.sh: $*" >&2; exit 1; }

MODE="${1:-}"
PORT="${2:-}"
case "$MODE" in sync|vt|nb) ;; *) die "usage: bash bench/tfb/serve.sh sync|vt|nb PORT" ;; esac
[[ "$PORT" =~ ^[0-9]+$ ]] || die "usage: bash bench/tfb/serve.sh sync|vt|nb PORT"

bash bench/tfb/pg.sh start

java_feature() {
  "$1" -XshowSettings:properties -version 2>&1 | sed -n 's/^ *java\.specification\.version = //p'
}

JAVA="${JAVA:-java}"
if [ "$MODE" = vt ] && [ "$(java_feature "$JAVA")" -lt 21 ]; then
  newer=$(ls -d /usr/lib/jvm/*/bin/java 2>/dev/null | while read -r j; do
            [ "$(java_feature "$j")" -ge 21 ] 2>/dev/null && echo "$j"; done | head -n 1)
  [ -n "$newer" ] || die "vt needs Java 21 or later; $JAVA is older and /usr/lib/jvm has none"
  JAVA="$newer"
fi

if [ -z "${TFB_CP:-}" ]; then
  mkdir -p target/tfb
  # the kernel's classes, compiled when a Java source is newer than the last compile
  if [ ! -f target/tfb/javac.stamp ] \
     || [ -n "$(find java-src project.clj -newer target/tfb/javac.stamp -print -quit)" ]; then
    lein with-profile +tfb javac >target/tfb/javac.log 2>&1 \
      || { cat target/tfb/javac.log >&2; die "lein javac failed"; }
    touch target/tfb/javac.stamp
  fi
  if [ ! -s target/tfb/cp ] || [ project.clj -nt target/tfb/cp ]; then
    bash .ci/classpath +tfb 2>target/tfb/classpath.log >target/tfb/cp.new \
      || { cat target/tfb/classpath.log >&2; die "lein classpath failed"; }
    mv target/tfb/cp.new target/tfb/cp
  fi
  TFB_CP=$(cat target/tfb/cp)
fi

# shellcheck disable=SC2086
exec "$JAVA" ${JAVA_OPTS:--Xms1g -Xmx1g} -cp "$TFB_CP" \
  clojure.main -m donkey.tfb.app "$MODE" "$PORT"
