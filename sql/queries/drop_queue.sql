-- $2: force. Without it, the queue goes only if no unfinished job is left;
-- the count of those comes back either way. Every job of the queue goes with
-- it, and so do its counters.
WITH unfinished AS (
    SELECT count(*) AS n FROM queue_live WHERE queue_id = $1
), dropped AS (
    DELETE FROM queue_queues
     WHERE id = $1 AND ($2 OR (SELECT n FROM unfinished) = 0)
    RETURNING id
), counters AS (
    DELETE FROM queue_counters WHERE queue_id = (SELECT id FROM dropped)
), jobs AS (
    DELETE FROM queue_live WHERE queue_id = (SELECT id FROM dropped)
), done AS (
    DELETE FROM queue_done WHERE queue_id = (SELECT id FROM dropped)
), dead AS (
    DELETE FROM queue_dead WHERE queue_id = (SELECT id FROM dropped)
)
SELECT (SELECT count(*) FROM dropped) AS dropped, (SELECT n FROM unfinished) AS unfinished
