-- The sender of queue $1 as it stands now, before a transaction of calls:
-- its registered signature (NULL when the queue has none), the function it
-- resolves to now (NULL: none), the registering role's oid and name (its
-- oid when it no longer exists: delivery.rs looks that up in the syscache),
-- the queue's name and max_attempts, and the settings a new session of that
-- role in database $2 starts with (pg_db_role_setting), lowest priority
-- first: ALTER ROLE ALL SET, then ALTER DATABASE ... SET, then ALTER ROLE
-- ... SET, then ALTER ROLE ... IN DATABASE ... SET (0 in setrole or
-- setdatabase: every role or database). Applied in this order, each later
-- one wins, as at login (postinit.c's process_settings() applies them
-- highest first and keeps the first);
-- `webhook`: the queue is delivered over HTTP instead (webhooks/).
-- No row: the queue is gone. (What the function is, senders.rs checks,
-- as at registration.) One statement: in a worker's first round each is
-- planned anew.
SELECT q.sender, w.queue_id IS NOT NULL AS webhook,
       CASE WHEN w.queue_id IS NULL THEN to_regprocedure(q.sender)::oid END AS function,
       q.sender_role::oid AS role, q.sender_role::text AS role_name,
       q.name, q.max_attempts,
       ARRAY(SELECT u.setting
               FROM pg_db_role_setting s
              CROSS JOIN LATERAL unnest(s.setconfig) WITH ORDINALITY AS u(setting, n)
              WHERE s.setdatabase IN (0, $2) AND s.setrole IN (0, q.sender_role::oid)
              ORDER BY s.setrole <> 0, s.setdatabase <> 0, u.n) AS settings
  FROM queue_queues q
  LEFT JOIN queue_webhooks w ON w.queue_id = q.id
 WHERE q.id = $1
