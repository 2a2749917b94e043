UPDATE queue_live SET lease_expires_at = $3
 WHERE id = $1 AND lease = $2 AND state = 'processing'
RETURNING lease_expires_at
