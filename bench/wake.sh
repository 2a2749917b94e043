#!/usr/bin/env bash
# Wake-up latency: from the commit of an enqueue to its database's worker
# taking the wake-up in, as the worker measures it (queue_wake_latencies()),
# on an idle system: 500 single enqueues, 20 ms apart, each committed
# alone. Prints the median and the 99th percentile.
#   bench/wake.sh      (needs `make install` first)
. "$(dirname "$0")/common.sh"

COUNT=${QUEUE_BENCH_COUNT:-500}
cluster_start "${QUEUE_BENCH_DIR:-/tmp/queue-wake-bench}" "${QUEUE_BENCH_PORT:-54334}"

sql -c "CREATE EXTENSION queue" -c "SELECT queue_create('wake')" >/dev/null
for _ in $(seq 1 100); do
    [ "$(sql -c "SELECT count(*) FROM queue_workers WHERE pid IS NOT NULL")" = 1 ] && break
    sleep 0.1
done
before=$(sql -c "SELECT count(*) FROM queue_wake_latencies()")
# each enqueue in a transaction of its own, 20 ms apart
for _ in $(seq 1 "$COUNT"); do echo "SELECT queue_enqueue('wake', '{}');"; echo "SELECT pg_sleep(0.02);"; done \
    | sql >/dev/null
sleep 0.5
sql <<SQL
SELECT count(*) AS wakeups,
       round((percentile_cont(0.5) WITHIN GROUP (ORDER BY us) / 1000)::numeric, 3) AS median_ms,
       round((percentile_cont(0.99) WITHIN GROUP (ORDER BY us) / 1000)::numeric, 3) AS p99_ms,
       round((max(us) / 1000.0)::numeric, 3) AS max_ms
  FROM (SELECT us FROM queue_wake_latencies() AS us OFFSET $before) s;
SQL
