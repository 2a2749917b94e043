#!/usr/bin/env bash
# `make bench-workflows` (and the end of `make bench`): job results with
# CALL queue_await (issue 55) and jobs that wait for other jobs (issue 56),
# each line against a peer measured in the same run, the sides taking turns
# round by round, medians of the rounds.
#
#   a  the round trip on an idle system: a client enqueues a job and awaits
#      its result (CALL queue_await) while a consumer waiting in queue_wait
#      completes it with a small result; the same with the worker and a SQL
#      sender declared RETURNS jsonb. Peers: the same round trip by hand with
#      NOTIFY/LISTEN, and a client polling queue_job every 10 ms
#      (bench/workflows/roundtrip.py, psycopg 3, one request at a time, the
#      sides taking turns request by request)
#   b  claim 100 + queue_complete_batch with a small result per job against
#      the same without results (the default retention: the results are kept)
#   c  BENCH_AWAITERS (1,000) sessions in CALL queue_await, each on a job of
#      its own, then the jobs claimed and completed in one batch: how many
#      woke with `succeeded`, and how long after the completing commit; the
#      single-job enqueue rate with them awaiting against none
#   d  the worker's drain (no-op SQL sender) of chains of 100 jobs (each
#      job's parent the one before), of diamonds and of one long chain,
#      against the plain drain; fan-in:
#      BENCH_FANIN (10,000) parents completed by 8 concurrent consumers, one
#      child, against as many plain jobs completed the same way; fan-out: the
#      completion of a parent of BENCH_FANOUT (10,000) children
#   e  pg-boss's flows (bench/peers/flow-pg-boss.mjs) beside d's chain and
#      fan-in, in a database of the same cluster, rounds taking turns
#   f  jobs without parents, this build against BENCH_BASELINE's (0.3.0,
#      commit b65f5e2), each on a cluster of its own (bench/builds.sh),
#      rounds taking turns: enqueue 1 and 100, claim + complete 1 and 100,
#      the worker's drain
#   g  the worker's drain with queue.otlp_endpoint at a collector that
#      never answers, against no collector (issue 58)
#
# The extension under test is the work tree's release build, installed by
# bench/builds.sh into a relocated copy of PG_CONFIG's PostgreSQL
# (/tmp/qbench-pg/current), never into that PostgreSQL itself; the baseline
# goes into another (/tmp/qbench-pg/baseline), built once per commit and
# kept in ~/.cache/queue-releases. Throwaway clusters (scripts/cluster.sh:
# the extension preloaded, PostgreSQL's defaults otherwise, fsync on).
# Writes its tables into BENCHMARKS.md between the workflows-run markers
# unless BENCH_DOC is empty; raw rounds in bench/results/workflows-rounds.csv.
#
# Settings (environment): BENCH_ITEMS ("a b c d e f g"), BENCH_ROUNDS (5),
# BENCH_SECS (5, a pgbench round), BENCH_CLIENTS (4), BENCH_THREADS (2),
# BENCH_TRIPS (300 round trips per side and round, a), BENCH_AWAITERS (1000),
# BENCH_AWAIT_ROUNDS (3, c), BENCH_DRAIN_JOBS (100000: the plain drain, the
# chains of 100 and the diamonds, d; the drain of f), BENCH_DRAIN_ROUNDS (3:
# the drains of d and f), BENCH_CHAIN_JOBS (20, the long chain's length, d
# and e: the worker delivers it one job a second), BENCH_FANIN (10000),
# BENCH_FANIN_CONSUMERS (8),
# BENCH_FANOUT (10000), BENCH_BASELINE (b65f5e2; empty: no item f),
# BENCH_DOC (BENCHMARKS.md), BENCH_DIR (/tmp/qbench/workflows), BENCH_PORT
# (54520; f's clusters on the next two ports), BENCH_PG_ROOT (/tmp/qbench-pg).
. "$(dirname "$0")/common.sh"
. "$(dirname "$0")/builds.sh"

ITEMS=" ${BENCH_ITEMS:-a b c d e f g} "
ROUNDS=${BENCH_ROUNDS:-5}
SECS=${BENCH_SECS:-5}
CLIENTS=${BENCH_CLIENTS:-4}
THREADS=${BENCH_THREADS:-2}
TRIPS=${BENCH_TRIPS:-300}
AWAITERS=${BENCH_AWAITERS:-1000}
AWAIT_ROUNDS=${BENCH_AWAIT_ROUNDS:-3}
DRAIN_JOBS=${BENCH_DRAIN_JOBS:-100000}
DRAIN_ROUNDS=${BENCH_DRAIN_ROUNDS:-3}
[ "$DRAIN_ROUNDS" -le "$ROUNDS" ] || DRAIN_ROUNDS=$ROUNDS
CHAIN_JOBS=${BENCH_CHAIN_JOBS:-20}
FANIN=${BENCH_FANIN:-10000}
FANIN_CONSUMERS=${BENCH_FANIN_CONSUMERS:-8}
FANOUT=${BENCH_FANOUT:-10000}
BASELINE=${BENCH_BASELINE-b65f5e2}
DOC=${BENCH_DOC-BENCHMARKS.md}
PG_ROOT=${BENCH_PG_ROOT:-/tmp/qbench-pg}
MAIN_DIR=${BENCH_DIR:-/tmp/qbench/workflows}
MAIN_PORT=${BENCH_PORT:-54520}
HOLE_PORT=$((MAIN_PORT + 3))  # g's collector that never answers
item() { [[ $ITEMS == *" $1 "* ]]; }
[ -n "$BASELINE" ] || ITEMS=${ITEMS/ f / }
PAYLOAD='{"to": "ada@example.com", "template": "welcome", "n": 1}'
RESULT='{"status": "sent", "message_id": "<42@mail.example.com>"}'
OUT=bench/results
mkdir -p "$OUT"
RAW=$OUT/workflows-rounds.csv   # item,side,round,value
NOTES=$OUT/workflows-notes.txt  # checks and n/a, a line each
echo "item,side,round,value" > "$RAW"
: > "$NOTES"
started=$(date -u '+%Y-%m-%d %H:%M UTC')
t_start=$(date +%s)
load_before=$(cut -d' ' -f1-3 /proc/loadavg)

