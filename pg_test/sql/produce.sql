\set SHOW_CONTEXT never
SET datestyle = ISO;
SET intervalstyle = postgres;
SET timezone = UTC;
SELECT queue_create('p.main');
-- ids increase within a session
SELECT queue_enqueue('p.main', '{"n": 1}') AS first \gset
SELECT queue_enqueue('p.main', '{"n": 2}') > :first AS increasing;
-- the payload comes back exactly as given
SELECT queue_enqueue('p.main',
    '{"big": 123456789012345678901234567890.000000000000000001, "s": "é ✓", "nested": [1, {"a": null}]}')
    AS big \gset
SELECT payload FROM queue_job(:big);
-- any JSON value is a payload, including JSON null
SELECT queue_enqueue('p.main', '"a string"') AS s \gset
SELECT queue_enqueue('p.main', 'null') AS n \gset
SELECT payload, jsonb_typeof(payload) FROM queue_jobs WHERE id IN (:s, :n) ORDER BY id;
-- new jobs are pending, with no attempt yet
SELECT status, attempts, priority, headers, dedup_key, worker, last_error FROM queue_job(:first);

-- headers: a JSON object
SELECT queue_enqueue('p.main', '{}', headers => '{"trace": "abc", "n": 2}') AS h \gset
SELECT headers FROM queue_job(:h);
SELECT queue_enqueue('p.main', '{}', headers => '[1, 2]') > 0 AS enqueued;
\echo :LAST_ERROR_SQLSTATE
SELECT queue_enqueue('p.main', '{}', headers => '"text"') > 0 AS enqueued;
\echo :LAST_ERROR_SQLSTATE

-- delay and run_at (run_at wins)
SELECT queue_enqueue('p.main', '{}', delay => '1 hour') AS d \gset
SELECT status, run_at > now() + interval '59 minutes' AS in_an_hour FROM queue_job(:d);
SELECT queue_enqueue('p.main', '{}', run_at => now() + interval '2 days', delay => '1 second') AS r \gset
SELECT run_at > now() + interval '1 day' AS run_at_wins FROM queue_job(:r);
SELECT queue_enqueue('p.main', '{}', run_at => '2000-01-01 00:00:00+00') AS past \gset
SELECT status, run_at FROM queue_job(:past);
-- a delay past the end of the calendar ends there instead of failing
SELECT queue_enqueue('p.main', '{}', delay => '200000 years') AS far \gset
SELECT status, run_at > '100000-01-01'::timestamptz AS far_away FROM queue_job(:far);
SELECT queue_enqueue('p.main', '{}', delay => '-1 second') > 0 AS enqueued;
\echo :LAST_ERROR_SQLSTATE
SELECT queue_enqueue('p.main', '{}', delay => '-1 second', run_at => now()) > 0 AS enqueued;
\echo :LAST_ERROR_SQLSTATE

-- priority
SELECT queue_enqueue('p.main', '{}', priority => -5) AS low \gset
SELECT priority FROM queue_job(:low);

-- required arguments, missing queues, bad names
SELECT queue_enqueue('p.missing', '{}') > 0 AS enqueued;
\echo :LAST_ERROR_SQLSTATE
SELECT queue_enqueue(NULL, '{}') > 0 AS enqueued;
\echo :LAST_ERROR_SQLSTATE
SELECT queue_enqueue('p.main', NULL) > 0 AS enqueued;
\echo :LAST_ERROR_SQLSTATE
SELECT queue_enqueue('p.main', '{}', delay => NULL) > 0 AS enqueued;
\echo :LAST_ERROR_SQLSTATE
SELECT queue_enqueue('p.main', '{}', priority => NULL) > 0 AS enqueued;
\echo :LAST_ERROR_SQLSTATE
SELECT queue_enqueue('P.Main', '{}') > 0 AS enqueued;
\echo :LAST_ERROR_SQLSTATE

