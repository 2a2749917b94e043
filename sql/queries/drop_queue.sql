-- $2: force. Without it, the queue goes only if no unfinished job is left
-- and no schedule enqueues into it; the counts of those come back either
-- way, and the ids of the unfinished jobs that went with it (and of those
-- among them that jobs wait for: their end counts as a failure). Every job of the queue goes with it, and so do its counters and
-- (with force) its schedules.
WITH unfinished AS (
    SELECT count(*) AS n FROM queue_live WHERE queue_id = $1
), scheduled AS (
    SELECT count(*) AS n FROM queue_recurring WHERE queue_id = $1
), unscheduled AS (
    DELETE FROM queue_recurring WHERE queue_id = $1 AND $2
), dropped AS (
    DELETE FROM queue_queues
     WHERE id = $1 AND ($2 OR ((SELECT n FROM unfinished) = 0 AND (SELECT n FROM scheduled) = 0))
    RETURNING id
), counters AS (
    DELETE FROM queue_counters WHERE queue_id = (SELECT id FROM dropped)
), jobs AS (
    DELETE FROM queue_live WHERE queue_id = (SELECT id FROM dropped) RETURNING id, has_children
), done AS (
    DELETE FROM queue_done WHERE queue_id = (SELECT id FROM dropped)
), dead AS (
    DELETE FROM queue_dead WHERE queue_id = (SELECT id FROM dropped)
)
SELECT (SELECT count(*) FROM dropped) AS dropped, (SELECT n FROM unfinished) AS unfinished,
       (SELECT n FROM scheduled) AS schedules, (SELECT array_agg(id) FROM jobs) AS gone,
       (SELECT array_agg(id) FROM jobs WHERE has_children) AS parents
