-- The first $2 ready jobs of queue $1 in claim order, each with its group
-- and whether it is its group's oldest unfinished job with none of its
-- group in flight (asked only when $3: an ordered queue; always true
-- otherwise, and for a job without a group).
-- A group's jobs in flight are in an index of their own (schema.sql).
SELECT c.id, c.group_key,
       (NOT $3 OR c.group_key IS NULL
        OR (NOT EXISTS (SELECT FROM queue_live o
                         WHERE o.queue_id = $1 AND o.group_key = c.group_key
                           AND o.state <> 'processing' AND o.id < c.id)
            AND NOT EXISTS (SELECT FROM queue_live o
                             WHERE o.queue_id = $1 AND o.group_key = c.group_key
                               AND o.state = 'processing' AND o.group_counted)))
           AS head
  FROM (SELECT id, group_key, priority, turn, run_at FROM queue_live
         WHERE queue_id = $1 AND state = 'ready'
         ORDER BY priority DESC, turn, run_at, id
         LIMIT $2) c
 ORDER BY c.priority DESC, c.turn, c.run_at, c.id
