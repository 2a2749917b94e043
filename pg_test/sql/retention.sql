\set SHOW_CONTEXT never
SET datestyle = ISO;
SET intervalstyle = postgres;
SET timezone = UTC;
-- queue_cleanup removes succeeded and cancelled jobs past their queue's
-- retention; failed jobs stay until retried or purged. A retention of 0
-- keeps nothing: such jobs never reach history (nothing to clean), and the
-- totals count them all the same.
SELECT queue_cleanup() >= 0 AS ran;
SELECT queue_cleanup() AS nothing_left;
SELECT queue_create('e.brief', retention => '0', max_attempts => 1);
SELECT queue_create('e.kept', retention => '1 day');
SELECT count(*) FROM queue_enqueue_batch('e.brief', array_fill('{}'::jsonb, ARRAY[4]));
SELECT count(*) FROM queue_enqueue_batch('e.kept', array_fill('{}'::jsonb, ARRAY[2]));
SELECT count(*) FROM (SELECT array_agg(id) AS ids, array_agg(lease) AS leases
                        FROM queue_claim('e.brief', max_jobs => 2)) c,
                     LATERAL queue_complete_batch(c.ids, c.leases);
SELECT queue_fail(id, lease, 'broken') FROM queue_claim('e.brief');
SELECT queue_cancel(id) FROM queue_jobs WHERE queue = 'e.brief' AND status = 'pending';
SELECT count(*) FROM (SELECT array_agg(id) AS ids, array_agg(lease) AS leases
                        FROM queue_claim('e.kept', max_jobs => 2)) c,
                     LATERAL queue_complete_batch(c.ids, c.leases);
SELECT queue, status, count(*) FROM queue_jobs WHERE queue LIKE 'e.%' GROUP BY 1, 2 ORDER BY 1, 2;
SELECT queue_cleanup() AS removed;
SELECT queue_cleanup() AS removed_next;
SELECT queue, status, count(*) FROM queue_jobs WHERE queue LIKE 'e.%' GROUP BY 1, 2 ORDER BY 1, 2;
SELECT queue, succeeded, failed, cancelled, succeeded_total, failed_total
  FROM queue_stats WHERE queue LIKE 'e.%';

-- Retention is the queue's current one: shortening it applies to jobs
-- that finished before.
SELECT queue_alter('e.kept', retention => '0');
SELECT queue_cleanup() AS removed;
SELECT count(*) FROM queue_jobs WHERE queue = 'e.kept';

-- Expired jobs that share a partition with unexpired ones are deleted in
-- bounded chunks (queue_cleanup's chunk is 10000; queue_expire takes it as
-- an argument). One completion, so that all of them land in one partition.
SELECT queue_create('e.mixed', retention => '1 microsecond');
SELECT queue_create('e.later', retention => '32 hours');
SELECT count(*) FROM queue_enqueue_batch('e.mixed', array_fill('{}'::jsonb, ARRAY[12]));
SELECT queue_enqueue('e.later', '{}') > 0 AS enqueued;
SELECT count(*) FROM (
    SELECT array_agg(id) AS ids, array_agg(lease) AS leases
      FROM (SELECT * FROM queue_claim('e.mixed', max_jobs => 12)
            UNION ALL SELECT * FROM queue_claim('e.later')) c) b,
    LATERAL queue_complete_batch(b.ids, b.leases);
SELECT count(DISTINCT tableoid) AS partitions FROM queue_done
 WHERE queue_id IN (SELECT id FROM queue_queues WHERE name IN ('e.mixed', 'e.later'));
SELECT queue_expire(5) AS first, queue_expire(5) AS second, queue_expire(5) AS third,
       queue_expire(5) AS fourth;
SELECT queue, status, count(*) FROM queue_jobs WHERE queue IN ('e.mixed', 'e.later')
 GROUP BY 1, 2 ORDER BY 1, 2;
SELECT queue, succeeded, succeeded_total FROM queue_stats WHERE queue IN ('e.mixed', 'e.later');
SELECT queue_expire(0);
\echo :LAST_ERROR_SQLSTATE
SELECT queue_expire(NULL);
\echo :LAST_ERROR_SQLSTATE

-- Cleanup checks and then truncates, so it refuses an old snapshot.
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT queue_cleanup();
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;

