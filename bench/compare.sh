#!/usr/bin/env bash
# `make bench`: queue against pgmq and against the PostgreSQL ceiling, on one
# throwaway cluster with the extension preloaded and pgmq installed from the
# pgmq crate's embedded SQL (bench/pgmq-install). Logged tables, fsync and
# synchronous_commit on, PostgreSQL's defaults otherwise.
#
#   1  enqueue, one job per statement, 4 connections   queue_enqueue      | pgmq.send        | INSERT 1 row
#   1w the same on 32 connections (the commit path with many writers)
#   2  enqueue, batches of 100                         queue_enqueue_batch| pgmq.send_batch  | INSERT 100 rows
#   3  claim + complete, one job per statement         queue_claim(1) + queue_complete | pgmq.read(1) + delete | DELETE next row
#   4  claim + complete 100 per round trip             queue_claim(100) + queue_complete_batch | read(100) + delete(array) | DELETE next 100
#      Equal work: in 3, 4 and 4b the queue keeps nothing (retention 0: no
#      history written), as pgmq's delete; in 3a and 4a it keeps the default
#      day of history, against pgmq's archive, which keeps a copy.
#   5  worker drain of 200,000 jobs, no-op SQL sender  (peer: the best pgmq consumer rate, from 4,
#      and pgmq's read(100) + delete on one connection, as the worker is one process);
#      5n the same from a queue with retention 0 (equal work with pgmq's delete)
#   6  latency from an enqueue's commit to its sender call, idle and at 1,000 jobs/s
#      (peer: a pgmq consumer waiting in read_with_poll, polling every 10 ms)
#   6w latency from an enqueue's commit to a consumer waiting in CALL queue_wait
#      (then claiming), idle and at 1,000 jobs/s (peers: a consumer that claims
#      and sleeps 100 ms when it finds nothing; pgmq's read_with_poll, 10 ms)
#   1x 1 with 200 consumers waiting in queue_wait on another queue (peer: 1x0,
#      the same with none, the rounds taking turns: what waiters cost a commit)
#   6c the CPU of 200 idle waiting consumers' backends over BENCH_IDLE_CPU_SECS
#      (60) s (peer: 200 consumers polling every 100 ms)
#   7  the ceiling: the least work the same job needs, as plain SQL on a minimal table
#   1g 1 with a group key (one of 1,000 at random; peer: 1, the rounds taking turns)
#   4g 4's claim + complete from a queue whose jobs spread over 10,000 groups
#      (peer: 4, the plain queue, its rounds taking turns with these; and
#      pgmq's read_grouped_rr(100) + delete on the same groups, its x-pgmq-group)
#   4o the same, an ordered queue (one job of a group at a time)
#   4l the same, max_in_flight and rate_limit set high enough never to bind
#   5g 5n's drain from a queue whose jobs spread over 10,000 groups (peer: 5n)
#   5o 5g's drain, an ordered queue (peer: 5n)
#   5l 5g's drain, max_in_flight and rate_limit set high enough never to bind
#      (peer: 5n)
#   5w graphile-worker's drain of the same no-op jobs (bench/peers, npm, its
#      version pinned; concurrency 10, localQueue 500, completeJobBatchDelay 0,
#      its performance page's settings; it deletes each job done: peer of 5n)
#   5b pg-boss's drain (batchSize 100, burstWhenBatchFull; it keeps each job,
#      marked completed: peer of 5). Both take turns with 5 and 5n, round by round.
#
# Every figure is the median of BENCH_ROUNDS rounds of BENCH_SECS seconds;
# the sides take turns round by round, so that the machine's noise falls on
# all of them alike. Prints one table and, unless BENCH_DOC is empty, writes
# it with the machine and the settings into BENCHMARKS.md (between its
# bench-run markers). Needs `make install` and the pgmq-install binary
# (`make bench` does both).
#
# Settings (environment): BENCH_ROUNDS (5), BENCH_SECS (10), BENCH_CLIENTS (4),
# BENCH_THREADS (2), BENCH_DRAIN_JOBS (200000), BENCH_LOAD_RATE (1000),
# BENCH_IDLE_RATE (50 enqueues/s, one every 20 ms on average),
# BENCH_FILL (jobs in a claim queue before its first round, by default
# 50,000 for item 3 and 300,000 for 4; later rounds get twice what the
# previous one took), BENCH_DOC (BENCHMARKS.md),
# BENCH_DIR (/tmp/qbench/bench), BENCH_PORT (54400), PGMQ_INSTALL (binary),
# BENCH_ITEMS (the items to measure, by default all: "1 1g 1w 2 3 3a 4 4g 4o 4l 4a 4b 4c 5p 5 5n 5g 5o 5l 5w 5b 6 6w 1x 6c"),
# BENCH_WAITERS (200, for 1x and 6c), BENCH_IDLE_CPU_SECS (60, for 6c),
# BENCH_WIDE_CLIENTS (32, for 1w).
. "$(dirname "$0")/common.sh"

ROUNDS=${BENCH_ROUNDS:-5}
SECS=${BENCH_SECS:-10}
CLIENTS=${BENCH_CLIENTS:-4}
THREADS=${BENCH_THREADS:-2}
DRAIN_JOBS=${BENCH_DRAIN_JOBS:-200000}
LOAD_RATE=${BENCH_LOAD_RATE:-1000}
IDLE_RATE=${BENCH_IDLE_RATE:-50}
FILL=${BENCH_FILL:-}
DOC=${BENCH_DOC-BENCHMARKS.md}
ITEMS=" ${BENCH_ITEMS:-1 1g 1w 2 3 3a 4 4g 4o 4l 4a 4b 4c 5p 5 5n 5g 5o 5l 5w 5b 6 6w 1x 6c} "
WAITERS=${BENCH_WAITERS:-200}
IDLE_CPU_SECS=${BENCH_IDLE_CPU_SECS:-60}
WIDE_CLIENTS=${BENCH_WIDE_CLIENTS:-32}
item() { [[ $ITEMS == *" $1 "* ]]; }
PGMQ_INSTALL=${PGMQ_INSTALL:-target/debug/pgmq-install}
OUT=bench/results
PAYLOAD='{"to": "ada@example.com", "template": "welcome", "n": 1}'

