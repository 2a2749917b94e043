-- $1 schedule name. Its queue, with the schedule's row locked until commit:
-- a firing worker, a replacement and an unschedule wait for each other.
-- No row: there is no such schedule.
SELECT q.name AS queue, s.queue_id, s.time_zone, s.group_key, q.ordered,
       q.sender IS NOT NULL AS pushed
  FROM queue_recurring s JOIN queue_queues q ON q.id = s.queue_id
 WHERE s.name = $1
   FOR UPDATE OF s
