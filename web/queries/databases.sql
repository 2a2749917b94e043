-- The databases one may connect to, in name order.
SELECT datname FROM pg_catalog.pg_database
 WHERE datallowconn AND NOT datistemplate
 ORDER BY datname
