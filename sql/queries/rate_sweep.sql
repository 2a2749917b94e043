-- Claims of queue $1 at $2 or earlier are past every window of the queue:
-- they go, unless a claim beside this one is removing them already (claims
-- of a queue run side by side: reservations.rs). The ORDER BY makes the
-- look a plain index scan (queue_claims_age), which marks the index entries
-- of claims deleted before as dead; a bitmap scan would visit each of them
-- again until vacuum.
DELETE FROM queue_claims
 WHERE ctid = ANY (ARRAY(SELECT ctid FROM queue_claims
                          WHERE queue_id = $1 AND claimed_at <= $2
                          ORDER BY claimed_at
                          FOR UPDATE SKIP LOCKED))
