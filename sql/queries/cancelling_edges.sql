-- The children of parents $1, which ended as $2 says, that a failure
-- cancels: edges of parents that failed or were cancelled, to children
-- whose on_parent_failure is 'cancel'. Kept (a retry of the parent finds
-- them); each with its parent and how the parent ended.
SELECT e.child, e.parent, p.outcome
  FROM queue_edges e
  JOIN unnest($1::bigint[], $2::text[]) AS p(id, outcome) ON e.parent = p.id
 WHERE e.parent = ANY ($1) AND p.outcome <> 'succeeded' AND e.cancels
