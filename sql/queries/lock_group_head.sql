-- Waits for a worker's batch that delivers the head of group $2 of ordered
-- queue $1 in one transaction (lock_set.sql): the oldest of its jobs
-- not in flight, locked until the caller commits. queue_retry takes it
-- before it puts an older job of the group back, which would otherwise be
-- the group's head while the batch still delivers the later one.
SELECT id FROM queue_live
 WHERE queue_id = $1 AND group_key = $2 AND state <> 'processing'
 ORDER BY id
 LIMIT 1
   FOR UPDATE
