-- When the worker has something to do next, without a new commit: the
-- earliest scheduled job of a sender queue, or the earliest lease to expire
-- of a job the worker acts on then: any in a sender queue (the job comes
-- back to be delivered), one with no attempt left in any queue (the job is
-- buried), or the end of the oldest claim in a rate window of a sender
-- queue with ready jobs (one a rate limit held back may go), or the next
-- tick of a schedule.
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
                             AND ((q.sender IS NOT NULL AND NOT q.paused)
                                  OR attempts >= q.max_attempts)
                           ORDER BY lease_expires_at LIMIT 1) e),
    (SELECT min(c.claimed_at + w.window_length)
       FROM queue_queues q
       JOIN queue_claims c ON c.queue_id = q.id
      CROSS JOIN LATERAL (SELECT CASE WHEN c.group_key IS NULL THEN q.rate_window
                                      ELSE q.group_rate_window END AS window_length) w
      WHERE q.sender IS NOT NULL AND NOT q.paused
        AND c.claimed_at + w.window_length > clock_timestamp()
        AND EXISTS (SELECT FROM queue_live r WHERE r.queue_id = q.id AND r.state = 'ready')),
    (SELECT min(next_run_at) FROM queue_recurring WHERE NOT paused)
) AS at
