-- $1 queue id, $2 payloads, $3 priority, $4 run_at, $5 state, $6 now, $7
-- every job's headers (NULL: none), $8 each job's uid (produce.rs: the
-- batch's 96 random bits and the job's place in it). Ids are drawn in
-- input order (the payloads come out of unnest in order, and nothing else
-- the statement joins has more than one row), so they ascend in input
-- order, without a sort. They come back as one array, ascending. (With
-- group or dedup keys: enqueue_batch_keys.sql.)
WITH jobs AS (
    INSERT INTO queue_live (slot, queue_id, priority, id, run_at, enqueued_at, state, payload, uid,
                            headers)
    SELECT (g.last_value % 2)::smallint, q.id, $3, nextval('queue_job_id_seq'), $4, $6, $5,
           p.payload, p.uid, $7::jsonb
      FROM queue_queues q, queue_live_generation g, unnest($2, $8::uuid[]) AS p(payload, uid)
     WHERE q.id = $1
    RETURNING id, queue_id
), tally AS (
    INSERT INTO queue_tallies (queue_id, enqueued_total, live)
    SELECT queue_id, count(*), count(*) FROM jobs GROUP BY queue_id
)
SELECT array_agg(id ORDER BY id) AS ids FROM jobs
