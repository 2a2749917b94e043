-- Jobs $1, claimed by a worker that will not deliver them (their queue lost
-- its sender meanwhile), are ready again as if never claimed.
UPDATE queue_live
   SET state = 'ready', attempts = greatest(attempts - 1, 0), lease = NULL,
       lease_expires_at = NULL, worker = NULL
 WHERE id = ANY ($1) AND state = 'processing'
