-- Jobs of queue $1 whose lease expired before $2 (at most $3): back to ready,
-- or, with no attempt left of $4, to the dead letters.
WITH expired AS (
    SELECT id, slot, attempts FROM queue_live
     WHERE queue_id = $1 AND state = 'processing' AND lease_expires_at < $2
     ORDER BY lease_expires_at
     LIMIT $3
     FOR UPDATE SKIP LOCKED
), gone AS (
    DELETE FROM queue_live l USING expired e
     WHERE e.attempts >= $4 AND l.slot = e.slot AND l.id = e.id
    RETURNING l.*
), buried AS (
    INSERT INTO queue_dead (id, queue_id, priority, attempts, run_at, enqueued_at,
                            finished_at, worker, dedup_key, last_error, headers, payload)
    SELECT id, queue_id, priority, attempts, run_at, enqueued_at, $2, worker, dedup_key,
           format('lease expired during attempt %s of %s%s', attempts, $4,
                  ' (worker ' || worker || ')'),
           headers, payload
      FROM gone
)
UPDATE queue_live l
   SET state = 'ready', lease = NULL, lease_expires_at = NULL,
       last_error = format('lease expired during attempt %s%s', l.attempts,
                           ' (worker ' || l.worker || ')')
  FROM expired e
 WHERE e.attempts < $4 AND l.slot = e.slot AND l.id = e.id