# ---------------------------------------------------------------- builds
echo "Building the work tree's release into $PG_ROOT/current" >&2
item f && echo "and the release of $BASELINE into $PG_ROOT/baseline" >&2
CURRENT_PG_CONFIG=$(build_install worktree "$PG_ROOT/current" 2> "$OUT/workflows-build.log") ||
    { tail -20 "$OUT/workflows-build.log" >&2; exit 1; }
if item f; then
    BASE_PG_CONFIG=$(build_install "$BASELINE" "$PG_ROOT/baseline" 2>> "$OUT/workflows-build.log") ||
        { tail -20 "$OUT/workflows-build.log" >&2; exit 1; }
fi
export PG_CONFIG=$CURRENT_PG_CONFIG
BIN=$("$PG_CONFIG" --bindir)
LIB=$("$PG_CONFIG" --pkglibdir)/queue.so

# ---------------------------------------------------------------- helpers
record() { echo "$1,$2,$3,$4" >> "$RAW"; }     # item side round value
note() { echo "$1" >> "$NOTES"; echo "  $1" >&2; }
say() { printf "  %-10s %-12s round %d: %s\n" "$1" "$2" "$3" "$4" >&2; }
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.6f", b - a }'; }

# on NAME: the following sql and pgb go to that cluster (main, cur, base)
declare -A C_DIR C_PORT C_BIN C_PGC
on() { DIR=${C_DIR[$1]} PORT=${C_PORT[$1]} BIN=${C_BIN[$1]}; }
# start NAME DIR PORT PG_CONFIG [max_connections]: a fresh cluster of that
# build (stopped and removed at exit, as cluster_start's)
start() {
    local name=$1 dir=$2 port=$3 pgc=$4
    C_DIR[$name]=$dir C_PORT[$name]=$port C_BIN[$name]=$("$pgc" --bindir) C_PGC[$name]=$pgc
    PG_CONFIG=$pgc cluster_start "$dir" "$port"
    on "$name"
    if [ -n "${5:-}" ]; then
        sql -c "ALTER SYSTEM SET max_connections = $5" > /dev/null
        PG_CONFIG=$pgc scripts/cluster.sh stop "$dir"
        PG_CONFIG=$pgc scripts/cluster.sh start "$dir" "$port"
    fi
    sql -c "CREATE EXTENSION queue" -c "CREATE FUNCTION public.bench_noop(job jsonb) RETURNS void LANGUAGE sql AS \$\$ SELECT \$\$" > /dev/null
}
stop() { PG_CONFIG=${C_PGC[$1]} scripts/cluster.sh stop "${C_DIR[$1]}"; }

workdir qbench-workflows
script() { cat > "$WORK/$1.sql"; }

# Before every round a checkpoint, so that no round pays for another's
# dirty pages (the worker does the extension's upkeep on its own, in both
# builds: queue.upkeep_interval).
settle() { sql -c "CHECKPOINT" > /dev/null; }

# tps SCRIPT [pgbench args]: one round of SECS on CLIENTS connections;
# prints tps, or nothing when pgbench failed (its output in the log)
tps() {
    local s=$1; shift
    pgb -c "$CLIENTS" -j "$THREADS" -T "$SECS" -f "$s.sql" "$@" > "$WORK/pgbench.out" 2>&1 || {
        cat "$WORK/pgbench.out" >> "$OUT/workflows-errors.log"; return 0; }
    grep -q "Run was aborted" "$WORK/pgbench.out" && { cat "$WORK/pgbench.out" >> "$OUT/workflows-errors.log"; return 0; }
    awk '/^tps = / { print $3; exit }' "$WORK/pgbench.out"
}
pending() { sql -c "SELECT pending FROM queue_stats WHERE queue = '$1'"; }
# fill QUEUE N: tops the queue up to N due jobs, then ANALYZE, as
# autovacuum would soon (claims planned on the statistics of a table a tenth
# as large ran here at 545 batches of 100 a second, against 885 after)
fill() {
    local n=$(( $2 - $(pending "$1") ))
    [ "$n" -gt 0 ] || return 0
    # (the batch depends on g, or the planner calls the function once)
    sql -c "SELECT count(*) FROM generate_series(1, $(( (n + 9999) / 10000 ))) g,
            LATERAL queue_enqueue_batch('$1', array_fill('$PAYLOAD'::jsonb, ARRAY[10000 + 0 * g]))" \
        -c "ANALYZE queue_live" > /dev/null
}

# claim_round ITEM SIDE SCRIPT QUEUE ROUND: a claim bench's round on the
# current cluster: the queue topped up to twice what the last round took
# (300,000 at first; a round that empties it is run again with more), and
# the jobs that left it over SECS recorded as jobs/s
declare -A WANT
claim_round() {
    local item=$1 side=$2 s=$3 q=$4 r=$5 key="$DIR:$4" before left t try rate
    for try in 1 2 3; do
        fill "$q" "${WANT[$key]:=300000}"
        settle
        before=$(pending "$q")
        t=$(tps "$s")
        [ -n "$t" ] || { note "$item/$side round $r: pgbench failed (bench/results/workflows-errors.log)"; return 1; }
        left=$(pending "$q")
        [ "$left" -gt 0 ] && break
        WANT[$key]=$(( WANT[$key] * 4 ))
    done
    rate=$(awk -v b="$before" -v l="$left" -v s="$SECS" 'BEGIN { printf "%.1f", (b - l) / s }')
    [ $(( 2 * (before - left) )) -gt "${WANT[$key]}" ] && WANT[$key]=$(( 2 * (before - left) ))
    record "$item" "$side" "$r" "$rate"
    say "$item" "$side" "$r" "$rate jobs/s"
}
# rate_round ITEM SIDE SCRIPT PER ROUND: an enqueue bench's round (jobs/s =
# tps x PER)
rate_round() {
    local t rate
    settle
    t=$(tps "$3")
    [ -n "$t" ] || { note "$1/$2 round $5: pgbench failed (bench/results/workflows-errors.log)"; return 1; }
    rate=$(awk -v t="$t" -v p="$4" 'BEGIN { printf "%.1f", t * p }')
    record "$1" "$2" "$5" "$rate"
    say "$1" "$2" "$5" "$rate jobs/s"
}

