-- A page of a queue's dead letters, newest first, below id $2 when given:
-- queue_failed, whose table has an index on (queue, id), so a page costs
-- the same however many there are. (The columns queue_failed lacks are NULL.)
SELECT id, 'failed' AS status, NULL::integer AS priority, attempts,
       NULL::integer AS max_attempts, NULL::text AS run_at, NULL::text AS enqueued_at,
       date_trunc('second', finished_at)::text AS finished_at,
       left(payload::text, 120) AS payload, left(last_error, 120) AS last_error,
       NULL::text AS group_key
  FROM queue_failed
 WHERE queue = $1
   AND ($2::bigint IS NULL OR id < $2::bigint)
 ORDER BY id DESC
 LIMIT $3
