\pset footer off
\echo
\echo '== 1. A queue for outgoing e-mail: 3 attempts, exponential backoff from 1 second'
CREATE EXTENSION queue;
SELECT queue_create('emails', max_attempts => 3, backoff => 'exponential', retry_delay => '1 second');

\echo
\echo '== 2. Enqueue: one by one, with a priority, in a batch, and with a dedup key'
SELECT queue_enqueue('emails', '{"to": "ada@example.com", "subject": "Welcome"}') AS job_id;
SELECT queue_enqueue('emails', '{"to": "bob@example.com", "subject": "Password reset"}', priority => 10) AS job_id;
SELECT * FROM queue_enqueue_batch('emails', ARRAY[
    '{"to": "cy@example.com", "subject": "Newsletter"}',
    '{"to": "di@example.invalid", "subject": "Newsletter"}']::jsonb[]) AS job_id;
SELECT queue_enqueue('emails', '{"to": "ada@example.com", "subject": "Receipt 42"}', dedup_key => 'receipt-42') AS first,
       queue_enqueue('emails', '{"to": "ada@example.com", "subject": "Receipt 42"}', dedup_key => 'receipt-42') AS second_is_the_same;
SELECT id, status, priority, payload->>'to' AS "to", payload->>'subject' AS subject FROM queue_jobs ORDER BY id;

\echo
\echo '== 3. A worker claims three jobs: highest priority first, then oldest; each with its own lease'
CREATE TEMP TABLE claimed AS SELECT * FROM queue_claim('emails', 'worker-1', 3);
SELECT id, attempt, max_attempts, payload->>'subject' AS subject, lease_expires_at - now() < interval '5 minutes 1 second' AS leased_5_min FROM claimed;

\echo
\echo '== 4. The worker reports: two sent, one SMTP timeout (retried later), a bounce (permanent)'
SELECT id, queue_complete(id, lease) AS completed FROM claimed WHERE payload->>'subject' IN ('Password reset', 'Welcome');
SELECT id, queue_fail(id, lease, 'SMTP timeout') AS new_status FROM claimed WHERE payload->>'subject' = 'Newsletter';
SELECT id, queue_fail(id, lease, 'mailbox does not exist', permanent => true) AS new_status
  FROM queue_claim('emails', 'worker-1') WHERE payload->>'to' LIKE '%.invalid';
SELECT id, status, attempts, last_error,
       CASE WHEN run_at > now() THEN round(extract(epoch FROM run_at - now())::numeric, 1) END AS due_in_s
  FROM queue_jobs ORDER BY id;

\echo
\echo '== 5. A second later the failed job is due again: claimed for attempt 2, and this time it works'
SELECT pg_sleep(1.2);
SELECT id, attempt, payload->>'subject' AS subject, queue_complete(id, lease) AS completed
  FROM queue_claim('emails', 'worker-2', 10);

\echo
\echo '== 6. Where everything ended up'
SELECT id, status, attempts, worker, last_error, payload->>'subject' AS subject FROM queue_jobs ORDER BY id;

\echo
\echo '== 7. What a DBA watches: one row per queue in queue_stats, and the dead letters in queue_failed'
SELECT queue, paused, pending, scheduled, processing, succeeded, failed, enqueued_total, succeeded_total, failed_total
  FROM queue_stats;
SELECT id, queue, payload->>'to' AS "to", attempts, last_error FROM queue_failed;
-- the background worker of this database, started when the extension was created
SELECT w.database, w.state, a.backend_type, a.application_name
  FROM queue_workers w JOIN pg_stat_activity a USING (pid);

\echo
\echo '== 8. Once the cause is fixed, the dead letter is retried: pending again with all its attempts, and it goes through'
SELECT id, queue_retry(id) AS retried FROM queue_failed WHERE queue = 'emails';
SELECT id, attempt, queue_complete(id, lease) AS completed FROM queue_claim('emails', 'worker-2');
SELECT queue, pending, succeeded, failed, enqueued_total, succeeded_total, failed_total FROM queue_stats;