mkdir -p "$OUT"
RAW=$OUT/bench-rounds.csv     # every round: item,side,round,value
NA=$OUT/bench-na.txt          # item|reason for the figures that could not be measured
echo "item,side,round,value" > "$RAW"
: > "$NA"

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
lib_sum=$(md5sum < "$LIB")
build=$(build_stamp)
cluster_start "${BENCH_DIR:-/tmp/qbench/bench}" "${BENCH_PORT:-54400}"
# room for the waiting consumers of 1x and 6c beside the wide clients of 1w
sql -c "ALTER SYSTEM SET max_connections = $((WAITERS + WIDE_CLIENTS + 40))" > /dev/null
scripts/cluster.sh stop "$DIR" && scripts/cluster.sh start "$DIR" "$PORT"
workdir qbench-scripts
keep_server_log "$OUT/bench-server.log"

# ---------------------------------------------------------------- set-up
"$PGMQ_INSTALL" "$DIR" "$PORT" > "$WORK/pgmq-version"
sql > /dev/null <<SQL
CREATE EXTENSION queue;
SELECT queue_create(q) FROM unnest(ARRAY['enq1', 'enq100', 'c1a', 'c100a', 'drain', 'lat']) q;
-- consumers waiting (6w, 1x, 6c): nothing kept
SELECT queue_create(q, retention => '0') FROM unnest(ARRAY['latw', 'idlew']) q;
-- keeping nothing, as pgmq's delete
SELECT queue_create(q, retention => '0') FROM unnest(ARRAY['c1', 'c100', 'c100one', 'c100each', 'drain0']) q;
SELECT pgmq.create(q) FROM unnest(ARRAY['enq1', 'enq100', 'c1', 'c100', 'c1a', 'c100a', 'lat']) q;
-- groups (4g, 4o, 4l, 5g, 5o, 5l): their fill spreads the jobs over 10,000 groups
SELECT queue_create(q, retention => '0') FROM unnest(ARRAY['c100g', 'drain0g']) q;
SELECT queue_create(q, retention => '0', ordered => true) FROM unnest(ARRAY['c100o', 'drain0o']) q;
SELECT queue_create(q, retention => '0', max_in_flight => 1000000,
                    rate_limit => '1000000000/1 second') FROM unnest(ARRAY['c100l', 'drain0l']) q;
SELECT pgmq.create('c100g');
-- the ceiling: a minimal job table
CREATE TABLE ceiling_ins (id bigserial PRIMARY KEY, payload jsonb NOT NULL);
CREATE TABLE ceiling_del (id bigserial PRIMARY KEY, payload jsonb NOT NULL);
-- senders run with search_path = pg_catalog, pg_temp: everything qualified
CREATE FUNCTION public.bench_noop(job jsonb) RETURNS void LANGUAGE sql AS \$\$ SELECT \$\$;
CREATE TABLE public.bench_lat (side text, job_id bigint, enqueued timestamptz, delivered timestamptz);
CREATE FUNCTION public.bench_record(job jsonb) RETURNS void LANGUAGE sql AS \$\$
    INSERT INTO public.bench_lat
    VALUES ('queue', (job->>'id')::bigint, (job->'payload'->>'t')::timestamptz, clock_timestamp())
\$\$;
SQL

# pgbench scripts, one per item and side
script() { cat > "$WORK/$1.sql"; }
script q_enq1 <<SQL
SELECT queue_enqueue('enq1', '$PAYLOAD');
SQL
script q_enq1g <<SQL
SELECT queue_enqueue('enq1', '$PAYLOAD', group_key => 'g' || (random() * 999)::int);
SQL
script p_enq1 <<SQL
SELECT pgmq.send('enq1', '$PAYLOAD');
SQL
script c_enq1 <<SQL
INSERT INTO ceiling_ins (payload) VALUES ('$PAYLOAD');
SQL
script q_enq100 <<SQL
SELECT count(*) FROM queue_enqueue_batch('enq100', array_fill('$PAYLOAD'::jsonb, ARRAY[100]));
SQL
script p_enq100 <<SQL
SELECT count(*) FROM pgmq.send_batch('enq100', array_fill('$PAYLOAD'::jsonb, ARRAY[100]));
SQL
script c_enq100 <<SQL
INSERT INTO ceiling_ins (payload) SELECT '$PAYLOAD' FROM generate_series(1, 100);
SQL
# The claim scripts aggregate, so that an empty queue gives a row (0, '')
# rather than aborting the client; the fill keeps them from running dry.
script q_c1 <<'SQL'
SELECT coalesce(max(id), 0) AS id, coalesce(max(lease::text), '') AS lease FROM queue_claim('c1', 'bench', 1) \gset
SELECT queue_complete(:id, nullif(':lease', '')::uuid) WHERE :id <> 0;
SQL
script p_c1 <<'SQL'
SELECT coalesce(max(msg_id), 0) AS id FROM pgmq.read('c1', 30, 1) \gset
SELECT pgmq.delete('c1', :id::bigint) WHERE :id <> 0;
SQL
script q_c1a <<'SQL'
SELECT coalesce(max(id), 0) AS id, coalesce(max(lease::text), '') AS lease FROM queue_claim('c1a', 'bench', 1) \gset
SELECT queue_complete(:id, nullif(':lease', '')::uuid) WHERE :id <> 0;
SQL
script p_c1a <<'SQL'
SELECT coalesce(max(msg_id), 0) AS id FROM pgmq.read('c1a', 30, 1) \gset
SELECT pgmq.archive('c1a', :id::bigint) WHERE :id <> 0;
SQL
# the least a consumer must do: find the next row (concurrently: SKIP
# LOCKED) and delete it, committed
script c_c1 <<'SQL'
DELETE FROM ceiling_del WHERE id = (SELECT id FROM ceiling_del ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED);
SQL
script q_c100 <<'SQL'
SELECT coalesce(array_agg(id), '{}') AS ids, coalesce(array_agg(lease), '{}') AS leases FROM queue_claim('c100', 'bench', 100) \gset
SELECT count(*) FROM queue_complete_batch(':ids'::bigint[], ':leases'::uuid[]);
SQL
script p_c100 <<'SQL'
SELECT coalesce(array_agg(msg_id), '{}') AS ids FROM pgmq.read('c100', 30, 100) \gset
SELECT count(*) FROM pgmq.delete('c100', ':ids'::bigint[]);
SQL
script q_c100a <<'SQL'
SELECT coalesce(array_agg(id), '{}') AS ids, coalesce(array_agg(lease), '{}') AS leases FROM queue_claim('c100a', 'bench', 100) \gset
SELECT count(*) FROM queue_complete_batch(':ids'::bigint[], ':leases'::uuid[]);
SQL
script p_c100a <<'SQL'
SELECT coalesce(array_agg(msg_id), '{}') AS ids FROM pgmq.read('c100a', 30, 100) \gset
SELECT count(*) FROM pgmq.archive('c100a', ':ids'::bigint[]);
SQL
script c_c100 <<'SQL'
DELETE FROM ceiling_del WHERE id = ANY (ARRAY(SELECT id FROM ceiling_del ORDER BY id LIMIT 100 FOR UPDATE SKIP LOCKED));
SQL
for q in c100g c100o c100l; do
script "q_$q" <<SQL
SELECT coalesce(array_agg(id), '{}') AS ids, coalesce(array_agg(lease), '{}') AS leases FROM queue_claim('$q', 'bench', 100) \\gset
SELECT count(*) FROM queue_complete_batch(':ids'::bigint[], ':leases'::uuid[]);
SQL
done
script p_c100g <<'SQL'
SELECT coalesce(array_agg(msg_id), '{}') AS ids FROM pgmq.read_grouped_rr('c100g', 30, 100) \gset
SELECT count(*) FROM pgmq.delete('c100g', ':ids'::bigint[]);
SQL
script q_c100one <<'SQL'
SELECT count(*) FROM (SELECT array_agg(id) AS ids, array_agg(lease) AS leases FROM queue_claim('c100one', 'bench', 100)) c,
       LATERAL queue_complete_batch(coalesce(c.ids, '{}'), coalesce(c.leases, '{}'));
