#!/usr/bin/env bash
# Where the time of `make bench`'s items 1 and 3 goes, queue against pgmq:
# for single enqueues and for claim + complete of one job, per job,
#   - WAL bytes and WAL records (pg_stat_wal), and the statements run inside
#     the functions with their share of execution time (pg_stat_statements,
#     nested statements tracked);
#   - WAL flushes per job and the time they take (track_wal_io_timing),
#     and the WAL records by type (pg_walinspect), since one job per
#     statement is bound by commit flushes on both sides;
#   - single enqueues with the background worker on and off
#     (queue.enabled), since every commit of an enqueue wakes it.
# One throwaway cluster, pgbench on 4 connections for PROFILE_SECS (10) each.
#   bench/profile.sh      (needs `make install` and the pgmq-install binary)
. "$(dirname "$0")/common.sh"

SECS=${PROFILE_SECS:-10}
PGMQ_INSTALL=${PGMQ_INSTALL:-target/debug/pgmq-install}
PAYLOAD='{"to": "ada@example.com", "template": "welcome", "n": 1}'

QUEUE_PRELOAD=queue,pg_stat_statements cluster_start "${PROFILE_DIR:-/tmp/qbench/profile}" "${PROFILE_PORT:-54403}"
workdir qbench-profile
sql -c "ALTER SYSTEM SET pg_stat_statements.track = 'all'" -c "ALTER SYSTEM SET track_wal_io_timing = on" \
    -c "SELECT pg_reload_conf()" > /dev/null
"$PGMQ_INSTALL" "$DIR" "$PORT" > /dev/null
sql -c "CREATE EXTENSION queue" -c "CREATE EXTENSION pg_stat_statements" -c "CREATE EXTENSION pg_walinspect" \
    -c "SELECT queue_create('p')" -c "SELECT pgmq.create('p')" > /dev/null

cat > "$WORK/q_enq.sql" <<SQL
SELECT queue_enqueue('p', '$PAYLOAD');
SQL
cat > "$WORK/p_enq.sql" <<SQL
SELECT pgmq.send('p', '$PAYLOAD');
SQL
cat > "$WORK/q_c1.sql" <<'SQL'
SELECT coalesce(max(id), 0) AS id, coalesce(max(lease::text), '') AS lease FROM queue_claim('p', 'bench', 1) \gset
SELECT queue_complete(:id, nullif(':lease', '')::uuid) WHERE :id <> 0;
SQL
cat > "$WORK/p_c1.sql" <<'SQL'
SELECT coalesce(max(msg_id), 0) AS id FROM pgmq.read('p', 30, 1) \gset
SELECT pgmq.delete('p', :id::bigint) WHERE :id <> 0;
SQL

# run LABEL SCRIPT JOBS_PER_TX: tps, jobs, WAL per job, and the top statements
run() {
    local label=$1 script=$2 out tps
    sql -c "CHECKPOINT" -c "SELECT pg_stat_reset_shared('wal')" -c "SELECT pg_stat_statements_reset()" > /dev/null
    local from; from=$(sql -c "SELECT pg_current_wal_lsn()")
    out=$(pgb -c 4 -j 2 -T "$SECS" -f "$script.sql")
    local to; to=$(sql -c "SELECT pg_current_wal_lsn()")
    tps=$(echo "$out" | awk '/^tps = / { printf "%.0f", $3 }')
    sleep 1
    local jobs; jobs=$(echo "$out" | awk '/^number of transactions actually processed/ { print $NF }')
    echo "== $label: $tps tps"
    sql -F ' | ' -c "SELECT 'WAL per job: ' || round(wal_bytes / $jobs) || ' bytes, ' || round(wal_records::numeric / $jobs, 1)
                             || ' records, ' || round(wal_fpi::numeric / $jobs, 2) || ' full-page images; '
                             || round(wal_sync::numeric / $jobs, 2) || ' flushes of '
                             || round((wal_sync_time / greatest(wal_sync, 1))::numeric, 3) || ' ms, flushing '
                             || round((wal_sync_time / (10 * $SECS))::numeric) || '% of the run' FROM pg_stat_wal"
    sql -F ' | ' <<SQL
SELECT round(count::numeric / $jobs, 2) AS records_per_job, round(combined_size::numeric / $jobs) AS bytes_per_job,
       "resource_manager/record_type" AS record
  FROM pg_get_wal_stats('$from', '$to', true)
 WHERE count::numeric / $jobs >= 0.05 ORDER BY combined_size DESC;
SQL
    sql -F ' | ' <<SQL
SELECT round((calls::numeric / $jobs), 2) AS calls_per_job, round((total_exec_time / $jobs)::numeric, 3) AS ms_per_job,
       round((100 * total_exec_time / sum(total_exec_time) OVER ())::numeric, 1) AS pct,
       left(regexp_replace(query, '\s+', ' ', 'g'), 110)
  FROM pg_stat_statements WHERE calls >= $jobs / 2
 ORDER BY total_exec_time DESC LIMIT 12;
SQL
    echo
}

