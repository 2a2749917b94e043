-- Jobs $1, locked for a delivery in one transaction (lock_set.sql) and
-- delivered, end with status $3 ('succeeded') at $2 and their senders'
-- results $5 (one per id, or NULL): as finish.sql, but their claim was
-- never written, so the attempt they were delivered in and the worker $4
-- that delivered them are written here. Ends with into_history.sql.
WITH gone AS (
    DELETE FROM queue_live l
     USING unnest($1::bigint[], $5::jsonb[]) AS p(id, result)
     WHERE l.id = p.id
    RETURNING l.queue_id, l.priority, l.attempts + 1 AS attempts, l.id, l.run_at,
              l.enqueued_at, $4::text AS worker, l.dedup_key, l.last_error, l.headers,
              l.payload, l.uid, l.group_key, p.result, l.depends_on, l.has_children,
              NULL::bigint AS cancelled_by, NULL::uuid AS lease
),
