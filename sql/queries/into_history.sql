-- The end of complete.sql and finish.sql: the jobs `gone` from queue_live
-- end with status $3 at $2 and are tallied for queue_stats; they go into
-- history, with their `result`, for their queue's retention, unless it is
-- 0 (nothing to keep: no history row is written at all). Returns their ids
-- and queues, whether jobs wait for them (jobs.rs settles those), and the
-- leases they were in flight under (metrics: how long they ran).
ended AS (
    SELECT g.*, $2 + queue_kept_for(q.retention) AS expires,
           q.retention > interval '0' AS kept
      FROM gone g
      JOIN queue_queues q ON q.id = g.queue_id
),
done AS (
    INSERT INTO queue_done (slot, queue_id, priority, attempts, id, run_at, enqueued_at,
                            finished_at, expires_at, status, worker, dedup_key, last_error,
                            headers, payload, uid, group_key, result, depends_on,
                            has_children, cancelled_by)
    SELECT queue_done_slot(e.expires), e.queue_id, e.priority, e.attempts, e.id, e.run_at,
           e.enqueued_at, $2, e.expires, $3, e.worker, e.dedup_key, e.last_error,
           e.headers, e.payload, e.uid, e.group_key, e.result, e.depends_on, e.has_children,
           e.cancelled_by
      FROM ended e
     WHERE e.kept
    RETURNING queue_id, slot
), tally AS (
    -- (the retained counts per history partition; the totals of jobs not
    -- kept under slot -1, which concerns no partition)
    INSERT INTO queue_tallies (queue_id, slot, succeeded_total, succeeded, cancelled, live)
    SELECT queue_id, slot,
           CASE $3 WHEN 'succeeded' THEN count(*) ELSE 0 END,
           CASE WHEN $3 = 'succeeded' AND slot >= 0 THEN count(*) ELSE 0 END,
           CASE WHEN $3 = 'cancelled' AND slot >= 0 THEN count(*) ELSE 0 END,
           -count(*)
      FROM (SELECT queue_id, slot FROM done
            UNION ALL
            SELECT queue_id, -1 FROM ended WHERE NOT kept) t
     GROUP BY queue_id, slot
)
SELECT id, queue_id, has_children, lease FROM ended
