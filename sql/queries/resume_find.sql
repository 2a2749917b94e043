-- The jobs that the end of job $1 cancelled (cancelled_by $1, still
-- cancelled and retained, an edge from $1 kept), which no other parent of
-- theirs holds cancelled (one that failed or was cancelled, and cancels
-- them): a retry of $1 puts them back (dependencies.rs).
-- (The children are looked up by id, from the edges: a join could be planned
-- as a walk of the whole history in id order.)
SELECT c.id
  FROM queue_done c
 WHERE c.id = ANY (ARRAY(SELECT e.child FROM queue_edges e WHERE e.parent = $1))
   AND c.status = 'cancelled' AND c.cancelled_by = $1
   AND NOT EXISTS (
        SELECT FROM queue_edges o
         WHERE o.child = c.id AND o.parent <> $1 AND o.cancels
           AND (EXISTS (SELECT FROM queue_dead d WHERE d.id = o.parent)
                OR EXISTS (SELECT FROM queue_done x
                            WHERE x.id = o.parent AND x.status = 'cancelled')))
