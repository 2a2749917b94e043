-- Jobs $1, claimed by the worker and locked by it, end with status $3
-- ('succeeded') at $2 and their senders' results $4 (one per id, or
-- NULL): finish.sql with results. Ends with into_history.sql.
WITH gone AS (
    DELETE FROM queue_live l
     USING unnest($1::bigint[], $4::jsonb[]) AS p(id, result)
     WHERE l.id = p.id
    RETURNING l.*, p.result, NULL::bigint AS cancelled_by
),
