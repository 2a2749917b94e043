\set SHOW_CONTEXT never
-- HTTP delivery: registering a webhook, and what registration refuses,
-- each with its SQLSTATE. No job is enqueued: nothing is ever sent.
SET queue.webhook_allow = 'https://hooks.example.com/in, http://127.0.0.1:9';
CREATE ROLE w_stranger;
SELECT queue_create('wh.one');
SELECT queue_register_webhook('wh.one', 'https://hooks.example.com/in/orders?token=abc',
    headers => '{"Authorization": "Bearer secret-token", "X-Tenant": "7"}',
    secret => 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw');
-- the view shows the endpoint without its query; the secret and the
-- header values show nowhere
SELECT queue, sender FROM queue_stats WHERE queue = 'wh.one';
SELECT count(*) AS leaks FROM queue_stats s
 WHERE s::text ~ '(secret-token|token=abc|MfKQ9r8)';
-- a webhook queue is not claimed from
SELECT * FROM queue_claim('wh.one');
\echo :LAST_ERROR_SQLSTATE
-- registering again replaces it; a SQL sender replaces it; unregistering
-- removes either
SELECT queue_register_webhook('wh.one', 'http://127.0.0.1:9/hook', max_in_flight => 1);
SELECT sender FROM queue_stats WHERE queue = 'wh.one';
SELECT queue_unregister_sender('wh.one');
SELECT sender FROM queue_stats WHERE queue = 'wh.one';
SELECT queue_unregister_sender('wh.one');

-- the allow list: a look-alike host, another scheme, another port, a path
-- that only shares a prefix, and an address no entry names
SELECT queue_register_webhook('wh.one', 'https://hooks.example.com.evil.net/in');
\echo :LAST_ERROR_SQLSTATE
SELECT queue_register_webhook('wh.one', 'http://hooks.example.com/in');
\echo :LAST_ERROR_SQLSTATE
SELECT queue_register_webhook('wh.one', 'https://hooks.example.com:8443/in');
\echo :LAST_ERROR_SQLSTATE
SELECT queue_register_webhook('wh.one', 'https://hooks.example.com/inbox');
\echo :LAST_ERROR_SQLSTATE
SELECT queue_register_webhook('wh.one', 'http://10.0.0.1/in');
\echo :LAST_ERROR_SQLSTATE
SET queue.webhook_allow = '';
SELECT queue_register_webhook('wh.one', 'https://hooks.example.com/in');
\echo :LAST_ERROR_SQLSTATE
SET queue.webhook_allow = 'ftp://files.example.com';
SELECT queue_register_webhook('wh.one', 'https://hooks.example.com/in');
\echo :LAST_ERROR_SQLSTATE
SET queue.webhook_allow = 'https://hooks.example.com/in';

-- the URL
SELECT queue_register_webhook('wh.one', 'ftp://hooks.example.com/in');
\echo :LAST_ERROR_SQLSTATE
SELECT queue_register_webhook('wh.one', 'https://user:pw@hooks.example.com/in?t=1');
\echo :LAST_ERROR_SQLSTATE
SELECT queue_register_webhook('wh.one', 'not a url');
\echo :LAST_ERROR_SQLSTATE
SELECT queue_register_webhook('wh.one', NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT queue_register_webhook(NULL, 'https://hooks.example.com/in');
\echo :LAST_ERROR_SQLSTATE
SELECT queue_register_webhook('wh.none', 'https://hooks.example.com/in');
\echo :LAST_ERROR_SQLSTATE
-- headers: never a value in the message
SELECT queue_register_webhook('wh.one', 'https://hooks.example.com/in', headers => '["x"]');
\echo :LAST_ERROR_SQLSTATE
SELECT queue_register_webhook('wh.one', 'https://hooks.example.com/in', headers => '{"X-Count": 7}');
\echo :LAST_ERROR_SQLSTATE
SELECT queue_register_webhook('wh.one', 'https://hooks.example.com/in', headers => '{"content-TYPE": "text/plain"}');
\echo :LAST_ERROR_SQLSTATE
SELECT queue_register_webhook('wh.one', 'https://hooks.example.com/in', headers => '{"Webhook-Id": "x"}');
\echo :LAST_ERROR_SQLSTATE
SELECT queue_register_webhook('wh.one', 'https://hooks.example.com/in', headers => '{"Bad Name": "x"}');
\echo :LAST_ERROR_SQLSTATE
SELECT queue_register_webhook('wh.one', 'https://hooks.example.com/in', headers => '{"Authorization": "Bearer s3cr3t\nX-Evil: 1"}');
\echo :LAST_ERROR_SQLSTATE
-- timeout, secret, max_in_flight
SELECT queue_register_webhook('wh.one', 'https://hooks.example.com/in', timeout => '0');
\echo :LAST_ERROR_SQLSTATE
SELECT queue_register_webhook('wh.one', 'https://hooks.example.com/in', timeout => '2 hours');
\echo :LAST_ERROR_SQLSTATE
SELECT queue_register_webhook('wh.one', 'https://hooks.example.com/in', secret => 'MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw');
\echo :LAST_ERROR_SQLSTATE
SELECT queue_register_webhook('wh.one', 'https://hooks.example.com/in', secret => 'whsec_c2hvcnQ=');
\echo :LAST_ERROR_SQLSTATE
SELECT queue_register_webhook('wh.one', 'https://hooks.example.com/in', secret => 'whsec_!!!');
\echo :LAST_ERROR_SQLSTATE
SELECT queue_register_webhook('wh.one', 'https://hooks.example.com/in', max_in_flight => 0);
\echo :LAST_ERROR_SQLSTATE
SELECT queue_register_webhook('wh.one', 'https://hooks.example.com/in', max_in_flight => 1001);
\echo :LAST_ERROR_SQLSTATE
-- owner only
SET ROLE w_stranger;
SELECT queue_register_webhook('wh.one', 'https://hooks.example.com/in');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
-- the allow list is the superuser's: a role cannot widen it
SET ROLE w_stranger;
SET queue.webhook_allow = 'https://anything.example.com';
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
SELECT queue_drop('wh.one');
DROP ROLE w_stranger;
