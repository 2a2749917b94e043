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
           AS chores,
       least((SELECT run_at FROM queue_live
               WHERE queue_id = $1 AND state = 'scheduled'
               ORDER BY run_at LIMIT 1),
             (SELECT lease_expires_at FROM queue_live
               WHERE queue_id = $1 AND state = 'processing'
               ORDER BY lease_expires_at LIMIT 1)) AS next_at,
       (SELECT min(c.claimed_at + CASE WHEN c.group_key IS NULL THEN q.rate_window
                                       ELSE q.group_rate_window END)
          FROM queue_claims c JOIN queue_queues q ON q.id = c.queue_id
         WHERE c.queue_id = $1
           AND c.claimed_at + CASE WHEN c.group_key IS NULL THEN q.rate_window
                                   ELSE q.group_rate_window END > $2) AS window_ends_at
