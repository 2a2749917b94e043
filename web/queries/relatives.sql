-- Which of a job's relatives this database's extension can show: its
-- parents (queue_parents) and its children (queue_children), 0.4.
SELECT to_regprocedure('queue_parents(bigint)') IS NOT NULL AS parents,
       to_regprocedure('queue_children(bigint)') IS NOT NULL AS children
