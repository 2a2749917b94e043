-- Jobs $1, just enqueued, depend on jobs $2 (their depends_on), $3 of which
-- they wait for (an edge each, which `cancels` them when their parent fails
-- if $4): waiting_for counts those, and a job that waits is 'blocked'. The
-- parents $5, which have ended in failure and cancel them, get an edge too,
-- for a retry of the parent to find them (and are marked as having
-- children).
WITH waits AS (
    INSERT INTO queue_edges (parent, child, cancels)
    SELECT p, c, $4 FROM unnest($1::bigint[]) c, unnest($3::bigint[]) p
), failed AS (
    INSERT INTO queue_edges (parent, child, cancels)
    SELECT p, c, true FROM unnest($1::bigint[]) c, unnest($5::bigint[]) p
), dead_marked AS (
    -- (cardinality first: a one-time filter that skips the scan when no
    -- parent failed, whatever plan the statement has)
    UPDATE queue_dead SET has_children = true
     WHERE cardinality($5::bigint[]) > 0 AND id = ANY ($5) AND NOT has_children
), done_marked AS (
    UPDATE queue_done SET has_children = true
     WHERE cardinality($5::bigint[]) > 0 AND id = ANY ($5) AND NOT has_children
)
UPDATE queue_live
   SET depends_on = $2, waiting_for = cardinality($3),
       state = CASE WHEN cardinality($3) > 0 THEN 'blocked' ELSE state END,
       -- (a blocked job is an older unfinished job of its group that is
       -- neither in flight, scheduled nor ready: the later jobs of its
       -- group must look for it, schema.sql)
       turn_safe = turn_safe AND cardinality($3) = 0
 WHERE id = ANY ($1)
