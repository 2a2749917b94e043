-- Tables behind the queue API. Ordinary roles never write them directly: every
-- change goes through the queue_* functions, which run their statements as the
-- extension owner. See docs/storage.md for why the job tables are
-- shaped this way.

-- Queue ids are never reused, so a job can never be mistaken for a job of a
-- later queue that happens to have the same name.
CREATE SEQUENCE queue_queue_id_seq AS integer;

CREATE TABLE queue_queues (
    id              integer PRIMARY KEY DEFAULT nextval('queue_queue_id_seq'),
    name            text NOT NULL UNIQUE,
    owner           regrole NOT NULL,
    max_attempts    integer NOT NULL,
    backoff         text NOT NULL,
    retry_delay     interval NOT NULL,
    max_retry_delay interval NOT NULL,
    lease           interval NOT NULL,
    retention       interval NOT NULL,
    paused          boolean NOT NULL DEFAULT false,
    created_at      timestamptz NOT NULL DEFAULT pg_catalog.now(),
    -- Push delivery: the sender function as its schema-qualified signature
    -- (text, not an oid, so that it survives pg_dump and pg_upgrade, which
    -- keep names but not function oids), the role it runs as, and how many
    -- jobs a worker claims for it at a time. All NULL without a sender.
    sender          text,
    sender_role     regrole,
    batch_size      integer,
    CHECK ((sender IS NULL) = (sender_role IS NULL) AND (sender IS NULL) = (batch_size IS NULL)),
    -- Groups, order and limits (docs/groups.md); NULL: no limit. A rate
    -- is `rate_limit` claims in any window of `rate_window`.
    ordered             boolean NOT NULL DEFAULT false,
    max_in_flight       integer,
    group_max_in_flight integer,
    rate_limit          integer,
    rate_window         interval,
    group_rate_limit    integer,
    group_rate_window   interval
);
ALTER SEQUENCE queue_queue_id_seq OWNED BY queue_queues.id;

-- HTTP delivery (queue_register_webhook): where the worker POSTs a queue's
-- jobs. The queue's sender is then `POST <the URL without its query>`,
-- which is what views show, run as the registering role, with batch_size
-- max_in_flight. The secret and the headers' values stay in this table,
-- which only the extension owner reads.
CREATE TABLE queue_webhooks (
    queue_id      integer PRIMARY KEY REFERENCES queue_queues (id) ON DELETE CASCADE,
    url           text NOT NULL,
    headers       jsonb NOT NULL,
    timeout       interval NOT NULL,
    secret        text,
    max_in_flight integer NOT NULL
);

CREATE SEQUENCE queue_job_id_seq;

-- Generation counter of the live ring: new jobs go to slot (value % 2). A
-- sequence rather than a row, so that reading it on every enqueue walks no
-- chain of dead row versions, even while vacuum is held back.
CREATE SEQUENCE queue_live_generation MINVALUE 0 START 0;
SELECT pg_catalog.setval('queue_live_generation', 0, true);

