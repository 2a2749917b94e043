#!/usr/bin/env bash
# `make bench-tenants`: push delivery across many tenant databases on few
# worker slots. For each N in BENCH_TENANTS ("60 500") a throwaway cluster
# of its own (the extension preloaded; PostgreSQL's and the extension's
# defaults, every queue.* setting included, with only max_connections raised
# to N + 200, since the benchmark keeps one connection per tenant database
# open), on which the binary bench/tenants (queue-bench-tenants) makes a
# template database with one queue and a plpgsql sender, N tenant databases
# copied from it, and measures the latency from commit to sender call in
# five phases: baseline (one database at a time), burst (every database at
# once), steady (a job per database every 5 s), the burst again after every
# worker exited idle, and the launcher's CPU with everything idle. See
# bench/tenants/src/main.rs for the phases.
#
# Prints a table per N and, unless BENCH_DOC is empty, writes the machine,
# the settings and the tables into BENCHMARKS.md: between its tenants-run
# markers, or as a new section at the end when the markers are not there
# yet. Raw output per N goes to bench/results/tenants-N.md, the server's log
# to bench/results/tenants-N-server.log. Needs `make install` and the
# release binary (`make bench-tenants` does both).
#
# Settings (environment): BENCH_TENANTS ("60 500"), BENCH_DOC (BENCHMARKS.md),
# BENCH_DIR (/tmp/qbench/tenants), BENCH_PORT (54460), BENCH_TENANTS_BIN
# (target/release/queue-bench-tenants), BENCH_SMOKE (1: queue.idle_exit = 2s
# and short waits, only to show that it runs); passed on to the binary:
# BENCH_QUALIFY, BENCH_STRATEGY, BENCH_BASELINE_JOBS, BENCH_DEADLINE_SECS,
# BENCH_STEADY_SECS, BENCH_STEADY_PERIOD, BENCH_STEADY_THREADS,
# BENCH_BURST_PER_THREAD, BENCH_SETTLE_SECS, BENCH_IDLE_WAIT_SECS,
# BENCH_IDLE_COST_SECS, BENCH_SCHEDULE_PERIOD, BENCH_SCHEDULE_TICKS.
. "$(dirname "$0")/common.sh"

TENANTS=${BENCH_TENANTS:-60 500}
DOC=${BENCH_DOC-BENCHMARKS.md}
SMOKE=${BENCH_SMOKE:-}
TENANTS_BIN=${BENCH_TENANTS_BIN:-target/release/queue-bench-tenants}
OUT=bench/results

[ -x "$TENANTS_BIN" ] || { echo "no $TENANTS_BIN: cargo build --release -p queue-bench-tenants" >&2; exit 1; }
if [ "$SMOKE" = 1 ]; then
    # workers leave after 2 s idle (set below), so the waits can be short
    export BENCH_SETTLE_SECS=${BENCH_SETTLE_SECS:-60} BENCH_IDLE_WAIT_SECS=${BENCH_IDLE_WAIT_SECS:-30}
    export BENCH_IDLE_COST_SECS=${BENCH_IDLE_COST_SECS:-5} BENCH_DEADLINE_SECS=${BENCH_DEADLINE_SECS:-60}
fi
mkdir -p "$OUT"

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
lib_sum=$(md5sum < "$LIB")
build=$(build_stamp)
started=$(date -u '+%Y-%m-%d %H:%M UTC')
declare -A took settings

