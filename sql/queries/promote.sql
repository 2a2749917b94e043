-- Scheduled jobs of queue $1 that are due at $2 become ready (at most $3).
UPDATE queue_live SET state = 'ready'
 WHERE id = ANY (ARRAY(
           SELECT id FROM queue_live
            WHERE queue_id = $1 AND state = 'scheduled' AND run_at <= $2
            ORDER BY run_at
            LIMIT $3
            FOR UPDATE SKIP LOCKED))
