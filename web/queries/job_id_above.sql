-- Whether a job with an id at or above $1 exists: each part of queue_jobs
-- answers from its id index.
SELECT EXISTS (SELECT 1 FROM queue_jobs WHERE id >= $1)
