-- The dashboard's cancel action: the SQL API's own call, so the database
-- decides who may.
SELECT queue_cancel($1)::text