# drain_round ITEM SIDE QUEUE ROUND SHAPE N: the worker's drain of a paused
# queue (a no-op SQL sender registered) filled with N jobs of SHAPE (plain,
# chain, chains, diamond): from the resume's commit until no job of the queue is
# left unfinished (a look every 10 ms through the partial indexes, a
# transaction per look); jobs/s
drain_round() {
    local item=$1 side=$2 q=$3 r=$4 shape=$5 n=$6 t0 t1 times failed rate
    sql -c "SELECT queue_pause('$q')" > /dev/null
    case $shape in
    plain) sql -c "SELECT count(*) FROM generate_series(1, $(( (n + 9999) / 10000 ))) g,
                   LATERAL queue_enqueue_batch('$q', array_fill('$PAYLOAD'::jsonb, ARRAY[least(10000, $n - 10000 * (g - 1))]))" ;;
    # each job's parent is the one before
    chain) sql -c "DO \$\$ DECLARE prev bigint; BEGIN
                   prev := queue_enqueue('$q', '$PAYLOAD');
                   FOR i IN 2..$n LOOP
                       prev := queue_enqueue('$q', '$PAYLOAD', depends_on => ARRAY[prev]);
                   END LOOP; END \$\$" ;;
    # chains of 100 jobs (n / 100 of them), each job's parent the one
    # before in its chain; enqueued a link of every chain at a time
    chains) sql -c "DO \$\$ DECLARE prev bigint[]; BEGIN
                    prev := ARRAY(SELECT queue_enqueue_batch('$q', array_fill('$PAYLOAD'::jsonb, ARRAY[$n / 100])));
                    FOR link IN 2..100 LOOP
                        prev := ARRAY(SELECT queue_enqueue('$q', '$PAYLOAD', depends_on => ARRAY[p]) FROM unnest(prev) p);
                    END LOOP; END \$\$" ;;
    # diamonds of 10,000 jobs (fewer if n is smaller): a root, the middle
    # jobs, each of which depends on the root, and a sink that depends on
    # every middle job
    diamond) sql -c "DO \$\$ DECLARE root bigint; mids bigint[]; size int; left_ int := $n; BEGIN
                     WHILE left_ >= 3 LOOP
                         size := least(left_, 10000);
                         root := queue_enqueue('$q', '$PAYLOAD');
                         mids := ARRAY(SELECT queue_enqueue_batch('$q', array_fill('$PAYLOAD'::jsonb, ARRAY[size - 2]),
                                                                  depends_on => ARRAY[root]));
                         PERFORM queue_enqueue('$q', '$PAYLOAD', depends_on => mids);
                         left_ := left_ - size;
                     END LOOP; END \$\$" ;;
    esac > /dev/null
    sql -c "VACUUM ANALYZE" > /dev/null
    settle
    if ! times=$(drain_times "$q"); then
        note "$item/$side round $r: the worker left jobs undelivered after 10 minutes"; return 1
    fi
    read -r t0 t1 <<< "$times"
    failed=$(sql -c "SELECT failed_total + cancelled FROM queue_stats WHERE queue = '$q'")
    [ "$failed" -eq 0 ] || { note "$item/$side round $r: $failed jobs failed or cancelled"; return 1; }
    rate=$(awk -v n="$n" -v a="$t0" -v b="$t1" 'BEGIN { printf "%d", n / (b - a) + 0.5 }')
    record "$item" "$side" "$r" "$rate"
    say "$item" "$side" "$r" "$rate jobs/s ($n jobs)"
    sql -c "SELECT queue_purge('$q', 'succeeded')" > /dev/null
}

# the Node peers (bench/peers: their versions pinned in package-lock.json)
peers_ready() {
    [ -d bench/peers/node_modules ] && return 0
    npm ci --prefix bench/peers --no-audit --no-fund > "$WORK/npm.out" 2>&1 && return 0
    note "e: npm ci --prefix bench/peers failed: $(tail -1 "$WORK/npm.out")"
    return 1
}
PGBOSS_VERSION=$(sed -n 's/.*"pg-boss": "\(.*\)".*/\1/p' bench/peers/package.json)

# ---------------------------------------------------------------- the main cluster (a-e)
if item a || item b || item c || item d || item e || item g; then
start main "$MAIN_DIR" "$MAIN_PORT" "$CURRENT_PG_CONFIG" $((AWAITERS + 60))
keep_server_log "$OUT/workflows-server.log"
CONNINFO="host=$DIR port=$PORT user=postgres dbname=postgres"
sql > /dev/null <<SQL
SELECT queue_create(q) FROM unnest(ARRAY['rt', 'rts', 'res', 'nores', 'aw', 'enq1', 'plain', 'chain',
                                         'chains', 'diamond', 'fanin', 'fanin_child', 'fanin0', 'fanout',
                                         'fanout_child', 'fanout0']) q;
CREATE FUNCTION public.bench_reply(job jsonb) RETURNS jsonb LANGUAGE sql AS \$\$ SELECT '$RESULT'::jsonb \$\$;
SELECT queue_register_sender('rts', 'public.bench_reply(jsonb)'::regprocedure);
SELECT queue_register_sender(q, 'public.bench_noop(jsonb)'::regprocedure) FROM unnest(ARRAY['plain', 'chain', 'chains', 'diamond']) q;
-- the round trip by hand (a): a plain table of requests, one of results
CREATE TABLE rt_jobs (id bigserial PRIMARY KEY, payload jsonb NOT NULL);
CREATE TABLE rt_results (id bigint PRIMARY KEY, result jsonb NOT NULL);
-- c: which job each awaiting session awaits, and when it woke
CREATE TABLE await_jobs (n int PRIMARY KEY, id bigint NOT NULL);
CREATE UNLOGGED TABLE await_woke (id bigint, status text, at timestamptz);
SQL
fi

