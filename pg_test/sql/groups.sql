\set SHOW_CONTEXT never
SET datestyle = ISO;
SET intervalstyle = postgres;
SET timezone = UTC;
-- Groups, order and limits (docs/groups.md).

-- the options, stored
SELECT queue_create('g.opts', ordered => true, max_in_flight => 10, group_max_in_flight => 2,
                    rate_limit => '100/1 second', group_rate_limit => '5000/1 hour');
SELECT ordered, max_in_flight, group_max_in_flight, rate_limit, rate_window, group_rate_limit,
       group_rate_window
  FROM queue_queues WHERE name = 'g.opts';
-- queue_alter: NULL keeps an option, 0 and 'none' remove a limit
SELECT queue_alter('g.opts', max_in_flight => 0, rate_limit => 'none');
SELECT ordered, max_in_flight, group_max_in_flight, rate_limit, rate_window, group_rate_limit,
       group_rate_window
  FROM queue_queues WHERE name = 'g.opts';
SELECT queue_alter('g.opts', ordered => false, group_max_in_flight => 0,
                   group_rate_limit => 'NONE', rate_limit => '7 / 250 milliseconds');
SELECT ordered, max_in_flight, group_max_in_flight, rate_limit, rate_window, group_rate_limit,
       group_rate_window
  FROM queue_queues WHERE name = 'g.opts';

-- every bad option: 22023 naming it, nothing changed
SELECT queue_create('g.bad', max_in_flight => -1);
\echo :LAST_ERROR_SQLSTATE
SELECT queue_create('g.bad', group_max_in_flight => -5);
\echo :LAST_ERROR_SQLSTATE
SELECT queue_create('g.bad', rate_limit => '0/1 second');
\echo :LAST_ERROR_SQLSTATE
SELECT queue_create('g.bad', rate_limit => '-3/1 second');
\echo :LAST_ERROR_SQLSTATE
SELECT queue_create('g.bad', rate_limit => '10/0 seconds');
\echo :LAST_ERROR_SQLSTATE
SELECT queue_create('g.bad', rate_limit => '10/-1 second');
\echo :LAST_ERROR_SQLSTATE
SELECT queue_create('g.bad', rate_limit => '10/2 days');
\echo :LAST_ERROR_SQLSTATE
SELECT queue_create('g.bad', rate_limit => '10/fortnight');
\echo :LAST_ERROR_SQLSTATE
SELECT queue_create('g.bad', rate_limit => '10');
\echo :LAST_ERROR_SQLSTATE
SELECT queue_create('g.bad', rate_limit => 'ten/1 second');
\echo :LAST_ERROR_SQLSTATE
SELECT queue_create('g.bad', group_rate_limit => '5/');
\echo :LAST_ERROR_SQLSTATE
SELECT queue_create('g.bad', group_rate_limit => '99999999999/1 second');
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) AS created FROM queue_queues WHERE name = 'g.bad';
SELECT queue_alter('g.opts', rate_limit => '1/1 microsecond');
\echo :LAST_ERROR_SQLSTATE
SELECT queue_alter('g.opts', max_in_flight => -2);
\echo :LAST_ERROR_SQLSTATE
SELECT ordered, max_in_flight, rate_limit, rate_window FROM queue_queues WHERE name = 'g.opts';

-- group keys: 1 to 255 characters
SELECT queue_create('g.keys');
SELECT queue_enqueue('g.keys', '{}', group_key => '');
\echo :LAST_ERROR_SQLSTATE
SELECT queue_enqueue('g.keys', '{}', group_key => repeat('k', 256));
\echo :LAST_ERROR_SQLSTATE
SELECT queue_enqueue_batch('g.keys', ARRAY['{}', '{}']::jsonb[], group_keys => ARRAY['a', '']);
\echo :LAST_ERROR_SQLSTATE
SELECT queue_enqueue_batch('g.keys', ARRAY['{}', '{}']::jsonb[], group_keys => ARRAY['a']);
\echo :LAST_ERROR_SQLSTATE
SELECT queue_enqueue_batch('g.keys', ARRAY['{}', '{}']::jsonb[],
                           dedup_keys => ARRAY['a', 'b', 'c']);
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) AS stored FROM queue_jobs WHERE queue = 'g.keys';
SELECT queue_enqueue('g.keys', '{}', group_key => repeat('k', 255)) > 0 AS longest_taken;
SELECT length(group_key) FROM queue_jobs WHERE queue = 'g.keys';

