-- $1 schedule name: its queue, unlocked (the caller locks the queue, then
-- the schedule: the order queue_drop takes them in). No row: none.
SELECT queue_id FROM queue_recurring WHERE name = $1
