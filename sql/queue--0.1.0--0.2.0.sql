-- queue 0.1.0 -> 0.2.0 (ALTER EXTENSION queue UPDATE).
--
-- 0.2.0 changed the library, not the SQL objects: senders now run with the
-- settings of their role's sessions, the launcher serves many databases on
-- few slots, and the library builds for PostgreSQL 15 and 18. Every
-- function keeps its name, arguments and C symbol, so the 0.1.0 objects
-- already call the 0.2.0 library correctly. tests/tests/upgrade.rs
-- compares the result with a fresh install object by object.

-- CREATE EXTENSION takes the comment from the control file, which 0.1.0 left
-- at pgrx's placeholder; an update does not read it again.
COMMENT ON EXTENSION queue IS 'A durable job and event queue: enqueue, claim and retry with leases, dead letters, and push delivery by a background worker';
