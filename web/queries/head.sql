-- A stuck group's head as it is now, and how many jobs of its group wait
-- (pending ones, itself included when it is pending).
SELECT j.status, j.queue, j.group_key, left(j.last_error, 300) AS last_error, j.attempts,
       coalesce((SELECT g.pending FROM queue_groups(j.queue) g
                  WHERE g.group_key = j.group_key), 0) AS waiting
  FROM queue_job($1) j
