SELECT id, owner::oid, max_attempts, lease, paused, sender
  FROM queue_queues
 WHERE name = $1
