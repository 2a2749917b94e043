-- The request bodies of jobs $1, just claimed in this transaction by a
-- webhook queue named $2 with max_attempts $3: the job object a SQL sender
-- gets (deliver_lock.sql), as JSON text. No lock: the claim's own update
-- holds the rows until it commits, and the requests start after that.
SELECT l.id,
       jsonb_build_object('id', l.id, 'queue', $2::text, 'payload', l.payload,
                          'headers', l.headers, 'attempt', l.attempts,
                          'max_attempts', $3::int, 'enqueued_at', l.enqueued_at)::text AS body
  FROM queue_live l
 WHERE l.id = ANY ($1::bigint[])
