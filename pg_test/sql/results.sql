\set SHOW_CONTEXT never
SET datestyle = ISO;
SET intervalstyle = postgres;
SET timezone = UTC;
-- A job's result: what queue_complete (or its batch form) is given, kept
-- with the job for its queue's retention, shown by queue_jobs and
-- queue_job().
SELECT queue_create('r.pull', max_attempts => 2);
SELECT count(*) FROM queue_enqueue_batch('r.pull', array_fill('{}'::jsonb, ARRAY[6]));
CREATE TEMP TABLE held AS SELECT id, lease FROM queue_claim('r.pull', max_jobs => 6);
SELECT queue_complete(id, lease, '{"thumbnail": "https://cdn.example.com/1.png"}')
  FROM held ORDER BY id LIMIT 1;
SELECT queue_complete(id, lease) FROM held ORDER BY id OFFSET 1 LIMIT 1;
SELECT id - (SELECT min(id) FROM held) AS n, status, result
  FROM queue_jobs WHERE queue = 'r.pull' AND status = 'succeeded' ORDER BY id;
SELECT j.status, j.result FROM held, queue_job(held.id) j ORDER BY held.id LIMIT 1;
-- one result per id, NULL elements allowed, in the batch form
SELECT count(*) AS completed FROM (
    SELECT queue_complete_batch(array_agg(id ORDER BY id), array_agg(lease ORDER BY id),
                                ARRAY['[1, 2.50]', NULL]::jsonb[])
      FROM (SELECT * FROM held ORDER BY id OFFSET 2 LIMIT 2) h) c;
SELECT result FROM queue_jobs WHERE queue = 'r.pull' AND status = 'succeeded'
 ORDER BY id OFFSET 2;
-- the arrays' lengths must match: 22023, and nothing changes
SELECT queue_complete_batch(ARRAY[id], ARRAY[lease], ARRAY['1', '2']::jsonb[])
  FROM held ORDER BY id OFFSET 4 LIMIT 1;
\echo :LAST_ERROR_SQLSTATE
-- a result above a megabyte: 54000, nothing changes and the lease is held
SELECT queue_complete(id, lease, jsonb_build_object('big', repeat('x', 1024 * 1024)))
  FROM held ORDER BY id OFFSET 4 LIMIT 1;
\echo :LAST_ERROR_SQLSTATE
SELECT queue_complete_batch(ARRAY[id], ARRAY[lease],
                            ARRAY[jsonb_build_object('big', repeat('x', 1024 * 1024))])
  FROM held ORDER BY id OFFSET 4 LIMIT 1;
\echo :LAST_ERROR_SQLSTATE
SELECT status, result FROM held, queue_job(held.id) ORDER BY held.id OFFSET 4 LIMIT 1;
SELECT queue_complete(id, lease, jsonb_build_object('big', repeat('x', 1000 * 1000)))
  FROM held ORDER BY id OFFSET 4 LIMIT 1;
-- a failed attempt keeps no result
SELECT queue_fail(id, lease, 'broken', permanent => true) FROM held ORDER BY id OFFSET 5;
SELECT status, result FROM held, queue_job(held.id) ORDER BY held.id OFFSET 5;
-- with retention 0 the result goes with the job
SELECT queue_create('r.nothing', retention => '0');
SELECT queue_enqueue('r.nothing', '{}') > 0 AS enqueued;
SELECT queue_complete(id, lease, '{"kept": false}') FROM queue_claim('r.nothing');
SELECT count(*) AS kept FROM queue_jobs WHERE queue = 'r.nothing';

-- CALL queue_await(id, timeout, NULL, NULL): the status and result once
-- the job has ended, or at the timeout (the waking is tested with several
-- connections in tests/tests/awaiting.rs).
SELECT min(id) AS done_id FROM held \gset
CALL queue_await(:done_id, '1 minute', NULL, NULL);
SELECT max(id) AS failed_id FROM held \gset
CALL queue_await(:failed_id, NULL, NULL);
CALL queue_await(id => :failed_id, timeout => '1 second', status => NULL, result => NULL);
SELECT queue_enqueue('r.pull', '{}') AS pending_id \gset
CALL queue_await(:pending_id, '0', NULL, NULL);
CALL queue_await(:pending_id, '100 milliseconds', NULL, NULL);
SELECT queue_cancel(:pending_id);
CALL queue_await(:pending_id, '1 minute', NULL, NULL);
-- a job that does not exist, or is no longer retained: NULL at once
CALL queue_await(-1, '1 minute', NULL, NULL);
-- refusals
CALL queue_await(NULL, '1 second', NULL, NULL);
\echo :LAST_ERROR_SQLSTATE
CALL queue_await(:done_id, NULL::interval, NULL, NULL);
\echo :LAST_ERROR_SQLSTATE
CALL queue_await(:done_id, '-1 second', NULL, NULL);
\echo :LAST_ERROR_SQLSTATE
CALL queue_await(:done_id, '1 hour 1 second', NULL, NULL);
\echo :LAST_ERROR_SQLSTATE
BEGIN;
CALL queue_await(:done_id, '1 second', NULL, NULL);
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;

-- A sender declared RETURNS jsonb gives its job's result; another return
-- type is ignored; a result above the limit fails the attempt, and the
-- sender's writes with it.
CREATE TABLE r_sent (job bigint);
CREATE FUNCTION r_render(job jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO r_sent VALUES ((job->>'id')::bigint);
    IF job->'payload' ? 'big' THEN
        RETURN jsonb_build_object('big', repeat('x', 1024 * 1024));
    END IF;
    RETURN CASE WHEN job->'payload' ? 'null' THEN NULL
                ELSE jsonb_build_object('url', 'https://cdn.example.com/' || (job->'payload'->>'image'))
           END;
END $$;
CREATE FUNCTION r_count(job jsonb) RETURNS int LANGUAGE sql AS 'SELECT 42';
CREATE FUNCTION r_drained(q text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    FOR i IN 1..300 LOOP
        IF NOT EXISTS (SELECT FROM queue_jobs
                        WHERE queue = q AND status IN ('pending', 'processing')) THEN
            RETURN true;
        END IF;
        PERFORM pg_sleep(0.1);
    END LOOP;
    RETURN false;
END $$;
SELECT queue_create('r.push', max_attempts => 1);
SELECT queue_register_sender('r.push', 'r_render(jsonb)');
SELECT count(*) FROM queue_enqueue_batch('r.push',
    ARRAY['{"image": "a.png"}', '{"null": true}', '{"big": true}']::jsonb[]);
SELECT r_drained('r.push');
SELECT payload, status, result, last_error FROM queue_jobs WHERE queue = 'r.push' ORDER BY id;
SELECT count(*) AS written FROM r_sent;
SELECT queue_create('r.int');
SELECT queue_register_sender('r.int', 'r_count(jsonb)');
SELECT queue_enqueue('r.int', '{}') > 0 AS enqueued;
SELECT r_drained('r.int');
SELECT status, result FROM queue_jobs WHERE queue = 'r.int';
