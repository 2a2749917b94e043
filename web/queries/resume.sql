-- The dashboard's resume action: the SQL API's own call, so the database
-- decides who may.
SELECT queue_resume($1)::text
