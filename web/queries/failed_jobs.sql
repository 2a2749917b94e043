-- A page of a queue's dead letters, newest first, below id $2 when given:
-- queue_failed, whose table has an index on (queue, id), so a page costs
-- the same however many there are. Filters (NULL when not set): a piece of
-- the last error $4, a payload key $5 (with the text of its value $6),
-- $7 <= finished_at < $8. (The columns queue_failed lacks are NULL.)
SELECT id, 'failed' AS status, NULL::integer AS priority, attempts,
       NULL::integer AS max_attempts, NULL::text AS run_at, NULL::text AS enqueued_at,
       date_trunc('second', finished_at)::text AS finished_at,
       left(payload::text, 120) AS payload, left(last_error, 120) AS last_error,
       NULL::text AS group_key, NULL::text AS worker
  FROM queue_failed
 WHERE queue = $1
   AND ($2::bigint IS NULL OR id < $2::bigint)
   AND ($4::text IS NULL OR strpos(lower(last_error), lower($4::text)) > 0)
   AND ($5::text IS NULL OR CASE WHEN $6::text IS NULL THEN payload ? $5::text
                                 ELSE payload ->> $5::text = $6::text END)
   AND ($7::text IS NULL OR finished_at >= $7::text::timestamptz)
   AND ($8::text IS NULL OR finished_at < $8::text::timestamptz)
 ORDER BY id DESC
 LIMIT $3
