#!/usr/bin/env bash
# Storage under a snapshot held open: a REPEATABLE READ transaction in another
# session keeps vacuum from removing any dead tuple. Rounds of 10,000 jobs go
# through `queue` (claims of 100 and batch completions, queue_maintain()
# between rounds as the background worker will run it) and through the
# hand-written SKIP LOCKED queue that services write today (one table, a
# partial index on pending jobs, UPDATE to claim, DELETE to complete), side by
# side on one throwaway cluster. Prints the size of the table that claims
# scan and its dead tuples after each round, and how long the round took.
#
#   bench/bloat.sh [ROUNDS]      (needs `make install` first)
. "$(dirname "$0")/common.sh"

ROUNDS=${1:-10}
cluster_start "${QUEUE_BENCH_DIR:-/tmp/queue-bloat}" "${QUEUE_BENCH_PORT:-54330}"
workdir queue-bloat-scripts
work=$WORK
holder=
at_exit '[ -n "$holder" ] && kill "$holder" 2>/dev/null'

bench() { pgb -c 1 "$@" >/dev/null; }

sql <<'SQL'
CREATE EXTENSION queue;
SELECT queue_create('bloat');
CREATE TABLE naive_jobs (
    id bigserial PRIMARY KEY,
    status text NOT NULL DEFAULT 'pending',
    priority int NOT NULL DEFAULT 0,
    run_at timestamptz NOT NULL DEFAULT now(),
    attempts int NOT NULL DEFAULT 0,
    locked_until timestamptz,
    payload jsonb NOT NULL
);
CREATE INDEX ON naive_jobs (priority DESC, run_at, id) WHERE status = 'pending';
SQL

cat > "$work/ours_enqueue.sql" <<'SQL'
SELECT count(*) FROM queue_enqueue_batch('bloat', array_fill('{"x": 1}'::jsonb, ARRAY[100]));
SQL
cat > "$work/ours_drain.sql" <<'SQL'
SELECT array_agg(id) AS ids, array_agg(lease) AS leases FROM queue_claim('bloat', 'w', 100) \gset
SELECT count(*) FROM queue_complete_batch(':ids'::bigint[], ':leases'::uuid[]);
SQL
cat > "$work/naive_enqueue.sql" <<'SQL'
INSERT INTO naive_jobs (payload) SELECT '{"x": 1}' FROM generate_series(1, 100);
SQL
cat > "$work/naive_drain.sql" <<'SQL'
WITH picked AS (
    SELECT id FROM naive_jobs WHERE status = 'pending'
     ORDER BY priority DESC, run_at, id LIMIT 100 FOR UPDATE SKIP LOCKED
), claimed AS (
    UPDATE naive_jobs j SET status = 'processing', attempts = attempts + 1,
           locked_until = now() + interval '5 minutes'
      FROM picked WHERE j.id = picked.id RETURNING j.id
)
SELECT array_agg(id) AS ids FROM claimed \gset
DELETE FROM naive_jobs WHERE id = ANY (':ids'::bigint[]);
SQL

# The snapshot holder: a REPEATABLE READ transaction that stays open.
"$BIN/psql" -X -q -h "$DIR" -p "$PORT" -U postgres -d postgres >/dev/null 2>&1 <<'SQL' &
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT count(*) FROM pg_class;
SELECT pg_sleep(3600);
SQL
holder=$!
sleep 1

ms() { date +%s%3N; }
measure() {
    sql -c "SELECT pg_stat_clear_snapshot()" >/dev/null
    sql <<SQL
SELECT pg_size_pretty(sum(pg_total_relation_size(c.oid)))
       || ' | ' || sum(coalesce(pg_stat_get_dead_tuples(c.oid), 0))
  FROM pg_class c WHERE c.relname = ANY (string_to_array('$1', ','));
SQL
}

echo "Held snapshot: xmin $(sql -c "SELECT backend_xmin FROM pg_stat_activity WHERE pid <> pg_backend_pid() AND query LIKE '%pg_sleep(3600)%'")"
echo
echo "| round | jobs so far | queue: live size, dead tuples (before maintain) | after maintain | round ms | hand-written: table size | dead tuples | round ms |"
echo "|---|---|---|---|---|---|---|---|"
for round in $(seq 1 "$ROUNDS"); do
    t0=$(ms); bench -f "$work/ours_enqueue.sql" -t 100; bench -f "$work/ours_drain.sql" -t 100; t1=$(ms)
    sleep 1   # let the pgbench backends' statistics arrive
    peak=$(measure "queue_live_0,queue_live_1")
    t2=$(ms); sql -c "SELECT queue_maintain()" >/dev/null; t3=$(ms)
    ours=$(measure "queue_live_0,queue_live_1")
    t4=$(ms); bench -f "$work/naive_enqueue.sql" -t 100; bench -f "$work/naive_drain.sql" -t 100; t5=$(ms)
    sleep 1
    naive=$(measure "naive_jobs")
    echo "| $round | $((round * 10000)) | $peak | $ours | $((t1 - t0 + t3 - t2)) | $naive | $((t5 - t4)) |"
done
left=$(sql -c "SELECT count(*) FROM queue_jobs WHERE status <> 'succeeded'")
echo
echo "Unfinished jobs left in queue: $left"
