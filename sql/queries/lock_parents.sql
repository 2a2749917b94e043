-- The jobs among $1 that have not ended, which jobs being enqueued will wait
-- for: locked (FOR KEY SHARE) until the end of the transaction, so that a
-- parent's end, which deletes its row, waits for the children's commit and
-- then finds their edges; and marked as having children (has_children), so
-- that their end settles them.
WITH locked AS (
    SELECT id, has_children FROM queue_live WHERE id = ANY ($1) FOR KEY SHARE
), marked AS (
    UPDATE queue_live l SET has_children = true
      FROM locked k
     WHERE l.id = k.id AND NOT k.has_children
)
SELECT id FROM locked
