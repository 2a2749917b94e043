# Shared by the bench/ scripts: source it, then call cluster_start.
#   . "$(dirname "$0")/common.sh"
# It moves to the repository root, finds PostgreSQL's binaries and runs the
# registered clean-ups (last registered first) when the script exits.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
BIN=$("$PG_CONFIG" --bindir)

# The library a run measures (make install builds the work tree), and how
# the report names that build.
LIB=$("$PG_CONFIG" --pkglibdir)/queue.so
build_stamp() {
    echo "commit $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- src sql Cargo.toml || echo ' plus uncommitted changes to src/ or sql/'), library installed $(date -u -r "$LIB" '+%Y-%m-%d %H:%M UTC')"
}

_at_exit=()
at_exit() { _at_exit+=("$1"); }
_run_at_exit() {
    local i
    for ((i = ${#_at_exit[@]} - 1; i >= 0; i--)); do eval "${_at_exit[i]}" || true; done
}
trap _run_at_exit EXIT
trap 'exit 130' INT TERM   # so that the EXIT trap stops the cluster

# cluster_start DIR PORT: a fresh throwaway cluster (scripts/cluster.sh, the
# extension preloaded unless QUEUE_PRELOAD= is set), stopped and removed at exit.
# Sets DIR and PORT for sql, pgb and friends.
cluster_start() {
    DIR=$1 PORT=$2
    # never pull a running cluster (another run of the same script) from under its server
    if [ -f "$DIR/data/postmaster.pid" ] && kill -0 "$(head -1 "$DIR/data/postmaster.pid")" 2>/dev/null; then
        echo "$DIR holds a running cluster: another run? (set its directory and port by the environment)" >&2
        exit 1
    fi
    rm -rf "$DIR"
    scripts/cluster.sh start "$DIR" "$PORT"
    at_exit "scripts/cluster.sh stop '$DIR'; rm -rf '$DIR'"
}

# keep_server_log FILE: the server logs every statement of over a second
# with its plan (auto_explain, the extension's nested statements too), lock
# waits and autovacuum, and its log is copied to FILE at exit (before the
# cluster is removed: clean-ups run last registered first). What a stall
# leaves behind.
keep_server_log() {
    at_exit "cp '$DIR/server.log' '$1'"
    sql -c "LOAD 'auto_explain'" -c "ALTER SYSTEM SET session_preload_libraries = 'auto_explain'" \
        -c "ALTER SYSTEM SET auto_explain.log_min_duration = '1s'" \
        -c "ALTER SYSTEM SET auto_explain.log_nested_statements = on" \
        -c "ALTER SYSTEM SET log_min_duration_statement = '1s'" -c "ALTER SYSTEM SET log_lock_waits = on" \
        -c "ALTER SYSTEM SET log_autovacuum_min_duration = 0" -c "SELECT pg_reload_conf()" > /dev/null
}

# workdir NAME: a scratch directory that the server's user can read (for
# script files), removed at exit. Sets WORK.
workdir() {
    WORK=$(mktemp -d "/tmp/$1.XXXXXX")
    chmod 755 "$WORK"
    at_exit "rm -rf '$WORK'"
}

# sql [psql args]: psql on the cluster, unaligned, stopping at the first error.
sql() { "$BIN/psql" -X -q -At -v ON_ERROR_STOP=1 -h "$DIR" -p "$PORT" -U postgres -d "${DB:-postgres}" "$@"; }

# pgb [pgbench args]: pgbench on the cluster, run in $WORK (where -l writes
# its logs), as the caller.
pgb() { (cd "$WORK" && "$BIN/pgbench" -n -h "$DIR" -p "$PORT" -U postgres "$@" "${DB:-postgres}"); }

# median_ms_of_logs: the median latency in ms of the pgbench logs lat* in
# $WORK, which it then removes.
median_ms_of_logs() {
    sort -n -k3 "$WORK"/lat* | awk '{ v[NR] = $3 } END { printf "%.2f", v[int((NR + 1) / 2)] / 1000 }'
    rm -f "$WORK"/lat*
}

# median: the median of the numbers on stdin, one a line (the lower middle
# one for an even count, so it is always a measured value).
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)] }'; }