-- Unfinished jobs, and nothing else: the table that claims scan. `state` is
-- `ready` (pending and due), `scheduled` (pending, due later), `blocked`
-- (pending, waiting for its parents: no index, it is found by its id) or
-- `processing`. Each state has its own partial index, so that a claim reads only ready jobs
-- in claim order, whatever the number of scheduled jobs, jobs in flight, jobs
-- of other queues, or finished jobs (which live elsewhere).
--
-- A ring of two partitions: queue_maintain() copies the jobs of the current
-- slot into the other one and truncates it, which gives back the space of
-- dead tuples even while another session holds an old snapshot open.
CREATE TABLE queue_live (
    slot             smallint NOT NULL,
    queue_id         integer NOT NULL,
    priority         integer NOT NULL,
    attempts         integer NOT NULL DEFAULT 0,
    id               bigint NOT NULL,
    run_at           timestamptz NOT NULL,
    enqueued_at      timestamptz NOT NULL,
    lease_expires_at timestamptz,
    lease            uuid,
    state            text NOT NULL,
    worker           text,
    dedup_key        text,
    last_error       text,
    headers          jsonb,
    payload          jsonb NOT NULL,
    -- The job's identity for ever (webhook-id): random, so that no other
    -- job has it, in any cluster, after a restore elsewhere or after a
    -- failover that lost transactions and hands its id out again; kept
    -- through every move (history, dead letters, retries, rotation).
    uid              uuid NOT NULL DEFAULT gen_random_uuid(),
    -- The job's group (NULL: a group of its own), and its turn: the round
    -- of fair turns it is claimed in (docs/groups.md). Every job of a queue
    -- that never uses groups has turn 0, so the claim order is as before.
    group_key        text,
    turn             bigint NOT NULL DEFAULT 0,
    -- While in flight: the job counts in its group's jobs in flight, for
    -- an ordered queue or group_max_in_flight (set by the claim in such a
    -- queue, and by queue_alter for the jobs in flight when it sets one).
    -- Only such jobs go into queue_live_group_busy, and no job in flight
    -- into queue_live_group: a claim elsewhere writes no group entry.
    group_counted    boolean NOT NULL DEFAULT false,
    -- Set at enqueue into an ordered queue when each older unfinished job of
    -- the group has a smaller turn, and keeps one: the group's enqueues
    -- take turns under its lock (src/catalog.rs, lock_group), none of its
    -- jobs was in flight, and the group's last job had it too. A job put
    -- back (queue_retry) takes turn -1, below every enqueue's. A claim may
    -- then take such a job at the front's turn without looking for older
    -- jobs of its group (ordered_heads.sql).
    turn_safe        boolean NOT NULL DEFAULT false,
    -- Dependencies (docs/dependencies.md): the job's parents (NULL: none),
    -- how many have not ended as it waits for them (state 'blocked' while
    -- that is above 0), and whether jobs wait for this one (queue_edges):
    -- its end then settles them, and a job without children touches none of
    -- it.
    depends_on       bigint[],
    waiting_for      integer NOT NULL DEFAULT 0,
    has_children     boolean NOT NULL DEFAULT false
) PARTITION BY LIST (slot);
-- Invariants that only the extension's statements write, so they are not
-- CHECK constraints (each would be parsed anew by every statement that
-- writes a job): `state` is one of the four words above, and a job holds a
-- lease exactly while it is in flight (state = 'processing' and lease IS NOT
-- NULL go together; completions rely on it).

CREATE TABLE queue_live_0 PARTITION OF queue_live FOR VALUES IN (0)
    WITH (autovacuum_vacuum_scale_factor = 0.02, autovacuum_vacuum_insert_scale_factor = 0.02);
CREATE TABLE queue_live_1 PARTITION OF queue_live FOR VALUES IN (1)
    WITH (autovacuum_vacuum_scale_factor = 0.02, autovacuum_vacuum_insert_scale_factor = 0.02);

CREATE INDEX queue_live_id ON queue_live (id);
-- The claim order.
CREATE INDEX queue_live_ready ON queue_live (queue_id, priority DESC, turn, run_at, id)
    WHERE state = 'ready';
-- Jobs scheduled for later, in the order they fall due.
CREATE INDEX queue_live_scheduled ON queue_live (queue_id, run_at) WHERE state = 'scheduled';
-- Jobs in flight, in the order their leases expire.
CREATE INDEX queue_live_leased ON queue_live (queue_id, lease_expires_at)
    WHERE state = 'processing';
-- Jobs waiting for parent jobs (queue_stats counts them here).
CREATE INDEX queue_live_blocked ON queue_live (queue_id) WHERE state = 'blocked';
CREATE INDEX queue_live_dedup ON queue_live (queue_id, dedup_key)
    WHERE dedup_key IS NOT NULL;
