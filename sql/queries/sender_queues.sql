-- The queues a worker delivers: those with a sender or a webhook, not
-- paused, in id order; for a webhook, where and how it is sent (url NULL:
-- a SQL sender).
SELECT q.id, q.name, q.sender, q.sender_role::oid AS role, q.batch_size,
       w.url, w.headers, w.timeout, w.secret, w.max_in_flight
  FROM queue_queues q
  LEFT JOIN queue_webhooks w ON w.queue_id = q.id
 WHERE q.sender IS NOT NULL AND NOT q.paused
 ORDER BY q.id
