-- What a consumer waiting on queue $1 at $2 (queue_wait) looks at: whether
-- a job is ready, whether a claim would first make one due (a scheduled job
-- whose time has come, an expired lease), and otherwise when the clock
-- makes one due: the earliest scheduled job or lease expiry, and the end of
-- the oldest claim in a rate window (for jobs a rate limit holds back).
-- Index probes only.
SELECT EXISTS (SELECT FROM queue_live
                WHERE queue_id = $1 AND state = 'ready') AS ready,
       EXISTS (SELECT FROM queue_live
                WHERE queue_id = $1 AND state = 'scheduled' AND run_at <= $2)
       OR EXISTS (SELECT FROM queue_live
                   WHERE queue_id = $1 AND state = 'processing' AND lease_expires_at < $2)
           AS due_or_expired,
       least((SELECT run_at FROM queue_live
               WHERE queue_id = $1 AND state = 'scheduled'
               ORDER BY run_at LIMIT 1),
             (SELECT lease_expires_at FROM queue_live
               WHERE queue_id = $1 AND state = 'processing'
               ORDER BY lease_expires_at LIMIT 1)) AS next_at,
       -- (each window's oldest claim still in it, read from the window's
       -- start by index, not from every claim the queue keeps)
       (SELECT least((SELECT c.claimed_at FROM queue_claims c
                       WHERE c.queue_id = $1 AND c.group_key IS NULL
                         AND c.claimed_at > $2 - q.rate_window
                       ORDER BY c.claimed_at LIMIT 1) + q.rate_window,
                     (SELECT c.claimed_at FROM queue_claims c
                       WHERE c.queue_id = $1 AND c.group_key IS NOT NULL
                         AND c.claimed_at > $2 - q.group_rate_window
                       ORDER BY c.claimed_at LIMIT 1) + q.group_rate_window)
          FROM queue_queues q WHERE q.id = $1) AS window_ends_at
