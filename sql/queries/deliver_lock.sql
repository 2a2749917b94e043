-- The jobs among $1 that are still in flight with one of the leases $2,
-- locked until the end of the transaction (a cancel, purge or drop waits
-- for the delivery), each with the argument its sender gets.
SELECT l.id, l.queue_id,
       jsonb_build_object('id', l.id, 'queue', q.name, 'payload', l.payload,
                          'headers', l.headers, 'attempt', l.attempts,
                          'max_attempts', q.max_attempts, 'enqueued_at', l.enqueued_at)
  FROM queue_live l JOIN queue_queues q ON q.id = l.queue_id
 WHERE l.id = ANY ($1) AND l.lease = ANY ($2) AND l.state = 'processing'
   FOR UPDATE OF l