-- dedup_key: one unfinished job per key and queue
SELECT queue_create('p.dedup');
SELECT queue_enqueue('p.dedup', '{"v": 1}', dedup_key => 'k1') AS k1 \gset
SELECT queue_enqueue('p.dedup', '{"v": 2}', dedup_key => 'k1') = :k1 AS same_job;
SELECT payload, dedup_key FROM queue_job(:k1);
SELECT queue_enqueue('p.dedup', '{"v": 3}', dedup_key => 'k2') <> :k1 AS other_key;
SELECT queue_enqueue('p.main', '{"v": 4}', dedup_key => 'k1') <> :k1 AS other_queue;
SELECT count(*) FROM queue_jobs WHERE queue = 'p.dedup';
-- once the job has finished, the key is free again
SELECT queue_complete(id, lease) FROM queue_claim('p.dedup', max_jobs => 10) WHERE id = :k1;
SELECT queue_enqueue('p.dedup', '{"v": 5}', dedup_key => 'k1') > :k1 AS new_job;

-- an enqueue commits or rolls back with the caller's transaction
SELECT queue_create('p.tx');
BEGIN;
SELECT queue_enqueue('p.tx', '{"rolled": "back"}') > 0 AS enqueued;
SELECT count(*) FROM queue_jobs WHERE queue = 'p.tx';
ROLLBACK;
SELECT count(*) FROM queue_jobs WHERE queue = 'p.tx';

-- queue_enqueue_batch: ascending ids in input order
SELECT queue_create('p.batch');
SELECT array_agg(id) AS ids FROM queue_enqueue_batch('p.batch',
    ARRAY['{"i": 1}', '{"i": 2}', '{"i": 3}', '{"i": 4}']::jsonb[]) AS id \gset
SELECT array_agg(payload->>'i' ORDER BY id) AS in_input_order,
       array_agg(id ORDER BY id) = :'ids'::bigint[] AS ascending
  FROM queue_jobs WHERE queue = 'p.batch';
-- delay and priority apply to the whole batch
SELECT count(*) FROM queue_enqueue_batch('p.batch', ARRAY['{}', '{}']::jsonb[],
                                         delay => '1 hour', priority => 3);
SELECT priority, count(*), bool_and(run_at > now() + interval '59 minutes') AS later
  FROM queue_jobs WHERE queue = 'p.batch' GROUP BY priority ORDER BY priority;
-- an empty array does nothing, but the queue must exist
SELECT count(*) FROM queue_enqueue_batch('p.batch', '{}'::jsonb[]);
SELECT count(*) FROM queue_enqueue_batch('p.missing', '{}'::jsonb[]);
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) FROM queue_enqueue_batch('p.batch', NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) FROM queue_enqueue_batch('p.batch', ARRAY['{}', NULL, '{}']::jsonb[]);
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) FROM queue_enqueue_batch('p.batch', ARRAY[['{}'], ['{}']]::jsonb[]);
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) FROM queue_enqueue_batch('p.batch', ARRAY['{}']::jsonb[], delay => '-1 hour');
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) FROM queue_enqueue_batch('p.batch', ARRAY['{}']::jsonb[], priority => NULL);
\echo :LAST_ERROR_SQLSTATE
-- at most 10000 jobs per call
SELECT queue_create('p.limit');
SELECT count(*) FROM queue_enqueue_batch('p.limit', array_fill('{}'::jsonb, ARRAY[10000]));
SELECT count(*) FROM queue_enqueue_batch('p.limit', array_fill('{}'::jsonb, ARRAY[10001]));
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) FROM queue_jobs WHERE queue = 'p.limit';

-- the settings the API makes for its own statements end with each call
SET jit = on;
SELECT queue_enqueue('p.main', '{}') > 0 AS enqueued;
SELECT current_setting('jit') AS jit, current_setting('plan_cache_mode') AS plan_cache_mode,
       current_setting('enable_seqscan') AS enable_seqscan, current_user AS "current_user";
RESET jit;
