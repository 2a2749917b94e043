#!/usr/bin/env bash
# Golden tests of the SQL API (pg_test/): PostgreSQL's pg_regress on a
# temporary instance with the installed extension preloaded. On a failure the
# differences are printed and kept in pg_test/results/.
set -euo pipefail
cd "$(dirname "$0")/.."

PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
BIN=$("$PG_CONFIG" --bindir)
REGRESS=$("$PG_CONFIG" --pkglibdir)/pgxs/src/test/regress/pg_regress
PORT=${QUEUE_REGRESS_PORT:-54391}

as_owner() {
    if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

out=$(mktemp -d /tmp/queue-regress.XXXXXX)
[ "$(id -u)" -eq 0 ] && chown postgres:postgres "$out"
# An error that the extension re-raised through Rust would show a Rust
# backtrace in its DETAIL with this set; none may (utility_errors.sql).
export RUST_BACKTRACE=1
unset RUST_LIB_BACKTRACE

tests=$(sed -e 's/#.*//' -e '/^\s*$/d' pg_test/schedule)
status=0
as_owner "$REGRESS" --temp-instance="$out/instance" --temp-config=pg_test/postgresql.conf \
    --port="$PORT" --bindir="$BIN" --inputdir=pg_test --outputdir="$out" $tests || status=$?

rm -rf pg_test/results pg_test/regression.diffs
if [ "$status" -ne 0 ]; then
    [ -f "$out/regression.diffs" ] && cat "$out/regression.diffs"
    cp -r "$out/results" pg_test/results 2>/dev/null || true
    cp "$out/regression.diffs" pg_test/ 2>/dev/null || true
fi
rm -rf "$out"
exit "$status"
