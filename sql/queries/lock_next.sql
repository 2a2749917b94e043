-- (lock_set.sql) The first $2 ready jobs in claim order.
  FROM queue_live r
 WHERE r.queue_id = $1 AND r.state = 'ready'
 ORDER BY r.priority DESC, r.turn, r.run_at, r.id
 LIMIT $2
   FOR UPDATE SKIP LOCKED