SQL
# the same claim, then one queue_complete call per job, in one statement
script q_c100each <<'SQL'
SELECT count(*) FROM queue_claim('c100each', 'bench', 100) c WHERE queue_complete(c.id, c.lease);
SQL
script q_lat <<'SQL'
SELECT queue_enqueue('lat', jsonb_build_object('t', clock_timestamp()));
SQL
script p_lat <<'SQL'
SELECT pgmq.send('lat', jsonb_build_object('t', clock_timestamp()));
SQL
# a pgmq consumer: waits in read_with_poll (10 ms poll), records when it got
# each message, deletes them, in one transaction
script p_consume <<'SQL'
WITH m AS (SELECT msg_id, message FROM pgmq.read_with_poll('lat', 30, 100, 1, 10)),
     got AS (INSERT INTO public.bench_lat
             SELECT 'pgmq', msg_id, (message->>'t')::timestamptz, clock_timestamp() FROM m RETURNING job_id)
SELECT count(*) FROM pgmq.delete('lat', ARRAY(SELECT job_id FROM got));
SQL
# a consumer waiting in queue_wait: then claims up to 100, records when it got
# each job, and completes them, in one statement
script q_waiter <<'SQL'
CALL queue_wait('latw', '1 second', NULL);
WITH c AS (SELECT id, lease, payload FROM queue_claim('latw', 'bench', 100)),
     got AS (INSERT INTO public.bench_lat
             SELECT 'queue', id, (payload->>'t')::timestamptz, clock_timestamp() FROM c)
SELECT count(*) FROM queue_complete_batch(coalesce((SELECT array_agg(id) FROM c), '{}'),
                                          coalesce((SELECT array_agg(lease) FROM c), '{}'));
SQL
# the same consumer polling: claims, and sleeps 100 ms when it got nothing
script q_poller <<'SQL'
WITH c AS (SELECT id, lease, payload FROM queue_claim('latw', 'bench', 100)),
     got AS (INSERT INTO public.bench_lat
             SELECT 'poll', id, (payload->>'t')::timestamptz, clock_timestamp() FROM c)
SELECT count(*) AS got FROM queue_complete_batch(coalesce((SELECT array_agg(id) FROM c), '{}'),
                                                 coalesce((SELECT array_agg(lease) FROM c), '{}')) \gset
\if :got = 0
\sleep 100 ms
\endif
SQL
script q_latw <<'SQL'
SELECT queue_enqueue('latw', jsonb_build_object('t', clock_timestamp()));
SQL
# a consumer that waits on a queue nobody enqueues into (1x, 6c)
script q_idle_waiter <<'SQL'
CALL queue_wait('idlew', make_interval(secs => :secs), NULL);
SQL
script q_idle_poller <<'SQL'
SELECT count(*) FROM queue_claim('idlew', 'bench', 100);
SQL

# ---------------------------------------------------------------- helpers
record() { echo "$1,$2,$3,$4" >> "$RAW"; }   # item side round value
na() { local why; why=$(echo "$2" | head -1); echo "$1|$why" >> "$NA"; echo "  $1: n/a: $why" >&2; }

# tps SCRIPT [pgbench args]: one round on CLIENTS connections; prints tps,
# or nothing when pgbench failed (its output goes to the log).
tps() {
    local s=$1; shift
    pgb -c "$CLIENTS" -j "$THREADS" -T "$SECS" -f "$s.sql" "$@" > "$WORK/pgbench.out" 2>&1 || {
        cat "$WORK/pgbench.out" >> "$OUT/bench-errors.log"; return 0; }
    grep -q "Run was aborted" "$WORK/pgbench.out" && { cat "$WORK/pgbench.out" >> "$OUT/bench-errors.log"; return 0; }
    awk '/^tps = / { print $3; exit }' "$WORK/pgbench.out"
}

