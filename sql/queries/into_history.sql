-- The end of complete.sql and finish.sql: the jobs `gone` from queue_live
-- go into history with status $3 at $2, kept for their queue's retention,
-- and are tallied for queue_stats. Returns their ids.
done AS (
    INSERT INTO queue_done (slot, queue_id, priority, attempts, id, run_at, enqueued_at,
                            finished_at, expires_at, status, worker, dedup_key, last_error,
                            headers, payload)
    SELECT queue_done_slot(e.expires), g.queue_id, g.priority, g.attempts, g.id, g.run_at,
           g.enqueued_at, $2, e.expires, $3, g.worker, g.dedup_key, g.last_error,
           g.headers, g.payload
      FROM gone g
      JOIN queue_queues q ON q.id = g.queue_id
     CROSS JOIN LATERAL (SELECT $2 + queue_kept_for(q.retention) AS expires) e
    RETURNING id, queue_id, slot
), tally AS (
    INSERT INTO queue_tallies (queue_id, slot, succeeded_total, succeeded, cancelled)
    SELECT queue_id, slot,
           CASE $3 WHEN 'succeeded' THEN count(*) ELSE 0 END,
           CASE $3 WHEN 'succeeded' THEN count(*) ELSE 0 END,
           CASE $3 WHEN 'cancelled' THEN count(*) ELSE 0 END
      FROM done GROUP BY queue_id, slot
)
SELECT id FROM done
