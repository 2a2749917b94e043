-- The dead letters $1 as a page lists them.
SELECT id, queue, attempts, date_trunc('second', finished_at)::text AS finished_at,
       left(payload::text, 120) AS payload, left(last_error, 200) AS last_error
  FROM queue_failed
 WHERE id = ANY($1::bigint[])
 ORDER BY id DESC