# backlog SIDE QUEUE: jobs waiting in that side's claim queue
backlog() {
    case $1 in
    queue) sql -c "SELECT pending FROM queue_stats WHERE queue = '$2'" ;;
    pgmq) sql -c "SELECT count(*) FROM pgmq.q_$2" ;;
    ceiling) sql -c "SELECT count(*) FROM ceiling_del" ;;
    esac
}

# fill SIDE QUEUE N: tops the claim queue up to N waiting jobs
fill() {
    local have n
    have=$(backlog "$1" "$2")
    n=$(( $3 > have ? $3 - have : 0 ))
    [ "$n" -gt 0 ] || return 0
    local chunks=$(( (n + 9999) / 10000 ))
    # the queues of the group items: each job in one of 10,000 groups, at random
    local groups="ARRAY(SELECT 'g' || (random() * 9999)::int FROM generate_series(1, 10000 + 0 * g))"
    case $1:$2 in
    queue:c100g | queue:c100o | queue:c100l | queue:drain0g | queue:drain0o | queue:drain0l)
        sql -c "SELECT count(*) FROM generate_series(1, $chunks) g,
                LATERAL queue_enqueue_batch('$2', array_fill('$PAYLOAD'::jsonb, ARRAY[10000 + 0 * g]),
                                            group_keys => $groups)" > /dev/null
        return ;;
    pgmq:c100g)
        sql -c "SELECT count(*) FROM generate_series(1, $chunks) g,
                LATERAL pgmq.send_batch('$2', array_fill('$PAYLOAD'::jsonb, ARRAY[10000 + 0 * g]),
                    ARRAY(SELECT jsonb_build_object('x-pgmq-group', k) FROM unnest($groups) k))" > /dev/null
        return ;;
    esac
    case $1 in
    # (the batch depends on g, or the planner calls the function once and rescans its rows)
    queue) sql -c "SELECT count(*) FROM generate_series(1, $chunks) g,
                   LATERAL queue_enqueue_batch('$2', array_fill('$PAYLOAD'::jsonb, ARRAY[10000 + 0 * g]))" ;;
    pgmq) sql -c "SELECT count(*) FROM generate_series(1, $chunks) g,
                  LATERAL pgmq.send_batch('$2', array_fill('$PAYLOAD'::jsonb, ARRAY[10000 + 0 * g]))" ;;
    ceiling) sql -c "INSERT INTO ceiling_del (payload) SELECT '$PAYLOAD' FROM generate_series(1, $((chunks * 10000)))" ;;
    esac > /dev/null
}

# Before every round a checkpoint, so that no round pays for another's dirty
# pages. Upkeep on our side: a build whose worker runs queue_maintain() on
# its own (queue.upkeep_interval) gets none from here, since two
# queue_maintain() at once can deadlock; an older build gets a call per round,
# as a scheduled job would make.
worker_upkeep=$(sql -c "SELECT current_setting('queue.upkeep_interval', true)")
settle() {
    if [ -z "$worker_upkeep" ]; then
        sql -c "SELECT queue_maintain()" > /dev/null || echo "  (queue_maintain failed; going on)" >&2
    fi
    sql -c "CHECKPOINT"
}

# throughput ITEM PER_TX FILL SPECS...: rounds of pgbench; SPEC =
# side:script[:queue[:item]] (a queue makes it a claim bench: topped up
# before each round; a round that empties it is run again with four times
# the jobs, and the next rounds get twice what the last one took; an item
# records the spec's rounds under another item than ITEM, so that two of
# our lines take turns round by round). jobs/s = tps * PER_TX, or for a
# claim bench the jobs that left its queue in the round, over BENCH_SECS.
throughput() {
    local item=$1 per=$2 first_fill=${FILL:-$3}; shift 3
    local r spec side s q as at key t took left try before
    declare -A want
    for r in $(seq 1 "$ROUNDS"); do
        for spec in "$@"; do
            IFS=: read -r side s q as <<< "$spec"
            at=${as:-$item} key="$side:$q"
            for try in 1 2 3 4; do
                [ -n "$q" ] && fill "$side" "$q" "${want[$key]:=$first_fill}"
                [ -n "$q" ] && before=$(backlog "$side" "$q")
                settle
                t=$(tps "$s")
                [ -n "$q" ] && [ -n "$t" ] || break
                left=$(backlog "$side" "$q")
                # a claim bench counts the jobs that left the queue (a
                # claim may take fewer than it asks for): as transactions
                # a second, times PER_TX, for the report below
                t=$(awk -v b="$before" -v l="$left" -v s="$SECS" -v p="$per" \
                    'BEGIN { printf "%.3f", (b - l) / s / p }')
                [ "$left" -gt 0 ] && break
                echo "  $at/$side round $r ran dry with ${want[$key]} jobs: again with more" >&2
                want[$key]=$(( want[$key] * 4 ))
                t=
            done
            if [ -z "$t" ]; then na "$at/$side" "pgbench failed or the queue ran dry (see $OUT/bench-errors.log)"; continue; fi
            took=$(awk -v t="$t" -v p="$per" -v s="$SECS" 'BEGIN { printf "%d", 2 * t * p * s }')
            [ -n "$q" ] && [ "$took" -gt "${want[$key]}" ] && want[$key]=$took
            record "$at" "$side" "$r" "$(awk -v t="$t" -v p="$per" 'BEGIN { printf "%.1f", t * p }')"
            printf "  %-8s %-8s round %d: %s jobs/s\n" "$at" "$side" "$r" \
                "$(awk -v t="$t" -v p="$per" 'BEGIN { printf "%.0f", t * p }')" >&2
        done
    done
    sql -c "TRUNCATE ceiling_ins" -c "SELECT queue_purge(q) FROM unnest(ARRAY['enq1', 'enq100']) q" \
        -c "SELECT pgmq.purge_queue(q) FROM unnest(ARRAY['enq1', 'enq100']) q" > /dev/null
}

