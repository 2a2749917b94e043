-- The edges to jobs $1, locked until the end of the transaction: a parent's
-- end that would count one (settle_edges.sql) waits for the resume of its
-- child, and the resume for it. One row per edge, its child.
SELECT child FROM queue_edges WHERE child = ANY ($1) FOR UPDATE
