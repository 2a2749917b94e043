-- queue 0.3.0 -> 0.4.0 (ALTER EXTENSION queue UPDATE).
--
-- Every 0.3.0 function keeps its name, arguments and C symbol, so the 0.3.0
-- objects call the 0.4.0 library correctly until this has run. What it
-- changes is what 0.4.0's install script has that 0.3.0's had not, written
-- the same way (tests/tests/upgrade.rs compares the result with a fresh
-- install object by object).

-- A webhook's URL as views show it (queue_stats.sender): 0.4.0 hides the
-- part of its path that may be a secret (webhooks/allow.rs); the webhooks
-- registered before are shown so too. (The function is the library's, for
-- this script only.)
CREATE FUNCTION queue_webhook_shown_0_4_0(url text) RETURNS text
    LANGUAGE c STRICT IMMUTABLE AS 'MODULE_PATHNAME', 'queue_webhook_shown_wrapper';
UPDATE queue_queues q
   SET sender = 'POST ' || queue_webhook_shown_0_4_0(w.url)
  FROM queue_webhooks w
 WHERE w.queue_id = q.id;
DROP FUNCTION queue_webhook_shown_0_4_0(text);
