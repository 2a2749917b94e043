-- Jobs $1, locked by the caller and still ready, count the attempt that a
-- delivery in one transaction made of them (begun at $3) and are in flight
-- by worker $2 under an already expired lease: for a failed attempt, which the caller
-- then records (fail_lock.sql), or for the attempt a stopped worker cut
-- short (suspects.rs), which the recovery of left_in_flight.sql then
-- takes back. A job that moved on meanwhile is left alone. Returns each
-- job's id, lease, queue and group.
UPDATE queue_live
   SET state = 'processing', attempts = attempts + 1, lease = queue_lease($3),
       lease_expires_at = now(), worker = $2,
       -- (an ordered queue's head in flight holds its group back, as
       -- claim_set.sql's)
       group_counted = group_key IS NOT NULL
                       AND (SELECT q.ordered OR q.group_max_in_flight IS NOT NULL
                              FROM queue_queues q WHERE q.id = queue_live.queue_id)
 WHERE id = ANY ($1) AND state = 'ready'
RETURNING id, lease, queue_id, group_key
