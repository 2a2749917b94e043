-- A queue's webhook: its URL as registered (the page shows it by the rule
-- of src/urls.rs: no query, no path past its first segment that may be a
-- secret), the names of its headers (never their values), and whether it
-- signs (never the secret).
SELECT w.url,
       ARRAY(SELECT jsonb_object_keys(w.headers) ORDER BY 1) AS header_names,
       w.timeout::text AS timeout, w.secret IS NOT NULL AS signed, w.max_in_flight
  FROM queue_webhooks w JOIN queue_queues q ON q.id = w.queue_id
 WHERE q.name = $1
