-- Job $1, locked by the caller, waits in flight for a rate window to have
-- room: its lease is kept until $2 at least, so that no claim takes it back
-- meanwhile (the recovery claims it again, sql_delivery::recover_one).
UPDATE queue_live SET lease_expires_at = greatest(lease_expires_at, $2) WHERE id = $1
