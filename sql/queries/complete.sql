-- Jobs among the pairs ($1 ids, $2 leases) whose lease is held become
-- succeeded at $3, kept for their queue's retention.
WITH gone AS (
    DELETE FROM queue_live l
     USING unnest($1::bigint[], $2::uuid[]) AS x(id, lease)
     WHERE l.id = x.id AND l.lease = x.lease AND l.state = 'processing'
    RETURNING l.*
)
INSERT INTO queue_done (slot, queue_id, priority, attempts, id, run_at, enqueued_at,
                        finished_at, expires_at, status, worker, dedup_key, last_error,
                        headers, payload)
SELECT queue_done_slot(e.expires), g.queue_id, g.priority, g.attempts, g.id, g.run_at,
       g.enqueued_at, $3, e.expires, 'succeeded', g.worker, g.dedup_key, g.last_error,
       g.headers, g.payload
  FROM gone g
  JOIN queue_queues q ON q.id = g.queue_id
 CROSS JOIN LATERAL (SELECT $3 + least(q.retention, interval '1000 years') AS expires) e
RETURNING id
