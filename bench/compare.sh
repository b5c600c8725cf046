#!/usr/bin/env bash
# compare.sh REV [REV2]: one server variant built from the work tree (or from commit REV2) against
# the same variant built from commit REV, on this machine, interleaved, with the start-up /
# warm-up / steady-state measurement of bench/run.sh (bench/lib.sh, measure_jvm).
#
# Builds: REV (and REV2) are checked out as detached git worktrees under
# target/compare/<short sha>/ and built there as bench/lib.sh's build() builds the work tree
# (`lein with-profile +bench do javac, compile`, then the classpath through
# bench/classpath.py), so each runs its own kernel and its own bench app; a worktree with its
# classpath and kernel classes is reused as it is (delete target/compare/<short sha> to
# rebuild). The work tree is built as run.sh builds it (SKIP_BUILD=1 reuses
# target/bench/bench.cp). raw-vertx, from the work tree's build,
# runs in every round as a control: it is the same code each round, so the spread of its
# per-round figures over its own median (1.00 by construction) shows the noise of one figure
# on this machine at that time; a ratio of two such figures spreads about 1.4 times as much.
#
# Each round runs, for each test, a fresh JVM per build: raw-vertx, then the two builds of
# VARIANT, REV first in odd rounds and second in even ones. Every JVM is measured as in run.sh:
# start-up to the first 200, the endpoint check, WARM_WINDOWS one-second windows,
# steady-seeking windows, then SETTLE seconds and MEASURE_WINDOWS x DURATION seconds measured
# per shape of SHAPES, their order rotating each round. With ALTERNATE=1 (the default) the
# round's three JVMs of a test stay alive and their measured windows alternate, as in run.sh,
# and the JVMs' order rotates each round (raw-vertx first in rounds 1 and 4, last in 2 and 5,
# second in 3).
#
# The table gives, per figure (start-up, the first 5 and 10 s of warm-up, time to 90% of the
# steady state, the steady state per shape) and test: the median of raw-vertx, of REV and of
# the work tree (or REV2), the ratio of the last two medians (new / REV), each round's own
# new / REV ratio and their median (with a 90% interval from resampling the rounds), REV and
# new each over raw-vertx (ratios of medians), and each round's raw-vertx figure over
# raw-vertx's median; then the steady state's measured
# windows in pairs (each over the window of the same number in the same round): the median,
# and a 90% interval for it from resampling whole rounds (a round's windows share its JVMs).
# A ratio above 1 is more req/s for throughput figures and more seconds (slower) for start-up
# and time to 90%.
# JSON: JSON_MODE auto probes both builds and uses the kernel codec only when both have it.
# Exits non-zero when a request failed in any window, a server did not start or answered
# wrongly, or a bench app printed a reflection warning.
#
# Environment (defaults in brackets), beside run.sh's (RUNS [5], MEASURE_WINDOWS, DURATION,
# ALTERNATE, WARM_WINDOWS, STEADY_WINDOW, STEADY_TOL, STEADY_MAX, SETTLE, SHAPE_MAX, TESTS,
# CONNECTIONS, PIPELINE, JSON_MODE, PORT, JVM_OPTS, SKIP_BUILD, ...):
#   VARIANT [donkey-nb]  SHAPES ["minimal techempower"] (must include minimal)
# Quick smoke run:
#   RUNS=1 WARM_WINDOWS=3 STEADY_WINDOW=2 STEADY_MAX=4 DURATION=2 bash bench/compare.sh HEAD~1
# Output: the table on stdout and in target/bench/results/compare-<stamp>/table.md (copied to
# target/bench/results/latest-compare.md), every window in runs.tsv there.
set -euo pipefail
# a shape is measured in MEASURE_WINDOWS windows of DURATION seconds (bench/lib.sh)
DURATION="${DURATION:-5}"
# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

