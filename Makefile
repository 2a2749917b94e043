# A thin layer over cargo-pgrx. PG_CONFIG picks the PostgreSQL to build
# for (install, demo, benchmarks: Debian's 15 by default); `make test` runs
# every tier on each version of PG_VERSIONS.
# PG18_PREFIX is where `make setup` builds PostgreSQL 18 (CI builds it anew
# into a throwaway prefix on every run).
# (bash: pipefail where a tier's output is piped)
SHELL := /bin/bash
PG15_CONFIG ?= /usr/lib/postgresql/15/bin/pg_config
PG18_PREFIX ?= /usr/local/pgsql-18
PG18_CONFIG ?= $(PG18_PREFIX)/bin/pg_config
PG_CONFIG ?= $(PG15_CONFIG)
PG_VERSIONS ?= 15 18
export PG_CONFIG PG18_PREFIX
# (target/python: the tests' and the demo's Python packages, scripts/setup.sh)
export PATH := $(CURDIR)/target/python/bin:$(HOME)/.cargo/bin:$(PATH)

PGVER := $(shell $(PG_CONFIG) --version 2>/dev/null | sed -E 's/^PostgreSQL ([0-9]+).*/\1/')
TEST_PGDATA ?= /tmp/queue-test-pgdata-$(PGVER)
# where `make old-release` puts the released 0.1.0's library (upgrade tests;
# 0.2.0's is beside it)
OLD_LIBDIR := $(CURDIR)/target/old-release/0.1.0/lib

.PHONY: setup install install-debug test test-version unit regress isolation client web \
        old-release pg-upgrade demo clean test-times

## setup: system packages, PostgreSQL 18 built from source, cargo-pgrx and its init (each skipped when done)
setup:
	scripts/setup.sh

# The installed library is moved aside before the new one is written: a
# server that has it loaded keeps its copy (overwritten in place, it would
# die of SIGBUS).
SET_LIBRARY_ASIDE = lib=$$($(PG_CONFIG) --pkglibdir)/queue.so; \
	if [ -f "$$lib" ]; then mv -f "$$lib" "$$lib.old"; fi

## install: build (release) and install the extension into PG_CONFIG's PostgreSQL
install: setup
	@$(SET_LIBRARY_ASIDE)
	cargo pgrx install --release --pg-config $(PG_CONFIG)

install-debug: setup
	@$(SET_LIBRARY_ASIDE)
	cargo pgrx install --pg-config $(PG_CONFIG)

# Where make test keeps what its time went to (scripts/test-times.py):
# the clusters' starts and cargo-nextest's JUnit reports.
TIMES := $(CURDIR)/target/test-times
export QUEUE_TEST_TIMINGS := $(TIMES)/clusters.tsv

## test: every test tier on every version of PG_VERSIONS (PG_VERSIONS=15 for one), both at once, then pg_upgrade from 15 to 18; ends with the slowest tests and cluster starts
test: setup
	@rm -rf $(TIMES) && mkdir -p $(TIMES)
	@$(MAKE) --no-print-directory -j2 $(addprefix test-pg,$(PG_VERSIONS))
	@case " $(PG_VERSIONS) " in *" 15 "*) case " $(PG_VERSIONS) " in *" 18 "*) \
	    $(MAKE) --no-print-directory pg-upgrade ;; esac ;; esac
	@$(MAKE) --no-print-directory test-times

# One version's tiers, one after another, each line of its output marked
# with the version (make test runs the versions side by side).
test-pg%:
	@echo "== PostgreSQL $*: unit and #[pg_test], golden SQL, isolation specs, client and dashboard tests"
	@set -o pipefail; $(MAKE) --no-print-directory test-version \
	    PG_CONFIG=$$($(MAKE) -s pg-config-of V=$*) 2>&1 | sed -u 's/^/[pg$*] /'

