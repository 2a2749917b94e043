#!/usr/bin/env bash
# Builds PostgreSQL 18 from source on Debian 12 (which ships only 15), once.
#
#   Prefix:      /usr/local/pgsql-18   (PG18_PREFIX overrides)
#   pg_config:   /usr/local/pgsql-18/bin/pg_config
#   pg_regress:  $(pg_config --pkglibdir)/pgxs/src/test/regress/pg_regress
#   contrib:     pg_stat_statements, pg_walinspect, auto_explain (the bench uses
#                them), amcheck (the maintenance tests check an index with it)
#   configure:   readline, zlib, ICU; no SSL/NLS/lz4/zstd; -O2, no cassert.
#                The default socket directory of this build is /tmp (Debian's
#                15 uses /var/run/postgresql): give -h / --host explicitly.
#
# The source is Debian unstable's source package postgresql-18, which carries
# the upstream tarball. For it, a deb-src line for sid is added in a file of its
# own, /etc/apt/sources.list.d/queue-sid-src.list, on the mirror this machine's
# own apt sources already use. It is deb-src only (no deb line for sid), so it
# cannot change which binary packages apt installs; it stays, and makes each
# apt-get update fetch sid's source index too. The build dependencies come from
# Debian 12's own packages.
#
# Skipped when pg_config there already says 18.x and pg_regress and the contrib
# modules are installed. Needs root (or sudo). Takes about 3 minutes on 2 cores.
set -euo pipefail

PREFIX=${PG18_PREFIX:-/usr/local/pgsql-18}
WORK=${PG18_WORKDIR:-/var/tmp/queue-pg18-build}
SRC_LIST=/etc/apt/sources.list.d/queue-sid-src.list
CONTRIB=(pg_stat_statements pg_walinspect auto_explain amcheck)
DEPS=(build-essential dpkg-dev perl bison flex pkg-config zlib1g-dev libreadline-dev libicu-dev
      bzip2 xz-utils)
export DEBIAN_FRONTEND=noninteractive
# Started from our Makefile, this script inherits the outer make's state.
# PostgreSQL's makefiles generate their headers (utils/errcodes.h, ...) only in
# the outermost make (MAKELEVEL 0), and MAKEFLAGS would hand its build the
# outer make's flags and jobserver: its build must start as if from a shell.
unset MAKELEVEL MAKEFLAGS MFLAGS MAKEOVERRIDES GNUMAKEFLAGS
APT=(apt-get -q -o DPkg::Lock::Timeout=600)

sudo_if_needed() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

installed() {
    local pg_config=$PREFIX/bin/pg_config pkglibdir m
    "$pg_config" --version 2>/dev/null | grep -Eq '^PostgreSQL 18(\.|beta|rc)' || return 1
    pkglibdir=$("$pg_config" --pkglibdir)
    [ -x "$pkglibdir/pgxs/src/test/regress/pg_regress" ] || return 1
    for m in "${CONTRIB[@]}"; do [ -f "$pkglibdir/$m.so" ] || return 1; done
}

if installed; then
    echo "PostgreSQL 18 already in $PREFIX ($("$PREFIX/bin/pg_config" --version)): skipped"
    exit 0
fi
start=$SECONDS

# The Debian mirror that the machine's apt sources name for its own release
# with component main (not -security, not third-party repositories): first
# from one-line .list
# files, then from deb822 .sources files. Prints "URI SIGNED-BY" (SIGNED-BY
# may be empty: it is kept only when it names a key file).
find_mirror() {
    local codename files=()
    codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
    [ -n "$codename" ] || { echo "no VERSION_CODENAME in /etc/os-release" >&2; return 1; }
    [ -f /etc/apt/sources.list ] && files+=(/etc/apt/sources.list)
    for f in /etc/apt/sources.list.d/*.list; do
        [ -f "$f" ] && [ "$f" != "$SRC_LIST" ] && files+=("$f")
    done
    if [ ${#files[@]} -gt 0 ]; then
        awk -v cn="$codename" '
            /^[ \t]*#/ { next }
            $1 == "deb" || $1 == "deb-src" {
                i = 2; sb = ""
                if ($i ~ /^\[/) {
                    while (i <= NF) {
                        if ($i ~ /^\[?signed-by=/) { sb = $i; sub(/^\[?signed-by=/, "", sb); sub(/\]$/, "", sb) }
                        if ($i ~ /\]$/) break
                        i++
                    }
                    i++
                }
                uri = $i; suite = $(i + 1); main = 0
                for (j = i + 2; j <= NF; j++) if ($j == "main") main = 1
                if ((suite == cn || suite == cn "-updates") && main && uri ~ /^https?:\/\// && uri !~ /security/) {
                    print uri, sb; exit
                }
            }' "${files[@]}"
    fi | head -n1 | grep . && return 0
    files=()
    for f in /etc/apt/sources.list.d/*.sources; do [ -f "$f" ] && files+=("$f"); done
    [ ${#files[@]} -gt 0 ] || return 1
    # One stanza per paragraph; a field's value may continue on indented lines.
    awk -v cn="$codename" '
        function flush() {
            if (enabled !~ /^(no|false)$/ && types ~ /(^| )deb( |$)|deb-src/ &&
                (" " suites " ") ~ (" " cn "(-updates)? ") && (" " comps " ") ~ / main / && uri ~ /^https?:\/\// && uri !~ /security/) {
                if (sb !~ /^\//) sb = ""
                print uri, sb; found = 1; exit
            }
            types = suites = comps = uri = sb = enabled = ""
        }
        FNR == 1 && NR > 1 { flush() }
        /^[ \t]*#/ { next }
        /^[ \t]*$/ { flush(); next }
        /^[ \t]/ { next }
        {
            key = tolower($1); val = $0; sub(/^[^:]*:[ \t]*/, "", val)
            if (key == "types:") types = val
            else if (key == "suites:") suites = val
            else if (key == "components:") comps = val
            else if (key == "uris:") { split(val, u, /[ \t]+/); uri = u[1] }
            else if (key == "signed-by:") sb = val
            else if (key == "enabled:") enabled = tolower(val)
        }
        END { if (!found) flush() }' "${files[@]}" | head -n1 | grep .
}

