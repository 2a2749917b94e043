-- $1 queue id, $2 payloads, $3 priority, $4 run_at, $5 state, $6 now, $7
-- every job's headers (NULL: none). Ids are
-- drawn after sorting, so they ascend in input order. They come back as one
-- array, ascending. (With group or dedup keys: enqueue_batch_keys.sql.)
--
-- Each job's uid is the statement's one random value (96 random bits, 24
-- hexadecimal digits) followed by the job's place in the batch (8 digits:
-- batches are far smaller than 2^32): unique for ever as random uuids are
-- (places differ within the statement; two statements' values collide
-- with a probability of about n^2 / 2^97 over n batches), for one call of
-- gen_random_uuid() a batch instead of one a job.
WITH r AS MATERIALIZED (
    -- (once for the statement)
    -- (96 random bits: a uuid's 32 hexadecimal digits less its version,
    -- 13th, and its variant, 17th, which carry none)
    SELECT pg_catalog.substr(u, 1, 12) || pg_catalog.substr(u, 14, 3) || pg_catalog.substr(u, 18, 9)
               AS prefix
      FROM (SELECT pg_catalog.replace(gen_random_uuid()::text, '-', '') AS u) g
), jobs AS (
    INSERT INTO queue_live (slot, queue_id, priority, id, run_at, enqueued_at, state, payload, uid,
                            headers)
    SELECT (g.last_value % 2)::smallint, q.id, $3, nextval('queue_job_id_seq'), $4, $6, $5,
           p.payload, (r.prefix || pg_catalog.lpad(pg_catalog.to_hex(p.ord), 8, '0'))::uuid, $7::jsonb
      FROM queue_queues q, queue_live_generation g,
           unnest($2) WITH ORDINALITY AS p(payload, ord), r
     WHERE q.id = $1
     ORDER BY p.ord
    RETURNING id, queue_id
), tally AS (
    INSERT INTO queue_tallies (queue_id, enqueued_total, live)
    SELECT queue_id, count(*), count(*) FROM jobs GROUP BY queue_id
)
SELECT array_agg(id ORDER BY id) AS ids FROM jobs