# ---------------------------------------------------------------- 1-4, 7
echo "Measuring: $ROUNDS rounds of ${SECS} s per figure, $CLIENTS connections" >&2
enq_group_specs=()
item 1g && enq_group_specs+=(queue:q_enq1g::1g)
item 1 && throughput 1 1 0 queue:q_enq1 pgmq:p_enq1 ceiling:c_enq1 "${enq_group_specs[@]}"
item 1w && CLIENTS=$WIDE_CLIENTS throughput 1w 1 0 queue:q_enq1 pgmq:p_enq1 ceiling:c_enq1
item 2 && throughput 2 100 0 queue:q_enq100 pgmq:p_enq100 ceiling:c_enq100
item 3 && throughput 3 1 50000 queue:q_c1:c1 pgmq:p_c1:c1 ceiling:c_c1:x
item 3a && throughput 3a 1 50000 queue:q_c1a:c1a pgmq:p_c1a:c1a
# the group items take turns with 4, round by round
group_specs=()
item 4g && group_specs+=(queue:q_c100g:c100g:4g pgmq:p_c100g:c100g:4g)
item 4o && group_specs+=(queue:q_c100o:c100o:4o)
item 4l && group_specs+=(queue:q_c100l:c100l:4l)
item 4 && throughput 4 100 300000 queue:q_c100:c100 pgmq:p_c100:c100 ceiling:c_c100:x "${group_specs[@]}"
item 4a && throughput 4a 100 300000 queue:q_c100a:c100a pgmq:p_c100a:c100a
# 4b and 4c take turns, round by round: 4c's bar is a ratio to 4b
if item 4b && item 4c; then
    throughput 4b 100 300000 queue:q_c100one:c100one queue:q_c100each:c100each:4c
elif item 4b; then
    throughput 4b 100 300000 queue:q_c100one:c100one
elif item 4c; then
    throughput 4c 100 300000 queue:q_c100each:c100each
fi
# the drain (5) is one worker process: pgmq's consumer on one connection too
item 5p && CLIENTS=1 THREADS=1 throughput 5p 100 300000 pgmq:p_c100:c100

# ---------------------------------------------------------------- 5 drain
# Fills a paused queue, resumes it and times the worker until every job is
# delivered: from the resume's commit until no job of the queue is left in
# queue_live (one session looks every 10 ms, through the partial indexes, a
# transaction per look, so that a queue that keeps nothing is timed the same
# way as one that keeps history). The drains of graphile-worker (5w) and
# pg-boss (5b) take turns with ours, round by round. drain_round ITEM QUEUE
# ROUND (returns 1 when the item cannot be measured).
drain_round() {
    local item=$1 q=$2 r=$3 t0 t1 times failed err rate
    if [ "$r" -eq 1 ] &&
        ! err=$(sql -c "SELECT queue_register_sender('$q', 'public.bench_noop(jsonb)'::regprocedure)" 2>&1); then
        na "$item" "queue_register_sender: ${err#*ERROR:  }"; return 1
    fi
    sql -c "SELECT queue_pause('$q')" > /dev/null
    fill queue "$q" "$DRAIN_JOBS"
    sql -c "VACUUM ANALYZE" > /dev/null
    settle
    if ! times=$(drain_times "$q"); then
        na "$item" "the worker left jobs undelivered after 10 minutes"; return 1
    fi
    read -r t0 t1 <<< "$times"
    failed=$(sql -c "SELECT failed_total FROM queue_stats WHERE queue = '$q'")
    if [ "$failed" -ne 0 ]; then na "$item" "deliveries failed in the no-op sender: $failed jobs failed"; return 1; fi
    rate=$(awk -v n="$DRAIN_JOBS" -v a="$t0" -v b="$t1" 'BEGIN { printf "%d", n / (b - a) + 0.5 }')
    record "$item" queue "$r" "$rate"
    printf "  %-8s %-8s round %d: %s jobs/s\n" "$item" queue "$r" "$rate" >&2
    sql -c "SELECT queue_purge('$q', 'succeeded')" > /dev/null
}

# peer_round ITEM SIDE SCRIPT ROUND: one drain of DRAIN_JOBS no-op jobs by
# a Node peer (bench/peers: its versions pinned in package-lock.json), in
# a database of its own; the script prints jobs/s.
peer_round() {
    local item=$1 side=$2 script=$3 r=$4 rate
    if [ ! -d bench/peers/node_modules ] &&
        ! npm ci --prefix bench/peers --no-audit --no-fund > "$WORK/npm.out" 2>&1; then
        na "$item" "npm ci --prefix bench/peers: $(tail -1 "$WORK/npm.out")"; return 1
    fi
    DB=postgres sql -c "SET client_min_messages = warning" -c "DROP DATABASE IF EXISTS $side" \
        -c "CREATE DATABASE $side" > /dev/null
    settle
    if ! rate=$(node "bench/peers/$script" "postgresql://postgres@/$side?host=$DIR&port=$PORT" \
        "$DRAIN_JOBS" 2>> "$OUT/bench-errors.log"); then
        na "$item" "bench/peers/$script failed (bench/results/bench-errors.log)"; return 1
    fi
    record "$item" "$side" "$r" "$rate"
    printf "  %-8s %-8s round %d: %s jobs/s\n" "$item" "$side" "$r" "$rate" >&2
}

drains=""
for i in 5 5n 5g 5o 5l 5w 5b; do item "$i" && drains+=" $i"; done
for r in $(seq 1 "$ROUNDS"); do
    for i in $drains; do
        ok=0
        case $i in
        5) drain_round 5 drain "$r" || ok=1 ;;
        5n) drain_round 5n drain0 "$r" || ok=1 ;;
        5g) drain_round 5g drain0g "$r" || ok=1 ;;
        5o) drain_round 5o drain0o "$r" || ok=1 ;;
        5l) drain_round 5l drain0l "$r" || ok=1 ;;
        5w) peer_round 5w graphile drain-graphile-worker.mjs "$r" || ok=1 ;;
        5b) peer_round 5b pgboss drain-pg-boss.mjs "$r" || ok=1 ;;
        esac
        # (an item that cannot be measured is not tried again)
        [ "$ok" -eq 0 ] || drains=${drains/ $i/}
    done
