\set SHOW_CONTEXT never
SET datestyle = ISO;
SET intervalstyle = postgres;
SET timezone = UTC;
-- Push delivery: registering a sender, and what registration refuses.
CREATE SCHEMA s;
CREATE TABLE s.sent (job bigint, queue text, attempt int, payload jsonb, who text);
CREATE ROLE s_owner;
CREATE ROLE s_stranger;
GRANT USAGE ON SCHEMA s TO s_stranger;
GRANT USAGE ON SCHEMA s TO s_owner;
GRANT INSERT ON s.sent TO s_owner;
CREATE FUNCTION s.deliver(job jsonb) RETURNS void LANGUAGE sql AS $$
    INSERT INTO s.sent VALUES ((job->>'id')::bigint, job->>'queue', (job->>'attempt')::int,
                               job->'payload', current_user)
$$;
CREATE FUNCTION s.two_args(job jsonb, extra int) RETURNS void LANGUAGE sql AS 'SELECT';
CREATE FUNCTION s.text_arg(job text) RETURNS void LANGUAGE sql AS 'SELECT';
CREATE FUNCTION s.no_args() RETURNS void LANGUAGE sql AS 'SELECT';
CREATE PROCEDURE s.proc(job jsonb) LANGUAGE sql AS 'SELECT';
CREATE FUNCTION s.many(job jsonb) RETURNS SETOF int LANGUAGE sql AS 'SELECT 1';
CREATE FUNCTION s.private(job jsonb) RETURNS void LANGUAGE sql AS 'SELECT';
REVOKE EXECUTE ON FUNCTION s.private(jsonb) FROM PUBLIC;
-- Waits (up to 30 s) until queue q has no unfinished job.
CREATE FUNCTION s.drained(q text) RETURNS boolean LANGUAGE plpgsql AS $$
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

SET ROLE s_owner;
SELECT queue_create('snd.push');
SELECT queue_register_sender('snd.push', 's.deliver(jsonb)', batch_size => 5);
RESET ROLE;
SELECT queue, sender FROM queue_stats WHERE queue = 'snd.push';
-- delivered by the worker, as s_owner, in claim order of each batch
SELECT count(*) FROM queue_enqueue_batch('snd.push',
    ARRAY['{"n": 1}', '{"n": 2}', '{"n": 3}', '{"n": 4}', '{"n": 5}', '{"n": 6}', '{"n": 7}']::jsonb[]);
SELECT s.drained('snd.push');
SELECT queue, attempt, payload, who FROM s.sent ORDER BY job;
SELECT status, count(*) FROM queue_jobs WHERE queue = 'snd.push' GROUP BY status;
-- a sender queue hands nothing to pull consumers
SELECT * FROM queue_claim('snd.push');
-- registering again replaces the sender and its batch size
SELECT queue_register_sender('snd.push', 's.deliver(jsonb)', batch_size => 10000);
SELECT sender FROM queue_stats WHERE queue = 'snd.push';

-- what registration refuses
SELECT queue_register_sender('snd.push', 's.two_args(jsonb, int)');
SELECT queue_register_sender('snd.push', 's.text_arg(text)');
SELECT queue_register_sender('snd.push', 's.no_args()');
SELECT queue_register_sender('snd.push', 's.proc(jsonb)');
SELECT queue_register_sender('snd.push', 's.many(jsonb)');
SELECT queue_register_sender('snd.push', 'pg_catalog.count("any")');
SELECT queue_register_sender('snd.push', 's.missing(jsonb)');
SELECT queue_register_sender('snd.push', 123456789::oid::regprocedure);
SET ROLE s_owner;
SELECT queue_register_sender('snd.push', 's.private(jsonb)');
RESET ROLE;
SET ROLE s_stranger;
SELECT queue_register_sender('snd.push', 's.deliver(jsonb)');
SELECT queue_unregister_sender('snd.push');
RESET ROLE;
SELECT queue_register_sender('snd.push', 's.deliver(jsonb)', batch_size => 0);
SELECT queue_register_sender('snd.push', 's.deliver(jsonb)', batch_size => 10001);
SELECT queue_register_sender('snd.push', 's.deliver(jsonb)', batch_size => NULL);
SELECT queue_register_sender('snd.push', NULL);
SELECT queue_register_sender(NULL, 's.deliver(jsonb)');
SELECT queue_register_sender('snd.nope', 's.deliver(jsonb)');
SELECT queue_register_sender('Snd.Bad', 's.deliver(jsonb)');
-- the worker name is the worker's own
SELECT queue_create('snd.pull');
SELECT * FROM queue_claim('snd.pull', worker => 'queue worker');
-- nothing changed
SELECT queue, sender FROM queue_stats WHERE queue LIKE 'snd.%' ORDER BY queue;

-- unregistering
SELECT queue_unregister_sender('snd.push');
SELECT queue_unregister_sender('snd.push');
SELECT queue_unregister_sender('snd.nope');
SELECT queue_unregister_sender(NULL);
SELECT queue, sender FROM queue_stats WHERE queue = 'snd.push';
SELECT queue_enqueue('snd.push', '{"n": 8}') > 0 AS enqueued;
SELECT payload FROM queue_claim('snd.push');

SELECT queue_drop('snd.push', force => true), queue_drop('snd.pull');
DROP SCHEMA s CASCADE;
DROP ROLE s_owner;
DROP ROLE s_stranger;
