-- The jobs that depend on a job (0.4), with their outcomes.
SELECT id, queue, status, left(result::text, 120) AS result
  FROM queue_children($1)
