-- $9 ordered, then the limits: NULL or 0 is none; a rate is $12 jobs per $13
-- (group: $14 per $15).
INSERT INTO queue_queues
       (name, owner, max_attempts, backoff, retry_delay, max_retry_delay, lease, retention,
        ordered, max_in_flight, group_max_in_flight, rate_limit, rate_window, group_rate_limit,
        group_rate_window)
VALUES ($1, $2::regrole, $3, $4, $5, $6, $7, $8,
        coalesce($9, false), nullif($10, 0), nullif($11, 0), nullif($12, 0),
        CASE WHEN $12 > 0 THEN $13 END, nullif($14, 0), CASE WHEN $14 > 0 THEN $15 END)
ON CONFLICT (name) DO NOTHING
