-- The jobs that the end of job $1 cancelled (cancelled_by $1, still
-- cancelled and retained, an edge from $1 kept), which no other parent of
-- theirs holds cancelled (one that failed or was cancelled, and cancels
-- them): a retry of $1 puts them back (dependencies.rs).
SELECT c.id
  FROM queue_edges e
  JOIN queue_done c ON c.id = e.child AND c.status = 'cancelled' AND c.cancelled_by = $1
 WHERE e.parent = $1
   AND NOT EXISTS (
        SELECT FROM queue_edges o
         WHERE o.child = c.id AND o.parent <> $1 AND o.cancels
           AND (EXISTS (SELECT FROM queue_dead d WHERE d.id = o.parent)
                OR EXISTS (SELECT FROM queue_done x
                            WHERE x.id = o.parent AND x.status = 'cancelled')))
