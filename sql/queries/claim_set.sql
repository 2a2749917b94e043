-- Claims up to $2 ready jobs of queue $1, in claim order (fair turns
-- between groups: docs/groups.md), each with a new lease until $4, for
-- worker $5 ($7: whether the queue counts a group's jobs in flight). A job
-- with no attempt left of $3 (its last lease expired, or max_attempts was
-- lowered) is locked but not claimed: it comes back still
-- 'ready', for the caller to move to the dead letters. With $6, the name
-- of a webhook queue, each job comes with its request body: the job object
-- a SQL sender gets (deliver_lock.sql), as JSON text, built here rather
-- than by a second look at the rows, and its webhook-id (NULL: no body, no
-- webhook-id).
--
-- Then claim_next.sql (or claim_ids.sql, or for an ordered queue
-- ordered_front.sql + claim_heads.sql + ordered_heads.sql) picks the jobs'
-- ids, and claim_returning.sql says what comes back.
--
-- The shape is deliberate. These statements run from one generic plan, in
-- which LIMIT $2 is guessed at a tenth of the table: joined to the table,
-- the picked rows get a merge join over every job. An array of ids leaves
-- the planner nothing to choose but the id index.
UPDATE queue_live l
   SET state = CASE WHEN l.attempts >= $3 THEN l.state ELSE 'processing' END,
       attempts = CASE WHEN l.attempts >= $3 THEN l.attempts ELSE l.attempts + 1 END,
       lease = CASE WHEN l.attempts >= $3 THEN l.lease ELSE queue_lease() END,
       lease_expires_at = CASE WHEN l.attempts >= $3 THEN l.lease_expires_at ELSE $4 END,
       worker = CASE WHEN l.attempts >= $3 THEN l.worker ELSE $5 END,
       -- (queue_live_group_busy: only an ordered queue or one with
       -- group_max_in_flight counts a group's jobs in flight, $7, as the
       -- claim read the queue's options under its rules lock: catalog.rs)
       group_counted = CASE WHEN l.attempts >= $3 THEN l.group_counted
                            ELSE l.group_key IS NOT NULL AND $7 END
 WHERE l.id = ANY (ARRAY(