fill_queue() { sql -c "SELECT count(*) FROM generate_series(1, 10) g, LATERAL queue_enqueue_batch('p', array_fill('$PAYLOAD'::jsonb, ARRAY[10000 + 0 * g]))" > /dev/null; }
fill_pgmq() { sql -c "SELECT count(*) FROM generate_series(1, 10) g, LATERAL pgmq.send_batch('p', array_fill('$PAYLOAD'::jsonb, ARRAY[10000 + 0 * g]))" > /dev/null; }

run "queue_enqueue (worker on)" q_enq
run "pgmq.send" p_enq
sql -c "ALTER SYSTEM SET queue.enabled = off" -c "SELECT pg_reload_conf()" > /dev/null
sleep 2
run "queue_enqueue (queue.enabled = off: no worker to wake)" q_enq
sql -c "ALTER SYSTEM RESET queue.enabled" -c "SELECT pg_reload_conf()" > /dev/null
sql -c "SELECT queue_purge('p')" -c "SELECT queue_maintain(true)" -c "SELECT pgmq.purge_queue('p')" > /dev/null
fill_queue; fill_pgmq
sql -c "VACUUM ANALYZE" > /dev/null
run "queue_claim(1) + queue_complete" q_c1
run "pgmq.read(1) + pgmq.delete" p_c1

# The worker's drain: where a delivery's time goes (the worker's own
# statements, tracked as nested ones), and the commits it makes per job.
cat > "$WORK/noop.sql" <<'SQL'
CREATE FUNCTION public.bench_noop(job jsonb) RETURNS void LANGUAGE sql AS $$ SELECT $$;
SELECT queue_create('d');
SELECT queue_pause('d');
SELECT queue_register_sender('d', 'public.bench_noop(jsonb)'::regprocedure);
SELECT count(*) FROM generate_series(1, 5) g, LATERAL queue_enqueue_batch('d', array_fill('{}'::jsonb, ARRAY[10000 + 0 * g]));
SQL
if sql -f "$WORK/noop.sql" > /dev/null 2>&1; then
    sql -c "VACUUM ANALYZE" -c "CHECKPOINT" -c "SELECT pg_stat_reset_shared('wal')" -c "SELECT pg_stat_statements_reset()" > /dev/null
    commits0=$(sql -c "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()")
    t0=$(date +%s.%N)
    sql -c "SELECT queue_resume('d')" > /dev/null
    until [ "$(sql -c "SELECT pending + processing FROM queue_stats WHERE queue = 'd'")" = 0 ]; do sleep 0.5; done
    t1=$(date +%s.%N)
    sleep 1
    commits1=$(sql -c "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()")
    echo "== worker drain of 50,000 jobs: $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.0f", 50000 / (b - a) }') jobs/s (polled every 0.5 s);" \
        "$(( (commits1 - commits0) )) commits in the database (the poller's included)"
    sql -F ' | ' -c "SELECT 'WAL per job: ' || round(wal_bytes / 50000) || ' bytes, ' || round(wal_records::numeric / 50000, 1) || ' records' FROM pg_stat_wal"
    sql -F ' | ' <<'SQL'
SELECT calls, round((total_exec_time / 50000)::numeric, 4) AS ms_per_job,
       round((100 * total_exec_time / sum(total_exec_time) OVER ())::numeric, 1) AS pct,
       left(regexp_replace(query, '\s+', ' ', 'g'), 110)
  FROM pg_stat_statements WHERE query NOT LIKE '%queue_stats%' AND query NOT LIKE '%pg_stat%'
 ORDER BY total_exec_time DESC LIMIT 12;
SQL
else
    echo "== worker drain: n/a (no queue_register_sender in this build)"
fi
