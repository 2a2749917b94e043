-- A page of a queue's jobs, newest first: keyset pagination on id (jobs
-- below $3, when given), of one status when $2 is given, bounded by $4.
SELECT id, status, priority, attempts, max_attempts,
       date_trunc('second', run_at)::text AS run_at,
       date_trunc('second', enqueued_at)::text AS enqueued_at,
       date_trunc('second', finished_at)::text AS finished_at,
       left(payload::text, 120) AS payload, left(last_error, 120) AS last_error,
       group_key
  FROM queue_jobs
 WHERE queue = $1
   AND ($2::text IS NULL OR status = $2::text)
   AND ($3::bigint IS NULL OR id < $3::bigint)
 ORDER BY id DESC
 LIMIT $4
