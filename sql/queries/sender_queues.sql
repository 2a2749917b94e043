-- The queues a worker delivers: those with a sender, not paused, in id order.
SELECT id, name, sender, sender_role::oid AS role, batch_size
  FROM queue_queues
 WHERE sender IS NOT NULL AND NOT paused
 ORDER BY id