# ---------------------------------------------------------------- a: the round trip
roundtrip() {
    local r side pids=()
    target/python/bin/python3 -c "import psycopg" 2> /dev/null || { note "a: no psycopg in target/python (scripts/setup.sh)"; return 1; }
    for kind in wait notify; do
        target/python/bin/python3 bench/workflows/roundtrip.py "$CONNINFO" consumer "$kind" 2>> "$OUT/workflows-errors.log" &
        pids+=($!)
        at_exit "kill ${pids[-1]} 2> /dev/null"
    done
    sleep 1
    for r in $(seq 1 "$ROUNDS"); do
        settle
        if ! target/python/bin/python3 bench/workflows/roundtrip.py "$CONNINFO" client \
                await,await-sender,notify,poll,poll-sender "$TRIPS" > "$WORK/trips" 2>> "$OUT/workflows-errors.log"; then
            note "a round $r: the client failed (bench/results/workflows-errors.log)"; continue
        fi
        for side in await await-sender notify poll poll-sender; do
            awk -v s="$side" '$1 == s { print $2 }' "$WORK/trips" > "$WORK/trips.$side"
            record a-p50 "$side" "$r" "$(percentile 50 < "$WORK/trips.$side")"
            record a-p99 "$side" "$r" "$(percentile 99 < "$WORK/trips.$side")"
            say a "$side" "$r" "p50 $(percentile 50 < "$WORK/trips.$side") ms, p99 $(percentile 99 < "$WORK/trips.$side") ms"
        done
    done
    kill "${pids[@]}" 2> /dev/null || true
    wait "${pids[@]}" 2> /dev/null || true
}
item a && roundtrip

# ---------------------------------------------------------------- b: results
script b_res <<SQL
SELECT coalesce(array_agg(id), '{}') AS ids, coalesce(array_agg(lease), '{}') AS leases FROM queue_claim('res', 'bench', 100) \\gset
SELECT count(*) FROM queue_complete_batch(':ids'::bigint[], ':leases'::uuid[],
                                          array_fill('$RESULT'::jsonb, ARRAY[cardinality(':ids'::bigint[])]));
SQL
script b_nores <<'SQL'
SELECT coalesce(array_agg(id), '{}') AS ids, coalesce(array_agg(lease), '{}') AS leases FROM queue_claim('nores', 'bench', 100) \gset
SELECT count(*) FROM queue_complete_batch(':ids'::bigint[], ':leases'::uuid[]);
SQL
results() {
    local r
    for r in $(seq 1 "$ROUNDS"); do
        claim_round b results b_res res "$r" || true
        claim_round b none b_nores nores "$r" || true
    done
    sql -c "SELECT queue_purge(q) FROM unnest(ARRAY['res', 'nores']) q" > /dev/null
}
item b && results

# ---------------------------------------------------------------- c: many awaiting
script q_enq1 <<SQL
SELECT queue_enqueue('enq1', '$PAYLOAD');
SQL
script awaiter <<'SQL'
SELECT id FROM await_jobs WHERE n = :client_id \gset
CALL queue_await(:id, '10 minutes', NULL, NULL) \gset w_
INSERT INTO await_woke VALUES (:id, ':w_status', clock_timestamp());
SQL
awaiting() {
    local r i pid n t0 t1 woke
    for r in $(seq 1 "$AWAIT_ROUNDS"); do
        rate_round c-enq none q_enq1 1 "$r" || true
        sql -c "TRUNCATE await_jobs, await_woke" \
            -c "INSERT INTO await_jobs SELECT row_number() OVER (ORDER BY id) - 1, id
                FROM queue_enqueue_batch('aw', array_fill('$PAYLOAD'::jsonb, ARRAY[$AWAITERS])) id" > /dev/null
        pgb -c "$AWAITERS" -j "$THREADS" -t 1 -f awaiter.sql > "$WORK/awaiters.out" 2>&1 &
        pid=$!
        for i in $(seq 1 600); do
            n=$(sql -c "SELECT count(*) FROM pg_stat_activity
                        WHERE query LIKE 'CALL queue_await%' AND wait_event_type = 'Extension'")
            [ "$n" -ge "$AWAITERS" ] && break
            sleep 0.1
        done
        [ "$n" -ge "$AWAITERS" ] || note "c round $r: only $n of $AWAITERS sessions awaiting"
        rate_round c-enq awaiting q_enq1 1 "$r" || true
        n=$(sql -c "SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'CALL queue_await%' AND wait_event_type = 'Extension'")
        [ "$n" -ge "$AWAITERS" ] || note "c round $r: $n of $AWAITERS sessions still awaiting after the enqueue round"
        # claimed (committed), then completed in one batch: the commit's
        # start (t0, just before COMMIT) and end (t1, COMMIT returned)
        sql -c "CREATE TEMP TABLE claimed AS SELECT id, lease FROM queue_claim('aw', 'bench', $AWAITERS)" \
            -c "BEGIN" -c "SELECT count(*) FROM queue_complete_batch(ARRAY(SELECT id FROM claimed), ARRAY(SELECT lease FROM claimed),
                                                               array_fill('$RESULT'::jsonb, ARRAY[(SELECT count(*) FROM claimed)::int]))" \
            -c "SELECT extract(epoch FROM clock_timestamp())" -c "COMMIT" \
            -c "SELECT extract(epoch FROM clock_timestamp())" > "$WORK/completer.out"
        read -r _ t0 t1 < <(paste -sd' ' "$WORK/completer.out")
        wait "$pid" || cat "$WORK/awaiters.out" >> "$OUT/workflows-errors.log"
        read -r woke ok early p50 last < <(sql -F ' ' -c "
            SELECT count(*), count(*) FILTER (WHERE status = 'succeeded'),
                   count(*) FILTER (WHERE extract(epoch FROM at) < $t0),
                   round((percentile_disc(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM at)) - $t0)::numeric * 1000, 1),
                   round((max(extract(epoch FROM at)) - $t0)::numeric * 1000, 1)
            FROM await_woke")
        record c-woke succeeded "$r" "$ok"
        record c-early before "$r" "$early"
        record c-p50 wake "$r" "$p50"
        record c-last wake "$r" "$last"
        record c-commit commit "$r" "$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", (b - a) * 1000 }')"
        say c wake "$r" "$woke returned, $ok succeeded, $early before the commit; median $p50 ms, last $last ms after COMMIT was sent (it took $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", (b - a) * 1000 }') ms)"
    done
    sql -c "SELECT queue_purge(q) FROM unnest(ARRAY['enq1', 'aw']) q" > /dev/null
}
item c && awaiting

