#!/usr/bin/env bash
# Builds the released 0.1.0 and 0.2.0 (each its library and install script)
# from their commits, once, for the upgrade tests: each queue.so goes to
# target/old-release/<version>/lib (QUEUE_OLD_LIBDIR is 0.1.0's, and the
# tests find 0.2.0's beside it), and each queue--<version>.sql into
# PostgreSQL's extension directory, where a user who installed that release
# has it. Each is skipped when already built.
set -euo pipefail
cd "$(dirname "$0")/.."

PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
EXTDIR=$("$PG_CONFIG" --sharedir)/extension

# VERSION COMMIT: the release's library and install script
build_release() {
    local VERSION=$1 COMMIT=$2
    local OUT=target/old-release/$VERSION
    if [ ! -f "$OUT/lib/queue.so" ] || [ ! -f "$OUT/queue--$VERSION.sql" ]; then
        local tree
        tree=$(mktemp -d /tmp/queue-$VERSION.XXXXXX)
        git worktree add --detach -f "$tree" "$COMMIT" >/dev/null
        # a target directory of its own (kept, so a rebuild is quick): in the
        # main one, its libqueue.so would stand where the current build's goes
        local build="$PWD/target/old-release/build"
        (cd "$tree" && CARGO_TARGET_DIR="$build" cargo pgrx package --debug \
            --pg-config "$PG_CONFIG" --out-dir "$tree/package" >/dev/null)
        mkdir -p "$OUT/lib"
        find "$tree/package" -name queue.so -exec cp {} "$OUT/lib/queue.so.new" \;
        mv "$OUT/lib/queue.so.new" "$OUT/lib/queue.so"
        find "$tree/package" -name "queue--$VERSION.sql" -exec cp {} "$OUT/" \;
        git worktree remove --force "$tree" 2>/dev/null || rm -rf "$tree"
    fi
    chmod -R a+rX "$OUT"
    install -m 644 "$OUT/queue--$VERSION.sql" "$EXTDIR/queue--$VERSION.sql"
    echo "$VERSION built: $OUT/lib/queue.so, $EXTDIR/queue--$VERSION.sql"
}

build_release 0.1.0 2c2c55c   # the 0.1.0 release
build_release 0.2.0 2bab97c   # the 0.2.0 release
