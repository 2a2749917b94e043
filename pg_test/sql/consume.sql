\set SHOW_CONTEXT never
SET datestyle = ISO;
SET intervalstyle = postgres;
SET timezone = UTC;
-- claim order: higher priority first, then oldest run_at, then id; never a
-- job that is not due yet
SELECT queue_create('c.order');
SELECT queue_enqueue('c.order', '{"n": "low, 2 minutes ago"}', run_at => now() - interval '2 minutes') > 0 AS enqueued;
SELECT queue_enqueue('c.order', '{"n": "high"}', priority => 10) > 0 AS enqueued;
SELECT queue_enqueue('c.order', '{"n": "low, now"}') > 0 AS enqueued;
SELECT queue_enqueue('c.order', '{"n": "low, 1 hour ago"}', run_at => now() - interval '1 hour') > 0 AS enqueued;
SELECT queue_enqueue('c.order', '{"n": "highest, in an hour"}', delay => '1 hour', priority => 100) > 0 AS enqueued;
SELECT payload->>'n' AS job, queue, attempt, max_attempts, headers,
       lease IS NOT NULL AS leased,
       lease_expires_at BETWEEN now() + interval '4 minutes 50 seconds'
                            AND clock_timestamp() + interval '5 minutes' AS default_lease,
       enqueued_at <= clock_timestamp() AS enqueued
  FROM queue_claim('c.order', 'worker-1', 10);
-- nothing left that is due
SELECT count(*) FROM queue_claim('c.order', 'worker-1', 10);
SELECT status, count(*), array_agg(DISTINCT worker) AS workers
  FROM queue_jobs WHERE queue = 'c.order' GROUP BY status ORDER BY status;

-- max_jobs takes at most that many; each job gets its own lease
SELECT queue_create('c.batch', lease => '1 minute');
SELECT count(*) FROM queue_enqueue_batch('c.batch', array_fill('{}'::jsonb, ARRAY[5]));
SELECT count(*) AS claimed, count(DISTINCT lease) AS leases,
       bool_and(lease_expires_at <= clock_timestamp() + interval '1 minute') AS queue_lease
  FROM queue_claim('c.batch', max_jobs => 3);
-- the lease argument overrides the queue's lease
SELECT lease_expires_at > clock_timestamp() + interval '50 minutes' AS own_lease
  FROM queue_claim('c.batch', lease => '1 hour');
SELECT count(*) FROM queue_claim('c.batch');
-- worker is optional
SELECT count(*) FROM queue_jobs WHERE queue = 'c.batch' AND worker IS NULL;

-- a job scheduled for later is claimed once due, before lower priorities
SELECT queue_create('c.later');
SELECT queue_enqueue('c.later', '{"n": "ready, low"}') > 0 AS enqueued;
SELECT queue_enqueue('c.later', '{"n": "later, high"}', delay => '300 milliseconds', priority => 5) > 0 AS enqueued;
SELECT pg_sleep(0.5);
SELECT payload->>'n' AS job FROM queue_claim('c.later');

-- a paused queue hands out nothing
SELECT queue_create('c.paused');
SELECT queue_enqueue('c.paused', '{}') > 0 AS enqueued;
UPDATE queue_queues SET paused = true WHERE name = 'c.paused';
SELECT count(*) FROM queue_claim('c.paused');
UPDATE queue_queues SET paused = false WHERE name = 'c.paused';
SELECT count(*) FROM queue_claim('c.paused');

