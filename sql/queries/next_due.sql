-- When the worker has something to do next, without a new commit: the
-- earliest scheduled job of a sender queue, the earliest lease to expire in
-- a sender queue (the job comes back to be delivered), or the earliest
-- lease to expire with no attempt left in any queue (the job is buried).
-- NULL: nothing, ever.
SELECT least(
    (SELECT min(s.run_at)
       FROM queue_queues q
      CROSS JOIN LATERAL (SELECT run_at FROM queue_live
                           WHERE queue_id = q.id AND state = 'scheduled'
                           ORDER BY run_at LIMIT 1) s
      WHERE q.sender IS NOT NULL AND NOT q.paused),
    (SELECT min(e.lease_expires_at)
       FROM queue_queues q
      CROSS JOIN LATERAL (SELECT lease_expires_at FROM queue_live
                           WHERE queue_id = q.id AND state = 'processing'
                           ORDER BY lease_expires_at LIMIT 1) e
      WHERE q.sender IS NOT NULL AND NOT q.paused),
    (SELECT min(e.lease_expires_at)
       FROM queue_queues q
      CROSS JOIN LATERAL (SELECT lease_expires_at FROM queue_live
                           WHERE queue_id = q.id AND state = 'processing'
                             AND attempts >= q.max_attempts
                           ORDER BY lease_expires_at LIMIT 1) e))