# ---------------------------------------------------------------- d, e: dependencies
# fan-in: one consumer's claim + complete of one job (the claim aggregates,
# so that an empty queue gives a row rather than aborting the client)
for q in fanin fanin0; do
script "claim1_$q" <<SQL
SELECT coalesce(max(id), 0) AS id, coalesce(max(lease::text), '') AS lease FROM queue_claim('$q', 'bench', 1) \\gset
SELECT queue_complete(:id, nullif(':lease', '')::uuid) WHERE :id <> 0;
SQL
script "claim100_$q" <<SQL
SELECT coalesce(array_agg(id), '{}') AS ids, coalesce(array_agg(lease), '{}') AS leases FROM queue_claim('$q', 'bench', 100) \\gset
SELECT count(*) FROM queue_complete_batch(':ids'::bigint[], ':leases'::uuid[]);
SQL
done
# fanin_round ITEM SIDE ROUND PER: FANIN jobs in fanin (side deps: and one
# child in fanin_child that depends on all of them) or fanin0 (side plain),
# claimed PER at a time and completed by FANIN_CONSUMERS pgbench clients;
# jobs/s from pgbench's start until it exits (each client runs a few
# transactions more than its share, 2 %: those find the queue empty)
fanin_round() {
    local item=$1 side=$2 r=$3 per=$4 q=fanin0 t0 t1 left rate child released
    [ "$side" = deps ] && q=fanin
    sql -c "SELECT count(*) FROM queue_enqueue_batch('$q', array_fill('$PAYLOAD'::jsonb, ARRAY[$FANIN]))" > /dev/null
    if [ "$side" = deps ]; then
        child=$(sql -c "SELECT queue_enqueue('fanin_child', '$PAYLOAD',
                            depends_on => ARRAY(SELECT id FROM queue_live WHERE queue_id = (SELECT id FROM queue_queues WHERE name = 'fanin')))")
    fi
    sql -c "VACUUM ANALYZE" > /dev/null
    settle
    t0=$(now)
    pgb -c "$FANIN_CONSUMERS" -j "$THREADS" -t $(( FANIN / per / FANIN_CONSUMERS * 102 / 100 + 3 )) \
        -f "claim${per}_$q.sql" > "$WORK/fanin.out" 2>&1 || cat "$WORK/fanin.out" >> "$OUT/workflows-errors.log"
    t1=$(now)
    left=$(sql -c "SELECT count(*) FROM queue_live WHERE queue_id = (SELECT id FROM queue_queues WHERE name = '$q')")
    [ "$left" -eq 0 ] || { note "$item/$side round $r: $left parents left unfinished"; sql -c "SELECT queue_purge('$q')" > /dev/null; return 1; }
    rate=$(awk -v n="$FANIN" -v a="$t0" -v b="$t1" 'BEGIN { printf "%d", n / (b - a) + 0.5 }')
    record "$item" "$side" "$r" "$rate"
    if [ "$side" = deps ]; then
        # released once: ready, nothing left to wait for, and one claim of
        # its queue takes it and nothing else
        released=$(sql -c "SELECT waiting_for = 0 AND status = 'pending' FROM queue_job($child)")
        read -r n_claimed claimed_id < <(sql -F ' ' -c "SELECT count(*), max(id) FROM queue_claim('fanin_child', 'bench', 10)")
        if [ "$released" = t ] && [ "$n_claimed" -eq 1 ] && [ "$claimed_id" = "$child" ]; then
            record "$item-once" "$side" "$r" 1
        else
            record "$item-once" "$side" "$r" 0
            note "$item round $r: the child $child: released $released, claims took $n_claimed ($claimed_id)"
        fi
        say "$item" "$side" "$r" "$rate jobs/s; the child released: $released, claimed $n_claimed time(s)"
    else
        say "$item" "$side" "$r" "$rate jobs/s"
    fi
    sql -c "SELECT queue_purge(q) FROM unnest(ARRAY['fanin', 'fanin_child', 'fanin0']) q" > /dev/null
}
# fanout_round ROUND: one parent of FANOUT children (their own queue), and
# a job without children: the time of each one's completion (autocommit:
# the statement and its commit, the children's release in it)
fanout_round() {
    local r=$1 parent lease plain plain_lease t a b c d released
    parent=$(sql -c "SELECT queue_enqueue('fanout', '$PAYLOAD')")
    sql -c "SELECT count(*) FROM queue_enqueue_batch('fanout_child', array_fill('$PAYLOAD'::jsonb, ARRAY[$FANOUT]),
                                                     depends_on => ARRAY[$parent::bigint])" > /dev/null
    plain=$(sql -c "SELECT queue_enqueue('fanout0', '$PAYLOAD')")
    lease=$(sql -c "SELECT lease FROM queue_claim('fanout', 'bench', 1)")
    plain_lease=$(sql -c "SELECT lease FROM queue_claim('fanout0', 'bench', 1)")
    settle
    # (the clock read before and after each completion, in the same session)
    read -r a b c < <(sql -c "SELECT extract(epoch FROM clock_timestamp())" \
        -c "SELECT queue_complete($parent, '$lease')" -c "SELECT extract(epoch FROM clock_timestamp())" \
        -c "SELECT queue_complete($plain, '$plain_lease')" -c "SELECT extract(epoch FROM clock_timestamp())" |
        awk 'NR == 1 { a = $1 } NR == 3 { b = $1 } NR == 5 { c = $1 } END { print a, b, c }')
    d=$c c=$b
    record d-fanout parent "$r" "$(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.1f", (b - a) * 1000 }')"
    record d-fanout plain "$r" "$(awk -v a="$c" -v b="$d" 'BEGIN { printf "%.2f", (b - a) * 1000 }')"
    released=$(sql -c "SELECT count(*) FILTER (WHERE state = 'ready') || ' ' || count(*) FILTER (WHERE state = 'blocked')
                       FROM queue_live WHERE queue_id = (SELECT id FROM queue_queues WHERE name = 'fanout_child')")
    [ "$released" = "$FANOUT 0" ] || note "d-fanout round $r: children ready, blocked: $released"
    say d-fanout parent "$r" "$(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.1f", (b - a) * 1000 }') ms ($released: ready, blocked after); without children $(awk -v a="$c" -v b="$d" 'BEGIN { printf "%.2f", (b - a) * 1000 }') ms"
    sql -c "SELECT queue_purge(q) FROM unnest(ARRAY['fanout', 'fanout_child', 'fanout0']) q" > /dev/null
}
# peer_round ITEM SHAPE ROUND ARGS: one run of bench/peers/flow-pg-boss.mjs in
# the database pgboss (made once)
peer_round() {
    local item=$1 shape=$2 r=$3 out; shift 3
    if ! out=$(node bench/peers/flow-pg-boss.mjs "postgresql://postgres@/pgboss?host=$DIR&port=$PORT" \
            "$shape" "$@" 2>> "$OUT/workflows-errors.log"); then
        note "$item/pgboss round $r: flow-pg-boss.mjs $shape failed (bench/results/workflows-errors.log)"; return 1
    fi
    case $shape in
    chain)
        record "$item" pgboss "$r" "$out"
        say "$item" pgboss "$r" "$out jobs/s" ;;
    fanin)
        read -r completed released children <<< "$out"
        record "$item" pgboss "$r" "$completed"
        record "$item-release" pgboss "$r" "$released"
        record "$item-once" pgboss "$r" "$([ "$children" -eq 1 ] && echo 1 || echo 0)"
        say "$item" pgboss "$r" "$completed jobs/s, $released counting its resolveFlow(); the child fetched $children time(s)" ;;
    esac
}
dependencies() {
    local r boss=
    if item e && peers_ready; then
        boss=1
        sql -c "CREATE DATABASE pgboss" > /dev/null
    fi
    for r in $(seq 1 "$ROUNDS"); do
        if item d && [ "$r" -le "$DRAIN_ROUNDS" ]; then
            drain_round d-drain plain plain "$r" plain "$DRAIN_JOBS" || true
            drain_round d-drain chains chains "$r" chains "$DRAIN_JOBS" || true
            drain_round d-drain diamond diamond "$r" diamond "$DRAIN_JOBS" || true
            drain_round d-chain queue chain "$r" chain "$CHAIN_JOBS" || true
        fi
        if [ -n "$boss" ] && [ "$r" -le "$DRAIN_ROUNDS" ]; then
            settle
            peer_round d-chain chain "$r" "$CHAIN_JOBS" || true
        fi
        if item d; then
            fanin_round d-fanin deps "$r" 1 || true
            fanin_round d-fanin plain "$r" 1 || true
        fi
        if [ -n "$boss" ]; then
            settle
            peer_round d-fanin fanin "$r" "$FANIN" "$FANIN_CONSUMERS" || true
        fi
        if item d; then
            fanin_round d-fanin100 deps "$r" 100 || true
            fanin_round d-fanin100 plain "$r" 100 || true
            fanout_round "$r" || true
        fi
    done
}
if item d || item e; then dependencies; fi

