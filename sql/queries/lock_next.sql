-- (lock_set.sql) The first $2 ready jobs in claim order.
 WHERE l.queue_id = $1 AND l.state = 'ready'
 ORDER BY l.priority DESC, l.turn, l.run_at, l.id
 LIMIT $2
   FOR UPDATE SKIP LOCKED
