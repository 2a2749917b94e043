-- Jobs $1, locked by the caller, become failed at $2, with last_error $3
-- (or the one they have, when $3 is NULL). Returns them and their queues.
WITH gone AS (
    DELETE FROM queue_live WHERE id = ANY ($1) RETURNING *
), dead AS (
    INSERT INTO queue_dead (id, queue_id, priority, attempts, run_at, enqueued_at, finished_at,
                            worker, dedup_key, last_error, headers, payload, uid,
                            group_key, depends_on, has_children)
    SELECT id, queue_id, priority, attempts, run_at, enqueued_at, $2, worker, dedup_key,
           coalesce($3, last_error), headers, payload, uid, group_key, depends_on,
           has_children
      FROM gone
    RETURNING id, queue_id, has_children
), tally AS (
    INSERT INTO queue_tallies (queue_id, failed_total, failed, live)
    SELECT queue_id, count(*), count(*), -count(*) FROM dead GROUP BY queue_id
)
SELECT id, queue_id, has_children, NULL::uuid AS lease FROM dead
