-- Claims up to $2 ready jobs of queue $1 in claim order, with a new lease
-- each until $4, for worker $5. A job with no attempt left of $3 (the queue's
-- max_attempts was lowered) goes to the dead letters instead. Always one row
-- at least: `exhausted` counts those; `id` is NULL when nothing was claimed.
WITH picked AS (
    SELECT id, slot, attempts FROM queue_live
     WHERE queue_id = $1 AND state = 'ready'
     ORDER BY priority DESC, run_at, id
     LIMIT $2
     FOR UPDATE SKIP LOCKED
), gone AS (
    DELETE FROM queue_live l USING picked p
     WHERE p.attempts >= $3 AND l.slot = p.slot AND l.id = p.id
    RETURNING l.*
), buried AS (
    INSERT INTO queue_dead (id, queue_id, priority, attempts, run_at, enqueued_at,
                            finished_at, worker, dedup_key, last_error, headers, payload)
    SELECT id, queue_id, priority, attempts, run_at, enqueued_at, $6, worker, dedup_key,
           format('no attempt left: %s made, max_attempts is now %s', attempts, $3),
           headers, payload
      FROM gone
), claimed AS (
    UPDATE queue_live l
       SET state = 'processing', attempts = l.attempts + 1, lease = gen_random_uuid(),
           lease_expires_at = $4, worker = $5
      FROM picked p
     WHERE p.attempts < $3 AND l.slot = p.slot AND l.id = p.id
    RETURNING l.id, l.payload, l.headers, l.attempts, l.enqueued_at, l.lease,
              l.lease_expires_at, l.priority, l.run_at
)
SELECT c.id, c.payload, c.headers, c.attempts, c.enqueued_at, c.lease, c.lease_expires_at,
       x.n AS exhausted
  FROM (SELECT count(*) AS n FROM gone) x
  LEFT JOIN claimed c ON true
 ORDER BY c.priority DESC, c.run_at, c.id
