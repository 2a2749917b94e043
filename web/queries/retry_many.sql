-- The dashboard's retry of many dead letters: queue_retry, the SQL API's
-- own call, for each id $1, in one statement (the database decides who
-- may); how many went back to pending.
SELECT count(*) FILTER (WHERE queue_retry(id))
  FROM unnest($1::bigint[]) AS t(id)