# percentile P: the P-th percentile (nearest rank) of the numbers on stdin.
percentile() {
    sort -g | awk -v p="$1" '{ v[NR] = $1 } END { if (NR) { i = int(NR * p / 100 + 0.999999); if (i < 1) i = 1; print v[i] } }'
}

# replace_region FILE NAME < CONTENT: replaces what stands between the lines
# <!-- NAME:begin --> and <!-- NAME:end --> of FILE, which keeps the rest
# (the hand-written comments) as it is.
replace_region() {
    local file=$1 name=$2 content
    content=$(mktemp)
    cat > "$content"
    grep -q "^<!-- $name:begin -->" "$file" || { echo "no region $name in $file" >&2; rm -f "$content"; return 1; }
    awk -v begin="<!-- $name:begin -->" -v end="<!-- $name:end -->" -v content="$content" '
        $0 == begin { print; while ((getline line < content) > 0) print line; skip = 1; next }
        $0 == end { skip = 0 }
        !skip { print }' "$file" > "$file.tmp"
    mv "$file.tmp" "$file"
    rm -f "$content"
}

# The rounds a script recorded in $RAW (CSV: item, side, round, value), for
# its report.
# round_stats ITEM SIDE: "median min max" of the recorded rounds, or nothing
round_stats() {
    awk -F, -v i="$1" -v s="$2" '$1 == i && $2 == s { print $4 }' "$RAW" | sort -g |
        awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)], v[1], v[NR] }'
}
# fmt NUMBER: thousands separated above 100, two decimals below
fmt() {
    awk -v x="$1" 'BEGIN {
        if (x == "") { print "n/a"; exit }
        if (x + 0 < 100) { printf "%.2f\n", x; exit }
        s = sprintf("%.0f", x); out = ""
        while (length(s) > 3) { out = "," substr(s, length(s) - 2) out; s = substr(s, 1, length(s) - 3) }
        print s out }'
}
# med ITEM SIDE: the median of the rounds
med() { round_stats "$1" "$2" | cut -d' ' -f1; }

# drain_times QUEUE: resumes the paused QUEUE, then waits (a look every
# 10 ms, each in a transaction of its own) until none of its jobs is
# unfinished; prints the epoch seconds of the resume's commit and of the end,
# or returns 1 after 10 minutes (a sender that fails leaves its jobs
# scheduled for a retry). A transaction per look: one held for the whole
# drain would hold back vacuum, and the worker would rotate the live
# partitions for it (measured: 5,000 jobs/s).
drain_times() {
    local q=$1 t0 t1
    t0=$(sql -c "SELECT queue_resume('$q')" -c "SELECT extract(epoch FROM clock_timestamp())" | tail -1)
    t1=$(sql -c "SET statement_timeout = '10min'" -c "
        DO \$\$
        DECLARE q integer := (SELECT id FROM queue_queues WHERE name = '$q');
        BEGIN
            WHILE EXISTS (SELECT FROM queue_live WHERE queue_id = q AND state = 'ready')
               OR EXISTS (SELECT FROM queue_live WHERE queue_id = q AND state = 'processing')
               OR EXISTS (SELECT FROM queue_live WHERE queue_id = q AND state = 'scheduled')
               OR EXISTS (SELECT FROM queue_live WHERE queue_id = q AND state = 'blocked')
            LOOP
                COMMIT;
                PERFORM pg_sleep(0.01);
            END LOOP;
        END \$\$" -c "SELECT extract(epoch FROM clock_timestamp())" 2>&1 | tail -1) || return 1
    echo "$t0 $t1"
}
