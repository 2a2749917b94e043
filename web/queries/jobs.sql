-- A queue's jobs with ids in [$4, $3), newest first, at most $5: one window
-- of a page, with the page's filters (each NULL when not set): status $2,
-- a piece of the last error $6 (any letter case), a payload key $7 (with
-- the text of its value $8), group $9, worker $10, and $11 <= time < $12,
-- the time being the finish with $13 = 'finished', else the enqueue. The id
-- range keeps each statement to a range of the view's id indexes, however
-- many jobs the database retains (an ORDER BY id LIMIT alone would sort
-- them all).
SELECT id, status, priority, attempts, max_attempts,
       date_trunc('second', run_at)::text AS run_at,
       date_trunc('second', enqueued_at)::text AS enqueued_at,
       date_trunc('second', finished_at)::text AS finished_at,
       left(payload::text, 120) AS payload, left(last_error, 120) AS last_error,
       group_key, worker
  FROM queue_jobs
 WHERE queue = $1
   AND ($2::text IS NULL OR status = $2::text)
   AND id < $3 AND id >= $4
   AND ($6::text IS NULL OR strpos(lower(last_error), lower($6::text)) > 0)
   AND ($7::text IS NULL OR CASE WHEN $8::text IS NULL THEN payload ? $7::text
                                 ELSE payload ->> $7::text = $8::text END)
   AND ($9::text IS NULL OR group_key = $9::text)
   AND ($10::text IS NULL OR worker = $10::text)
   AND ($11::text IS NULL
        OR CASE WHEN $13::text = 'finished' THEN finished_at ELSE enqueued_at END
           >= $11::text::timestamptz)
   AND ($12::text IS NULL
        OR CASE WHEN $13::text = 'finished' THEN finished_at ELSE enqueued_at END
           < $12::text::timestamptz)
 ORDER BY id DESC
 LIMIT $5
