#!/usr/bin/env bash
# h2spec (HTTP/2 conformance: RFC 7540 and RFC 7541's cases) against donkey: starts the server
# of h2_server.clj twice (a sync handler and an async one), each with cleartext h2c on its
# plain listener and h2 (ALPN) on its TLS one, and RawH2Server.java, the same answers on Vert.x
# used directly with the same settings; runs every case over both transports against each,
# prints a table per run and every failed case, marking a donkey failure that raw Vert.x shares
# (the behaviour of Vert.x and Netty underneath, which donkey does not change). Exits non-zero
# when donkey failed a case that raw Vert.x passed, or a run did not finish; with STRICT=1,
# when any case failed.
#
#   bash conformance/h2spec.sh                     (or `make conformance`)
#   SPECS='http2/6.5 hpack' bash conformance/h2spec.sh   some sections only (h2spec's ids)
#   COMPARE=0 bash conformance/h2spec.sh           donkey only; then any failure fails the run
#   SERVERS='raw-vertx' bash conformance/h2spec.sh just those (donkey-sync donkey-async raw-vertx)
#
# Installs h2spec into target/conformance/h2spec on its first run (see install_h2spec). The
# TLS key is made at run time by openssl; h2spec does not verify it (-k). Each run's JUnit
# report and log, and each server's log, are left in target/conformance/h2spec-runs/.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
work=$root/target/conformance
runs=$work/h2spec-runs
mkdir -p "$work"

SPECS=${SPECS:-}
COMPARE=${COMPARE:-1}
STRICT=${STRICT:-0}
SERVERS=${SERVERS:-donkey-sync donkey-async$([ "$COMPARE" = 1 ] && echo " raw-vertx")}
# h2spec's wait for each expected frame; its default of 2 s is short for a JVM sharing two
# cores with other work, where a late frame then reads as a failure
H2SPEC_TIMEOUT=${H2SPEC_TIMEOUT:-5}
# bounds one h2spec run that hangs (145 cases; a run takes seconds when all is well)
RUN_TIMEOUT=${RUN_TIMEOUT:-900}
H2SPEC_VERSION=2.2.1

log() { echo "conformance: $*" >&2; }

find_go() {
  local c
  for c in "$(command -v go || true)" /usr/local/go/bin/go /usr/lib/go/bin/go; do
    if [ -n "$c" ] && [ -x "$c" ]; then echo "$c"; return 0; fi
  done
  log "installing Go (Debian's golang-go) to build h2spec"
  local sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -q >/dev/null
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q golang-go >/dev/null
  command -v go
}

# Builds target/conformance/h2spec/h2spec from conformance/h2spec/ (go.mod and go.sum pin h2spec
# and every dependency). Redone only when those change (their copies are the stamp).
install_h2spec() {
  local dir=$work/h2spec src=$root/conformance/h2spec go
  if [ -x "$dir/h2spec" ] && cmp -s "$src/go.mod" "$dir/go.mod" && cmp -s "$src/go.sum" "$dir/go.sum"; then
    return 0
  fi
  go=$(find_go)
  log "building h2spec $H2SPEC_VERSION into $dir ($("$go" version))"
  rm -rf "$dir"
  mkdir -p "$dir"
  # -mod=readonly: go.sum must already hold every module, so nothing is resolved anew;
  # -buildvcs=false: the binary need not carry donkey's git state (nor need git);
  # GOTOOLCHAIN=local: build with the Go at hand rather than fetch the one go.mod names
  (cd "$src" && GOFLAGS="-mod=readonly -buildvcs=false" GOTOOLCHAIN=local "$go" build -trimpath \
      -ldflags "-X main.VERSION=$H2SPEC_VERSION -X main.COMMIT=v$H2SPEC_VERSION" \
      -o "$dir/h2spec" github.com/summerwind/h2spec/cmd/h2spec)
  cp "$src/go.mod" "$src/go.sum" "$dir/"
  "$dir/h2spec" --version >/dev/null
}

pids=()
cleanup() {
  local p
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
}
trap cleanup EXIT

