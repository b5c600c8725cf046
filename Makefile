# donkey: the two commands of the README, and the heavier runs kept out of `make test`.
SHELL := /bin/bash
LEIN := lein

.PHONY: test run bench soak deps clean

# Installs what is missing (Debian packages, Maven artifacts), runs every test, and prints
# `tests: N passed, N failed` as its last line.
test: deps
	$(LEIN) javac
	java -Dfile.encoding=UTF-8 -XX:-OmitStackTraceInFastThrow -cp "$$(bash .ci/classpath)" \
	  clojure.main -m donkey.test-runner

run: deps
	$(LEIN) javac
	java -Dfile.encoding=UTF-8 -cp "$$(bash .ci/classpath)" clojure.main -m donkey.example

deps:
	@bash .ci/install-deps

clean:
	rm -rf target
