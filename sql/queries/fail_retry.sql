-- Job $1 waits for its next attempt at $2 ($3: 'ready' or 'scheduled'), with
-- last_error $4.
UPDATE queue_live
   SET state = $3, run_at = $2, lease = NULL, lease_expires_at = NULL, last_error = $4
 WHERE id = $1 AND state = 'processing'
