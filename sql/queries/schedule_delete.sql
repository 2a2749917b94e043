-- $1 schedule name; no row: there was none.
DELETE FROM queue_recurring WHERE name = $1 RETURNING queue_id
