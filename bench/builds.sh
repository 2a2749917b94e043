# Builds of the extension side by side, for benchmarks that compare two
# builds in one run. Two builds of one extension cannot be installed into one
# PostgreSQL at once, so each goes into a relocated copy of PostgreSQL of its
# own (PostgreSQL's programs, pg_config included, find their share/ and lib/
# relative to where they are, so a copy under a new root keeps working), and
# each runs its own cluster. Neither touches the PostgreSQL that PG_CONFIG
# names, nor a library that a running server has loaded (copied in, then
# renamed over the old one).
#
#   . "$(dirname "$0")/common.sh"
#   . "$(dirname "$0")/builds.sh"
#   pgc=$(build_install worktree /tmp/qbench-pg/current)   # the work tree's release build
#   pgc=$(build_install b65f5e2 /tmp/qbench-pg/baseline)   # a commit's (0.3.0 here)
#   PG_CONFIG=$pgc scripts/cluster.sh start DIR PORT        # a cluster of that build
#
# A commit's release build is kept in QUEUE_RELEASE_CACHE
# (~/.cache/queue-releases, as scripts/old-release.sh keeps its debug builds)
# by commit and PostgreSQL version, so that a second run copies it instead of
# building it again; it is built in a git worktree outside the clone, with a
# cargo target directory of its own (target/old-release/build, kept, so a
# rebuild is quick). The work tree's build is cargo's own, incremental, in
# target/release. Builds run through `cargo pgrx package` against the
# PostgreSQL that PG_CONFIG names (they only read its headers and pg_config),
# each cargo command under a lock (QUEUE_CARGO_LOCK, /tmp/queue-cargo.lock),
# so that two never build at once on a shared machine.

BUILD_PG_CONFIG=${BUILD_PG_CONFIG:-$PG_CONFIG}
RELEASE_CACHE=${QUEUE_RELEASE_CACHE:-$HOME/.cache/queue-releases}
BUILD_PGVERSION=$("$BUILD_PG_CONFIG" --version | tr -c 'A-Za-z0-9.\n' '-')

# cargo_locked ARGS: cargo, one at a time on this machine
cargo_locked() {
    if command -v flock > /dev/null; then
        flock "${QUEUE_CARGO_LOCK:-/tmp/queue-cargo.lock}" cargo "$@"
    else
        cargo "$@"
    fi
}

# pg_copy ROOT: a relocated copy of BUILD_PG_CONFIG's PostgreSQL under ROOT
# (its bin, lib, share and server headers at ROOT followed by their own
# paths), without any build of queue in it; made once per PostgreSQL build
# (ROOT/.copy-of says of which). Prints the copy's pg_config.
pg_copy() {
    local root=$1 d stamp pgc
    stamp="$("$BUILD_PG_CONFIG" --version) $("$BUILD_PG_CONFIG" --bindir)"
    pgc=$root$("$BUILD_PG_CONFIG" --bindir)/pg_config
    if [ "$(cat "$root/.copy-of" 2>/dev/null)" != "$stamp" ]; then
        rm -rf "$root"
        mkdir -p "$root"
        for d in "$("$BUILD_PG_CONFIG" --bindir)" "$("$BUILD_PG_CONFIG" --pkglibdir)" \
                 "$("$BUILD_PG_CONFIG" --sharedir)" "$("$BUILD_PG_CONFIG" --includedir-server)"; do
            [ -e "$root$d" ] && continue
            mkdir -p "$(dirname "$root$d")"
            cp -a "$d" "$root$d"
        done
        rm -f "$root$("$BUILD_PG_CONFIG" --pkglibdir)"/queue.so*
        rm -f "$root$("$BUILD_PG_CONFIG" --sharedir)"/extension/queue[.-]*
        chmod 755 "$root"
        # the copy must say where it is, or its programs would use the original's files
        if [ "$("$pgc" --pkglibdir)" != "$root$("$BUILD_PG_CONFIG" --pkglibdir)" ] ||
           [ "$("$pgc" --sharedir)" != "$root$("$BUILD_PG_CONFIG" --sharedir)" ]; then
            echo "pg_copy: the copy under $root does not relocate (its pg_config says $("$pgc" --pkglibdir))" >&2
            return 1
        fi
        echo "$stamp" > "$root/.copy-of"
    fi
    echo "$pgc"
}

