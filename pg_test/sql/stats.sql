\set SHOW_CONTEXT never
SET datestyle = ISO;
SET intervalstyle = postgres;
SET timezone = UTC;
-- The shapes of the views, as the README gives them.
SELECT table_name, column_name, data_type FROM information_schema.columns
 WHERE table_name IN ('queue_stats', 'queue_failed', 'queue_workers')
 ORDER BY table_name, ordinal_position;

-- A new queue has a row of zeros; nothing is due, so no age.
SELECT queue_create('v.stats', max_attempts => 2, retry_delay => '0');
SELECT * FROM queue_stats WHERE queue = 'v.stats';

-- Every status counted, and each count agrees with queue_jobs.
SELECT count(*) FROM queue_enqueue_batch('v.stats', array_fill('{}'::jsonb, ARRAY[10]));
SELECT queue_enqueue('v.stats', '{"later": true}', delay => '1 hour') > 0 AS scheduled;
SELECT queue_enqueue('v.stats', '{"once": true}', dedup_key => 'once') AS once \gset
SELECT queue_enqueue('v.stats', '{"twice": true}', dedup_key => 'once') = :once AS deduplicated;
BEGIN;
SELECT count(*) FROM queue_enqueue_batch('v.stats', array_fill('{}'::jsonb, ARRAY[50]));
ROLLBACK;
SELECT count(*) FROM (SELECT array_agg(id) AS ids, array_agg(lease) AS leases
                        FROM queue_claim('v.stats', max_jobs => 3)) c,
                     LATERAL queue_complete_batch(c.ids, c.leases);
-- failures: two are retried, one fails for good
SELECT queue_fail(id, lease, 'first') FROM queue_claim('v.stats', max_jobs => 2) ORDER BY id;
SELECT queue_fail(id, lease, 'final', permanent => true) FROM queue_claim('v.stats');
SELECT count(*) AS in_flight FROM queue_claim('v.stats', max_jobs => 2);
SELECT queue_cancel(id) FROM queue_jobs
 WHERE queue = 'v.stats' AND status = 'pending' ORDER BY id LIMIT 1;
SELECT status, count(*) FROM queue_jobs WHERE queue = 'v.stats' GROUP BY 1 ORDER BY 1;
SELECT queue, paused, sender, pending, scheduled, processing, succeeded, failed, cancelled,
       oldest_due_age >= '0' AS has_due_age, enqueued_total, succeeded_total, failed_total
  FROM queue_stats WHERE queue = 'v.stats';
-- folding the tallies into the counters changes no figure
SELECT queue_cleanup() >= 0 AS folded;
SELECT queue, pending, scheduled, processing, succeeded, failed, cancelled,
       enqueued_total, succeeded_total, failed_total
  FROM queue_stats WHERE queue = 'v.stats';

-- The _total columns count transitions: a dead letter retried and then
-- completed counts as failed and as succeeded, and not as a new enqueue.
SELECT id AS dead FROM queue_failed WHERE queue = 'v.stats' \gset
SELECT queue_retry(:dead);
SELECT queue_complete(id, lease) FROM queue_claim('v.stats', max_jobs => 10) WHERE id = :dead;
SELECT failed, enqueued_total, succeeded_total, failed_total FROM queue_stats WHERE queue = 'v.stats';
-- and they never go down, not on purge and not on cleanup
SELECT queue_alter('v.stats', retention => '0');
SELECT queue_purge('v.stats', 'pending') > 0 AS purged;
SELECT queue_cleanup() > 0 AS cleaned;
SELECT pending, succeeded, failed, cancelled, enqueued_total, succeeded_total, failed_total
  FROM queue_stats WHERE queue = 'v.stats';

-- oldest_due_age: how long the oldest due job has waited
SELECT queue_create('v.age');
SELECT queue_enqueue('v.age', '{}', run_at => now() - interval '1 hour') > 0 AS overdue;
SELECT queue_enqueue('v.age', '{}') > 0 AS due;
SELECT oldest_due_age >= '1 hour' AS an_hour_or_more, pending FROM queue_stats WHERE queue = 'v.age';

-- queue_failed: the dead letters, with the error that ended them
SELECT queue_create('v.dead', max_attempts => 1);
SELECT queue_enqueue('v.dead', '{"to": "x@example.com"}') AS j \gset
SELECT queue_fail(id, lease, 'mailbox full') FROM queue_claim('v.dead');
SELECT id = :j AS same_job, queue, payload, attempts, last_error, finished_at <= now() AS finished
  FROM queue_failed WHERE queue = 'v.dead';
-- gone from it once retried
SELECT queue_retry(:j);
SELECT count(*) FROM queue_failed WHERE queue = 'v.dead';

-- queue_workers: the worker of this database (the tests run with the
-- library preloaded), started when the extension was created.
DO $$
BEGIN
    FOR i IN 1..300 LOOP
        EXIT WHEN EXISTS (SELECT FROM queue_workers
                           WHERE database = current_database() AND state = 'idle');
        PERFORM pg_sleep(0.1);
    END LOOP;
END
$$;
SELECT state, pid IS NOT NULL AS has_pid, started_at <= now() AS started,
       last_active_at >= started_at AS active, jobs_delivered, jobs_failed, last_error
  FROM queue_workers WHERE database = current_database();

-- A dropped queue leaves no row, no counters and no jobs behind.
SELECT queue_drop('v.dead', force => true);
SELECT count(*) FROM queue_stats WHERE queue = 'v.dead';
SELECT queue_cleanup() >= 0 AS folded;
SELECT count(*) FROM queue_counters c WHERE NOT EXISTS (SELECT FROM queue_queues q WHERE q.id = c.queue_id);
SELECT count(*) FROM queue_done d WHERE NOT EXISTS (SELECT FROM queue_queues q WHERE q.id = d.queue_id);