-- claim: bad arguments
SELECT * FROM queue_claim('c.missing');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM queue_claim(NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM queue_claim('c.order', max_jobs => 0);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM queue_claim('c.order', max_jobs => 10001);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM queue_claim('c.order', max_jobs => NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM queue_claim('c.order', lease => '0');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM queue_claim('c.order', lease => '-1 minute');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM queue_claim('C');
\echo :LAST_ERROR_SQLSTATE

-- queue_complete: true once, then false; a wrong lease never completes
SELECT queue_create('c.complete');
SELECT queue_enqueue('c.complete', '{"n": 1}') AS j \gset
SELECT id, lease FROM queue_claim('c.complete') \gset claimed_
SELECT queue_complete(:claimed_id, gen_random_uuid()) AS wrong_lease;
SELECT status FROM queue_job(:j);
SELECT queue_complete(:claimed_id, :'claimed_lease') AS completed;
SELECT queue_complete(:claimed_id, :'claimed_lease') AS again;
SELECT status, attempts, finished_at IS NOT NULL AS finished, lease_expires_at
  FROM queue_job(:j);
SELECT queue_complete(-1, gen_random_uuid()) AS missing;
SELECT queue_complete(NULL, gen_random_uuid());
\echo :LAST_ERROR_SQLSTATE
SELECT queue_complete(:j, NULL);
\echo :LAST_ERROR_SQLSTATE
-- a pending job was never leased
SELECT queue_enqueue('c.complete', '{"n": 2}') AS pending \gset
SELECT queue_complete(:pending, gen_random_uuid()) AS never_leased;

-- queue_complete_batch: completes the pairs whose lease is held
SELECT queue_create('c.cbatch');
SELECT count(*) FROM queue_enqueue_batch('c.cbatch', array_fill('{}'::jsonb, ARRAY[3]));
SELECT array_agg(id ORDER BY id) AS ids, array_agg(lease ORDER BY id) AS leases
  FROM queue_claim('c.cbatch', max_jobs => 3) \gset
SELECT count(*) AS completed
  FROM queue_complete_batch(:'ids'::bigint[],
                            (:'leases'::uuid[])[1:2] || gen_random_uuid());
SELECT status, count(*) FROM queue_jobs WHERE queue = 'c.cbatch' GROUP BY 1 ORDER BY 1;
SELECT count(*) AS completed_again FROM queue_complete_batch(:'ids'::bigint[], :'leases'::uuid[]);
-- pairs are matched exactly: swapped leases complete nothing
SELECT count(*) FROM queue_enqueue_batch('c.cbatch', array_fill('{}'::jsonb, ARRAY[2]));
SELECT array_agg(id ORDER BY id) AS ids2, array_agg(lease ORDER BY id) AS leases2
  FROM queue_claim('c.cbatch', max_jobs => 2) \gset
SELECT count(*) AS swapped FROM queue_complete_batch(:'ids2'::bigint[],
    ARRAY[(:'leases2'::uuid[])[2], (:'leases2'::uuid[])[1]]);
-- and a job named twice completes once, by the pair that holds
SELECT count(*) AS repeated FROM queue_complete_batch(
    ARRAY[(:'ids2'::bigint[])[1], (:'ids2'::bigint[])[1], (:'ids2'::bigint[])[2]],
    ARRAY[gen_random_uuid(), (:'leases2'::uuid[])[1], (:'leases2'::uuid[])[2]]);
SELECT count(*) FROM queue_complete_batch('{}', '{}');
SELECT count(*) FROM queue_complete_batch(ARRAY[1, 2], ARRAY[gen_random_uuid()]);
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) FROM queue_complete_batch(NULL, '{}');
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) FROM queue_complete_batch('{}', NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) FROM queue_complete_batch(ARRAY[1, NULL], ARRAY[gen_random_uuid(), gen_random_uuid()]);
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) FROM queue_complete_batch(ARRAY[1], ARRAY[NULL::uuid]);
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) FROM queue_complete_batch(array_fill(1::bigint, ARRAY[10001]),
                                          array_fill(gen_random_uuid(), ARRAY[10001]));
\echo :LAST_ERROR_SQLSTATE

-- queue_extend: the new expiry, counted from now
SELECT queue_create('c.extend', lease => '10 seconds');
SELECT queue_enqueue('c.extend', '{}') > 0 AS enqueued;
SELECT id, lease FROM queue_claim('c.extend') \gset ext_
SELECT queue_extend(:ext_id, :'ext_lease', '1 hour') AS extended_to \gset
SELECT :'extended_to'::timestamptz BETWEEN now() + interval '59 minutes'
                                       AND clock_timestamp() + interval '1 hour' AS extended;
SELECT lease_expires_at > now() + interval '59 minutes' AS stored FROM queue_job(:ext_id);
SELECT queue_extend(:ext_id, gen_random_uuid(), '1 hour') AS wrong_lease;
SELECT queue_extend(-1, :'ext_lease', '1 hour') AS missing;
SELECT queue_extend(:ext_id, :'ext_lease', '0');
\echo :LAST_ERROR_SQLSTATE
SELECT queue_extend(:ext_id, :'ext_lease', '-1 second');
\echo :LAST_ERROR_SQLSTATE
SELECT queue_extend(:ext_id, :'ext_lease', NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT queue_extend(NULL, :'ext_lease', '1 hour');
\echo :LAST_ERROR_SQLSTATE
SELECT queue_complete(:ext_id, :'ext_lease') AS completed;
SELECT queue_extend(:ext_id, :'ext_lease', '1 hour') AS after_completion;
