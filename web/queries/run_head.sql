-- "Run the head now" of a stuck group, as docs/groups.md says it: cancel
-- and retry in one statement, so its attempts start over and its id keeps
-- it at its group's head. The SQL API's own calls: the database decides
-- who may.
SELECT (queue_cancel($1) AND queue_retry($1))::text
