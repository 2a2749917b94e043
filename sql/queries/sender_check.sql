-- The sender of queue $1 as it stands now, before a transaction of calls:
-- its registered signature (NULL when the queue has none), the function it
-- resolves to now (NULL: none), the registering role's oid and name (its
-- oid when it no longer exists: delivery.rs looks that up in the syscache),
-- and the queue's name and max_attempts;
-- `webhook`: the queue is delivered over HTTP instead (webhooks/).
-- No row: the queue is gone. (What the function is, senders.rs checks,
-- as at registration.)
SELECT q.sender, w.queue_id IS NOT NULL AS webhook,
       CASE WHEN w.queue_id IS NULL THEN to_regprocedure(q.sender)::oid END AS function,
       q.sender_role::oid AS role, q.sender_role::text AS role_name,
       q.name, q.max_attempts
  FROM queue_queues q
  LEFT JOIN queue_webhooks w ON w.queue_id = q.id
 WHERE q.id = $1
