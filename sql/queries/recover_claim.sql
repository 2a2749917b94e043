-- Job $1, locked by the caller, is claimed again: a new attempt under a new
-- lease until $2, with last_error $3. Returns the lease.
UPDATE queue_live
   SET attempts = attempts + 1, lease = queue_lease(), lease_expires_at = $2,
       last_error = $3
 WHERE id = $1
RETURNING lease