# ---------------------------------------------------------------- g: spans to a dead collector
# g: the worker's drain (d's plain queue) with queue.otlp_endpoint at a
# collector that takes connections and never answers (a socket listening
# that nobody reads), against no collector, rounds taking turns; the spans
# the worker dropped for it are counted in queue_metrics_status()
set_collector() {
    sql -c "ALTER SYSTEM SET queue.otlp_endpoint = '$1'" -c "SELECT pg_reload_conf()" > /dev/null
    sleep 1  # the workers reload at the top of their loops
}
dead_collector() {
    local r hole dropped
    python3 -c 'import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(4096); time.sleep(86400)' \
        "$HOLE_PORT" &
    hole=$!
    for r in $(seq 1 "$DRAIN_ROUNDS"); do
        set_collector ""
        drain_round g none plain "$r" plain "$DRAIN_JOBS" || true
        set_collector "http://127.0.0.1:$HOLE_PORT"
        drain_round g dead plain "$r" plain "$DRAIN_JOBS" || true
    done
    set_collector ""
    dropped=$(sql -c "SELECT spans_dropped FROM queue_metrics_status()")
    echo "g: spans dropped for the collector that never answers, over the rounds: $dropped" >> "$NOTES"
    kill "$hole"
}
if item g; then dead_collector; fi
if item a || item b || item c || item d || item e || item g; then
    main_settings=$(sql -F '=' -c "SELECT name, current_setting(name) FROM pg_settings
        WHERE name IN ('fsync', 'synchronous_commit', 'shared_buffers', 'max_connections', 'queue.max_workers',
                       'queue.max_batch_size', 'shared_preload_libraries') ORDER BY name" | sed 's/=/ = /' | paste -sd ';' | sed 's/;/; /g')
    pg_version=$(sql -c "SELECT version()" | sed 's/ on .*//')
    data_on=$(df -h "$DIR" | awk 'NR == 2 { print $1 }')
    stop main
fi

# ---------------------------------------------------------------- f: without parents, against the baseline
script f_enq1 <<SQL
SELECT queue_enqueue('enq1', '$PAYLOAD');
SQL
script f_enq100 <<SQL
SELECT count(*) FROM queue_enqueue_batch('enq100', array_fill('$PAYLOAD'::jsonb, ARRAY[100]));
SQL
script f_c1 <<'SQL'
SELECT coalesce(max(id), 0) AS id, coalesce(max(lease::text), '') AS lease FROM queue_claim('c1', 'bench', 1) \gset
SELECT queue_complete(:id, nullif(':lease', '')::uuid) WHERE :id <> 0;
SQL
for q in c100 c100a; do
script "f_$q" <<SQL
SELECT coalesce(array_agg(id), '{}') AS ids, coalesce(array_agg(lease), '{}') AS leases FROM queue_claim('$q', 'bench', 100) \\gset
SELECT count(*) FROM queue_complete_batch(':ids'::bigint[], ':leases'::uuid[]);
SQL
done
baseline() {
    local r line build
    start cur "$MAIN_DIR-current" $((MAIN_PORT + 1)) "$CURRENT_PG_CONFIG"
    start base "$MAIN_DIR-baseline" $((MAIN_PORT + 2)) "$BASE_PG_CONFIG"
    for build in cur base; do
        on "$build"
        sql > /dev/null <<SQL
SELECT queue_create(q) FROM unnest(ARRAY['enq1', 'enq100', 'c100a', 'drain']) q;
SELECT queue_create(q, retention => '0') FROM unnest(ARRAY['c1', 'c100']) q;
SELECT queue_register_sender('drain', 'public.bench_noop(jsonb)'::regprocedure);
SQL
    done
    base_version=$(on base; sql -c "SELECT extversion FROM pg_extension WHERE extname = 'queue'")
    cur_version=$(on cur; sql -c "SELECT extversion FROM pg_extension WHERE extname = 'queue'")
    for line in f1 f2 f3 f4 f4a f5; do
        for r in $(seq 1 "$ROUNDS"); do
            for build in cur base; do
                on "$build"
                case $line in
                f1) rate_round f1 "$build" f_enq1 1 "$r" ;;
                f2) rate_round f2 "$build" f_enq100 100 "$r" ;;
                f3) WANT["$DIR:c1"]=${WANT["$DIR:c1"]:-50000}; claim_round f3 "$build" f_c1 c1 "$r" ;;
                f4) claim_round f4 "$build" f_c100 c100 "$r" ;;
                f4a) claim_round f4a "$build" f_c100a c100a "$r" ;;
                f5) [ "$r" -gt "$DRAIN_ROUNDS" ] || drain_round f5 "$build" drain "$r" plain "$DRAIN_JOBS" ;;
                esac || true
            done
        done
        case $line in f1 | f2)
            for build in cur base; do on "$build"; sql -c "SELECT queue_purge(q) FROM unnest(ARRAY['enq1', 'enq100']) q" > /dev/null; done ;;
        esac
    done
    stop cur
    stop base
}
item f && baseline

