\set SHOW_CONTEXT never
SET datestyle = ISO;
SET intervalstyle = postgres;
SET timezone = UTC;
-- queue_retry: a dead letter goes back to pending, due now, attempts reset;
-- its last_error stays for the record.
SELECT queue_create('f.fix', max_attempts => 2);
SELECT queue_enqueue('f.fix', '{"n": 1}', priority => 3) AS j \gset
SELECT queue_fail(id, lease, 'smtp down', permanent => true) FROM queue_claim('f.fix');
SELECT status, attempts, last_error, finished_at IS NOT NULL AS finished FROM queue_job(:j);
SELECT queue_retry(:j);
SELECT status, attempts, last_error, priority, run_at <= clock_timestamp() AS due, finished_at
  FROM queue_job(:j);
-- a second retry has nothing to do
SELECT queue_retry(:j);
-- the job runs again with all of its attempts
SELECT id = :j AS same_job, attempt, max_attempts, payload, lease FROM queue_claim('f.fix') \gset
\echo :same_job :attempt :max_attempts :payload
SELECT queue_complete(:j, :'lease');
-- a succeeded job is not retried
SELECT queue_retry(:j);
SELECT status FROM queue_job(:j);

-- queue_cancel: a pending job ends cancelled
SELECT queue_enqueue('f.fix', '{"n": 2}', delay => '1 hour') AS pending \gset
SELECT queue_cancel(:pending);
SELECT status, finished_at IS NOT NULL AS finished FROM queue_job(:pending);
SELECT queue_cancel(:pending);
-- a processing job too: its lease is no longer held
SELECT queue_enqueue('f.fix', '{"n": 3}') AS busy \gset
SELECT id, lease FROM queue_claim('f.fix') \gset busy_
SELECT queue_cancel(:busy);
SELECT queue_complete(:busy_id, :'busy_lease') AS completed,
       queue_fail(:busy_id, :'busy_lease', 'late') AS failed,
       queue_extend(:busy_id, :'busy_lease', '1 minute') AS extended;
SELECT status, attempts FROM queue_job(:busy);
-- a cancelled job can be retried
SELECT queue_retry(:busy);
SELECT status, attempts FROM queue_job(:busy);
-- nothing else is cancelled: succeeded, failed, missing
SELECT queue_cancel(:j) AS succeeded_job;
SELECT queue_fail(id, lease, 'no', permanent => true) FROM queue_claim('f.fix') WHERE id = :busy;
SELECT queue_cancel(:busy) AS failed_job;
SELECT status FROM queue_job(:busy);
SELECT queue_cancel(-1) AS missing, queue_retry(-1) AS missing;

-- A retry never makes two unfinished jobs with one dedup key.
SELECT queue_enqueue('f.fix', '{"v": 1}', dedup_key => 'k') AS k1 \gset
SELECT queue_fail(id, lease, 'bad', permanent => true) FROM queue_claim('f.fix');
SELECT queue_enqueue('f.fix', '{"v": 2}', dedup_key => 'k') AS k2 \gset
SELECT queue_retry(:k1) AS while_k2_unfinished;
SELECT status FROM queue_job(:k1);
SELECT queue_cancel(:k2);
SELECT queue_retry(:k1) AS after_k2_ended;
SELECT queue_enqueue('f.fix', '{"v": 3}', dedup_key => 'k') = :k1 AS k1_holds_the_key;

-- A retry in a transaction that rolls back changes nothing.
SELECT queue_cancel(:k1);
BEGIN;
SELECT queue_retry(:k1);
ROLLBACK;
SELECT status FROM queue_job(:k1);

-- bad input
SELECT queue_retry(NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT queue_cancel(NULL);
\echo :LAST_ERROR_SQLSTATE
