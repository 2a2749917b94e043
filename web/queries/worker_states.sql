-- The cluster's background workers by database and state, and the
-- databases waiting for a worker slot (pid NULL), from shared memory
-- (every database sees all of them).
SELECT database, state, pid IS NULL AS waiting, count(*) AS workers
  FROM queue_workers
 WHERE database IS NOT NULL
 GROUP BY database, state, pid IS NULL
 ORDER BY database, state
