# donkey: the two commands of the README, and the heavier runs kept out of `make test`.
SHELL := /bin/bash
LEIN := lein

.PHONY: test run bench soak conformance deps clean

# Installs what is missing (Debian packages, Maven artifacts), runs every test, and prints
# `tests: N passed, N failed` as its last line.
test: deps
	$(LEIN) javac
	java -Dfile.encoding=UTF-8 -XX:-OmitStackTraceInFastThrow -cp "$$(bash .ci/classpath)" \
	  clojure.main -m donkey.test-runner

run: deps
	$(LEIN) javac
	java -Dfile.encoding=UTF-8 -cp "$$(bash .ci/classpath)" clojure.main -m donkey.example

# TechEmpower-style bench (bench/run.sh, then bench/latency.sh): tables of start-up time,
# warm-up and steady-state req/s in three request shapes, as ratios to raw Vert.x, then
# fixed-rate latencies (LAT_RUNS interleaved runs per server); then the
# protocols (bench/protocols.sh): TLS JSON, TLS handshakes, h2c and h2 against raw Vert.x with
# the same settings; then WebSockets (bench/websocket.sh): echo messages/s, a broadcast to
# 10,000 sockets and memory per idle socket, against raw Vert.x's WebSocket server; between
# them, gzip-compressed JSON (bench/compression.sh) against raw Vert.x's compression, static
# files (bench/files.sh) against raw Vert.x's sendFile and the cost of :metrics
# (bench/metrics.sh: metrics on against off); start-up, idle memory and memory per idle
# keep-alive connection (bench/footprint.sh); last, TechEmpower's database tests on PostgreSQL
# (bench/tfb/bench.sh) against raw Vert.x's reactive client and ring-jetty. About four
# hours; RUNS=1 DURATION=3 WARMUP=3 WARM_WINDOWS=3 STEADY_WINDOW=2 STEADY_MAX=4 SHAPE_MAX=4 HS_WARMUP=3
# LAT_RUNS=1 LAT_PRIME=1 FANOUT_RUNS=1 WS_FANOUT=1000 FP_CONNECTIONS=1000 for a smoke run. Fails when any request or
# message failed.
bench: deps
	@rc=0; bash bench/run.sh || rc=1; SKIP_BUILD=1 bash bench/latency.sh || rc=1; \
	  SKIP_BUILD=1 bash bench/protocols.sh || rc=1; SKIP_BUILD=1 bash bench/compression.sh || rc=1; \
	  SKIP_BUILD=1 bash bench/files.sh || rc=1; SKIP_BUILD=1 bash bench/metrics.sh || rc=1; \
	  SKIP_BUILD=1 bash bench/websocket.sh || rc=1; SKIP_BUILD=1 bash bench/footprint.sh || rc=1; \
	  bash bench/tfb/bench.sh || rc=1; \
	  exit $$rc

# Soak (bench/soak.sh): SOAK_SECONDS (300) at SOAK_RATE (1000) req/s on 500 keep-alive
# connections, mixing small, 1 MiB, failing (500) and upload requests; prints counts, errors by
# kind, p50/p99 and the server's RSS every 10 s. Fails on any lost request or memory growth.
soak: deps
	bash bench/soak.sh

# Autobahn|Testsuite's fuzzing client against a WebSocket echo server, sync and async handlers
# (conformance/websocket.sh): a table of OK / NON-STRICT / INFORMATIONAL / FAILED /
# UNIMPLEMENTED cases per handler mode; fails when a case failed. Installs the client (pinned,
# on Python 2.7) into target/conformance. CASES='1.*,6.*' runs a subset.
# Then h2spec over h2c and h2 (TLS), sync and async handlers (conformance/h2spec.sh): passed /
# failed / skipped per run and each failed case; fails when a case failed. Builds h2spec
# (pinned, with Go) into target/conformance; COMPARE=1 adds raw Vert.x, SPECS='http2/6.5' a subset.
conformance: deps
	@rc=0; bash conformance/websocket.sh || rc=1; bash conformance/h2spec.sh || rc=1; exit $$rc

deps:
	@bash .ci/install-deps

clean:
	rm -rf target
