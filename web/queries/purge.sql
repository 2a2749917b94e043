-- The dashboard's purge action: the SQL API's own call, so the database
-- decides who may.
SELECT queue_purge($1, $2)::text
