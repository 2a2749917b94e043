-- Claims up to $2 ready jobs of queue $1, in claim order, each with a new
-- lease until $4, for worker $5. A job with no attempt left of $3 (its last
-- lease expired, or max_attempts was lowered) is locked but not claimed: it
-- comes back with exhausted = true for the caller to move to the dead letters.
-- (A top-level UPDATE: as a CTE under a SELECT its generic plan runs ten
-- times slower.)
WITH picked AS (
    SELECT id, slot, attempts >= $3 AS exhausted FROM queue_live
     WHERE queue_id = $1 AND state = 'ready'
     ORDER BY priority DESC, run_at, id
     LIMIT $2
     FOR UPDATE SKIP LOCKED
)
UPDATE queue_live l
   SET state = CASE WHEN p.exhausted THEN l.state ELSE 'processing' END,
       attempts = CASE WHEN p.exhausted THEN l.attempts ELSE l.attempts + 1 END,
       lease = CASE WHEN p.exhausted THEN l.lease ELSE gen_random_uuid() END,
       lease_expires_at = CASE WHEN p.exhausted THEN l.lease_expires_at ELSE $4 END,
       worker = CASE WHEN p.exhausted THEN l.worker ELSE $5 END
  FROM picked p
 WHERE l.slot = p.slot AND l.id = p.id
RETURNING l.id, p.exhausted, l.payload, l.headers, l.attempts, l.enqueued_at, l.lease,
          l.lease_expires_at, l.priority, l.run_at
