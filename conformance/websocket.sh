#!/usr/bin/env bash
# Autobahn|Testsuite's fuzzing client against donkey's WebSockets: starts the echo server of
# echo_server.clj twice (a sync handler and an async one), runs every case against both,
# prints a table per handler mode and exits non-zero when a case FAILED or did not run.
#
#   bash conformance/websocket.sh              (or `make conformance`)
#   CASES='1.*,6.*' bash conformance/websocket.sh     a subset, comma-separated patterns
#   EXCLUDE='12.*,13.*' bash conformance/websocket.sh  skip cases
#
# Installs wstest into target/conformance on its first run (see install_wstest). The HTML
# report is left in target/conformance/reports/index.html.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
work=$root/target/conformance
mkdir -p "$work"

CASES=${CASES:-*}
EXCLUDE=${EXCLUDE:-}
# The 12.x and 13.x cases take seconds each (about 25 minutes per handler mode); this bounds
# a run that hangs.
WSTEST_TIMEOUT=${WSTEST_TIMEOUT:-7200}
# virtualenv 20.22 dropped creating Python 2.7 environments; its wheels for pip, setuptools
# and wheel are bundled, so creating the environment downloads nothing.
VIRTUALENV_VERSION=20.21.1

log() { echo "conformance: $*" >&2; }

# The last autobahntestsuite (25.10.1) is Python 2.7 code on Twisted 19.10; no Python 3
# release exists. Debian 12 has no python2.7 and PyPI none to install, so take one that is
# on the machine: $PYTHON2, python2.7 on PATH, or pyenv's 2.7 build.
find_python2() {
  local c
  for c in "${PYTHON2:-}" "$(command -v python2.7 || true)" \
           "$(pyenv root 2>/dev/null || echo "$HOME/.pyenv")"/versions/2.7*/bin/python2.7; do
    if [ -n "$c" ] && [ -x "$c" ] && "$c" -c 'import sys, ssl, zlib; assert sys.version_info[:2] == (2, 7)' 2>/dev/null; then
      echo "$c"
      return 0
    fi
  done
  log "no Python 2.7 found (tried \$PYTHON2, python2.7 on PATH, pyenv's versions/2.7*);"
  log "Autobahn's wstest runs on Python 2.7 only: install one, or see conformance/README.md"
  log "for the Docker image"
  return 1
}

# Builds target/conformance/wstest, a Python 2.7 virtualenv with wstest-requirements.txt.
# Redone only when that file changes (its copy in the venv is the stamp).
install_wstest() {
  local venv=$work/wstest req=$root/conformance/wstest-requirements.txt
  if [ -x "$venv/bin/wstest" ] && cmp -s "$req" "$venv/requirements.txt"; then
    return 0
  fi
  local py2
  py2=$(find_python2)
  log "installing wstest into $venv (Python 2.7: $py2)"
  rm -rf "$venv" "$work/virtualenv"
  python3 -m venv "$work/virtualenv"
  "$work/virtualenv/bin/pip" install -q "virtualenv==$VIRTUALENV_VERSION"
  "$work/virtualenv/bin/virtualenv" -q --no-periodic-update -p "$py2" "$venv"
  # wsaccel, ujson, Twisted and autobahn build from source with the machine's gcc
  PIP_NO_PYTHON_VERSION_WARNING=1 "$venv/bin/pip" install -q -r "$req" 2>&1 \
    | grep -v -e '^DEPRECATION: Python 2.7' || true
  "$venv/bin/wstest" --autobahnversion >/dev/null
  cp "$req" "$venv/requirements.txt"
}

pids=()
cleanup() {
  local p
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
}
trap cleanup EXIT

# Starts the echo server in MODE on a port the OS picks and sets url to its ws:// URL once
# it listens (its first line of output says so). Not run in $(...): pids must keep the PID.
start_server() {
  local mode=$1 out=$work/server-$1.log
  url=""
  java -Dfile.encoding=UTF-8 -cp "$classpath" clojure.main "$root/conformance/echo_server.clj" \
    0 "$mode" >"$out" 2>&1 &
  pids+=($!)
  for _ in $(seq 1 240); do
    url=$(sed -n 's/^echo server .* listening on \(ws:[^ ]*\)$/\1/p' "$out")
    if [ -n "$url" ]; then return 0; fi
    if ! kill -0 "${pids[-1]}" 2>/dev/null; then break; fi
    sleep 0.5
  done
  log "the $mode echo server did not start:"
  cat "$out" >&2
  return 1
}