-- A group's jobs not in flight in enqueue order: its head (ordered queues),
-- its last turn (enqueue), its counts (queue_groups). Jobs without a group
-- are not in it.
CREATE INDEX queue_live_group ON queue_live (queue_id, group_key, id)
    WHERE group_key IS NOT NULL AND state <> 'processing';
-- A group's jobs in flight where they count (group_counted): the rest of an
-- ordered group's head, and group_max_in_flight.
CREATE INDEX queue_live_group_busy ON queue_live (queue_id, group_key, id)
    WHERE state = 'processing' AND group_counted;

-- Succeeded and cancelled jobs, kept for their queue's retention, counted
-- from finished_at (so a change of retention applies to them too).
-- Insert-only. A ring of eight partitions, each taking the jobs that expire
-- (expires_at: finished_at plus the retention when they finished) in one
-- four-hour window of every 32 hours: once all of a partition's jobs have
-- expired, queue_cleanup() empties it with TRUNCATE.
CREATE TABLE queue_done (
    slot         smallint NOT NULL,
    queue_id     integer NOT NULL,
    priority     integer NOT NULL,
    attempts     integer NOT NULL,
    id           bigint NOT NULL,
    run_at       timestamptz NOT NULL,
    enqueued_at  timestamptz NOT NULL,
    finished_at  timestamptz NOT NULL,
    expires_at   timestamptz NOT NULL,
    status       text NOT NULL,  -- 'succeeded' or 'cancelled'
    worker       text,
    dedup_key    text,
    last_error   text,
    headers      jsonb,
    payload      jsonb NOT NULL,
    uid          uuid NOT NULL,
    group_key    text,
    -- What a succeeded job gave back (queue_complete's result, a sender's
    -- jsonb, a webhook's response), kept as long as the job.
    result       jsonb,
    depends_on   bigint[],
    has_children boolean NOT NULL DEFAULT false,
    -- The parent whose failure cancelled it (queue_retry of that parent
    -- puts it back).
    cancelled_by bigint
) PARTITION BY LIST (slot);

-- How many partitions queue_done has: with queue_done_slot's four-hour
-- windows, a job's partition comes round again every 32 hours, so that a
-- partition whose window has passed empties (and is truncated) before its
-- window comes again for retentions up to a day, the default.
CREATE FUNCTION queue_history_partitions() RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN 8;

DO $$
BEGIN
    FOR i IN 0..queue_history_partitions() - 1 LOOP
        EXECUTE pg_catalog.format('CREATE TABLE queue_done_%s PARTITION OF queue_done FOR VALUES IN (%s)', i, i);
    END LOOP;
END
$$;

CREATE INDEX queue_done_id ON queue_done (id);
-- What cleanup and purge look for: a queue's jobs, oldest first.
CREATE INDEX queue_done_queue ON queue_done (queue_id, finished_at);

-- Failed jobs (dead letters): kept until retried or purged.
CREATE TABLE queue_dead (
    id           bigint PRIMARY KEY,
    queue_id     integer NOT NULL,
    priority     integer NOT NULL,
    attempts     integer NOT NULL,
    run_at       timestamptz NOT NULL,
    enqueued_at  timestamptz NOT NULL,
    finished_at  timestamptz NOT NULL,
    worker       text,
    dedup_key    text,
    last_error   text,
    headers      jsonb,
    payload      jsonb NOT NULL,
    uid          uuid NOT NULL,
    group_key    text,
    depends_on   bigint[],
    has_children boolean NOT NULL DEFAULT false
);
CREATE INDEX queue_dead_queue ON queue_dead (queue_id, id);

-- Which jobs wait for which (docs/dependencies.md): an edge from a parent to
-- a child for as long as the parent's end has not been counted for the
-- child, and after a parent's failure cancelled the child (`cancels`: the
-- child's on_parent_failure is 'cancel'), so that a retry of the parent
-- finds it again. A parent's end settles its children through its edges,
-- each once: its transaction deletes an edge it counts, which a concurrent
-- resume of the child waits for.
CREATE TABLE queue_edges (
    parent  bigint NOT NULL,
    child   bigint NOT NULL,
    cancels boolean NOT NULL,
    PRIMARY KEY (parent, child)
);
CREATE INDEX queue_edges_child ON queue_edges (child);

-- A job's children, found from their depends_on (queue_children): jobs
-- without parents are not in these indexes, so they pay nothing for them.
CREATE INDEX queue_live_children ON queue_live USING gin (depends_on) WHERE depends_on IS NOT NULL;
CREATE INDEX queue_done_children ON queue_done USING gin (depends_on) WHERE depends_on IS NOT NULL;
CREATE INDEX queue_dead_children ON queue_dead USING gin (depends_on) WHERE depends_on IS NOT NULL;

-- How many jobs each queue has seen end which way, for queue_stats, without
-- counting history and without one row that every enqueue would update.
-- Every statement that moves jobs appends its deltas to queue_tallies (a
-- table nobody updates, so concurrent writers never wait for each other);
-- queue_cleanup() folds them into queue_counters. The view adds both.
--
-- `slot` is the queue_done partition that the retained succeeded and
-- cancelled counts refer to, so that emptying a partition can zero them;
-- -1 for deltas that concern no partition. The *_total columns only grow;
-- succeeded, cancelled and failed are the jobs retained now.
CREATE TABLE queue_counters (
    queue_id        integer NOT NULL,
    slot            smallint NOT NULL,
    enqueued_total  bigint NOT NULL DEFAULT 0,
    succeeded_total bigint NOT NULL DEFAULT 0,
    failed_total    bigint NOT NULL DEFAULT 0,
    succeeded       bigint NOT NULL DEFAULT 0,
    cancelled       bigint NOT NULL DEFAULT 0,
    failed          bigint NOT NULL DEFAULT 0,
    -- jobs in queue_live (unfinished): queue_stats counts pending jobs as
    -- these less the few in flight, scheduled or blocked, without reading
    -- the backlog
    live            bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (queue_id, slot)
);

CREATE TABLE queue_tallies (
    queue_id        integer NOT NULL,
    slot            smallint NOT NULL DEFAULT -1,
    enqueued_total  bigint NOT NULL DEFAULT 0,
    succeeded_total bigint NOT NULL DEFAULT 0,
    failed_total    bigint NOT NULL DEFAULT 0,
    succeeded       bigint NOT NULL DEFAULT 0,
    cancelled       bigint NOT NULL DEFAULT 0,
    failed          bigint NOT NULL DEFAULT 0,
    live            bigint NOT NULL DEFAULT 0
) WITH (autovacuum_vacuum_scale_factor = 0.02, autovacuum_vacuum_insert_scale_factor = 0.02);

-- Claims of rate-limited queues (rate_limit, group_rate_limit): how many
-- jobs one claim took, of one group (NULL: the queue as a whole), and when.
-- A claim counts what its queue's window holds; what left every window 10
-- seconds ago is deleted by a claim at most once a second in each backend
-- (limits.rs, CLOCK_MARGIN_US, SWEEP_EVERY_US). Written only for queues with
-- a rate limit.
CREATE TABLE queue_claims (
    queue_id   integer NOT NULL,
    group_key  text,
    claimed_at timestamptz NOT NULL,
    jobs       integer NOT NULL
);
-- A window's claims, of the queue as a whole (group_key NULL) or of a group.
CREATE INDEX queue_claims_window ON queue_claims (queue_id, group_key, claimed_at);
-- A queue's claims by age, every group together: what has left every window,
-- and where the oldest claim still in one is.
CREATE INDEX queue_claims_age ON queue_claims (queue_id, claimed_at);

-- Schedules (docs/schedules.md): each tick of `cron` on the wall clock of
-- `time_zone` enqueues one job. next_run_at is the first tick not dealt
-- with yet; a tick's job and the schedule's advance past it commit in one
-- transaction, so no tick gets two jobs or none. Ticks before
-- missed_before (when a paused schedule was resumed) are missed ones, for
-- catch_up. The queue cannot go while a schedule names it (queue_drop's
-- force removes the schedules first).
CREATE TABLE queue_recurring (
    name          text PRIMARY KEY,
    queue_id      integer NOT NULL REFERENCES queue_queues (id),
    cron          text NOT NULL,
    time_zone     text NOT NULL,
    payload       jsonb NOT NULL,
    headers       jsonb,
    priority      integer NOT NULL,
    group_key     text,
    catch_up      text NOT NULL CHECK (catch_up IN ('none', 'one', 'all')),
    no_overlap    boolean NOT NULL,
    paused        boolean NOT NULL,
    owner         regrole NOT NULL,
    next_run_at   timestamptz,
    missed_before timestamptz NOT NULL,
    last_run_at   timestamptz,
    last_job_id   bigint,
    runs_total    bigint NOT NULL DEFAULT 0,
    skipped_total bigint NOT NULL DEFAULT 0
);
CREATE INDEX queue_recurring_due ON queue_recurring (next_run_at) WHERE NOT paused;
CREATE INDEX queue_recurring_queue ON queue_recurring (queue_id);

-- pg_dump of a tenant database keeps its queues and jobs.
SELECT pg_catalog.pg_extension_config_dump('queue_queues', '');
SELECT pg_catalog.pg_extension_config_dump('queue_queue_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('queue_webhooks', '');
SELECT pg_catalog.pg_extension_config_dump('queue_job_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('queue_live_generation', '');
SELECT pg_catalog.pg_extension_config_dump('queue_live_0', '');
SELECT pg_catalog.pg_extension_config_dump('queue_live_1', '');
DO $$
BEGIN
    FOR i IN 0..queue_history_partitions() - 1 LOOP
        PERFORM pg_catalog.pg_extension_config_dump(pg_catalog.format('queue_done_%s', i)::regclass, '');
    END LOOP;
END
$$;
SELECT pg_catalog.pg_extension_config_dump('queue_dead', '');
SELECT pg_catalog.pg_extension_config_dump('queue_counters', '');
SELECT pg_catalog.pg_extension_config_dump('queue_tallies', '');
SELECT pg_catalog.pg_extension_config_dump('queue_claims', '');
SELECT pg_catalog.pg_extension_config_dump('queue_recurring', '');
SELECT pg_catalog.pg_extension_config_dump('queue_edges', '');

-- The partition of queue_done that a job expiring at `expires` goes to: one
-- four-hour window of every 32 hours, so that each partition empties soon
-- after its window has passed. Its body is immutable as declared (EXTRACT
-- from a timestamptz is only stable; from an interval it is immutable), so
-- that the planner inlines it: not inlined, a completion ran it through the
-- SQL-function executor, which read its body anew for every statement.
CREATE FUNCTION queue_done_slot(expires timestamptz) RETURNS smallint
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN ((pg_catalog.floor(EXTRACT(epoch FROM expires - timestamptz '1970-01-01 00:00:00+00') / 14400)::bigint
         % queue_history_partitions() + queue_history_partitions()) % queue_history_partitions())::smallint;

-- How long a finished job is kept: its queue's retention, capped so that
-- adding it to a timestamp never overflows ('infinity' and a retention of
-- centuries both keep the job for good, in practice).
CREATE FUNCTION queue_kept_for(retention interval) RETURNS interval
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN least(retention, interval '1000 years');

-- The last_error of a job whose lease expired during an attempt: one text
-- for the claim that takes such a job back and for the upkeep that buries
-- one with no attempt left. (Stable like format(), so that it is inlined.)
CREATE FUNCTION queue_lease_expired_error(attempts integer, max_attempts integer, worker text)
RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE
RETURN pg_catalog.format('lease expired during attempt %s of %s%s', attempts, max_attempts,
                         ' (worker ' || worker || ')');
