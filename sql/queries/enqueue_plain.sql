-- enqueue.sql for a job without a group (the common case): the same row
-- with turn 0 and no look at the group's jobs, in a statement with no part
-- for them (the executor sets up every part of a statement on each call,
-- even those a parameter switches off). $1 queue id, $2 payload, $3
-- headers, $4 priority, $5 run_at, $6 state, $7 dedup_key, $8 now. No row:
-- the queue is gone.
WITH job AS (
    INSERT INTO queue_live
           (slot, queue_id, priority, id, run_at, enqueued_at, state, dedup_key, headers, payload)
    SELECT (g.last_value % 2)::smallint, q.id, $4, nextval('queue_job_id_seq'), $5, $8, $6, $7,
           $3, $2
      FROM queue_queues q
     CROSS JOIN queue_live_generation g
     WHERE q.id = $1
    RETURNING id, queue_id
), tally AS (
    INSERT INTO queue_tallies (queue_id, enqueued_total, live) SELECT queue_id, 1, 1 FROM job
)
SELECT id FROM job