# ---------------------------------------------------------------- report
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
minutes=$(( ($(date +%s) - t_start + 30) / 60 ))

cell() {  # ITEM SIDE: "median (min–max)"
    local m lo hi
    read -r m lo hi <<< "$(round_stats "$1" "$2")"
    if [ -z "$m" ]; then echo "n/a"; elif [ "$lo" != "$hi" ]; then echo "$(fmt "$m") ($(fmt "$lo")–$(fmt "$hi"))"; else fmt "$m"; fi
}
# num COUNT: thousands separated
num() {
    awk -v x="$1" 'BEGIN { s = sprintf("%.0f", x); out = ""
        while (length(s) > 3) { out = "," substr(s, length(s) - 2) out; s = substr(s, 1, length(s) - 3) }
        print s out }'
}
ratio() { [ -n "$1" ] && [ -n "$2" ] && awk -v a="$1" -v b="$2" 'BEGIN { if (b == 0) print "–"; else printf "%.2f\n", a / b }' || echo "–"; }
# count ITEM SIDE: "sum/rounds" of a check recorded per round as 1 or 0
count() { awk -F, -v i="$1" -v s="$2" '$1 == i && $2 == s { n++; t += $4 } END { if (n) print t "/" n; else print "n/a" }' "$RAW"; }
# row WHAT UNIT ITEM OURS PEER_ITEM PEER GOAL: ours against the peer (for
# latencies, a ratio below 1 is ours ahead)
row() {
    printf "| %s | %s | %s | %s | %s | %s |\n" "$1" "$2" "$(cell "$3" "$4")" "$(cell "$5" "$6")" \
        "$(ratio "$(med "$3" "$4")" "$(med "$5" "$6")")" "$7"
}

