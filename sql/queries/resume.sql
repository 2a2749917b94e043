-- Jobs $1, cancelled by a parent's end (resume_find.sql), wait again, each
-- for $2 parents (its edges left, locked: lock_edges.sql): back in
-- queue_live, blocked, due at $3 once released, attempts reset, last_error
-- kept; the counts of cancelled jobs go down as for a retry. Returns them,
-- and whether jobs wait for each (the jobs their cancellation cancelled come
-- back too).
WITH gone AS (
    DELETE FROM queue_done d
     USING unnest($1::bigint[], $2::int[]) AS c(id, waiting)
     WHERE d.id = c.id AND d.status = 'cancelled'
    RETURNING d.*, c.waiting
), back AS (
    INSERT INTO queue_live (slot, queue_id, priority, attempts, id, run_at, enqueued_at,
                            state, dedup_key, last_error, headers, payload, uid, group_key,
                            turn, depends_on, waiting_for, has_children)
    SELECT (g.last_value % 2)::smallint, j.queue_id, j.priority, 0, j.id, $3, j.enqueued_at,
           'blocked', j.dedup_key, j.last_error, j.headers, j.payload, j.uid, j.group_key,
           CASE WHEN j.group_key IS NULL THEN 0 ELSE -1 END, j.depends_on, j.waiting,
           j.has_children
      FROM gone j, queue_live_generation g
), tally AS (
    INSERT INTO queue_tallies (queue_id, slot, cancelled, live)
    SELECT queue_id, slot, -count(*), count(*) FROM gone GROUP BY queue_id, slot
)
SELECT id, has_children FROM gone
