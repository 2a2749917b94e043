#!/usr/bin/env bash
# `make bench-backlog`: how the cost of a claim grows with the backlog. The
# claim + complete of 100 jobs per round trip (compare.sh's item 4: a queue
# with retention 0 against pgmq's read(100) + delete) from a backlog of
# 10,000, 1,000,000 and 10,000,000 due jobs, topped up before every round,
# so that each round starts from the same backlog; a round takes half of it
# at most (at most 100,000 jobs), its rate the jobs taken over its time. Each line against pgmq in
# the same run, and against its own side's smallest backlog (a claim whose
# cost does not grow with the backlog stays near 1.00). A third side, up to
# BENCH_ORDERED_MAX due jobs, runs the same claim + complete on an ordered
# queue whose jobs belong to 10 groups: a claim takes at most one head per
# group, and every job but the heads waits behind one, so its rate stays
# near its smallest backlog's only if a claim does not read the jobs that
# wait. One throwaway cluster; the sides take turns round by round.
# Settings: BENCH_BACKLOGS ("10000 1000000 10000000"), BENCH_ORDERED_MAX
# (1000000), BENCH_ROUNDS (7),
# BENCH_CLIENTS (4), BENCH_DOC (BENCHMARKS.md, its
# backlog-run markers; empty: print only), BENCH_DIR, BENCH_PORT,
# PGMQ_INSTALL (binary).
. "$(dirname "$0")/common.sh"

BACKLOGS=${BENCH_BACKLOGS:-10000 1000000 10000000}
ORDERED_MAX=${BENCH_ORDERED_MAX:-1000000}
ROUNDS=${BENCH_ROUNDS:-7}
CLIENTS=${BENCH_CLIENTS:-4}
DOC=${BENCH_DOC-BENCHMARKS.md}
PGMQ_INSTALL=${PGMQ_INSTALL:-target/debug/pgmq-install}
PAYLOAD='{"to": "ada@example.com", "template": "welcome", "n": 1}'

started=$(date -u '+%Y-%m-%d %H:%M UTC')
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
cluster_start "${BENCH_DIR:-/tmp/qbench/backlog}" "${BENCH_PORT:-54490}"
workdir qbench-backlog
"$PGMQ_INSTALL" "$DIR" "$PORT" > "$WORK/pgmq-version"
sql > /dev/null <<SQL
CREATE EXTENSION queue;
SELECT queue_create('b', retention => '0');
SELECT queue_create('o', retention => '0', ordered => true);
SELECT pgmq.create('b');
SQL
for side in queue:b ordered:o; do
    cat > "$WORK/${side%:*}.sql" <<SQL
SELECT coalesce(array_agg(id), '{}') AS ids, coalesce(array_agg(lease), '{}') AS leases FROM queue_claim('${side#*:}', 'bench', 100) \\gset
SELECT count(*) FROM queue_complete_batch(':ids'::bigint[], ':leases'::uuid[]);
SQL
done
cat > "$WORK/pgmq.sql" <<'SQL'
SELECT coalesce(array_agg(msg_id), '{}') AS ids FROM pgmq.read('b', 30, 100) \gset
SELECT count(*) FROM pgmq.delete('b', ':ids'::bigint[]);
SQL

waiting() {
    case $1 in
    queue) sql -c "SELECT pending FROM queue_stats WHERE queue = 'b'" ;;
    ordered) sql -c "SELECT pending FROM queue_stats WHERE queue = 'o'" ;;
    pgmq) sql -c "SELECT count(*) FROM pgmq.q_b" ;;
    esac
}

