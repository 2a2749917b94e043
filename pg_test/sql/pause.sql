\set SHOW_CONTEXT never
SET datestyle = ISO;
SET intervalstyle = postgres;
SET timezone = UTC;
-- A paused queue still takes jobs, but hands none out.
SELECT queue_create('p.pause');
SELECT count(*) FROM queue_enqueue_batch('p.pause', array_fill('{}'::jsonb, ARRAY[3]));
SELECT queue_enqueue('p.pause', '{"soon": true}', delay => '1 second') > 0 AS scheduled;
SELECT queue_pause('p.pause');
SELECT queue_enqueue('p.pause', '{"while": "paused"}') > 0 AS accepted;
SELECT count(*) FROM queue_claim('p.pause', max_jobs => 10);
SELECT queue, paused, pending, scheduled, processing FROM queue_stats WHERE queue = 'p.pause';
-- pausing a paused queue changes nothing
SELECT queue_pause('p.pause');
SELECT paused FROM queue_stats WHERE queue = 'p.pause';
-- resumed, every due job is claimable again, the one that fell due
-- while the queue was paused included
SELECT pg_sleep(1.1);
SELECT queue_resume('p.pause');
SELECT payload FROM queue_claim('p.pause', max_jobs => 10) ORDER BY id;
SELECT queue, paused, pending, scheduled, processing FROM queue_stats WHERE queue = 'p.pause';
SELECT queue_resume('p.pause');
-- pausing in a transaction that rolls back leaves the queue running
BEGIN;
SELECT queue_pause('p.pause');
ROLLBACK;
SELECT paused FROM queue_stats WHERE queue = 'p.pause';

-- bad input
SELECT queue_pause(NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT queue_resume(NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT queue_pause('p.missing');
\echo :LAST_ERROR_SQLSTATE
SELECT queue_resume('p.missing');
\echo :LAST_ERROR_SQLSTATE
SELECT queue_pause('Not A Name');
\echo :LAST_ERROR_SQLSTATE
