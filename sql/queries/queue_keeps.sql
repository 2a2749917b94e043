-- Whether queue $1 keeps its finished jobs in history (a retention above
-- 0); no row for a queue that is gone. (complete_one.rs: a completion of a
-- queue that keeps nothing skips the statement.)
SELECT retention > interval '0' AS kept
  FROM queue_queues
 WHERE id = $1
