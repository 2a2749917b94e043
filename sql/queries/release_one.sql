-- Job $1, locked by the caller, is ready again with its attempts unchanged.
UPDATE queue_live
   SET state = 'ready', lease = NULL, lease_expires_at = NULL, worker = NULL
 WHERE id = $1
