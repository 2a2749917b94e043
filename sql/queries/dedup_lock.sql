-- Serializes enqueues of one dedup key, until the end of the transaction.
SELECT pg_advisory_xact_lock($1, hashtext($2))
