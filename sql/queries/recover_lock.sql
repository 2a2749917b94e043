-- Job $1 if a queue worker ($2) left it in flight, locked: its attempts so
-- far, its queue's max_attempts and lease, whether the queue still has a
-- SQL sender (recovered jobs of a webhook queue are sent again like any
-- due job), the queue and the job's group.
SELECT l.attempts, q.max_attempts, q.lease,
       q.sender IS NOT NULL
           AND NOT EXISTS (SELECT FROM queue_webhooks w WHERE w.queue_id = q.id) AS sql_sender,
       q.id AS queue_id, l.group_key
  FROM queue_live l JOIN queue_queues q ON q.id = l.queue_id
 WHERE l.id = $1 AND l.state = 'processing' AND l.worker = $2
   FOR UPDATE OF l
