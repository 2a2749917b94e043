-- Which of jobs $1 are unfinished (in queue_live).
SELECT id FROM queue_live WHERE id = ANY ($1)
