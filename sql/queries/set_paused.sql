UPDATE queue_queues SET paused = $2 WHERE id = $1