# top_up SIDE N: that side's queue holds N due jobs again
top_up() {
    local n chunks
    n=$(( $2 - $(waiting "$1") ))
    [ "$n" -gt 0 ] || return 0
    chunks=$(( (n + 9999) / 10000 ))
    case $1 in
    # (the batch depends on g, or the planner calls the function once)
    queue) sql -c "SELECT count(*) FROM generate_series(1, $chunks) g,
                   LATERAL queue_enqueue_batch('b', array_fill('$PAYLOAD'::jsonb, ARRAY[10000 + 0 * g]))" ;;
    pgmq) sql -c "SELECT count(*) FROM generate_series(1, $chunks) g,
                  LATERAL pgmq.send_batch('b', array_fill('$PAYLOAD'::jsonb, ARRAY[10000 + 0 * g]))" ;;
    ordered) sql -c "SELECT count(*) FROM generate_series(1, $chunks) g,
                     LATERAL queue_enqueue_batch('o', array_fill('$PAYLOAD'::jsonb, ARRAY[10000 + 0 * g]),
                         group_keys => ARRAY(SELECT 'g' || i % 10 FROM generate_series(1, 10000 + 0 * g) i))" ;;
    esac > /dev/null
}

RAW=$WORK/rounds.csv
: > "$RAW"
for backlog in $BACKLOGS; do
    echo "backlog $backlog: filling" >&2
    sides="queue pgmq"
    [ "$backlog" -le "$ORDERED_MAX" ] && sides+=" ordered"
    for side in $sides; do top_up "$side" "$backlog"; done
    sql -c "VACUUM ANALYZE" > /dev/null
    # each round takes at most half the backlog (and at most 100,000 jobs),
    # so that it never runs low
    take=$(( backlog / 2 < 100000 ? backlog / 2 : 100000 ))
    per_client=$(( take / 100 / CLIENTS > 0 ? take / 100 / CLIENTS : 1 ))
    for r in $(seq 1 "$ROUNDS"); do
        for side in $sides; do
            top_up "$side" "$backlog"
            sql -c "CHECKPOINT" > /dev/null
            before=$(waiting "$side")
            # (an ordered claim takes at most one job per group: 10)
            n=$per_client
            [ "$side" = ordered ] && n=$(( per_client * 10 ))
            tps=$(pgb -c "$CLIENTS" -j 2 -t "$n" -f "$side.sql" | awk '/^tps = / { print $3; exit }')
            done_jobs=$(( before - $(waiting "$side") ))
            # jobs taken over the round's time (its transactions / tps)
            rate=$(awk -v n="$done_jobs" -v t="$tps" -v x="$((n * CLIENTS))" 'BEGIN { printf "%.0f", n * t / x }')
            echo "$backlog,$side,$r,$rate" >> "$RAW"
            echo "  backlog $backlog $side round $r: $rate jobs/s" >&2
        done
    done
done

med() { awk -F, -v b="$1" -v s="$2" '$1 == b && $2 == s { print $4 }' "$RAW" | median; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
first=${BACKLOGS%% *}
table=$(
    echo "| due jobs before each round | queue jobs/s | pgmq jobs/s | queue/pgmq | queue / its $first line | pgmq / its $first line | ordered, 10 groups: jobs/s | ordered / its $first line |"
    echo "|---|---|---|---|---|---|---|---|"
    for backlog in $BACKLOGS; do
        q=$(med "$backlog" queue); p=$(med "$backlog" pgmq); o=$(med "$backlog" ordered)
        o_ratio=–
        [ -n "$o" ] && o_ratio=$(ratio "$o" "$(med "$first" ordered)")
        echo "| $backlog | $q | $p | $(ratio "$q" "$p") | $(ratio "$q" "$(med "$first" queue)") | $(ratio "$p" "$(med "$first" pgmq)") | ${o:-–} | $o_ratio |"
    done
)
echo "$table"
if [ -n "$DOC" ]; then
    {
        echo
        echo "- run: $started, $ROUNDS rounds per figure, $CLIENTS connections (pgbench -j 2), medians; $(build_stamp); pgmq $(sed 's/^pgmq //' "$WORK/pgmq-version")"
        echo "- machine: $(nproc) cores; load average before: $load_before, after: $(cut -d' ' -f1-3 /proc/loadavg)"
        echo
        echo "$table"
        echo
    } | replace_region "$DOC" backlog-run
    echo "(written to $DOC)"
fi
