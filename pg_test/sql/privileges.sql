\set SHOW_CONTEXT never
SET datestyle = ISO;
SET intervalstyle = postgres;
SET timezone = UTC;
CREATE ROLE queue_alice;
CREATE ROLE queue_bob;
CREATE ROLE queue_carol IN ROLE queue_alice;
CREATE ROLE queue_dba IN ROLE pg_monitor;

-- anyone may create a queue, and owns it
SET ROLE queue_alice;
SELECT queue_create('r.alice');
SELECT queue_enqueue('r.alice', '{"from": "alice"}') > 0 AS enqueued;
RESET ROLE;
SELECT owner FROM queue_queues WHERE name = 'r.alice';

-- others may produce and consume, but not administer
SET ROLE queue_bob;
SELECT queue_enqueue('r.alice', '{"from": "bob"}') > 0 AS enqueued;
SELECT payload, queue_complete(id, lease) FROM queue_claim('r.alice', 'bob', 10);
SELECT queue_alter('r.alice', max_attempts => 1);
\echo :LAST_ERROR_SQLSTATE
SELECT queue_drop('r.alice', force => true);
\echo :LAST_ERROR_SQLSTATE
-- and never reach the tables behind the API
INSERT INTO queue_queues (name, owner, max_attempts, backoff, retry_delay, max_retry_delay, lease, retention)
VALUES ('r.forged', 'queue_bob', 1, 'fixed', '1s', '1s', '1s', '1s');
\echo :LAST_ERROR_SQLSTATE
UPDATE queue_live SET state = 'ready';
\echo :LAST_ERROR_SQLSTATE
DELETE FROM queue_dead;
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) FROM queue_jobs;
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM queue_maintain();
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
SELECT max_attempts FROM queue_queues WHERE name = 'r.alice';

-- a member of the owning role may administer it
SET ROLE queue_carol;
SELECT queue_alter('r.alice', max_attempts => 3);
RESET ROLE;
SELECT max_attempts FROM queue_queues WHERE name = 'r.alice';

-- pausing, resuming and purging are for the owner too
SET ROLE queue_bob;
SELECT queue_pause('r.alice');
\echo :LAST_ERROR_SQLSTATE
SELECT queue_resume('r.alice');
\echo :LAST_ERROR_SQLSTATE
SELECT queue_purge('r.alice');
\echo :LAST_ERROR_SQLSTATE
SELECT queue_purge('r.alice', 'failed');
\echo :LAST_ERROR_SQLSTATE
-- while repairing a job is open to all, like producing and consuming
SELECT queue_enqueue('r.alice', '{"to": "cancel"}') AS c \gset
SELECT queue_cancel(:c) AS cancelled, queue_retry(:c) AS retried;
-- the views are for monitoring roles, and the upkeep for the owner
SELECT count(*) FROM queue_stats;
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) FROM queue_failed;
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) FROM queue_workers;
\echo :LAST_ERROR_SQLSTATE
SELECT queue_cleanup();
\echo :LAST_ERROR_SQLSTATE
SELECT queue_expire(1);
\echo :LAST_ERROR_SQLSTATE
-- and no one forges a counter
INSERT INTO queue_tallies (queue_id, enqueued_total) VALUES (1, 1000);
\echo :LAST_ERROR_SQLSTATE
UPDATE queue_counters SET enqueued_total = 0;
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
SELECT paused FROM queue_queues WHERE name = 'r.alice';
SELECT status, count(*) FROM queue_jobs WHERE queue = 'r.alice' GROUP BY 1 ORDER BY 1;

-- the owner, no superuser, pauses, resumes and purges her queue
SET ROLE queue_alice;
SELECT queue_pause('r.alice');
SELECT count(*) FROM queue_claim('r.alice');
SELECT queue_resume('r.alice');
SELECT queue_purge('r.alice', 'succeeded') AS purged;
RESET ROLE;
SELECT status, count(*) FROM queue_jobs WHERE queue = 'r.alice' GROUP BY 1 ORDER BY 1;
-- and so does a member of her role
SET ROLE queue_carol;
SELECT queue_pause('r.alice');
SELECT queue_resume('r.alice');
SELECT queue_purge('r.alice', 'failed') AS purged;
RESET ROLE;

-- pg_monitor reads the views
SET ROLE queue_dba;
SELECT count(*) > 0 AS readable FROM queue_jobs;
SELECT count(*) > 0 AS readable FROM queue_stats;
SELECT count(*) >= 0 AS readable FROM queue_failed;
SELECT count(*) >= 0 AS readable FROM queue_workers;
RESET ROLE;

-- functions and tables found first on the caller's search_path are never
-- used, also when the statements are planned again (a rotation invalidates
-- every plan; twice, so that the ring is back where later tests expect it)
SELECT live_rotated FROM queue_maintain(force => true);
SELECT live_rotated FROM queue_maintain(force => true);
CREATE SCHEMA queue_trap;
GRANT USAGE, CREATE ON SCHEMA queue_trap TO queue_bob;
SET ROLE queue_bob;
CREATE FUNCTION queue_trap.nextval(regclass) RETURNS bigint LANGUAGE sql
    AS $$ SELECT 1 / 0 $$;
CREATE FUNCTION queue_trap.gen_random_uuid() RETURNS uuid LANGUAGE sql
    AS $$ SELECT '00000000-0000-0000-0000-000000000000'::uuid $$;
CREATE TEMP TABLE queue_live (id bigint, payload jsonb);
CREATE TEMP TABLE queue_queues (id integer, name text);
SET search_path = queue_trap, public;
SELECT queue_enqueue('r.alice', '{}', dedup_key => 'trap') > 0 AS enqueued;
SELECT count(*) AS trapped FROM pg_temp.queue_live;
SELECT lease <> '00000000-0000-0000-0000-000000000000' AS real_lease
  FROM queue_claim('r.alice', max_jobs => 1);
RESET search_path;
DROP TABLE pg_temp.queue_live, pg_temp.queue_queues;
RESET ROLE;

-- a superuser may administer any queue
SELECT queue_drop('r.alice', force => true);
DROP SCHEMA queue_trap CASCADE;
DROP ROLE queue_alice, queue_bob, queue_carol, queue_dba;
