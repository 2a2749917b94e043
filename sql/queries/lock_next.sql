-- For a delivery in one transaction (jobs.rs, lock_next): the first $2
-- ready jobs of queue $1 in claim order, locked but not changed (no claim
-- is written: the transaction that delivers them deletes each job
-- delivered and counts an attempt only for those that fail), each with
-- its attempts so far and the argument its sender gets, the attempt under
-- way counted ($3 and $4: the queue's name and max_attempts), and its group
-- (for the rate windows of a queue with limits).
SELECT id, attempts,
       jsonb_build_object('id', id, 'queue', $3::text, 'payload', payload,
                          'headers', headers, 'attempt', attempts + 1,
                          'max_attempts', $4::int, 'enqueued_at', enqueued_at) AS job,
       group_key
  FROM queue_live
 WHERE queue_id = $1 AND state = 'ready'
 ORDER BY priority DESC, turn, run_at, id
 LIMIT $2
   FOR UPDATE SKIP LOCKED
