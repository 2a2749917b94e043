-- Jobs left in flight by a queue worker ($1: the name workers claim under)
-- that stopped before it committed their outcome.
SELECT id FROM queue_live WHERE state = 'processing' AND worker = $1 ORDER BY id
