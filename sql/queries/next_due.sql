-- When the worker has something to do next, without a new commit: the
-- earliest scheduled job of a sender queue, or the earliest lease to expire
-- of a job the worker acts on then: any in a sender queue (the job comes
-- back to be delivered), one with no attempt left in any queue (the job is
-- buried). NULL: nothing, ever.
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
                             AND ((q.sender IS NOT NULL AND NOT q.paused)
                                  OR attempts >= q.max_attempts)
                           ORDER BY lease_expires_at LIMIT 1) e)) AS at