-- dedup keys in a batch: an unfinished job's key, and an earlier element's
SELECT queue_create('g.dedup');
SELECT queue_enqueue('g.dedup', '{"n": 0}', dedup_key => 'x') AS x \gset
SELECT array_agg(id) AS ids FROM queue_enqueue_batch('g.dedup',
    ARRAY['{"n": 1}', '{"n": 2}', '{"n": 3}', '{"n": 4}', '{"n": 5}']::jsonb[],
    dedup_keys => ARRAY['x', 'y', NULL, 'y', 'z']) AS id \gset
SELECT (:'ids'::bigint[])[1] = :x AS held_by_the_job,
       (:'ids'::bigint[])[4] = (:'ids'::bigint[])[2] AS held_by_an_element,
       (:'ids'::bigint[])[2] < (:'ids'::bigint[])[3]
           AND (:'ids'::bigint[])[3] < (:'ids'::bigint[])[5] AS new_ids_ascend;
SELECT payload, dedup_key FROM queue_jobs WHERE queue = 'g.dedup' ORDER BY id;

-- fair turns: three groups (one with five jobs) and a job without a group
SELECT queue_create('g.fair');
SELECT count(*) FROM queue_enqueue_batch('g.fair',
    ARRAY['{"a": 1}', '{"a": 2}', '{"a": 3}', '{"a": 4}', '{"a": 5}']::jsonb[],
    group_keys => ARRAY['a', 'a', 'a', 'a', 'a']);
SELECT queue_enqueue('g.fair', '{"b": 1}', group_key => 'b') > 0 AS b;
SELECT queue_enqueue('g.fair', '{"none": 1}') > 0 AS none;
SELECT queue_enqueue('g.fair', '{"c": 1}', group_key => 'c') > 0 AS c;
SELECT queue_enqueue('g.fair', '{"b": 2}', group_key => 'b') > 0 AS b;
SELECT payload FROM queue_claim('g.fair', max_jobs => 4);
SELECT payload FROM queue_claim('g.fair', max_jobs => 4);
SELECT payload FROM queue_claim('g.fair', max_jobs => 4);
-- higher priority still goes first
SELECT queue_enqueue('g.fair', '{"a": 6}', group_key => 'a') > 0;
SELECT queue_enqueue('g.fair', '{"urgent": 1}', priority => 5, group_key => 'a') > 0;
SELECT payload FROM queue_claim('g.fair', max_jobs => 1);