\echo
\echo '== 9. Push delivery: an outbox queue delivered by the background worker through a SQL sender'
-- The sender is a plain SQL function of one jsonb argument, written like any
-- other: it runs as the role that registers it, with the settings a session
-- of that role starts with, so its unqualified names resolve as in the role's
-- own sessions (here "$user", public finds the schema hooks). It records the
-- call in an outbox table; a real one could write to a table another system
-- reads.
CREATE ROLE hooks;
CREATE SCHEMA hooks AUTHORIZATION hooks;
SET ROLE hooks;
CREATE TABLE hooks.outbox (job_id bigint, attempt int, url text, sent_by name, sent_at timestamptz DEFAULT clock_timestamp());
CREATE FUNCTION hooks.post(job jsonb) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF job->'payload'->>'url' NOT LIKE 'https://%' THEN
        -- QU001: no retry can fix this one
        RAISE EXCEPTION 'not an https URL: %', job->'payload'->>'url' USING ERRCODE = 'QU001';
    END IF;
    IF (job->'payload'->>'flaky')::boolean AND (job->>'attempt')::int < 2 THEN
        RAISE EXCEPTION 'HTTP 503 from %', job->'payload'->>'url';
    END IF;
    INSERT INTO outbox (job_id, attempt, url, sent_by)
    VALUES ((job->>'id')::bigint, (job->>'attempt')::int, job->'payload'->>'url', current_user);
END $$;
SELECT queue_create('outbox', retry_delay => '200 ms');
SELECT queue_register_sender('outbox', 'post(jsonb)', batch_size => 100);
RESET ROLE;
SELECT queue_enqueue('outbox', '{"url": "https://example.com/order/1"}') AS job_id;
SELECT queue_enqueue('outbox', '{"url": "https://example.com/order/2", "flaky": true}') AS job_id;
SELECT queue_enqueue('outbox', '{"url": "http://example.com/insecure"}') AS job_id;
-- nobody claims: the worker was woken by the commits and delivers on its own
-- (this waits until it has, at most 30 s)
DO $$
BEGIN
    FOR i IN 1..300 LOOP
        EXIT WHEN NOT EXISTS (SELECT FROM queue_jobs
                               WHERE queue = 'outbox' AND status IN ('pending', 'processing'));
        PERFORM pg_sleep(0.1);
    END LOOP;
END $$;
SELECT job_id, attempt, url, sent_by FROM hooks.outbox ORDER BY job_id;
SELECT id, status, attempts, last_error FROM queue_jobs WHERE queue = 'outbox' ORDER BY id;
SELECT queue, sender, pending, succeeded, failed, succeeded_total, failed_total FROM queue_stats WHERE queue = 'outbox';
SELECT w.database, w.state, w.jobs_delivered, w.jobs_failed, w.last_error FROM queue_workers w;

\echo
\echo '== 10. HTTP delivery: a webhook queue that the worker POSTs to a local receiver, signed'
-- A superuser allows the endpoint (nothing is sent anywhere before); then
-- the queue's owner registers it. The receiver answers "ok" with 200, "flaky"
-- with 503 once and then 200, "gone" with 404 (a dead letter at once).
\set endpoint http://127.0.0.1: :hook_port
ALTER SYSTEM SET queue.webhook_allow = :'endpoint';
SELECT pg_reload_conf();
SET queue.webhook_allow = :'endpoint';
SELECT queue_create('orders', retry_delay => '200 ms');
SELECT queue_register_webhook('orders', :'endpoint' || '/orders', secret => :'secret', max_in_flight => 8);
SELECT queue_enqueue('orders', '{"case": "ok"}') AS job_id;
SELECT queue_enqueue('orders', '{"case": "flaky"}') AS job_id;
SELECT queue_enqueue('orders', '{"case": "gone"}') AS job_id;
DO $$
BEGIN
    FOR i IN 1..300 LOOP
        EXIT WHEN NOT EXISTS (SELECT FROM queue_jobs
                               WHERE queue = 'orders' AND status IN ('pending', 'processing'));
        PERFORM pg_sleep(0.1);
    END LOOP;
END $$;
SELECT id, payload->>'case' AS "case", status, attempts, last_error FROM queue_jobs WHERE queue = 'orders' ORDER BY id;
SELECT queue, sender, succeeded, failed, succeeded_total, failed_total FROM queue_stats WHERE queue = 'orders';
