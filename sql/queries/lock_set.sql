-- For a delivery in one transaction (jobs.rs, lock_next): ready jobs of
-- queue $1, locked but not changed (no claim is written: the transaction
-- that delivers them deletes each job delivered and counts an attempt only
-- for those that fail), each with its attempts so far and the argument its
-- sender gets, the attempt under way counted ($3 and $4: the queue's name
-- and max_attempts), its group (for the rate windows of a queue with
-- limits), and when it fell due (metrics: how long it waited).
--
-- Then lock_next.sql picks the first $2 in claim order, or, for an ordered
-- queue without limits that count (after ordered_front.sql),
-- ordered_heads.sql picks its groups' heads: a head locked stays its
-- group's oldest unfinished job, so the later jobs of its group wait for
-- it, and queue_retry of an older dead letter of its group waits for the
-- batch (catalog.rs, lock_retries).
SELECT r.id, r.attempts,
       -- (depends_on only for a job with parents)
       CASE WHEN r.depends_on IS NULL THEN
           jsonb_build_object('id', r.id, 'queue', $3::text, 'payload', r.payload,
                              'headers', r.headers, 'attempt', r.attempts + 1,
                              'max_attempts', $4::int, 'enqueued_at', r.enqueued_at)
       ELSE
           jsonb_build_object('id', r.id, 'queue', $3::text, 'payload', r.payload,
                              'headers', r.headers, 'attempt', r.attempts + 1,
                              'max_attempts', $4::int, 'enqueued_at', r.enqueued_at,
                              'depends_on', r.depends_on)
       END AS job,
       r.group_key, r.run_at
