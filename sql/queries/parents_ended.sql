-- How jobs $1 ended: succeeded or cancelled (queue_done), failed
-- (queue_dead). A job in neither table, and not unfinished, is not retained.
SELECT id, status FROM queue_done WHERE id = ANY ($1)
UNION ALL
SELECT id, 'failed' FROM queue_dead WHERE id = ANY ($1)