done

# ---------------------------------------------------------------- 6 latency
# One round: enqueue at RATE for SECS; the sender (ours) or the consumer
# (pgmq) records when it got each job; median and p99 of the difference.
# record_latencies ITEM SIDE ROUND: the median and p99 of the latencies in
# bench_lat (enqueue to delivery or claim), recorded as ITEM-p50, ITEM-p99
record_latencies() {
    local n p50 p99
    read -r n p50 p99 <<< "$(sql -F ' ' -c "SELECT count(*),
              round((percentile_disc(0.5) WITHIN GROUP (ORDER BY ms))::numeric, 2),
              round((percentile_disc(0.99) WITHIN GROUP (ORDER BY ms))::numeric, 2)
         FROM (SELECT extract(epoch FROM delivered - enqueued) * 1000 AS ms FROM public.bench_lat) s")"
    if [ "$n" -eq 0 ]; then na "$1/$2" "no job arrived"; return 1; fi
    record "$1-p50" "$2" "$3" "$p50"
    record "$1-p99" "$2" "$3" "$p99"
    printf "  %-8s %-8s round %d: %s jobs, median %s ms, p99 %s ms\n" "$1" "$2" "$3" "$n" "$p50" "$p99" >&2
}
latency_round() {  # side rate clients round label
    local side=$1 rate=$2 clients=$3 r=$4 label=$5 consumer=
    sql -c "TRUNCATE public.bench_lat"
    if [ "$side" = pgmq ]; then
        pgb -c 1 -T $((SECS + 3)) -f p_consume.sql > "$WORK/consumer.out" 2>&1 &
        consumer=$!
        sleep 0.5
    fi
    local script=q_lat; [ "$side" = pgmq ] && script=p_lat
    pgb -c "$clients" -j "$(( clients < THREADS ? clients : THREADS ))" -R "$rate" -T "$SECS" -f "$script.sql" \
        > "$WORK/pgbench.out" 2>&1 || { cat "$WORK/pgbench.out" >> "$OUT/bench-errors.log"; }
    if [ -n "$consumer" ]; then wait "$consumer" || cat "$WORK/consumer.out" >> "$OUT/bench-errors.log"; else sleep 2; fi
    record_latencies "6$label" "$side" "$r"
}
latency() {
    local err r
    if ! err=$(sql -c "SELECT queue_register_sender('lat', 'public.bench_record(jsonb)'::regprocedure)" 2>&1); then
        na 6 "queue_register_sender: ${err#*ERROR:  }"
        local sides=(pgmq)
    else
        local sides=(queue pgmq)
    fi
    for r in $(seq 1 "$ROUNDS"); do
        for side in "${sides[@]}"; do
            settle
            latency_round "$side" "$IDLE_RATE" 1 "$r" idle || true
            latency_round "$side" "$LOAD_RATE" "$CLIENTS" "$r" load || true
        done
    done
}
item 6 && latency

# ---------------------------------------------------------------- 6w, 1x, 6c
# wait_round side rate clients round label: a consumer (queue: waiting in
# queue_wait; poll: claiming every 100 ms; pgmq: read_with_poll) while
# pgbench enqueues at `rate`; the latency from each enqueue to its consumer
wait_round() {
    local side=$1 rate=$2 clients=$3 r=$4 label=$5 consumer script=q_latw
    sql -c "TRUNCATE public.bench_lat"
    case $side in
        queue) consumer=q_waiter ;;
        poll) consumer=q_poller ;;
        pgmq) consumer=p_consume script=p_lat ;;
    esac
    pgb -c 1 -T $((SECS + 3)) -f "$consumer.sql" > "$WORK/consumer.out" 2>&1 &
    local pid=$!
    sleep 0.5
    pgb -c "$clients" -j "$(( clients < THREADS ? clients : THREADS ))" -R "$rate" -T "$SECS" -f "$script.sql" \
        > "$WORK/pgbench.out" 2>&1 || { cat "$WORK/pgbench.out" >> "$OUT/bench-errors.log"; }
    wait "$pid" || cat "$WORK/consumer.out" >> "$OUT/bench-errors.log"
    record_latencies "6w$label" "$side" "$r"
}
waiting() {
    local r side
    for r in $(seq 1 "$ROUNDS"); do
        for side in queue poll pgmq; do
            settle
            wait_round "$side" "$IDLE_RATE" 1 "$r" idle || true
            wait_round "$side" "$LOAD_RATE" "$CLIENTS" "$r" load || true
        done
    done
}
item 6w && waiting

# idle_waiters SECS: WAITERS connections waiting in queue_wait on 'idlew' for
# SECS seconds, in the background (their pgbench's pid in IDLE_PID), once all
# wait
idle_waiters() {
    pgb -c "$WAITERS" -j "$THREADS" -t 1 -D secs="$1" -f q_idle_waiter.sql > "$WORK/waiters.out" 2>&1 &
    IDLE_PID=$!
    local i
    for i in $(seq 1 300); do
        [ "$(sql -c "SELECT count(*) FROM pg_stat_activity
                      WHERE query LIKE 'CALL queue_wait%' AND wait_event_type = 'Extension'")" -ge "$WAITERS" ] && return 0
        sleep 0.1
    done
    echo "  only $(sql -c "SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'CALL queue_wait%'") of $WAITERS waiters" >&2
}
# with_waiters: 1's enqueue, rounds taking turns with and without waiters
with_waiters() {
    local r t
    for r in $(seq 1 "$ROUNDS"); do
        settle
        t=$(tps q_enq1) && [ -n "$t" ] && record 1x0 queue "$r" "$t" &&
            printf "  %-8s %-8s round %d: %s jobs/s\n" 1x0 queue "$r" "$t" >&2
        idle_waiters $((SECS + 5))
        settle
        t=$(tps q_enq1) && [ -n "$t" ] && record 1x queue "$r" "$t" &&
            printf "  %-8s %-8s round %d: %s jobs/s (%s waiting)\n" 1x queue "$r" "$t" "$WAITERS" >&2
        wait "$IDLE_PID" || cat "$WORK/waiters.out" >> "$OUT/bench-errors.log"
    done
    sql -c "SELECT queue_purge('enq1')" > /dev/null
}
item 1x && with_waiters

