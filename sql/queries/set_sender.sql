-- Queue $1 is delivered by sender $2 (a schema-qualified signature), run as
-- role $3, $4 jobs at a time; NULLs unregister it. Either way a webhook it
-- had goes. Returns the queue when it had a sender (or webhook) before.
WITH webhook AS (
    DELETE FROM queue_webhooks WHERE queue_id = $1
)
UPDATE queue_queues q
   SET sender = $2, sender_role = $3::regrole, batch_size = $4
  FROM (SELECT id, sender FROM queue_queues WHERE id = $1 FOR UPDATE) old
 WHERE q.id = old.id
RETURNING old.sender IS NOT NULL AS had_sender
