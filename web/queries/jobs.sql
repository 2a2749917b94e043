-- A queue's jobs (of one status when $2 is given) with ids in [$4, $3),
-- newest first, at most $5: one window of a page. The id range keeps each
-- statement to a range of the view's id indexes, however many jobs the
-- database retains (an ORDER BY id LIMIT alone would sort them all).
SELECT id, status, priority, attempts, max_attempts,
       date_trunc('second', run_at)::text AS run_at,
       date_trunc('second', enqueued_at)::text AS enqueued_at,
       date_trunc('second', finished_at)::text AS finished_at,
       left(payload::text, 120) AS payload, left(last_error, 120) AS last_error,
       group_key
  FROM queue_jobs
 WHERE queue = $1
   AND ($2::text IS NULL OR status = $2::text)
   AND id < $3 AND id >= $4
 ORDER BY id DESC
 LIMIT $5