for n in $TENANTS; do
    t0=$(date +%s)
    cluster_start "${BENCH_DIR:-/tmp/qbench/tenants}" "${BENCH_PORT:-54460}"
    # a restart setting: appended, then the server restarted
    echo "max_connections = $((n + 200))" >> "$DIR/data/postgresql.conf"
    if [ "$SMOKE" = 1 ]; then
        sql -c "ALTER SYSTEM SET queue.idle_exit = '2s'" > /dev/null
    fi
    scripts/cluster.sh stop "$DIR"
    scripts/cluster.sh start "$DIR" "$PORT"
    settings[$n]=$(sql -F ' = ' -c "SELECT name, current_setting(name) FROM pg_settings
        WHERE name LIKE 'queue.%' OR name IN ('max_connections', 'max_worker_processes', 'shared_buffers',
              'fsync', 'synchronous_commit', 'shared_preload_libraries') ORDER BY name" | paste -sd ';' | sed 's/;/; /g')
    pg_version=$(sql -c "SELECT version()" | sed 's/ on .*//')
    echo "== $n tenant databases (cluster $DIR, port $PORT)" >&2
    "$TENANTS_BIN" "$DIR" "$PORT" "$n" > "$OUT/tenants-$n.md"
    cp "$DIR/server.log" "$OUT/tenants-$n-server.log"
    scripts/cluster.sh stop "$DIR"
    took[$n]=$(( $(date +%s) - t0 ))
    echo "== $n databases: ${took[$n]} s" >&2
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

tables() {
    for n in $TENANTS; do
        cat "$OUT/tenants-$n.md"
        echo "- settings (SHOW): ${settings[$n]}"
        echo "- the run took ${took[$n]} s"
        echo
    done
}
machine() {
    echo "- run: $started, N = $(echo $TENANTS | sed 's/ /, then /g') databases, each N on a fresh cluster"
    echo "- machine: $(nproc) cores, $(free -g | awk '/^Mem:/ { print $2 }') GiB memory, $(uname -sr); load average (1, 5, 15 min) before: $load_before, after: $load_after"
    echo "- PostgreSQL: $pg_version; queue: $build"
    echo "- sender: $([ "${BENCH_QUALIFY:-}" = 1 ] && echo "qualified names (BENCH_QUALIFY=1)" || echo "unqualified names, as users write it")"
    if [ "$(md5sum < "$LIB")" != "$lib_sum" ]; then
        echo "- **warning**: the installed library was replaced during the run (at $(date -u -r "$LIB" '+%H:%M UTC')); later connections and workers ran another build"
    fi
}
method() {
    cat <<'EOF'
### Method

`bench/tenants.sh` starts, for each N (60, then 500), a throwaway cluster
(`scripts/cluster.sh`: the extension preloaded, PostgreSQL's defaults and
every `queue.*` setting at its default, so 4 worker slots and
`queue.idle_exit` 60 s) with only `max_connections` raised to N + 200, and
runs `bench/tenants` (crate `queue-bench-tenants`). That makes a database
`tenant_template` with `CREATE EXTENSION queue`, a table
`deliveries(job_id, enqueued_at, called_at)`, a plpgsql sender written with
unqualified names as users write it, `record_delivery(job jsonb)`, which
inserts `(job->>'id', job->>'enqueued_at', clock_timestamp())`, and a queue
`events` (`retry_delay` 1 s) with that sender; marks it a template and makes
N databases `CREATE DATABASE tenant_NNN TEMPLATE tenant_template STRATEGY
WAL_LOG` (15's default; `FILE_COPY`, with its two checkpoints per copy, was
4 to 6 times slower here). It then waits until no worker has run for longer
than `queue.database_scan_interval` (the launcher probes every new database
with a worker) and keeps one connection per tenant database open.

The latency of a job is `called_at - enqueued_at` read back from
`deliveries` (the enqueue is a one-statement transaction, so this includes
its commit); in the bursts, where each transaction stays open until all
are ready, it counts from the moment the client sent the `COMMIT`.

- **baseline**: one job in one database, delivered, then the next, in 5
  different databases; the first with no worker running anywhere, each
  with a worker slot free. The cold single-database latency the other
  rows are compared with.
- **burst**: `BEGIN; SELECT queue_enqueue('events', '{}')` in every
  database, then every `COMMIT` at once (a thread per 50 connections,
  released by a barrier); then until every database has its job (deadline
  300 s). `queue_workers` is sampled once a second.
- **steady**: every database gets a job every 5 s for 60 s, staggered evenly
  over the 5 s (N/5 jobs/s), from 4 threads; then until all are delivered.
- **after idle**: once every worker has exited idle (up to 180 s), the
  burst again.
- **idle cost**: with every worker gone, the launcher's utime + stime from
  `/proc` over 30 s, and the workers seen in `queue_workers` meanwhile.
- **exactly once**: at the end, in every database, `count(*) =
  count(DISTINCT job_id)` in `deliveries`, and every job enqueued there
  present.
- **schedules**: then every database gets a queue `ticks` and a schedule
  firing into it every 10 s (`*/10 * * * * *`; every minute, `0 * * * * *`,
  at 500 databases, where each tick starts a worker in every database); after
  6 ticks (3 at 500) past the first whole period, each tick's job is read back
  in every database: ticks without a job, ticks with more than one, the lag
  from the tick (`headers->>'scheduled_for'`) to the job's `enqueued_at`, and
  the launcher's CPU (`/proc/PID/schedstat`) over the phase.

Percentiles are nearest-rank, over the delivered jobs; the ratios divide by
the baseline's p50 and p99.
EOF
}

echo
tables | tee "$OUT/tenants-table.md"
if [ -n "$DOC" ]; then
    region=$(mktemp)
    { echo; machine; echo; tables; } > "$region"
    if grep -q '^<!-- tenants-run:begin -->' "$DOC"; then
        replace_region "$DOC" tenants-run < "$region"
    else
        # the first run: a new section at the end, its hand-editable method
        # outside the markers that later runs rewrite
        {
            echo
            echo '## Many tenant databases (`make bench-tenants`)'
            echo
            method
            echo
            echo '### Results of the last complete `make bench-tenants`'
            echo
            echo '<!-- tenants-run:begin -->'
            cat "$region"
            echo '<!-- tenants-run:end -->'
        } >> "$DOC"
    fi
    rm -f "$region"
    echo "(written to $DOC)"
fi
