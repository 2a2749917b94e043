-- A queue's webhook as it may be shown: the URL without its query or
-- fragment, the names of its headers (never their values), and whether it
-- signs (never the secret).
SELECT regexp_replace(w.url, '[?#].*$', '') AS url,
       ARRAY(SELECT jsonb_object_keys(w.headers) ORDER BY 1) AS header_names,
       w.timeout::text AS timeout, w.secret IS NOT NULL AS signed, w.max_in_flight
  FROM queue_webhooks w JOIN queue_queues q ON q.id = w.queue_id
 WHERE q.name = $1