install_wstest
bash .ci/install-deps
lein javac >/dev/null
classpath=$(bash .ci/classpath)

start_server sync
sync_url=$url
start_server async
async_url=$url
log "sync handler at $sync_url, async handler at $async_url"

rm -rf "$work/reports"
python3 - "$work/fuzzingclient.json" "$sync_url" "$async_url" "$CASES" "$EXCLUDE" <<'EOF'
import json, sys
path, sync_url, async_url, cases, exclude = sys.argv[1:]
split = lambda s: [c.strip() for c in s.split(",") if c.strip()]
json.dump({"outdir": "./reports",
           "servers": [{"agent": "donkey-sync", "url": sync_url},
                       {"agent": "donkey-async", "url": async_url}],
           "cases": split(cases),
           "exclude-cases": split(exclude),
           "exclude-agent-cases": {}},
          open(path, "w"), indent=2)
EOF

log "running cases '$CASES'${EXCLUDE:+ except '$EXCLUDE'} (log: $work/wstest.log)"
rc=0
(cd "$work" && timeout "$WSTEST_TIMEOUT" wstest/bin/wstest -m fuzzingclient -s fuzzingclient.json) \
  >"$work/wstest.log" 2>&1 || rc=$?
cleanup
pids=()
if [ "$rc" -ne 0 ]; then
  log "wstest exited with $rc; the end of its log:"
  tail -20 "$work/wstest.log" >&2
  exit 1
fi

# One row per handler mode, counted as Autobahn's own report counts a case (its "behavior");
# the close handshake's verdicts are counted too, and each case that is not OK on both is
# listed with Autobahn's reason. Fails on a FAILED case (or one of a verdict not in the
# table, such as NO_CLOSE), or when a server ran fewer cases than the other (a run cut short).
python3 - "$work/reports" <<'EOF'
import collections, json, os, sys
reports = sys.argv[1]
index = json.load(open(os.path.join(reports, "index.json")))
cols = ["OK", "NON-STRICT", "INFORMATIONAL", "FAILED", "UNIMPLEMENTED"]
print("%-14s %6s " % ("agent", "cases") + " ".join("%13s" % c for c in cols) + "  other")
failed = []
counts = {}
for agent in sorted(index, reverse=True):
    cases = index[agent]
    c = collections.Counter(v["behavior"] for v in cases.values())
    other = sum(n for k, n in c.items() if k not in cols)
    counts[agent] = len(cases)
    print("%-14s %6d " % (agent, len(cases)) + " ".join("%13d" % c[k] for k in cols)
          + "  %5d" % other)
    closes = collections.Counter(v["behaviorClose"] for v in cases.values())
    print("%-14s close: %s" % ("", ", ".join("%s %d" % kv for kv in sorted(closes.items()))))
    key = lambda cid: [int(p) for p in cid.split(".")]
    for cid in sorted(cases, key=key):
        v = cases[cid]
        if v["behavior"] != "OK" or v["behaviorClose"] != "OK":
            detail = json.load(open(os.path.join(reports, v["reportfile"])))
            print("  %-8s %-14s close %-16s %s | %s" % (
                cid, v["behavior"], v["behaviorClose"], detail.get("result", ""),
                detail.get("resultClose", "")))
            if v["behavior"] not in ("OK", "NON-STRICT", "INFORMATIONAL", "UNIMPLEMENTED"):
                failed.append((agent, cid))
print("report: %s" % os.path.join(reports, "index.html"))
if len(set(counts.values())) != 1 or not counts or 0 in counts.values():
    print("conformance: the agents ran different numbers of cases: %s" % counts)
    sys.exit(1)
if failed:
    print("conformance: %d case(s) failed" % len(failed))
    sys.exit(1)
EOF
