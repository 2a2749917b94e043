-- Job $1, failed or cancelled, is pending again: due at $2, attempts reset,
-- its last_error kept. No row: it is in another status, or its queue is gone.
-- Returns its queue, and whether jobs wait for it (a retried parent resumes
-- the children its end cancelled: dependencies.rs).
WITH dead AS (
    DELETE FROM queue_dead d
     WHERE d.id = $1 AND EXISTS (SELECT FROM queue_queues q WHERE q.id = d.queue_id)
    RETURNING d.id, d.queue_id, (-1)::smallint AS slot, 'failed' AS status, d.priority,
              d.enqueued_at, d.dedup_key, d.last_error, d.headers, d.payload, d.uid,
              d.group_key, d.depends_on, d.has_children
), cancelled AS (
    DELETE FROM queue_done d
     WHERE d.id = $1 AND d.status = 'cancelled'
       AND EXISTS (SELECT FROM queue_queues q WHERE q.id = d.queue_id)
    RETURNING d.id, d.queue_id, d.slot, d.status, d.priority, d.enqueued_at, d.dedup_key,
              d.last_error, d.headers, d.payload, d.uid, d.group_key, d.depends_on,
              d.has_children
), gone AS (
    SELECT * FROM dead UNION ALL SELECT * FROM cancelled
), back AS (
    -- (a job of a group takes turn -1, before every enqueued job's: the
    -- later jobs of its group keep a larger turn than every older one,
    -- which their turn_safe says)
    INSERT INTO queue_live (slot, queue_id, priority, attempts, id, run_at, enqueued_at,
                            state, dedup_key, last_error, headers, payload, uid, group_key,
                            turn, depends_on, has_children)
    SELECT (g.last_value % 2)::smallint, j.queue_id, j.priority, 0, j.id, $2, j.enqueued_at,
           'ready', j.dedup_key, j.last_error, j.headers, j.payload, j.uid, j.group_key,
           CASE WHEN j.group_key IS NULL THEN 0 ELSE -1 END, j.depends_on, j.has_children
      FROM gone j, queue_live_generation g
), tally AS (
    INSERT INTO queue_tallies (queue_id, slot, cancelled, failed, live)
    SELECT queue_id, slot, -(status = 'cancelled')::int, -(status = 'failed')::int, 1 FROM gone
)
SELECT queue_id, has_children FROM gone
