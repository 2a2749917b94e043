-- What a claim of queue $1 may take, group by group, in claim order: in an
-- ordered queue ($4) each group's head, its oldest job not in flight when
-- that is ready and no job of the group is in flight where it counts;
-- otherwise each group's first $3 ready jobs, in enqueue order. Then jobs
-- without a group, each a group of its own at turn 0: the first $2 of each
-- priority. What a claim falls back on when the front of the claim
-- order is the backlog of groups that must wait (a head in flight or
-- waiting for its retry, a group at its limit): one probe per group, and
-- per priority, however deep those backlogs are (limits.rs). Nothing is
-- locked.
WITH RECURSIVE groups AS (
    (SELECT g.group_key FROM queue_live g
      WHERE g.queue_id = $1 AND g.group_key IS NOT NULL AND g.state <> 'processing'
      ORDER BY g.group_key
      LIMIT 1)
  UNION ALL
    SELECT n.group_key
      FROM groups p
     CROSS JOIN LATERAL (SELECT g.group_key FROM queue_live g
                          WHERE g.queue_id = $1 AND g.group_key > p.group_key
                            AND g.state <> 'processing'
                          ORDER BY g.group_key
                          LIMIT 1) n
), priorities AS (
    (SELECT r.priority FROM queue_live r
      WHERE r.queue_id = $1 AND r.state = 'ready'
      ORDER BY r.priority DESC
      LIMIT 1)
  UNION ALL
    SELECT n.priority
      FROM priorities p
     CROSS JOIN LATERAL (SELECT r.priority FROM queue_live r
                          WHERE r.queue_id = $1 AND r.state = 'ready' AND r.priority < p.priority
                          ORDER BY r.priority DESC
                          LIMIT 1) n
)
SELECT c.id, c.group_key
  FROM (SELECT f.id, f.group_key, f.priority, f.turn, f.run_at
          FROM groups g
         CROSS JOIN LATERAL (SELECT r.id, r.group_key, r.priority, r.turn, r.run_at, r.state
                               FROM queue_live r
                              -- (the group as a range, not an equality, so that only
                              -- queue_live_group gives this order: with an equality the
                              -- planner may walk the id index of every queue instead)
                              WHERE r.queue_id = $1
                                AND r.group_key >= g.group_key AND r.group_key <= g.group_key
                                AND r.state <> 'processing' AND ($4 OR r.state = 'ready')
                              ORDER BY r.group_key, r.id
                              LIMIT CASE WHEN $4 THEN 1 ELSE $3 END) f
         WHERE f.state = 'ready'
           AND NOT ($4 AND EXISTS (SELECT FROM queue_live o
                                    WHERE o.queue_id = $1 AND o.group_key = f.group_key
                                      AND o.state = 'processing' AND o.group_counted))
        UNION ALL
        SELECT x.id, x.group_key, x.priority, x.turn, x.run_at
          FROM priorities p
         CROSS JOIN LATERAL (SELECT r.id, r.group_key, r.priority, r.turn, r.run_at
                               FROM queue_live r
                              WHERE r.queue_id = $1 AND r.state = 'ready'
                                AND r.priority = p.priority AND r.turn = 0
                                AND r.group_key IS NULL
                              ORDER BY r.run_at, r.id
                              LIMIT $2) x) c
 ORDER BY c.priority DESC, c.turn, c.run_at, c.id