if ! read -r mirror signed_by < <(find_mirror); then
    echo "no Debian mirror found in /etc/apt/sources.list or /etc/apt/sources.list.d/" >&2
    exit 1
fi
mirror=${mirror%/}
line="deb-src $mirror sid main"
[ -n "$signed_by" ] && line="deb-src [signed-by=$signed_by] $mirror sid main"
if [ "$(cat "$SRC_LIST" 2>/dev/null)" != "$line" ]; then
    echo "adding to $SRC_LIST: $line"
    printf '%s\n' "$line" | sudo_if_needed tee "$SRC_LIST" >/dev/null
fi

sudo_if_needed "${APT[@]}" update
missing=()
for p in "${DEPS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "installing ${missing[*]}"
    sudo_if_needed "${APT[@]}" install -y --no-install-recommends "${missing[@]}"
fi

sudo_if_needed rm -rf "$WORK"
sudo_if_needed install -d -m 0755 "$WORK"
# apt downloads as _apt where it can write (else "unsandboxed as root").
id _apt >/dev/null 2>&1 && sudo_if_needed chown _apt "$WORK"
cd "$WORK"
sudo_if_needed "${APT[@]}" source --download-only postgresql-18
shopt -s nullglob
tarballs=(postgresql-18_18.*.orig.tar.*)
shopt -u nullglob
case ${#tarballs[@]} in
0) echo "no postgresql-18_18.*.orig.tar.* in $WORK: $(ls)" >&2; exit 1 ;;
1) ;;
*) echo "several upstream tarballs in $WORK: ${tarballs[*]}" >&2; exit 1 ;;
esac
tarball=${tarballs[0]}
echo "unpacking $tarball"
sudo_if_needed tar -xf "$tarball"
version=${tarball#postgresql-18_}
version=${version%%.orig.tar.*}
srcdir=postgresql-$version
[ -f "$srcdir/configure" ] || { echo "no configure in $WORK/$srcdir" >&2; exit 1; }

cd "$srcdir"
# Installed files: root's, world-readable (umask 022), so that the postgres
# user that runs the test clusters can read and execute them.
sudo_if_needed sh -c "umask 022 && ./configure --prefix='$PREFIX' --with-readline --with-icu > configure.log 2>&1" ||
    { tail -n 30 configure.log >&2; exit 1; }
echo "configured ($((SECONDS - start)) s); building with make -j2"
sudo_if_needed sh -c "umask 022 && make -j2 -s > make.log 2>&1" || { tail -n 40 make.log >&2; exit 1; }
for m in "${CONTRIB[@]}"; do
    sudo_if_needed sh -c "umask 022 && make -j2 -s -C contrib/$m >> make.log 2>&1" || { tail -n 40 make.log >&2; exit 1; }
done
echo "built ($((SECONDS - start)) s); installing in $PREFIX"
sudo_if_needed sh -c "umask 022 && make -s install > install.log 2>&1" || { tail -n 40 install.log >&2; exit 1; }
for m in "${CONTRIB[@]}"; do
    sudo_if_needed sh -c "umask 022 && make -s -C contrib/$m install >> install.log 2>&1" || { tail -n 40 install.log >&2; exit 1; }
done
pkglibdir=$("$PREFIX/bin/pg_config" --pkglibdir)
if [ ! -x "$pkglibdir/pgxs/src/test/regress/pg_regress" ]; then
    sudo_if_needed sh -c "umask 022 && make -s -C src/test/regress install >> install.log 2>&1"
fi
sudo_if_needed chown -R root:root "$PREFIX"
sudo_if_needed chmod -R u+rwX,go+rX,go-w "$PREFIX"

cd /
sudo_if_needed rm -rf "$WORK"
if ! installed; then
    echo "PostgreSQL 18 install in $PREFIX is incomplete" >&2
    exit 1
fi
if id postgres >/dev/null 2>&1; then
    sudo_if_needed runuser -u postgres -- "$PREFIX/bin/postgres" --version >/dev/null ||
        { echo "the postgres user cannot run $PREFIX/bin/postgres" >&2; exit 1; }
fi
elapsed=$((SECONDS - start))
echo "PostgreSQL $("$PREFIX/bin/pg_config" --version | sed 's/^PostgreSQL //') installed in $PREFIX in $((elapsed / 60)) min $((elapsed % 60)) s"
