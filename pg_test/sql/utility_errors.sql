-- With the library preloaded, every backend runs the extension's utility
-- hook. A utility statement that fails reports PostgreSQL's own error
-- through it untouched: the same SQLSTATE, message, detail, hint and
-- position, and nothing added (these tests' server runs with
-- RUST_BACKTRACE=1, so an error re-raised through Rust would show a
-- backtrace). First in a database with the extension, then in one without.
\set SHOW_CONTEXT never
SELECT current_database() AS golden_database \gset
CREATE ROLE utility_owner;
CREATE TABLE utility_t (i int);
CREATE VIEW utility_v AS SELECT i FROM utility_t;
ALTER TABLE utility_t OWNER TO utility_owner;
ALTER VIEW utility_v OWNER TO utility_owner;
CREATE DATABASE utility_plain;
\c utility_plain
CREATE ROLE utility_plain_owner;
CREATE TABLE utility_t (i int);
CREATE VIEW utility_v AS SELECT i FROM utility_t;
ALTER TABLE utility_t OWNER TO utility_plain_owner;
\c :golden_database
SELECT count(*) AS extension_here FROM pg_extension WHERE extname = 'queue';

GRANT SELECT ON pg_class TO nosuchrole;
\echo :LAST_ERROR_SQLSTATE
CREATE TABLE nosuchschema.t (i int);
\echo :LAST_ERROR_SQLSTATE
CREATE TABLE utility_p (i nosuchtype);
\echo :LAST_ERROR_SQLSTATE
DROP DATABASE nosuchdb;
\echo :LAST_ERROR_SQLSTATE
DROP TABLE utility_t;
\echo :LAST_ERROR_SQLSTATE
DROP ROLE utility_owner;
\echo :LAST_ERROR_SQLSTATE
SET ROLE utility_owner;
CREATE DATABASE utility_nope;
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;

\c utility_plain
SELECT count(*) AS extension_here FROM pg_extension WHERE extname = 'queue';
\set SHOW_CONTEXT never
GRANT SELECT ON pg_class TO nosuchrole;
\echo :LAST_ERROR_SQLSTATE
CREATE TABLE nosuchschema.t (i int);
\echo :LAST_ERROR_SQLSTATE
CREATE TABLE utility_p (i nosuchtype);
\echo :LAST_ERROR_SQLSTATE
DROP TABLE utility_t;
\echo :LAST_ERROR_SQLSTATE
DROP ROLE utility_plain_owner;
\echo :LAST_ERROR_SQLSTATE
SET ROLE utility_plain_owner;
CREATE DATABASE utility_nope;
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
DROP VIEW utility_v;
DROP TABLE utility_t;
DROP ROLE utility_plain_owner;

\c :golden_database
\set SHOW_CONTEXT never
-- the hook reads CREATE DATABASE's template, which DEFAULT leaves without a value
CREATE DATABASE utility_default TEMPLATE DEFAULT;
DROP DATABASE utility_default;
DROP DATABASE utility_plain;
DROP VIEW utility_v;
DROP TABLE utility_t;
DROP ROLE utility_owner;
