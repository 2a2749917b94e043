-- The jobs among $1 that are in flight with one of the leases $2, locked
-- until the end of the transaction. (The caller pairs them up exactly; the
-- lease filter keeps a wrong pair from locking another worker's job.)
SELECT id, lease FROM queue_live
 WHERE id = ANY ($1) AND lease = ANY ($2) AND state = 'processing'
   FOR UPDATE
