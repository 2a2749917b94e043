-- The jobs among the pairs (ids $1, leases $2) still in flight with that
-- lease, locked until the end of the transaction (a cancel, purge or drop
-- now waits for the delivery), each with the argument its sender gets. $3
-- and $4 are the name and max_attempts of their queue.
SELECT l.id,
       -- (depends_on only for a job with parents)
       CASE WHEN l.depends_on IS NULL THEN
           jsonb_build_object('id', l.id, 'queue', $3::text, 'payload', l.payload,
                              'headers', l.headers, 'attempt', l.attempts,
                              'max_attempts', $4::int, 'enqueued_at', l.enqueued_at)
       ELSE
           jsonb_build_object('id', l.id, 'queue', $3::text, 'payload', l.payload,
                              'headers', l.headers, 'attempt', l.attempts,
                              'max_attempts', $4::int, 'enqueued_at', l.enqueued_at,
                              'depends_on', l.depends_on)
       END AS job
  FROM unnest($1::bigint[], $2::uuid[]) AS p(id, lease)
  JOIN queue_live l ON l.id = p.id AND l.lease = p.lease  -- in flight (see complete.sql)
   FOR UPDATE OF l
