-- For a delivery in one transaction of an ordered queue without limits
-- that count (jobs.rs, lock_next): lock_next.sql's jobs and columns, but
-- only groups' heads, as claim_next_ordered.sql chooses them. The later
-- jobs of a head's group wait for it while it is locked, since it is still
-- their group's oldest unfinished job; queue_retry of an older dead letter
-- of its group waits for the lock (lock_group_head.sql).
SELECT l.id, l.attempts,
       jsonb_build_object('id', l.id, 'queue', $3::text, 'payload', l.payload,
                          'headers', l.headers, 'attempt', l.attempts + 1,
                          'max_attempts', $4::int, 'enqueued_at', l.enqueued_at) AS job,
       l.group_key
  FROM queue_live l
