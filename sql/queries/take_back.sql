-- Jobs of queue $1 whose lease expired before $2 (at most $3) are ready
-- again, with a last_error that says so; those with no attempt left of $4
-- come back with exhausted = true for the caller to move to the dead letters.
UPDATE queue_live l
   SET state = 'ready', lease = NULL, lease_expires_at = NULL,
       last_error = queue_lease_expired_error(l.attempts, $4, l.worker)
 WHERE l.id = ANY (ARRAY(
           SELECT id FROM queue_live
            WHERE queue_id = $1 AND state = 'processing' AND lease_expires_at < $2
            ORDER BY lease_expires_at
            LIMIT $3
            FOR UPDATE SKIP LOCKED))
RETURNING l.id, l.attempts >= $4 AS exhausted