# backend_cpu_ms PATTERN: the CPU (user + system, ms) so far of the backends
# whose query is LIKE PATTERN
backend_cpu_ms() {
    local pids pid ticks=0 hz
    hz=$(getconf CLK_TCK)
    pids=$(sql -c "SELECT pid FROM pg_stat_activity WHERE query LIKE '$1'")
    for pid in $pids; do
        [ -r "/proc/$pid/stat" ] || continue
        ticks=$(( ticks + $(awk '{ print $14 + $15 }' "/proc/$pid/stat") ))
    done
    echo $(( ticks * 1000 / hz ))
}
# cpu_window SIDE PATTERN WHO: records as 6c/SIDE the CPU that the backends
# whose query is LIKE PATTERN use in IDLE_CPU_SECS
cpu_window() {
    local before after
    before=$(backend_cpu_ms "$2")
    sleep "$IDLE_CPU_SECS"
    after=$(backend_cpu_ms "$2")
    record 6c "$1" 1 $((after - before))
    echo "  6c $1: $WAITERS $3 used $((after - before)) ms of CPU in $IDLE_CPU_SECS s" >&2
}
idle_cpu() {
    idle_waiters $((IDLE_CPU_SECS + 5))
    cpu_window queue 'CALL queue_wait%' waiters
    wait "$IDLE_PID" || cat "$WORK/waiters.out" >> "$OUT/bench-errors.log"
    pgb -c "$WAITERS" -j "$THREADS" -R $((WAITERS * 10)) -T $((IDLE_CPU_SECS + 5)) -f q_idle_poller.sql \
        > "$WORK/pollers.out" 2>&1 &
    local pid=$!
    sleep 3
    cpu_window poll "%queue_claim(''idlew''%" pollers
    wait "$pid" || cat "$WORK/pollers.out" >> "$OUT/bench-errors.log"
}
item 6c && idle_cpu

# ---------------------------------------------------------------- report
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