tables() {
    if item a || item b || item c || item d || item e; then
        echo "| line | unit | queue | peer | queue/peer | goal |"
        echo "|---|---|---|---|---|---|"
    fi
    if item a; then
        row "a: enqueue + CALL queue_await, a consumer in queue_wait completes; p50 (peer: NOTIFY/LISTEN by hand)" ms a-p50 await a-p50 notify "p50 ≤ 3 ms, below 1"
        row "a: the same, p99 (peer: NOTIFY/LISTEN by hand)" ms a-p99 await a-p99 notify "–"
        row "a: the same, p50 (peer: polling queue_job every 10 ms)" ms a-p50 await a-p50 poll "below 1"
        row "a: the same, p99 (peer: polling queue_job every 10 ms)" ms a-p99 await a-p99 poll "–"
        row "a: enqueue + CALL queue_await, the worker's SQL sender RETURNS jsonb; p50 (peer: NOTIFY/LISTEN by hand)" ms a-p50 await-sender a-p50 notify "p50 ≤ 3 ms, below 1"
        row "a: the same, p99 (peer: NOTIFY/LISTEN by hand)" ms a-p99 await-sender a-p99 notify "–"
        row "a: the same, p50 (peer: polling queue_job every 10 ms, the same sender)" ms a-p50 await-sender a-p50 poll-sender "below 1"
        row "a: the same, p99 (peer: polling every 10 ms, the same sender)" ms a-p99 await-sender a-p99 poll-sender "–"
    fi
    if item b; then
        row "b: claim 100 + queue_complete_batch with a result per job, default retention (peer: without results)" jobs/s b results b none "≥ 0.9"
    fi
    if item c; then
        row "c: enqueue, one job per statement, $(num "$AWAITERS") sessions in CALL queue_await (peer: none awaiting)" jobs/s c-enq awaiting c-enq none "within noise of 1"
    fi
    if item d; then
        row "d: the worker's drain, chains of 100: $(num "$DRAIN_JOBS") jobs, each the child of the one before in its chain (peer: $(num "$DRAIN_JOBS") jobs without parents)" jobs/s d-drain chains d-drain plain "≥ 0.7"
        row "d: the worker's drain, diamonds of 10,000: a root, 9,998 children of it, a child of those (peer: the same)" jobs/s d-drain diamond d-drain plain "≥ 0.7"
        row "d: the worker's drain, one chain of $(num "$CHAIN_JOBS") jobs, each the child of the one before (peer: the same)" jobs/s d-chain queue d-drain plain "≥ 0.7"
        row "d: fan-in, $(num "$FANIN") parents, $FANIN_CONSUMERS consumers, claim 1 + queue_complete, one child (peer: $(num "$FANIN") jobs without a child)" jobs/s d-fanin deps d-fanin plain "≥ 0.8"
        row "d: fan-in, the same with claim 100 + queue_complete_batch (peer: the same without a child)" jobs/s d-fanin100 deps d-fanin100 plain "–"
        row "d: fan-out, the completion of a parent of $(num "$FANOUT") children, its commit releasing them (peer: a job without children)" ms d-fanout parent d-fanout plain "written down"
    fi
    if item e; then
        row "e: a chain of $(num "$CHAIN_JOBS") (peer: pg-boss $PGBOSS_VERSION flow, fetch 100 + complete + resolveFlow() in a loop)" jobs/s d-chain queue d-chain pgboss "–"
        row "e: fan-in as d, claim 1 + complete, the child released in the last commit (peer: pg-boss $PGBOSS_VERSION flow, $FANIN_CONSUMERS loops of fetch 1 + complete)" jobs/s d-fanin deps d-fanin pgboss "–"
        row "e: the same, pg-boss counting its resolveFlow() that releases the child (peer)" jobs/s d-fanin deps d-fanin-release pgboss "–"
    fi
    if item c; then
        echo
        echo "c, $(num "$AWAITERS") sessions in CALL queue_await(id, '10 minutes'), their jobs claimed, then completed by one queue_complete_batch, per round ($AWAIT_ROUNDS): returned with succeeded $(awk -F, '$1 == "c-woke" { printf "%s%s", s, $4; s = ", " }' "$RAW"); returned before the commit $(awk -F, '$1 == "c-early" { printf "%s%s", s, $4; s = ", " }' "$RAW"); from COMMIT sent to the median awaiter's return $(cell c-p50 wake) ms, to the last one's $(cell c-last wake) ms; the COMMIT itself $(cell c-commit commit) ms"
    fi
    if item d || item e; then
        echo
        echo "Released exactly once (the child pending with nothing to wait for, and one claim of its queue takes it alone), rounds: fan-in claim 1 $(count d-fanin-once deps), claim 100 $(count d-fanin100-once deps)$(item e && echo "; pg-boss: the child fetched once $(count d-fanin-once pgboss)")"
    fi
    if item g; then
        echo
        echo "| line | unit | with the collector | without | with/without | goal |"
        echo "|---|---|---|---|---|---|"
        row "g: the worker's drain of $(num "$DRAIN_JOBS") jobs, queue.otlp_endpoint at a collector that never answers (peer: no collector)" jobs/s g dead g none "within noise of 1"
    fi
    if item f; then
        echo
        echo "f: jobs without parents, this build ($cur_version, $(build_of "$CURRENT_PG_CONFIG")) against the baseline ($base_version, $(build_of "$BASE_PG_CONFIG")), a cluster each, rounds taking turns:"
        echo
        echo "| line | unit | this build | baseline | this/baseline |"
        echo "|---|---|---|---|---|"
        local l what
        for l in f1 f2 f3 f4 f4a f5; do
            case $l in
            f1) what="enqueue, one job per statement" ;;
            f2) what="enqueue, batches of 100" ;;
            f3) what="claim + complete, one job per statement, retention 0" ;;
            f4) what="claim 100 + complete the batch, retention 0" ;;
            f4a) what="the same, the default retention (a day of history)" ;;
            f5) what="the worker's drain of $(num "$DRAIN_JOBS") jobs, no-op SQL sender, the default retention" ;;
            esac
            printf "| %s: %s | jobs/s | %s | %s | %s |\n" "$l" "$what" "$(cell "$l" cur)" "$(cell "$l" base)" \
                "$(ratio "$(med "$l" cur)" "$(med "$l" base)")"
        done
    fi
    if [ -s "$NOTES" ]; then
        echo
        echo "Notes of the run:"
        sed 's/^/- /' "$NOTES"
    fi
}
machine() {
    echo "- run: $started, about $minutes minutes; $ROUNDS rounds per line ($AWAIT_ROUNDS for c, $DRAIN_ROUNDS for the drains of d, e and f), pgbench rounds of $SECS s on $CLIENTS connections (-j $THREADS), $TRIPS round trips per side and round in a; median (min–max) of the rounds"
    echo "- machine: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores, $(free -g | awk '/^Mem:/ { print $2 }') GiB memory, $(uname -sr); load average (1, 5, 15 min) before: $load_before, after: $load_after"
    if [ -n "${pg_version:-}" ]; then
        echo "- PostgreSQL: $pg_version, data directory on ${data_on}; queue: $(build_of "$CURRENT_PG_CONFIG"); pg-boss $PGBOSS_VERSION (npm, bench/peers), Node $(node --version 2> /dev/null || echo none), psycopg $(target/python/bin/python3 -c 'import psycopg; print(psycopg.__version__)' 2> /dev/null || echo none)"
        echo "- settings (SHOW) of the cluster of a–e: $main_settings; PostgreSQL's defaults otherwise"
    fi
}

echo
tables | tee "$OUT/workflows-table.md"
if [ -n "$DOC" ]; then
    { echo; machine; echo; tables; echo; } | replace_region "$DOC" workflows-run
    echo "(written to $DOC)"
fi
