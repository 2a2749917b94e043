-- Whether the connecting role acts as queue $1's owner, as the SQL API
-- decides it: a member of the owning role, or a superuser (whom MEMBER
-- counts as a member of every role). No row: no such queue.
SELECT pg_has_role(current_user, owner::oid, 'MEMBER')
  FROM queue_queues
 WHERE name = $1
