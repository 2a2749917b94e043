-- $1 queue id, $2 payloads, $3 priority, $4 run_at, $5 state, $6 now. Ids are
-- drawn after sorting, so they ascend in input order. They come back as one
-- array, ascending.
WITH jobs AS (
    INSERT INTO queue_live (slot, queue_id, priority, id, run_at, enqueued_at, state, payload)
    SELECT (g.last_value % 2)::smallint, q.id, $3, nextval('queue_job_id_seq'), $4, $6, $5,
           p.payload
      FROM queue_queues q, queue_live_generation g,
           unnest($2) WITH ORDINALITY AS p(payload, ord)
     WHERE q.id = $1
     ORDER BY p.ord
    RETURNING id, queue_id
), tally AS (
    INSERT INTO queue_tallies (queue_id, enqueued_total)
    SELECT queue_id, count(*) FROM jobs GROUP BY queue_id
)
SELECT array_agg(id ORDER BY id) AS ids FROM jobs
