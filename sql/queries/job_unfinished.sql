-- Whether job $1 is still pending or processing.
SELECT EXISTS (SELECT FROM queue_live WHERE id = $1) AS unfinished
