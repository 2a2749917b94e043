\set SHOW_CONTEXT never
SET datestyle = ISO;
SET intervalstyle = postgres;
SET timezone = UTC;
-- queue_create: defaults
SELECT queue_create('q.create');
SELECT name, owner = current_user::regrole AS mine, max_attempts, backoff, retry_delay,
       max_retry_delay, lease, retention, paused
  FROM queue_queues WHERE name = 'q.create';
-- every option
SELECT queue_create('q.options', max_attempts => 3, backoff => 'linear',
                    retry_delay => '2 seconds', max_retry_delay => '1 minute',
                    lease => '30 seconds', retention => '0');
SELECT max_attempts, backoff, retry_delay, max_retry_delay, lease, retention
  FROM queue_queues WHERE name = 'q.options';
-- idempotent: creating it again changes nothing
SELECT queue_create('q.options', max_attempts => 9, backoff => 'fixed');
SELECT max_attempts, backoff FROM queue_queues WHERE name = 'q.options';
-- but options are checked first
SELECT queue_create('q.options', max_attempts => 0);
\echo :LAST_ERROR_SQLSTATE
-- zero durations are allowed where the rule is "at least 0"
SELECT queue_create('q.zero', retry_delay => '0', max_retry_delay => '0', retention => '0');

-- names: 1 to 63 characters of a-z 0-9 _ - . :
SELECT queue_create('a-z_0.9:ok');
SELECT queue_create(repeat('x', 63));
SELECT queue_create('');
\echo :LAST_ERROR_SQLSTATE
SELECT queue_create('Upper');
\echo :LAST_ERROR_SQLSTATE
SELECT queue_create('with space');
\echo :LAST_ERROR_SQLSTATE
SELECT queue_create('semi;colon');
\echo :LAST_ERROR_SQLSTATE
SELECT queue_create(repeat('x', 64));
\echo :LAST_ERROR_SQLSTATE

-- NULLs where a value is required
SELECT queue_create(NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT queue_create('q.null', max_attempts => NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT queue_create('q.null', backoff => NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT queue_create('q.null', retry_delay => NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT queue_create('q.null', max_retry_delay => NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT queue_create('q.null', lease => NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT queue_create('q.null', retention => NULL);
\echo :LAST_ERROR_SQLSTATE

-- options out of range
SELECT queue_create('q.bad', max_attempts => 0);
\echo :LAST_ERROR_SQLSTATE
SELECT queue_create('q.bad', max_attempts => -3);
\echo :LAST_ERROR_SQLSTATE
SELECT queue_create('q.bad', backoff => 'random');
\echo :LAST_ERROR_SQLSTATE
SELECT queue_create('q.bad', backoff => 'Fixed');
\echo :LAST_ERROR_SQLSTATE
SELECT queue_create('q.bad', retry_delay => '-1 second');
\echo :LAST_ERROR_SQLSTATE
SELECT queue_create('q.bad', retry_delay => '1 month -31 days');
\echo :LAST_ERROR_SQLSTATE
SELECT queue_create('q.bad', max_retry_delay => '-1 day');
\echo :LAST_ERROR_SQLSTATE
SELECT queue_create('q.bad', retention => '-1 minute');
\echo :LAST_ERROR_SQLSTATE
SELECT queue_create('q.bad', lease => '0');
\echo :LAST_ERROR_SQLSTATE
SELECT queue_create('q.bad', lease => '-5 minutes');
\echo :LAST_ERROR_SQLSTATE
-- none of the refused calls stored anything
SELECT count(*) FROM queue_queues WHERE name IN ('q.null', 'q.bad');

-- queue_alter: only the options given change
SELECT queue_alter('q.options', max_attempts => 7);
SELECT max_attempts, backoff, retry_delay, lease FROM queue_queues WHERE name = 'q.options';
SELECT queue_alter('q.options', backoff => 'exponential', lease => '1 minute',
                   retry_delay => '5 seconds', max_retry_delay => '2 minutes',
                   retention => '7 days');
SELECT max_attempts, backoff, retry_delay, max_retry_delay, lease, retention
  FROM queue_queues WHERE name = 'q.options';
SELECT queue_alter('q.options');
SELECT max_attempts, backoff, lease FROM queue_queues WHERE name = 'q.options';
SELECT queue_alter('q.missing', max_attempts => 2);
\echo :LAST_ERROR_SQLSTATE
SELECT queue_alter('q.options', max_attempts => 0);
\echo :LAST_ERROR_SQLSTATE
SELECT queue_alter('q.options', backoff => 'sometimes');
\echo :LAST_ERROR_SQLSTATE
SELECT queue_alter('q.options', lease => '0 seconds');
\echo :LAST_ERROR_SQLSTATE
SELECT queue_alter('q.options', retention => '-1 day');
\echo :LAST_ERROR_SQLSTATE
SELECT queue_alter(NULL, max_attempts => 2);
\echo :LAST_ERROR_SQLSTATE
SELECT queue_alter('Bad');
\echo :LAST_ERROR_SQLSTATE
-- a refused alter changed nothing
SELECT max_attempts, backoff, lease, retention FROM queue_queues WHERE name = 'q.options';

-- queue_drop
SELECT queue_drop('q.missing');
SELECT queue_enqueue('q.create', '{}') > 0 AS enqueued;
SELECT queue_drop('q.create');
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) AS still_there FROM queue_jobs WHERE queue = 'q.create';
SELECT queue_drop('q.create', force => true);
SELECT queue_drop('q.create');
SELECT count(*) FROM queue_jobs WHERE queue = 'q.create';
SELECT queue_drop('q.zero');
SELECT queue_drop(NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT queue_drop('q.options', force => NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT queue_drop('No');
\echo :LAST_ERROR_SQLSTATE
-- a dropped name can be created again, as a new queue with its own jobs
SELECT queue_create('q.create');
SELECT count(*) FROM queue_jobs WHERE queue = 'q.create';