# Starts SERVER on ports the OS picks and sets h2c_port and h2_port once it listens (its
# first line of output says so). Not run in $(...): pids must keep the PID.
start_server() {
  local server=$1 out=$runs/server-$1.log
  h2c_port="" h2_port=""
  : >"$out"
  case "$server" in
    donkey-sync|donkey-async)
      java -Dfile.encoding=UTF-8 -cp "$classpath" clojure.main "$root/conformance/h2_server.clj" \
        "${server#donkey-}" "$tls/cert.pem" "$tls/key.pem" >"$out" 2>&1 & ;;
    raw-vertx)
      java -Dfile.encoding=UTF-8 -cp "$classpath" "$root/conformance/RawH2Server.java" \
        "$tls/cert.pem" "$tls/key.pem" >"$out" 2>&1 & ;;
    *) log "unknown server $server (donkey-sync, donkey-async, raw-vertx)"; return 1 ;;
  esac
  pids+=($!)
  local line
  for _ in $(seq 1 240); do
    line=$(sed -n 's/^h2 server .* listening on h2c port \([0-9]*\) and h2 port \([0-9]*\)$/\1 \2/p' "$out")
    if [ -n "$line" ]; then
      read -r h2c_port h2_port <<<"$line"
      return 0
    fi
    if ! kill -0 "${pids[-1]}" 2>/dev/null; then break; fi
    sleep 0.5
  done
  log "$server did not start:"
  cat "$out" >&2
  return 1
}

install_h2spec
bash .ci/install-deps
command -v openssl >/dev/null 2>&1 || { log "openssl is needed for the TLS key"; exit 1; }
lein javac >/dev/null
classpath=$(bash .ci/classpath)
rm -rf "$runs"
mkdir -p "$runs"

# A throwaway RSA key and self-signed certificate for the TLS listeners (PKCS#8, as :ssl-key
# reads it); never kept in the repository.
tls=$runs/tls
mkdir -p "$tls"
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=localhost \
  -addext subjectAltName=DNS:localhost,IP:127.0.0.1 \
  -keyout "$tls/key.pem" -out "$tls/cert.pem" >"$tls/openssl.log" 2>&1 \
  || { cat "$tls/openssl.log" >&2; exit 1; }

# shellcheck disable=SC2206  # lists of words
specs=($SPECS)
rc=0
for server in $SERVERS; do
  if ! start_server "$server"; then rc=1; continue; fi
  log "$server: h2c on $h2c_port, h2 on $h2_port"
  for transport in h2c tls; do
    name=$server-$transport
    flags=(-h 127.0.0.1 -o "$H2SPEC_TIMEOUT" -j "$runs/$name.xml")
    if [ "$transport" = tls ]; then flags+=(-p "$h2_port" -t -k); else flags+=(-p "$h2c_port"); fi
    log "running h2spec on $name (log: $runs/$name.log)"
    # h2spec exits 1 when a case failed; the JUnit report says which, and its absence that
    # the run did not finish (h2spec stops at an error of its own, such as a refused connection)
    timeout "$RUN_TIMEOUT" "$work/h2spec/h2spec" "${flags[@]}" "${specs[@]}" >"$runs/$name.log" 2>&1 || true
  done
  cleanup
  pids=()
done