-- queue_purge deletes a queue's jobs of one status, or all of them, and
-- returns how many. The _total counters stay.
SELECT queue_create('e.purge', max_attempts => 1);
SELECT count(*) FROM queue_enqueue_batch('e.purge', array_fill('{}'::jsonb, ARRAY[6]));
SELECT queue_enqueue('e.purge', '{}', delay => '1 hour') > 0 AS scheduled;
SELECT count(*) FROM (SELECT array_agg(id) AS ids, array_agg(lease) AS leases
                        FROM queue_claim('e.purge', max_jobs => 2)) c,
                     LATERAL queue_complete_batch(c.ids, c.leases);
SELECT queue_fail(id, lease, 'no') FROM queue_claim('e.purge');
SELECT count(*) FROM queue_claim('e.purge');
SELECT queue_cancel(id) FROM queue_jobs WHERE queue = 'e.purge' AND status = 'pending'
 ORDER BY id LIMIT 1;
SELECT status, count(*) FROM queue_jobs WHERE queue = 'e.purge' GROUP BY 1 ORDER BY 1;
SELECT queue_purge('e.purge', 'failed') AS failed, queue_purge('e.purge', 'cancelled') AS cancelled;
SELECT queue_purge('e.purge', 'processing') AS processing;
SELECT queue_purge('e.purge', 'pending') AS pending;
SELECT queue_purge('e.purge', 'pending') AS again;
SELECT status, count(*) FROM queue_jobs WHERE queue = 'e.purge' GROUP BY 1 ORDER BY 1;
SELECT queue_purge('e.purge', 'succeeded') AS succeeded;
SELECT count(*) FROM queue_enqueue_batch('e.purge', array_fill('{}'::jsonb, ARRAY[3]));
SELECT queue_purge('e.purge') AS every_job, queue_purge('e.purge', NULL) AS none_left;
SELECT pending, scheduled, processing, succeeded, failed, cancelled,
       enqueued_total, succeeded_total, failed_total
  FROM queue_stats WHERE queue = 'e.purge';
-- a purge in a transaction that rolls back changes nothing
SELECT queue_enqueue('e.purge', '{}') > 0 AS enqueued;
BEGIN;
SELECT queue_purge('e.purge');
ROLLBACK;
SELECT count(*) FROM queue_jobs WHERE queue = 'e.purge';

-- ids: only those jobs of the queue (of the status, when given); ids of
-- another queue's jobs or of no job are passed over
SELECT queue_create('e.other');
SELECT queue_enqueue('e.other', '{}') AS other \gset
SELECT count(*) FROM queue_enqueue_batch('e.purge', array_fill('{}'::jsonb, ARRAY[3]));
SELECT queue_fail(id, lease, 'no') FROM queue_claim('e.purge');
SELECT array_agg(id ORDER BY id) AS ids FROM queue_jobs WHERE queue = 'e.purge' \gset
SELECT queue_purge('e.purge', 'pending', :'ids'::bigint[] || ARRAY[:other, -1]) AS pending_of_them;
SELECT status, count(*) FROM queue_jobs WHERE queue = 'e.purge' GROUP BY 1 ORDER BY 1;
SELECT queue_purge('e.purge', ids => :'ids'::bigint[]) AS the_rest;
SELECT queue_purge('e.purge', ids => '{}') AS none;
SELECT count(*) AS kept FROM queue_jobs WHERE queue IN ('e.purge', 'e.other');
SELECT failed, failed_total FROM queue_stats WHERE queue = 'e.purge';
SELECT queue_enqueue('e.purge', '{}') > 0 AS enqueued;

-- bad input: nothing is deleted
SELECT queue_purge('e.purge', ids => ARRAY[1, NULL]);
\echo :LAST_ERROR_SQLSTATE
SELECT queue_purge('e.purge', ids => (SELECT array_agg(i) FROM generate_series(1, 10001) i));
\echo :LAST_ERROR_SQLSTATE
SELECT queue_purge('e.purge', 'done');
\echo :LAST_ERROR_SQLSTATE
SELECT queue_purge('e.purge', 'Pending');
\echo :LAST_ERROR_SQLSTATE
SELECT queue_purge(NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT queue_purge('e.missing');
\echo :LAST_ERROR_SQLSTATE
SELECT queue_purge('e purge');
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) FROM queue_jobs WHERE queue = 'e.purge';
