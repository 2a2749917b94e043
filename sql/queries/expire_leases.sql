-- In-flight jobs of any queue whose lease expired before $1 with no attempt
-- left (at most $2): they get a last_error saying so, for the caller to move
-- them to the dead letters.
UPDATE queue_live l
   SET last_error = queue_lease_expired_error(l.attempts, q.max_attempts, l.worker)
  FROM queue_queues q
 WHERE q.id = l.queue_id
   AND l.id = ANY (ARRAY(
           SELECT j.id FROM queue_live j JOIN queue_queues jq ON jq.id = j.queue_id
            WHERE j.state = 'processing' AND j.lease_expires_at < $1
              AND j.attempts >= jq.max_attempts
            LIMIT $2
            FOR UPDATE OF j SKIP LOCKED))
RETURNING l.id
