-- Jobs $1 end with status $3 ('succeeded' or 'cancelled') at $2, kept for
-- their queue's retention. Returns the ids that ended so: none of a job that
-- is no longer unfinished. A completion has locked its jobs already; a
-- cancellation waits here for whoever holds one. Ends with into_history.sql.
WITH gone AS (
    DELETE FROM queue_live WHERE id = ANY ($1) RETURNING *, NULL::jsonb AS result, NULL::bigint AS cancelled_by
),
