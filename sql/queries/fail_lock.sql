-- The job $1 if lease $2 is held, locked, with what its queue says of
-- retries, and whether a sender delivers it.
SELECT l.attempts, q.max_attempts, q.backoff, q.retry_delay, q.max_retry_delay,
       q.sender IS NOT NULL AS has_sender, q.id AS queue_id
  FROM queue_live l JOIN queue_queues q ON q.id = l.queue_id
 WHERE l.id = $1 AND l.lease = $2 AND l.state = 'processing'
   FOR UPDATE OF l
