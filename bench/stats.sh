#!/usr/bin/env bash
# The cost of `SELECT * FROM queue_stats` with 1,000,000 retained jobs: the
# median of 21 runs, next to the median of the count(*) that a view over the
# job history would have to run. Then the same after 100,000 single enqueues
# (purged again) whose counter deltas are not folded yet, and after
# queue_cleanup() folds them. Loading uses synchronous_commit = off; nothing measured waits for
# the disk.
#   bench/stats.sh      (needs `make install` first)
. "$(dirname "$0")/common.sh"

RETAINED=${QUEUE_BENCH_RETAINED:-1000000}
cluster_start "${QUEUE_BENCH_DIR:-/tmp/queue-stats-bench}" "${QUEUE_BENCH_PORT:-54333}"
workdir queue-stats-scripts
export PGOPTIONS="-c synchronous_commit=off"   # nothing measured here waits for the disk
pgbench() { pgb "$@" >/dev/null; }
median_ms() { median_ms_of_logs; }
measure() {  # label
    echo 'SELECT * FROM queue_stats;' > "$WORK/stats.sql"
    echo "SELECT status, count(*) FROM queue_jobs WHERE queue = 'retained' GROUP BY status;" \
        > "$WORK/count.sql"
    pgbench -c 1 -t 21 -f stats.sql -l --log-prefix=lat
    local stats; stats=$(median_ms)
    pgbench -c 1 -t 21 -f count.sql -l --log-prefix=lat
    local count; count=$(median_ms)
    printf "| %s | %s | %s | %s | %s |\n" "$1" \
        "$(sql -c "SELECT pg_size_pretty(pg_relation_size('queue_live'::regclass)
                                         + pg_relation_size('queue_live_0') + pg_relation_size('queue_live_1'))")" \
        "$stats" "$count" "$(awk -v a="$stats" -v b="$count" 'BEGIN { printf "%.0f", b / a }')"
}
upkeep() {  # what the scheduled upkeep does; repeated, as it skips what it cannot lock
    sql -c "VACUUM ANALYZE queue_live" >/dev/null
    for _ in 1 2 3 4 5; do
        [ "$(sql -c "SELECT live_rotated FROM queue_maintain()")" = t ] && break
        sleep 1
    done
    sql -c "VACUUM ANALYZE" >/dev/null
}

sql -c "CREATE EXTENSION queue" \
    -c "SELECT queue_create('retained', retention => '30 days')" \
    -c "SELECT queue_create('other')" >/dev/null
cat > "$WORK/load.sql" <<'SQL'
SELECT count(*) FROM queue_enqueue_batch('retained', array_fill('{"n": 1}'::jsonb, ARRAY[10000]));
SELECT count(*) FROM (SELECT array_agg(id) AS ids, array_agg(lease) AS leases
                        FROM queue_claim('retained', max_jobs => 10000)) c,
                     LATERAL queue_complete_batch(c.ids, c.leases);
SQL
pgbench -c 1 -t $((RETAINED / 10000)) -f load.sql
sql -c "SELECT count(*) FROM queue_enqueue_batch('retained', array_fill('{}'::jsonb, ARRAY[10000]))" >/dev/null
upkeep

echo "retained jobs: $(sql -c "SELECT succeeded FROM queue_stats WHERE queue = 'retained'") succeeded, $(sql -c "SELECT pending FROM queue_stats WHERE queue = 'retained'") pending"
echo
echo "| state | unfinished-job partitions | queue_stats median ms | count(*) over the jobs, median ms | ratio |"
echo "|---|---|---|---|---|"
measure "1M retained, counters folded"
echo "SELECT queue_enqueue('other', '{}');" > "$WORK/one.sql"
pgbench -c 1 -t 100000 -f one.sql
# the jobs go again (a purge tallies nothing for unfinished jobs), so that
# only the deltas differ from the first measurement
sql -c "SELECT queue_purge('other')" -c "VACUUM ANALYZE queue_live" >/dev/null
measure "+ 100,000 unfolded deltas (single enqueues)"
upkeep
measure "after queue_maintain() folded them"
