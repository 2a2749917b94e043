INSERT INTO queue_queues
       (name, owner, max_attempts, backoff, retry_delay, max_retry_delay, lease, retention)
VALUES ($1, $2::regrole, $3, $4, $5, $6, $7, $8)
ON CONFLICT (name) DO NOTHING
