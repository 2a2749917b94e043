-- The dashboard's pause action: the SQL API's own call, so the database
-- decides who may.
SELECT queue_pause($1)::text
