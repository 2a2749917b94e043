\set SHOW_CONTEXT never
SET datestyle = ISO;
SET intervalstyle = postgres;
SET timezone = UTC;
-- A failure with attempts left schedules a retry by the queue's backoff:
-- retry n waits retry_delay (fixed), retry_delay * n (linear) or
-- retry_delay * 2^(n-1) (exponential), capped, plus at most 10% jitter.
-- The first two failures here use retry_in => '0' to come back at once.
-- Whether the third retry was scheduled between lo and hi after the failure.
CREATE FUNCTION pg_temp.third_retry_within(queue text, lo interval, hi interval)
RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    job record;
    before timestamptz;
BEGIN
    FOR attempt IN 1..3 LOOP
        SELECT * INTO job FROM queue_claim(queue);
        before := clock_timestamp();
        IF queue_fail(job.id, job.lease, 'failure ' || attempt,
                      retry_in => CASE WHEN attempt < 3 THEN interval '0' END) <> 'pending' THEN
            RAISE 'attempt % did not end pending', attempt;
        END IF;
    END LOOP;
    RETURN (SELECT run_at BETWEEN before + lo AND clock_timestamp() + hi FROM queue_job(job.id));
END
$$;
SELECT queue_create('f.fixed', backoff => 'fixed', retry_delay => '10 seconds');
SELECT queue_create('f.linear', backoff => 'linear', retry_delay => '10 seconds');
SELECT queue_create('f.exponential', backoff => 'exponential', retry_delay => '10 seconds');
SELECT queue_create('f.capped', backoff => 'exponential', retry_delay => '10 seconds',
                    max_retry_delay => '25 seconds');
SELECT queue_enqueue(q, '{}') > 0 AS enqueued
  FROM unnest(ARRAY['f.fixed', 'f.linear', 'f.exponential', 'f.capped']) AS q;
SELECT pg_temp.third_retry_within('f.fixed', '10 seconds', '11 seconds') AS fixed_10s;
SELECT pg_temp.third_retry_within('f.linear', '30 seconds', '33 seconds') AS linear_30s;
SELECT pg_temp.third_retry_within('f.exponential', '40 seconds', '44 seconds') AS exponential_40s;
SELECT pg_temp.third_retry_within('f.capped', '25 seconds', '27.5 seconds') AS capped_25s;
SELECT queue, status, attempts, last_error, lease_expires_at FROM queue_jobs
 WHERE queue LIKE 'f.%' ORDER BY queue;

-- retry_in is exact: no jitter
SELECT queue_create('f.retry_in');
SELECT queue_enqueue('f.retry_in', '{}') AS r \gset
SELECT id, lease FROM queue_claim('f.retry_in') \gset ri_
SELECT clock_timestamp() AS before \gset
SELECT queue_fail(:ri_id, :'ri_lease', 'try later', retry_in => '7 seconds');
SELECT run_at BETWEEN :'before'::timestamptz + interval '7 seconds'
                  AND clock_timestamp() + interval '7 seconds' AS exact
  FROM queue_job(:r);
SELECT count(*) AS not_due_yet FROM queue_claim('f.retry_in');

-- permanent: straight to failed, whatever the attempts left
SELECT queue_create('f.permanent', max_attempts => 10);
SELECT queue_enqueue('f.permanent', '{"to": "nobody"}') AS p \gset
SELECT id, lease FROM queue_claim('f.permanent') \gset pe_
SELECT queue_fail(:pe_id, :'pe_lease', 'bad address', permanent => true);
SELECT status, attempts, max_attempts, last_error, finished_at IS NOT NULL AS finished
  FROM queue_job(:p);
-- the lease is gone with it
SELECT queue_fail(:pe_id, :'pe_lease', 'again') AS again;
SELECT queue_complete(:pe_id, :'pe_lease') AS complete_after_failed;

-- max_attempts: the last failure ends in failed, even with retry_in
SELECT queue_create('f.max', max_attempts => 2);
SELECT queue_enqueue('f.max', '{}') AS m \gset
SELECT queue_fail(id, lease, 'first', retry_in => '0') FROM queue_claim('f.max');
SELECT queue_fail(id, lease, 'second', retry_in => '0') FROM queue_claim('f.max');
SELECT status, attempts, last_error FROM queue_job(:m);
SELECT count(*) FROM queue_claim('f.max');

-- queue_alter applies at the next failure...
SELECT queue_create('f.alter', max_attempts => 5);
SELECT queue_enqueue('f.alter', '{}') AS a \gset
SELECT id, lease FROM queue_claim('f.alter') \gset al_
SELECT queue_alter('f.alter', max_attempts => 1);
SELECT queue_fail(:al_id, :'al_lease', 'no more tries');
-- ...and at the next claim: a pending job past the new limit is not handed out
SELECT queue_alter('f.alter', max_attempts => 5);
SELECT queue_enqueue('f.alter', '{"n": "will fail twice"}') AS b \gset
SELECT queue_fail(id, lease, 'one', retry_in => '0') FROM queue_claim('f.alter');
SELECT queue_fail(id, lease, 'two', retry_in => '0') FROM queue_claim('f.alter');
SELECT queue_enqueue('f.alter', '{"n": "fresh"}') AS c \gset
SELECT queue_alter('f.alter', max_attempts => 2);
SELECT payload->>'n' AS job, attempt FROM queue_claim('f.alter', max_jobs => 10);
SELECT id = :b AS the_exhausted_one, status, attempts, last_error
  FROM queue_jobs WHERE queue = 'f.alter' AND status = 'failed' AND id = :b;

-- no lease held: NULL, and nothing changes
SELECT queue_fail(:r, gen_random_uuid(), 'x') IS NULL AS not_held;
SELECT queue_fail(-1, gen_random_uuid(), 'x') IS NULL AS missing;
SELECT status, last_error FROM queue_job(:r);
-- bad arguments
SELECT queue_create('f.args');
SELECT queue_enqueue('f.args', '{}') > 0 AS enqueued;
SELECT id, lease FROM queue_claim('f.args') \gset ar_
SELECT queue_fail(:ar_id, :'ar_lease', 'x', retry_in => '-1 second');
\echo :LAST_ERROR_SQLSTATE
SELECT queue_fail(:ar_id, :'ar_lease', NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT queue_fail(NULL, :'ar_lease', 'x');
\echo :LAST_ERROR_SQLSTATE
SELECT queue_fail(:ar_id, NULL, 'x');
\echo :LAST_ERROR_SQLSTATE
SELECT queue_fail(:ar_id, :'ar_lease', 'x', permanent => NULL);
\echo :LAST_ERROR_SQLSTATE
-- the job is still processing, untouched by the refused calls
SELECT status, attempts, last_error FROM queue_job(:ar_id);
