# A thin layer over cargo-pgrx. PG_CONFIG picks the PostgreSQL to build for.
PG_CONFIG ?= /usr/lib/postgresql/15/bin/pg_config
export PG_CONFIG
export PATH := $(HOME)/.cargo/bin:$(PATH)

PGVER := $(shell $(PG_CONFIG) --version 2>/dev/null | sed -E 's/^PostgreSQL ([0-9]+).*/\1/')
TEST_PGDATA ?= /tmp/queue-test-pgdata

.PHONY: setup install install-debug test unit regress client demo clean

## setup: system packages, cargo-pgrx and its init (skipped when done)
setup:
	scripts/setup.sh

## install: build (release) and install the extension into PG_CONFIG's PostgreSQL
install: setup
	cargo pgrx install --release --pg-config $(PG_CONFIG)

install-debug: setup
	cargo pgrx install --pg-config $(PG_CONFIG)

## test: every test tier: unit and #[pg_test], golden SQL tests, client tests
test: unit regress client

unit: setup
	@if [ "$$(id -u)" -eq 0 ]; then install -d -o postgres -g postgres $(TEST_PGDATA); fi
	cargo pgrx test pg$(PGVER) --runas postgres --pgdata $(TEST_PGDATA)

regress: install-debug
	scripts/regress.sh

client: install-debug
	cargo test -p queue-client-tests -- --test-threads=1

## demo: install, start a throwaway cluster, show a queue at work, stop it
demo: install
	scripts/demo.sh

clean:
	cargo clean
	rm -rf pg_test/results pg_test/regression.diffs

## bench: queue against pgmq and the PostgreSQL ceiling, medians of 5 rounds of 10 s (about 25 min); writes BENCHMARKS.md
## soak: 10 minutes of steady load per side, the last 5 with a snapshot held (about 25 min); bench/soak.png
## bench-smoke: the benchmark with tiny settings (well under a minute), only to show that it still works
.PHONY: bench soak bench-smoke
bench: install
	cargo build -p pgmq-install
	bench/compare.sh
soak: install
	cargo build -p pgmq-install
	bench/soak.sh
bench-smoke: install
	cargo build -p pgmq-install
	BENCH_ROUNDS=1 BENCH_SECS=1 BENCH_FILL=20000 BENCH_DRAIN_JOBS=2000 BENCH_DOC= \
	    BENCH_DIR=/tmp/qbench/smoke BENCH_PORT=54419 bench/compare.sh
