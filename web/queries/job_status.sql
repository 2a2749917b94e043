-- One job's status now, to check a cancel against the status it was
-- confirmed in.
SELECT status FROM queue_job($1)