## test-times: the ten slowest tests and cluster starts of the last make test
test-times:
	@scripts/test-times.py $(QUEUE_TEST_TIMINGS) $(wildcard $(TIMES)/*.xml)

pg-config-of:
	@case "$(V)" in 15) echo $(PG15_CONFIG) ;; 18) echo $(PG18_CONFIG) ;; \
	    *) echo "PG_VERSIONS: 15 and 18 are supported, not $(V)" >&2; exit 1 ;; esac

test-version: unit regress isolation client

unit: setup
	@if [ "$$(id -u)" -eq 0 ]; then install -d -o postgres -g postgres $(TEST_PGDATA); fi
	cargo pgrx test pg$(PGVER) --runas postgres --pgdata $(TEST_PGDATA)

# (each version's temporary instances on ports of their own: make test runs
# the versions side by side)
regress: install-debug
	QUEUE_REGRESS_PORT=54$(PGVER)1 scripts/regress.sh

isolation: install-debug
	QUEUE_ISOLATION_PORT=54$(PGVER)2 scripts/isolation.sh

# The client tests and the dashboard's (server and headless Chromium:
# web/tests, screenshots in target/queue-web-screenshots/), side by side
# (cargo-nextest, .config/nextest.toml, a profile per version); one: make
# client T=name (a test name or part of one). The updates from the
# releases run on 15, where the releases are built.
CLIENT_FILTER := not binary(pg_upgrade) $(if $(filter 15,$(PGVER)),,and not test(/^an_update_from_0_/))
client: install-debug
	@if [ "$(PGVER)" = 15 ]; then $(MAKE) --no-print-directory old-release; fi
	@mkdir -p $(TIMES)
	QUEUE_OLD_LIBDIR=$(OLD_LIBDIR) cargo nextest run --profile pg$(PGVER) \
	    -p queue-client-tests -p queue-web --no-fail-fast -E '$(CLIENT_FILTER)' $(T); rc=$$?; \
	    cp target/nextest/pg$(PGVER)/junit.xml $(TIMES)/client-pg$(PGVER).xml 2>/dev/null; exit $$rc

# The dashboard's tests alone.
web: install-debug
	cargo nextest run --profile pg$(PGVER) -p queue-web --no-fail-fast $(T)

## old-release: the released 0.1.0 and 0.2.0 built from their commits (for the upgrade tests; once)
old-release: setup
	PG_CONFIG=$(PG15_CONFIG) scripts/old-release.sh

## pg-upgrade: pg_upgrade of a 15 cluster with queues to 18 (the extension installed into both)
pg-upgrade: setup
	$(MAKE) --no-print-directory install-debug PG_CONFIG=$(PG15_CONFIG)
	$(MAKE) --no-print-directory install-debug PG_CONFIG=$(PG18_CONFIG)
	QUEUE_PG15_CONFIG=$(PG15_CONFIG) QUEUE_PG18_CONFIG=$(PG18_CONFIG) \
	    cargo nextest run --profile upgrade -p queue-client-tests --test pg_upgrade; rc=$$?; \
	    mkdir -p $(TIMES); cp target/nextest/upgrade/junit.xml $(TIMES)/pg-upgrade.xml 2>/dev/null; \
	    exit $$rc

## demo: install, start a throwaway cluster, show a queue at work and the dashboard (queue-web) beside it for a few seconds, stop it
demo: install
	cargo build -p queue-web
	scripts/demo.sh

clean:
	cargo clean
	rm -rf pg_test/results pg_test/regression.diffs

## bench: queue against pgmq and the PostgreSQL ceiling, medians of 5 rounds of 10 s (about 25 min), then bench-backlog, bench-webhooks and bench-workflows; writes BENCHMARKS.md
## soak: 10 minutes of steady load per side, the last 5 with a snapshot held, at 2,000 jobs/s (2 consumers, nothing kept) and at half of the peak (about 45 min); bench/soak-2000.png, bench/soak.png
## bench-smoke: the benchmark with tiny settings (well under a minute), only to show that it still works
.PHONY: bench soak bench-smoke
bench: install
	cargo build -p pgmq-install
	bench/compare.sh
	bench/backlog.sh
	cargo build --release -p queue-bench-webhooks
	bench/webhooks.sh
	bench/workflows.sh
soak: install
	cargo build -p pgmq-install
	SOAK_RATE=2000 SOAK_CONSUMERS=2 SOAK_RETENTION=0 SOAK_TAG=soak-2000 SOAK_PLOT=bench/soak-2000.png bench/soak.sh
	bench/soak.sh
bench-smoke: install
	cargo build -p pgmq-install
	BENCH_ROUNDS=1 BENCH_SECS=1 BENCH_FILL=20000 BENCH_DRAIN_JOBS=2000 BENCH_IDLE_CPU_SECS=2 BENCH_DOC= \
	    BENCH_DIR=/tmp/qbench/smoke BENCH_PORT=54419 bench/compare.sh

## bench-backlog: claim + complete of 100 from a backlog of 10,000, 1,000,000 and 10,000,000 due jobs, queue against pgmq, and from an ordered queue of 10 groups (about 20 minutes); writes BENCHMARKS.md
.PHONY: bench-backlog
bench-backlog: install
	cargo build -p pgmq-install
	bench/backlog.sh

## bench-webhooks: webhook delivery to a local receiver against its own ceiling and the SQL-sender drain, and the idle latency (a few minutes); writes BENCHMARKS.md
.PHONY: bench-webhooks
bench-webhooks: install
	cargo build --release -p queue-bench-webhooks
	bench/webhooks.sh

## bench-workflows: job results and queue_await, dependencies (chain, diamonds, fan-in, fan-out), pg-boss's flows beside them, and jobs without parents against the 0.3.0 release (BENCH_BASELINE), each build in a copy of PostgreSQL of its own under /tmp/qbench-pg (about 20 min); writes BENCHMARKS.md
## bench-workflows-smoke: the same with tiny settings (a few minutes), only to show that it still runs
.PHONY: bench-workflows bench-workflows-smoke
bench-workflows: setup
	bench/workflows.sh
bench-workflows-smoke: setup
	BENCH_ROUNDS=1 BENCH_SECS=1 BENCH_TRIPS=20 BENCH_AWAITERS=50 BENCH_AWAIT_ROUNDS=1 BENCH_DRAIN_JOBS=20000 \
	    BENCH_CHAIN_JOBS=3 BENCH_FANIN=400 BENCH_FANOUT=400 BENCH_DOC= \
	    BENCH_DIR=/tmp/qbench/workflows-smoke BENCH_PORT=54530 bench/workflows.sh

## bench-tenants: push delivery across 60, then 500 tenant databases on the default 4 worker slots: bursts, steady load, after idle, the launcher's idle CPU, schedules' lag (about 20 min; each phase waits at most 300 s for its deliveries); writes BENCHMARKS.md
## bench-tenants-smoke: the same with 6 databases and short phases (about a minute), only to show that it still runs
.PHONY: bench-tenants bench-tenants-smoke
bench-tenants: install
	cargo build --release -p queue-bench-tenants
	bench/tenants.sh
bench-tenants-smoke: install
	cargo build --release -p queue-bench-tenants
	BENCH_TENANTS=6 BENCH_STEADY_SECS=5 BENCH_SMOKE=1 BENCH_DOC= BENCH_SCHEDULE_PERIOD=2 \
	    BENCH_SCHEDULE_TICKS=3 \
	    BENCH_DIR=/tmp/qbench/tenants-smoke BENCH_PORT=54461 bench/tenants.sh

## bench-web: queue-web's cluster page for 60 tenant databases of 100,000 jobs each (median and slowest of 20 loads), its jobs pages and dead letters at 100,000 jobs, and GET /metrics over 60 databases (about 12 min; the figures go into BENCHMARKS.md by hand)
.PHONY: bench-web
bench-web: install
	cargo build --release -p queue-web
	web/bench/cluster-page.sh
	web/bench/jobs-pages.sh
	web/bench/metrics-scrape.sh

## test-ha: automatic failover with Patroni: 3 nodes (Raft DCS, synchronous mode), the leader killed under load; nothing acknowledged lost, no effect repeated, the old leader rejoins as a replica (about a minute)
.PHONY: test-ha
test-ha: install-debug
	python3 tests/ha/failover.py
