-- Queue $1 is delivered by POSTs to URL $5 (shown as sender $2), run as
-- role $3, at most $4 requests in flight, with headers $6, timeout $7 and
-- secret $8 (NULL: unsigned). It replaces a sender or webhook it had.
WITH q AS (
    UPDATE queue_queues SET sender = $2, sender_role = $3::regrole, batch_size = $4
     WHERE id = $1
    RETURNING id
)
INSERT INTO queue_webhooks (queue_id, url, headers, timeout, secret, max_in_flight)
SELECT id, $5, $6, $7, $8, $4 FROM q
    ON CONFLICT (queue_id) DO UPDATE
   SET url = excluded.url, headers = excluded.headers, timeout = excluded.timeout,
       secret = excluded.secret, max_in_flight = excluded.max_in_flight
