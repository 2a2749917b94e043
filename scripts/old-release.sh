#!/usr/bin/env bash
# Builds the released 0.1.0 (its library and install script) from its
# commit, once, for the upgrade test: its queue.so goes to
# target/old-release/0.1.0/lib (QUEUE_OLD_LIBDIR for the test), and its
# queue--0.1.0.sql into PostgreSQL's extension directory, where a user who
# installed 0.1.0 has it. Skipped when already built.
set -euo pipefail
cd "$(dirname "$0")/.."

PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
VERSION=0.1.0
COMMIT=2c2c55c   # the 0.1.0 release
OUT=target/old-release/$VERSION
EXTDIR=$("$PG_CONFIG" --sharedir)/extension

if [ ! -f "$OUT/lib/queue.so" ] || [ ! -f "$OUT/queue--$VERSION.sql" ]; then
    tree=$(mktemp -d /tmp/queue-$VERSION.XXXXXX)
    trap 'git worktree remove --force "$tree" 2>/dev/null || rm -rf "$tree"' EXIT
    git worktree add --detach -f "$tree" "$COMMIT" >/dev/null
    # a target directory of its own (kept, so a rebuild is quick): in the
    # main one, its libqueue.so would stand where the current build's goes
    build="$PWD/target/old-release/build"
    (cd "$tree" && CARGO_TARGET_DIR="$build" cargo pgrx package --debug \
        --pg-config "$PG_CONFIG" --out-dir "$tree/package" >/dev/null)
    mkdir -p "$OUT/lib"
    find "$tree/package" -name queue.so -exec cp {} "$OUT/lib/queue.so.new" \;
    mv "$OUT/lib/queue.so.new" "$OUT/lib/queue.so"
    find "$tree/package" -name "queue--$VERSION.sql" -exec cp {} "$OUT/" \;
fi
chmod -R a+rX "$OUT"
install -m 644 "$OUT/queue--$VERSION.sql" "$EXTDIR/queue--$VERSION.sql"
echo "0.1.0 built: $OUT/lib/queue.so, $EXTDIR/queue--$VERSION.sql"
