-- The dashboard's run_schedule action: the SQL API's own call, so the database
-- decides who may.
SELECT queue_run_schedule($1)::text
