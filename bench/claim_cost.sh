#!/usr/bin/env bash
# Claim cost against what else is stored: the median time to claim and
# complete 100 jobs, on an otherwise empty queue, then after adding 200,000
# scheduled jobs (of a higher priority) to the same queue, 200,000 ready jobs
# to another queue, and 200,000 finished jobs. O(batch) means the four
# medians stay alike. Commits do not wait for the disk here
# (synchronous_commit = off): the time measured is the work of the queue.
#   bench/claim_cost.sh      (needs `make install` first)
. "$(dirname "$0")/common.sh"

cluster_start "${QUEUE_BENCH_DIR:-/tmp/queue-claim-cost}" "${QUEUE_BENCH_PORT:-54332}"
workdir queue-claim-cost-scripts
fill() {  # queue, jobs, extra arguments of queue_enqueue_batch
    sql -c "SELECT count(*) FROM (SELECT queue_enqueue_batch('$1',
            array_fill('{\"n\": 1}'::jsonb, ARRAY[10000]) $3) FROM generate_series(1, $2 / 10000)) s" >/dev/null
}

cat > "$WORK/cycle.sql" <<'SQL'
SELECT array_agg(id) AS ids, array_agg(lease) AS leases FROM queue_claim('measured', 'w', 100) \gset
SELECT count(*) FROM queue_complete_batch(':ids'::bigint[], ':leases'::uuid[]);
SQL
measure() {
    fill measured 20000 ""
    sql -c "VACUUM ANALYZE" >/dev/null
    rm -f "$WORK"/lat*
    PGOPTIONS="-c synchronous_commit=off" pgb -c 1 -t 200 -f cycle.sql -l --log-prefix=lat >/dev/null
    printf "| %s | %s |\n" "$1" "$(median_ms_of_logs)"
}

sql -c "CREATE EXTENSION queue" -c "SELECT queue_create('measured')" -c "SELECT queue_create('other')" >/dev/null
echo "| also stored | median ms to claim and complete 100 |"
echo "|---|---|"
measure "nothing else"
fill measured 200000 ", delay => '1 day', priority => 10"
measure "+ 200,000 scheduled jobs of higher priority in the same queue"
fill other 200000 ""
measure "+ 200,000 ready jobs in another queue"
sql <<'SQL'
DO $$
DECLARE
    ids bigint[];
    leases uuid[];
BEGIN
    FOR i IN 1..20 LOOP
        SELECT array_agg(id), array_agg(lease) INTO ids, leases FROM queue_claim('other', 'w', 10000);
        PERFORM queue_complete_batch(ids, leases);
    END LOOP;
END
$$;
SQL
measure "+ 200,000 finished jobs"
