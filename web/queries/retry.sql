-- The dashboard's retry action: the SQL API's own call, so the database
-- decides who may.
SELECT queue_retry($1)::text