if [ $# -lt 1 ] || [ $# -gt 2 ]; then die "usage: bash bench/compare.sh REV [REV2]"; fi
VARIANT="${VARIANT:-donkey-nb}"
SHAPES="${SHAPES:-minimal techempower}"
check_measure_settings
[ "$VARIANT" != raw-vertx ] || die "VARIANT raw-vertx is the control; choose another"
available "$VARIANT" || die "$VARIANT: $(java_of "$VARIANT") not found"

# worktree REV: prints the directory of REV's worktree under target/compare, built
worktree() {
  local sha short dir
  sha="$(git rev-parse --verify --quiet "$1^{commit}")" || die "$1 is not a commit"
  short="$(git rev-parse --short "$sha")"
  dir="$ROOT/target/compare/$short"
  if [ -d "$dir" ] && [ "$(git -C "$dir" rev-parse HEAD 2>/dev/null)" != "$sha" ]; then
    die "$dir exists but is not a checkout of $sha; remove it"
  fi
  if [ ! -d "$dir" ]; then
    mkdir -p "$ROOT/target/compare"
    # --force: a worktree whose directory was deleted is still registered until
    # `git worktree prune`; this adds it again either way
    git worktree add --force --detach "$dir" "$sha" >&2 || die "git worktree add $dir $sha failed"
  fi
  # a tree without the compiled kernel (a build that failed half-way) is built again
  built "$dir" || build "$dir" >&2
  echo "$dir"
}

ensure_tools
ensure_built
CP_CONTROL="$CP"
old_dir="$(worktree "$1")"
OLD_SHA="$(git -C "$old_dir" rev-parse --short HEAD)"
OLD="$VARIANT@$OLD_SHA"
CP_OLD="$(cat "$old_dir/target/bench/bench.cp")"
if [ $# -eq 2 ]; then
  new_dir="$(worktree "$2")"
  NEW="$VARIANT@$(git -C "$new_dir" rev-parse --short HEAD)"
  CP_NEW="$(cat "$new_dir/target/bench/bench.cp")"
else
  NEW="$VARIANT@work"
  CP_NEW="$CP_CONTROL"
fi
[ "$OLD" != "$NEW" ] || die "REV and REV2 are the same commit"

STAMP="$(date -u +%Y%m%dT%H%M%SZ)"
LOGS="$RESULTS/compare-$STAMP"
mkdir -p "$LOGS"
RUNS_TSV="$LOGS/runs.tsv"

if [ "$JSON_MODE" = auto ]; then
  mode=kernel
  for build in old new; do
    if [ "$build" = old ]; then CP="$CP_OLD"; else CP="$CP_NEW"; fi
    mkdir -p "$LOGS/probe-$build"
    resolve_json_mode "$LOGS/probe-$build"
    [ "$JSON_MODE_RESOLVED" = kernel ] || mode=app
  done
  JSON_MODE=$mode
fi
resolve_json_mode "$LOGS"
pin_self  # after the builds and the probes, which use both CPUs

cp_of() {
  case "$1" in
    raw-vertx) echo "$CP_CONTROL" ;;
    "$OLD") echo "$CP_OLD" ;;
    "$NEW") echo "$CP_NEW" ;;
  esac
}

failed=0
tsv_header "$RUNS_TSV"
n_tests="$(wc -w <<<"$TESTS")"
total=$(( RUNS * 3 * n_tests ))
n=0
log "$RUNS rounds x (raw-vertx $OLD $NEW) x ($TESTS), a fresh JVM each: ${WARM_WINDOWS} x 1s warm-up," \
    "steady-seeking ${STEADY_WINDOW}s windows (agree within ${STEADY_TOL}%, at most ${STEADY_MAX}s)," \
    "then per shape ($SHAPES, the order rotating each round) ${SETTLE}s settle (other shapes: then ${STEADY_WINDOW}s windows until two agree, at most ${SHAPE_MAX}s) + ${MEASURE_WINDOWS} x ${DURATION}s measured (median)"
for round in $(seq 1 "$RUNS"); do
  if [ $((round % 2)) -eq 1 ]; then order=(raw-vertx "$OLD" "$NEW"); else order=(raw-vertx "$NEW" "$OLD"); fi
  if [ "$ALTERNATE" = 1 ]; then
    # the three JVMs share CPU 0 for minutes: each build takes each place (first started,
    # longest idle) in turn, so none of the figures rests on one place
    rotated "$round" "${order[@]}"
    order=("${ROTATED[@]}")
  fi
  for test in $TESTS; do
    if [ "$ALTERNATE" = 1 ]; then
      R_LABELS=("${order[@]}"); R_VARIANTS=(); R_CPS=()
      for label in "${order[@]}"; do R_VARIANTS+=("${label%%@*}"); R_CPS+=("$(cp_of "$label")"); done
      n=$((n + 3))
      log "[$n/$total] round $round: ${order[*]} $test, alive together"
      measure_round "$test" "$round" "$LOGS" "$RUNS_TSV" || failed=1
      continue
    fi
    for label in "${order[@]}"; do
      n=$((n + 1))
      log "[$n/$total] round $round: $label $test"
      CP="$(cp_of "$label")"
      measure_jvm "$label" "${label%%@*}" "$test" "$round" "$LOGS" "$RUNS_TSV" || failed=1
    done
  done
done

python3 "$ROOT/bench/warmup_tables.py" compare "$RUNS_TSV" "$LOGS/table.md" "$OLD" "$NEW" raw-vertx
{
  echo
  if [ "$ALTERNATE" = 1 ]; then
    order_text="the three JVMs of a test alive together, their measured windows alternating; the order rotating each round"
  else
    order_text="raw-vertx, then the two builds, alternating which goes first"
  fi
  echo "$NEW against $OLD, $RUNS rounds, interleaved ($order_text)," \
       "a fresh JVM per (build, test, round) on CPU $SERVER_CPU; JVM flags: -XX:ActiveProcessorCount=1 $JVM_OPTS"
  echo "warm-up: $WARM_WINDOWS x 1s windows from the first 200; steady-seeking: ${STEADY_WINDOW}s windows until two" \
       "agree within ${STEADY_TOL}% or ${STEADY_MAX}s; then per shape (the order rotating each round) ${SETTLE}s settle (other shapes: then settle windows until two agree, at most ${SHAPE_MAX}s) + ${MEASURE_WINDOWS} x ${DURATION}s measured (median)"
  echo "$CONNECTIONS connections; wrk -t$WRK_THREADS on CPU $LOAD_CPU; plaintext pipelined $PIPELINE deep," \
       "json not pipelined; donkey JSON: $JSON_MODE_RESOLVED; every window: $RUNS_TSV"
} | tee -a "$LOGS/table.md"
cp "$LOGS/table.md" "$RESULTS/latest-compare.md"

if [ "$failed" -ne 0 ]; then
  log "FAILED: some requests failed or a server misbehaved (logs in $LOGS)"
  exit 1
fi
