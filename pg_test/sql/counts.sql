\set SHOW_CONTEXT never
-- Last: queue_stats counts unfinished jobs from the tallies' `live` deltas,
-- less those in flight, scheduled and blocked, and finds the oldest due job
-- by a walk of the claim order's index. After every file before this one
-- has moved jobs every way there is (enqueue, claim, complete, fail, bury,
-- retry, cancel, purge, drop, dependencies' cancellations and resumes,
-- schedules, senders), each queue's figures equal a count of its jobs.
CREATE TEMP VIEW counted AS
SELECT q.name AS queue,
       count(j.id) FILTER (WHERE j.state = 'ready'
                              OR (j.state = 'scheduled' AND j.run_at <= now())) AS pending,
       count(j.id) FILTER (WHERE j.state = 'scheduled' AND j.run_at > now()) AS scheduled,
       count(j.id) FILTER (WHERE j.state = 'processing') AS processing,
       count(j.id) FILTER (WHERE j.state = 'blocked') AS blocked,
       min(j.run_at) FILTER (WHERE j.state = 'ready'
                                OR (j.state = 'scheduled' AND j.run_at <= now())) AS oldest_due
  FROM queue_queues q LEFT JOIN queue_live j ON j.queue_id = q.id
 GROUP BY q.name;
CREATE TEMP VIEW compared AS
SELECT s.queue, (s.pending, s.scheduled, s.processing, s.blocked)
                = (c.pending, c.scheduled, c.processing, c.blocked) AS counts_equal,
       s.oldest_due_age IS NOT DISTINCT FROM
           CASE WHEN c.oldest_due IS NOT NULL THEN greatest(now() - c.oldest_due, interval '0') END
           AS oldest_equal,
       c.pending
  FROM queue_stats s JOIN counted c USING (queue);
SELECT count(*) > 20 AS many_queues, count(*) FILTER (WHERE pending > 0) > 3 AS some_pending,
       count(*) FILTER (WHERE NOT counts_equal) AS counts_wrong,
       count(*) FILTER (WHERE NOT oldest_equal) AS oldest_wrong
  FROM compared;
SELECT * FROM compared WHERE NOT (counts_equal AND oldest_equal);
-- the same after the tallies are folded into the counters
SELECT queue_cleanup() >= 0 AS folded;
SELECT count(*) FILTER (WHERE NOT counts_equal) AS counts_wrong FROM compared;

-- priorities and turns: the oldest due job is found behind the front of
-- the claim order (a later priority, a later turn of a group)
SELECT queue_create('n.walk');
SELECT queue_enqueue('n.walk', '{}', priority => 5) > 0;
SELECT queue_enqueue('n.walk', '{}', priority => 1, run_at => now() - interval '1 hour') > 0;
SELECT count(*) FROM queue_enqueue_batch('n.walk', array_fill('{}'::jsonb, ARRAY[3]),
                                         group_keys => ARRAY['a', 'a', 'a']);
SELECT oldest_due_age >= interval '1 hour' AS oldest_found, pending FROM queue_stats WHERE queue = 'n.walk';
SELECT count(*) FILTER (WHERE NOT (counts_equal AND oldest_equal)) AS wrong FROM compared;
