-- The dashboard's purge of chosen dead letters: queue_purge with its ids
-- (0.4), the SQL API's own call, so the database decides who may.
SELECT queue_purge($1, 'failed', $2::bigint[])
