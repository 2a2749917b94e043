-- The newest $2 dead letters of this database (of queue $1, when given),
-- for grouping by cause: queue_failed, whose table has an index on (queue,
-- id) and its primary key on id, so this reads no more than it returns.
SELECT queue, id, left(last_error, 500) AS last_error,
       EXTRACT(epoch FROM now() - finished_at)::float8 AS ago_secs
  FROM queue_failed
 WHERE $1::text IS NULL OR queue = $1::text
 ORDER BY id DESC
 LIMIT $2
