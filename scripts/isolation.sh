#!/usr/bin/env bash
# Isolation specs (pg_test/isolation): PostgreSQL's pg_isolation_regress,
# which runs each spec's sessions step by step in the order its permutations
# give and shows where a step waits, on a temporary instance with the
# installed extension preloaded. On a failure the differences are printed
# and kept in pg_test/isolation/results/.
set -euo pipefail
cd "$(dirname "$0")/.."

PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
BIN=$("$PG_CONFIG" --bindir)
ISOLATION=$("$PG_CONFIG" --pkglibdir)/pgxs/src/test/isolation/pg_isolation_regress
PORT=${QUEUE_ISOLATION_PORT:-54392}

as_owner() {
    if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

out=$(mktemp -d /tmp/queue-isolation.XXXXXX)
[ "$(id -u)" -eq 0 ] && chown postgres:postgres "$out"
unset RUST_BACKTRACE RUST_LIB_BACKTRACE

tests=$(sed -e 's/#.*//' -e '/^\s*$/d' pg_test/isolation/schedule)
status=0
as_owner "$ISOLATION" --temp-instance="$out/instance" --temp-config=pg_test/postgresql.conf \
    --port="$PORT" --bindir="$BIN" --inputdir=pg_test/isolation --outputdir="$out" $tests ||
    status=$?

rm -rf pg_test/isolation/results pg_test/isolation/regression.diffs
if [ "$status" -ne 0 ]; then
    [ -f "$out/regression.diffs" ] && cat "$out/regression.diffs"
    cp -r "$out/results" pg_test/isolation/results 2>/dev/null || true
    cp "$out/regression.diffs" pg_test/isolation/ 2>/dev/null || true
fi
rm -rf "$out"
exit "$status"
