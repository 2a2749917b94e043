-- Jobs $1, whose leases the caller holds and has locked, become succeeded at
-- $2, kept for their queue's retention.
WITH gone AS (
    DELETE FROM queue_live WHERE id = ANY ($1) RETURNING *
)
INSERT INTO queue_done (slot, queue_id, priority, attempts, id, run_at, enqueued_at,
                        finished_at, expires_at, status, worker, dedup_key, last_error,
                        headers, payload)
SELECT queue_done_slot(e.expires), g.queue_id, g.priority, g.attempts, g.id, g.run_at,
       g.enqueued_at, $2, e.expires, 'succeeded', g.worker, g.dedup_key, g.last_error,
       g.headers, g.payload
  FROM gone g
  JOIN queue_queues q ON q.id = g.queue_id
 CROSS JOIN LATERAL (SELECT $2 + least(q.retention, interval '1000 years') AS expires) e
RETURNING id
