\set SHOW_CONTEXT never
SET datestyle = ISO;
SET intervalstyle = postgres;
SET timezone = UTC;
-- A lease past its expiry still counts as held until someone claims the job.
SELECT queue_create('l.held', lease => '200 milliseconds');
SELECT queue_enqueue('l.held', '{}') > 0 AS enqueued;
SELECT id, lease FROM queue_claim('l.held') \gset h_
SELECT pg_sleep(0.4);
SELECT queue_extend(:h_id, :'h_lease', '1 minute') IS NOT NULL AS still_held;
SELECT queue_complete(:h_id, :'h_lease') AS completed;

-- Stale-lease recovery: once the lease has expired the job is claimable
-- again, with a new attempt and a new lease; the old lease is fenced off.
SELECT queue_create('l.stale', lease => '1 second', max_attempts => 2);
SELECT queue_enqueue('l.stale', '{"n": 1}') AS s \gset
SELECT id, lease, attempt FROM queue_claim('l.stale', 'first') \gset old_
SELECT count(*) AS while_leased FROM queue_claim('l.stale', 'second');
SELECT pg_sleep(1.2);
SELECT id, lease, attempt FROM queue_claim('l.stale', 'second', lease => '1 minute') \gset new_
SELECT :new_id = :s AS same_job, :new_attempt AS attempt, :'new_lease' <> :'old_lease' AS new_lease;
SELECT last_error, worker FROM queue_job(:s);
SELECT queue_complete(:s, :'old_lease') AS old_complete;
SELECT queue_fail(:s, :'old_lease', 'late') IS NULL AS old_fail_refused;
SELECT queue_extend(:s, :'old_lease', '1 hour') IS NULL AS old_extend_refused;
SELECT status, attempts, worker FROM queue_job(:s);
SELECT queue_complete(:s, :'new_lease') AS new_complete;

-- With no attempt left, an expired lease makes the job failed.
SELECT queue_enqueue('l.stale', '{"n": 2}') AS t \gset
SELECT queue_fail(id, lease, 'first try', retry_in => '0') FROM queue_claim('l.stale', 'a') WHERE id = :t;
SELECT attempt FROM queue_claim('l.stale', 'b');
SELECT pg_sleep(1.2);
SELECT count(*) AS claimable FROM queue_claim('l.stale', 'c');
SELECT status, attempts, last_error, worker FROM queue_job(:t);
