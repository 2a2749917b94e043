-- purge.sql for the jobs $3 of queue $1 alone (with status $2, any when
-- NULL): found by id, whatever the queue's size. The same row.
WITH live AS (
    DELETE FROM queue_live
     WHERE id = ANY ($3) AND queue_id = $1
       AND ($2 IS NULL
            OR ($2 = 'pending' AND state <> 'processing')
            OR ($2 = 'processing' AND state = 'processing'))
    RETURNING id, has_children
), live_tally AS (
    INSERT INTO queue_tallies (queue_id, live)
    SELECT $1, -count(*) FROM live HAVING count(*) > 0
), done AS (
    DELETE FROM queue_done
     WHERE id = ANY ($3) AND queue_id = $1 AND ($2 IS NULL OR status = $2)
    RETURNING slot, status
), dead AS (
    DELETE FROM queue_dead
     WHERE id = ANY ($3) AND queue_id = $1 AND ($2 IS NULL OR $2 = 'failed')
    RETURNING 1
), tally AS (
    INSERT INTO queue_tallies (queue_id, slot, succeeded, cancelled, failed)
    SELECT $1, slot, -count(*) FILTER (WHERE status = 'succeeded'),
           -count(*) FILTER (WHERE status = 'cancelled'), 0
      FROM done GROUP BY slot
    UNION ALL
    SELECT $1, -1, 0, 0, -count(*) FROM dead HAVING count(*) > 0
)
SELECT (SELECT count(*) FROM live) + (SELECT count(*) FROM done) + (SELECT count(*) FROM dead) AS purged,
       (SELECT array_agg(id) FROM live) AS unfinished,
       (SELECT array_agg(id) FROM live WHERE has_children) AS parents
