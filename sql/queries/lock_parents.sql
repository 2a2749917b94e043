-- The jobs among $1 that have not ended, which jobs being enqueued will wait
-- for: locked (FOR KEY SHARE) until the end of the transaction, so that a
-- parent's end, which deletes its row, waits for the children's commit and
-- then finds their edges; and marked as having children (has_children), so
-- that their end settles them.
-- (The mark looks the parents up by id alone, as the lock does: a join with
-- the locked rows could be planned, in the statement's generic plan, as a
-- hash join over every job of the table, for each enqueue.)
WITH locked AS (
    SELECT id FROM queue_live WHERE id = ANY ($1) FOR KEY SHARE
), marked AS (
    UPDATE queue_live SET has_children = true WHERE id = ANY ($1) AND NOT has_children
)
SELECT id FROM locked
