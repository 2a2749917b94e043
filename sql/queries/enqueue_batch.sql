-- $1 queue id, $2 payloads, $3 priority, $4 run_at, $5 state, $6 now. Ids are
-- drawn after sorting, so they ascend in input order. They come back as one
-- array, ascending. (With group or dedup keys: enqueue_batch_keys.sql.)
--
-- Each job's uid is the statement's one random value (its first 16
-- hexadecimal digits) followed by the job's place in the batch: unique for
-- ever like a random uuid per job (places differ within the statement,
-- random values between statements), for one call of gen_random_uuid()
-- a batch instead of one a job.
WITH r AS MATERIALIZED (
    -- (once for the statement)
    SELECT pg_catalog.left(pg_catalog.replace(gen_random_uuid()::text, '-', ''), 16) AS prefix
), jobs AS (
    INSERT INTO queue_live (slot, queue_id, priority, id, run_at, enqueued_at, state, payload, uid)
    SELECT (g.last_value % 2)::smallint, q.id, $3, nextval('queue_job_id_seq'), $4, $6, $5,
           p.payload, (r.prefix || pg_catalog.lpad(pg_catalog.to_hex(p.ord), 16, '0'))::uuid
      FROM queue_queues q, queue_live_generation g,
           unnest($2) WITH ORDINALITY AS p(payload, ord), r
     WHERE q.id = $1
     ORDER BY p.ord
    RETURNING id, queue_id
), tally AS (
    INSERT INTO queue_tallies (queue_id, enqueued_total)
    SELECT queue_id, count(*) FROM jobs GROUP BY queue_id
)
SELECT array_agg(id ORDER BY id) AS ids FROM jobs
