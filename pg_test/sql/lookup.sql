\set SHOW_CONTEXT never
SET datestyle = ISO;
SET intervalstyle = postgres;
SET timezone = UTC;
-- queue_job: the row of one job
SELECT queue_create('k.look', max_attempts => 4);
SELECT queue_enqueue('k.look', '{"a": 1}', priority => 2, dedup_key => 'only-one',
                     headers => '{"h": "v"}') AS j \gset
SELECT id = :j AS same_id, queue, status, payload, headers, priority, attempts, max_attempts,
       run_at <= clock_timestamp() AS due, enqueued_at <= clock_timestamp() AS enqueued,
       finished_at, last_error, worker, lease_expires_at, dedup_key
  FROM queue_job(:j);
SELECT count(*) FROM queue_job(-1);
SELECT * FROM queue_job(NULL);
\echo :LAST_ERROR_SQLSTATE

-- the view holds every retained job, whatever its status
SELECT queue_enqueue('k.look', '{"a": 2}') AS j2 \gset
SELECT queue_enqueue('k.look', '{"a": 3}') AS j3 \gset
SELECT queue_complete(id, lease) FROM queue_claim('k.look') WHERE id = :j;
SELECT queue_fail(id, lease, 'gave up', permanent => true) FROM queue_claim('k.look') WHERE id = :j2;
SELECT count(*) FROM queue_claim('k.look', 'k-worker');
SELECT payload->>'a' AS a, status, attempts, finished_at IS NOT NULL AS finished,
       lease_expires_at IS NOT NULL AS leased, worker, last_error
  FROM queue_jobs WHERE queue = 'k.look' ORDER BY id;

-- the shapes of the view and of queue_claim, as the README gives them
SELECT column_name, data_type FROM information_schema.columns
 WHERE table_name = 'queue_jobs' ORDER BY ordinal_position;
\x on
SELECT p.proname, pg_get_function_arguments(p.oid) AS arguments,
       pg_get_function_result(p.oid) AS result
  FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
 WHERE p.proname LIKE 'queue\_%' AND n.nspname = 'public'
 ORDER BY p.proname;
\x off
-- the SQL functions that touch the tables pin their search_path; the C ones
-- carry no SET clause (it would cost every call a GUC save and restore) and
-- use the extension's own search path per call (privileges.sql tries it)
SELECT p.proname, p.proconfig
  FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
 WHERE p.proname LIKE 'queue\_%' AND n.nspname = 'public'
 ORDER BY p.proname;
