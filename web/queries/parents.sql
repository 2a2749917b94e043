-- A job's parents (0.4), in the order it names them, with their outcomes;
-- status NULL for a parent no longer retained.
SELECT id, queue, status, left(result::text, 120) AS result
  FROM queue_parents($1)
