SELECT id, owner::oid, max_attempts, lease, paused
  FROM queue_queues
 WHERE name = $1
