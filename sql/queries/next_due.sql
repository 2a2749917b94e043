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
    -- (each window's oldest claim still in it, read from the window's start
    -- by index; the clock as an uncorrelated subquery, read once per
    -- statement rather than per claim, a parameter an index can take)
    (SELECT min(least((SELECT c.claimed_at FROM queue_claims c
                        WHERE c.queue_id = q.id AND c.group_key IS NULL
                          AND c.claimed_at > (SELECT clock_timestamp()) - q.rate_window
                        ORDER BY c.claimed_at LIMIT 1) + q.rate_window,
                      (SELECT c.claimed_at FROM queue_claims c
                        WHERE c.queue_id = q.id AND c.group_key IS NOT NULL
                          AND c.claimed_at > (SELECT clock_timestamp()) - q.group_rate_window
                        ORDER BY c.claimed_at LIMIT 1) + q.group_rate_window))
       FROM queue_queues q
      WHERE q.sender IS NOT NULL AND NOT q.paused
        AND EXISTS (SELECT FROM queue_live r WHERE r.queue_id = q.id AND r.state = 'ready')),
    (SELECT min(next_run_at) FROM queue_recurring WHERE NOT paused)
) AS at
