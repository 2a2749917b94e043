\set SHOW_CONTEXT never
SET datestyle = ISO;
SET intervalstyle = postgres;
SET timezone = UTC;
-- CALL queue_wait(queue, timeout, NULL): ready when a claim could take a
-- job, false after the timeout. (Waking by commits is tested with several
-- connections in tests/tests/wait.rs.)
SELECT queue_create('w.pull');
CALL queue_wait('w.pull', '0', NULL);
CALL queue_wait('w.pull', '100 milliseconds', NULL);
SELECT queue_enqueue('w.pull', '{}') > 0 AS enqueued;
CALL queue_wait('w.pull', '1 minute', NULL);
-- the form without a timeout waits up to 30 seconds
CALL queue_wait('w.pull', NULL);
CALL queue_wait(queue => 'w.pull', timeout => '1 minute', ready => NULL);
-- from a procedure (not in a transaction block itself)
CREATE PROCEDURE w_consume(INOUT claimed boolean) LANGUAGE plpgsql AS $$
DECLARE ready boolean;
BEGIN
    CALL queue_wait('w.pull', '1 minute', ready);
    IF ready THEN
        SELECT count(*) = 1 INTO claimed FROM queue_claim('w.pull');
    END IF;
END $$;
CALL w_consume(NULL);
-- a job due later, a paused queue, a job in flight: not ready
SELECT queue_enqueue('w.pull', '{}', delay => '1 hour') > 0 AS enqueued;
CALL queue_wait('w.pull', '50 milliseconds', NULL);
SELECT queue_enqueue('w.pull', '{}') > 0 AS enqueued;
SELECT queue_pause('w.pull');
CALL queue_wait('w.pull', '50 milliseconds', NULL);
SELECT queue_resume('w.pull');
SELECT count(*) AS claimed FROM queue_claim('w.pull', lease => '1 hour');
CALL queue_wait('w.pull', '50 milliseconds', NULL);

-- refusals
CALL queue_wait('w.missing', '1 second', NULL);
\echo :LAST_ERROR_SQLSTATE
CALL queue_wait(NULL, '1 second', NULL);
\echo :LAST_ERROR_SQLSTATE
CALL queue_wait('w.pull', NULL::interval, NULL);
\echo :LAST_ERROR_SQLSTATE
CALL queue_wait('w.pull', '-1 second', NULL);
\echo :LAST_ERROR_SQLSTATE
CALL queue_wait('w.pull', '1 hour 1 second', NULL);
\echo :LAST_ERROR_SQLSTATE
CALL queue_wait('W PULL', '1 second', NULL);
\echo :LAST_ERROR_SQLSTATE
CREATE FUNCTION w_deliver(job jsonb) RETURNS void LANGUAGE sql AS '';
SELECT queue_create('w.pushed');
SELECT queue_register_sender('w.pushed', 'w_deliver(jsonb)');
CALL queue_wait('w.pushed', '1 second', NULL);
\echo :LAST_ERROR_SQLSTATE
-- it gives up its snapshot while it waits: only outside a transaction block
BEGIN;
CALL queue_wait('w.pull', '1 second', NULL);
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
CREATE FUNCTION w_in_function() RETURNS void LANGUAGE plpgsql AS $$
DECLARE ready boolean;
BEGIN
    CALL queue_wait('w.pull', '1 second', ready);
END $$;
SELECT w_in_function();
\echo :LAST_ERROR_SQLSTATE
-- nothing changed: the job in flight is still there
SELECT status, count(*) FROM queue_jobs WHERE queue = 'w.pull' GROUP BY 1 ORDER BY 1;