-- ordered: one job of a group at a time, in enqueue order
SELECT queue_create('g.ord', ordered => true, retry_delay => '1 hour', max_attempts => 2);
SELECT queue_enqueue('g.ord', '{"k": "k1", "n": 1}', group_key => 'k1') AS k1_1 \gset
SELECT queue_enqueue('g.ord', '{"k": "k1", "n": 2}', group_key => 'k1') > 0;
SELECT queue_enqueue('g.ord', '{"k": "k1", "n": 3}', group_key => 'k1') > 0;
SELECT queue_enqueue('g.ord', '{"k": "k2", "n": 1}', group_key => 'k2') > 0;
SELECT payload FROM queue_claim('g.ord', max_jobs => 10);
SELECT lease AS k1_1_lease FROM queue_jobs j JOIN queue_live l USING (id) WHERE id = :k1_1 \gset
SELECT payload FROM queue_claim('g.ord', max_jobs => 10);
-- (k2's job went with the first claim; k1 waits for its head)
SELECT payload->>'k' AS k, status FROM queue_jobs WHERE queue = 'g.ord' ORDER BY id;
SELECT group_key, pending, processing, head_id = :k1_1 AS head_is_k1_1
  FROM queue_groups('g.ord') ORDER BY group_key;
-- a retry keeps its group waiting (head of line)
SELECT queue_fail(:k1_1, :'k1_1_lease', 'boom');
SELECT payload FROM queue_claim('g.ord', max_jobs => 10);
-- once a dead letter, the group moves on
UPDATE queue_live SET run_at = now() - interval '1 second' WHERE id = :k1_1;
SELECT id, lease FROM queue_claim('g.ord', max_jobs => 10) \gset again_
SELECT :again_id = :k1_1 AS the_head_again;
SELECT queue_fail(:again_id, :'again_lease', 'boom again');
SELECT payload FROM queue_claim('g.ord', max_jobs => 10);
-- cancelling the head lets the next one go
SELECT queue_cancel(id) FROM queue_jobs WHERE queue = 'g.ord' AND status = 'processing'
   AND payload->>'k' = 'k1';
SELECT payload FROM queue_claim('g.ord', max_jobs => 10);
SELECT group_key, pending, processing FROM queue_groups('g.ord') ORDER BY group_key;
-- an expired lease makes the head claimable again, never its successor first
SELECT queue_enqueue('g.ord', '{"k": "k2", "n": 2}', group_key => 'k2') > 0;
UPDATE queue_live SET lease_expires_at = now() - interval '1 second'
 WHERE group_key = 'k2' AND state = 'processing';
SELECT payload, attempt FROM queue_claim('g.ord', max_jobs => 10);

-- a dead letter retried while a later job of its group is in flight waits
-- for that job to end: never two jobs of an ordered group in flight
SELECT queue_create('g.ord_retry', ordered => true, max_attempts => 1);
SELECT queue_enqueue('g.ord_retry', '{"n": 1}', group_key => 'k') AS r1 \gset
SELECT queue_enqueue('g.ord_retry', '{"n": 2}', group_key => 'k') AS r2 \gset
SELECT queue_enqueue('g.ord_retry', '{"n": 3}', group_key => 'k') > 0;
SELECT id, lease FROM queue_claim('g.ord_retry') \gset first_
SELECT queue_fail(:first_id, :'first_lease', 'boom');
SELECT payload FROM queue_claim('g.ord_retry');
SELECT queue_retry(:r1);
SELECT payload FROM queue_claim('g.ord_retry', max_jobs => 10);
SELECT pending, processing, head_id = :r2 AS waits_on_2 FROM queue_groups('g.ord_retry');
-- the same through a claim that counts a limit
SELECT queue_alter('g.ord_retry', max_in_flight => 10);
SELECT payload FROM queue_claim('g.ord_retry', max_jobs => 10);
-- once the job in flight has ended, the retried one goes first
SELECT queue_complete(l.id, l.lease) FROM queue_live l WHERE l.id = :r2;
SELECT payload FROM queue_claim('g.ord_retry', max_jobs => 10);
SELECT payload FROM queue_claim('g.ord_retry', max_jobs => 10);

-- a job enqueued while an older one of its group is in flight does not go
-- before it once that one is pending again (here a failed attempt retried
-- at once): n2 waits for n1, and j's n3 goes beside n1
SELECT queue_create('g.ord_flight', ordered => true, retry_delay => '0');
SELECT queue_enqueue('g.ord_flight', '{"n": 1}', group_key => 'k') > 0;
SELECT id, lease FROM queue_claim('g.ord_flight') \gset flight_
SELECT queue_enqueue('g.ord_flight', '{"n": 2}', group_key => 'k') > 0;
SELECT queue_enqueue('g.ord_flight', '{"n": 3}', group_key => 'j') > 0;
SELECT queue_fail(:flight_id, :'flight_lease', 'again');
SELECT payload FROM queue_claim('g.ord_flight', max_jobs => 10) ORDER BY id;

-- a claim finds a group's head behind any number of jobs that wait: 'a'
-- keeps its head in flight, and its 199 other jobs come before b's next
-- job in claim order once b has gone a few turns ahead
CREATE FUNCTION pg_temp.deep_backlog(q text, OUT a_jobs bigint, OUT b_jobs bigint,
                                      OUT in_flight text) LANGUAGE plpgsql AS $$
BEGIN
    SELECT count(*) INTO a_jobs FROM queue_enqueue_batch(q,
        array_fill('{"g": "a"}'::jsonb, ARRAY[200]), group_keys => array_fill('a'::text, ARRAY[200]));
    SELECT count(*) INTO b_jobs FROM queue_enqueue_batch(q,
        array_fill('{"g": "b"}'::jsonb, ARRAY[200]), group_keys => array_fill('b'::text, ARRAY[200]));
    SELECT string_agg(payload->>'g', ' ') INTO in_flight FROM queue_claim(q, max_jobs => 1);
END $$;
-- claims of 10, each completed at once
CREATE FUNCTION pg_temp.claim_and_complete(q text, claims int) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    FOR i IN 1..claims LOOP
        PERFORM queue_complete(c.id, c.lease) FROM queue_claim(q, max_jobs => 10) c;
    END LOOP;
END $$;
SELECT queue_create('g.deep', ordered => true);
SELECT * FROM pg_temp.deep_backlog('g.deep');
SELECT pg_temp.claim_and_complete('g.deep', 50);
SELECT group_key, pending, processing FROM queue_groups('g.deep') ORDER BY group_key;
-- the same through a claim that counts a limit
SELECT queue_alter('g.deep', max_in_flight => 100);
SELECT pg_temp.claim_and_complete('g.deep', 50);
SELECT group_key, pending, processing FROM queue_groups('g.deep') ORDER BY group_key;
-- a job without a group at a lower priority is a head of its own
SELECT queue_enqueue('g.deep', '{"g": "none"}', priority => -1) > 0;
SELECT payload->>'g' AS g FROM queue_claim('g.deep', max_jobs => 10);
SELECT queue_alter('g.deep', max_in_flight => 0);
SELECT queue_enqueue('g.deep', '{"g": "none again"}', priority => -1) > 0;
SELECT payload->>'g' AS g FROM queue_claim('g.deep', max_jobs => 10);

-- the same for a group at its group_max_in_flight, in a queue without order
SELECT queue_create('g.deep_limit', group_max_in_flight => 1);
SELECT * FROM pg_temp.deep_backlog('g.deep_limit');
SELECT pg_temp.claim_and_complete('g.deep_limit', 50);
SELECT group_key, pending, processing FROM queue_groups('g.deep_limit') ORDER BY group_key;
SELECT queue_enqueue('g.deep_limit', '{"g": "none"}', priority => -1) > 0;
SELECT payload->>'g' AS g FROM queue_claim('g.deep_limit', max_jobs => 10);

-- limits: max_in_flight for the queue, group_max_in_flight for each group
SELECT queue_create('g.lim', max_in_flight => 3, group_max_in_flight => 2);
SELECT count(*) FROM queue_enqueue_batch('g.lim', array_fill('{}'::jsonb, ARRAY[6]),
    group_keys => ARRAY['a', 'a', 'a', 'b', 'b', 'b']);
SELECT group_key FROM queue_claim('g.lim', max_jobs => 10) c JOIN queue_jobs j USING (id)
 ORDER BY c.id;
SELECT count(*) AS at_the_limit FROM queue_claim('g.lim', max_jobs => 10);
SELECT queue_alter('g.lim', max_in_flight => 0);
SELECT group_key FROM queue_claim('g.lim', max_jobs => 10) c JOIN queue_jobs j USING (id)
 ORDER BY c.id;
SELECT group_key, pending, processing FROM queue_groups('g.lim') ORDER BY group_key;

-- a group_max_in_flight set while jobs are in flight counts them
SELECT queue_create('g.later');
SELECT count(*) FROM queue_enqueue_batch('g.later', array_fill('{}'::jsonb, ARRAY[4]),
    group_keys => ARRAY['a', 'a', 'a', 'a']);
SELECT count(*) AS claimed_without_a_limit FROM queue_claim('g.later', max_jobs => 2);
SELECT queue_alter('g.later', group_max_in_flight => 2);
SELECT count(*) AS at_the_limit FROM queue_claim('g.later', max_jobs => 10);
SELECT queue_alter('g.later', group_max_in_flight => 3);
SELECT count(*) AS one_more FROM queue_claim('g.later', max_jobs => 10);

-- an order set while jobs are in flight waits for them
SELECT queue_create('g.ordered_later');
SELECT count(*) FROM queue_enqueue_batch('g.ordered_later', array_fill('{}'::jsonb, ARRAY[3]),
    group_keys => ARRAY['a', 'a', 'a']);
SELECT count(*) AS claimed_without_order FROM queue_claim('g.ordered_later', max_jobs => 1);
SELECT queue_alter('g.ordered_later', ordered => true);
SELECT count(*) AS behind_the_job_in_flight FROM queue_claim('g.ordered_later', max_jobs => 10);
SELECT group_key, pending, processing, head_id IS NOT NULL AS waits_on_a_job
  FROM queue_groups('g.ordered_later');

-- rate limits: at most n claims in any window of the given length
SELECT queue_create('g.rate', rate_limit => '3/1 hour', group_rate_limit => '2/1 hour');
SELECT count(*) FROM queue_enqueue_batch('g.rate', array_fill('{}'::jsonb, ARRAY[6]),
    group_keys => ARRAY['a', 'a', 'a', NULL, NULL, 'b']);
SELECT count(*) AS first_claim FROM queue_claim('g.rate', max_jobs => 2);
SELECT count(*) AS second_claim FROM queue_claim('g.rate', max_jobs => 10);
SELECT count(*) AS window_full FROM queue_claim('g.rate', max_jobs => 10);
SELECT group_key, count(*) FROM queue_jobs WHERE queue = 'g.rate' AND status = 'processing'
 GROUP BY group_key ORDER BY group_key;

-- queue_groups: the owner and pg_monitor; others get 42501
SELECT * FROM queue_groups('g.missing');
\echo :LAST_ERROR_SQLSTATE
CREATE ROLE g_other;
CREATE ROLE g_monitor IN ROLE pg_monitor;
SET ROLE g_other;
SELECT * FROM queue_groups('g.lim');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
SET ROLE g_monitor;
SELECT group_key FROM queue_groups('g.lim') ORDER BY 1;
RESET ROLE;
DROP ROLE g_other;
DROP ROLE g_monitor;
