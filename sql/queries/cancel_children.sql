-- Jobs $1 end with status $3 ('cancelled') at $2 because their parents $4
-- (one per job) ended as $5 says ('failed' or 'cancelled'): last_error
-- names the parent, and cancelled_by keeps it, for a retry of the parent to
-- put them back (dependencies.rs). Each waits for whoever holds it (a
-- claim's delivery), as queue_cancel does. Ends with into_history.sql.
WITH gone AS (
    DELETE FROM queue_live l
     USING unnest($1::bigint[], $4::bigint[], $5::text[]) AS c(id, parent, outcome)
     WHERE l.id = c.id
    RETURNING l.queue_id, l.priority, l.attempts, l.id, l.run_at, l.enqueued_at, l.worker,
              l.dedup_key,
              pg_catalog.format('its parent job %s %s', c.parent,
                                CASE c.outcome WHEN 'failed' THEN 'failed'
                                               ELSE 'was cancelled' END) AS last_error,
              l.headers, l.payload, l.uid, l.group_key, NULL::jsonb AS result, l.depends_on,
              l.has_children, c.parent AS cancelled_by, l.lease
),