# One row per (server, transport); then each case that failed, with h2spec's id
# (section/number), its description and h2spec's expected and actual results, marked when
# raw Vert.x failed it too. Fails when a donkey case failed or a run left no report.
python3 - "$runs" "$SERVERS" "$STRICT" <<'EOF' || rc=1
import os, re, sys
import xml.etree.ElementTree as ET
runs, servers, strict = sys.argv[1], sys.argv[2].split(), sys.argv[3] == "1"
results, missing = {}, []
for server in servers:
    for transport in ("h2c", "tls"):
        name = "%s-%s" % (server, transport)
        path = os.path.join(runs, name + ".xml")
        if not os.path.exists(path):
            missing.append(name)
            continue
        cases = {}
        for suite in ET.parse(path).getroot().iter("testsuite"):
            for i, tc in enumerate(suite.iter("testcase"), 1):
                cid = "%s/%d" % (tc.get("package"), i)
                bad = tc.find("failure")
                if bad is None:
                    bad = tc.find("error")
                if tc.find("skipped") is not None:
                    verdict = "skipped"
                elif bad is not None:
                    verdict = "failed"
                else:
                    verdict = "passed"
                reason = " ".join((bad.text or "").split()) if bad is not None else ""
                cases[cid] = (verdict, tc.get("classname"), reason)
        # h2spec's own account of each failure (the requirement, what it expected, what it
        # got) is in its log, under "Failures:"; the JUnit report flattens it
        tops = {"Generic": "generic", "Hypertext": "http2", "HPACK": "hpack"}
        log = open(os.path.join(runs, name + ".log"), errors="replace").read().split("\n")
        top = section = cid = None
        field = None
        for line in log[next((i for i, l in enumerate(log) if l.startswith("Failures:")), len(log)):]:
            m = re.match(r"^(\S+)", line)
            if m and m.group(1) in tops:
                top = tops[m.group(1)]
                continue
            m = re.match(r"^\s+(\d+(?:\.\d+)*)\. ", line)
            if m:
                section = m.group(1)
                continue
            m = re.match(r"^\s+\u00d7 (\d+): ", line)
            if m:
                cid = "%s/%s/%s" % (top, section, m.group(1))
                if cid in cases:
                    cases[cid] = (cases[cid][0], cases[cid][1], "")
                continue
            text = line.strip()
            if line.startswith("Finished in"):
                break
            if not text:
                cid = field = None
            if cid not in cases:
                continue
            if text.startswith("-> "):
                part = text[3:]
            elif text.startswith("Expected: ") or text.startswith("Actual: "):
                field = text.split(":")[0].lower()
                part = "| %s: %s" % (field, text.split(": ", 1)[1])
            elif text and field:
                part = "/ " + text
            else:
                continue
            v, desc, reason = cases[cid]
            cases[cid] = (v, desc, (reason + " " + part).strip())
        results[name] = cases
def key(cid):
    return [int(p) if p.isdigit() else p for p in re.split(r"[/.]", cid)]
def raw_of(name):  # raw Vert.x's results over the same transport, if it ran
    return None if name.startswith("raw-vertx") else results.get("raw-vertx-" + name.rsplit("-", 1)[1])
print("%-22s %6s %7s %7s %8s %8s" % ("run", "cases", "passed", "failed", "skipped", "Vert.x"))
for name, cases in results.items():
    count = lambda v: sum(1 for c in cases.values() if c[0] == v)
    raw = raw_of(name)
    shared = "" if raw is None else str(sum(1 for cid, c in cases.items()
                                            if c[0] == "failed" and raw.get(cid, ("",))[0] == "failed"))
    print("%-22s %6d %7d %7d %8d %8s" % (name, len(cases), count("passed"), count("failed"),
                                        count("skipped"), shared))
for name in missing:
    print("%-22s  no report: the run did not finish (see %s.log)" % (name, os.path.join(runs, name)))
print("(Vert.x: of the failed cases, those raw Vert.x fails too over the same transport)")
donkey_own, any_failed = 0, 0
for name, cases in results.items():
    bad = sorted((cid for cid, c in cases.items() if c[0] == "failed"), key=key)
    any_failed += len(bad)
    if not bad:
        continue
    raw = raw_of(name)
    print("\n%s: %d failed" % (name, len(bad)))
    for cid in bad:
        _, desc, reason = cases[cid]
        also = ""
        if raw is not None:
            shared = raw.get(cid, ("",))[0] == "failed"
            also = " [raw Vert.x too]" if shared else " [raw Vert.x passes]"
            donkey_own += 0 if shared else 1
        elif not name.startswith("raw-vertx"):
            donkey_own += 1
        print("  %-16s %s%s\n  %16s %s" % (cid, desc, also, "", reason))
print("\nreports: %s/*.xml, logs: %s/*.log" % (runs, runs))
if missing:
    print("conformance: %d run(s) did not finish" % len(missing))
    sys.exit(1)
if donkey_own or (strict and any_failed):
    print("conformance: %d case(s) failed%s" % (
        any_failed if strict else donkey_own,
        "" if strict else " that raw Vert.x passes (or was not run to compare)"))
    sys.exit(1)
EOF
exit "$rc"