# release_build SPEC: builds the release of SPEC (`worktree`: the work tree
# as it is; else a commit or tag) and prints the directory that holds its
# lib/queue.so and extension/ (queue.control, queue--*.sql). Cargo's output
# goes to stderr.
release_build() {
    local spec=$1 short kept tree stage target=$PWD/target/old-release/build
    if [ "$spec" = worktree ]; then
        stage=${BUILD_STAGE:-/tmp/qbench-pg/stage-worktree}
        rm -rf "$stage"
        cargo_locked pgrx package --pg-config "$BUILD_PG_CONFIG" --out-dir "$stage/package" >&2 || return 1
        _collect_package "$stage/package" "$stage/build" || return 1
        echo "$stage/build"
        return 0
    fi
    short=$(git rev-parse --short "$spec^{commit}") || { echo "release_build: no commit $spec" >&2; return 1; }
    kept=$RELEASE_CACHE/$short-release-$BUILD_PGVERSION
    if [ ! -f "$kept/lib/queue.so" ] || [ ! -f "$kept/extension/queue.control" ]; then
        echo "building the release of $spec ($short) once, kept in $kept" >&2
        tree=$(mktemp -d "/tmp/queue-release-$short.XXXXXX")
        git worktree add --detach -f "$tree" "$short" > /dev/null || return 1
        if ! (cd "$tree" && CARGO_TARGET_DIR="$target" \
                cargo_locked pgrx package --pg-config "$BUILD_PG_CONFIG" --out-dir "$tree/package" >&2); then
            git worktree remove --force "$tree" 2> /dev/null || rm -rf "$tree"
            return 1
        fi
        rm -rf "$kept.new"
        _collect_package "$tree/package" "$kept.new" || return 1
        git worktree remove --force "$tree" 2> /dev/null || rm -rf "$tree"
        git worktree prune
        rm -rf "$kept" && mv "$kept.new" "$kept"
    fi
    echo "$kept"
}

# (cargo pgrx package writes the files under their installed paths)
_collect_package() {
    local package=$1 out=$2 f
    mkdir -p "$out/lib" "$out/extension"
    f=$(find "$package" -name queue.so | head -1)
    [ -n "$f" ] || { echo "release_build: no queue.so in $package" >&2; return 1; }
    cp -p "$f" "$out/lib/queue.so"
    find "$package" -path '*/extension/queue*' \( -name '*.sql' -o -name '*.control' \) -exec cp -p {} "$out/extension/" \;
    [ -f "$out/extension/queue.control" ] || { echo "release_build: no queue.control in $package" >&2; return 1; }
    chmod -R a+rX "$out"
}

# install_build BUILD ROOT: the build (release_build's directory) into the
# copy under ROOT, in place of the one there: the library copied beside the
# old one and renamed over it (a server that has the old one loaded keeps
# it), the extension's scripts replaced. Writes ROOT/.build with BUILD's
# origin (the second argument of build_install).
install_build() {
    local build=$1 root=$2 libdir extdir f
    libdir=$root$("$BUILD_PG_CONFIG" --pkglibdir)
    extdir=$root$("$BUILD_PG_CONFIG" --sharedir)/extension
    cp "$build/lib/queue.so" "$libdir/queue.so.new"
    chmod 755 "$libdir/queue.so.new"
    mv -f "$libdir/queue.so.new" "$libdir/queue.so"
    rm -f "$extdir"/queue[.-]*
    for f in "$build"/extension/*; do install -m 644 "$f" "$extdir/"; done
}

# build_install SPEC ROOT: release_build SPEC, installed into a copy of
# PostgreSQL under ROOT (pg_copy); prints the copy's pg_config. ROOT/.build
# says what was built: the commit and, for the work tree, whether src/ or
# sql/ had uncommitted changes.
build_install() {
    local spec=$1 root=$2 pgc build what
    pgc=$(pg_copy "$root") || return 1
    build=$(release_build "$spec") || return 1
    install_build "$build" "$root" || return 1
    if [ "$spec" = worktree ]; then
        what="commit $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- src sql Cargo.toml || echo ' plus uncommitted changes to src/ or sql/'), the work tree"
    else
        what="commit $(git rev-parse --short "$spec^{commit}")$( (git describe --tags --exact-match "$spec" 2> /dev/null || true) | sed 's/^/, tag /')"
    fi
    echo "$what, release build of $(date -u -r "$build/lib/queue.so" '+%Y-%m-%d %H:%M UTC'), default_version $(sed -n "s/^default_version *= *'\(.*\)'/\1/p" "$build/extension/queue.control")" > "$root/.build"
    echo "$pgc"
}

# build_of PG_CONFIG: what build_install wrote about the build in that copy
build_of() {
    local root=${1%"$("$BUILD_PG_CONFIG" --bindir)/pg_config"}
    cat "$root/.build" 2> /dev/null || echo "unknown build"
}
