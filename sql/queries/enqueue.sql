-- $1 queue id, $2 payload, $3 headers, $4 priority, $5 run_at, $6 state
-- ('ready' or 'scheduled'), $7 dedup_key, $8 now, $9 group_key, $10 whether
-- the job may be turn_safe (schema.sql): an ordered queue, the group's lock
-- taken, and a statement that sees every job of the group committed before
-- (READ COMMITTED). No row: the queue is gone.
--
-- The job's turn (docs/groups.md): for a job of a group, the turn of the
-- front of its priority's ready jobs, or one after its group's last job not
-- in flight if that is later, so a group new to the queue (or with only
-- jobs in flight) joins the current round and a busy group's jobs spread
-- over the rounds to come. A job without a group
-- takes turn 0, the first round, without looking: the look at the front
-- walks past the index entries of jobs claimed since vacuum last ran, and
-- measured under a claiming consumer it halved the insert's rate.
WITH job AS (
    INSERT INTO queue_live
           (slot, queue_id, priority, id, run_at, enqueued_at, state, dedup_key, headers, payload,
            group_key, turn, turn_safe)
    SELECT (g.last_value % 2)::smallint, q.id, $4, nextval('queue_job_id_seq'), $5, $8, $6, $7,
           $3, $2, $9,
           CASE WHEN $9::text IS NOT NULL THEN
               greatest((SELECT r.turn FROM queue_live r
                          WHERE r.queue_id = $1 AND r.state = 'ready' AND r.priority = $4
                          ORDER BY r.turn LIMIT 1),
                        last.turn + 1,
                        0)
           ELSE 0 END,
           $9::text IS NOT NULL AND $10 AND coalesce(last.turn_safe, true)
           AND NOT EXISTS (SELECT FROM queue_live b
                            WHERE b.queue_id = $1 AND b.group_key = $9
                              AND b.state = 'processing' AND b.group_counted)
      FROM queue_queues q
     CROSS JOIN queue_live_generation g
      -- (the group's last job not in flight: its turn and its turn_safe)
      LEFT JOIN LATERAL (SELECT l.turn, l.turn_safe FROM queue_live l
                          WHERE l.queue_id = $1 AND l.group_key = $9
                            AND l.state <> 'processing'
                          ORDER BY l.id DESC LIMIT 1) last ON $9::text IS NOT NULL
     WHERE q.id = $1
    RETURNING id, queue_id
), tally AS (
    INSERT INTO queue_tallies (queue_id, enqueued_total, live) SELECT queue_id, 1, 1 FROM job
)
SELECT id FROM job