cell() {  # ITEM SIDE: "median (min–max)"
    local m lo hi
    read -r m lo hi <<< "$(round_stats "$1" "$2")"
    if [ -z "$m" ]; then echo "n/a"; elif [ "$ROUNDS" -gt 1 ]; then echo "$(fmt "$m") ($(fmt "$lo")–$(fmt "$hi"))"; else fmt "$m"; fi
}
ratio() { [ -n "$1" ] && [ -n "$2" ] && awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f\n", a / b }' || echo "–"; }

# row LABEL UNIT OURS_ITEM PEER_ITEM PEER_SIDE CEIL_ITEM
row() {
    local o p c
    o=$(med "$3" queue); p=$(med "$4" "$5"); c=
    [ -z "$6" ] || c=$(med "$6" ceiling)
    printf "| %s | %s | %s | %s | %s | %s | %s |\n" "$1" "$2" "$(cell "$3" queue)" \
        "$(cell "$4" "$5")" "$(ratio "$o" "$p")" \
        "$([ -n "$6" ] && cell "$6" ceiling || echo "–")" "$([ -n "$6" ] && ratio "$o" "$c" || echo "–")"
}
# the Node peers' versions (package.json pins them exactly)
GRAPHILE_VERSION=$(sed -n 's/.*"graphile-worker": "\(.*\)".*/\1/p' bench/peers/package.json)
PGBOSS_VERSION=$(sed -n 's/.*"pg-boss": "\(.*\)".*/\1/p' bench/peers/package.json)
# the best pgmq consumer rate, the peer of the drain
best_pgmq=4; [ "$(ratio "$(med 3 pgmq)" "$(med 4 pgmq)")" != "–" ] &&
    awk -v a="$(med 3 pgmq)" -v b="$(med 4 pgmq)" 'BEGIN { exit !(a > b) }' && best_pgmq=3

table() {
    echo "| # | what | unit | queue | pgmq | queue/pgmq | ceiling | queue/ceiling |"
    echo "|---|---|---|---|---|---|---|---|"
    row "1 | enqueue, one job per statement" "jobs/s" 1 1 pgmq 1
    row "1g | 1 with a group key, one of 1,000 (peer: 1, plain)" "jobs/s" 1g 1 queue ""
    row "1w | the same on $WIDE_CLIENTS connections" "jobs/s" 1w 1w pgmq 1w
    row "2 | enqueue, batches of 100" "jobs/s" 2 2 pgmq 2
    row "3 | claim + complete, one job per statement; retention 0 (pgmq: delete)" "jobs/s" 3 3 pgmq 3
    row "3a | the same, the default retention of a day (pgmq: archive)" "jobs/s" 3a 3a pgmq ""
    row "4 | claim 100 + complete the batch (2 statements); retention 0 (pgmq: delete)" "jobs/s" 4 4 pgmq 4
    row "4g | 4 from a queue with 10,000 groups (pgmq: read_grouped_rr + delete, 10,000 groups)" "jobs/s" 4g 4g pgmq 4
    row "4o | 4 from an ordered queue with 10,000 groups (peer: 4, plain)" "jobs/s" 4o 4 queue ""
    row "4l | 4 with max_in_flight and rate_limit that never bind (peer: 4, plain)" "jobs/s" 4l 4 queue ""
    row "4g′ | 4g against 4, plain (peer: 4)" "jobs/s" 4g 4 queue ""
    row "4a | the same, the default retention (pgmq: archive)" "jobs/s" 4a 4a pgmq ""
    row "4b | claim 100 + complete in one statement, retention 0 (pgmq: as in 4)" "jobs/s" 4b 4 pgmq 4
    row "4c | the same claim, then 100 queue_complete calls in that statement (per-call cost; pgmq: as in 4)" "jobs/s" 4c 4 pgmq 4
    row "5 | worker drain of $(fmt "$DRAIN_JOBS") jobs, no-op sender (pgmq: best consumer, $best_pgmq)" "jobs/s" 5 "$best_pgmq" pgmq 4
    row "5′ | the same drain (pgmq: one consumer connection, read(100) + delete)" "jobs/s" 5 5p pgmq 4
    row "5a | 5's drain, a day of history kept (pgmq: 4a's consumer, read(100) + archive)" "jobs/s" 5 4a pgmq ""
    row "5n | the same drain, retention 0 (nothing kept, as pgmq's delete and the ceiling; pgmq: best consumer, $best_pgmq)" "jobs/s" 5n "$best_pgmq" pgmq 4
    row "5g | 5n's drain from a queue with 10,000 groups (peer: 5n)" "jobs/s" 5g 5n queue 4
    row "5o | 5g's drain, an ordered queue (peer: 5n)" "jobs/s" 5o 5n queue 4
    row "5l | 5g's drain, max_in_flight and rate_limit that never bind (peer: 5n)" "jobs/s" 5l 5n queue 4
    row "5w | 5n's drain against graphile-worker $GRAPHILE_VERSION (concurrency 10, localQueue 500, completeJobBatchDelay 0; deletes each job done)" "jobs/s" 5n 5w graphile 4
    row "5b | 5's drain against pg-boss $PGBOSS_VERSION (batchSize 100, burstWhenBatchFull; keeps each job, completed)" "jobs/s" 5 5b pgboss ""
    row "6 | latency enqueue → sender, idle ($IDLE_RATE/s), median" "ms" 6idle-p50 6idle-p50 pgmq ""
    row "6 | latency enqueue → sender, idle, p99" "ms" 6idle-p99 6idle-p99 pgmq ""
    row "6 | latency enqueue → sender at $(fmt "$LOAD_RATE") jobs/s, median" "ms" 6load-p50 6load-p50 pgmq ""
    row "6 | latency enqueue → sender at $(fmt "$LOAD_RATE") jobs/s, p99" "ms" 6load-p99 6load-p99 pgmq ""
    row "6w | latency enqueue → consumer waiting in queue_wait, idle, median (peer: polling every 100 ms)" "ms" 6widle-p50 6widle-p50 poll ""
    row "6w | the same, p99 (peer: polling every 100 ms)" "ms" 6widle-p99 6widle-p99 poll ""
    row "6w | idle, median (pgmq: read_with_poll, 10 ms)" "ms" 6widle-p50 6widle-p50 pgmq ""
    row "6w | idle, p99 (pgmq: read_with_poll, 10 ms)" "ms" 6widle-p99 6widle-p99 pgmq ""
    row "6w | at $(fmt "$LOAD_RATE") jobs/s, median (peer: polling every 100 ms)" "ms" 6wload-p50 6wload-p50 poll ""
    row "6w | at $(fmt "$LOAD_RATE") jobs/s, p99 (peer: polling every 100 ms)" "ms" 6wload-p99 6wload-p99 poll ""
    row "6w | at $(fmt "$LOAD_RATE") jobs/s, median (pgmq: read_with_poll, 10 ms)" "ms" 6wload-p50 6wload-p50 pgmq ""
    row "6w | at $(fmt "$LOAD_RATE") jobs/s, p99 (pgmq: read_with_poll, 10 ms)" "ms" 6wload-p99 6wload-p99 pgmq ""
    row "1x | 1's enqueue with $WAITERS consumers waiting on another queue (peer: none waiting)" "jobs/s" 1x 1x0 queue ""
    row "6c | CPU of $WAITERS idle consumers' backends over $IDLE_CPU_SECS s: waiting (peer: polling every 100 ms)" "ms" 6c 6c poll ""
    echo
    echo "4c / 4b, one call per job against the batch, their rounds taking turns: $(ratio "$(med 4c queue)" "$(med 4b queue)")"
    if [ -s "$NA" ]; then
        echo
        echo "n/a:"
        sort -u "$NA" | sed 's/^\([^|]*\)|/- \1: /'
    fi
}

setting_names="'fsync','synchronous_commit','wal_sync_method','full_page_writes','wal_level','shared_buffers',
  'wal_buffers','max_wal_size','checkpoint_timeout','autovacuum','autovacuum_naptime','jit','work_mem',
  'shared_preload_libraries','queue.max_workers','queue.poll_interval','queue.max_batch_size','max_connections'"
machine() {
    echo "- run: $(date -u '+%Y-%m-%d %H:%M UTC'), $ROUNDS rounds of $SECS s per figure, $CLIENTS connections (pgbench -j $THREADS), median (min–max) of the rounds"
    echo "- machine: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores, $(free -g | awk '/^Mem:/ { print $2 }') GiB memory, $(uname -sr)"
    echo "- load average (1, 5, 15 min) before: $load_before, after: $load_after"
    echo "- PostgreSQL: $(sql -c "SELECT version()" | sed 's/ on .*//'), data directory on $(df -h "$DIR" | awk 'NR == 2 { print $1 }')"
    if [ -n "$worker_upkeep" ]; then
        echo "- upkeep on queue's side: the worker's own, every $worker_upkeep (queue.upkeep_interval)"
    else
        echo "- upkeep on queue's side: SELECT queue_maintain() before each round"
    fi
    echo "- queue: $build; pgmq $(sed 's/^pgmq //' "$WORK/pgmq-version") (the pgmq crate's embedded SQL)"
    if [ "$(md5sum < "$LIB")" != "$lib_sum" ]; then
        echo "- **warning**: the installed library was replaced during the run (at $(date -u -r "$LIB" '+%H:%M UTC')); new connections after that ran another build"
    fi
    echo "- settings (SHOW): $(sql -F '=' -c "SELECT name, current_setting(name) FROM pg_settings WHERE name IN ($setting_names) ORDER BY name" | sed 's/=/ = /' | paste -sd ';' | sed 's/;/; /g')"
}

echo
table | tee "$OUT/bench-table.md"
if [ -n "$DOC" ]; then
    { echo; machine; echo; table; echo; } | replace_region "$DOC" bench-run
    echo "(written to $DOC)"
fi
