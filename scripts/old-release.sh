#!/usr/bin/env bash
# Builds the released 0.1.0, 0.2.0 and 0.3.0 (each its library and install
# script) from their commits, for the upgrade tests: each queue.so goes to
# target/old-release/<version>/lib (QUEUE_OLD_LIBDIR is 0.1.0's, and the
# tests find the others beside it), and each queue--<version>.sql into
# PostgreSQL's extension directory, where a user who installed that release
# has it. A release's build is kept by commit and PostgreSQL version in
# QUEUE_RELEASE_CACHE (~/.cache/queue-releases by default), outside the
# clone, so that a new clone on the same machine copies it instead of
# building it again (a commit's build never changes).
set -euo pipefail
cd "$(dirname "$0")/.."

PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
EXTDIR=$("$PG_CONFIG" --sharedir)/extension
CACHE=${QUEUE_RELEASE_CACHE:-$HOME/.cache/queue-releases}
PGVERSION=$("$PG_CONFIG" --version | tr -c 'A-Za-z0-9.\n' '-')

# VERSION COMMIT: the release's library and install script
build_release() {
    local VERSION=$1 COMMIT=$2
    local OUT=target/old-release/$VERSION
    local KEPT=$CACHE/$COMMIT-$PGVERSION
    if [ ! -f "$KEPT/lib/queue.so" ] || [ ! -f "$KEPT/queue--$VERSION.sql" ]; then
        local tree
        tree=$(mktemp -d /tmp/queue-$VERSION.XXXXXX)
        git worktree add --detach -f "$tree" "$COMMIT" >/dev/null
        # a target directory of its own (kept, so a rebuild is quick): in the
        # main one, its libqueue.so would stand where the current build's goes
        local build="$PWD/target/old-release/build"
        (cd "$tree" && CARGO_TARGET_DIR="$build" cargo pgrx package --debug \
            --pg-config "$PG_CONFIG" --out-dir "$tree/package" >/dev/null)
        rm -rf "$KEPT.new" && mkdir -p "$KEPT.new/lib"
        find "$tree/package" -name queue.so -exec cp {} "$KEPT.new/lib/queue.so" \;
        find "$tree/package" -name "queue--$VERSION.sql" -exec cp {} "$KEPT.new/" \;
        git worktree remove --force "$tree" 2>/dev/null || rm -rf "$tree"
        rm -rf "$KEPT" && mv "$KEPT.new" "$KEPT"
    fi
    mkdir -p "$OUT/lib"
    cp "$KEPT/lib/queue.so" "$OUT/lib/queue.so.new"
    mv "$OUT/lib/queue.so.new" "$OUT/lib/queue.so"
    cp "$KEPT/queue--$VERSION.sql" "$OUT/"
    chmod -R a+rX "$OUT"
    install -m 644 "$OUT/queue--$VERSION.sql" "$EXTDIR/queue--$VERSION.sql"
    echo "$VERSION: $OUT/lib/queue.so, $EXTDIR/queue--$VERSION.sql (built once in $KEPT)"
}

build_release 0.1.0 2c2c55c   # the 0.1.0 release
build_release 0.2.0 2bab97c   # the 0.2.0 release
build_release 0.3.0 b65f5e2   # the 0.3.0 release
